//! The FRB family's pure index maps, shared by the kernels, the host and the CPU tests: the
//! short FFT's register maps (eqs. 25-26, 38-47 of Smith, CHORD FRB beamformer design note (2022),
//! "the note") and the direct DFT's, and the first kernels' shared-memory maps (the three-factor
//! kernel's padded `G` rows, the even/odd kernel's planar `X` and `G`).
use super::cases::FrbCase;
use crate::layout::Location;

/// The FFT lengths N of the note's sec. 3 (`8 <= N <= 32`, N divisible by 4).
pub const FFT_SIZES: [u32; 7] = [8, 12, 16, 20, 24, 28, 32];

/// 32-bit words per lane of the Gamma register image: G1 (2), G2 (2), G3 (4; the sparse
/// cases use the first 2, and the dense case's word 3 equals word 0 by eq. 32).
pub const GAMMA_WORDS: usize = 8;
/// Offsets of G1, G2 and G3 in a lane's [`GAMMA_WORDS`] words.
pub const G1_WORD: usize = 0;
/// Offset of G2 (eq. 41, the twiddles of the half2 complex multiply: two words) in a lane's
/// [`GAMMA_WORDS`] words.
pub const G2_WORD: usize = 2;
/// Offset of G3 (eqs. 45-47, the last factor's A operand: four words) in a lane's
/// [`GAMMA_WORDS`] words.
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

// --- The direct DFT for N = 20 ------------------------------------------------------------
//
// At N = 20 the three-factor FFT is bound by the tensor pipe plus the FP16 pipe's four half2
// twiddle ops (eq. 29), which overlap only partly on Hopper. The padded
// 2N-point DFT as one real matrix product, `Y (4N real rows: q, ReIm) = F (4N x 2N) X (2N
// real: n, ReIm)`, needs no twiddle: eight FFTs per warp are the eight B columns, F is the
// A operand in row tiles of
// 16 (8 q x ReIm_out), and the 2N contracted reals are `2N / 16` m16n8k16 plus, where
// `2N % 16 = 8` (N = 20), one m16n8k8. Per FFT that is the same tensor work as the
// three-factor one at N = 20 (`1.25 k16 + 0.625 k8` vs `k16 + k8` MMAs, weighed by the k8
// and k16 rates), with no FP16-pipe ops; at N = 24 it would be 35% more tensor work than the
// three-factor FFT, so only N = 20 is built. The code is written for any N with `N / 4 <= 6` row tiles.
//
// Register maps (lane = 4 g + t, g = lane / 4, t = lane % 4; the m16n8k* A/B/C tables):
// X_n of FFT g in register `n / 4` of lane `4 g + n % 4` (complex word, re low), so the
// k16 tile J takes registers 2J, 2J + 1 and the k8 tile register `2N / 16 * 2`; Y_q
// (row tile `q / 8`) of FFTs 2t and 2t + 1 in lane `4 (q % 8) + t`: register 0 the real
// parts, register 1 the imaginary ones, half `s & 1` FFT s.

/// The N that have the direct DFT (see above): N = 20 only (at N = 24 its extra tensor work
/// outweighs the twiddles it saves).
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

// --- The first kernels (sec. 4) ------------------------------------------------------------

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

/// Threads per block of the straightforward FRB kernel (`frb_beamform_d*_m*_n*`).
pub const FRB_THREADS: u32 = 256;

/// Largest T_ds for which the first FRB kernel sums `|Et|^2` in f16 over the whole output
/// sample (`2 T_ds` terms; the `*_f16sum` entry points, 64 registers: four blocks of 8 warps
/// per SM, and full CHORD's even/odd kernel, whose halves hold the two polarisations:
/// `T_ds` terms per half). Above it, the f16 partial sums of each phase (at most `2 T_inner` terms) are
/// added in f32 (the plain entry points, 80 registers at full CHORD: three blocks per SM).
/// An f16 running sum of many similar positive terms rounds each new term to the sum's
/// ulp, so its error grows with the count: past 96 terms per half it nears the host's bound
/// of 2^-6, with no bound for every T_ds.
pub const FRB_F16_SUM_MAX_T_DS: u32 = 96;

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
/// has at least 16 calls per phase (cases 3-5), else 2 (the faster choice per case).
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

// --- The even/odd kernel: full CHORD with the even/odd direct DFT -------------------------
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
/// Threads per block of the even/odd kernel, `32 EO_WARPS` = 192.
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
/// `G` stride in words of the pair index `pp = par 6 + a` (0..12): the two ReIm rows of 48
/// q words, padded by 8 ([`eo_g_word`]).
pub const EO_G_PS: u32 = 104;
/// `G` stride in words of the polarisation: 12 pairs of [`EO_G_PS`], padded by 4.
pub const EO_G_POLS: u32 = 1252;
/// `G` stride in words of the sample within a phase (`tau < EO_TB`): both polarisations.
pub const EO_G_TS: u32 = 2504;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frb_beamformer::FRB_CASES;
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

    /// The even/odd kernel: the B tables put exactly [`eo_k_entry`]'s (n, ReIm) where [`eo_b_pair`] says
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
        assert!(FFT_SIZES.iter().all(|&n| is_fft_size(n)
            && crate::frb_beamformer::fft_kernel(n, crate::frb_beamformer::FftMethod::ThreeFactor)
                .is_some()));
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
            // Eqs. 45-47: the dense A table under eq. 43 puts G3 where the note says.
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
