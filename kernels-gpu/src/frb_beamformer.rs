//! FRB beamformer (seed 000, CHORD FRB beamformer), part A: the tensor-core short FFT of
//! seed sec. 3 (eqs. 18-47) with App. B.1 (notation) and App. C (f16 MMAs, incl. C.3 sparse
//! `mma.sp` with the universal metadata of eqs. 171-173).
//!
//! One warp computes `2^(5-r)` independent zero-padded c2c f16 FFTs (spectator index s),
//! `r = ceil(log2 N)`, for N in {8, 12, 16, 20, 24, 28, 32}:
//! `Y_q = sum_{n<N} X_n exp(2 pi i n q / 2N)`, 0 <= q < 2N (eq. 18). With `n = (N/4) c + d`
//! and `q = 8u + v` (eqs. 21-22, d and u zero-padded to `2^(r-2)`), eqs. 28-30:
//! `Z_dvs = sum_c G1_cv X_cds` (m16n8k8), `W_dvs = G2_dv Z_dvs` (half2 complex multiply),
//! `Y_uvs = sum_d G3_du W_dvs` (m16n8k16: sparse `mma.sp` with selector f = 2 for r = 4,
//! f = 1 for r = 3 and the universal E; dense for r = 5).
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
//! holds them in registers. The functions below are the index maps the host uses to build
//! those images and the CPU tests use to check that eqs. 38 and 43 compose.
use crate::layout::Location;

/// The FFT lengths N of seed sec. 3 (`8 <= N <= 32`, N divisible by 4).
pub const FFT_SIZES: [u32; 7] = [8, 12, 16, 20, 24, 28, 32];

/// 32-bit words per lane of the Gamma register image: G1 (2), G2 (2), G3 (4; the sparse
/// cases use the first 2, and the dense case's word 3 equals word 0 by eq. 32).
pub const GAMMA_WORDS: usize = 8;
/// Offsets of G1, G2 and G3 in a lane's [`GAMMA_WORDS`] words.
pub const G1_WORD: usize = 0;
pub const G2_WORD: usize = 2;
pub const G3_WORD: usize = 4;

/// Whether N is one of [`FFT_SIZES`].
pub const fn is_fft_size(n: u32) -> bool {
    n >= 8 && n <= 32 && n.is_multiple_of(4)
}

/// `r = ceil(log2 N)` (eq. 19), for N in [`FFT_SIZES`].
pub const fn fft_rank(n: u32) -> u32 {
    32 - (n - 1).leading_zeros()
}

/// FFTs per warp, `2^(5-r)`: 4 at N = 8, 2 at N = 12 and 16, 1 above.
pub const fn ffts_per_warp(n: u32) -> u32 {
    1 << (5 - fft_rank(n))
}

/// Whether the third MMA is sparse (`r <= 4`, i.e. N <= 16) and its selector `f = n`
/// (the `i_n` of the Kronecker delta `delta(i_n, j_1)`, eq. 168): 2 for r = 4, 1 for r = 3.
pub const fn sparse_selector(n: u32) -> Option<u32> {
    match fft_rank(n) {
        3 => Some(1),
        4 => Some(2),
        _ => None,
    }
}

/// The 2-bit field `[s0..s(4-r) d1..d(r-3)]` of eqs. 25, 38, 40, 43: spectator bits low,
/// then the high bits of d.
pub const fn field2(n: u32, s: u32, d: u32) -> u32 {
    s | ((d >> 1) << (5 - fft_rank(n)))
}

/// The 3-bit field `[u0..u(r-3) s0..s(4-r)]` of eqs. 26, 43, 44: u low, spectators high.
pub const fn field3(n: u32, u: u32, s: u32) -> u32 {
    u | (s << (fft_rank(n) - 2))
}

/// Inverse of [`field2`]: `(s, d >> 1)`.
pub const fn split_field2(n: u32, field: u32) -> (u32, u32) {
    let sbits = 5 - fft_rank(n);
    (field & ((1 << sbits) - 1), field >> sbits)
}

/// Inverse of [`field3`]: `(u, s)`.
pub const fn split_field3(n: u32, field: u32) -> (u32, u32) {
    let ubits = fft_rank(n) - 2;
    (field & ((1 << ubits) - 1), field >> ubits)
}

