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
//!
//! At N = 20 the short FFT also has a direct form ("Part A'" below: the padded DFT as one
//! matrix product, eight FFTs per warp, no twiddle), which is faster on Hopper.
//!
//! Part B (the first FRB kernel, seed sec. 4): a straightforward, correct-first kernel
//! (`frb_beamform`: gridding through shared memory from 4-byte E loads with `W E` formed in
//! f16x2 ([`ci4_biased_f16x2`]), both FFTs with the short FFT from shared memory with
//! padded, conflict-free `G` rows ([`frb_g_row_words`]), several FFTs in flight per warp,
//! `|Et|^2` summed in f16x2, over T_ds or per phase and then in f32
//! ([`FRB_F16_SUM_MAX_T_DS`])); at full CHORD with f16 sums the even/odd kernel of "Part
//! B'" below (`frb_beamform_eo`: both FFTs as the padded 48-point DFT split by the parity of
//! the input index, m16n8k16 + m16n8k8 MMAs with no twiddles and no padding), and for the
//! seed's design, not written yet: the cases of Table
//! 2 ([`FRB_CASES`]), their derived constants, the shared-memory layouts of sec. 4.5
//! (`Fsh1[]`, `Fsh2[]`, `Gsh[]`), the `Freg2[]` assignment of sec. 4.9 and the `Gsh[]`
//! store/load lanes of secs. 4.10-4.11, with CPU checks (the seed author's script, as tests)
//! that all six shared-memory access patterns of secs. 4.6-4.11 are bank-conflict free and
//! cover their arrays exactly once.
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

// --- Part A': the direct DFT for N = 20 ----------------------------------------------------
//
// At N = 20 the three-factor FFT is bound by the tensor pipe plus the FP16 pipe's four half2
// twiddle ops (eq. 29), which overlap only partly on Hopper (BENCHMARKS.md). The padded
// 2N-point DFT as one real matrix product, `Y (4N real rows: q, ReIm) = F (4N x 2N) X (2N
// real: n, ReIm)`, needs no twiddle: eight FFTs per warp are the eight B columns, F is the
// A operand in row tiles of
// 16 (8 q x ReIm_out), and the 2N contracted reals are `2N / 16` m16n8k16 plus, where
// `2N % 16 = 8` (N = 20), one m16n8k8. Per FFT that is the same tensor work as the
// three-factor one at N = 20 (`1.25 k16 + 0.625 k8` vs `k16 + k8` MMAs at the measured k8 /
// k16 rates), with no FP16-pipe ops; at N = 24 it would be 35% more tensor work and measured
// slower, so only N = 20 is built. The code is written for any N with `N / 4 <= 6` row tiles.
//
// Register maps (lane = 4 g + t, g = lane / 4, t = lane % 4; the m16n8k* A/B/C tables):
// X_n of FFT g in register `n / 4` of lane `4 g + n % 4` (complex word, re low), so the
// k16 tile J takes registers 2J, 2J + 1 and the k8 tile register `2N / 16 * 2`; Y_q
// (row tile `q / 8`) of FFTs 2t and 2t + 1 in lane `4 (q % 8) + t`: register 0 the real
// parts, register 1 the imaginary ones, half `s & 1` FFT s.

/// The N that have the direct DFT (see above): N = 20 only; at N = 24 it measured 58.0
/// GFFT/s against the three-factor FFT's 59.7 (BENCHMARKS.md), so it is not built.
pub const fn has_direct_dft(n: u32) -> bool {
    n == 20
}

/// FFTs per warp of the direct DFT (the B operand's 8 columns).
pub const DIRECT_FFTS_PER_WARP: u32 = 8;

/// Largest [`direct_words`] (N = 20): the kernels' register array size.
pub const DIRECT_MAX_WORDS: usize = 50;

/// Full m16n8k16 k tiles of the direct DFT, `2N / 16` rounded down.
pub const fn direct_k16_tiles(n: u32) -> u32 {
    2 * n / 16
}

/// Whether a trailing m16n8k8 covers the last 8 contracted reals (`N % 8 = 4`).
pub const fn direct_has_k8(n: u32) -> bool {
    (2 * n) % 16 == 8
}

/// A-operand words per lane of one row tile: 4 per k16 tile, 2 for the k8 tile (= N / 2).
pub const fn direct_tile_words(n: u32) -> u32 {
    4 * direct_k16_tiles(n) + if direct_has_k8(n) { 2 } else { 0 }
}

/// A-operand words per lane of the whole F (N / 4 row tiles): the image is `[word][lane]`.
pub const fn direct_words(n: u32) -> u32 {
    (n / 4) * direct_tile_words(n)
}

/// Element (i, j) of row tile `tile` of the direct DFT's A matrix as `(q, n, entry)` of
/// `exp(2 pi i n q / 2N)`: `i = q0 q1 q2 ReIm_out`, `j = ReIm_in n..` over the whole 2N.
pub const fn direct_entry(tile: u32, i: u32, j: u32) -> (u32, u32, RealEntry) {
    (8 * tile + (i & 7), j >> 1, realify(i >> 3, j & 1))
}

/// Where `X_n` (part `reim`) of FFT `s` of a warp lives (B operand).
pub const fn direct_x_location(n: u32, s: u32, reim: u32) -> Location {
    Location { lane: 4 * s + n % 4, register: n / 4, element: reim }
}

