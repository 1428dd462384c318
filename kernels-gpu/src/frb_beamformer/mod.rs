//! FRB beamformer (K. Smith, "CHORD FRB beamformer", CHORD design note, 2022; "the note"): the
//! tensor-core short FFT (sec. 3), the
//! first kernel (sec. 4), the resampling to beams (sec. 5, [`resample`], [`factorized`]) and
//! the quantiser ([`quantize`]).
//!
//! Short FFT (sec. 3, eqs. 18-47, App. B.1 notation, App. C f16 MMAs incl. C.3 sparse
//! `mma.sp` with the universal metadata of eqs. 171-173). One warp computes `2^(5-r)`
//! independent zero-padded c2c f16 FFTs (spectator index s), `r = ceil(log2 N)`, for N in
//! {8, 12, 16, 20, 24, 28, 32}: `Y_q = sum_{n<N} X_n exp(2 pi i n q / 2N)`, 0 <= q < 2N
//! (eq. 18). With `n = (N/4) c + d` and `q = 8u + v` (eqs. 21-22, d and u zero-padded to
//! `2^(r-2)`), eqs. 28-30: `Z_dvs = sum_c G1_cv X_cds` (m16n8k8), `W_dvs = G2_dv Z_dvs`
//! (half2 complex multiply), `Y_uvs = sum_d G3_du W_dvs` (m16n8k16: sparse `mma.sp` with
//! selector f = 2 for r = 4, f = 1 for r = 3 and the universal E; dense for r = 5).
//! ```text
//! [f16 X_cds]  b <-> ReIm           t0 t1 t2 t3 t4 <-> c0 c1 d0 [s0..s(4-r) d1..d(r-3)]   (25)
//! [f16 Y_uvs]  b <-> v0  r <-> ReIm t0 t1 t2 t3 t4 <-> v1 v2 [u0..u(r-3) s0..s(4-r)]       (26)
//! [f16 Z_dvs]  b0 <-> d0 r <-> ReIm t0 t1 t2 t3 t4 <-> [s0..s(4-r) d1..d(r-3)] v0 v1 v2   (40)
//! MMA1 (38): i <-> v0 v1 v2 ReIm_out          j <-> ReIm_in c0 c1   k <-> d0 [..2 bits..]
//! MMA3 (43): i <-> [u.. s_out..] ReIm_out     j <-> d0 [s_in.. d1..] ReIm_in   k <-> v0 v1 v2
//! ```
//! The bracketed 2-bit and 3-bit fields are [`field2`] and [`field3`]. The Gamma matrices are
//! computed on the host in f64, rounded to f16 and passed in as one register image
//! ([`GAMMA_WORDS`] words per lane: G1 (eq. 39), G2 (eq. 41), G3 (eqs. 45-47)); the kernel
//! holds them in registers. At N = 20 the short FFT also has a direct form (the padded DFT as
//! one matrix product, eight FFTs per warp, no twiddle), the default of the standalone short
//! FFT there.
//!
//! First kernel (sec. 4): `I[f][tbar][p][q] = sum_{tau in tbar} sum_pol |Et|^2`,
//! `Et = sum_{m,n} W[f][pol][m][n] E[tau][f][pol][m][n] exp(2 pi i (m p / 2M + n q / 2N))`
//! (eqs. 50-51), E ci4 `[tau][f][pol][d]` gridded by `d -> (m, n)`, W complex f16
//! `[f][pol][m][n]`, I f16 `[f][tbar][p][q]`. The straightforward kernel
//! (`first_kernel.rs`): gridding through shared memory from 4-byte E loads with `W E` formed
//! in f16x2 ([`ci4_biased_f16x2`]), both FFTs with the short FFT from shared memory with
//! padded, conflict-free `G` rows ([`frb_g_row_words`]), several FFTs in flight per warp,
//! `|Et|^2` summed in f16x2, over T_ds or per phase and then in f32
//! ([`FRB_F16_SUM_MAX_T_DS`]). At full CHORD with f16 sums the even/odd kernel
//! (`even_odd.rs`): both FFTs as the padded 48-point DFT split by the parity of the input
//! index, m16n8k16 + m16n8k8 MMAs with no twiddles and no padding. For the note's own
//! design, not written yet, [`cases`] holds the cases of Table 2 ([`FRB_CASES`]), their
//! derived constants and the shared-memory layouts of secs. 4.5-4.11, with CPU checks that
//! all six access patterns are bank-conflict free.
//!
//! Files: [`layout`] (the short FFT's register maps, the first kernels' shared-memory maps:
//! pure, shared with the host and the CPU tests), [`cases`] (Table 2), `short_fft.rs`,
//! `first_kernel.rs`, `even_odd.rs` (device code per schedule), `device.rs` (the entry
//! points), [`factorized`], [`quantize`], [`resample`] (the later kernels, each with its
//! own entry points), and below the registry [`KERNELS`] with the descriptors the host
//! selects from ([`FRB_KERNELS`], [`FFT_KERNELS`], [`FACTORIZED_KERNELS`],
//! [`QUANTIZE_KERNELS`]).
//!
//! Kernel names (this module's registry; the resampler's are in [`resample`]):
//! - `frb_beamform_dD_mM_nN`: the first kernel for Table 2 case (D, M, N), f16 sums per
//!   phase added in f32 (T_ds above [`FRB_F16_SUM_MAX_T_DS`]); `_f16sum`: f16 sums over the
//!   whole output sample; `_eo`: the even/odd kernel (full CHORD, f16 sums);
//! - `frb_short_fft_nN` / `frb_short_fft_loop_nN`: the three-factor short FFT's batch
//!   (test) kernel and register-resident benchmark kernel; `_direct_` the direct DFT's;
//! - `frb_factorized_M_N`: the factorized resampler for grid (M, N);
//! - `frb_quantize_u8` / `_u4`: the quantiser for 8- and 4-bit codes.

