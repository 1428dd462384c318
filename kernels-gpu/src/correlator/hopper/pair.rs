//! The `Pair` block of the sm_90a kernels (one warpgroup per lower-triangle tile pair) and
//! what the `Split` blocks share with it: the input copies, the `wgmma` step and the output
//! stores. Layouts and design: the parent module.

use super::super::{
    baseline_index, ldmatrix_a_offset, receiver, smem_offset, vector_position, visibility_index,
    write_visibility, Format, Order, Output, SMEM_ROW_BYTES,
};
use super::split::correlate_split;
use super::*;
use crate::intrinsics::*;
use crate::wgmma::{
    accumulator_position, commit_group, descriptor_k_major_128b, fence, fence_proxy_async_shared,
    mma_rs_m64n128k32_s32_s8, mma_rs_m64n64k32_s32_s8, wait_group,
};

#[derive(Clone, Copy)]
pub(crate) struct Params {
    pub(crate) stations: u32,
    pub(crate) pols: u32,
    pub(crate) channels: u32,
}

/// Element index of tile receiver `rho` at input row `row = t * channels + channel`.
#[inline(always)]
fn element(p: Params, order: Order, tile: u32, row: u64, rho: u32) -> u64 {
    let (station, pol) = receiver(order, p.pols, tile, rho);
    match order {
        Order::StationPol => (row * p.stations as u64 + station as u64) * p.pols as u64 + pol as u64,
        Order::PolStation => (row * p.pols as u64 + pol as u64) * p.stations as u64 + station as u64,
    }
}

/// A tile this warpgroup copies: its 16-byte vectors' byte offset at stage 0, whether
/// they lie before the last station (rows are 16-byte aligned, so a vector is wholly
/// inside or wholly past it; the latter is zero-filled), and the staging index.
#[derive(Clone, Copy)]
pub(super) struct Source {
    pub(super) offset: u64,
    pub(super) inside: bool,
    pub(super) index: u32,
}

/// Thread `thread` (within its warpgroup) copies vectors `thread + 128 m` of a tile-stage.
#[inline(always)]
pub(super) fn source(p: Params, order: Order, tile: u32, channel: u32, thread: u32, index: u32) -> Source {
    let (t0, rho0) = vector_position(Format::Ci8, thread);
    let row = t0 as u64 * p.channels as u64 + channel as u64;
    Source {
        offset: element(p, order, tile, row, rho0) * 2,
        inside: receiver(order, p.pols, tile, rho0).0 < p.stations,
        index,
    }
}

/// Vectors per thread per tile-stage, and the time rows between them.
const VECTORS: u32 = TIME_TILE * TILE * 2 / 16 / 128;
const ROWS_PER_VECTOR: u32 = 128 / (TILE * 2 / 16);

#[inline(always)]
pub(super) unsafe fn copy_stage(
    input: *const u8,
    row_stride: u64,
    source: Source,
    thread: u32,
    stage: u32,
    buffer: u32,
) {
    let (t0, rho0) = vector_position(Format::Ci8, thread);
    let first = buffer + smem_offset(t0, rho0);
    let stage_offset = source.offset + (stage * TIME_TILE) as u64 * row_stride;
    unroll!(m in [0, 1, 2, 3, 4, 5, 6, 7] {
        if (m as u32) < VECTORS {
            let rows = m as u32 * ROWS_PER_VECTOR;
            let src = if source.inside { input.add((stage_offset + rows as u64 * row_stride) as usize) } else { input };
            cp_async_16(first + rows * SMEM_ROW_BYTES, src, if source.inside { 16 } else { 0 });
        }
    });
}

/// One k32 step of a warpgroup's 64 x `2 N` accumulator (N = 32 or 64 registers). (A
/// diagonal block's first warpgroup needs only 64 of its 128 columns, but an m64n64 op
/// chosen at run time serialises every wgmma: ptxas C7520.)
#[inline(always)]
pub(super) unsafe fn mma<const N: usize>(d: &mut [i32; N], a: [u32; 4], b: u64) {
    if N == 32 {
        mma_rs_m64n64k32_s32_s8(&mut *(d as *mut [i32; N] as *mut [i32; 32]), a, b, true);
    } else {
        mma_rs_m64n128k32_s32_s8(&mut *(d as *mut [i32; N] as *mut [i32; 64]), a, b, true);
    }
}

