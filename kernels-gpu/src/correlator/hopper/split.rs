//! The warp-specialised `Split` and `ChannelSplit` blocks of the sm_90a kernels: a producer
//! warpgroup (copies and transposes) and two consumer warpgroups (`wgmma`), stages handed over
//! with `mbarrier`s. Layouts and design: the parent module.

use super::super::{ldmatrix_a_offset, Order, Output, SMEM_ROW_BYTES};
use super::pair::{copy_stage, mma, source, store, Params, Source};
use super::*;
use crate::intrinsics::*;
use crate::wgmma::{
    commit_group, cp_async_arrive, descriptor_k_major_128b, fence, fence_proxy_async_shared, mbarrier_arrive,
    mbarrier_init, mbarrier_wait, set_max_registers, wait_group,
};
use core::arch::asm;

/// The `Split` block (`CHANNEL`: the `ChannelSplit` block): one producer and two consumer
/// warpgroups. Stage s
/// uses ring slot s % ring and K-major buffer s % kmajor_buffers; per slot the mbarriers
/// `staged` (the copies landed: each copying thread arrives, and its counted `cp.async`
/// arrival holds the phase until its copies land) and `free` (its readers are done: one
/// arrival per transposing warp and per consumer thread), per buffer `full` (transposed
/// and fenced: one arrival per transposing thread) and `drained` (the `wgmma`s reading it
/// retired: one arrival per consumer warp); `summed` once for the column sums. After the
/// start no block barrier: the producer warps finish independently.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) unsafe fn correlate_split<const CHANNEL: bool>(
    input: *const u8,
    output: *mut u32,
    p: Params,
    order: Order,
    first_stage: u32,
    stages: u32,
    mode: Output,
) {
    let kind = if CHANNEL { Kind::ChannelSplit } else { Kind::Split };
    let ring = kind.ring();
    let buffers = kind.kmajor_buffers();
    const TRANSPOSE_WARPS: u32 = 2;
    const CONSUMER_WARPS: u32 = 8;
    let channel = block_idx_y();
    let thread = thread_idx_x() % 128;
    let (group, warp, lane) = (warp_id() / 4, warp_id() % 4, lane_id());
    // `Kind::Split.plan` spelled out (a runtime `Plan` lands in local memory here); the
    // channel block is Split's diagonal block 0.
    let (row, col) = if CHANNEL { (0, 0) } else { triangle_tile(block_idx_x()) };
    let diagonal = row == col;
    let row_stride = p.channels as u64 * p.stations as u64 * p.pols as u64 * 2;

    let base = (dynamic_shared() + 1023) & !1023;
    let kmajor = |buffer: u32, index: u32| base + kind.kmajor_tile(buffer, index);
    let staging = |slot: u32, index: u32| base + kind.staging_tile(slot, index);
    let colsum = base + kind.colsum_offset();
    let bars = base + kind.barrier_offset();
    let staged = |slot: u32| bars + 8 * slot;
    let free = |slot: u32| bars + 8 * (ring + slot);
    let full = |buffer: u32| bars + 8 * (2 * ring + buffer);
    let drained = |buffer: u32| bars + 8 * (2 * ring + buffers + buffer);
    // The column sums are in shared memory (one arrival per transposing thread).
    let summed = bars + 8 * (2 * ring + 2 * buffers);
    if thread_idx_x() == 0 {
        for slot in 0..ring {
            mbarrier_init(staged(slot), COPY_THREADS);
            // Every consumer thread arrives after its own A loads (see below).
            mbarrier_init(free(slot), TRANSPOSE_WARPS + 32 * CONSUMER_WARPS);
        }
        for buffer in 0..buffers {
            mbarrier_init(full(buffer), 32 * TRANSPOSE_WARPS);
            mbarrier_init(drained(buffer), CONSUMER_WARPS);
        }
        mbarrier_init(summed, 32 * TRANSPOSE_WARPS);
    }
    sync_threads();

    if group == 0 {
        set_max_registers::<PRODUCER_REGISTERS, false>();
        if warp < 2 {
            // Copying warps: 64 threads, each the copies of threads `thread` and
            // `thread + 64` of a 128-thread tile-stage.
            let tiles = [2 * row, 2 * row + 1, 2 * col, 2 * col + 1];
            let copies: [[Source; 2]; 4] = core::array::from_fn(|c| {
                [
                    source(p, order, tiles[c], channel, thread, c as u32),
                    source(p, order, tiles[c], channel, thread + 64, c as u32),
                ]
            });
            for s in 0..stages {
                let slot = s % ring;
                if s >= ring {
                    mbarrier_wait(free(slot), (s / ring + 1) & 1);
                }
                unroll!(c in [0, 1, 2, 3] {
                    // A diagonal block stages its two tiles once.
                    if c < 2 || !diagonal {
                        unroll!(h in [0, 1] {
                            let source = copies[c][h];
                            copy_stage(input, row_stride, source, thread + 64 * h as u32, first_stage + s,
                                staging(slot, source.index));
                        });
                    }
                });
                // The phase completes once every copying thread arrived and its copies
                // landed. (With `.noinc` arrivals alone and a count of 64 instead, the
                // kernel hung on the H200.)
                cp_async_arrive(staged(slot));
                mbarrier_arrive(staged(slot));
            }
            cp_async_wait_all();
        } else {
            // Transposing warps: warp 2 + t makes column tile t K-major, 16 receivers
            // (`pos`) at a time, and sums its Im over time.
            let t = warp - 2;
            let from = if diagonal { t } else { 2 + t };
            let mut col_sum = [[0i32; 2]; 4];
            // Lane parts of the addresses (the rest are immediates): kept in 8 and 1
            // registers, recomputed per stage so they are not hoisted as 64 + 16 sums.
            let lane_chunks: [u32; 8] = core::array::from_fn(|c| kmajor_lane_part(lane, c as u32));
            let lane_rows = ldmatrix_a_offset(lane, 0, 0);
            for s in 0..stages {
                let (slot, buffer) = (s % ring, s % buffers);
                mbarrier_wait(staged(slot), (s / ring) & 1);
                if s >= buffers {
                    mbarrier_wait(drained(buffer), (s / buffers + 1) & 1);
                }
                let col_stage = opaque(staging(slot, from) + lane_rows);
                let kbuf = kmajor(buffer, t);
                let at = lane_chunks.map(|c| opaque(kbuf + c));
                // A unit's four loads (`ldmatrix_a_offset(lane, 16 pos, step)`, split) go
                // out before its stores, and the next unit's before those. Loading and
                // storing one fragment at a time, the transposing warps waited on each
                // load for half their cycles (ncu) and bounded the block.
                let load = |pos: u32| -> [[u32; 4]; 4] {
                    core::array::from_fn(|step| {
                        ldmatrix_x4_trans(col_stage + 16 * SMEM_ROW_BYTES * step as u32 + 32 * pos)
                    })
                };
                let mut next = load(0);
                unroll!(pos in [0, 1, 2, 3] {
                    let f = next;
                    if pos < 3 {
                        next = load(pos as u32 + 1);
                    }
                    unroll!(step in [0, 1, 2, 3] {
                        unroll!(reg in [0, 1, 2, 3] {
                            st_shared_u32(at[2 * step + reg / 2] + kmajor_row_part(pos as u32, reg as u32), f[step][reg]);
                        });
                        col_sum[pos][0] = dp4a(f[step][2], 0x0100_0100, dp4a(f[step][0], 0x0100_0100, col_sum[pos][0]));
                        col_sum[pos][1] = dp4a(f[step][3], 0x0100_0100, dp4a(f[step][1], 0x0100_0100, col_sum[pos][1]));
                    });
                });
                fence_proxy_async_shared();
                mbarrier_arrive(full(buffer));
                sync_warp();
                if lane == 0 {
                    mbarrier_arrive(free(slot));
                }
            }
            let (g, q) = (lane / 4, lane % 4);
            unroll!(pos in [0, 1, 2, 3] {
                unroll!(k in [0, 1] {
                    let mut s = col_sum[pos][k] as u32;
                    s = s.wrapping_add(shfl_xor(s, 1));
                    s = s.wrapping_add(shfl_xor(s, 2));
                    if q == 0 {
                        st_shared_u32(colsum + 4 * (TILE * t + 16 * pos as u32 + g + 8 * k as u32), s);
                    }
                });
            });
            mbarrier_arrive(summed);
        }
        // No block barrier from here on: the consumers wait for `summed` only.
    } else {
        set_max_registers::<CONSUMER_REGISTERS, true>();
        let consumer = Consumer {
            ring,
            buffers,
            stages,
            lane,
            warp,
            staged: staged(0),
            free: free(0),
            full: full(0),
            drained: drained(0),
            summed,
            row_stage: staging(0, group - 1),
            slot_bytes: kind.staging_tile(1, 0) - kind.staging_tile(0, 0),
            kmajor: kmajor(0, 0),
            buffer_bytes: kind.kmajor_tile(1, 0) - kind.kmajor_tile(0, 0),
        };
        if CHANNEL && group == 1 {
            // Pair (0, 0) only: B is column tile 0.
            let (re, im) = consumer.run::<32>();
            store::<32>(&re, &im, output, p, order, channel, thread, 0, 0, colsum, mode);
        } else {
            let (re, im) = consumer.run::<64>();
            store::<64>(
                &re,
                &im,
                output,
                p,
                order,
                channel,
                thread,
                2 * row + group - 1,
                2 * col,
                colsum,
                mode,
            );
        }
    }
}