/// Where `Y_q` (part `reim`) of FFT `s` lives (C result of row tile `q / 8`): `register` is
/// counted over the tiles, `2 (q / 8) + reim`.
pub const fn direct_y_location(q: u32, s: u32, reim: u32) -> Location {
    Location { lane: 4 * (q % 8) + s / 2, register: 2 * (q / 8) + reim, element: s & 1 }
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

const fn next_power_of_two(x: u32) -> u32 {
    1 << (32 - (x - 1).leading_zeros())
}

const fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Table 2's derived constants and the shared-memory layouts of seed sec. 4.5, in 4-byte
/// words (`Fsh1[]` and `Fsh2[]` are int32 arrays, `Gsh[]` is half2).
impl FrbCase {
    /// `M` and `N` padded to powers of two (eq. 73).
    pub const fn m_pad(&self) -> u32 {
        next_power_of_two(self.m)
    }
    pub const fn n_pad(&self) -> u32 {
        next_power_of_two(self.n)
    }
    /// m-indices per mini-tile, `32 / N_pad` (eq. 100).
    pub const fn mt(&self) -> u32 {
        32 / self.n_pad()
    }
    /// Mega-tile shape `(T_w x M_w)` mini-tiles (eq. 104).
    pub const fn mw(&self) -> u32 {
        gcd(self.m / self.mt(), self.warps)
    }
    pub const fn tw(&self) -> u32 {
        self.warps / self.mw()
    }
    /// Mega-tiles per thread block, `(T_r x M_r)` (eq. 105).
    pub const fn mr(&self) -> u32 {
        self.m / (self.mw() * self.mt())
    }
    pub const fn tr(&self) -> u32 {
        self.t_outer / 2 / self.tw()
    }
    /// `Freg1[]` and `Freg2[]` registers per thread (eqs. 93, 106).
    pub const fn freg1_registers(&self) -> u32 {
        self.dishes.div_ceil(self.warps)
    }
    pub const fn freg2_registers(&self) -> u32 {
        self.tr() * self.mr()
    }
    /// Eq. 65: the d_hi stride of `Fsh1[]`.
    pub const fn sigma_f1(&self) -> u32 {
        if self.dishes == 64 {
            260
        } else {
            257
        }
    }
    /// Eq. 70: the n stride of `Fsh2[]`.
    pub const fn sigma_f2(&self) -> u32 {
        32 * (self.m + 1) + self.mt()
    }
    /// Eqs. 74-75: the bit-reversed q_1.. stride and the q_0 stride of `Gsh[]`.
    pub const fn sigma_g1(&self) -> u32 {
        2 * self.m_pad() * self.t_inner + 32 / self.n_pad()
    }
    pub const fn sigma_g0(&self) -> u32 {
        self.n_pad() * self.sigma_g1() + self.m_pad()
    }
    /// Footprints in bytes (eqs. 66, 71, 77) and the union's (eq. 60).
    pub const fn fsh1_bytes(&self) -> u32 {
        4 * self.sigma_f1() * (self.dishes / 8)
    }
    pub const fn fsh2_bytes(&self) -> u32 {
        4 * self.n * self.sigma_f2()
    }
    pub const fn gsh_bytes(&self) -> u32 {
        4 * 2 * self.sigma_g0()
    }
    pub const fn shared_bytes(&self) -> u32 {
        let a = self.fsh1_bytes();
        let b = self.fsh2_bytes();
        let c = self.gsh_bytes();
        let ab = if a > b { a } else { b };
        if ab > c {
            ab
        } else {
            c
        }
    }
    /// Eq. 64: word of `Fsh1[tau][d]`, strides (tau, d_lo, d_hi) = (1, 32, Sigma_F1).
    pub const fn fsh1_word(&self, tau: u32, d: u32) -> u32 {
        tau + 32 * (d & 7) + self.sigma_f1() * (d >> 3)
    }
    /// Eq. 69: word of `Fsh2[tau][m][n]`, strides (tau, m, n) = (1, 33, Sigma_F2).
    pub const fn fsh2_word(&self, tau: u32, m: u32, n: u32) -> u32 {
        tau + 33 * m + self.sigma_f2() * n
    }
    /// Eq. 76: word of `Gsh[tau][pol][m][q]`: m stride 1, pol M_pad, tau 2 M_pad, the
    /// bit-reversed `q >> 1` Sigma_G1, `q & 1` Sigma_G0.
    pub const fn gsh_word(&self, tau: u32, pol: u32, m: u32, q: u32) -> u32 {
        let bits = self.n_pad().trailing_zeros();
        let qr = q >> 1;
        let brev = if bits == 0 { 0 } else { qr.reverse_bits() >> (32 - bits) };
        m + pol * self.m_pad() + tau * 2 * self.m_pad() + brev * self.sigma_g1() + (q & 1) * self.sigma_g0()
    }
    /// Eq. 102 with eq. 104: the (tau, m, n) that register (tr, mr) of lane `t` in warp `w`
    /// holds in `Freg2[]`, with `padded` set where n is zero padding (`n_lo >= N/4`).
    ///
    /// Two places differ from the seed's pseudocode (108)-(109), which this follows
    /// otherwise: `n_lo` is `n_lo0 + 2 (field / M_t)` as eq. 102 says (108 adds
    /// `field / M_t` unshifted), and register `tr` holds `tau = tau_w + T_w tr` (109 steps
    /// tau by 1 per `tr`, which collides with `tau_w` whenever `T_w > 1`); with `T_w tr` an
    /// inner block of `T_inner` samples is `T_inner / T_w` whole registers (eq. 110).
    pub const fn freg2_element(&self, w: u32, t: u32, tr: u32, mr: u32) -> Freg2Element {
        let mt = self.mt();
        // t0 t1 t2 t3 t4 <-> n_hi0 n_hi1 n_lo0 [m0..m(4-nu) n_lo1..n_lo(nu-3)]
        let field = t >> 3;
        let m_in = field % mt;
        let n_lo = ((t >> 2) & 1) | ((field / mt) << 1);
        let n_hi = t & 3;
        let (tau_w, m_w) = (w / self.mw(), w % self.mw());
        Freg2Element {
            tau: tau_w + self.tw() * tr,
            m: m_in + mt * (m_w + self.mw() * mr),
            n: n_hi * (self.n / 4) + n_lo,
            padded: n_lo >= self.n / 4,
        }
    }
}

impl FrbCase {
    /// The `Fsh2[]` word lane `t` of warp `w` loads into `Freg2[tr][mr]` (sec. 4.9). A
    /// zero-padded lane (masked to zero afterwards) loads the word of `n_lo = 0` in its own
    /// `n_hi` group, which a real lane of the warp loads too: a broadcast, so in bounds and
    /// conflict-free. (The seed's "same bank, in bounds" substitute `s0 & 31` is a second
    /// word in a used bank whenever the padded `n` is itself in bounds, as in case 2.)
    pub const fn freg2_load_word(&self, w: u32, t: u32, tr: u32, mr: u32) -> u32 {
        let e = self.freg2_element(w, t, tr, mr);
        let n = if e.padded { (t & 3) * (self.n / 4) } else { e.n };
        self.fsh2_word(e.tau, e.m, n)
    }
}

impl FrbCase {
    /// Sec. 4.10: the `Gsh[]` element `(tau, pol, m, q)` that lane `t` of warp `w` stores
    /// from register `r` (`r <-> q_lo0`, eq. 120) after the first FFT of the mini-tile in
    /// `Freg2[tr][mr]`, `tau` counted inside the inner block (`tr < T_inner / T_w`). The
    /// lanes are eq. 26's output assignment with `u = q_hi` and the spectator `s = m`
    /// within the mini-tile; `q` runs over the padded `2 N_pad`.
    pub const fn gsh_write_element(
        &self,
        w: u32,
        t: u32,
        tr: u32,
        mr: u32,
        pol: u32,
        r: u32,
    ) -> (u32, u32, u32, u32) {
        let (q_hi, m_in) = split_field3(self.n, t >> 2);
        let q = 8 * q_hi + (r | ((t & 3) << 1));
        let (tau_w, m_w) = (w / self.mw(), w % self.mw());
        (tau_w + self.tw() * tr, pol, m_in + self.mt() * (m_w + self.mw() * mr), q)
    }

    /// `G`-array tiles of the second FFT (eq. 121): `2N / (32 / M_pad)` of them, each all m
    /// and `32 / M_pad` consecutive q.
    pub const fn g_tiles(&self) -> u32 {
        2 * self.n / (32 / self.m_pad())
    }

    /// Sec. 4.11: the `(m, q)` lane `t` reads for `G`-tile `tile` (eq. 123: eq. 25 with
    /// `c = m_hi`, `d = m_lo`, spectator `s = q` within the tile), and whether `m_lo` is
    /// zero padding (`m_lo >= M/4`, case 5 only), whose value the kernel masks to zero.
    pub const fn gsh_read_element(&self, t: u32, tile: u32) -> (u32, u32, bool) {
        let (m_hi, m_lo, q_in) = x_coordinates(self.m, t);
        let m = (self.m / 4) * m_hi + m_lo;
        (m, tile * (32 / self.m_pad()) + q_in, m_lo >= self.m / 4)
    }
}

/// The E -> F shuffle of sec. 4.6 (eqs. 80-82), thread-local, 28 operations (8 `prmt` for a
/// 4 x 4 byte transpose, then per output register two shifts, two single-immediate `lop3`s
/// and one `prmt`); for the seed's design, not used by a kernel yet.
/// Input: four ci4 words `e[tau_hi + 2 pol]`, nibble `ReIm + 2 d` (eq. 80: byte d of a word
/// is dish d, real part low). Output: `f[d]`, nibble `pol + 2 tau_hi + 4 ReIm` (eq. 81), so
/// the low 16 bits hold the four real parts and the high 16 the imaginary ones (the
/// `b2 <-> ReIm` that sec. 4.10's int4 -> f16 unpacking wants). `prmt` is the device
/// instruction or its host model `packing::byte_perm`.
#[inline(always)]
pub fn e_to_f_shuffle<P: Fn(u32, u32, u32) -> u32>(e: [u32; 4], prmt: P) -> [u32; 4] {
    // Byte p = pol + 2 tau_hi of t[d] is dish d of e[tau_hi + 2 pol]: pair e0 with e2 and e1
    // with e3, so that p comes out in output order.
    let lo02 = prmt(e[0], e[2], 0x5140);
    let hi02 = prmt(e[0], e[2], 0x7362);
    let lo13 = prmt(e[1], e[3], 0x5140);
    let hi13 = prmt(e[1], e[3], 0x7362);
    let t = [
        prmt(lo02, lo13, 0x5410),
        prmt(lo02, lo13, 0x7632),
        prmt(hi02, hi13, 0x5410),
        prmt(hi02, hi13, 0x7632),
    ];
    t.map(|t| {
        // Bytes 0 and 2 of `re`: (re_p, re_p+1); bytes 1 and 3 of `im`: (im_p, im_p+1).
        let re = (t & 0x0f0f_0f0f) | ((t >> 4) & 0xf0f0_f0f0);
        let im = ((t << 4) & 0x0f0f_0f0f) | (t & 0xf0f0_f0f0);
        prmt(re, im, 0x7520)
    })
}

/// The four ci4 samples of an E word (byte j: real part in the low nibble) as f16x2 words
/// `(1032 + Re, 1032 + Im)`, exactly, with no int-to-float conversion: the biased nibbles
/// `v ^ 8 = v + 8` become the low mantissa bits of 1024 (f16 `0x6400`). Two masks, two
/// `prmt`s to pair (re, im) bytes, one `prmt` per sample to put them under the `0x64` bytes.
/// `prmt` is the device instruction or its host model `packing::byte_perm`.
#[inline(always)]
pub fn ci4_biased_f16x2<P: Fn(u32, u32, u32) -> u32>(word: u32, prmt: P) -> [u32; 4] {
    let re = (word & 0x0f0f_0f0f) ^ 0x0808_0808;
    let im = ((word >> 4) & 0x0f0f_0f0f) ^ 0x0808_0808;
    let pairs = [prmt(re, im, 0x5140), prmt(re, im, 0x7362)];
    [
        prmt(pairs[0], 0x6464_6464, 0x4140),
        prmt(pairs[0], 0x6464_6464, 0x4342),
        prmt(pairs[1], 0x6464_6464, 0x4140),
        prmt(pairs[1], 0x6464_6464, 0x4342),
    ]
}

/// The f16 bits of -1032, which [`ci4_biased_f16x2`]'s halves carry as a bias.
pub const CI4_F16_BIAS: u32 = 0xe408;

/// One `Freg2[]` slot: see [`FrbCase::freg2_element`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Freg2Element {
    pub tau: u32,
    pub m: u32,
    pub n: u32,
    pub padded: bool,
}

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

/// Threads per block of the straightforward FRB kernel ([`frb_beamform_kernel`]).
pub const FRB_THREADS: u32 = 256;

/// Largest T_ds for which the first FRB kernel sums `|Et|^2` in f16 over the whole output
/// sample (`2 T_ds` terms; the `*_f16sum` entry points, 64 registers: four blocks of 8 warps
/// per SM, and full CHORD's even/odd kernel, whose halves hold the two polarisations:
/// `T_ds` terms per half). Above it, the f16 partial sums of each phase (at most `2 T_inner` terms) are
/// added in f32 (the plain entry points, 80 registers at full CHORD: three blocks per SM).
/// An f16 running sum of many similar positive terms rounds each new term to the sum's
/// ulp, so its error grows with the count: measured on random data (H200), relative L2 errors
/// of I of 6e-3 at T_ds = 144 and 9e-3 at 192 against 7e-4 at T_ds <= 3, inside the host's
/// bound of 2^-6 there but with no bound for every T_ds.
pub const FRB_F16_SUM_MAX_T_DS: u32 = 96;

/// The first FRB kernel's entry point for a case and T_ds (see [`FRB_F16_SUM_MAX_T_DS`]);
/// its dynamic shared memory is [`frb_beamform_shared_bytes`], or [`eo_shared_bytes`] (and
/// [`EO_THREADS`] threads) where [`eo_applies`].
pub const fn frb_beamform_kernel(case: &FrbCase, t_ds: u32) -> Option<&'static str> {
    let f16_sum = t_ds <= FRB_F16_SUM_MAX_T_DS;
    Some(match (case.dishes, case.m, case.n, f16_sum) {
        (64, 8, 8, false) => "frb_beamform_d64_m8_n8",
        (64, 8, 12, false) => "frb_beamform_d64_m8_n12",
        (256, 16, 16, false) => "frb_beamform_d256_m16_n16",
        (256, 16, 20, false) => "frb_beamform_d256_m16_n20",
        (512, 24, 24, false) => "frb_beamform_d512_m24_n24",
        (64, 8, 8, true) => "frb_beamform_d64_m8_n8_f16sum",
        (64, 8, 12, true) => "frb_beamform_d64_m8_n12_f16sum",
        (256, 16, 16, true) => "frb_beamform_d256_m16_n16_f16sum",
        (256, 16, 20, true) => "frb_beamform_d256_m16_n20_f16sum",
        (512, 24, 24, true) => "frb_beamform_d512_m24_n24_eo",
        _ => return None,
    })
}

/// Words of one `G[tau][pol][m][.]` row (one m): the least stride of at least 2N that is
/// `2^(5-r_M)` times an odd number, so that the second FFT's loads (lane `(c, d, s)` reads
/// row `(M/4) c + d < 32 / 2^(5-r_M)`, column `q0 + s`, s below `2^(5-r_M)`) hit 32 distinct
/// banks: the rows land on distinct multiples of `2^(5-r_M)` and the spectators fill the
/// gaps. (The unpadded 2N was up to 16-way, 12-way at full CHORD.)
pub const fn frb_g_row_words(case: &FrbCase) -> u32 {
    let s = ffts_per_warp(case.m);
    let mut w = 2 * case.n;
    while !w.is_multiple_of(s) || (w / s).is_multiple_of(2) {
        w += 1;
    }
    w
}

/// The `G` word the second FFT's lane `lane` loads for the column block `q0` (a multiple of
/// the spectator count) of row block `row0` (`(tau 2 + pol) M`); `None` for zero-padding lanes.
pub const fn frb_g_load_word(case: &FrbCase, lane: u32, row0: u32, q0: u32) -> Option<u32> {
    let (c, d, s) = x_coordinates(case.m, lane);
    if d >= case.m / 4 {
        return None;
    }
    Some((row0 + (case.m / 4) * c + d) * frb_g_row_words(case) + q0 + s)
}

/// The two `G` words (v even, v odd) the first FFT's lane `lane` stores for FFT row block
/// `row0` (`call * 2^(5-r_N)`); `None` for zero-padding lanes (`u >= N/4`).
pub const fn frb_g_store_words(case: &FrbCase, lane: u32, row0: u32) -> Option<[u32; 2]> {
    let (u, v, s_out, _) = y_coordinates(case.n, Location { lane, register: 0, element: 0 });
    if u >= case.n / 4 {
        return None;
    }
    let w = (row0 + s_out) * frb_g_row_words(case) + 8 * u + v;
    Some([w, w + 1])
}

/// Dynamic shared memory of the straightforward kernel: `X` (`2 M N` words per sample) and
/// `G` (`2 M` rows of [`frb_g_row_words`] per sample) for one phase of `T_inner` samples
/// (56064 bytes for full CHORD).
pub const fn frb_beamform_shared_bytes(case: &FrbCase) -> u32 {
    4 * case.t_inner * 2 * case.m * (case.n + frb_g_row_words(case))
}

