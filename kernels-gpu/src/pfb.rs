//! PFB channelizer (F-engine, seed 004 sec. 2.1, 3.3-3.7, 4.1-4.2): packed real samples of two
//! polarisations to channel-major complex int8 (or int4) heaps.
//!
//! For spectrum m and polarisation p, with n channels, T taps and coarse delay c (seed eq. 1):
//! `g[t] = sum_j s[2nm - c + t + 2nj] w[t + 2nj]` for `0 <= t < 2n`;
//! `X[k] = sum_t g[t] exp(-j pi k t / n)` for `0 <= k < n` (Nyquist dropped);
//! `y[k] = Q( gain[p][k] exp(j pi (phase - fine k / n)) X[k] )` with `phase` in half turns and
//! `fine` the residual delay in samples, `Q` = round half to even, saturate to [-127, 127]
//! (int8) or [-7, 7] (int4).
//!
//! Three kernels (seed sec. 3.4-3.6 and 4): the FIR ([`fir_kernel`] names) writes `z[q] =
//! g[2q] + j g[2q+1]` already "unzipped" (sec. 4.2, factor [`UNZIP`] = 4): `z[4 q1 + q2]` goes
//! to row q2, column q1 of a `4 x n/4` matrix ([`fft_index`]), so cuFFT runs `n/4`-point C2C
//! transforms on contiguous rows. The post-processing kernel finishes the transform: twiddles
//! and a 4-point DFT across the rows give `Z = FFT_n(z)` (six-step FFT, steps 3-6), then the
//! R2C fix-up (sec. 4.1) `X[k] = (Z[k] + Z*[n-k]) / 2 - j/2 exp(-j pi k / n) (Z[k] - Z*[n-k])`.
//! A post thread owns column `u` and its mirror `n/4 - u` ([`post_columns`]), because channel
//! `u + a v` needs `Z[n - k]`, which lies in the mirror column; so each thread does the two
//! 4-point DFTs of the seed.
//!
//! Layouts: input per polarisation, `bits`-wide two's complement packed MSB-first (sample i is
//! bits `i bits .. (i + 1) bits` of the byte stream, bit 0 the MSB of byte 0), read as
//! little-endian u32 words ([`unpack_pair`]). FIR output / FFT buffers: complex f32
//! `[pol][spectrum][row 4][column n/4]`. Output: complex int8 `[heap][channel][spectrum][pol]`
//! (int4: one byte per complex value, real in the low nibble, as `packing::pack_ci4`);
//! saturation counts u32 `[heap][pol]` (a value counts when either component clipped).
//!
//! Why no shared-memory transpose (sec. 3.6): a post thread owns [`SPECTRA_PER_POST_THREAD`]
//! consecutive spectra of its 8 channels, so the channel-major output leaves its registers as
//! 16-byte pieces (8 for int4) per channel; the transpose happens in registers.
//! Coarse delay (sec. 3.3) is an index offset per spectrum and polarisation read by the FIR
//! kernel; where it changes, the thread reloads its window instead of sliding it, so one
//! launch serves any delay track.

use crate::delay_beamformer::{fma_f32, sincospi, sincospi_reduced};
use crate::packing::saturate_symmetric;

/// Supported sample widths in bits.
pub const BITS: [u32; 5] = [4, 8, 10, 12, 16];
/// Unzip factor b of the six-step FFT (sec. 4.2).
pub const UNZIP: u32 = 4;
/// Smallest and largest channel counts (powers of two).
pub const MIN_CHANNELS: u32 = 64;
pub const MAX_CHANNELS: u32 = 65536;
/// Most taps.
pub const MAX_TAPS: u32 = 32;
/// Tap counts with a compiled FIR kernel; a PFB of T taps uses the smallest one >= T, with
/// zero weights in front (those samples are never loaded).
pub const FIR_VARIANTS: [u32; 5] = [1, 4, 8, 16, 32];
/// Threads per block of both kernels.
pub const THREADS: u32 = 128;
/// Spectra one post-processing thread handles (so the heap size must be a multiple).
pub const SPECTRA_PER_POST_THREAD: u32 = 4;
/// Spectra a FIR thread computes together (its window holds `taps + batch - 1` sample pairs),
/// by compiled tap count: as many as fit the register cap with the weights (16 taps: 12).
pub const fn fir_batch(variant_taps: u32) -> u32 {
    match variant_taps {
        32.. => 4,
        16.. => 12,
        _ => 16,
    }
}
/// Input buffers are u32 words; every launch's sample base is a multiple of this.
pub const SAMPLE_GRANULE: u32 = 32;

