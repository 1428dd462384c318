//! The sm_80 kernels (`mma.sync`, every supported GPU; compiled into the sm_80 module only).
//!
//! GEMM (`frb_resample_gemm`, [`GEMM`], CUTLASS's sm80 multistage design): a block computes a
//! `bm` (tbar) x `bn` (beam) tile of one channel with warps of `16 mt` x `8 nt`, over k-steps
//! of `bk` staged through a ring of `stages` `cp.async` buffers with one barrier per stage
//! (`cp.async.wait_group stages - 2`). Tiles are stored unpadded with the 16-byte chunks of
//! each 128-byte line XOR-swizzled ([`swizzled`]), so `ldmatrix` and the copies are
//! conflict-free; fragments are double-buffered across the k16 sub-steps; m16n8k16 f16 MMAs
//! accumulate in f32, J is rounded once to f16 and leaves through shared memory as the
//! `wgmma` W GEMM's does (the tile staged in the ring at [`staged_offset`], then whole
//! 16-byte chunks of J rows: the fragments' own 4-byte stores cost more). One block per
//! tile, tbar tile fastest in the grid, so the blocks of one beam tile (one W tile) are
//! resident together and W is read from DRAM once. Ragged tbar and beam edges are
//! zero-filled and not stored; warps whose rows or beams are all past the edge skip their
//! MMAs. Operands reach the tensor cores through the register file (`ldmatrix`, then the
//! MMA), which costs energy that `wgmma`'s shared-memory operands do not.
//!
//! Fused GEMM (`frb_resample_fused`): the same GEMM, but W never exists in device memory.
//! Each block copies its beam tile's U into shared memory once ([`fused_u_offset`]) and, in
//! place of the W tile's `cp.async`, writes every B stage itself: thread `t` forms beam `t`'s
//! 8-rho chunks `U^M_p U^N_q .. U^N_{q+7}` (one p per chunk: 2N is a multiple of 8) with the
//! same f32 product and f16 rounding as the W kernel, stored at the same swizzled place
//! ([`swizzled`]), so the MMA loop, the k order and hence J are bit for bit those of the W
//! path.
//!
//! The U and W kernels (`frb_resample_u`, `frb_resample_weights`) run on every GPU, Hopper
//! included. Entry points: `device` (from the instance list).

use super::store::store_j;
use super::*;
use crate::intrinsics::*;
use crate::mma::mma_m16n8k16_f16_f32;

/// `J = I W` for channel `blockIdx.z` with the tiling given by the const parameters (see
/// [`GemmShape`]). Grid: x = tbar tiles (fastest, so the blocks sharing a W tile are
/// resident together and W is read from DRAM once), y = beam tiles, z = channels;
/// `shape.threads()` threads and `shape.smem_bytes()` of dynamic shared memory. `k` = 4MN,
/// a multiple of `BK`.
#[inline(always)]
pub(super) unsafe fn gemm<
    const MT: usize,
    const NT: usize,
    const WR: u32,
    const WC: u32,
    const BK: u32,
    const S: u32,
    const FUSED: bool,