/// Padded length of d and u, `2^(r-2)`.
pub const fn padded_quarter(n: u32) -> u32 {
    1 << (fft_rank(n) - 2)
}

/// Eq. 25: where `X_cds` (part `reim`) lives. One register per lane.
pub const fn x_location(n: u32, c: u32, d: u32, s: u32, reim: u32) -> Location {
    Location { lane: c | ((d & 1) << 2) | (field2(n, s, d) << 3), register: 0, element: reim }
}

/// Inverse of eq. 25 for a lane: `(c, d, s)`; `d >= N/4` marks a zero-padding slot.
pub const fn x_coordinates(n: u32, lane: u32) -> (u32, u32, u32) {
    let (s, dhi) = split_field2(n, lane >> 3);
    (lane & 3, ((lane >> 2) & 1) | (dhi << 1), s)
}

/// Eqs. 40-42: where `Z_dvs`, `G2_dv` and `W_dvs` (part `reim`) live.
pub const fn z_location(n: u32, d: u32, v: u32, s: u32, reim: u32) -> Location {
    Location { lane: field2(n, s, d) | (v << 2), register: reim, element: d & 1 }
}

/// Inverse of eq. 40: `(d, v, s, reim)`.
pub const fn z_coordinates(n: u32, at: Location) -> (u32, u32, u32, u32) {
    let (s, dhi) = split_field2(n, at.lane & 3);
    ((at.element & 1) | (dhi << 1), at.lane >> 2, s, at.register)
}

/// Eq. 26 (= eq. 44): where `Y_uvs` (part `reim`) lives. Two registers per lane.
pub const fn y_location(n: u32, u: u32, v: u32, s: u32, reim: u32) -> Location {
    Location { lane: (v >> 1) | (field3(n, u, s) << 2), register: reim, element: v & 1 }
}

/// Inverse of eq. 26: `(u, v, s, reim)`; `u >= N/4` marks a zero-padding slot.
pub const fn y_coordinates(n: u32, at: Location) -> (u32, u32, u32, u32) {
    let (u, s) = split_field3(n, at.lane >> 2);
    (u, (at.element & 1) | ((at.lane & 3) << 1), s, at.register)
}

/// Eq. 38, the first MMA's rows: `i = v0 v1 v2 ReIm_out`.
pub const fn mma1_row(v: u32, reim_out: u32) -> u32 {
    v | (reim_out << 3)
}
/// Eq. 38, the contracted index: `j = ReIm_in c0 c1`.
pub const fn mma1_inner(c: u32, reim_in: u32) -> u32 {
    reim_in | (c << 1)
}
/// Eq. 38, the columns: `k = d0 [2 bits]`.
pub const fn mma1_col(n: u32, d: u32, s: u32) -> u32 {
    (d & 1) | (field2(n, s, d) << 1)
}

/// Eq. 43, the third MMA's rows: `i = [u.. s_out..] ReIm_out`.
pub const fn mma3_row(n: u32, u: u32, s_out: u32, reim_out: u32) -> u32 {
    field3(n, u, s_out) | (reim_out << 3)
}
/// Eq. 43, the contracted index: `j = d0 [s_in.. d1..] ReIm_in`.
pub const fn mma3_inner(n: u32, d: u32, s_in: u32, reim_in: u32) -> u32 {
    mma1_col(n, d, s_in) | (reim_in << 3)
}
/// Eq. 43, the columns: `k = v0 v1 v2`.
pub const fn mma3_col(v: u32) -> u32 {
    v
}

/// A matrix element of a complex matrix written as a real one with `ReIm_in` and
/// `ReIm_out` axes (eq. 32): the element is `sign * (re if part == 0 else im)` of the
/// complex entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RealEntry {
    /// 0: the real part of the complex entry, 1: the imaginary part.
    pub part: u32,
    /// +1 or -1.
    pub sign: i32,
}

/// Eq. 32: `A_r[out][in] = (Re, -Im; Im, Re)[out][in]` of the complex `A_c`.
pub const fn realify(reim_out: u32, reim_in: u32) -> RealEntry {
    match (reim_out, reim_in) {
        (0, 0) | (1, 1) => RealEntry { part: 0, sign: 1 },
        (0, _) => RealEntry { part: 1, sign: -1 },
        _ => RealEntry { part: 1, sign: 1 },
    }
}