use crate::modules::{Arch, Family, KernelSpec};

pub mod cases;
pub use cases::*;
pub mod layout;
pub use layout::*;

pub mod factorized;
pub mod quantize;
pub mod resample;

use factorized::FactorizedKernel;
use quantize::{Format, QuantizeKernel};

/// Register cap of the three-factor first kernels whose 64-bit element offsets of E and I
/// would otherwise take ptxas to 65-72 registers (three blocks of 8 warps per SM instead of
/// four): 64 keeps four, with no spills (the ptxas test checks).
pub const FRB_WIDE_OFFSET_REGISTERS: u32 = 64;

/// Register cap of the even/odd kernel: 112 keeps three blocks of 6 warps per SM
/// (`3 x 192 x 112 = 64512` of the 65536 registers), with no spills.
pub const EO_REGISTERS: u32 = 112;

/// One instance of the first kernel: its spec (block size and dynamic shared memory fixed
/// per instance) and what selects it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrbKernel {
    /// The registry entry: entry point `frb_beamform_d{D}_m{M}_n{N}[_f16sum|_eo]`, with the
    /// block size, dynamic shared memory and register cap of the instance.
    pub spec: KernelSpec,
    /// The Table 2 case (D, M, N).
    pub dishes: u32,
    /// Grid rows M of the case (see `dishes`).
    pub m: u32,
    /// Grid columns N of the case (see `dishes`).
    pub n: u32,
    /// Whether `|Et|^2` is summed in f16 over the whole output sample (for T_ds up to
    /// [`FRB_F16_SUM_MAX_T_DS`]); otherwise per phase, the phases added in f32.
    pub f16_sum: bool,
    /// The even/odd kernel: takes the A image of [`EO_WORDS`] words per lane in `gammas_m`'s
    /// place (the host's `eo_image`), not a Gamma image.
    pub even_odd: bool,
}

impl FrbKernel {
    /// Threads per block.
    pub const fn threads(&self) -> u32 {
        match self.spec.threads {
            Some(threads) => threads,
            None => FRB_THREADS,
        }
    }
    /// Dynamic shared memory per block in bytes.
    pub const fn shared_bytes(&self) -> u32 {
        match self.spec.shared_bytes {
            Some(bytes) => bytes,
            None => 0,
        }
    }
}

/// The first kernel for a case and T_ds: f16 sums up to [`FRB_F16_SUM_MAX_T_DS`] (at full
/// CHORD the even/odd kernel), f32 phase sums above.
pub fn frb_kernel(case: &FrbCase, t_ds: u32) -> Option<&'static FrbKernel> {
    let f16_sum = t_ds <= FRB_F16_SUM_MAX_T_DS;
    FRB_KERNELS.iter().find(|k| (k.dishes, k.m, k.n, k.f16_sum) == (case.dishes, case.m, case.n, f16_sum))
}