/// A consumer warpgroup's view of the `Split` block's shared memory: mbarriers and
/// regions of slot / buffer 0, and the strides to the next.
#[derive(Clone, Copy)]
struct Consumer {
    ring: u32,
    buffers: u32,
    stages: u32,
    lane: u32,
    warp: u32,
    staged: u32,
    free: u32,
    full: u32,
    drained: u32,
    summed: u32,
    row_stage: u32,
    slot_bytes: u32,
    kmajor: u32,
    buffer_bytes: u32,
}

impl Consumer {
    /// Stage s: wait for its buffers, load A, release the slot, issue, retire, release
    /// the K-major buffer; returns the accumulators once the column sums are stored. Each
    /// consumer drains its wgmmas every stage (the other consumer's keep the tensor pipe
    /// busy meanwhile): ptxas serialises every wgmma when A is double-buffered across a
    /// pending group (C7513) or when the retiring wait sits at the top of the next
    /// iteration (C7515 in one of the two kernels).
    #[inline(always)]
    unsafe fn run<const N: usize>(self) -> ([i32; N], [i32; N]) {
        let c = self;
        let mut re = [0i32; N];
        let mut im = [0i32; N];
        for s in 0..c.stages {
            let (slot, buffer) = (s % c.ring, s % c.buffers);
            mbarrier_wait(c.full + 8 * buffer, (s / c.buffers) & 1);
            mbarrier_wait(c.staged + 8 * slot, (s / c.ring) & 1);
            let row_stage = c.row_stage + c.slot_bytes * slot;
            let mut a = [[0u32; 4]; 4];
            let mut a_swapped = [[0u32; 4]; 4];
            unroll!(step in [0, 1, 2, 3] {
                a[step] = ldmatrix_x4_trans(row_stage + ldmatrix_a_offset(c.lane, 16 * c.warp, step as u32));
                a_swapped[step] = a[step].map(|w| prmt(w, w, 0x2301) ^ 0xff00_ff00);
            });
            // Every thread releases the slot after its own loads. (Lane 0 arriving for
            // its warp after `bar.warp.sync` is also ordered under the PTX memory model,
            // but compute-sanitizer racecheck then reported these loads as hazards
            // against the slot's refill; it does not model that ordering.)
            mbarrier_arrive(c.free + 8 * slot);
            fence();
            let kbuf = c.kmajor + c.buffer_bytes * buffer;
            unroll!(step in [0, 1, 2, 3] {
                let b = descriptor_k_major_128b(kbuf + 32 * step as u32);
                mma::<N>(&mut re, a[step], b);
                mma::<N>(&mut im, a_swapped[step], b);
            });
            commit_group();
            wait_group::<0>();
            if c.lane == 0 {
                mbarrier_arrive(c.drained + 8 * buffer);
            }
        }
        wait_group::<0>();
        mbarrier_wait(c.summed, 0);
        (re, im)
    }
}

/// `x`, opaque to the optimiser (computed where it stands, never hoisted or folded).
#[inline(always)]
fn opaque(mut x: u32) -> u32 {
    // SAFETY: a register move.
    unsafe { asm!("mov.b32 {0}, {0};", inout(reg32) x, options(nostack, nomem)) };
    x
}