/// First-FFT calls a warp of the straightforward kernel keeps in flight: 4 where a warp
/// has at least 16 calls per phase (cases 3-5), else 2 (measured, BENCHMARKS.md).
pub const fn frb_first_fft_unroll(case: &FrbCase) -> u32 {
    let calls = case.t_inner * 2 * case.m / ffts_per_warp(case.n) / (FRB_THREADS / 32);
    if calls >= 16 {
        4
    } else {
        2
    }
}

/// Second-FFT calls (column blocks) per warp per sample, `2N / 2^(5-r_M) / 8` rounded up;
/// the kernel unrolls them fully (at most 6).
pub const fn frb_second_fft_calls(case: &FrbCase) -> u32 {
    (2 * case.n / ffts_per_warp(case.m)).div_ceil(FRB_THREADS / 32)
}

// --- Part B': full CHORD's kernel with the even/odd direct DFT ---------------------------
//
// At M = N = 24 the three-factor FFT pads d and u from 6 to 8 (a quarter of each MMA is
// zeros) and spends four f16x2 twiddle ops per FFT on the FP16 pipe, which Hopper overlaps
// only partly with the MMAs. Splitting the padded 48-point DFT by the parity of n instead
// needs no twiddle: with `E_q = sum_{n even} w^(nq) X_n`, `O_q = sum_{n odd} w^(nq) X_n`
// (`w = exp(2 pi i / 48)`, q < 24), `Y_q = E_q + O_q` and `Y_(q+24) = E_q - O_q`
// (`w^(24 n) = (-1)^n`). Each of E and O is three row tiles (8 q x ReIm) of one m16n8k16
// plus one m16n8k8 over its 12 complex inputs (no padding), eight FFTs per warp (the B
// columns): per FFT 0.75 k16 + 0.75 k8 and 1.5 f16x2 adds, against the three-factor FFT's
// one k16, one k8 and four f16x2 ops. The A operand (the 2 x 3 x 6 = [`EO_WORDS`] words
// per lane of [`eo_k_entry`]'s matrix) is the same for both FFTs at M = N.
//
// Both FFTs read their B operand "planar": a word holds the real (or imaginary) parts of two
// points `4a + par` and `4a + 2 + par` (pair a, parity par, half e = 0, 1), so the first
// FFT's C registers (Re of two columns, Im of two columns) are stored with no byte shuffle
// and read back by the second FFT as its B registers. Contraction index k of a k16 tile:
// `k0 = e`, `k1 k2 = a`, `k3 = ReIm`; of a k8 tile: `k0 = e`, `k1 = a - 4`, `k2 = ReIm`.
//
// Block: 6 warps, phases of [`EO_TB`] samples. First FFT: warp w takes pol `w / 3` and the
// third `w % 3` of the 24 grid rows (columns g: pair `4 (w % 3) + g / 2`, half `g % 2`) for
// every sample. Second FFT: warp w owns the q blocks `b = w` and `w + 6` (columns g: `q = 4 b
// + g / 2`, pol `g % 2`), so both polarisations of a pixel land in the two halves of one
// accumulator register, added when I is written.

/// Grid side of the even/odd kernel (M = N).
pub const EO_N: u32 = 24;
/// Warps and threads per block of the even/odd kernel.
pub const EO_WARPS: u32 = 6;
pub const EO_THREADS: u32 = 32 * EO_WARPS;
/// Samples per phase.
pub const EO_TB: u32 = 4;
/// A-operand words per lane: parity (2) x row tile (3) x (k16: 4, k8: 2).
pub const EO_WORDS: usize = 36;
/// `X` words per grid row (24 used: `par 12 + ReIm 6 + a`; 28 makes the loads conflict free).
pub const EO_X_ROW: u32 = 28;
/// `X` words per phase.
pub const EO_X_WORDS: u32 = EO_TB * 2 * EO_N * EO_X_ROW;
/// `G` strides in words: ReIm, pair (`par 6 + a`), pol, sample. See
/// `eo_patterns_are_conflict_free` for why these values.
pub const EO_G_RS: u32 = 48;
pub const EO_G_PS: u32 = 104;
pub const EO_G_POLS: u32 = 1252;
pub const EO_G_TS: u32 = 2504;

/// Register caps of the first FRB kernels (`.maxnreg`, applied by build.rs). The 64-register
/// caps keep four blocks of 8 warps per SM where the 64-bit element offsets of E and I
/// (`wide_offset`) would otherwise take ptxas to 65-72 registers (three blocks); none spills
/// (the ptxas test checks).
pub const REGISTER_LIMITS: [(&str, u32); 4] = [
    ("frb_beamform_d512_m24_n24_eo", 112),
    ("frb_beamform_d64_m8_n8", 64),
    ("frb_beamform_d256_m16_n16", 64),
    ("frb_beamform_d256_m16_n16_f16sum", 64),
];

/// Dynamic shared memory of the even/odd kernel (73856 bytes): `X`, `G`, and the gridding
/// table (per E word: four X slots, four weight pairs).
pub const fn eo_shared_bytes() -> u32 {
    4 * (EO_X_WORDS + EO_TB * EO_G_TS + 12 * 2 * 512 / 4)
}

/// Output samples `first .. end` of block chunk `chunk` (each chunk `tbar_per_block` of the
/// `out_times`, the last one short), in both first-kernel families. Exact for every argument
/// (the product in 64 bits, no sum past `out_times`); a chunk past the end is empty
/// (`(out_times, out_times)`).
pub const fn chunk_output_samples(chunk: u32, tbar_per_block: u32, out_times: u32) -> (u32, u32) {
    let first = chunk as u64 * tbar_per_block as u64;
    if first >= out_times as u64 {
        return (out_times, out_times);
    }
    let first = first as u32;
    let left = out_times - first;
    (first, first + if tbar_per_block < left { tbar_per_block } else { left })
}

/// Whether the even/odd kernel runs this case and T_ds (full CHORD, f16 sums).
pub const fn eo_applies(case: &FrbCase, t_ds: u32) -> bool {
    case.dishes == 512 && case.m == EO_N && case.n == EO_N && t_ds <= FRB_F16_SUM_MAX_T_DS
}

/// Contraction index k of a k16 (`k8 = false`) or k8 tile of parity `par` as `(n, ReIm)`.
pub const fn eo_k_entry(par: u32, k8: bool, k: u32) -> (u32, u32) {
    if k8 {
        (16 + 4 * ((k >> 1) & 1) + 2 * (k & 1) + par, (k >> 2) & 1)
    } else {
        (4 * ((k >> 1) & 3) + 2 * (k & 1) + par, k >> 3)
    }
}

/// The image word of A register `reg` of parity `par`, row tile `tile`, k16 or k8.
pub const fn eo_word(par: u32, tile: u32, k8: bool, reg: u32) -> u32 {
    (par * 3 + tile) * 6 + if k8 { 4 } else { 0 } + reg
}

/// The planar pair word `(a, ReIm)` that `lane` loads into B register `reg` of a tile
/// (from the m16n8k16 / m16n8k8 B tables: `k1 k2` are lane bits 0-1, `k3` the register).
pub const fn eo_b_pair(k8: bool, lane: u32, reg: u32) -> (u32, u32) {
    if k8 {
        (4 + (lane & 1), (lane >> 1) & 1)
    } else {
        (lane & 3, reg)
    }
}

/// The `X` row of grid row m inside its (tau, pol) block: `8 c3 + g` for the first FFT's
/// warp third c3 and column g that take m ([`eo_first_m`] inverted), so that the eight
/// columns' rows are consecutive (conflict-free loads with the row stride 28).
pub const fn eo_x_row(m: u32) -> u32 {
    2 * ((m & 1) * 6 + (m >> 2)) + ((m >> 1) & 1)
}

/// `X` word and half of `X` row `row` (`(tau 2 + pol) M + eo_x_row(m)`), point n, part `reim`.
pub const fn eo_x_word(row: u32, n: u32, reim: u32) -> (u32, u32) {
    (row * EO_X_ROW + (n & 1) * 12 + reim * 6 + (n >> 2), (n >> 1) & 1)
}

/// First FFT: the grid row m of column g for warp third `c3`.
pub const fn eo_first_m(c3: u32, g: u32) -> u32 {
    let pp = 4 * c3 + g / 2;
    4 * (pp % 6) + 2 * (g & 1) + pp / 6
}

/// First FFT: the `X` word lane `lane` of warp w loads for sample u, parity `par`, k16 or
/// k8, B register `reg`.
pub const fn eo_first_load_word(w: u32, lane: u32, u: u32, par: u32, k8: bool, reg: u32) -> u32 {
    let row = (u * 2 + w / 3) * EO_N + 8 * (w % 3) + lane / 4;
    let (a, reim) = eo_b_pair(k8, lane, reg);
    row * EO_X_ROW + par * 12 + reim * 6 + a
}

/// `G` word and half of `(tau, pol, m, ReIm, q)`.
pub const fn eo_g_word(tau: u32, pol: u32, m: u32, reim: u32, q: u32) -> (u32, u32) {
    let pp = (m & 1) * 6 + (m >> 2);
    (tau * EO_G_TS + pol * EO_G_POLS + pp * EO_G_PS + reim * EO_G_RS + q, (m >> 1) & 1)
}

/// First FFT: the `G` word lane `lane` of warp w stores from its C register `reim` of row
/// tile `tile`, half h (`q = 8 tile + 24 h + lane / 4`), sample u.
pub const fn eo_first_store_word(w: u32, lane: u32, u: u32, tile: u32, h: u32, reim: u32) -> u32 {
    let m = eo_first_m(w % 3, 2 * (lane & 3));
    eo_g_word(u, w / 3, m, reim, 8 * tile + 24 * h + lane / 4).0
}

/// Second FFT: the `G` word lane `lane` loads for sample t, q block b, parity `par`, k16 or
/// k8, B register `reg` (column `g = lane / 4`: `q = 4 b + g / 2`, pol `g % 2`).
pub const fn eo_second_load_word(lane: u32, t: u32, b: u32, par: u32, k8: bool, reg: u32) -> u32 {
    let g = lane / 4;
    let (a, reim) = eo_b_pair(k8, lane, reg);
    eo_g_word(t, g & 1, 4 * a + par, reim, 4 * b + g / 2).0
}