/// How a short FFT kernel computes the padded DFT: the three-factor FFT of eqs. 28-30
/// (every N), or the direct DFT as one matrix product ([`has_direct_dft`]), which needs no
/// twiddle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FftMethod {
    /// The three-factor FFT of eqs. 28-30 (m16n8k8, twiddles, m16n8k16): every N of
    /// [`FFT_SIZES`], `2^(5-r)` FFTs per warp.
    ThreeFactor,
    /// The zero-padded DFT as one matrix product, [`DIRECT_FFTS_PER_WARP`] FFTs per warp;
    /// only for the N of [`has_direct_dft`].
    Direct,
}

/// The short FFT's kernels for one N and method: the batch kernel (arrays in device memory)
/// and the register-resident benchmark kernel. Neither fixes its block size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FftKernel {
    /// The FFT length N, one of [`FFT_SIZES`] (outputs: `2N` points, the zero-padded DFT).
    pub n: u32,
    /// How the kernels compute the transform.
    pub method: FftMethod,
    /// The batch (test) kernel `frb_short_fft[_direct]_n{N}`: transforms complex f16 arrays
    /// `[batch][N]` in device memory into `[batch][2N]`.
    pub batch: KernelSpec,
    /// The benchmark kernel `frb_short_fft_loop[_direct]_n{N}`: each warp repeats the
    /// transform on register-resident data, to time the tensor-core FFT without memory
    /// traffic.
    pub looped: KernelSpec,
}

impl FftKernel {
    /// FFTs per warp group: `2^(5-r)` for the three-factor FFT, 8 for the direct DFT.
    pub const fn ffts_per_group(&self) -> u32 {
        match self.method {
            FftMethod::ThreeFactor => ffts_per_warp(self.n),
            FftMethod::Direct => DIRECT_FFTS_PER_WARP,
        }
    }
}

/// The short FFT kernels of N and `method`, if they are built.
pub fn fft_kernel(n: u32, method: FftMethod) -> Option<&'static FftKernel> {
    FFT_KERNELS.iter().find(|k| k.n == n && k.method == method)
}

/// The short FFT kernels that include `spec` (as batch or benchmark kernel).
pub fn fft_kernel_of(spec: &KernelSpec) -> Option<&'static FftKernel> {
    FFT_KERNELS.iter().find(|k| k.batch.name == spec.name || k.looped.name == spec.name)
}

/// The Table 2 case of an instance (a compile-time error for any other).
const fn table_case(dishes: u32, m: u32, n: u32) -> FrbCase {
    match frb_case(dishes, m, n) {
        Some(case) => case,
        None => panic!("not a Table 2 case"),
    }
}

/// `spec` with `registers` as its register cap, if any.
const fn capped(spec: KernelSpec, registers: Option<u32>) -> KernelSpec {
    match registers {
        Some(registers) => spec.max_registers(registers),
        None => spec,
    }
}

/// A kernel of this family's sm_80 module.
const fn sm80(name: &'static str) -> KernelSpec {
    KernelSpec::new(name, Family::FrbBeamformer, Arch::Sm80)
}

/// The spec of a three-factor first kernel: [`FRB_THREADS`] threads and
/// [`frb_beamform_shared_bytes`] of its case.
const fn first_spec(name: &'static str, dishes: u32, m: u32, n: u32, registers: Option<u32>) -> KernelSpec {
    capped(
        sm80(name).threads(FRB_THREADS).shared_bytes(frb_beamform_shared_bytes(&table_case(dishes, m, n))),
        registers,
    )
}

/// The even/odd kernel's spec.
const EO_SPEC: KernelSpec = sm80("frb_beamform_d512_m24_n24_eo")
    .threads(EO_THREADS)
    .shared_bytes(eo_shared_bytes())
    .max_registers(EO_REGISTERS);