>(
    intensity: *const u16,
    weights: *const u16,
    u_fns: (*const f32, *const f32, u32, u32),
    out: *mut u16,
    times: u32,
    beams: u32,
    k: u32,
) {
    let shape = GemmShape { name: "", mt: MT as u32, nt: NT as u32, wr: WR, wc: WC, bk: BK, stages: S };
    let (bm, bn, row_bytes, stage_bytes) = (shape.bm(), shape.bn(), shape.row_bytes(), shape.stage_bytes());
    let ks_per_stage = BK / 16;
    let channel = block_idx_z();
    let (row0, col0) = (bm * block_idx_x(), bn * block_idx_y());
    let a = intensity.add(channel as usize * times as usize * k as usize);
    let b = weights.add(channel as usize * beams as usize * k as usize);
    let smem = dynamic_shared();
    let (warp, lane) = (warp_id(), lane_id());
    let (warp_row, warp_col) = shape.warp_origin(warp);
    // Warps with no row or no beam inside the matrix only copy and wait (the last tbar
    // tile of full CHORD holds 21 of 128 rows: one warp row idle). Running only the
    // m-tiles with rows inside measured slower.
    let active = row0 + warp_row < times && col0 + warp_col < beams;

    // This thread's chunk `c` of rows `r + rs j` of each operand, at the same swizzled
    // place in every stage.
    let (r, c) = copy_chunk(&shape, thread_idx_x());
    let rs = shape.copy_row_stride();
    let (copies_a, copies_b) = (shape.copies(bm), shape.copies(bn));
    let dst = swizzled(r, c, BK);
    let (rows_a, rows_b) = (times.saturating_sub(row0 + r), beams.saturating_sub(col0 + r));
    // Past the edge these point outside the arrays; they are only read when inside.
    let src_a = a.wrapping_add((row0 + r) as usize * k as usize + 8 * c as usize);
    let src_b = b.wrapping_add((col0 + r) as usize * k as usize + 8 * c as usize);
    let row_step = rs as usize * k as usize;
    // Fused: U^M then U^N of the beam tile after the ring, `[x/4][beam][4]` f32.
    let (u_m, u_n, m, n) = u_fns;
    let um_s = smem + S * stage_bytes;
    let un_s = um_s + 4 * bn * 2 * m;
    // B stage `step` in `slot`, formed in place (fused path): thread t writes beam t's
    // chunks `c` (rho = BK step + 8 c .. + 8: one p, q .. q + 8 with q a multiple of 8).
    let tid = thread_idx_x();
    let form_b = |step: u32, slot: u32| {
        let rho = step * BK;
        let (mut p, mut q) = (rho / (2 * n), rho % (2 * n));
        let base = smem + slot * stage_bytes + bm * row_bytes;
        unroll!(c in [0, 1, 2, 3, 4, 5, 6, 7] {
            if (c as u32) < BK / 8 {
                let um = f32::from_bits(ld_shared_u32(um_s + fused_u_offset(p, tid, bn)));
                let lo = ld_shared_v4(un_s + fused_u_offset(q, tid, bn));
                let hi = ld_shared_v4(un_s + fused_u_offset(q + 4, tid, bn));
                let un = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]].map(f32::from_bits);
                // The W kernel's product and rounding: U^M_p U^N_q in f32, then f16 (rn).
                let w = [0, 1, 2, 3].map(|i| f32x2_to_f16x2(um * un[2 * i], um * un[2 * i + 1]));
                st_shared_v4(base + swizzled(tid, c as u32, BK), w);
                q += 8;
                if q == 2 * n {
                    q = 0;
                    p += 1;
                }
            }
        });
    };
    let copy_stage = |step: u32, slot: u32| {
        let k0 = (step * BK) as usize;
        let base = smem + slot * stage_bytes + dst;
        unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
            if (j as u32) < copies_a && (bm % rs == 0 || r + rs * (j as u32) < bm) {
                let inside = rs * (j as u32) < rows_a;
                let at = if inside { j * row_step + k0 } else { 0 };
                cp_async_16(base + rs * j as u32 * row_bytes, src_a.wrapping_add(at) as *const u8, if inside { 16 } else { 0 });
            }
        });
        if FUSED {
            form_b(step, slot);
            return;
        }
        let base = base + bm * row_bytes;
        unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
            if (j as u32) < copies_b && (bn % rs == 0 || r + rs * (j as u32) < bn) {
                let inside = rs * (j as u32) < rows_b;
                let at = if inside { j * row_step + k0 } else { 0 };
                cp_async_16(base + rs * j as u32 * row_bytes, src_b.wrapping_add(at) as *const u8, if inside { 16 } else { 0 });
            }
        });
    };

    // Fragments of k sub-step `ks` of the stage in `slot`, for the first `mts` m-tiles.
    let a_warp = smem + warp_row * row_bytes;
    let b_warp = smem + (bm + warp_col) * row_bytes;
    let load = |slot: u32, ks: u32, mts: usize, fa: &mut [[u32; 4]; MT], fb: &mut [[u32; 2]; NT]| {
        let s = slot * stage_bytes;
        let a_at = a_warp + s + a_ldmatrix_offset(lane, ks, BK);
        unroll!(mt in [0, 1, 2, 3, 4, 5, 6, 7] {
            if mt < mts {
                fa[mt] = ldmatrix_x4(a_at + 16 * mt as u32 * row_bytes);
            }
        });
        let b_at = b_warp + s + b_ldmatrix_offset(lane, ks, BK);
        unroll!(pair in [0, 1, 2, 3, 4, 5, 6, 7] {
            if 2 * pair < NT {
                let x = ldmatrix_x4(b_at + 16 * pair as u32 * row_bytes);
                fb[2 * pair] = [x[0], x[1]];
                fb[2 * pair + 1] = [x[2], x[3]];
            }
        });
    };

    let steps = k / BK;
    if FUSED {
        // U of the beam tile (zero past the last beam, so those B rows are 0 as in the W
        // path), one group ahead of the first A stages, which load while B is formed.
        let um_g = u_m.add(channel as usize * 2 * m as usize * beams as usize);
        let un_g = u_n.add(channel as usize * 2 * n as usize * beams as usize);
        let beam = col0 + tid;
        let inside = beam < beams;
        let mut x = 0;
        while x < 2 * (m + n) {
            let (g, s, xx) = if x < 2 * m { (um_g, um_s, x) } else { (un_g, un_s, x - 2 * m) };
            let at = if inside { 4 * ((xx / 4) as usize * beams as usize + beam as usize) } else { 0 };
            cp_async_16(s + fused_u_offset(xx, tid, bn), g.add(at) as *const u8, if inside { 16 } else { 0 });
            x += 4;
        }
        cp_async_commit();
        unroll!(s in [0, 1, 2, 3, 4, 5, 6, 7] {
            if (s as u32) + 1 < S {
                if (s as u32) < steps {
                    unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                        if (j as u32) < copies_a && (bm % rs == 0 || r + rs * (j as u32) < bm) {
                            let inside = rs * (j as u32) < rows_a;
                            let at = if inside { j * row_step + (s as u32 * BK) as usize } else { 0 };
                            let to = smem + s as u32 * stage_bytes + dst + rs * j as u32 * row_bytes;
                            cp_async_16(to, src_a.wrapping_add(at) as *const u8, if inside { 16 } else { 0 });
                        }
                    });
                }
                cp_async_commit();
            }
        });
        // U's group has landed once at most the S - 1 A groups are pending.
        cp_async_wait_pending(S - 1); // the U group, committed before the first S - 1 A stages
        sync_threads();
        unroll!(s in [0, 1, 2, 3, 4, 5, 6, 7] {
            if (s as u32) + 1 < S && (s as u32) < steps {
                form_b(s as u32, s as u32);
            }
        });
    } else {
        unroll!(s in [0, 1, 2, 3, 4, 5, 6, 7] {
            if (s as u32) + 1 < S {
                if (s as u32) < steps {
                    copy_stage(s as u32, s as u32);
                }
                cp_async_commit();
            }
        });
    }
    cp_async_wait_pending(S - 2); // stage `step + 1` has landed
    sync_threads();

    // The k loop, written out for warps using `$mts` m-tiles (0: idle, no fragments and
    // no MMAs), so that none carries a branch per sub-step.
    macro_rules! main_loop {
        ($mts:expr) => {{
            let mts: usize = $mts;
            let mut acc = [[[0.0f32; 4]; NT]; MT];
            let mut fa = [[[0u32; 4]; MT]; 2];
            let mut fb = [[[0u32; 2]; NT]; 2];
            if mts > 0 {
                load(0, 0, mts, &mut fa[0], &mut fb[0]);
            }
            let (mut read, mut write) = (0, S - 1);
            let mut step = 0;
            while step < steps {
                unroll!(ks in [0, 1, 2, 3] {
                    if (ks as u32) < ks_per_stage {
                        // The next sub-step's fragments: from this stage, or (last
                        // sub-step) from the next one, which the barrier below made visible.
                        let next = (ks + 1) % ks_per_stage as usize;
                        if mts > 0 {
                            load(read, next as u32, mts, &mut fa[(ks + 1) % 2], &mut fb[(ks + 1) % 2]);
                        }
                        if ks == 0 {
                            // Into the slot read in the previous step: every warp finished
                            // reading it before that step's barrier.
                            if step + S - 1 < steps {
                                copy_stage(step + S - 1, write);
                            }
                            cp_async_commit();
                        }
                        if ks as u32 + 2 == ks_per_stage {
                            cp_async_wait_pending(S - 2); // stage `step + 1` has landed
                            sync_threads();
                            read = if read + 1 == S { 0 } else { read + 1 };
                            write = if write + 1 == S { 0 } else { write + 1 };
                        }
                        if mts > 0 {
                            unroll!(mt in [0, 1, 2, 3, 4, 5, 6, 7] {
                                if mt < mts {
                                    unroll!(nt in [0, 1, 2, 3, 4, 5, 6, 7] {
                                        if nt < NT {
                                            acc[mt][nt] = mma_m16n8k16_f16_f32(fa[ks % 2][mt], fb[ks % 2][nt], acc[mt][nt]);
                                        }
                                    });
                                }
                            });
                        }
                    }
                });
                step += 1;
            }
            acc
        }};
    }
    let acc = if !active { main_loop!(0) } else { main_loop!(MT) };
    cp_async_wait_all();

    // J leaves through shared memory: the tile staged as f16 rows (`staged_offset`, in the
    // ring, free once every warp is past its last fragment loads), then whole 16-byte
    // chunks of J rows, a warp per 512-byte row (`store_j`). Warps past the edge stage
    // nothing but meet the barriers. C fragment: c0 c1 = (row g, columns 2c, 2c + 1), c2 c3
    // = row g + 8.
    sync_threads();
    if active {
        let (g, c) = (lane / 4, lane % 4);
        unroll!(mt in [0, 1, 2, 3, 4, 5, 6, 7] {
            if mt < MT {
                unroll!(nt in [0, 1, 2, 3, 4, 5, 6, 7] {
                    if nt < NT {
                        unroll!(h in [0, 1] {
                            let row = warp_row + 16 * mt as u32 + g + 8 * h as u32;
                            let col = warp_col + 8 * nt as u32 + 2 * c;
                            let pair = f32x2_to_f16x2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
                            st_shared_u32(smem + staged_offset(row, col), pair);
                        });
                    }
                });
            }
        });
    }
    sync_threads();
    let j = out.add(channel as usize * times as usize * beams as usize);
    store_j::<2>(j, smem, thread_idx_x(), (row0, col0), times, beams);
}

