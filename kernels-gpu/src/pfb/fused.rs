//! Fused PFB path (seed 004 sec. 6, "fuse all three kernels" for channel counts whose spectrum
//! fits on chip): one kernel computes the FIR, the 2n-point real FFT and the post-processing
//! of [`super`] for n <= [`FUSED_MAX_CHANNELS`], so the FIR output and the spectrum never
//! reach device memory (the three-kernel path moves 18.25 bytes per input sample, this one
//! the minimum: the packed input once and the output once, plus L2 reads of the weights).
//!
//! A block of [`FUSED_THREADS`] threads owns `g` consecutive spectra of both polarisations
//! ([`fused_spectra_per_block`]: all `g` in one heap, so each channel's output is one piece
//! of `4 g` contiguous bytes, half a 32-byte sector at g = 4) and holds `2 g` spectra of
//! `n` complex f32 in shared memory, at slot [`fused_slot`] (one pad slot per 16, which makes
//! every FFT pass bank-conflict free: CPU test).
//!
//! 1. FIR: a thread owns column pair q (`z[q] = g[2q] + j g[2q+1]`), loads its `2T` weights
//!    once for all `2 g` outputs and, when the `g` windows are consecutive (no coarse-delay
//!    step) and the PFB has the compiled tap count, streams the `T + g - 1` sample pairs of
//!    their union once in straight-line code (`g` a constant per copy, so all rows' loads go
//!    out together; [`super::unpack_words32`]: one funnel shift per pair), adding each into every
//!    output it belongs to (taps ascending per output, as the three-kernel FIR, so both paths'
//!    FIR outputs are the same f32 values). Otherwise it reads each window on its own.
//! 2. n-point complex FFT of z, Stockham radix-16 passes (a last pass of 2, 4 or 8: n is
//!    `16^a r`), each thread one radix-R butterfly per round in registers
//!    ([`stockham_load`], [`stockham_store`], twiddles from a table of `exp(-j pi k / n)`,
//!    `k < 2n`, computed in f64 on the host). In place: a round loads, waits at a barrier,
//!    stores; rounds of a pass cover disjoint spectra, so one barrier per round and one per
//!    pass suffice.
//! 3. Post: a thread owns column u and its mirror n/4 - u of one spectrum
//!    ([`super::post_columns`], as the three-kernel post): eight channels whose mirrors `n - k`
//!    are among them, so each value is read once ([`super::fixup_pair`]); the fringe and
//!    fine-delay rotation by the three-kernel post's recurrence ([`super::rotations`]: one
//!    short polynomial per eight channels instead of a `sincospi` per value), complex gain,
//!    quantisation ([`super::quantise_complex`]); the channel's value (both polarisations)
//!    goes back to its own slot, and after a barrier one vector store per channel writes its
//!    `4 g` bytes (int4: `2 g`), plus saturation counts.
//!
//! Layouts of input, offsets, weights, gains, fine delays, rotations, output and counts are
//! those of the three-kernel path ([`super`]).

use super::{cadd, csub, fir_variant, mul_neg_j, output_index, C32};

/// Threads per fused block. 256 (two blocks per SM, so one block's FIR overlaps
/// another's FFT): on the H200 the first version, blocks of 512 threads with twice the
/// spectra (one block per SM, its phases in series), took 3.5 ms per 2^27 samples per pol at
/// n = 1024 and 7.3 ms at 4096, slower than the three-kernel path.
pub const FUSED_THREADS: u32 = 256;
/// Largest channel count of the fused path.
pub const FUSED_MAX_CHANNELS: u32 = 4096;
/// Most spectra (per polarisation) one fused block owns: 4 (16-byte output pieces per
/// channel, the two halves of a sector written by neighbouring blocks), so that two blocks
/// fit an SM's shared memory at n = 1024.
pub const FUSED_MAX_SPECTRA: u32 = 4;
/// Most dynamic shared memory of a fused block (68 KB; registers allow two blocks per SM): both
/// polarisations of one spectrum at n = 4096, of 2 at 2048, of 4 up to 1024.
pub const FUSED_MAX_SHARED: u32 = 2 * 8 * (FUSED_MAX_CHANNELS + FUSED_MAX_CHANNELS / 16);

/// Shared-memory slot (complex f32 units) of element `e` of a spectrum: one pad slot after
/// every 16, so the radix-16 stores `16 j + r` of 16 lanes land on 16 different bank pairs.
pub const fn fused_slot(e: u32) -> u32 {
    e + e / 16
}

