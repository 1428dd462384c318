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
//! whole 32-byte sectors (16 for int4) per channel; the transpose happens in registers.
//! Coarse delay (sec. 3.3) is an index offset per spectrum and polarisation read by the FIR
//! kernel; where it changes, the thread reloads its window instead of sliding it, so one
//! launch serves any delay track.

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
pub const SPECTRA_PER_POST_THREAD: u32 = 8;
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
/// spectra of its two columns) unless that leaves fewer than 2^17 threads.
pub const fn fir_spectra_per_thread(channels: u32, taps: u32, spectra: u32) -> u32 {
    let by_outputs = 4 * taps;
    let by_threads = (channels as u64 * spectra as u64 / (1 << 17)) as u32;
    let k = if by_threads < by_outputs { by_threads } else { by_outputs };
    if k == 0 {
        1
    } else {
        k
    }
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
/// MSB first, whose u32 words (little-endian, as loaded from memory) `word(i)` returns. Reads
/// the second word only when the pair reaches into it.
#[inline(always)]
pub fn unpack_pair(word: impl Fn(usize) -> u32, sample: u64, bits: u32) -> (i32, i32) {
    let bit = sample * bits as u64;
    let w = (bit / 32) as usize;
    let shift = (bit % 32) as u32;
    let hi = word(w).swap_bytes() as u64;
    let lo = if shift + 2 * bits > 32 { word(w + 1).swap_bytes() as u64 } else { 0 };
    let v = ((hi << 32) | lo) << shift;
    let first = (v as i64 >> (64 - bits)) as i32;
    let second = ((v << bits) as i64 >> (64 - bits)) as i32;
    (first, second)
}

// -------------------------------------------------------------------------------------------
// Post-processing arithmetic, identical on the host (CPU tests) and the device.

pub type C32 = [f32; 2];

#[inline(always)]
pub fn cmul(a: C32, b: C32) -> C32 {
    [a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]]
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
    let (s, c) = crate::delay_beamformer::sincospi(x);
    [c, s]
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
    let mut x = [[0.0; 2]; 4];
    let mut xm = [[0.0; 2]; 4];
    let mut v = 0;
    while v < 4 {
        // Z[n - (u + a v)] is Z[w + a (3 - v)]; for u = 0 it is Z[a ((4 - v) % 4)].
        let mirror = if u == 0 { z[(4 - v) % 4] } else { zm[3 - v] };
        x[v] = r2c_fixup(z[v], mirror, cmul(e, ROW_TWIDDLE[v]));
        xm[v] = r2c_fixup(zm[v], z[3 - v], cmul(em, ROW_TWIDDLE[v]));
        v += 1;
    }
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
        let step = 2 * channels as u64;
        let pad = TV as u32 - taps;
        let mut w = [[0.0f32; 2]; TV];
        unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
            if j < TV && j as u32 >= pad {
                let at = (j as u32 - pad) as usize * step as usize + 2 * q as usize;
                w[j] = [*weights.add(at), *weights.add(at + 1)];
            }
        });
        let mut window = [[0.0f32; 2]; TV];
        let mut previous = 0u64;
        let out = out.add((pol * spectra) as usize * channels as usize + fft_index(q, channels) as usize);
        let mut m = first;
        while m < last {
            let start = *offsets.add(m as usize) as u64 + 2 * q as u64;
            if m == first || start != previous + step {
                unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
                    if j < TV && j as u32 >= pad {
                        window[j] = load_pair(input, start + (j as u32 - pad) as u64 * step, bits);
                    }
                });
            } else {
                unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
                    if j + 1 < TV {
                        window[j] = window[j + 1];
                    }
                });
                window[TV - 1] = load_pair(input, start + (TV as u32 - 1 - pad) as u64 * step, bits);
            }
            previous = start;
            let mut acc = [0.0f32; 2];
            unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
                if j < TV {
                    acc[0] = fma_rn_f32(w[j][0], window[j][0], acc[0]);
                    acc[1] = fma_rn_f32(w[j][1], window[j][1], acc[1]);
                }
            });
            *out.add(m as usize * channels as usize) = acc;
            m += 1;
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
    /// `gains[pol][channel]` complex f32; `fine[pol][spectrum]` residual delay in samples and
    /// `phase[pol][spectrum]` fringe phase in half turns; `saturated[heap][pol]`.
    #[inline(always)]
    unsafe fn post<const INT4: bool>(
        fft: *const [f32; 2],
        gains: *const [f32; 2],
        fine: *const f32,
        phase: *const f32,
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
        // Each output word: int8, both polarisations of one spectrum (4 bytes); int4, both
        // polarisations of two spectra.
        let mut packed = [[0u32; G]; 8];
        let mut clipped = [0u32; 2];
        unroll!(p in [0, 1] {
            let mut gain = [[0.0f32; 2]; 8];
            unroll!(v in [0, 1, 2, 3] {
                gain[v] = *gains.add(p * channels as usize + (u + a * v as u32) as usize);
                gain[4 + v] = *gains.add(p * channels as usize + (w + a * v as u32) as usize);
            });
            unroll!(s in [0, 1, 2, 3, 4, 5, 6, 7] {
                let m = (s0 + s as u32) as usize;
                let base = fft.add((p * spectra as usize + m) * channels as usize);
                let mut y = [[0.0f32; 2]; 4];
                let mut ym = [[0.0f32; 2]; 4];
                unroll!(r in [0, 1, 2, 3] {
                    y[r] = *base.add(r * a as usize + u as usize);
                    ym[r] = *base.add(r * a as usize + w as usize);
                });
                let (x, xm) = post_pair(u, y, ym, &tw, &twm, e, em);
                let f = *fine.add(p * spectra as usize + m);
                let ph = *phase.add(p * spectra as usize + m);
                // exp(j pi (phase - f k / n)) for k = u + a v: a base rotation and a step of
                // exp(-j pi f / 4) per row.
                let step = expj_pi(-0.25 * f);
                let mut rot = expj_pi(ph - f * (u as f32 / channels as f32));
                let mut rotm = expj_pi(ph - f * (w as f32 / channels as f32));
                unroll!(v in [0, 1, 2, 3] {
                    let (q, c) = quantise_complex(cmul(x[v], cmul(gain[v], rot)), INT4);
                    let (qm, cm) = quantise_complex(cmul(xm[v], cmul(gain[4 + v], rotm)), INT4);
                    clipped[p] += c as u32;
                    // The mirror column of u = 0 and u = n/8 is u itself: not counted twice.
                    if w != u && u != 0 {
                        clipped[p] += cm as u32;
                    }
                    if INT4 {
                        packed[v][s / 2] |= q << (8 * (2 * (s % 2) + p));
                        packed[4 + v][s / 2] |= qm << (8 * (2 * (s % 2) + p));
                    } else {
                        packed[v][s] |= q << (16 * p);
                        packed[4 + v][s] |= qm << (16 * p);
                    }
                    rot = cmul(rot, step);
                    rotm = cmul(rotm, step);
                });
            });
        });
        let heap = s0 / spectra_per_heap;
        let s_in_heap = s0 % spectra_per_heap;
        unroll!(v in [0, 1, 2, 3, 4, 5, 6, 7] {
            let column = if v < 4 { u } else { w };
            if v < 4 || (w != u && u != 0) {
                let k = column + a * (v as u32 % 4);
                let at = output_index(heap, k, s_in_heap, 0, channels, spectra_per_heap);
                // int8: 4 bytes per (spectrum, both pols); int4: 2 bytes.
                let word = if INT4 { at / 4 } else { at / 2 };
                let ptr = out.add(word as usize);
                if INT4 {
                    st_global_v4(ptr, [packed[v][0], packed[v][1], packed[v][2], packed[v][3]]);
                } else {
                    st_global_v4(ptr, [packed[v][0], packed[v][1], packed[v][2], packed[v][3]]);
                    st_global_v4(ptr.add(4), [packed[v][4], packed[v][5], packed[v][6], packed[v][7]]);
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
            /// `THREADS` threads over `(n/8 + 1) * spectra / 8` threads.
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $name(
                fft: *const [f32; 2],
                gains: *const [f32; 2],
                fine: *const f32,
                phase: *const f32,
                out: *mut u32,
                saturated: *mut u32,
                channels: u32,
                spectra: u32,
                spectra_per_heap: u32,
            ) {
                post::<$int4>(fft, gains, fine, phase, out, saturated, channels, spectra, spectra_per_heap);
            }
        };
    }

    post_kernel!(pfb_post_ci8, false);
    post_kernel!(pfb_post_ci4, true);
}