/// `frb_resample_gemm`: `J = I W` with the [`GEMM`] tiling; see `gemm`.
#[inline(always)]
pub(super) unsafe fn gemm_kernel(
    intensity: *const u16,
    weights: *const u16,
    out: *mut u16,
    times: u32,
    beams: u32,
    k: u32,
) {
    const G: GemmShape = GEMM;
    let none = (core::ptr::null(), core::ptr::null(), 1, 1);
    gemm::<{ G.mt as usize }, { G.nt as usize }, { G.wr }, { G.wc }, { G.bk }, { G.stages }, false>(
        intensity, weights, none, out, times, beams, k,
    )
}

/// `frb_resample_u`: U^M and U^N of eq. 7 (Smith's FRB note) in f32 for the fused GEMM:
/// `U^M[f][p/4][beta][p % 4]` = `U^M_p(theta[f][beta])` and likewise `U^N` of theta' (the W
/// kernel's `u_function`, so the fused path's products are the W kernel's bit for bit). Grid: x =
/// beam groups of [`U_THREADS`], y = x in `0 .. 2M + 2N` (p, then 2M + q), z = channels. Sets
/// `*rejected = 1` if a position fails [`position_ok`] (each is checked by the threads of `x = 0`
/// and `x = 2M`; the host clears the word before and reads it after).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn u_kernel(
    theta: *const f32,
    theta_prime: *const f32,
    u_m: *mut f32,
    u_n: *mut f32,
    beams: u32,
    m: u32,
    n: u32,
    rejected: *mut u32,
) {
    let beam = U_THREADS * block_idx_x() + thread_idx_x();
    let (x, channel) = (block_idx_y(), block_idx_z());
    if beam >= beams {
        return;
    }
    let at = (channel * beams + beam) as usize;
    let position = if x < 2 * m { *theta.add(at) } else { *theta_prime.add(at) };
    if (x == 0 || x == 2 * m) && !position_ok(position) {
        *rejected = 1;
    }
    let (order, u, x, value) = if x < 2 * m {
        (m, u_m, x, u_function(m, x, position))
    } else {
        (n, u_n, x - 2 * m, u_function(n, x - 2 * m, position))
    };
    let rows = channel as usize * (2 * order / 4) as usize + (x / 4) as usize;
    *u.add(4 * (rows * beams as usize + beam as usize) + (x % 4) as usize) = value;
}

