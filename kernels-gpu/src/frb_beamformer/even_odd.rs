//! The even/odd first kernel (full CHORD, f16 sums): both 1-d FFTs as the zero-padded
//! 48-point DFT split by the parity of the input index (see [`layout`](super::layout), "The
//! even/odd kernel"), planar `X` and `G`, the two polarisations of a pixel in the two halves
//! of one f16x2 sum.
use super::first_kernel::{hsum_halves, row_offset, weighted_ci4};
use super::short_fft::unroll_pairs;
use super::*;
use crate::intrinsics::*;
use crate::mma::*;

/// The even/odd direct DFT of eight columns (`layout`, the even/odd kernel): `x` = the B registers `[E k16 0,
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

/// Full CHORD's first FRB kernel with the even/odd direct DFT (`layout`, the even/odd kernel), f16 sums
/// over T_ds (`t_ds <= FRB_F16_SUM_MAX_T_DS`). Same blocks, arguments (`image` the
/// [`EO_WORDS`] x 32 A image in `gammas_m`'s place) and output as `frb_beamform`; the
/// gridding writes `W E` planar (two 16-bit stores per sample) into `X`. One phase at a
/// time: loading the next phase's E before this phase's FFTs, or issuing two samples'
/// second FFTs before accumulating either, holds more registers and is slower.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn frb_beamform_eo(
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