/// Compiled tap count for a PFB of `taps` taps.
pub const fn fir_variant(taps: u32) -> u32 {
    let mut i = 0;
    while i < FIR_VARIANTS.len() {
        if FIR_VARIANTS[i] >= taps {
            return FIR_VARIANTS[i];
        }
        i += 1;
    }
    MAX_TAPS
}

/// Register caps (`.maxnreg`, applied by the root `build.rs`): without them ptxas gives the
/// FIR's window reload more registers than occupancy can afford (16 taps: four blocks of 128
/// threads per SM instead of two; no spills on sm_80/86/90).
pub const REGISTER_LIMITS: [(&str, u32); 2] = [("pfb_fir_t16", 128), ("pfb_fir_t8", 96)];

pub const fn fir_kernel_name(variant_taps: u32) -> &'static str {
    match variant_taps {
        1 => "pfb_fir_t1",
        4 => "pfb_fir_t4",
        8 => "pfb_fir_t8",
        16 => "pfb_fir_t16",
        _ => "pfb_fir_t32",
    }
}

pub const fn post_kernel_name(int4: bool) -> &'static str {
    if int4 {
        "pfb_post_ci4"
    } else {
        "pfb_post_ci8"
    }
}

/// Spectra per FIR thread (seed sec. 3.4): each thread computes at least 8T real outputs (4T
/// spectra of its two columns) unless that leaves fewer than 2^17 threads; then rounded up to
/// whole batches ([`fir_batch`]), so only a delay step or the end of the launch leaves the
/// batched path.
pub const fn fir_spectra_per_thread(channels: u32, taps: u32, spectra: u32) -> u32 {
    let by_outputs = 4 * taps;
    let by_threads = (channels as u64 * spectra as u64 / (1 << 17)) as u32;
    let k = if by_threads < by_outputs { by_threads } else { by_outputs };
    let k = if k == 0 { 1 } else { k };
    let batch = fir_batch(fir_variant(taps));
    k.div_ceil(batch) * batch
}

/// Position of `z[q]` (complex) of one spectrum in the unzipped FFT input: row `q % 4`,
/// column `q / 4` of a `4 x n/4` row-major matrix.
pub const fn fft_index(q: u32, channels: u32) -> u32 {
    (q % UNZIP) * (channels / UNZIP) + q / UNZIP
}

/// The two columns a post thread owns: `u` and its mirror `(n/4 - u) mod n/4`, for
/// `0 <= u <= n/8`. The columns coincide for `u = 0` and `u = n/8`; the mirror's outputs are
/// then not written.
pub const fn post_columns(u: u32, channels: u32) -> (u32, u32) {
    let a = channels / UNZIP;
    (u, (a - u) % a)
}

/// Post threads per group of spectra: columns `0 ..= n/8`.
pub const fn post_threads_per_group(channels: u32) -> u32 {
    channels / UNZIP / 2 + 1
}

/// Output position (in complex values) of channel `k`, spectrum `s` of heap `heap`,
/// polarisation `pol`.
pub const fn output_index(
    heap: u32,
    channel: u32,
    s: u32,
    pol: u32,
    channels: u32,
    spectra_per_heap: u32,
) -> u64 {
    (((heap as u64 * channels as u64 + channel as u64) * spectra_per_heap as u64 + s as u64) * 2) + pol as u64
}