/// Element (i, j) of the first MMA's A matrix (16 x 8) as `(c, v, entry)` of
/// `G1_cv = exp(pi i c v / 4)` (eqs. 28, 38).
pub const fn gamma1_entry(i: u32, j: u32) -> (u32, u32, RealEntry) {
    (j >> 1, i & 7, realify(i >> 3, j & 1))
}

/// Element (i, j) of the third MMA's dense A matrix (16 x 16) as `(d, u, entry)` of
/// `G3_du = exp(8 pi i d u / N)` (eqs. 30, 43), or `None` where the spectator Kronecker
/// deltas `delta(s_in, s_out)` vanish. Zero padding (`d` or `u >= N/4`) is the caller's.
pub const fn gamma3_entry(n: u32, i: u32, j: u32) -> Option<(u32, u32, RealEntry)> {
    let (u, s_out) = split_field3(n, i & 7);
    let (s_in, dhi) = split_field2(n, (j >> 1) & 3);
    if s_in != s_out {
        return None;
    }
    Some(((j & 1) | (dhi << 1), u, realify(i >> 3, j >> 3)))
}

// --- Part B (seed sec. 4): the first FRB kernel's cases --------------------------------

/// One compile-time case of seed Table 2: dishes D on an M x N grid, warps per block W, and
/// the outer and inner time blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrbCase {
    pub dishes: u32,
    pub m: u32,
    pub n: u32,
    pub warps: u32,
    pub t_outer: u32,
    pub t_inner: u32,
}

/// Seed Table 2, cases 1-5: CHORD pathfinder square and rectangular, HIRAX square and
/// rectangular, full CHORD.
pub const FRB_CASES: [FrbCase; 5] = [
    FrbCase { dishes: 64, m: 8, n: 8, warps: 4, t_outer: 64, t_inner: 8 },
    FrbCase { dishes: 64, m: 8, n: 12, warps: 6, t_outer: 48, t_inner: 6 },
    FrbCase { dishes: 256, m: 16, n: 16, warps: 16, t_outer: 64, t_inner: 8 },
    FrbCase { dishes: 256, m: 16, n: 20, warps: 20, t_outer: 40, t_inner: 5 },
    FrbCase { dishes: 512, m: 24, n: 24, warps: 24, t_outer: 48, t_inner: 4 },
];

/// The case of (D, M, N), if Table 2 has one.
pub const fn frb_case(dishes: u32, m: u32, n: u32) -> Option<FrbCase> {
    let mut k = 0;
    while k < FRB_CASES.len() {
        let c = FRB_CASES[k];
        if c.dishes == dishes && c.m == m && c.n == n {
            return Some(c);
        }
        k += 1;
    }
    None
}

#[cfg(target_arch = "nvptx64")]
pub use device::*;

#[cfg(target_arch = "nvptx64")]
mod device {
    use super::*;
    use crate::intrinsics::*;
    use crate::mma::*;

    /// The Gamma registers of one lane (seed sec. 3.6) and the sparse metadata.
    #[derive(Clone, Copy)]
    pub struct FftGammas {
        pub g1: [u32; 2],
        /// `Re G2`, `Im G2` (eq. 41) and `-Im G2`, so the complex multiply is four HFMA2-class
        /// instructions with no negation in the loop.
        pub g2: [u32; 3],
        /// Eq. 45 (dense: registers 0, 1, 2; register 3 is register 0) or eqs. 46-47 (sparse:
        /// registers 0, 1).
        pub g3: [u32; 3],
        /// Universal sparse metadata (eq. 173).
        pub e: u32,
    }