/// `frb_resample_weights`: W for one beam per warp: `W[f][beta][2N p + q] = U^M_p(theta) U^N_q(theta')` as f16.
/// Grid: x = beam groups of [`WEIGHT_WARPS`], y = channels; 32 [`WEIGHT_WARPS`] threads.
/// Sets `*rejected = 1` if a position fails [`position_ok`] (the host clears the word
/// before and reads it after).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn weights_kernel(
    theta: *const f32,
    theta_prime: *const f32,
    weights: *mut u16,
    beams: u32,
    m: u32,
    n: u32,
    rejected: *mut u32,
) {
    let (warp, lane) = (warp_id(), lane_id());
    let beam = WEIGHT_WARPS * block_idx_x() + warp;
    let channel = block_idx_y();
    if beam >= beams {
        return;
    }
    let at = (channel * beams + beam) as usize;
    let (t, t_prime) = (*theta.add(at), *theta_prime.add(at));
    if lane == 0 && !(position_ok(t) && position_ok(t_prime)) {
        *rejected = 1;
    }
    // U values held in registers, two per lane along each axis (2M, 2N <= 64).
    let up = [lane, lane + 32].map(|p| if p < 2 * m { u_function(m, p, t) } else { 0.0 });
    let uq = [lane, lane + 32].map(|q| if q < 2 * n { u_function(n, q, t_prime) } else { 0.0 });
    let k = 4 * m * n;
    let w = weights.add(at * k as usize);
    // Lane l writes rho = 2 (32 i + l), 2 (32 i + l) + 1: 128 consecutive bytes per warp.
    let mut pair = lane;
    while 2 * pair < k {
        let rho = 2 * pair;
        let (p, q) = (rho / (2 * n), rho % (2 * n)); // q even, q + 1 < 2N
        let from = |v: [f32; 2], i: u32| {
            let x = shfl_idx(v[0].to_bits(), i % 32);
            let y = shfl_idx(v[1].to_bits(), i % 32);
            f32::from_bits(if i < 32 { x } else { y })
        };
        let u = from(up, p);
        let value = f32x2_to_f16x2(u * from(uq, q), u * from(uq, q + 1));
        *(w.add(rho as usize) as *mut u32) = value;
        pair += 32;
    }
}
