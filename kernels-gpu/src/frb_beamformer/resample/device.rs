//! The entry points, made from the instance list ([`resample_instances!`]) with the
//! registry: each `extern "ptx-kernel"` function only calls its schedule's kernel (sm_80
//! kernels into the sm_80 module, `wgmma` ones into the sm_90a module).
#![allow(clippy::too_many_arguments)]

#[cfg(not(radio_sm90a))]
use super::ampere;
#[cfg(radio_sm90a)]
use super::hopper::{fused::fused_rs, gemm};
#[allow(unused_imports)]
use super::*;
#[cfg(radio_sm90a)]
use crate::wgmma::{mma_rs_m64n184k16_f32_f16, mma_rs_m64n232k16_f32_f16, mma_rs_m64n248k16_f32_f16};

/// An sm_80 entry point by its tag.
macro_rules! sm80_entry {
    (weights, $name:ident) => {
        /// W for one beam per warp (`ampere::weights_kernel`).
        #[cfg(not(radio_sm90a))]
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            theta: *const f32,
            theta_prime: *const f32,
            weights: *mut u16,
            beams: u32,
            m: u32,
            n: u32,
            rejected: *mut u32,
        ) {
            ampere::weights_kernel(theta, theta_prime, weights, beams, m, n, rejected)
        }
    };
    (u, $name:ident) => {
        /// U^M and U^N for the fused GEMM (`ampere::u_kernel`).
        #[cfg(not(radio_sm90a))]
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            theta: *const f32,
            theta_prime: *const f32,
            u_m: *mut f32,
            u_n: *mut f32,
            beams: u32,
            m: u32,
            n: u32,
            rejected: *mut u32,
        ) {
            ampere::u_kernel(theta, theta_prime, u_m, u_n, beams, m, n, rejected)
        }
    };
    (gemm, $name:ident) => {
        /// `J = I W` with the [`GEMM`] tiling (`ampere::gemm_kernel`).
        #[cfg(not(radio_sm90a))]
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            intensity: *const u16,
            weights: *const u16,
            out: *mut u16,
            times: u32,
            beams: u32,
            k: u32,
        ) {
            ampere::gemm_kernel(intensity, weights, out, times, beams, k)
        }
    };
    (fused, $name:ident) => {
        /// `J = I W` with W formed in shared memory from U (`frb_resample_u`'s layout) instead
        /// of read from device memory; [`GEMM`] grid and threads, [`fused_smem_bytes`]`(m, n)`
        /// of dynamic shared memory. `k` = 4MN.
        #[cfg(not(radio_sm90a))]
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            intensity: *const u16,
            u_m: *const f32,
            u_n: *const f32,
            out: *mut u16,
            times: u32,
            beams: u32,
            m: u32,
            n: u32,
        ) {
            const G: GemmShape = GEMM;
            ampere::gemm::<
                { G.mt as usize },
                { G.nt as usize },
                { G.wr },
                { G.wc },
                { G.bk },
                { G.stages },
                true,
            >(intensity, core::ptr::null(), (u_m, u_n, m, n), out, times, beams, 4 * m * n)
        }
    };
}

/// A `wgmma` W-path GEMM entry point by its warpgroups (2: `gemm`, 3: `gemm_wide`).
macro_rules! wgmma_entry {
    (2, $name:ident) => {
        /// `J = I W` on sm_90a: [`HOPPER_THREADS`] threads, [`hopper_smem_bytes`] of dynamic
        /// shared memory, grid x = tbar tiles of [`HOPPER_BM`], y = beam tiles of
        /// [`HOPPER_BN`], z = channels. `k` = 4MN.
        #[cfg(radio_sm90a)]
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            intensity: *const u16,
            weights: *const u16,
            out: *mut u16,
            times: u32,
            beams: u32,
            k: u32,
        ) {
            gemm::gemm::<HOPPER_STAGES>(intensity, weights, out, times, beams, k)
        }
    };
    (3, $name:ident) => {
        /// `J = I W` on sm_90a with 192 x 256 tiles: [`WIDE_THREADS`] threads,
        /// [`wide_smem_bytes`] of dynamic shared memory, grid x = tbar tiles of [`WIDE_BM`].
        #[cfg(radio_sm90a)]
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            intensity: *const u16,
            weights: *const u16,
            out: *mut u16,
            times: u32,
            beams: u32,
            k: u32,
        ) {
            gemm::gemm_wide::<WIDE_STAGES, WIDE_WARPGROUPS>(intensity, weights, out, times, beams, k)
        }
    };
}

/// A transposed fused kernel's entry point: the `tma` and `res` forms take the tensor maps
/// as their last argument.
macro_rules! rs_entry {
    (cp, $name:ident, $wg:literal, $nt:literal, $m:literal, $n:literal, $s:literal, $mma:ident) => {
        rs_entry!(@entry $name, $wg, $nt, $m, $n, $s, $mma, cp,);
    };
    (@entry $name:ident, $wg:literal, $nt:literal, $m:literal, $n:literal, $s:literal, $mma:ident,
     $form:ident, $($maps:ident: $maps_type:ty)?) => {
        /// The transposed fused GEMM ([`RS_KERNELS`]): `J = I W` with W^T formed in
        /// registers; [`RsKernel::threads`] threads, [`RsKernel::smem_bytes`] of dynamic
        /// shared memory. The TMA and resident instances ([`RsKernel::tma`],
        /// [`RsKernel::resident`]) take one more argument: the tensor maps of I and of J
        /// (two `CUtensorMap`s in device memory, 64-byte aligned, written before the
        /// launch; J's used only where `beams` is a multiple of 8).
        #[cfg(radio_sm90a)]
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            intensity: *const u16,
            u_m: *const f32,
            u_n: *const f32,
            out: *mut u16,
            times: u32,
            beams: u32,
            channels: u32,
            $($maps: $maps_type)?
        ) {
            fused_rs::<$wg, $nt, $m, $n, $s, { $nt / 2 }, { rs_form!($form).0 }, { rs_form!($form).1 }>(
                intensity,
                u_m,
                u_n,
                out,
                (times, beams, channels),
                0 $(+ $maps as u64)?,
                |d, a, b| $mma(d, a, b, true),
            )
        }
    };
    ($form:ident, $name:ident, $wg:literal, $nt:literal, $m:literal, $n:literal, $s:literal, $mma:ident) => {
        rs_entry!(@entry $name, $wg, $nt, $m, $n, $s, $mma, $form, tensor_maps: *const u8);
    };
}

macro_rules! resample_entries {
    (
        sm80: [$(($sm80:ident, $sm80_name:ident, $role:ident)),* $(,)?],
        wgmma: [$(($wgmma:ident, $wgmma_name:ident, $wg_gemm:tt)),* $(,)?],
        transposed: [$(($rs:ident, $wg:literal, $nt:literal, $m:literal, $n:literal, $s:literal, $mma:ident, $form:ident)),* $(,)?] $(,)?
    ) => {
        $( sm80_entry!($role, $sm80_name); )*
        $( wgmma_entry!($wg_gemm, $wgmma_name); )*
        $( rs_entry!($form, $rs, $wg, $nt, $m, $n, $s, $mma); )*
    };
}
resample_instances!(resample_entries);