/// The sm_90a kinds as the `KIND` parameter of [`correlate`].
pub(crate) const PAIR: u32 = 0;
pub(crate) const SPLIT: u32 = 3;
pub(crate) const CHANNEL_SPLIT: u32 = 4;

const fn kind_of(kind: u32) -> Kind {
    match kind {
        PAIR => Kind::Pair,
        SPLIT => Kind::Split,
        _ => Kind::ChannelSplit,
    }
}

/// One block of an sm_90a kernel of kind `KIND` ([`PAIR`], [`SPLIT`], [`CHANNEL_SPLIT`]),
/// `N` accumulator registers per warpgroup. The `Split` kinds run
/// [`correlate_split`](super::split::correlate_split); the `Pair` block follows: one
/// warpgroup copies its tiles, transposes the column tile, loads A and issues the `wgmma`s,
/// stages handed over with block barriers.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) unsafe fn correlate<const KIND: u32, const N: usize>(
    input: *const u8,
    output: *mut u32,
    p: Params,
    order: Order,
    first_stage: u32,
    stages: u32,
    mode: Output,
) {
    if KIND == SPLIT {
        return correlate_split::<false>(input, output, p, order, first_stage, stages, mode);
    }
    if KIND == CHANNEL_SPLIT {
        return correlate_split::<true>(input, output, p, order, first_stage, stages, mode);
    }
    let kind = kind_of(KIND);
    const { assert!(N as u32 == kind_of(KIND).cols() / 2) };
    let ring = kind.ring();
    let channel = block_idx_y();
    let thread = thread_idx_x() % 128;
    let (group, warp, lane) = (warp_id() / 4, warp_id() % 4, lane_id());
    let plan = kind.plan(group, block_idx_x());
    let row_stride = p.channels as u64 * p.stations as u64 * p.pols as u64 * 2;
    let copies = plan.copies.map(|c| c.map(|(tile, index)| source(p, order, tile, channel, thread, index)));

    let base = (dynamic_shared() + 1023) & !1023;
    let kmajor = |parity: u32, index: u32| base + kind.kmajor_tile(parity, index);
    let staging = |slot: u32, index: u32| base + kind.staging_tile(slot, index);
    let colsum = base + kind.colsum_offset();
    let fetch = |stage: u32, slot: u32| {
        unroll!(c in [0, 1, 2, 3] {
            if let Some(source) = copies[c] {
                copy_stage(input, row_stride, source, thread, first_stage + stage, staging(slot, source.index));
            }
        });
    };

    unroll!(s in [0, 1, 2, 3, 4, 5, 6] {
        if (s as u32) + 1 < ring {
            if (s as u32) < stages {
                fetch(s as u32, s as u32);
            }
            cp_async_commit();
        }
    });

    let mut re = [0i32; N];
    let mut im = [0i32; N];
    // sum_t Im of the transposed receivers 16 warp + g and + 8, this lane's times.
    let mut col_sum = [[0i32; 2]; 2];
    // The proxy fence below waits for this thread's copies in flight; where a warpgroup
    // both copies and transposes (the `Pair` block, the only one here), it refills after the
    // fence.
    let late_refill = KIND == PAIR;
    for s in 0..stages {
        let slot = s % ring;
        // Stage s landed (at most ring - 2 later groups pending); after the barrier it is
        // visible, and every thread is done with the slot refilled next.
        cp_async_wait_pending(ring - 2);
        sync_threads();
        let refill = || {
            if s + ring - 1 < stages {
                fetch(s + ring - 1, (s + ring - 1) % ring);
            }
            cp_async_commit();
        };
        if !late_refill {
            refill();
        }

        // Column tiles -> K-major (parity s % 2, last read by stage s - 2's wgmmas, which
        // every warpgroup retired in stage s - 1 before the barrier above).
        unroll!(t in [0, 1] {
            if let Some((from, to)) = plan.transposes[t] {
                let col_stage = staging(slot, from);
                let kbuf = kmajor(s & 1, to);
                unroll!(step in [0, 1, 2, 3] {
                    let f = ldmatrix_x4_trans(col_stage + ldmatrix_a_offset(lane, 16 * warp, step as u32));
                    unroll!(reg in [0, 1, 2, 3] {
                        st_shared_u32(kbuf + kmajor_offset(warp, lane, step as u32, reg as u32), f[reg]);
                    });
                    col_sum[t][0] = dp4a(f[2], 0x0100_0100, dp4a(f[0], 0x0100_0100, col_sum[t][0]));
                    col_sum[t][1] = dp4a(f[3], 0x0100_0100, dp4a(f[1], 0x0100_0100, col_sum[t][1]));
                });
            }
        });
        if plan.transposes[0].is_some() {
            fence_proxy_async_shared();
        }
        if late_refill {
            refill();
        }

        // The A registers are rewritten below: stage s - 1's wgmmas must have read them.
        wait_group::<0>();
        let row_stage = staging(slot, plan.row_index);
        let mut a = [[0u32; 4]; 4];
        let mut a_swapped = [[0u32; 4]; 4];
        unroll!(step in [0, 1, 2, 3] {
            a[step] = ldmatrix_x4_trans(row_stage + ldmatrix_a_offset(lane, 16 * warp, step as u32));
            // Rows as [Im, ~Re]: swap the bytes of each pair, invert the new Im-slot byte.
            a_swapped[step] = a[step].map(|w| prmt(w, w, 0x2301) ^ 0xff00_ff00);
        });
        // The K-major tiles are complete (and visible to the async proxy).
        sync_threads();
        fence();
        let kbuf = kmajor(s & 1, plan.b_index);
        unroll!(step in [0, 1, 2, 3] {
            let b = descriptor_k_major_128b(kbuf + 32 * step as u32);
            mma::<N>(&mut re, a[step], b);
            mma::<N>(&mut im, a_swapped[step], b);
        });
        commit_group();
    }
    wait_group::<0>();

    // Column sums: complete across the four lanes of a receiver, exchange through shared
    // memory (a thread's accumulator columns span the whole B).
    unroll!(t in [0, 1] {
        if let Some((_, to)) = plan.transposes[t] {
            let (g, q) = (lane / 4, lane % 4);
            unroll!(k in [0, 1] {
                let mut s = col_sum[t][k] as u32;
                s = s.wrapping_add(shfl_xor(s, 1));
                s = s.wrapping_add(shfl_xor(s, 2));
                if q == 0 {
                    st_shared_u32(colsum + 4 * (TILE * to + 16 * warp + g + 8 * k as u32), s);
                }
            });
        }
    });
    sync_threads();
    store::<N>(
        &re,
        &im,
        output,
        p,
        order,
        channel,
        thread,
        plan.tile_row,
        plan.tile_col,
        colsum + 4 * TILE * plan.b_index,
        mode,
    );
}

/// Writes a warpgroup's accumulators (rows of tile `tile_row`, columns from tile
/// `tile_col` on), adding the column sums at shared address `colsum` to Im.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn store<const N: usize>(
    re: &[i32; N],
    im: &[i32; N],
    output: *mut u32,
    p: Params,
    order: Order,
    channel: u32,
    thread: u32,
    tile_row: u32,
    tile_col: u32,
    colsum: u32,
    mode: Output,
) {
    let baselines = baseline_index(p.stations - 1, p.stations - 1) + 1;
    unroll!(r in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
        25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49,
        50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63] {
        if r < N {
            let (rho_row, col) = accumulator_position(thread, r as u32);
            let (i, pi) = receiver(order, p.pols, tile_row, rho_row);
            let (j, pj) = receiver(order, p.pols, tile_col + col / TILE, col % TILE);
            if i < p.stations && j < p.stations && i >= j {
                let real = re[r];
                let imag = im[r].wrapping_add(ld_shared_u32(colsum + 4 * col) as i32);
                let index = visibility_index(channel, baselines, p.pols, i, j, pi, pj);
                write_visibility(output, index, real, imag, mode);
            }
        }
    });
}