/// Second FFT output: `(p, q)` of lane `lane`'s accumulator for q block b, row tile `tile`,
/// half h (the register's halves are pol 0 and pol 1).
pub const fn eo_output_pixel(lane: u32, b: u32, tile: u32, h: u32) -> (u32, u32) {
    (8 * tile + 24 * h + lane / 4, 4 * b + (lane & 3))
}

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
pub use device::*;

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
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
        /// Word 3 of the dense G3 (equal to word 0): a register of its own, so that the
        /// m16n8k16's four A registers are distinct and ptxas needs no copies to make them
        /// consecutive (see [`short_fft_g3w`]).
        pub g3w3: u32,
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
                g3w3: w[G3_WORD + 3],
            }
        }
    }

    /// The short FFT (eqs. 28-30): `x` in the register assignment of eq. 25, the result
    /// `[Re, Im]` in that of eq. 26. Warp-collective.
    #[inline(always)]
    pub fn short_fft<const N: u32>(x: u32, g: &FftGammas) -> [u32; 2] {
        short_fft_g3w::<N>(x, g, false)
    }

    /// [`short_fft`]; with `g3w` (a constant after inlining) the dense third MMA takes its fourth A register from
    /// `g.g3w3` instead of repeating `g.g3[0]` (same value, no register copies).
    #[inline(always)]
    pub fn short_fft_g3w<const N: u32>(x: u32, g: &FftGammas, g3w: bool) -> [u32; 2] {
        let z = mma_m16n8k8_f16(g.g1, x, [0, 0]);
        // Eq. 29 elementwise: Re W = Re G Re Z - Im G Im Z, Im W = Re G Im Z + Im G Re Z.
        let w = [hfma2(g.g2[2], z[1], hmul2(g.g2[0], z[0])), hfma2(g.g2[1], z[0], hmul2(g.g2[0], z[1]))];
        match sparse_selector(N) {
            Some(1) => mma_sp_m16n8k16_f16::<1>([g.g3[0], g.g3[1]], w, [0, 0], g.e),
            Some(_) => mma_sp_m16n8k16_f16::<2>([g.g3[0], g.g3[1]], w, [0, 0], g.e),
            None => {
                mma_m16n8k16_f16([g.g3[0], g.g3[1], g.g3[2], if g3w { g.g3w3 } else { g.g3[0] }], w, [0, 0])
            }
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

    /// Reads this lane's [`direct_words`] words of a `[word][lane]` direct-DFT image.
    ///
    /// # Safety
    /// `image` must hold `32 * direct_words(N)` readable words.
    #[inline(always)]
    pub unsafe fn direct_load<const N: u32>(image: *const u32) -> [u32; DIRECT_MAX_WORDS] {
        let lane = lane_id() as usize;
        let mut f = [0u32; DIRECT_MAX_WORDS];
        // A trip count of exactly the used words unrolls fully (f stays in registers).
        let mut k = 0;
        while k < direct_words(N) as usize {
            f[k] = *image.add(32 * k + lane);
            k += 1;
        }
        f
    }

    /// The direct DFT of eight FFTs (Part A' above): `x[n / 4]` in the B map, the result's
    /// row tile T in `y[T]` (registers Re, Im). Warp-collective.
    #[inline(always)]
    pub fn direct_dft<const N: u32>(f: &[u32; DIRECT_MAX_WORDS], x: &[u32; 6]) -> [[u32; 2]; 6] {
        let mut y = [[0u32; 2]; 6];
        let k16 = direct_k16_tiles(N) as usize;
        let tw = direct_tile_words(N) as usize;
        unroll_pairs::<6>(|tile| {
            if tile < (N / 4) as usize {
                let a = tile * tw;
                let mut acc = [0u32; 2];
                unroll_pairs::<3>(|kt| {
                    if kt < k16 {
                        let a = a + 4 * kt;
                        acc = mma_m16n8k16_f16(
                            [f[a], f[a + 1], f[a + 2], f[a + 3]],
                            [x[2 * kt], x[2 * kt + 1]],
                            acc,
                        );
                    }
                });
                if direct_has_k8(N) {
                    let a = a + 4 * k16;
                    acc = mma_m16n8k8_f16([f[a], f[a + 1]], x[2 * k16], acc);
                }
                y[tile] = acc;
            }
        });
        y
    }

    /// Test kernel of the direct DFT: warp w does FFTs `8 w .. 8 w + 8` of `x` `[batch][N]`
    /// into `y` `[batch][2N]` (complex f16 words).
    #[inline(always)]
    unsafe fn direct_batch<const N: u32>(image: *const u32, x: *const u32, y: *mut u32, batch: u32) {
        let f = direct_load::<N>(image);
        let lane = lane_id();
        let warp = global_thread_x() / 32;
        let fft_in = warp * DIRECT_FFTS_PER_WARP + lane / 4;
        let mut input = [0u32; 6];
        unroll_pairs::<6>(|m| {
            if (m as u32) < N / 4 && fft_in < batch {
                input[m] = *x.add((fft_in * N + 4 * m as u32 + lane % 4) as usize);
            }
        });
        let input = converged(input);
        // As in `fft_batch`: keep the MMAs out of the stores' branches.
        let out = converged_pairs(direct_dft::<N>(&f, &input));
        let s0 = warp * DIRECT_FFTS_PER_WARP + 2 * (lane % 4);
        unroll_pairs::<6>(|tile| {
            if (tile as u32) < N / 4 {
                let q = 8 * tile as u32 + lane / 4;
                if s0 < batch {
                    *y.add((s0 * 2 * N + q) as usize) = prmt(out[tile][0], out[tile][1], 0x5410);
                }
                if s0 + 1 < batch {
                    *y.add(((s0 + 1) * 2 * N + q) as usize) = prmt(out[tile][0], out[tile][1], 0x7632);
                }
            }
        });
    }

    /// Benchmark kernel of the direct DFT, as `fft_loop`: four independent groups of eight
    /// FFTs per iteration; group k's input register m is `x[4 t + (k + m) % 4] ^ (i & salt)`,
    /// and every output register is folded into the xor.
    #[inline(always)]
    unsafe fn direct_loop<const N: u32>(
        image: *const u32,
        x: *const u32,
        y: *mut u32,
        iterations: u32,
        salt: u32,
    ) {
        let f = direct_load::<N>(image);
        let t = global_thread_x() as usize;
        let xs = ld_global_nc_v4(x.add(4 * t));
        let mut acc = 0u32;
        let mut i = 0;
        while i < iterations {
            unroll!(k in [0, 1, 2, 3] {
                let mut input = [0u32; 6];
                unroll_pairs::<6>(|m| {
                    if (m as u32) < N / 4 {
                        input[m] = lop3::<0x78>(xs[(k + m) & 3], i, salt);
                    }
                });
                let out = direct_dft::<N>(&f, &input);
                unroll_pairs::<6>(|tile| {
                    if (tile as u32) < N / 4 {
                        acc = lop3::<0x96>(acc, out[tile][0], out[tile][1]);
                    }
                });
            });
            i += 1;
        }
        *y.add(t) = acc;
    }

    /// The straightforward first FRB kernel (correct first; not yet the seed's two-pass
    /// gridding of secs. 4.6-4.9 nor its register-resident FFT pipeline). Block b owns
    /// frequency `b % F` and the `tbar_per_block` output samples of chunk `b / F`, and runs
    /// over their time samples in phases of `TB` (the case's `T_inner`): thread t grids the
    /// four (pol, dish) pairs `4 t .. 4 t + 4` (one 4-byte E load per sample, all `TB` samples
    /// of the phase loaded before any is gridded: one global latency per phase), weighted
    /// (f16x2 complex product from biased nibbles: no int-to-float conversions, which run at
    /// a sixteenth of the FMA rate), into `X[tau][pol][m][n]` in shared memory
    /// (grid points without a dish stay zero); the warps run the first short FFT along n
    /// (`2^(5-r_N)` rows per call, `U` independent calls in flight) into `G[tau][pol][m][q]`
    /// (rows of `GS` words, [`frb_g_row_words`]: conflict-free loads below), then the second
    /// along m (`2^(5-r_M)` columns per call, both polarisations by the same lanes, all
    /// `CALLS` calls unrolled so that the sums `hacc[ci]`, `acc[ci]` are registers, not
    /// select chains) and accumulate `|Et|^2` with two f16x2 FMAs per FFT (in place of four
    /// f16 -> f32 conversions and four f32 ops): with `F16_SUM` over the whole output sample
    /// (64 registers at full CHORD: four blocks per SM), else per phase, each phase's f16 sums
    /// then added in f32. Written as f16 every `t_ds` samples to `I[f][tbar][p][q]`. Both FFTs
    /// take the dense G3's fourth word from its own register (`short_fft_g3w`), which saves
    /// ptxas two register copies per FFT. `grid[d] = m N + n`, weights `[f][pol][m][n]`, E
    /// `[tau][f][pol][d]`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn frb_beamform<
        const D: u32,
        const M: u32,
        const N: u32,
        const TB: u32,
        const CALLS: usize,
        const GS: u32,
        const U: usize,
        const F16_SUM: bool,
    >(
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
        let f = block_idx_x() % freqs;
        let out_times = times / t_ds;
        let (first_tbar, end_tbar) = chunk_output_samples(block_idx_x() / freqs, tbar_per_block, out_times);
        let (tau_begin, tau_end) = (first_tbar * t_ds, end_tbar * t_ds);
        let tid = thread_idx_x();
        let lane = lane_id();
        let warp = tid / 32;
        let warps = FRB_THREADS / 32;
        let x_base = dynamic_shared();
        let g_base = x_base + 4 * TB * 2 * M * N;
        let mut k = tid;
        while k < TB * 2 * M * N {
            st_shared_u32(x_base + 4 * k, 0);
            k += FRB_THREADS;
        }
        // The zeros must land before any thread grids its first sample over them.
        sync_threads();
        // This thread's pairs k = pol D + d = 4 tid + j (2D is a multiple of 4, at most
        // 4 * 256), their X slots and weights.
        let quad = 4 * tid < 2 * D;
        let mut slot = [0u32; 4];
        // `(Re W, Im W)` and `(-Im W, Re W)` as f16x2.
        let mut wh = [[0u32; 2]; 4];
        if quad {
            unroll!(j in [0, 1, 2, 3] {
                let k = 4 * tid + j as u32;
                let (pol, point) = (k / D, *grid.add((k % D) as usize));
                slot[j] = x_base + 4 * (pol * M * N + point);
                let wv = *weights.add(((f * 2 + pol) * M * N + point) as usize);
                wh[j] = [wv, prmt(wv, 0, 0x1032) ^ 0x8000];
            });
        }
        let gn = FftGammas::load(gammas_n);
        let gm = FftGammas::load(gammas_m);
        let calls1 = TB * 2 * M / ffts_per_warp(N);
        let calls2 = 2 * N / ffts_per_warp(M);
        let mut acc = [[0f32; 2]; 6];
        let mut hacc = [0u32; 6];
        // E's rows `(tau, f)` of 2D bytes and I's rows `(f, tbar)` of 4MN values start past
        // 2^32 bytes and values in large launches: their row indices (below 2^32, validated:
        // `T F < 2^32`) are counted in 32 bits from the phase's and output sample's, the
        // element offsets formed in 64 (`wide_offset`).
        let mut out_row = f * out_times + first_tbar;
        let mut e_row = tau_begin * freqs + f;
        let mut count = 0u32;
        // Samples left in the block (the phase's position is `e_row`; no end point is kept:
        // one register fewer through the FFTs).
        let mut left = tau_end - tau_begin;
        while left > 0 {
            let live = if left < TB { left } else { TB };
            if quad {
                let mut words = [0u32; 8];
                unroll!(t in [0, 1, 2, 3, 4, 5, 6, 7] {
                    if t < TB as usize && (t as u32) < live {
                        // Word `tid` of row `e_row + t F`, as a byte offset.
                        let at = 4 * (wide_offset(e_row + t as u32 * freqs, 2 * D / 4) + tid as usize);
                        words[t] = *e.add(at).cast::<u32>();
                    }
                });
                unroll!(t in [0, 1, 2, 3, 4, 5, 6, 7] {
                    if t < TB as usize && (t as u32) < live {
                        let biased = ci4_biased_f16x2(words[t], prmt);
                        unroll!(j in [0, 1, 2, 3] {
                            let value = weighted_ci4(biased[j], wh[j]);
                            st_shared_u32(slot[j] + 4 * t as u32 * 2 * M * N, value);
                        });
                    }
                });
            }
            sync_threads();
            // First FFT (eq. 56) along n: rows (tau, pol, m), U independent calls at a time
            // (warp-uniform validity: every lane runs every MMA).
            let (c, d, s) = x_coordinates(N, lane);
            let (u, v, s_out, _) = y_coordinates(N, Location { lane, register: 0, element: 0 });
            let mut call = warp;
            while call < calls1 {
                let mut input = [0u32; U];
                unroll_pairs::<U>(|j| {
                    let cj = call + warps * j as u32;
                    let row = cj * ffts_per_warp(N) + s;
                    if cj < calls1 && d < N / 4 {
                        input[j] = ld_shared_u32(x_base + 4 * (row * N + (N / 4) * c + d));
                    }
                });
                let input = converged(input);
                let mut y = [[0u32; 2]; U];
                unroll_pairs::<U>(|j| y[j] = short_fft_g3w::<N>(input[j], &gn, true));
                let y = converged_pairs(y);
                unroll_pairs::<U>(|j| {
                    let cj = call + warps * j as u32;
                    if cj < calls1 && u < N / 4 {
                        let at = g_base + 4 * ((cj * ffts_per_warp(N) + s_out) * GS + 8 * u + v);
                        st_shared_u32(at, prmt(y[j][0], y[j][1], 0x5410));
                        st_shared_u32(at + 4, prmt(y[j][0], y[j][1], 0x7632));
                    }
                });
                call += warps * U as u32;
            }
            sync_threads();
            // Second FFT (eq. 57) along m: columns q, both polarisations on the same lanes.
            let (c, d, s) = x_coordinates(M, lane);
            let mut t = 0;
            while t < live {
                unroll!(ci in [0, 1, 2, 3, 4, 5] {
                    let call = warp + warps * ci as u32;
                    if ci < CALLS && call < calls2 {
                        let q = call * ffts_per_warp(M) + s;
                        unroll!(pol in [0, 1] {
                            let row = (t * 2 + pol as u32) * M + (M / 4) * c + d;
                            let input = if d < M / 4 { ld_shared_u32(g_base + 4 * (row * GS + q)) } else { 0 };
                            let y = short_fft_g3w::<M>(converged([input])[0], &gm, true);
                            // |Et|^2 of p even and p odd in one f16x2 (b <-> v0).
                            hacc[ci] = hfma2(y[1], y[1], hfma2(y[0], y[0], hacc[ci]));
                        });
                    }
                });
                count += 1;
                if count == t_ds {
                    let (u, v, s_out, _) = y_coordinates(M, Location { lane, register: 0, element: 0 });
                    let row = out.add(wide_offset(out_row, 4 * M * N));
                    unroll!(ci in [0, 1, 2, 3, 4, 5] {
                        let call = warp + warps * ci as u32;
                        if ci < CALLS && call < calls2 && u < M / 4 {
                            let q = call * ffts_per_warp(M) + s_out;
                            let p = 8 * u + v;
                            let at = (p * 2 * N + q) as usize;
                            let h = if F16_SUM {
                                hacc[ci]
                            } else {
                                let (lo, hi) = f16x2_to_f32x2(hacc[ci]);
                                f32x2_to_f16x2(acc[ci][0] + lo, acc[ci][1] + hi)
                            };
                            *row.add(at) = h as u16;
                            *row.add(at + 2 * N as usize) = (h >> 16) as u16;
                        }
                        acc[ci] = [0.0, 0.0];
                        hacc[ci] = 0;
                    });
                    count = 0;
                    out_row += 1;
                }
                t += 1;
            }
            if !F16_SUM {
                // At most 2 T_inner terms per f16 partial sum.
                unroll!(ci in [0, 1, 2, 3, 4, 5] {
                    if ci < CALLS {
                        let (lo, hi) = f16x2_to_f32x2(hacc[ci]);
                        acc[ci] = [acc[ci][0] + lo, acc[ci][1] + hi];
                        hacc[ci] = 0;
                    }
                });
            }
            // The next phase overwrites X and G.
            sync_threads();
            left -= live;
            // (Past the block's last row after its last phase: never used.)
            e_row = e_row.wrapping_add(TB * freqs);
        }
    }

    /// Element offset `row row_len` of row `row` (a 32-bit index) of an array of rows of
    /// `row_len` elements, in 64 bits (one `mul.wide.u32`).
    #[inline(always)]
    fn wide_offset(row: u32, row_len: u32) -> usize {
        (row as u64 * row_len as u64) as usize
    }

    /// Element offset `(outer inner_len + inner) row_len` of row `(outer, inner)` of an
    /// array `[outer][inner_len][row_len]`: the row index in 32 bits, the offset in 64 (one
    /// `mul.wide.u32`). The first FRB kernels' E and I pass 2^32 bytes and values in launches
    /// `FrbConfig::validate` accepts, but never 2^32 rows (`T F < 2^32`, validated: E's
    /// `(tau, f)` rows of 2D bytes and I's `(f, tbar)` rows of 4MN values).
    #[inline(always)]
    fn row_offset(outer: u32, inner_len: u32, inner: u32, row_len: u32) -> usize {
        ((outer * inner_len + inner) as u64 * row_len as u64) as usize
    }

    /// The f16 sum of the two halves (bits of the result in the low 16).
    #[inline(always)]
    fn hsum_halves(a: u32) -> u16 {
        let out: u16;
        // SAFETY: pure f16 arithmetic on registers.
        unsafe {
            core::arch::asm!("{{ .reg .b16 l, h;", "mov.b32 {{l, h}}, {1};", "add.rn.f16 {0}, l, h; }}",
                out(reg16) out, in(reg32) a, options(pure, nomem, nostack))
        };
        out
    }

    /// The even/odd direct DFT of eight columns (Part B'): `x` = the B registers `[E k16 0,
    /// E k16 1, E k8, O k16 0, O k16 1, O k8]` (planar pair words), the result per row tile
    /// `[lo (q = 8 T + i), hi (q + 24)]` C registers. Warp-collective.
    #[inline(always)]
    fn eo_dft(a: &[u32; EO_WORDS], x: &[u32; 6]) -> [[[u32; 2]; 2]; 3] {
        let mut y = [[[0u32; 2]; 2]; 3];
        unroll!(t in [0, 1, 2] {
            let mut eo = [[0u32; 2]; 2];
            unroll!(par in [0, 1] {
                let w16 = eo_word(par as u32, t as u32, false, 0) as usize;
                let w8 = eo_word(par as u32, t as u32, true, 0) as usize;
                let acc = mma_m16n8k16_f16(
                    [a[w16], a[w16 + 1], a[w16 + 2], a[w16 + 3]],
                    [x[3 * par], x[3 * par + 1]],
                    [0, 0],
                );
                eo[par] = mma_m16n8k8_f16([a[w8], a[w8 + 1]], x[3 * par + 2], acc);
            });
            y[t] = [
                [hadd2(eo[0][0], eo[1][0]), hadd2(eo[0][1], eo[1][1])],
                [hsub2(eo[0][0], eo[1][0]), hsub2(eo[0][1], eo[1][1])],
            ];
        });
        y
    }

    /// Full CHORD's first FRB kernel with the even/odd direct DFT (Part B' above), f16 sums
    /// over T_ds (`t_ds <= FRB_F16_SUM_MAX_T_DS`). Same blocks, arguments (`image` the
    /// [`EO_WORDS`] x 32 A image in `gammas_m`'s place) and output as `frb_beamform`; the
    /// gridding writes `W E` planar (two 16-bit stores per sample) into `X`. Variants that
    /// loaded the next phase's E before this phase's FFTs, or issued two samples' second
    /// FFTs before accumulating either, measured slower (BENCHMARKS.md).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn frb_beamform_eo(
        e: *const u8,
        weights: *const u32,
        grid: *const u32,
        image: *const u32,
        out: *mut u16,
        freqs: u32,
        times: u32,
        t_ds: u32,
        tbar_per_block: u32,
    ) {
        const M: u32 = EO_N;
        const N: u32 = EO_N;
        const D: u32 = 512;
        const TB: u32 = EO_TB;
        const WORDS: u32 = 2 * D / 4;
        let f = block_idx_x() % freqs;
        let out_times = times / t_ds;
        let (first_tbar, end_tbar) = chunk_output_samples(block_idx_x() / freqs, tbar_per_block, out_times);
        let (tau_begin, tau_end) = (first_tbar * t_ds, end_tbar * t_ds);
        let tid = thread_idx_x();
        let lane = lane_id();
        let warp = tid / 32;
        let x_base = dynamic_shared();
        let g_base = x_base + 4 * EO_X_WORDS;
        let mut k = tid;
        while k < EO_X_WORDS {
            st_shared_u32(x_base + 4 * k, 0);
            k += EO_THREADS;
        }
        sync_threads();
        // Thread t grids the E words t and t + 192 (pairs 4 word .. 4 word + 4). Their X
        // slots and weights go to a table in shared memory (12 words per E word), read back
        // once per phase, so that they hold no registers through the FFTs.
        let table = g_base + 4 * EO_TB * EO_G_TS;
        unroll!(jw in [0, 1] {
            let word = tid + EO_THREADS * jw as u32;
            if word < WORDS {
                let mut slot = [0u32; 4];
                let mut wh = [0u32; 8];
                unroll!(j in [0, 1, 2, 3] {
                    let k = 4 * word + j as u32;
                    let (pol, point) = (k / D, *grid.add((k % D) as usize));
                    let (w, half) = eo_x_word(pol * M + eo_x_row(point / N), point % N, 0);
                    slot[j] = x_base + 4 * w + 2 * half;
                    let wv = *weights.add(((f * 2 + pol) * M * N + point) as usize);
                    wh[2 * j] = wv;
                    wh[2 * j + 1] = prmt(wv, 0, 0x1032) ^ 0x8000;
                });
                let at = table + 4 * 12 * word;
                st_shared_v4(at, slot);
                st_shared_v4(at + 16, [wh[0], wh[1], wh[2], wh[3]]);
                st_shared_v4(at + 32, [wh[4], wh[5], wh[6], wh[7]]);
            }
        });
        let mut a = [0u32; EO_WORDS];
        unroll_pairs::<EO_WORDS>(|k| a[k] = *image.add(32 * k + lane as usize));
        // Lane-constant word offsets (the rest are compile-time constants).
        let x16 = eo_first_load_word(warp, lane, 0, 0, false, 0);
        let x8 = eo_first_load_word(warp, lane, 0, 0, true, 0);
        let gst = eo_first_store_word(warp, lane, 0, 0, 0, 0);
        let g16 = eo_second_load_word(lane, 0, 0, 0, false, 0);
        let g8 = eo_second_load_word(lane, 0, 0, 0, true, 0);
        let mut hacc = [[[0u32; 2]; 3]; 2];
        let (mut tbar, mut count) = (first_tbar, 0u32);
        // I's channel f from a 64-bit offset once per block; within it, 32-bit offsets
        // (`out_times 4MN < 2^32`, validated).
        let out_f = out.add((f as u64 * out_times as u64 * (4 * M * N) as u64) as usize);
        let e4 = e as *const u32;
        // The E words of the live samples of the phase at `tau0`, all loaded before any is
        // gridded: one global latency per phase. Row offsets of E and I in 64 bits, as in
        // `frb_beamform`.
        let load = |tau0: u32, words: &mut [[u32; 4]; 2]| {
            // Row (tau0, f) in 64 bits once per phase; the phase's later rows `tau0 + t` lie
            // `t F WORDS` words on (below 2^27: F <= 65535), a 32-bit offset as before.
            let rows = e4.add(row_offset(tau0, freqs, f, WORDS));
            unroll!(jw in [0, 1] {
                let word = tid + EO_THREADS * jw as u32;
                if word < WORDS {
                    unroll!(t in [0, 1, 2, 3] {
                        if tau0 + (t as u32) < tau_end {
                            words[jw][t] = *rows.add((t as u32 * freqs * WORDS + word) as usize);
                        }
                    });
                }
            });
        };
        let mut words = [[0u32; 4]; 2];
        let mut tau0 = tau_begin;
        while tau0 < tau_end {
            let live = if tau_end - tau0 < TB { tau_end - tau0 } else { TB };
            load(tau0, &mut words);
            unroll!(jw in [0, 1] {
                let word = tid + EO_THREADS * jw as u32;
                if word < WORDS {
                    let at = table + 4 * 12 * word;
                    let slot = ld_shared_v4(at);
                    let w0 = ld_shared_v4(at + 16);
                    let w1 = ld_shared_v4(at + 32);
                    let wh = [[w0[0], w0[1]], [w0[2], w0[3]], [w1[0], w1[1]], [w1[2], w1[3]]];
                    unroll!(t in [0, 1, 2, 3] {
                        if (t as u32) < live {
                            let biased = ci4_biased_f16x2(words[jw][t], prmt);
                            unroll!(j in [0, 1, 2, 3] {
                                let value = weighted_ci4(biased[j], wh[j]);
                                let at = slot[j] + 4 * t as u32 * 2 * M * EO_X_ROW;
                                st_shared_u16(at, value as u16);
                                st_shared_u16(at + 4 * 6, (value >> 16) as u16);
                            });
                        }
                    });
                }
            });
            sync_threads();
            // First FFT along n: this warp's eight rows of every live sample.
            unroll!(u in [0, 1, 2, 3] {
                if (u as u32) < live {
                    let ux = x_base + 4 * (u as u32 * 2 * M * EO_X_ROW);
                    let mut x = [0u32; 6];
                    unroll!(par in [0, 1] {
                        let p = 4 * par as u32 * 12;
                        x[3 * par] = ld_shared_u32(ux + 4 * x16 + p);
                        x[3 * par + 1] = ld_shared_u32(ux + 4 * x16 + p + 4 * 6);
                        x[3 * par + 2] = ld_shared_u32(ux + 4 * x8 + p);
                    });
                    let y = eo_dft(&a, &converged(x));
                    let gu = g_base + 4 * (gst + u as u32 * EO_G_TS);
                    unroll!(t in [0, 1, 2] {
                        unroll!(h in [0, 1] {
                            let y = converged(y[t][h]);
                            let at = gu + 4 * (8 * t as u32 + 24 * h as u32);
                            st_shared_u32(at, y[0]);
                            st_shared_u32(at + 4 * EO_G_RS, y[1]);
                        });
                    });
                }
            });
            sync_threads();
            // Second FFT along m: q blocks `warp` and `warp + 6`, |Et|^2 into both halves.
            let second = |t: u32| {
                let mut y = [[[[0u32; 2]; 2]; 3]; 2];
                unroll!(bi in [0, 1] {
                    let gb = g_base + 4 * (t * EO_G_TS + 4 * (warp + EO_WARPS * bi as u32));
                    let mut x = [0u32; 6];
                    unroll!(par in [0, 1] {
                        let p = 4 * par as u32 * 6 * EO_G_PS;
                        x[3 * par] = ld_shared_u32(gb + 4 * g16 + p);
                        x[3 * par + 1] = ld_shared_u32(gb + 4 * g16 + p + 4 * EO_G_RS);
                        x[3 * par + 2] = ld_shared_u32(gb + 4 * g8 + p);
                    });
                    y[bi] = eo_dft(&a, &converged(x));
                });
                y
            };
            let mut accumulate = |y: &[[[[u32; 2]; 2]; 3]; 2]| {
                unroll!(bi in [0, 1] {
                    unroll!(tt in [0, 1, 2] {
                        unroll!(h in [0, 1] {
                            let y = y[bi][tt][h];
                            hacc[bi][tt][h] = hfma2(y[1], y[1], hfma2(y[0], y[0], hacc[bi][tt][h]));
                        });
                    });
                });
                count += 1;
                if count == t_ds {
                    unroll!(bi in [0, 1] {
                        unroll!(tt in [0, 1, 2] {
                            unroll!(h in [0, 1] {
                                let (p, q) = eo_output_pixel(lane, warp + EO_WARPS * bi as u32, tt as u32, h as u32);
                                let at = (tbar * 4 * M * N + p * 2 * N + q) as usize;
                                *out_f.add(at) = hsum_halves(hacc[bi][tt][h]);
                                hacc[bi][tt][h] = 0;
                            });
                        });
                    });
                    count = 0;
                    tbar += 1;
                }
            };
            let mut t = 0;
            while t < live {
                let y = second(t);
                accumulate(&y);
                t += 1;
            }
            // The next phase overwrites X and G.
            sync_threads();
            tau0 += TB;
        }
    }

    /// Full CHORD's first FRB kernel for T_ds <= 96, even/odd direct DFT: see
    /// `frb_beamform_eo` (the same arguments as the other first FRB kernels; `gammas_m` holds
    /// the even/odd image, `gammas_n` is unused).
    #[no_mangle]
    #[allow(clippy::too_many_arguments)]
    pub unsafe extern "ptx-kernel" fn frb_beamform_d512_m24_n24_eo(
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

    /// `W E` as f16x2 (re low) from `biased` = f16 `(1032 + Re E, 1032 + Im E)` (exact) and
    /// `w` = `[(Re W, Im W), (-Im W, Re W)]`: one exact add, then `Im E (-Im W, Re W)` and
    /// `Re E (Re W, Im W)` plus it on the broadcast halves (two f16 roundings, no f32).
    #[inline(always)]
    fn weighted_ci4(biased: u32, w: [u32; 2]) -> u32 {
        let out: u32;
        // SAFETY: pure f16x2 arithmetic on registers.
        unsafe {
            core::arch::asm!("{{ .reg .b16 l, h; .reg .b32 e, ll, hh, t;",
                "add.rn.f16x2 e, {1}, {4};",
                "mov.b32 {{l, h}}, e;",
                "mov.b32 ll, {{l, l}};",
                "mov.b32 hh, {{h, h}};",
                "mul.rn.f16x2 t, hh, {3};",
                "fma.rn.f16x2 {0}, ll, {2}, t; }}",
                out(reg32) out, in(reg32) biased, in(reg32) w[0], in(reg32) w[1], in(reg32) CI4_F16_BIAS * 0x1_0001,
                options(pure, nomem, nostack))
        };
        out
    }

    /// [`converged`] over `U` register pairs.
    #[inline(always)]
    fn converged_pairs<const U: usize>(mut y: [[u32; 2]; U]) -> [[u32; 2]; U] {
        unroll_pairs::<U>(|j| y[j] = converged(y[j]));
        y
    }

    /// Runs `body(j)` for j in 0..P with a constant j (P is at most 4 here).
    #[inline(always)]
    fn unroll_pairs<const P: usize>(mut body: impl FnMut(usize)) {
        let mut j = 0;
        while j < P {
            body(j);
            j += 1;
        }
    }

    macro_rules! frb_kernel {
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

    frb_kernel!(frb_beamform_d64_m8_n8, 64, 8, 8, 8, false);
    frb_kernel!(frb_beamform_d64_m8_n12, 64, 8, 12, 6, false);
    frb_kernel!(frb_beamform_d256_m16_n16, 256, 16, 16, 8, false);
    frb_kernel!(frb_beamform_d256_m16_n20, 256, 16, 20, 5, false);
    frb_kernel!(frb_beamform_d512_m24_n24, 512, 24, 24, 4, false);
    frb_kernel!(frb_beamform_d64_m8_n8_f16sum, 64, 8, 8, 8, true);
    frb_kernel!(frb_beamform_d64_m8_n12_f16sum, 64, 8, 12, 6, true);
    frb_kernel!(frb_beamform_d256_m16_n16_f16sum, 256, 16, 16, 8, true);
    frb_kernel!(frb_beamform_d256_m16_n20_f16sum, 256, 16, 20, 5, true);

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

    macro_rules! direct_kernels {
        ($n:literal, $batch:ident, $looped:ident) => {
            /// Test kernel of the direct DFT for N = $n: see `direct_batch`.
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $batch(
                image: *const u32,
                x: *const u32,
                y: *mut u32,
                batch: u32,
            ) {
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

    direct_kernels!(20, frb_short_fft_direct_n20, frb_short_fft_loop_direct_n20);

    fft_kernels!(8, frb_short_fft_n8, frb_short_fft_loop_n8);
    fft_kernels!(12, frb_short_fft_n12, frb_short_fft_loop_n12);
    fft_kernels!(16, frb_short_fft_n16, frb_short_fft_loop_n16);
    fft_kernels!(20, frb_short_fft_n20, frb_short_fft_loop_n20);
    fft_kernels!(24, frb_short_fft_n24, frb_short_fft_loop_n24);
    fft_kernels!(28, frb_short_fft_n28, frb_short_fft_loop_n28);
    fft_kernels!(32, frb_short_fft_n32, frb_short_fft_loop_n32);
}

/// The direct DFT's test kernel and benchmark kernel for N.
pub const fn direct_kernel_names(n: u32) -> Option<(&'static str, &'static str)> {
    Some(match n {
        20 => ("frb_short_fft_direct_n20", "frb_short_fft_loop_direct_n20"),
        _ => return None,
    })
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

use crate::modules::{Arch, Family, KernelSpec};

/// The family's kernels: every entry point of its PTX modules, with what `build.rs` adds to
/// each (register cap, cluster shape) and what the host launches it with.
pub const KERNELS: &[KernelSpec] = &[
    KernelSpec::new("frb_beamform_d256_m16_n16", Family::FrbBeamformer, Arch::Sm80).max_registers(64),
    KernelSpec::new("frb_beamform_d256_m16_n16_f16sum", Family::FrbBeamformer, Arch::Sm80).max_registers(64),
    KernelSpec::new("frb_beamform_d256_m16_n20", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_beamform_d256_m16_n20_f16sum", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_beamform_d512_m24_n24", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_beamform_d512_m24_n24_eo", Family::FrbBeamformer, Arch::Sm80).max_registers(112),
    KernelSpec::new("frb_beamform_d64_m8_n12", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_beamform_d64_m8_n12_f16sum", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_beamform_d64_m8_n8", Family::FrbBeamformer, Arch::Sm80).max_registers(64),
    KernelSpec::new("frb_beamform_d64_m8_n8_f16sum", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_factorized_16_16", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_factorized_16_20", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_factorized_24_24", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_factorized_8_12", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_factorized_8_8", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_nufft_resample", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_quantize_u4", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_quantize_u8", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_short_fft_direct_n20", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_short_fft_loop_direct_n20", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_short_fft_loop_n12", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_short_fft_loop_n16", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_short_fft_loop_n20", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_short_fft_loop_n24", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_short_fft_loop_n28", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_short_fft_loop_n32", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_short_fft_loop_n8", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_short_fft_n12", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_short_fft_n16", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_short_fft_n20", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_short_fft_n24", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_short_fft_n28", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_short_fft_n32", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_short_fft_n8", Family::FrbBeamformer, Arch::Sm80),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{M16N8K16_F16_A, M16N8K16_F16_B, M16N8K8_F16_A, M16N8K8_F16_B, M16N8_F16_C};

    /// Chunks of output samples tile `0 .. out_times` exactly, the last one short.
    #[test]
    fn chunks_of_output_samples_tile_the_output() {
        for (per_block, out_times) in [(1u32, 1u32), (6, 48), (6, 50), (8, 3), (96, 917)] {
            let mut next = 0;
            for chunk in 0..out_times.div_ceil(per_block) {
                let (first, end) = chunk_output_samples(chunk, per_block, out_times);
                assert_eq!(first, next);
                assert!(end > first && end - first <= per_block && end <= out_times);
                next = end;
            }
            assert_eq!(next, out_times);
        }
        // Near the top of u32: no wrap, and chunks past the end are empty.
        let top = u32::MAX - 5;
        assert_eq!(chunk_output_samples(top / 7, 7, top), (top / 7 * 7, top));
        assert_eq!(chunk_output_samples(1, u32::MAX, top), (top, top));
        assert_eq!(chunk_output_samples(u32::MAX, u32::MAX, top), (top, top));
        assert_eq!(chunk_output_samples(0, u32::MAX, top), (0, top));
    }

    /// The derived constants reproduce seed Table 2 column by column.
    #[test]
    fn derived_constants_are_table_2() {
        let get = |f: fn(&FrbCase) -> u32| FRB_CASES.map(|c| f(&c));
        assert_eq!(get(FrbCase::mt), [4, 2, 2, 1, 1]);
        assert_eq!(get(FrbCase::mw), [2, 2, 8, 4, 24]);
        assert_eq!(get(FrbCase::tw), [2, 3, 2, 5, 1]);
        assert_eq!(get(FrbCase::mr), [1, 2, 1, 4, 1]);
        assert_eq!(get(FrbCase::tr), [16, 8, 16, 4, 24]);
        assert_eq!(get(FrbCase::sigma_f1), [260, 260, 257, 257, 257]);
        assert_eq!(get(FrbCase::sigma_f2), [292, 290, 546, 545, 801]);
        assert_eq!(get(FrbCase::sigma_g1), [132, 98, 258, 161, 257]);
        assert_eq!(get(FrbCase::sigma_g0), [1064, 1576, 4144, 5168, 8256]);
        assert_eq!(get(FrbCase::fsh1_bytes), [8320, 8320, 32896, 32896, 65792]);
        assert_eq!(get(FrbCase::fsh2_bytes), [9344, 13920, 34944, 43600, 76896]);
        assert_eq!(get(FrbCase::gsh_bytes), [8512, 12608, 33152, 41344, 66048]);
        assert_eq!(get(FrbCase::shared_bytes), [9344, 13920, 34944, 43600, 76896]);
        assert_eq!(get(FrbCase::freg1_registers), [16, 11, 16, 13, 22]);
        assert_eq!(get(FrbCase::freg2_registers), [16, 16, 16, 16, 24]);
    }

    /// The compile-time asserts of eqs. 78, 83/88, 98, 107 and 110 hold for every case.
    #[test]
    fn compile_time_asserts_of_sec_4_hold() {
        for c in FRB_CASES {
            assert!(c.t_outer <= 64 && c.sigma_f2() >= 33 * c.m, "{c:?}: eq. 78");
            if c.dishes == 64 {
                assert!(c.t_outer % 8 == 0 && (c.t_outer / 8) % c.warps == 0, "{c:?}: eq. 83");
            } else {
                assert!(
                    c.dishes % 256 == 0 && ((c.dishes / 256) * (c.t_outer / 2)) % c.warps == 0,
                    "{c:?}: eq. 88"
                );
            }
            assert!((c.m * c.n) % c.warps == 0 && c.m * c.n / c.warps <= 32, "{c:?}: eq. 98");
            assert!(
                c.m % c.mt() == 0 && (c.t_outer / 2) % c.tw() == 0 && c.m % (c.mw() * c.mt()) == 0,
                "{c:?}: eq. 107"
            );
            assert!(c.t_inner % c.tw() == 0, "{c:?}: eq. 110");
        }
    }

    fn conflict_free(words: [u32; 32]) -> bool {
        crate::bank::is_conflict_free(&words.map(|w| 4 * w), 4)
    }

    /// Sec. 4.6: the eight 32-bit `Fsh1[]` stores of a tile, lanes per eq. 87 (cases 1-2,
    /// `t <-> d4 d5 d3 tau_lo0 tau_lo1`) or eq. 92 (cases 3-5, `t <-> d4 d5 d6 d7 d3`),
    /// register `r <-> d0 d1 d2`; and sec. 4.7's `Fsh1[]` loads (lane t reads tau = t).
    #[test]
    fn fsh1_accesses_are_conflict_free() {
        for c in FRB_CASES {
            let words = c.fsh1_bytes() / 4;
            for r in 0..8 {
                let tiles = if c.dishes == 64 { c.t_outer / 8 } else { (c.dishes / 256) * (c.t_outer / 2) };
                for tile in 0..tiles {
                    let addr: [u32; 32] = core::array::from_fn(|t| {
                        let t = t as u32;
                        let bit = |k: u32| (t >> k) & 1;
                        let (tau, d) = if c.dishes == 64 {
                            let d = r | bit(2) << 3 | bit(0) << 4 | bit(1) << 5;
                            (4 * tile + (t >> 3), d)
                        } else {
                            let (tau, block) = (tile % (c.t_outer / 2), tile / (c.t_outer / 2));
                            (tau, 256 * block + (r | bit(4) << 3 | (t & 15) << 4))
                        };
                        c.fsh1_word(tau, d)
                    });
                    assert!(conflict_free(addr), "{c:?} Fsh1 store r={r} tile={tile}");
                    assert!(addr.iter().all(|&a| a < words));
                }
            }
            for d in 0..c.dishes {
                let addr: [u32; 32] = core::array::from_fn(|t| c.fsh1_word(t as u32, d));
                assert!(conflict_free(addr) && addr.iter().all(|&a| a < words), "{c:?} Fsh1 load d={d}");
            }
        }
    }

    /// Sec. 4.8: for any dish map (here shuffled with a fixed LCG), warp w's i-th store writes
    /// lane t to `s_d + t`, d = w + i W (dummy dishes included); sec. 4.9: the `Freg2[]`
    /// loads, with zero-padded lanes moved to the same bank inside the array, are conflict
    /// free, and the non-padded slots hold every (tau, m, n) of the outer block exactly once.
    #[test]
    fn fsh2_accesses_are_conflict_free_and_freg2_covers_the_block() {
        for c in FRB_CASES {
            let words = c.fsh2_bytes() / 4;
            let points = c.m * c.n;
            let mut order: [u32; 1024] = core::array::from_fn(|k| k as u32);
            let mut state = 12345u32;
            for k in (1..points as usize).rev() {
                state = state.wrapping_mul(1664525).wrapping_add(1013904223);
                order.swap(k, (state >> 8) as usize % (k + 1));
            }
            for w in 0..c.warps {
                for i in 0..points / c.warps {
                    let grid = order[(w + i * c.warps) as usize];
                    let s_d = c.fsh2_word(0, grid / c.n, grid % c.n);
                    let addr: [u32; 32] = core::array::from_fn(|t| s_d + t as u32);
                    assert!(conflict_free(addr) && addr.iter().all(|&a| a < words), "{c:?} Fsh2 store");
                }
            }
            let mut seen = [0u8; 32 * 24 * 24];
            for w in 0..c.warps {
                for tr in 0..c.tr() {
                    for mr in 0..c.mr() {
                        let addr: [u32; 32] = core::array::from_fn(|t| {
                            let e = c.freg2_element(w, t as u32, tr, mr);
                            if !e.padded {
                                seen[((e.tau * c.m + e.m) * c.n + e.n) as usize] += 1;
                            }
                            c.freg2_load_word(w, t as u32, tr, mr)
                        });
                        assert!(conflict_free(addr), "{c:?} Freg2 load w={w} tr={tr} mr={mr}");
                        assert!(addr.iter().all(|&a| a < words));
                    }
                }
            }
            let block = (c.t_outer / 2 * c.m * c.n) as usize;
            assert!(seen[..block].iter().all(|&k| k == 1), "{c:?}: Freg2 is not a bijection");
        }
    }

    /// Sec. 4.10: every `Gsh[]` store (warp, inner-block register, pol, r) is conflict free
    /// and in bounds, and together they write each `(tau, pol, m, q)` of the inner block,
    /// `q < 2 N_pad`, exactly once. Sec. 4.11: every load of a G-tile (any tau, pol) is
    /// conflict free and in bounds, and the tiles read each real `(m, q)`, `q < 2N`, once.
    #[test]
    fn gsh_accesses_are_conflict_free_and_cover_g() {
        extern crate std;
        for c in FRB_CASES {
            let words = c.gsh_bytes() / 4;
            let mut written = std::vec![0u8; (c.t_inner * 2 * c.m * 2 * c.n_pad()) as usize];
            for w in 0..c.warps {
                for tr in 0..c.t_inner / c.tw() {
                    for mr in 0..c.mr() {
                        for pol in 0..2 {
                            for r in 0..2 {
                                let addr: [u32; 32] = core::array::from_fn(|t| {
                                    let (tau, pol, m, q) = c.gsh_write_element(w, t as u32, tr, mr, pol, r);
                                    written[(((tau * 2 + pol) * c.m + m) * 2 * c.n_pad() + q) as usize] += 1;
                                    c.gsh_word(tau, pol, m, q)
                                });
                                assert!(
                                    conflict_free(addr),
                                    "{c:?} Gsh store w={w} tr={tr} mr={mr} pol={pol} r={r}"
                                );
                                assert!(addr.iter().all(|&a| a < words));
                            }
                        }
                    }
                }
            }
            assert!(written.iter().all(|&k| k == 1), "{c:?}: Gsh stores are not a bijection");
            assert!(c.g_tiles() % c.warps == 0 && 2 * c.n % (32 / c.m_pad()) == 0, "{c:?}: eq. 121");
            for tau in 0..c.t_inner {
                for pol in 0..2 {
                    let mut read = std::vec![0u8; (c.m * 2 * c.n) as usize];
                    for tile in 0..c.g_tiles() {
                        let addr: [u32; 32] = core::array::from_fn(|t| {
                            let (m, q, padded) = c.gsh_read_element(t as u32, tile);
                            if !padded {
                                read[(m * 2 * c.n + q) as usize] += 1;
                            }
                            c.gsh_word(tau, pol, m, q)
                        });
                        assert!(conflict_free(addr), "{c:?} Gsh load tau={tau} pol={pol} tile={tile}");
                        assert!(addr.iter().all(|&a| a < words));
                    }
                    assert!(read.iter().all(|&k| k == 1), "{c:?}: G tiles are not a bijection");
                }
            }
        }
    }

    /// Every ci4 byte value in every byte position becomes `(1032 + Re, 1032 + Im)` in f16,
    /// and adding the bias `CI4_F16_BIAS` gives the sample exactly.
    #[test]
    fn ci4_biased_f16x2_is_exact() {
        let mut state = 0x1234_5678u32;
        for k in 0..20000u32 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            // The first 256 words put every byte value in every position.
            let word = if k < 256 { k * 0x0101_0101 } else { state };
            let got = ci4_biased_f16x2(word, crate::packing::byte_perm);
            for (j, &got) in got.iter().enumerate() {
                let (re, im) = crate::packing::unpack_ci4((word >> (8 * j)) as u8);
                // Normal f16 only (all values here are).
                let half = |bits: u32| {
                    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
                    let exponent = ((bits >> 10) & 31) as i32 - 15;
                    sign * (1.0 + (bits & 0x3ff) as f64 / 1024.0) * 2f64.powi(exponent)
                };
                let bias = half(CI4_F16_BIAS);
                assert_eq!(half(got & 0xffff), 1032.0 + re as f64, "word {word:#x} j {j}");
                assert_eq!(half(got >> 16), 1032.0 + im as f64, "word {word:#x} j {j}");
                assert_eq!(half(got & 0xffff) + bias, re as f64);
            }
        }
    }

    /// Eq. 80 -> eq. 81 nibble by nibble on random words, with the host model of `prmt`.
    #[test]
    fn e_to_f_shuffle_moves_every_nibble_as_eqs_80_81_say() {
        let mut state = 0x2545_f491u32;
        for _ in 0..20000 {
            let e: [u32; 4] = core::array::from_fn(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state
            });
            let f = e_to_f_shuffle(e, crate::packing::byte_perm);
            for d in 0..4 {
                for pol in 0..2 {
                    for tau_hi in 0..2 {
                        for reim in 0..2 {
                            let from = (e[(tau_hi + 2 * pol) as usize] >> (4 * (reim + 2 * d))) & 15;
                            let to = (f[d as usize] >> (4 * (pol + 2 * tau_hi + 4 * reim))) & 15;
                            assert_eq!(from, to, "d={d} pol={pol} tau_hi={tau_hi} reim={reim}");
                        }
                    }
                }
            }
        }
    }

    /// A mini-tile (eq. 102) is the short FFT's input (eq. 25) with `c = n_hi`, `d = n_lo`
    /// and the spectator `s = m` within the mini-tile: `Freg2[]` feeds the first FFT (eq.
    /// 56) with no data movement.
    #[test]
    fn mini_tiles_are_the_fft_input_assignment() {
        for c in FRB_CASES {
            for t in 0..32 {
                let e = c.freg2_element(0, t, 0, 0);
                let (n_hi, n_lo) = (t & 3, e.n - (t & 3) * (c.n / 4));
                assert_eq!(x_coordinates(c.n, t), (n_hi, n_lo, e.m), "{c:?} lane {t}");
                assert_eq!(e.padded, n_lo >= c.n / 4);
            }
        }
    }

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

    /// The direct DFT's maps compose with the MMA tables: `X_n` of FFT s is B element
    /// (2n + ReIm, s) of k tile `n / 8` in register `n / 4`; `Y_q` of FFT s is C element
    /// (8 ReIm + q % 8, s) of row tile `q / 8`; every k tile's width adds up to 2N.
    #[test]
    fn direct_dft_maps_compose_with_the_mma_tables() {
        for n in FFT_SIZES.into_iter().filter(|&n| has_direct_dft(n)) {
            let k16 = direct_k16_tiles(n);
            assert_eq!(16 * k16 + if direct_has_k8(n) { 8 } else { 0 }, 2 * n);
            assert_eq!(direct_words(n), n * n / 8);
            assert!(direct_words(n) as usize <= DIRECT_MAX_WORDS && n / 4 <= 6);
            for s in 0..DIRECT_FFTS_PER_WARP {
                for nn in 0..n {
                    for reim in 0..2 {
                        let j = 2 * nn + reim;
                        let (table, base) = if j < 16 * k16 {
                            (M16N8K16_F16_B, 2 * (j / 16))
                        } else {
                            (M16N8K8_F16_B, 2 * k16)
                        };
                        let b = table.location(j % 16, s);
                        let x = direct_x_location(nn, s, reim);
                        assert_eq!((b.lane, base + b.register, b.element), (x.lane, x.register, x.element));
                    }
                }
                for q in 0..2 * n {
                    for reim in 0..2 {
                        let c = M16N8_F16_C.location(8 * reim + q % 8, s);
                        let y = direct_y_location(q, s, reim);
                        assert_eq!(
                            (c.lane, 2 * (q / 8) + c.register, c.element),
                            (y.lane, y.register, y.element)
                        );
                        let (q2, n2, entry) = direct_entry(q / 8, 8 * reim + q % 8, 2 * 3 + 1);
                        assert_eq!((q2, n2, entry), (q, 3, realify(reim, 1)));
                    }
                }
            }
        }
    }

    /// The second FFT's `G` loads are conflict free (the unpadded stride 2N was up to
    /// 16-way, 12-way at full CHORD) and in bounds; the first FFT's stores (as many
    /// instructions per phase or fewer) are at most 3-way (2N: 2-way); padding lanes neither
    /// load nor store.
    #[test]
    fn padded_g_rows_make_the_second_fft_loads_conflict_free() {
        extern crate std;
        // Distinct words in one bank serialise; equal words broadcast.
        let ways = |words: &[u32]| {
            let mut distinct: std::vec::Vec<u32> = words.to_vec();
            distinct.sort_unstable();
            distinct.dedup();
            let mut banks = [0u32; 32];
            distinct.iter().for_each(|&w| banks[(w % 32) as usize] += 1);
            banks.into_iter().max().unwrap_or(0)
        };
        let mut unpadded_worst = [0u32; 5];
        for (k, c) in FRB_CASES.into_iter().enumerate() {
            let gs = frb_g_row_words(&c);
            assert!(gs >= 2 * c.n && gs.is_multiple_of(ffts_per_warp(c.m)));
            let rows = c.t_inner * 2 * c.m;
            for t in 0..c.t_inner {
                for pol in 0..2 {
                    let row0 = (t * 2 + pol) * c.m;
                    for q0 in (0..2 * c.n).step_by(ffts_per_warp(c.m) as usize) {
                        let words: std::vec::Vec<u32> =
                            (0..32).filter_map(|l| frb_g_load_word(&c, l, row0, q0)).collect();
                        assert_eq!(words.len() as u32, 32 * (c.m / 4) / padded_quarter(c.m));
                        assert!(words.iter().all(|&w| w < rows * gs && w % gs < 2 * c.n));
                        assert_eq!(ways(&words), 1, "{c:?} load t={t} pol={pol} q0={q0}");
                        // The same lanes at the unpadded stride.
                        let unpadded: std::vec::Vec<u32> =
                            words.iter().map(|&w| (w / gs) * 2 * c.n + w % gs).collect();
                        unpadded_worst[k] = unpadded_worst[k].max(ways(&unpadded));
                    }
                }
            }
            for call in 0..rows / ffts_per_warp(c.n) {
                for r in 0..2 {
                    let words: std::vec::Vec<u32> = (0..32)
                        .filter_map(|l| frb_g_store_words(&c, l, call * ffts_per_warp(c.n)))
                        .map(|w| w[r])
                        .collect();
                    assert!(words.iter().all(|&w| w < rows * gs && w % gs < 2 * c.n));
                    assert!(ways(&words) <= 3, "{c:?} store call={call}");
                }
            }
            assert!(
                frb_beamform_shared_bytes(&c) <= 24 * c.t_inner * c.m * c.n + 4 * c.t_inner * 2 * c.m * 32
            );
            assert!(frb_second_fft_calls(&c) <= 6 && c.t_inner <= 8 && 2 * c.dishes <= 4 * FRB_THREADS);
        }
        assert_eq!(unpadded_worst, [4, 2, 16, 4, 12]);
        assert_eq!(FRB_CASES.map(|c| frb_g_row_words(&c)), [20, 28, 34, 42, 49]);
        assert_eq!(FRB_CASES.map(|c| frb_first_fft_unroll(&c)), [2, 2, 4, 4, 4]);
    }

    /// Part B': the B tables put exactly [`eo_k_entry`]'s (n, ReIm) where [`eo_b_pair`] says
    /// the lane loads it (element e = the pair's half); the first FFT's columns cover each
    /// (pol, m) once with C halves in one planar word; and the six shared-memory patterns
    /// (first-FFT loads k16 and k8, stores, second-FFT loads k16 and k8; the output is
    /// global) are conflict free and in bounds.
    #[test]
    fn eo_patterns_are_conflict_free() {
        for par in 0..2 {
            for (k8, table, ks) in [(false, M16N8K16_F16_B, 16), (true, M16N8K8_F16_B, 8)] {
                for k in 0..ks {
                    for g in 0..8 {
                        let b = table.location(k, g);
                        let (a, reim) = eo_b_pair(k8, b.lane, b.register);
                        assert_eq!(b.lane / 4, g);
                        assert_eq!(eo_k_entry(par, k8, k), (4 * a + 2 * b.element + par, reim), "k={k}");
                    }
                }
            }
        }
        let banks_distinct = |words: &[u32]| {
            let mut seen = [false; 32];
            words.iter().all(|&w| !core::mem::replace(&mut seen[(w % 32) as usize], true))
        };
        let x_words = EO_X_WORDS;
        let g_words = EO_TB * EO_G_TS;
        for w in 0..EO_WARPS {
            let mut rows = [0u32; 8];
            for g in 0..8 {
                rows[g as usize] = eo_first_m(w % 3, g);
                let (word, half) = eo_g_word(0, 0, eo_first_m(w % 3, g), 0, 0);
                assert_eq!((word, half), (eo_g_word(0, 0, eo_first_m(w % 3, g & 6), 0, 0).0, g & 1));
            }
            for u in 0..EO_TB {
                for par in 0..2 {
                    for (k8, regs) in [(false, 2), (true, 1)] {
                        for reg in 0..regs {
                            let words: [u32; 32] =
                                core::array::from_fn(|l| eo_first_load_word(w, l as u32, u, par, k8, reg));
                            assert!(banks_distinct(&words) && words.iter().all(|&x| x < x_words));
                        }
                    }
                }
                for tile in 0..3 {
                    for h in 0..2 {
                        for reim in 0..2 {
                            let words: [u32; 32] =
                                core::array::from_fn(|l| eo_first_store_word(w, l as u32, u, tile, h, reim));
                            assert!(banks_distinct(&words) && words.iter().all(|&x| x < g_words));
                        }
                    }
                }
            }
            for g in 0..8 {
                assert_eq!(eo_x_row(eo_first_m(w % 3, g)), 8 * (w % 3) + g);
            }
            // Each warp third covers 8 distinct rows; the three thirds all 24.
            let mut all = [false; 24];
            for c3 in 0..3 {
                for g in 0..8 {
                    let m = eo_first_m(c3, g) as usize;
                    assert!(!all[m]);
                    all[m] = true;
                }
            }
            assert!(all.iter().all(|&b| b));
        }
        for b in 0..12 {
            for t in 0..EO_TB {
                for par in 0..2 {
                    for (k8, regs) in [(false, 2), (true, 1)] {
                        for reg in 0..regs {
                            let words: [u32; 32] =
                                core::array::from_fn(|l| eo_second_load_word(l as u32, t, b, par, k8, reg));
                            assert!(banks_distinct(&words) && words.iter().all(|&x| x < g_words));
                        }
                    }
                }
            }
        }
        // The second FFT reads what the first wrote: (tau, pol, m, reim, q) -> one word and half.
        extern crate std;
        let mut seen = std::collections::HashSet::new();
        for tau in 0..EO_TB {
            for pol in 0..2 {
                for m in 0..24 {
                    for reim in 0..2 {
                        for q in 0..48 {
                            let at = eo_g_word(tau, pol, m, reim, q);
                            assert!(at.0 < g_words && seen.insert(at));
                        }
                    }
                }
            }
        }
        assert_eq!(eo_shared_bytes(), 73856);
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

pub mod factorized;
pub mod nufft;
pub mod quantize;
pub mod resample;