/// Slots of one spectrum's buffer.
pub const fn fused_buffer_slots(channels: u32) -> u32 {
    fused_slot(channels)
}

/// Dynamic shared memory of a fused block of `g` spectra per polarisation.
pub const fn fused_shared_bytes(channels: u32, g: u32) -> u32 {
    2 * g * 8 * fused_buffer_slots(channels)
}

/// Whether the kernel of `variant_taps` compiled taps shares window pairs between the
/// consecutive windows of its spectra: not at 32 taps, where 64 weights, the accumulators and
/// the window's loads spilled at 128 registers (even with 4 spectra per block); there every
/// window is read on its own.
pub const fn fused_shares_windows(variant_taps: u32) -> bool {
    variant_taps < 32
}

/// Spectra per polarisation of one fused block: the most (4, 2, 1) that divides the heap
/// (so a block's spectra share a heap) and fits [`FUSED_MAX_SHARED`]: 4 up to n = 1024, 2 at
/// 2048, 1 at 4096.
pub const fn fused_spectra_per_block(channels: u32, spectra_per_heap: u32) -> u32 {
    let mut g = FUSED_MAX_SPECTRA;
    while g > 1 && (!spectra_per_heap.is_multiple_of(g) || fused_shared_bytes(channels, g) > FUSED_MAX_SHARED)
    {
        g /= 2;
    }
    g
}

/// Radix of the FFT pass that starts with sub-transforms of `ns` points: 16 while at least 16
/// remain, then the rest (2, 4 or 8).
pub const fn fused_radix(channels: u32, ns: u32) -> u32 {
    let rest = channels / ns;
    if rest >= 16 {
        16
    } else {
        rest
    }
}

/// Element read as input `r` of Stockham butterfly `j` of a radix-`radix` pass.
pub const fn stockham_load(j: u32, r: u32, channels: u32, radix: u32) -> u32 {
    j + r * (channels / radix)
}

/// Element written as output `r` of butterfly `j` of the pass after sub-transforms of `ns`
/// points: `(j / ns) ns R + j % ns + r ns`.
pub const fn stockham_store(j: u32, r: u32, ns: u32, radix: u32) -> u32 {
    (j / ns) * ns * radix + j % ns + r * ns
}

/// Index into the `exp(-j pi k / n)` table of the twiddle `W_(ns R)^(r (j % ns))` of input
/// `r` of butterfly `j` (`W_n^e` is entry `2e`).
pub const fn stockham_twiddle(j: u32, r: u32, ns: u32, channels: u32, radix: u32) -> u32 {
    2 * (j % ns) * r * (channels / (ns * radix))
}

/// The twiddles `W^r` (r < radix, `W = W_(ns R)^(j % ns)`) of butterfly `j`: `W^1, W^2, W^4,
/// W^8` from the table (`table(index)`, [`stockham_twiddle`]), the others as products of at
/// most three of them (about 4 ulp). Loading all 15 took 15 loads of scattered table entries
/// per butterfly (up to 60 L1 wavefronts each on the H200).
#[inline(always)]
pub fn stockham_twiddles(
    table: impl Fn(u32) -> C32,
    j: u32,
    ns: u32,
    channels: u32,
    radix: u32,
) -> [C32; 16] {
    let one = [1.0f32, 0.0];
    let mut w = [one; 16];
    let at = |r: u32| table(stockham_twiddle(j, r, ns, channels, radix));
    let cmul = super::cmul;
    w[1] = at(1);
    if radix > 2 {
        w[2] = at(2);
        w[3] = cmul(w[2], w[1]);
    }
    if radix > 4 {
        w[4] = at(4);
        w[5] = cmul(w[4], w[1]);
        w[6] = cmul(w[4], w[2]);
        w[7] = cmul(w[4], w[3]);
    }
    if radix > 8 {
        w[8] = at(8);
        w[9] = cmul(w[8], w[1]);
        w[10] = cmul(w[8], w[2]);
        w[11] = cmul(w[8], w[3]);
        w[12] = cmul(w[8], w[4]);
        w[13] = cmul(w[8], w[5]);
        w[14] = cmul(w[8], w[6]);
        w[15] = cmul(w[8], w[7]);
    }
    w
}