/// Samples `sample` and `sample + 1` of a packed stream of `bits`-bit two's complement values,
/// MSB first, whose u32 words (little-endian, as loaded from memory) `word(i)` returns. Always
/// reads the word after the pair's first word (no divergent branch on the device), so buffers
/// carry one word of padding.
#[inline(always)]
pub fn unpack_pair(word: impl Fn(usize) -> u32, sample: u64, bits: u32) -> (i32, i32) {
    let bit = sample * bits as u64;
    let w = (bit / 32) as usize;
    let shift = (bit % 32) as u32;
    let hi = word(w).swap_bytes() as u64;
    let lo = word(w + 1).swap_bytes() as u64;
    let v = ((hi << 32) | lo) << shift;
    let first = (v as i64 >> (64 - bits)) as i32;
    let second = ((v << bits) as i64 >> (64 - bits)) as i32;
    (first, second)
}

// -------------------------------------------------------------------------------------------
// Post-processing arithmetic, identical on the host (CPU tests) and the device.

pub type C32 = [f32; 2];

/// Complex product with two FMAs (Rust never contracts `a * b + c` by itself).
#[inline(always)]
pub fn cmul(a: C32, b: C32) -> C32 {
    [fma_f32(a[0], b[0], -(a[1] * b[1])), fma_f32(a[0], b[1], a[1] * b[0])]
}

/// `a * conj(b)`.
#[inline(always)]
pub fn cmul_conj(a: C32, b: C32) -> C32 {
    [fma_f32(a[0], b[0], a[1] * b[1]), fma_f32(a[1], b[0], -(a[0] * b[1]))]
}

#[inline(always)]
fn cadd(a: C32, b: C32) -> C32 {
    [a[0] + b[0], a[1] + b[1]]
}

#[inline(always)]
fn csub(a: C32, b: C32) -> C32 {
    [a[0] - b[0], a[1] - b[1]]
}

/// `-j x`.
#[inline(always)]
fn mul_neg_j(x: C32) -> C32 {
    [x[1], -x[0]]
}

/// `exp(j pi x)` as a complex value.
#[inline(always)]
pub fn expj_pi(x: f32) -> C32 {
    let (s, c) = sincospi(x);
    [c, s]
}

/// The fine-delay and fringe rotations `exp(j pi (phase - fine k / n))` of channels
/// `u + a v` and `w + a v` (v = 0..4, w the mirror column), from the spectrum's `fringe =
/// exp(j pi phase)` and `step = exp(-j pi fine / 4)` (precomputed on the host in f64) and one
/// short polynomial: `|fine u / n| <= 1/16` needs no range reduction, and the mirror's
/// `exp(-j pi fine w / n) = step conj(exp(-j pi fine u / n))`.
#[inline(always)]
pub fn rotations(u: u32, channels: u32, fine: f32, fringe: C32, step: C32) -> ([C32; 4], [C32; 4]) {
    let (s, c) = sincospi_reduced(-fine * (u as f32 / channels as f32));
    let ru = [c, s];
    let rot = cmul(fringe, ru);
    let rotm = cmul(fringe, cmul_conj(step, ru));
    // Written out, not looped (see `post_pair`).
    let (rot1, rotm1) = (cmul(rot, step), cmul(rotm, step));
    let (rot2, rotm2) = (cmul(rot1, step), cmul(rotm1, step));
    let (rot3, rotm3) = (cmul(rot2, step), cmul(rotm2, step));
    ([rot, rot1, rot2, rot3], [rotm, rotm1, rotm2, rotm3])
}

/// Twiddles of column `u`: `W_n^(u r)` for rows r = 1, 2, 3, and `exp(-j pi u / n)`.
#[inline(always)]
pub fn column_twiddles(u: u32, channels: u32) -> ([C32; 3], C32) {
    let x = u as f32 / channels as f32; // exact: n is a power of two
    ([expj_pi(-2.0 * x), expj_pi(-4.0 * x), expj_pi(-6.0 * x)], expj_pi(-x))
}

/// Steps 3-5 of the six-step FFT for one column: twiddles, then the 4-point DFT across the
/// rows: `Z[u + a v] = sum_r (-j)^(v r) W_n^(u r) Y_r[u]`.
#[inline(always)]
pub fn unzip_column(y: [C32; 4], twiddles: &[C32; 3]) -> [C32; 4] {
    let a0 = y[0];
    let a1 = cmul(y[1], twiddles[0]);
    let a2 = cmul(y[2], twiddles[1]);
    let a3 = cmul(y[3], twiddles[2]);
    let (s02, d02) = (cadd(a0, a2), csub(a0, a2));
    let (s13, d13) = (cadd(a1, a3), mul_neg_j(csub(a1, a3)));
    [cadd(s02, s13), cadd(d02, d13), csub(s02, s13), csub(d02, d13)]
}