/// Every entry point of the family but the resampler's, written once: `$callback!` gets the
/// lists below, and both the registry ([`KERNELS`] and the descriptor tables) and the entry
/// points (`device.rs`) are made from them.
/// - `first`: (entry, D, M, N, T_inner, f16 sums, register cap) of the three-factor first
///   kernels;
/// - `even_odd`: the even/odd first kernel (full CHORD, f16 sums; its spec is [`EO_SPEC`]);
/// - `fft`: (N, batch entry, benchmark entry) of the three-factor short FFT; `direct`: the
///   same for the direct DFT;
/// - `factorized`: (entry, M, N); `quantize`: (entry, [`Format`], 4-bit codes).
macro_rules! frb_instances {
    ($callback:ident) => {
        $callback! {
            first: [
                (frb_beamform_d64_m8_n8, 64, 8, 8, 8, false, Some(FRB_WIDE_OFFSET_REGISTERS)),
                (frb_beamform_d64_m8_n12, 64, 8, 12, 6, false, None),
                (frb_beamform_d256_m16_n16, 256, 16, 16, 8, false, Some(FRB_WIDE_OFFSET_REGISTERS)),
                (frb_beamform_d256_m16_n20, 256, 16, 20, 5, false, None),
                (frb_beamform_d512_m24_n24, 512, 24, 24, 4, false, None),
                (frb_beamform_d64_m8_n8_f16sum, 64, 8, 8, 8, true, None),
                (frb_beamform_d64_m8_n12_f16sum, 64, 8, 12, 6, true, None),
                (frb_beamform_d256_m16_n16_f16sum, 256, 16, 16, 8, true, Some(FRB_WIDE_OFFSET_REGISTERS)),
                (frb_beamform_d256_m16_n20_f16sum, 256, 16, 20, 5, true, None),
            ],
            even_odd: frb_beamform_d512_m24_n24_eo,
            fft: [
                (8, frb_short_fft_n8, frb_short_fft_loop_n8),
                (12, frb_short_fft_n12, frb_short_fft_loop_n12),
                (16, frb_short_fft_n16, frb_short_fft_loop_n16),
                (20, frb_short_fft_n20, frb_short_fft_loop_n20),
                (24, frb_short_fft_n24, frb_short_fft_loop_n24),
                (28, frb_short_fft_n28, frb_short_fft_loop_n28),
                (32, frb_short_fft_n32, frb_short_fft_loop_n32),
            ],
            direct: [(20, frb_short_fft_direct_n20, frb_short_fft_loop_direct_n20)],
            factorized: [
                (frb_factorized_8_8, 8, 8),
                (frb_factorized_8_12, 8, 12),
                (frb_factorized_16_16, 16, 16),
                (frb_factorized_16_20, 16, 20),
                (frb_factorized_24_24, 24, 24),
            ],
            quantize: [(frb_quantize_u8, U8, false), (frb_quantize_u4, U4, true)],
        }
    };
}

macro_rules! frb_tables {
    (
        first: [$(($name:ident, $d:literal, $m:literal, $n:literal, $tb:literal, $f16:literal, $cap:expr)),* $(,)?],
        even_odd: $eo:ident,
        fft: [$(($fn:literal, $fbatch:ident, $floop:ident)),* $(,)?],
        direct: [$(($dn:literal, $dbatch:ident, $dloop:ident)),* $(,)?],
        factorized: [$(($xname:ident, $xm:literal, $xn:literal)),* $(,)?],
        quantize: [$(($qname:ident, $qformat:ident, $q4:literal)),* $(,)?] $(,)?
    ) => {
        /// The family's kernels (all but the resampler's): every entry point of its sm_80
        /// module, with what `build.rs` adds to each (register cap) and what the host
        /// launches it with.
        pub const KERNELS: &[KernelSpec] = &[
            $(first_spec(stringify!($name), $d, $m, $n, $cap),)*
            EO_SPEC,
            $(sm80(stringify!($fbatch)), sm80(stringify!($floop)),)*
            $(sm80(stringify!($dbatch)), sm80(stringify!($dloop)),)*
            $(sm80(stringify!($xname)).threads(factorized::FACTOR_THREADS),)*
            $(sm80(stringify!($qname)).threads(quantize::THREADS).shared_bytes(0),)*
        ];

        /// The first kernel's instances ([`frb_kernel`] selects one).
        pub const FRB_KERNELS: &[FrbKernel] = &[
            $(FrbKernel {
                spec: first_spec(stringify!($name), $d, $m, $n, $cap),
                dishes: $d, m: $m, n: $n, f16_sum: $f16, even_odd: false,
            },)*
            FrbKernel { spec: EO_SPEC, dishes: 512, m: EO_N, n: EO_N, f16_sum: true, even_odd: true },
        ];

        /// The short FFT's kernels ([`fft_kernel`]).
        pub const FFT_KERNELS: &[FftKernel] = &[
            $(FftKernel {
                n: $fn, method: FftMethod::ThreeFactor,
                batch: sm80(stringify!($fbatch)), looped: sm80(stringify!($floop)),
            },)*
            $(FftKernel {
                n: $dn, method: FftMethod::Direct,
                batch: sm80(stringify!($dbatch)), looped: sm80(stringify!($dloop)),
            },)*
        ];

        /// The factorized resampler's kernels ([`factorized::kernel`]).
        pub const FACTORIZED_KERNELS: &[FactorizedKernel] = &[
            $(FactorizedKernel {
                spec: sm80(stringify!($xname)).threads(factorized::FACTOR_THREADS), m: $xm, n: $xn,
            },)*
        ];

        /// The quantiser's kernels ([`quantize::kernel`]).
        pub const QUANTIZE_KERNELS: &[QuantizeKernel] = &[
            $(QuantizeKernel {
                spec: sm80(stringify!($qname)).threads(quantize::THREADS).shared_bytes(0),
                format: Format::$qformat,
            },)*
        ];
    };
}
frb_instances!(frb_tables);

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod device;
#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod even_odd;
#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod first_kernel;
#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod short_fft;
#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
pub use short_fft::{direct_dft, direct_load, short_fft, short_fft_g3w, FftGammas};

