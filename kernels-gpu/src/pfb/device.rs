//! The PFB entry points, generated from the family's instance list ([`super::pfb_instances`])
//! as the registry is: the FIR and post kernels in the sm_80 module, the cluster kernels in
//! the sm_90a one. Their parameters and launch shapes are documented on each.
#![cfg(target_arch = "nvptx64")]

#[cfg(not(radio_sm90a))]
use super::*;

macro_rules! pfb_entries {
    (
        fir: [$(($fir:ident, $fir_taps:literal)),* $(,)?],
        post: [$(($post:ident, $post_int4:literal)),* $(,)?],
        cluster: [$(($cl:ident, $cl_taps:literal, $cl_int4:literal)),* $(,)?] $(,)?
    ) => {
        $(#[cfg(not(radio_sm90a))] fir_kernel!($fir, $fir_taps);)*
        $(#[cfg(not(radio_sm90a))] post_kernel!($post, $post_int4);)*
        $(#[cfg(radio_sm90a)] cluster_kernel!($cl, $cl_taps, $cl_int4);)*
    };
}

#[cfg(not(radio_sm90a))]
macro_rules! fir_kernel {
    ($name:ident, $tv:literal) => {
        /// The FIR (module documentation, `fir::fir`). 1-D blocks of `fir_block_width(n)`
        /// threads over `channels * ceil(spectra / per_thread)` threads (x) and 2
        /// polarisations (y); `fir_shared_bytes(bits, width, TV)` bytes of dynamic shared
        /// memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            input0: *const u32,
            input1: *const u32,
            offsets: *const u32,
            weights: *const f32,
            out: *mut [f32; 2],
            channels: u32,
            taps: u32,
            spectra: u32,
            per_thread: u32,
            bits: u32,
        ) {
            let inputs = [input0, input1];
            if fir_warp_rows($tv) {
                super::fir::fir_rw::<$tv, { fir_batch($tv) as usize }, { FIR_STAGES as usize }>(
                    inputs, offsets, weights, out, channels, taps, spectra, per_thread, bits,
                );
            } else {
                super::fir::fir::<$tv, { fir_batch($tv) as usize }, { FIR_STAGES as usize }>(
                    inputs, offsets, weights, out, channels, taps, spectra, per_thread, bits,
                );
            }
        }
    };
}

#[cfg(not(radio_sm90a))]
macro_rules! post_kernel {
    ($name:ident, $int4:literal) => {
        /// The post-processing (module documentation; int4 output when the name says ci4).
        /// 1-D blocks of `THREADS` threads, `post_blocks(n, spectra, tile_log2)` blocks;
        /// `POST_SHARED_BYTES` bytes of dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            fft: *const [f32; 2],
            gains: *const [f32; 2],
            fine: *const f32,
            rotation: *const [f32; 4],
            out: *mut u32,
            saturated: *mut u32,
            channels: u32,
            spectra: u32,
            spectra_per_heap: u32,
            tile_log2: u32,
        ) {
            super::post::post::<$int4>(
                fft,
                gains,
                fine,
                rotation,
                out,
                saturated,
                channels,
                spectra,
                spectra_per_heap,
                tile_log2,
            );
        }
    };
}

#[cfg(radio_sm90a)]
macro_rules! cluster_kernel {
    ($name:ident, $tv:literal, $int4:literal) => {
        /// The cluster kernel ([`super::cluster`]). `4 x clusters` blocks of
        /// `CLUSTER_BLOCK_THREADS` in clusters of 4; `cluster_shared_bytes(bits)` bytes of
        /// dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            input0: *const u32,
            input1: *const u32,
            offsets: *const u32,
            weights: *const f32,
            twiddles: *const [f32; 2],
            gains: *const [f32; 2],
            fine: *const f32,
            rotation: *const [f32; 4],
            out: *mut u32,
            saturated: *mut u32,
            taps: u32,
            spectra: u32,
            spectra_per_heap: u32,
            bits: u32,
            run: u32,
        ) {
            use super::cluster::device::{cluster_pfb, Args};
            cluster_pfb::<$tv, $int4>(&Args {
                inputs: [input0, input1],
                offsets,
                weights,
                twiddles,
                gains,
                fine,
                rotation,
                out,
                saturated,
                taps,
                spectra,
                spectra_per_heap,
                bits,
                run,
            });
        }
    };
}

super::pfb_instances!(pfb_entries);