/// `exp(-j pi v / 4)` for v = 0..4 (the row part of the R2C twiddle of channel `u + a v`).
const ROW_TWIDDLE: [C32; 4] = [
    [1.0, 0.0],
    [core::f32::consts::FRAC_1_SQRT_2, -core::f32::consts::FRAC_1_SQRT_2],
    [0.0, -1.0],
    [-core::f32::consts::FRAC_1_SQRT_2, -core::f32::consts::FRAC_1_SQRT_2],
];

/// R2C fix-up of one channel: `X = (z + m*) / 2 - j/2 t (z - m*)` with `z = Z[k]`,
/// `m = Z[n-k]`, `t = exp(-j pi k / n)`.
#[inline(always)]
pub fn r2c_fixup(z: C32, m: C32, t: C32) -> C32 {
    let even = [0.5 * (z[0] + m[0]), 0.5 * (z[1] - m[1])];
    let odd = [0.5 * (z[0] - m[0]), 0.5 * (z[1] + m[1])];
    cadd(even, mul_neg_j(cmul(t, odd)))
}

/// The spectra of column `u` and its mirror `w` (see [`post_columns`]): from the FFT rows
/// `y[r]` at column u and `ym[r]` at column w, channels `u + a v` and `w + a v` for v = 0..4.
/// `tw`/`twm` and `e`/`em` are the columns' [`column_twiddles`].
#[inline(always)]
pub fn post_pair(
    u: u32,
    y: [C32; 4],
    ym: [C32; 4],
    tw: &[C32; 3],
    twm: &[C32; 3],
    e: C32,
    em: C32,
) -> ([C32; 4], [C32; 4]) {
    let z = unzip_column(y, tw);
    let zm = unzip_column(ym, twm);
    // Written out, not looped: with a loop the compiler kept z and zm in local memory.
    // Z[n - (u + a v)] is Z[w + a (3 - v)]; for u = 0 it is Z[a ((4 - v) % 4)].
    // (Selecting the values, not the arrays: a select of two arrays became a select of their
    // addresses, which puts them in local memory.)
    let pick =
        |first: bool, a: C32, b: C32| [if first { a[0] } else { b[0] }, if first { a[1] } else { b[1] }];
    let mirror = |v: usize| pick(u == 0, z[(4 - v) % 4], zm[3 - v]);
    let x = [
        r2c_fixup(z[0], mirror(0), e),
        r2c_fixup(z[1], mirror(1), cmul(e, ROW_TWIDDLE[1])),
        r2c_fixup(z[2], mirror(2), cmul(e, ROW_TWIDDLE[2])),
        r2c_fixup(z[3], mirror(3), cmul(e, ROW_TWIDDLE[3])),
    ];
    let xm = [
        r2c_fixup(zm[0], z[3], em),
        r2c_fixup(zm[1], z[2], cmul(em, ROW_TWIDDLE[1])),
        r2c_fixup(zm[2], z[1], cmul(em, ROW_TWIDDLE[2])),
        r2c_fixup(zm[3], z[0], cmul(em, ROW_TWIDDLE[3])),
    ];
    (x, xm)
}

/// Round to nearest even and saturate to `[-max, max]`; returns the value and whether it
/// clipped. NaN gives 0.
#[inline(always)]
pub fn quantise(v: f32, max: i32) -> (i32, bool) {
    #[cfg(target_arch = "nvptx64")]
    let r = crate::intrinsics::cvt_rni_s32_f32(v);
    #[cfg(not(target_arch = "nvptx64"))]
    let r = crate::delay_beamformer::rint_f32(v) as i32; // saturating cast, NaN -> 0
    let q = saturate_symmetric(r, max);
    (q, q != r)
}