    impl FftGammas {
        /// Reads this lane's words of a `[lane][GAMMA_WORDS]` image.
        ///
        /// # Safety
        /// `image` must hold `32 * GAMMA_WORDS` readable words.
        #[inline(always)]
        pub unsafe fn load(image: *const u32) -> FftGammas {
            let lane = lane_id();
            let w = image.add(lane as usize * GAMMA_WORDS) as *const [u32; GAMMA_WORDS];
            let w = *w;
            FftGammas {
                g1: [w[G1_WORD], w[G1_WORD + 1]],
                g2: [w[G2_WORD], w[G2_WORD + 1], hneg2(w[G2_WORD + 1])],
                g3: [w[G3_WORD], w[G3_WORD + 1], w[G3_WORD + 2]],
                e: universal_sparse_metadata(lane),
            }
        }
    }

    /// The short FFT (eqs. 28-30): `x` in the register assignment of eq. 25, the result
    /// `[Re, Im]` in that of eq. 26. Warp-collective.
    #[inline(always)]
    pub fn short_fft<const N: u32>(x: u32, g: &FftGammas) -> [u32; 2] {
        let z = mma_m16n8k8_f16(g.g1, x, [0, 0]);
        // Eq. 29 elementwise: Re W = Re G Re Z - Im G Im Z, Im W = Re G Im Z + Im G Re Z.
        let w = [hfma2(g.g2[2], z[1], hmul2(g.g2[0], z[0])), hfma2(g.g2[1], z[0], hmul2(g.g2[0], z[1]))];
        match sparse_selector(N) {
            Some(1) => mma_sp_m16n8k16_f16::<1>([g.g3[0], g.g3[1]], w, [0, 0], g.e),
            Some(_) => mma_sp_m16n8k16_f16::<2>([g.g3[0], g.g3[1]], w, [0, 0], g.e),
            None => mma_m16n8k16_f16([g.g3[0], g.g3[1], g.g3[2], g.g3[0]], w, [0, 0]),
        }
    }

    /// Test kernel: FFT `batch` arrays. `x` is complex f16 (re in the low half) `[batch][N]`,
    /// `y` `[batch][2N]`; warp w of the grid does FFTs `w * 2^(5-r) + s`.
    #[inline(always)]
    unsafe fn fft_batch<const N: u32>(gammas: *const u32, x: *const u32, y: *mut u32, batch: u32) {
        let g = FftGammas::load(gammas);
        let lane = lane_id();
        let warp = global_thread_x() / 32;
        // Input and output lanes hold different spectators (eqs. 25, 26).
        let (c, d, s_in) = x_coordinates(N, lane);
        let fft_in = warp * ffts_per_warp(N) + s_in;
        let input =
            if fft_in < batch && d < N / 4 { *x.add((fft_in * N + (N / 4) * c + d) as usize) } else { 0 };
        // The fences keep the MMAs out of the conditional code around them: they are
        // warp-collective, and the wrappers are `pure`, so LLVM may otherwise sink them into
        // the store's branch, where only some lanes would run them.
        let out = converged(short_fft::<N>(converged([input])[0], &g));
        let (u, v, s_out, _) = y_coordinates(N, Location { lane, register: 0, element: 0 });
        let fft_out = warp * ffts_per_warp(N) + s_out;
        if fft_out < batch && u < N / 4 {
            let at = y.add((fft_out * 2 * N + 8 * u + v) as usize);
            // (Re, Im) of v and of v + 1 (b <-> v0) as complex words.
            *at = prmt(out[0], out[1], 0x5410);
            *at.add(1) = prmt(out[0], out[1], 0x7632);
        }
    }

    /// Benchmark kernel: each warp runs `4 * iterations` FFTs from registers. Lane l reads
    /// four input registers `x[4 t .. 4 t + 4]` (t the global thread) and writes one word.
    /// Each FFT's input is `x_k ^ (i & salt)` (fresh data per iteration when `salt` flips
    /// low mantissa bits) and both output registers are folded into an xor, so nothing is
    /// loop-invariant or dead; the four chains are independent.
    #[inline(always)]
    unsafe fn fft_loop<const N: u32>(
        gammas: *const u32,
        x: *const u32,
        y: *mut u32,
        iterations: u32,
        salt: u32,
    ) {
        let g = FftGammas::load(gammas);
        let t = global_thread_x() as usize;
        let xs = ld_global_nc_v4(x.add(4 * t));
        let mut acc = 0u32;
        let mut i = 0;
        while i < iterations {
            unroll!(k in [0, 1, 2, 3] {
                let out = short_fft::<N>(lop3::<0x78>(xs[k], i, salt), &g);
                acc = lop3::<0x96>(acc, out[0], out[1]);
            });
            i += 1;
        }
        *y.add(t) = acc;
    }

