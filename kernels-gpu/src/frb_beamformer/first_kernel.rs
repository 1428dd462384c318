//! The straightforward first kernel (sec. 4 of Smith, CHORD FRB beamformer design note (2022)):
//! gridding through shared memory, both 1-d FFTs with the three-factor short FFT, `|Et|^2` in
//! f16x2; and the helpers it shares with the even/odd kernel.
use super::short_fft::{converged_pairs, short_fft_g3w, unroll_pairs, FftGammas};
use super::*;
use crate::intrinsics::*;
use crate::layout::Location;

/// The straightforward first FRB kernel (correct first; not yet the note's two-pass
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
pub(super) unsafe fn frb_beamform<
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
pub(super) fn wide_offset(row: u32, row_len: u32) -> usize {
    (row as u64 * row_len as u64) as usize
}

/// Element offset `(outer inner_len + inner) row_len` of row `(outer, inner)` of an
/// array `[outer][inner_len][row_len]`: the row index in 32 bits, the offset in 64 (one
/// `mul.wide.u32`). The first FRB kernels' E and I pass 2^32 bytes and values in launches
/// `FrbConfig::validate` accepts, but never 2^32 rows (`T F < 2^32`, validated: E's
/// `(tau, f)` rows of 2D bytes and I's `(f, tbar)` rows of 4MN values).
#[inline(always)]
pub(super) fn row_offset(outer: u32, inner_len: u32, inner: u32, row_len: u32) -> usize {
    ((outer * inner_len + inner) as u64 * row_len as u64) as usize
}

/// The f16 sum of the two halves (bits of the result in the low 16).
#[inline(always)]
pub(super) fn hsum_halves(a: u32) -> u16 {
    let out: u16;
    // SAFETY: pure f16 arithmetic on registers.
    unsafe {
        core::arch::asm!("{{ .reg .b16 l, h;", "mov.b32 {{l, h}}, {1};", "add.rn.f16 {0}, l, h; }}",
            out(reg16) out, in(reg32) a, options(pure, nomem, nostack))
    };
    out
}

/// `W E` as f16x2 (re low) from `biased` = f16 `(1032 + Re E, 1032 + Im E)` (exact) and
/// `w` = `[(Re W, Im W), (-Im W, Re W)]`: one exact add, then `Im E (-Im W, Re W)` and
/// `Re E (Re W, Im W)` plus it on the broadcast halves (two f16 roundings, no f32).
#[inline(always)]
pub(super) fn weighted_ci4(biased: u32, w: [u32; 2]) -> u32 {
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