/// One output value: quantised complex and whether it saturated. int8: two bytes (re, im)
/// in bits 0..16; int4: one byte, re in the low nibble.
#[inline(always)]
pub fn quantise_complex(x: C32, int4: bool) -> (u32, bool) {
    let max = if int4 { 7 } else { 127 };
    let (re, sr) = quantise(x[0], max);
    let (im, si) = quantise(x[1], max);
    let packed = if int4 {
        (re as u32 & 0xf) | ((im as u32 & 0xf) << 4)
    } else {
        (re as u32 & 0xff) | ((im as u32 & 0xff) << 8)
    };
    (packed, sr | si)
}

#[cfg(target_arch = "nvptx64")]
pub use device::*;

#[cfg(target_arch = "nvptx64")]
mod device {
    use super::*;
    use crate::intrinsics::*;

    /// One complex f32 through the read-only path (the FFT output and gains are not written
    /// during the launch).
    #[inline(always)]
    unsafe fn load_c32(ptr: *const [f32; 2]) -> [f32; 2] {
        let [re, im] = ld_global_nc_v2(ptr as *const u32);
        [f32::from_bits(re), f32::from_bits(im)]
    }

    /// Loads the pair of samples at `sample` (relative to `input`).
    #[inline(always)]
    unsafe fn load_pair(input: *const u32, sample: u64, bits: u32) -> [f32; 2] {
        let (a, b) = unpack_pair(|i| *input.add(i), sample, bits);
        [a as f32, b as f32]
    }