    macro_rules! fft_kernels {
        ($n:literal, $batch:ident, $looped:ident) => {
            /// Test kernel for N = $n: see `fft_batch`.
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $batch(
                gammas: *const u32,
                x: *const u32,
                y: *mut u32,
                batch: u32,
            ) {
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

    fft_kernels!(8, frb_short_fft_n8, frb_short_fft_loop_n8);
    fft_kernels!(12, frb_short_fft_n12, frb_short_fft_loop_n12);
    fft_kernels!(16, frb_short_fft_n16, frb_short_fft_loop_n16);
    fft_kernels!(20, frb_short_fft_n20, frb_short_fft_loop_n20);
    fft_kernels!(24, frb_short_fft_n24, frb_short_fft_loop_n24);
    fft_kernels!(28, frb_short_fft_n28, frb_short_fft_loop_n28);
    fft_kernels!(32, frb_short_fft_n32, frb_short_fft_loop_n32);
}

/// The test kernel and the benchmark kernel for N.
pub const fn fft_kernel_names(n: u32) -> Option<(&'static str, &'static str)> {
    Some(match n {
        8 => ("frb_short_fft_n8", "frb_short_fft_loop_n8"),
        12 => ("frb_short_fft_n12", "frb_short_fft_loop_n12"),
        16 => ("frb_short_fft_n16", "frb_short_fft_loop_n16"),
        20 => ("frb_short_fft_n20", "frb_short_fft_loop_n20"),
        24 => ("frb_short_fft_n24", "frb_short_fft_loop_n24"),
        28 => ("frb_short_fft_n28", "frb_short_fft_loop_n28"),
        32 => ("frb_short_fft_n32", "frb_short_fft_loop_n32"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{M16N8K16_F16_A, M16N8K16_F16_B, M16N8K8_F16_A, M16N8K8_F16_B, M16N8_F16_C};

    /// Eq. 59's compile-time asserts and the grid capacity hold for every case.
    #[test]
    fn table_2_cases_satisfy_eq_59() {
        for c in FRB_CASES {
            assert!(is_fft_size(c.m) && is_fft_size(c.n), "{c:?}");
            assert!(c.t_outer % 2 == 0 && c.t_outer % c.t_inner == 0, "{c:?}");
            assert!(c.dishes <= c.m * c.n, "{c:?}");
            assert_eq!(frb_case(c.dishes, c.m, c.n), Some(c));
        }
        assert_eq!(frb_case(64, 12, 8), None);
        assert_eq!(frb_case(512, 24, 32), None);
    }

    #[test]
    fn ranks_and_spectators() {
        let r: [u32; 7] = FFT_SIZES.map(fft_rank);
        assert_eq!(r, [3, 4, 4, 5, 5, 5, 5]);
        assert_eq!(FFT_SIZES.map(ffts_per_warp), [4, 2, 2, 1, 1, 1, 1]);
        assert_eq!(FFT_SIZES.map(sparse_selector), [Some(1), Some(2), Some(2), None, None, None, None]);
        assert!(FFT_SIZES.iter().all(|&n| is_fft_size(n) && fft_kernel_names(n).is_some()));
        assert!(![0, 4, 7, 10, 36, 64].iter().any(|&n| is_fft_size(n)));
    }

    /// Every padded (c, d, s) and (u, v, s) has one slot and the inverses invert.
    #[test]
    fn input_and_output_assignments_are_bijections() {
        for n in FFT_SIZES {
            let (q, spectators) = (padded_quarter(n), ffts_per_warp(n));
            let mut seen = [false; 64];
            for c in 0..4 {
                for d in 0..q {
                    for s in 0..spectators {
                        let at = x_location(n, c, d, s, 0);
                        assert!(at.lane < 32 && !seen[at.lane as usize]);
                        seen[at.lane as usize] = true;
                        assert_eq!(x_coordinates(n, at.lane), (c, d, s));
                    }
                }
            }
            assert!(seen[..32].iter().all(|&b| b));
            let mut seen = [false; 128];
            for u in 0..q {
                for v in 0..8 {
                    for s in 0..spectators {
                        for reim in 0..2 {
                            let at = y_location(n, u, v, s, reim);
                            let slot = ((at.lane * 2 + at.register) * 2 + at.element) as usize;
                            assert!(at.lane < 32 && !seen[slot]);
                            seen[slot] = true;
                            assert_eq!(y_coordinates(n, at), (u, v, s, reim));
                            assert_eq!(z_coordinates(n, z_location(n, u, v, s, reim)), (u, v, s, reim));
                        }
                    }
                }
            }
            assert!(seen.iter().all(|&b| b));
        }
    }

    /// Eq. 38 composes with the m16n8k8 tables: X (eq. 25) is the B operand (eq. 157), G1
    /// (eq. 39) the A operand (eq. 156) and Z (eq. 40) the C result (eq. 158). Eq. 43 composes
    /// with the m16n8k16 tables: Z's slots are W's (eq. 42), which are the B operand (eq.
    /// 160), and the C result (eq. 161) is Y (eq. 44 = eq. 26). So no data moves between the
    /// three steps.
    #[test]
    fn register_maps_compose_through_eqs_38_and_43() {
        for n in FFT_SIZES {
            let (q, spectators) = (padded_quarter(n), ffts_per_warp(n));
            for c in 0..4 {
                for v in 0..8 {
                    for (reim_in, reim_out) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                        // Eq. 39: b <-> ReIm_in, r <-> ReIm_out, t <-> c0 c1 v0 v1 v2.
                        let at = M16N8K8_F16_A.location(mma1_row(v, reim_out), mma1_inner(c, reim_in));
                        assert_eq!((at.element, at.register, at.lane), (reim_in, reim_out, c | (v << 2)));
                    }
                }
            }
            for d in 0..q {
                for s in 0..spectators {
                    for reim in 0..2 {
                        for c in 0..4 {
                            let b = M16N8K8_F16_B.location(mma1_inner(c, reim), mma1_col(n, d, s));
                            assert_eq!(b, x_location(n, c, d, s, reim), "N={n}: X vs eq. 157");
                        }
                        for v in 0..8 {
                            let z = M16N8_F16_C.location(mma1_row(v, reim), mma1_col(n, d, s));
                            assert_eq!(z, z_location(n, d, v, s, reim), "N={n}: Z vs eq. 158");
                            let w = M16N8K16_F16_B.location(mma3_inner(n, d, s, reim), mma3_col(v));
                            assert_eq!(w, z, "N={n}: W (eq. 42) vs eq. 160");
                            // d plays u's role on the output side (same range).
                            let y = M16N8_F16_C.location(mma3_row(n, d, s, reim), mma3_col(v));
                            assert_eq!(y, y_location(n, d, v, s, reim), "N={n}: Y vs eq. 161");
                        }
                    }
                }
            }
            // Eqs. 45-47: the dense A table under eq. 43 puts G3 where the seed says.
            for i in 0..16 {
                for j in 0..16 {
                    let at = M16N8K16_F16_A.location(i, j);
                    let Some((d, u, _)) = gamma3_entry(n, i, j) else { continue };
                    let (reim_out, reim_in) = (i >> 3, j >> 3);
                    let expect_lane = match fft_rank(n) {
                        5 => (d >> 1) | (u << 2),                                            // eq. 45
                        4 => (d >> 1) | (reim_in << 1) | (u << 2) | ((i >> 2) & 1) << 4,     // eq. 46
                        _ => ((j >> 2) & 1) | (reim_in << 1) | (u << 2) | (i >> 1 & 3) << 3, // eq. 47
                    };
                    if fft_rank(n) == 5 {
                        assert_eq!(
                            (at.element, at.register, at.lane),
                            (d & 1, reim_out | reim_in << 1, expect_lane)
                        );
                    } else {
                        // Sparse: A' of eq. 170 has t0 t1 <-> j2 j3 instead of j1 j2.
                        let lane = ((j >> 2) & 3) | (i & 7) << 2;
                        assert_eq!((d & 1, reim_out, lane), (j & 1, i >> 3, expect_lane), "N={n}");
                    }
                }
            }
        }
    }
}
