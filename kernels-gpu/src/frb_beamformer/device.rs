//! The family's entry points (all but the resampler's), made from the instance list
//! `frb_instances!` in `mod.rs`, which also makes their registry entries.
use super::even_odd::frb_beamform_eo;
use super::factorized::factorized;
use super::first_kernel::frb_beamform;
use super::quantize::quantize;
use super::short_fft::{direct_batch, direct_loop, fft_batch, fft_loop};
use super::*;

macro_rules! frb_entries {
    (
        first: [$(($name:ident, $d:literal, $m:literal, $n:literal, $tb:literal, $f16_sum:literal, $cap:expr)),* $(,)?],
        even_odd: $eo:ident,
        fft: [$(($fn:literal, $fbatch:ident, $floop:ident)),* $(,)?],
        direct: [$(($dn:literal, $dbatch:ident, $dloop:ident)),* $(,)?],
        factorized: [$(($xname:ident, $xm:literal, $xn:literal)),* $(,)?],
        quantize: [$(($qname:ident, $qformat:ident, $q4:literal)),* $(,)?] $(,)?
    ) => {
        $(first_entry!($name, $d, $m, $n, $tb, $f16_sum);)*
        even_odd_entry!($eo);
        $(fft_entries!($fn, $fbatch, $floop);)*
        $(direct_entries!($dn, $dbatch, $dloop);)*
        $(factorized_entry!($xname, $xm, $xn);)*
        $(quantize_entry!($qname, $q4);)*
    };
}

macro_rules! first_entry {
    ($name:ident, $d:literal, $m:literal, $n:literal, $tb:literal, $f16_sum:literal) => {
        /// The straightforward first FRB kernel for this case: see `frb_beamform`.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $name(
            e: *const u8,
            weights: *const u32,
            grid: *const u32,
            gammas_m: *const u32,
            gammas_n: *const u32,
            out: *mut u16,
            freqs: u32,
            times: u32,
            t_ds: u32,
            tbar_per_block: u32,
        ) {
            const CASE: FrbCase = match frb_case($d, $m, $n) {
                Some(c) => c,
                None => panic!("not a Table 2 case"),
            };
            const CALLS: usize = frb_second_fft_calls(&CASE) as usize;
            const _: () = assert!(CALLS <= 6 && $tb <= 8 && 2 * $d <= 4 * FRB_THREADS);
            const GS: u32 = frb_g_row_words(&CASE);
            const U: usize = frb_first_fft_unroll(&CASE) as usize;
            frb_beamform::<$d, $m, $n, $tb, CALLS, GS, U, $f16_sum>(
                e,
                weights,
                grid,
                gammas_m,
                gammas_n,
                out,
                freqs,
                times,
                t_ds,
                tbar_per_block,
            );
        }
    };
}

macro_rules! even_odd_entry {
    ($name:ident) => {
        /// Full CHORD's first FRB kernel for T_ds <= 96, even/odd direct DFT: see
        /// `frb_beamform_eo` (the same arguments as the other first FRB kernels; `gammas_m`
        /// holds the even/odd image, `gammas_n` is unused).
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $name(
            e: *const u8,
            weights: *const u32,
            grid: *const u32,
            gammas_m: *const u32,
            _gammas_n: *const u32,
            out: *mut u16,
            freqs: u32,
            times: u32,
            t_ds: u32,
            tbar_per_block: u32,
        ) {
            frb_beamform_eo(e, weights, grid, gammas_m, out, freqs, times, t_ds, tbar_per_block);
        }
    };
}

macro_rules! fft_entries {
    ($n:literal, $batch:ident, $looped:ident) => {
        /// Test kernel for N = $n: see `fft_batch`.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $batch(gammas: *const u32, x: *const u32, y: *mut u32, batch: u32) {
            fft_batch::<$n>(gammas, x, y, batch);
        }
        /// Benchmark kernel for N = $n: see `fft_loop`.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $looped(
            gammas: *const u32,
            x: *const u32,
            y: *mut u32,
            iterations: u32,
            salt: u32,
        ) {
            fft_loop::<$n>(gammas, x, y, iterations, salt);
        }
    };
}

macro_rules! direct_entries {
    ($n:literal, $batch:ident, $looped:ident) => {
        /// Test kernel of the direct DFT for N = $n: see `direct_batch`.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $batch(image: *const u32, x: *const u32, y: *mut u32, batch: u32) {
            direct_batch::<$n>(image, x, y, batch);
        }
        /// Benchmark kernel of the direct DFT for N = $n: see `direct_loop`.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $looped(
            image: *const u32,
            x: *const u32,
            y: *mut u32,
            iterations: u32,
            salt: u32,
        ) {
            direct_loop::<$n>(image, x, y, iterations, salt);
        }
    };
}

macro_rules! factorized_entry {
    ($name:ident, $m:literal, $n:literal) => {
        /// Factorized resampling for (M, N) = the suffix; see `factorized`.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            intensity: *const u16,
            um: *const u16,
            un: *const u16,
            out: *mut u16,
            times: u32,
            g: u32,
            g_prime: u32,
        ) {
            factorized::<$m, $n>(intensity, um, un, out, times, g, g_prime)
        }
    };
}

macro_rules! quantize_entry {
    ($name:ident, $u4:literal) => {
        /// The quantiser for this code width; see `quantize`.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $name(
            j: *const u16,
            scale: *const f32,
            offset: *const f32,
            out: *mut u8,
            saturated: *mut u32,
            times: u32,
            beams: u32,
            row_bytes: u32,
        ) {
            quantize::<$u4>(j, scale, offset, out, saturated, times, beams, row_bytes)
        }
    };
}

frb_instances!(frb_entries);