    /// FIR body with `TV` compiled taps (the first `TV - taps` slots have zero weights).
    /// Thread: column pair q (`g[2q], g[2q+1]`), a run of `per_thread` spectra of one
    /// polarisation (grid y). `offsets[pol][spectrum]`: first sample of the spectrum's window
    /// relative to the polarisation's input. `weights[t + 2n j]` (f32, `2n taps`).
    ///
    /// Spectra go in batches of B = [`fir_batch`] with consecutive windows (the common case: no
    /// coarse-delay step inside the batch). The thread keeps its `2 TV` weights and `TV + B - 1`
    /// sample pairs in registers: the batch loads its B new pairs at once (independent loads
    /// in flight, which a one-spectrum-at-a-time loop lacked: that kernel was latency-bound),
    /// then computes its B outputs and shifts the window once per batch, not per spectrum.
    /// A batch that continues the previous one keeps its `TV - 1` older pairs; one that does
    /// not (first batch, a delay step just before it) loads all. A batch with a delay step
    /// inside, or the ragged end, goes one spectrum at a time, each read directly.
    #[inline(always)]
    unsafe fn fir<const TV: usize>(
        inputs: [*const u32; 2],
        offsets: *const u32,
        weights: *const f32,
        out: *mut [f32; 2],
        channels: u32,
        taps: u32,
        spectra: u32,
        per_thread: u32,
        bits: u32,
    ) {
        let pol = block_idx_y();
        let id = global_thread_x();
        // n is a power of two: masks and shifts, so no division (and no divide-by-zero path).
        let q = id & (channels - 1);
        let piece = id >> channels.trailing_zeros();
        let first = piece * per_thread;
        if first >= spectra {
            return;
        }
        let last = if first + per_thread < spectra { first + per_thread } else { spectra };
        let input = if pol == 0 { inputs[0] } else { inputs[1] };
        let offsets = offsets.add((pol * spectra) as usize);
        let step = 2 * channels;
        let pad = TV as u32 - taps;
        let b = fir_batch(TV as u32) as usize;
        let weight = |j: u32| -> [f32; 2] {
            let [w0, w1] = ld_global_nc_v2(weights.add(((j - pad) * step + 2 * q) as usize) as *const u32);
            [f32::from_bits(w0), f32::from_bits(w1)]
        };
        let mut w = [[0.0f32; 2]; TV];
        unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
            if j < TV && j as u32 >= pad {
                w[j] = weight(j as u32);
            }
        });
        let out = out.add((pol * spectra) as usize * channels as usize + fft_index(q, channels) as usize);
        // window[k]: the pair at (batch start) + 2q + 2n (k - pad).
        let mut window = [[0.0f32; 2]; 48];
        let mut expected = u32::MAX; // first offset of a batch that continues the window
        let mut m = first;
        while m < last {
            let s0 = *offsets.add(m as usize);
            let mut contiguous = m + b as u32 <= last;
            unroll!(i in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if i < b && contiguous {
                    contiguous = *offsets.add(m as usize + i) == s0.wrapping_add(i as u32 * step);
                }
            });
            if contiguous {
                let base = s0 as u64 + 2 * q as u64;
                if s0 == expected {
                    unroll!(k in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
                        if k + 1 < TV {
                            window[k] = window[k + b];
                        }
                    });
                    unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                        if i < b {
                            let k = TV - 1 + i;
                            window[k] = load_pair(input, base + (k as u32 - pad) as u64 * step as u64, bits);
                        }
                    });
                } else {
                    unroll!(k in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47] {
                        if k + 1 < TV + b && k as u32 >= pad {
                            window[k] = load_pair(input, base + (k as u32 - pad) as u64 * step as u64, bits);
                        }
                    });
                }
                // One spectrum at a time against the weights in registers: two accumulators
                // live, not 2B.
                unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                    if i < b {
                        let mut acc = [0.0f32; 2];
                        unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
                            if j < TV {
                                acc[0] = fma_rn_f32(w[j][0], window[i + j][0], acc[0]);
                                acc[1] = fma_rn_f32(w[j][1], window[i + j][1], acc[1]);
                            }
                        });
                        *out.add((m as usize + i) * channels as usize) = acc;
                    }
                });
                expected = s0.wrapping_add(b as u32 * step);
                m += b as u32;
            } else {
                let base = s0 as u64 + 2 * q as u64;
                let mut acc = [0.0f32; 2];
                unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
                    if j < TV && j as u32 >= pad {
                        let x = load_pair(input, base + (j as u32 - pad) as u64 * step as u64, bits);
                        acc[0] = fma_rn_f32(w[j][0], x[0], acc[0]);
                        acc[1] = fma_rn_f32(w[j][1], x[1], acc[1]);
                    }
                });
                *out.add(m as usize * channels as usize) = acc;
                expected = u32::MAX;
                m += 1;
            }
        }
    }

    macro_rules! fir_kernel {
        ($name:ident, $tv:literal) => {
            /// See the module documentation. 1-D blocks of `THREADS` threads over
            /// `channels * ceil(spectra / per_thread)` threads (x) and 2 polarisations (y).
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
                fir::<$tv>(
                    [input0, input1],
                    offsets,
                    weights,
                    out,
                    channels,
                    taps,
                    spectra,
                    per_thread,
                    bits,
                );
            }
        };
    }

    fir_kernel!(pfb_fir_t1, 1);
    fir_kernel!(pfb_fir_t4, 4);
    fir_kernel!(pfb_fir_t8, 8);
    fir_kernel!(pfb_fir_t16, 16);
    fir_kernel!(pfb_fir_t32, 32);

    /// Post-processing body. Thread: column pair u (`0 ..= n/8`, fastest) and a group of
    /// `SPECTRA_PER_POST_THREAD` spectra. `fft[pol][spectrum][row][column]` (cuFFT output);
    /// `gains[pol][channel]` complex f32; `fine[pol][spectrum]` residual delay in samples;
    /// `rotation[pol][spectrum]` = (exp(j pi phase), exp(-j pi fine / 4)) ([`rotations`]);
    /// `saturated[heap][pol]`.
    #[inline(always)]
    unsafe fn post<const INT4: bool>(
        fft: *const [f32; 2],
        gains: *const [f32; 2],
        fine: *const f32,
        rotation: *const [f32; 4],
        out: *mut u32,
        saturated: *mut u32,
        channels: u32,
        spectra: u32,
        spectra_per_heap: u32,
    ) {
        const G: usize = SPECTRA_PER_POST_THREAD as usize;
        let per_group = post_threads_per_group(channels);
        let id = global_thread_x();
        let u = id % per_group;
        let group = id / per_group;
        let s0 = group * G as u32;
        if s0 >= spectra {
            return;
        }
        let a = channels / UNZIP;
        let (_, w) = post_columns(u, channels);
        let (tw, e) = column_twiddles(u, channels);
        let (twm, em) = column_twiddles(w, channels);
        // packed[c][j]: channel c's value of spectrum j of the group, both polarisations
        // (int8: 4 bytes; int4: 2 bytes in the low half). The spectra are a real loop (when
        // unrolled, the compiler hoisted every load of the group and spilled), and a spectrum's
        // values go to their slot by selects, which keeps `packed` in registers.
        let mut packed = [[0u32; G]; 8];
        let mut clipped = [0u32; 2];
        let mut s = 0;
        while s < G {
            let m = s0 as usize + s;
            let mut piece = [0u32; 8];
            unroll!(p in [0, 1] {
                let base = fft.add((p * spectra as usize + m) * channels as usize);
                let mut y = [[0.0f32; 2]; 4];
                let mut ym = [[0.0f32; 2]; 4];
                unroll!(r in [0, 1, 2, 3] {
                    y[r] = load_c32(base.add(r * a as usize + u as usize));
                    ym[r] = load_c32(base.add(r * a as usize + w as usize));
                });
                let (x, xm) = post_pair(u, y, ym, &tw, &twm, e, em);
                let at = p * spectra as usize + m;
                let [fr, fi, sr, si] = *rotation.add(at);
                let (rot, rotm) = rotations(u, channels, *fine.add(at), [fr, fi], [sr, si]);
                let gains = gains.add(p * channels as usize);
                unroll!(v in [0, 1, 2, 3] {
                    let g = load_c32(gains.add((u + a * v as u32) as usize));
                    let gm = load_c32(gains.add((w + a * v as u32) as usize));
                    let (q, c) = quantise_complex(cmul(x[v], cmul(g, rot[v])), INT4);
                    let (qm, cm) = quantise_complex(cmul(xm[v], cmul(gm, rotm[v])), INT4);
                    clipped[p] += c as u32;
                    // The mirror column of u = 0 and u = n/8 is u itself: not counted twice.
                    if w != u {
                        clipped[p] += cm as u32;
                    }
                    let shift = if INT4 { 8 * p } else { 16 * p };
                    piece[v] |= q << shift;
                    piece[4 + v] |= qm << shift;
                });
            });
            unroll!(j in [0, 1, 2, 3] {
                let here = s == j;
                unroll!(c in [0, 1, 2, 3, 4, 5, 6, 7] {
                    packed[c][j] = if here { piece[c] } else { packed[c][j] };
                });
            });
            s += 1;
        }
        let heap = s0 / spectra_per_heap;
        let s_in_heap = s0 % spectra_per_heap;
        unroll!(v in [0, 1, 2, 3, 4, 5, 6, 7] {
            let column = if v < 4 { u } else { w };
            if v < 4 || w != u {
                let k = column + a * (v as u32 % 4);
                let at = output_index(heap, k, s_in_heap, 0, channels, spectra_per_heap);
                // int8: 4 bytes per (spectrum, both pols); int4: 2 bytes.
                let word = if INT4 { at / 4 } else { at / 2 };
                let ptr = out.add(word as usize);
                if INT4 {
                    let pair = |j: usize| packed[v][2 * j] | (packed[v][2 * j + 1] << 16);
                    st_global_v2(ptr, [pair(0), pair(1)]);
                } else {
                    st_global_v4(ptr, [packed[v][0], packed[v][1], packed[v][2], packed[v][3]]);
                }
            }
        });
        unroll!(p in [0, 1] {
            if clipped[p] != 0 {
                red_add_u32(saturated.add((heap * 2) as usize + p), clipped[p]);
            }
        });
    }

    macro_rules! post_kernel {
        ($name:ident, $int4:literal) => {
            /// See the module documentation (int4 output when the name says ci4). 1-D blocks of
            /// `THREADS` threads over `(n/8 + 1) * spectra / SPECTRA_PER_POST_THREAD` threads.
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
            ) {
                post::<$int4>(
                    fft,
                    gains,
                    fine,
                    rotation,
                    out,
                    saturated,
                    channels,
                    spectra,
                    spectra_per_heap,
                );
            }
        };
    }

    post_kernel!(pfb_post_ci8, false);
    post_kernel!(pfb_post_ci4, true);
}