/// Kernel name of the fused path for `variant_taps` compiled taps ([`super::FIR_VARIANTS`]).
pub const fn fused_kernel_name(variant_taps: u32, int4: bool) -> &'static str {
    match (variant_taps, int4) {
        (1, false) => "pfb_fused_t1_ci8",
        (4, false) => "pfb_fused_t4_ci8",
        (8, false) => "pfb_fused_t8_ci8",
        (16, false) => "pfb_fused_t16_ci8",
        (_, false) => "pfb_fused_t32_ci8",
        (1, true) => "pfb_fused_t1_ci4",
        (4, true) => "pfb_fused_t4_ci4",
        (8, true) => "pfb_fused_t8_ci4",
        (16, true) => "pfb_fused_t16_ci4",
        (_, true) => "pfb_fused_t32_ci4",
    }
}

/// Kernel for a PFB of `taps` taps.
pub const fn fused_kernel_for(taps: u32, int4: bool) -> &'static str {
    fused_kernel_name(fir_variant(taps), int4)
}

/// Register cap of the fused kernel of `variant_taps` compiled taps: 128, two blocks of 256
/// threads per SM. (Three need 80: at 84 the 16-tap kernel already spilled on sm_80, its FFT
/// and post phases alone using 80-84, and the 32-tap one spilled 150 bytes.)
pub const fn fused_max_registers(variant_taps: u32) -> u32 {
    let _ = variant_taps;
    128
}

// -------------------------------------------------------------------------------------------
// Small DFTs in registers (forward, natural order), on the first R entries of `v`.

#[inline(always)]
fn dft2(a: C32, b: C32) -> (C32, C32) {
    (cadd(a, b), csub(a, b))
}

#[inline(always)]
pub fn dft4(x: [C32; 4]) -> [C32; 4] {
    let (s02, d02) = dft2(x[0], x[2]);
    let (s13, d13) = (cadd(x[1], x[3]), mul_neg_j(csub(x[1], x[3])));
    [cadd(s02, s13), cadd(d02, d13), csub(s02, s13), csub(d02, d13)]
}

const H: f32 = core::f32::consts::FRAC_1_SQRT_2;
const C8: f32 = 0.923_879_5; // cos(pi / 8)
const S8: f32 = 0.382_683_43; // sin(pi / 8)
/// `W_16^m = exp(-2 pi j m / 16)` for m = 0..10.
const W16: [C32; 10] = [
    [1.0, 0.0],
    [C8, -S8],
    [H, -H],
    [S8, -C8],
    [0.0, -1.0],
    [-S8, -C8],
    [-H, -H],
    [-C8, -S8],
    [-1.0, 0.0],
    [-C8, S8],
];

#[inline(always)]
fn twiddle16(x: C32, m: usize) -> C32 {
    match m {
        0 => x,
        4 => mul_neg_j(x),
        8 => [-x[0], -x[1]],
        _ => super::cmul(x, W16[m]),
    }
}

#[inline(always)]
pub fn dft8(x: [C32; 8]) -> [C32; 8] {
    let e = dft4([x[0], x[2], x[4], x[6]]);
    let o = dft4([x[1], x[3], x[5], x[7]]);
    let o = [o[0], twiddle16(o[1], 2), twiddle16(o[2], 4), twiddle16(o[3], 6)];
    [
        cadd(e[0], o[0]),
        cadd(e[1], o[1]),
        cadd(e[2], o[2]),
        cadd(e[3], o[3]),
        csub(e[0], o[0]),
        csub(e[1], o[1]),
        csub(e[2], o[2]),
        csub(e[3], o[3]),
    ]
}

/// 16 points as 4 x 4: `X[k1 + 4 k2] = sum_r2 W_4^(r2 k2) W_16^(r2 k1) sum_r1 W_4^(r1 k1) x[4 r1 + r2]`.
#[inline(always)]
pub fn dft16(x: [C32; 16]) -> [C32; 16] {
    let a0 = dft4([x[0], x[4], x[8], x[12]]);
    let a1 = dft4([x[1], x[5], x[9], x[13]]);
    let a2 = dft4([x[2], x[6], x[10], x[14]]);
    let a3 = dft4([x[3], x[7], x[11], x[15]]);
    let c0 = dft4([a0[0], a1[0], a2[0], a3[0]]);
    let c1 = dft4([a0[1], twiddle16(a1[1], 1), twiddle16(a2[1], 2), twiddle16(a3[1], 3)]);
    let c2 = dft4([a0[2], twiddle16(a1[2], 2), twiddle16(a2[2], 4), twiddle16(a3[2], 6)]);
    let c3 = dft4([a0[3], twiddle16(a1[3], 3), twiddle16(a2[3], 6), twiddle16(a3[3], 9)]);
    [
        c0[0], c1[0], c2[0], c3[0], c0[1], c1[1], c2[1], c3[1], c0[2], c1[2], c2[2], c3[2], c0[3], c1[3],
        c2[3], c3[3],
    ]
}