#[cfg(test)]
mod tests {
    use super::*;

    /// Every table entry is in the registry with the same spec, and each descriptor table
    /// has one entry per name.
    #[test]
    fn descriptors_are_registry_entries() {
        let registered = |spec: &KernelSpec| KERNELS.iter().any(|k| k == spec);
        assert!(FRB_KERNELS.iter().all(|k| registered(&k.spec)));
        assert!(FFT_KERNELS.iter().all(|k| registered(&k.batch) && registered(&k.looped)));
        assert!(FACTORIZED_KERNELS.iter().all(|k| registered(&k.spec)));
        assert!(QUANTIZE_KERNELS.iter().all(|k| registered(&k.spec)));
        let descriptors =
            FRB_KERNELS.len() + 2 * FFT_KERNELS.len() + FACTORIZED_KERNELS.len() + QUANTIZE_KERNELS.len();
        assert_eq!(descriptors, KERNELS.len());
        for (i, a) in KERNELS.iter().enumerate() {
            assert!(KERNELS[i + 1..].iter().all(|b| b.name != a.name), "{} twice", a.name);
        }
    }

    /// Every case has its kernel for every T_ds, and the even/odd kernel exactly at full
    /// CHORD with f16 sums; every FFT size has its three-factor kernels, N = 20 its direct
    /// ones.
    #[test]
    fn selection_covers_every_configuration() {
        for case in FRB_CASES {
            for t_ds in [1, FRB_F16_SUM_MAX_T_DS, FRB_F16_SUM_MAX_T_DS + 1, 1 << 20] {
                let k = frb_kernel(&case, t_ds).unwrap();
                assert_eq!((k.dishes, k.m, k.n), (case.dishes, case.m, case.n));
                assert_eq!(k.f16_sum, t_ds <= FRB_F16_SUM_MAX_T_DS);
                assert_eq!(k.even_odd, eo_applies(&case, t_ds));
                let shared = if k.even_odd { eo_shared_bytes() } else { frb_beamform_shared_bytes(&case) };
                assert_eq!(k.shared_bytes(), shared);
                assert_eq!(k.threads(), if k.even_odd { EO_THREADS } else { FRB_THREADS });
            }
        }
        for n in FFT_SIZES {
            assert_eq!(fft_kernel(n, FftMethod::ThreeFactor).unwrap().n, n);
            assert_eq!(fft_kernel(n, FftMethod::Direct).is_some(), has_direct_dft(n));
        }
        for k in FFT_KERNELS {
            assert_eq!(fft_kernel_of(&k.batch), Some(k));
            assert_eq!(fft_kernel_of(&k.looped), Some(k));
        }
        assert_eq!(fft_kernel_of(&FRB_KERNELS[0].spec), None);
    }
}