/// DFT of the first `radix` (2, 4, 8 or 16, a constant after inlining) entries of `v`.
#[inline(always)]
pub fn dft_radix(v: [C32; 16], radix: u32) -> [C32; 16] {
    let z = [0.0f32; 2];
    match radix {
        16 => dft16(v),
        8 => {
            let y = dft8([v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]]);
            [y[0], y[1], y[2], y[3], y[4], y[5], y[6], y[7], z, z, z, z, z, z, z, z]
        }
        4 => {
            let y = dft4([v[0], v[1], v[2], v[3]]);
            [y[0], y[1], y[2], y[3], z, z, z, z, z, z, z, z, z, z, z, z]
        }
        _ => {
            let (a, b) = dft2(v[0], v[1]);
            [a, b, z, z, z, z, z, z, z, z, z, z, z, z, z, z]
        }
    }
}

/// Output byte offset of channel `channel`'s piece of a block whose first spectrum is
/// `first` (int8: `4 g` bytes; int4: `2 g`).
pub const fn fused_piece_byte(
    first: u32,
    channel: u32,
    channels: u32,
    spectra_per_heap: u32,
    int4: bool,
) -> u64 {
    let at = output_index(
        first / spectra_per_heap,
        channel,
        first % spectra_per_heap,
        0,
        channels,
        spectra_per_heap,
    );
    if int4 {
        at
    } else {
        2 * at
    }
}

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
pub use device::*;

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod device {
    use super::super::{quantise_complex, rotations, unpack_pair_at};
    use super::*;
    use crate::intrinsics::*;
    use crate::pfb::c32::{ld_c32, ld_global_c32, st_c32};
    use crate::pfb::cmul;

    /// One round of a radix-`R` Stockham pass: threads `0 .. per_round * n / R` take
    /// butterfly `tid % (n / R)` of spectrum `first + tid / (n / R)`; load, twiddle, DFT in
    /// registers, barrier, store in place. Every thread reaches the barrier.
    #[inline(always)]
    unsafe fn fft_round<const R: u32>(
        smem: u32,
        buffer_bytes: u32,
        first: u32,
        buffers: u32,
        ns: u32,
        channels: u32,
        twiddles: *const [f32; 2],
    ) {
        let tid = thread_idx_x();
        let per_buffer = channels / R;
        let b = first + tid / per_buffer;
        let j = tid % per_buffer;
        let active = tid / per_buffer < FUSED_THREADS / per_buffer && b < buffers;
        let base = smem + b * buffer_bytes;
        let mut v = [[0.0f32; 2]; 16];
        if active {
            unroll!(r in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if (r as u32) < R {
                    v[r] = ld_c32(base + 8 * fused_slot(stockham_load(j, r as u32, channels, R)));
                }
            });
            if ns > 1 {
                let w = stockham_twiddles(|at| ld_global_c32(twiddles.add(at as usize)), j, ns, channels, R);
                unroll!(r in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                    if (r as u32) < R {
                        v[r] = cmul(v[r], w[r]);
                    }
                });
            }
            v = dft_radix(v, R);
        }
        sync_threads();
        if active {
            unroll!(r in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if (r as u32) < R {
                    st_c32(base + 8 * fused_slot(stockham_store(j, r as u32, ns, R)), v[r]);
                }
            });
        }
    }

    /// A whole radix-`R` pass over `buffers` spectra, then a barrier.
    #[inline(always)]
    unsafe fn fft_pass<const R: u32>(
        smem: u32,
        buffer_bytes: u32,
        buffers: u32,
        ns: u32,
        channels: u32,
        twiddles: *const [f32; 2],
    ) {
        let per_round = FUSED_THREADS / (channels / R);
        let mut first = 0;
        while first < buffers {
            fft_round::<R>(smem, buffer_bytes, first, buffers, ns, channels, twiddles);
            first += per_round;
        }
        sync_threads();
    }

    /// Phase 1, the FIR of the block's `G` spectra of both polarisations into the FFT buffers
    /// (module documentation). `G` is a constant so the shared-window loop is straight-line:
    /// every row's loads are issued together (with a runtime `g` and `pad` each row sat in its
    /// own branch and the loads ran one after another, each waiting on L1/L2).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn fir_phase<const TV: usize, const G: usize>(
        inputs: [*const u32; 2],
        offsets: *const u32,
        weights: *const f32,
        smem: u32,
        buffer_bytes: u32,
        channels: u32,
        taps: u32,
        spectra: u32,
        bits: u32,
        m0: u32,
    ) {
        let tid = thread_idx_x();
        let n = channels;
        let g = G as u32;
        let buffer = |p: u32, i: u32| smem + (p * g + i) * buffer_bytes;
        let pad = TV as u32 - taps;
        let step = 2 * n;
        let row_bits = step as u64 * bits as u64;
        // Words from one window row to the next (2n bits bits, a multiple of 32 for n >= 64,
        // so every row of a pair has the same bit offset in its first word).
        let row_words = step * bits / 32;

        // Up to n = 128 a thread takes one (pair, polarisation); above, pairs tid, tid + 256,
        // ... of both polarisations, its weights loaded once for both.
        let split = 2 * n <= FUSED_THREADS;
        let mut q = if split { tid % n } else { tid };
        let (p_first, p_end) = if split { (tid / n, tid / n + 1) } else { (0, 2) };
        // Each polarisation's first window and whether its G windows are consecutive, once
        // per block (in the pair loop the shared stores kept the compiler from hoisting
        // these loads, a chain of two dependent global loads per pair).
        let window = |p: u32| -> (u32, bool) {
            let offs = offsets.add((p * spectra + m0) as usize);
            let s0 = *offs;
            let mut contiguous = true;
            unroll!(i in [1, 2, 3] {
                if i < G {
                    contiguous &= *offs.add(i) == s0.wrapping_add(i as u32 * step);
                }
            });
            (s0, contiguous)
        };
        let (w0, w1) = (window(0), window(1));
        while q < n && p_first < 2 {
            // Weights of the taps below `pad` are zero; below 32 taps every load is issued (at
            // a clamped, valid index: a running index, so nothing per tap is loop-invariant;
            // with `(j - pad) n` per tap the compiler kept 16 offsets across the pair loop and
            // spilled) so the loads go out together.
            let mut w = [[0.0f32; 2]; TV];
            let mut at = (2 * q) as i32 - (pad * step) as i32;
            unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
                if j < TV {
                    // (At 32 taps conditional loads, one at a time: 64 weights in flight
                    // spilled on sm_80.)
                    let live = j as u32 >= pad;
                    if TV < 32 || live {
                        let index = if at > (2 * q) as i32 { at } else { (2 * q) as i32 };
                        let [w0, w1] = ld_global_nc_v2(weights.add(index as usize) as *const u32);
                        w[j] = if live { [f32::from_bits(w0), f32::from_bits(w1)] } else { [0.0, 0.0] };
                    }
                    at += step as i32;
                }
            });
            let mut p = p_first;
            while p < p_end {
                let input = if p == 0 { inputs[0] } else { inputs[1] };
                let offs = offsets.add((p * spectra + m0) as usize);
                let (s0, contiguous) = if p == 0 { w0 } else { w1 };
                let slot = 8 * fused_slot(q);
                if contiguous && fused_shares_windows(TV as u32) && pad == 0 {
                    // Window pair k (sample s0 + 2q + 2nk) feeds output i with weight k - i;
                    // per output the sum runs taps ascending. Straight-line, a running row
                    // pointer (with `k * row_words` per row the compiler kept every row's
                    // offset in a register across the pair loop and spilled).
                    let mut acc = [[0.0f32; 2]; G];
                    let bit = (s0 as u64 + 2 * q as u64) * bits as u64;
                    let shift = (bit % 32) as u32;
                    let mut ptr = input.add((bit / 32) as usize);
                    unroll!(k in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34] {
                        if k < TV + G - 1 {
                            let (a, b) = crate::pfb::unpack_words32(*ptr, *ptr.add(1), shift, bits);
                            ptr = ptr.add(row_words as usize);
                            let x = [a as f32, b as f32];
                            unroll!(i in [0, 1, 2, 3] {
                                if i < G && i <= k && k - i < TV {
                                    acc[i][0] = fma_rn_f32(w[k - i][0], x[0], acc[i][0]);
                                    acc[i][1] = fma_rn_f32(w[k - i][1], x[1], acc[i][1]);
                                }
                            });
                        }
                    });
                    unroll!(i in [0, 1, 2, 3] {
                        if i < G {
                            st_c32(buffer(p, i as u32) + slot, acc[i]);
                        }
                    });
                } else if contiguous && fused_shares_windows(TV as u32) {
                    // Fewer taps than compiled (pad > 0): as above, each row's loads behind
                    // its `k >= pad` branch.
                    let mut acc = [[0.0f32; 2]; G];
                    let word = |i: usize| *input.add(i);
                    let mut bit = (s0 as u64 + 2 * q as u64) * bits as u64;
                    unroll!(k in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34] {
                        if k < TV + G - 1 && k as u32 >= pad {
                            let (a, b) = unpack_pair_at(word, bit, bits);
                            bit += row_bits;
                            let x = [a as f32, b as f32];
                            unroll!(i in [0, 1, 2, 3] {
                                if i < G && i <= k && k - i < TV {
                                    acc[i][0] = fma_rn_f32(w[k - i][0], x[0], acc[i][0]);
                                    acc[i][1] = fma_rn_f32(w[k - i][1], x[1], acc[i][1]);
                                }
                            });
                        }
                    });
                    unroll!(i in [0, 1, 2, 3] {
                        if i < G {
                            st_c32(buffer(p, i as u32) + slot, acc[i]);
                        }
                    });
                } else {
                    // A coarse-delay step inside the block (or 32 taps): each window on its
                    // own, taps in order (a real branch per tap, so the 32-tap kernel keeps
                    // its loads in flight one by one and does not spill).
                    let word = |i: usize| *input.add(i);
                    let mut i = 0;
                    while i < g {
                        let s = *offs.add(i as usize);
                        let mut acc = [0.0f32; 2];
                        let mut bit = (s as u64 + 2 * q as u64) * bits as u64;
                        unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
                            if j < TV && j as u32 >= pad {
                                let (a, b) = unpack_pair_at(word, bit, bits);
                                bit += row_bits;
                                acc[0] = fma_rn_f32(w[j][0], a as f32, acc[0]);
                                acc[1] = fma_rn_f32(w[j][1], b as f32, acc[1]);
                            }
                        });
                        st_c32(buffer(p, i) + slot, acc);
                        i += 1;
                    }
                }
                p += 1;
            }
            q += FUSED_THREADS;
        }
    }

    /// Phase 3 for post thread `u` ([`super::post_columns`]) and spectrum `i` of the block:
    /// both polarisations of its eight channels (R2C fix-up, rotation by recurrence, gain,
    /// quantisation); each channel's value (both polarisations: int8 32 bits, int4 16) goes
    /// to the channel's slot of buffer (0, i), which only this thread reads. Returns the
    /// saturated values, pol 0 in the low half, pol 1 in the high half.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn post_item<const G: usize, const INT4: bool>(
        u: u32,
        i: u32,
        smem: u32,
        buffer_bytes: u32,
        twiddles: *const [f32; 2],
        gains: *const [f32; 2],
        fine: *const f32,
        rotation: *const [f32; 4],
        channels: u32,
        spectra: u32,
        m0: u32,
    ) -> u32 {
        let n = channels;
        let a = n / 4;
        let (_, w) = crate::pfb::post_columns(u, n);
        let e = ld_global_c32(twiddles.add(u as usize));
        let em = ld_global_c32(twiddles.add(w as usize));
        let mut value = [0u32; 8];
        let mut clipped = 0u32;
        // The polarisations are a real loop: unrolled, the compiler hoisted both's loads
        // (values, gains) and spilled at 128 registers.
        let mut p = 0usize;
        while p < 2 {
            let b = smem + (p as u32 * G as u32 + i) * buffer_bytes;
            let mut z = [[0.0f32; 2]; 4];
            let mut zm = [[0.0f32; 2]; 4];
            unroll!(v in [0, 1, 2, 3] {
                z[v] = ld_c32(b + 8 * fused_slot(u + a * v as u32));
                zm[v] = ld_c32(b + 8 * fused_slot(w + a * v as u32));
            });
            let (x, xm) = crate::pfb::fixup_pair(u, z, zm, e, em, crate::pfb::r2c_fixup_pair);
            let at = p * spectra as usize + (m0 + i) as usize;
            let [fr, fi, sr, si] = *rotation.add(at);
            let (rot, rotm) = rotations(u, n, *fine.add(at), [fr, fi], [sr, si]);
            let gains = gains.add(p * n as usize);
            let shift = if INT4 { 8 * p as u32 } else { 16 * p as u32 };
            unroll!(v in [0, 1, 2, 3] {
                let g = ld_global_c32(gains.add((u + a * v as u32) as usize));
                let gm = ld_global_c32(gains.add((w + a * v as u32) as usize));
                let (q, c) = quantise_complex(cmul(x[v], cmul(g, rot[v])), INT4);
                let (qm, cm) = quantise_complex(cmul(xm[v], cmul(gm, rotm[v])), INT4);
                clipped += (c + cm) << (16 * p as u32);
                value[v] |= q << shift;
                value[4 + v] |= qm << shift;
            });
            p += 1;
        }
        let b = smem + i * buffer_bytes;
        unroll!(v in [0, 1, 2, 3] {
            st_shared_u32(b + 8 * fused_slot(u + a * v as u32), value[v]);
            st_shared_u32(b + 8 * fused_slot(w + a * v as u32), value[4 + v]);
        });
        clipped
    }

    /// Phase 3, post-processing of the block's `G` spectra: items (column pair u, spectrum
    /// i), n/8 per spectrum ([`post_item`]), then a barrier and one vector store of each
    /// channel's `4 G` bytes (int4: `2 G`) read back from buffer (0, i) slots.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn post_phase<const G: usize, const INT4: bool>(
        smem: u32,
        buffer_bytes: u32,
        twiddles: *const [f32; 2],
        gains: *const [f32; 2],
        fine: *const f32,
        rotation: *const [f32; 4],
        out: *mut u32,
        saturated: *mut u32,
        channels: u32,
        spectra: u32,
        spectra_per_heap: u32,
        m0: u32,
    ) {
        let tid = thread_idx_x();
        let n = channels;
        let per = n / 8;
        let mut clipped = 0u32;
        let mut item = tid;
        while item < per * G as u32 {
            let (u, i) = (item & (per - 1), item / per);
            // Inlined twice, u = 0 a constant in one copy (the only item whose columns are
            // their own mirrors), as in the three-kernel post.
            clipped += if u == 0 {
                post_item::<G, INT4>(
                    0,
                    i,
                    smem,
                    buffer_bytes,
                    twiddles,
                    gains,
                    fine,
                    rotation,
                    n,
                    spectra,
                    m0,
                )
            } else {
                post_item::<G, INT4>(
                    u,
                    i,
                    smem,
                    buffer_bytes,
                    twiddles,
                    gains,
                    fine,
                    rotation,
                    n,
                    spectra,
                    m0,
                )
            };
            item += FUSED_THREADS;
        }
        sync_threads();
        let mut k = tid;
        while k < n {
            let slot = 8 * fused_slot(k);
            let mut values = [0u32; 4];
            unroll!(i in [0, 1, 2, 3] {
                if i < G {
                    values[i] = ld_shared_u32(smem + i as u32 * buffer_bytes + slot);
                }
            });
            let byte = fused_piece_byte(m0, k, n, spectra_per_heap, INT4);
            let ptr = out.add((byte / 4) as usize);
            if INT4 {
                let pair = |s: usize| values[s] | (values[s + 1] << 16);
                match G {
                    4 => st_global_v2(ptr, [pair(0), pair(2)]),
                    2 => *ptr = pair(0),
                    _ => *(out as *mut u16).add((byte / 2) as usize) = values[0] as u16,
                }
            } else {
                match G {
                    4 => st_global_v4(ptr, values),
                    2 => st_global_v2(ptr, [values[0], values[1]]),
                    _ => *ptr = values[0],
                }
            }
            k += FUSED_THREADS;
        }
        let heap = m0 / spectra_per_heap;
        unroll!(p in [0, 1] {
            let count = (clipped >> (16 * p)) & 0xffff;
            if count != 0 {
                red_add_u32(saturated.add((heap * 2) as usize + p), count);
            }
        });
    }

    /// The fused kernel body (module documentation). Grid: `spectra / g` blocks of
    /// `FUSED_THREADS`; `fused_shared_bytes(n, g)` bytes of dynamic shared memory; `g` (4, 2 or 1,
    /// [`fused_spectra_per_block`]) is a constant in each phase's copy.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn fused<const TV: usize, const INT4: bool>(
        inputs: [*const u32; 2],
        offsets: *const u32,
        weights: *const f32,
        twiddles: *const [f32; 2],
        gains: *const [f32; 2],
        fine: *const f32,
        rotation: *const [f32; 4],
        out: *mut u32,
        saturated: *mut u32,
        channels: u32,
        taps: u32,
        spectra: u32,
        spectra_per_heap: u32,
        bits: u32,
        g: u32,
    ) {
        let n = channels;
        let m0 = block_idx_x() * g;
        let smem = dynamic_shared();
        let buffer_bytes = 8 * fused_buffer_slots(n);

        // 1. FIR.
        match g {
            4 => fir_phase::<TV, 4>(inputs, offsets, weights, smem, buffer_bytes, n, taps, spectra, bits, m0),
            2 => fir_phase::<TV, 2>(inputs, offsets, weights, smem, buffer_bytes, n, taps, spectra, bits, m0),
            _ => fir_phase::<TV, 1>(inputs, offsets, weights, smem, buffer_bytes, n, taps, spectra, bits, m0),
        }
        sync_threads();

        // 2. FFT of every spectrum in place (ends with a barrier).
        let buffers = 2 * g;
        let mut ns = 1;
        while ns < n {
            let radix = fused_radix(n, ns);
            match radix {
                16 => fft_pass::<16>(smem, buffer_bytes, buffers, ns, n, twiddles),
                8 => fft_pass::<8>(smem, buffer_bytes, buffers, ns, n, twiddles),
                4 => fft_pass::<4>(smem, buffer_bytes, buffers, ns, n, twiddles),
                _ => fft_pass::<2>(smem, buffer_bytes, buffers, ns, n, twiddles),
            }
            ns *= radix;
        }

        // 3. Post-processing.
        let args = (smem, buffer_bytes, twiddles, gains, fine, rotation, out, saturated);
        let (s, bb, tw, ga, fi, ro, o, sa) = args;
        match g {
            4 => post_phase::<4, INT4>(s, bb, tw, ga, fi, ro, o, sa, n, spectra, spectra_per_heap, m0),
            2 => post_phase::<2, INT4>(s, bb, tw, ga, fi, ro, o, sa, n, spectra, spectra_per_heap, m0),
            _ => post_phase::<1, INT4>(s, bb, tw, ga, fi, ro, o, sa, n, spectra, spectra_per_heap, m0),
        }
    }

    macro_rules! fused_kernel {
        ($name:ident, $tv:literal, $int4:literal) => {
            /// See the module documentation. `spectra / g` blocks of `FUSED_THREADS`;
            /// `fused_shared_bytes(n, g)` bytes of dynamic shared memory; `twiddles[k] =
            /// exp(-j pi k / n)` for `k < 2n`; the other arguments as the three-kernel path's.
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
                channels: u32,
                taps: u32,
                spectra: u32,
                spectra_per_heap: u32,
                bits: u32,
                g: u32,
            ) {
                fused::<$tv, $int4>(
                    [input0, input1],
                    offsets,
                    weights,
                    twiddles,
                    gains,
                    fine,
                    rotation,
                    out,
                    saturated,
                    channels,
                    taps,
                    spectra,
                    spectra_per_heap,
                    bits,
                    g,
                );
            }
        };
    }

    fused_kernel!(pfb_fused_t1_ci8, 1, false);
    fused_kernel!(pfb_fused_t4_ci8, 4, false);
    fused_kernel!(pfb_fused_t8_ci8, 8, false);
    fused_kernel!(pfb_fused_t16_ci8, 16, false);
    fused_kernel!(pfb_fused_t32_ci8, 32, false);
    fused_kernel!(pfb_fused_t1_ci4, 1, true);
    fused_kernel!(pfb_fused_t4_ci4, 4, true);
    fused_kernel!(pfb_fused_t8_ci4, 8, true);
    fused_kernel!(pfb_fused_t16_ci4, 16, true);
    fused_kernel!(pfb_fused_t32_ci4, 32, true);
}
