//! The correlator on Hopper's warpgroup tensor cores (sm_90a module; seed 002 as the parent
//! module, same formula, tiles, triangle mapping, time slices and output layout).
//!
//! A warpgroup (128 threads) computes 64 rows x 64 or 128 columns of receivers of one channel
//! and time slice with `wgmma` m64n64k32 / m64n128k32 s8 (s32 accumulate, exact), A (rows)
//! from registers and B (columns) from shared memory: `Re V = [a1, b1] . [a2, b2]` and
//! `Im V = [b1, ~a1] . [a2, b2] + sum_t b2` as in the parent module, so no input is negated
//! and -128 stays exact; the two products share B. Block kinds ([`Kind`], [`Plan`]):
//! - `Pair`: one warpgroup per lower-triangle 64-tile pair (seed sec. 4.2 mapping); used for
//!   channels of one tile.
//! - `Channel`: one block per channel of exactly two tiles (65-128 receivers), three
//!   warpgroups for its three tile pairs: the input is read from DRAM once. A building block
//!   of `ChannelSplit`, with no kernel of its own.
//! - `Wide`: one block per lower-triangle pair of 128-receiver super-tiles, two warpgroups of
//!   64 x 128: each staged byte feeds twice the MMAs of a pair block (half the L2 traffic,
//!   which bounded the pair kernel at N = 512). A building block of `Split`, with no kernel
//!   of its own.
//! - `Split`: Wide's block, warp-specialised: a producer warpgroup (two warps copying, two
//!   transposing the column tiles, `setmaxnreg` down to 72 registers) and two consumer
//!   warpgroups (up to 216 registers) that only load A fragments and issue `wgmma`s. Stages
//!   are handed over with `mbarrier`s instead of block barriers, so the copies and transposes
//!   run ahead (a ring of 4 staging slots, 3 K-major buffers) while each consumer loads A,
//!   issues and retires its stage (the other consumer's `wgmma`s fill the gaps), and the
//!   copying warps never fence (see below).
//! - `ChannelSplit`: `Split`'s recipe for a channel of exactly two tiles: one block per channel, consumer 1 computes pair (0, 0) with
//!   m64n64, consumer 2 pairs (1, 0) and (1, 1) with m64n128, and the ring has 8 slots of the
//!   two tiles (the input comes from DRAM, read once).
//!
//! int8 `wgmma` reads B only K-major (K = time contiguous), while the input has receivers
//! contiguous. So each stage goes: `cp.async` of the input rows into `smem[t][rho]` (the
//! parent's padded, conflict-free layout; a ring of `Kind::ring` stages), then
//! `ldmatrix.trans`, which hands lane (g, q) the 4 bytes of receiver g at times 2q, 2q + 1
//! (the m16n8k32 A fragment), and a 4-byte store of that word into row rho of a
//! 128-byte-swizzled K-major tile ([`kmajor_offset`]); the same words feed the column sums
//! (`dp4a`). The row tiles' A fragments come from the same `ldmatrix.trans`, so rows are never
//! transposed in memory; `[Im, ~Re]` is one `prmt` and one xor per register. Stage s's
//! `wgmma`s overlap the wait for stage s + 1's copy and its transposition; the A registers
//! are reloaded only after `wgmma.wait_group 0` (registers an op in flight still reads must
//! not change, and ptxas serialises every wgmma where it cannot prove that).
//!
//! The transposed tiles reach `wgmma` (the async proxy) through `fence.proxy.async`, which
//! compiles to `MEMBAR.ALL.CTA` + `FENCE.VIEW.ASYNC.S`; the membar may wait for the thread's
//! `cp.async` copies still in flight, a DRAM or L2 round trip per stage. So in the `Channel`
//! and `Wide` blocks the warpgroups that copy and those that transpose (and fence) are
//! different, and the single-warpgroup `Pair` block issues its refill after the fence.
//!
//! Shared memory (base rounded up to 1024 B): K-major tiles `[parity][tile]`, then the ring of
//! staging tiles `[slot][tile]`, then the column sums `[tile][64]`.

use super::{triangle_blocks, triangle_tile, SMEM_TILE_BYTES, TILE, TIME_TILE};
use crate::wgmma::swizzle_128b;

/// One K-major tile: 64 receivers x 128 bytes (64 complex times).
pub const KMAJOR_TILE_BYTES: u32 = TILE * 2 * TIME_TILE;

const _: () = assert!(2 * TIME_TILE == 128, "one stage is one 128-byte K-major row");

/// The block kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// One warpgroup per lower-triangle 64-tile pair (a channel of one tile; the fallback).
    Pair,
    /// One block per channel of exactly two tiles (65 to 128 receivers): three warpgroups
    /// for pairs (0, 0), (1, 0) and (1, 1), so each input byte is read from memory once.
    Channel,
    /// One block per lower-triangle pair of 128-receiver super-tiles: two warpgroups, each
    /// 64 rows x 128 columns (m64n128k32), so each staged byte feeds twice the MMAs of a
    /// pair block (half the L2 traffic, which bounds the pair kernel at N = 512).
    Wide,
    /// Wide's block and tiles, warp-specialised (one producer and two consumer warpgroups,
    /// `mbarrier` hand-off; see the module documentation).
    Split,
    /// `Split`'s recipe for a channel of exactly two tiles (one block per channel): the
    /// consumers compute pair (0, 0) with m64n64 and pairs (1, 0), (1, 1) with m64n128, and
    /// the ring has 8 slots of the two tiles (the input comes from DRAM, read once).
    ChannelSplit,
}

/// `.maxnreg` of the `Split` kernels (`build.rs`): 384 threads x 168 fill the register file,
/// then the producer gives registers to the consumers with `setmaxnreg`.
pub const REGISTER_LIMITS: [(&str, u32); 4] = [
    ("correlate_ci8_station_pol_wgmma_split", 168),
    ("correlate_ci8_pol_station_wgmma_split", 168),
    ("correlate_ci8_station_pol_wgmma_channel_split", 168),
    ("correlate_ci8_pol_station_wgmma_channel_split", 168),
];
/// `setmaxnreg` targets of the `Split` producer and consumer warpgroups: the consumers use
/// 192 registers, but at 200 or 208 ptxas serialised their wgmmas (C7520); the producer's
/// 72 let each transposing warp load a 16-receiver unit, and the next, before storing it.
pub const PRODUCER_REGISTERS: u32 = 72;
pub const CONSUMER_REGISTERS: u32 = 216;
const _: () = assert!(128 * PRODUCER_REGISTERS + 256 * CONSUMER_REGISTERS <= 384 * REGISTER_LIMITS[0].1);
/// `Split` producer roles: warps 0-1 copy (`cp.async`), warps 2-3 transpose column tile
/// `warp - 2` (these two never have copies in flight when they fence).
pub const COPY_THREADS: u32 = 64;

/// What one warpgroup of a block computes, stages and transposes. Tiles are 64-receiver
/// tiles; staging and K-major indices number the block's tiles in shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Tile of the A rows, and its staging index.
    pub tile_row: u32,
    pub row_index: u32,
    /// Tile of the first B column (B spans `Kind::cols() / 64` consecutive tiles), and the
    /// K-major index holding it (the next ones follow).
    pub tile_col: u32,
    pub b_index: u32,
    /// Tiles this warpgroup copies each stage: (tile, staging index).
    pub copies: [Option<(u32, u32)>; 4],
    /// (staging index, K-major index) of the tiles this warpgroup transposes each stage.
    pub transposes: [Option<(u32, u32)>; 2],
}

impl Kind {
    pub const fn warpgroups(self) -> u32 {
        match self {
            Kind::Pair => 1,
            Kind::Channel | Kind::Split | Kind::ChannelSplit => 3,
            Kind::Wide => 2,
        }
    }
    /// Leading warpgroups that compute nothing (the `Split` producer).
    pub const fn producers(self) -> u32 {
        match self {
            Kind::Split | Kind::ChannelSplit => 1,
            _ => 0,
        }
    }
    pub const fn threads(self) -> u32 {
        128 * self.warpgroups()
    }
    /// Columns (B rows) per warpgroup: the wgmma N (`ChannelSplit`: of its wider consumer).
    pub const fn cols(self) -> u32 {
        match self {
            Kind::Wide | Kind::Split | Kind::ChannelSplit => 128,
            _ => 64,
        }
    }
    /// Tiles a block stages per time step (diagonal blocks use half).
    pub const fn tiles(self) -> u32 {
        match self {
            Kind::Wide | Kind::Split => 4,
            _ => 2,
        }
    }
    /// Tiles transposed to K-major per time step.
    pub const fn kmajor_tiles(self) -> u32 {
        match self {
            Kind::Pair => 1,
            _ => 2,
        }
    }
    /// Depth of the `cp.async` ring: `ring - 1` stages in flight while one is transposed.
    /// The channel kernel runs one block per SM and reads DRAM, so it keeps more in flight.
    pub const fn ring(self) -> u32 {
        match self {
            Kind::ChannelSplit => 8,
            Kind::Channel | Kind::Split => 4,
            _ => 3,
        }
    }
    /// K-major buffers (stages transposed ahead of the MMAs, plus the one they read).
    pub const fn kmajor_buffers(self) -> u32 {
        match self {
            Kind::Split | Kind::ChannelSplit => 3,
            _ => 2,
        }
    }
    /// mbarriers: `staged` and `free` per ring slot, `full` and `drained` per K-major buffer.
    pub const fn barriers(self) -> u32 {
        match self {
            Kind::Split | Kind::ChannelSplit => 2 * self.ring() + 2 * self.kmajor_buffers() + 1,
            _ => 0,
        }
    }
    /// Blocks per channel of `tiles` tiles.
    pub const fn blocks(self, tiles: u32) -> u32 {
        match self {
            Kind::Pair => triangle_blocks(tiles),
            Kind::Channel | Kind::ChannelSplit => 1,
            Kind::Wide | Kind::Split => triangle_blocks(tiles.div_ceil(2)),
        }
    }
    /// Warpgroup `group` of block `block` (the x index).
    pub const fn plan(self, group: u32, block: u32) -> Plan {
        match self {
            Kind::Pair => {
                let (row, col) = triangle_tile(block);
                let diagonal = row == col;
                Plan {
                    tile_row: row,
                    row_index: 0,
                    tile_col: col,
                    b_index: 0,
                    copies: [Some((row, 0)), if diagonal { None } else { Some((col, 1)) }, None, None],
                    transposes: [Some((if diagonal { 0 } else { 1 }, 0)), None],
                }
            }
            Kind::Channel => {
                // The middle warpgroup copies both tiles, the outer ones transpose one each
                // (the middle one's B is tile 0): the threads that fence for the async proxy
                // have no copies in flight (see the module documentation).
                let (row, col) = match group {
                    0 => (0, 0),
                    1 => (1, 0),
                    _ => (1, 1),
                };
                Plan {
                    tile_row: row,
                    row_index: row,
                    tile_col: col,
                    b_index: col,
                    copies: if group == 1 { [Some((0, 0)), Some((1, 1)), None, None] } else { [None; 4] },
                    transposes: [if group == 1 { None } else { Some((row, row)) }, None],
                }
            }
            Kind::Wide => {
                let (row, col) = triangle_tile(block);
                let diagonal = row == col;
                // Warpgroup 0 copies every tile, warpgroup 1 transposes both column tiles.
                let col_index = if diagonal { 0 } else { 2 };
                let copies = if group == 1 {
                    [None; 4]
                } else if diagonal {
                    [Some((2 * row, 0)), Some((2 * row + 1, 1)), None, None]
                } else {
                    [Some((2 * row, 0)), Some((2 * row + 1, 1)), Some((2 * col, 2)), Some((2 * col + 1, 3))]
                };
                Plan {
                    tile_row: 2 * row + group,
                    row_index: group,
                    tile_col: 2 * col,
                    b_index: 0,
                    copies,
                    transposes: if group == 1 {
                        [Some((col_index, 0)), Some((col_index + 1, 1))]
                    } else {
                        [None; 2]
                    },
                }
            }
            Kind::Split => {
                // The producer copies as Wide's first warpgroup and transposes as its second;
                // consumer g computes as Wide's warpgroup g - 1.
                if group == 0 {
                    let (copier, transposer) = (Kind::Wide.plan(0, block), Kind::Wide.plan(1, block));
                    Plan { copies: copier.copies, transposes: transposer.transposes, ..copier }
                } else {
                    Plan { copies: [None; 4], transposes: [None; 2], ..Kind::Wide.plan(group - 1, block) }
                }
            }
            // Split's diagonal block 0 (consumer 1 uses only the first of its two column tiles).
            Kind::ChannelSplit => Kind::Split.plan(group, 0),
        }
    }
    pub const fn staging_offset(self) -> u32 {
        self.kmajor_buffers() * self.kmajor_tiles() * KMAJOR_TILE_BYTES
    }
    pub const fn colsum_offset(self) -> u32 {
        self.staging_offset() + self.ring() * self.tiles() * SMEM_TILE_BYTES
    }
    /// Dynamic shared memory per block, with the 1024 bytes the base may be moved up by.
    pub const fn smem_bytes(self) -> u32 {
        1024 + self.barrier_offset() + 8 * self.barriers()
    }
    pub const fn barrier_offset(self) -> u32 {
        self.colsum_offset() + 4 * TILE * self.kmajor_tiles()
    }
    /// Offset of K-major tile `index` of buffer `parity` (stage s uses buffer s %
    /// `kmajor_buffers`; 1024-aligned; consecutive indices are adjacent, so one descriptor
    /// spans a warpgroup's whole B).
    pub const fn kmajor_tile(self, parity: u32, index: u32) -> u32 {
        (self.kmajor_tiles() * parity + index) * KMAJOR_TILE_BYTES
    }
    /// Offset of staging tile `index` of ring slot `slot`.
    pub const fn staging_tile(self, slot: u32, index: u32) -> u32 {
        self.staging_offset() + (self.tiles() * slot + index) * SMEM_TILE_BYTES
    }
}

/// Where (in a K-major tile) lane `lane` of warp `warp` stores register `reg` of the
/// fragment `ldmatrix_a_offset(lane, 16 warp, step)` loaded: receiver `16 warp + g + 8 (reg %
/// 2)`, bytes `32 step + 16 (reg / 2) + 4 q` of its 128-byte row, in the 128-byte swizzle.
pub const fn kmajor_offset(warp: u32, lane: u32, step: u32, reg: u32) -> u32 {
    let (g, q) = (lane / 4, lane % 4);
    swizzle_128b(16 * warp + g + 8 * (reg % 2), 32 * step + 16 * (reg / 2) + 4 * q)
}

/// [`kmajor_offset`] as a lane part (16-byte chunk `chunk` = 2 step + reg / 2 of row g: rows
/// 16 warp + 8 h + g share row g's swizzle) plus [`kmajor_row_part`], an immediate.
pub const fn kmajor_lane_part(lane: u32, chunk: u32) -> u32 {
    swizzle_128b(lane / 4, 16 * chunk + 4 * (lane % 4))
}
pub const fn kmajor_row_part(warp: u32, reg: u32) -> u32 {
    128 * (16 * warp + 8 * (reg % 2))
}

#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
pub use device::*;

#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
mod device {
    use super::super::{
        baseline_index, ldmatrix_a_offset, receiver, smem_offset, vector_position, visibility_index,
        write_visibility, Format, Order, Output, SMEM_ROW_BYTES,
    };
    use super::*;
    use crate::intrinsics::*;
    use crate::wgmma::{
        accumulator_position, commit_group, cp_async_arrive, descriptor_k_major_128b, fence,
        fence_proxy_async_shared, mbarrier_arrive, mbarrier_init, mbarrier_wait, mma_rs_m64n128k32_s32_s8,
        mma_rs_m64n64k32_s32_s8, set_max_registers, wait_group,
    };
    use core::arch::asm;

    #[derive(Clone, Copy)]
    struct Params {
        stations: u32,
        pols: u32,
        channels: u32,
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
    struct Source {
        offset: u64,
        inside: bool,
        index: u32,
    }

    /// Thread `thread` (within its warpgroup) copies vectors `thread + 128 m` of a tile-stage.
    #[inline(always)]
    fn source(p: Params, order: Order, tile: u32, channel: u32, thread: u32, index: u32) -> Source {
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
    unsafe fn copy_stage(
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
    unsafe fn mma<const N: usize>(d: &mut [i32; N], a: [u32; 4], b: u64) {
        if N == 32 {
            mma_rs_m64n64k32_s32_s8(&mut *(d as *mut [i32; N] as *mut [i32; 32]), a, b, true);
        } else {
            mma_rs_m64n128k32_s32_s8(&mut *(d as *mut [i32; N] as *mut [i32; 64]), a, b, true);
        }
    }

    const fn kind_of(kind: u32) -> Kind {
        match kind {
            0 => Kind::Pair,
            1 => Kind::Channel,
            2 => Kind::Wide,
            3 => Kind::Split,
            _ => Kind::ChannelSplit,
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn correlate<const KIND: u32, const N: usize>(
        input: *const u8,
        output: *mut u32,
        p: Params,
        order: Order,
        first_stage: u32,
        stages: u32,
        mode: Output,
    ) {
        if KIND == 3 {
            return correlate_split::<false>(input, output, p, order, first_stage, stages, mode);
        }
        if KIND == 4 {
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
        let copies =
            plan.copies.map(|c| c.map(|(tile, index)| source(p, order, tile, channel, thread, index)));

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
        // both copies and transposes (the pair kernel), it refills after the fence.
        let late_refill = KIND == 0;
        for s in 0..stages {
            let slot = s % ring;
            cp_async_wait_pending(ring - 2); // stage s landed: at most ring - 2 later groups pending
                                             // Stage s is visible; every thread is done with the slot refilled next.
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
    unsafe fn store<const N: usize>(
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

    /// The `Split` block: Wide's work, one producer and two consumer warpgroups. Stage s
    /// uses ring slot s % ring and K-major buffer s % kmajor_buffers; per slot the mbarriers
    /// `staged` (the copies landed: each copying thread arrives, and its counted `cp.async`
    /// arrival holds the phase until its copies land) and `free` (its readers are done: one
    /// arrival per transposing warp and per consumer thread), per buffer `full` (transposed
    /// and fenced: one arrival per transposing thread) and `drained` (the `wgmma`s reading it
    /// retired: one arrival per consumer warp); `summed` once for the column sums. After the start no
    /// block barrier: the producer warps finish independently.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn correlate_split<const CHANNEL: bool>(
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

    macro_rules! wgmma_correlator_kernel {
        ($name:ident, $order:expr, $kind:expr, $n:expr) => {
            /// Same arguments and output as the sm_80 `correlate_ci8_*_async` kernels (int8,
            /// rows 16-byte aligned; `aligned` is ignored). Block (k, c, z): triangle tile
            /// pair k (the pair kernels) or all three (the channel kernels, k = 0) of channel
            /// c over time slice z; `Kind::threads()` threads and `Kind::smem_bytes()` of
            /// dynamic shared memory.
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $name(
                input: *const u8,
                output: *mut u32,
                stations: u32,
                pols: u32,
                channels: u32,
                times: u32,
                _aligned: u32,
                slice_stages: u32,
                mode: u32,
            ) {
                let first_stage = block_idx_z() * slice_stages;
                let stages = (times / TIME_TILE - first_stage).min(slice_stages);
                let mode = Output::from_mode(mode);
                correlate::<$kind, $n>(
                    input,
                    output,
                    Params { stations, pols, channels },
                    $order,
                    first_stage,
                    stages,
                    mode,
                );
            }
        };
    }

    wgmma_correlator_kernel!(correlate_ci8_station_pol_wgmma, Order::StationPol, 0, 32);
    wgmma_correlator_kernel!(correlate_ci8_pol_station_wgmma, Order::PolStation, 0, 32);
    wgmma_correlator_kernel!(correlate_ci8_station_pol_wgmma_split, Order::StationPol, 3, 64);
    wgmma_correlator_kernel!(correlate_ci8_pol_station_wgmma_split, Order::PolStation, 3, 64);
    wgmma_correlator_kernel!(correlate_ci8_station_pol_wgmma_channel_split, Order::StationPol, 4, 64);
    wgmma_correlator_kernel!(correlate_ci8_pol_station_wgmma_channel_split, Order::PolStation, 4, 64);
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::super::SMEM_TILE_BYTES;
    use super::super::{ldmatrix_a_offset, SMEM_ROW_BYTES};
    use super::*;
    use crate::bank::is_conflict_free;
    use crate::layout::{Location, M16N8K32_S8_A};

    /// The word lane l stores is its A-fragment word: K-major row = fragment row, byte =
    /// fragment k (k = 2 t + ReIm), so row rho of the tile holds receiver rho's times in order.
    #[test]
    fn kmajor_stores_put_each_receivers_times_in_its_row() {
        let unswizzle = |offset: u32| {
            let (row, chunk) = (offset / 128, (offset % 128) / 16);
            (row, 16 * (chunk ^ (row % 8)) + offset % 16)
        };
        for warp in 0..4 {
            for step in 0..TIME_TILE / 16 {
                for lane in 0..32 {
                    for reg in 0..4 {
                        let (row, k) =
                            M16N8K32_S8_A.coordinates(Location { lane, register: reg, element: 0 });
                        let (rho, byte) = unswizzle(kmajor_offset(warp, lane, step, reg));
                        assert_eq!((rho, byte), (16 * warp + row, 32 * step + k));
                        // ... and the source word ldmatrix.trans gives it is that (receiver, time).
                        let source_lane = 8 * reg + 2 * (lane % 4);
                        let at = ldmatrix_a_offset(source_lane, 16 * warp, step);
                        let (t, rho0) = (at / SMEM_ROW_BYTES, (at % SMEM_ROW_BYTES) / 2);
                        assert_eq!((rho0 + lane / 4, 2 * t), (rho, byte));
                    }
                }
            }
        }
    }

    #[test]
    fn kmajor_offset_splits_into_lane_and_immediate_parts() {
        for warp in 0..4 {
            for lane in 0..32 {
                for step in 0..TIME_TILE / 16 {
                    for reg in 0..4 {
                        assert_eq!(
                            kmajor_offset(warp, lane, step, reg),
                            kmajor_lane_part(lane, 2 * step + reg / 2) + kmajor_row_part(warp, reg)
                        );
                        assert_eq!(
                            ldmatrix_a_offset(lane, 16 * warp, step),
                            ldmatrix_a_offset(lane, 0, 0) + 16 * SMEM_ROW_BYTES * step + 32 * warp
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn kmajor_stores_are_conflict_free_and_cover_the_tile() {
        let mut hit = std::vec![0u32; KMAJOR_TILE_BYTES as usize / 4];
        for warp in 0..4 {
            for step in 0..TIME_TILE / 16 {
                for reg in 0..4 {
                    let words: [u32; 32] = core::array::from_fn(|l| kmajor_offset(warp, l as u32, step, reg));
                    assert!(is_conflict_free(&words, 4));
                    for w in words {
                        hit[w as usize / 4] += 1;
                    }
                }
            }
        }
        assert!(hit.iter().all(|&h| h == 1));
    }

    /// Every lower-triangle tile pair is computed by exactly one warpgroup, from tiles its
    /// block stages (A) and transposes (B) each stage, with no staging or K-major slot
    /// written twice.
    #[test]
    fn plans_cover_the_lower_triangle_once_from_staged_tiles() {
        for (kind, counts) in [
            (Kind::Pair, 1..=7),
            (Kind::Channel, 2..=2),
            (Kind::Wide, 1..=9),
            (Kind::Split, 1..=9),
            (Kind::ChannelSplit, 2..=2),
        ] {
            for tiles in counts {
                let mut computed = std::collections::BTreeMap::new();
                for block in 0..kind.blocks(tiles) {
                    let (mut staged, mut kmajor) = ([None; 4], [None; 2]);
                    for group in 0..kind.warpgroups() {
                        let plan = kind.plan(group, block);
                        for (tile, index) in plan.copies.into_iter().flatten() {
                            assert!(index < kind.tiles());
                            assert!(
                                staged[index as usize].replace(tile).is_none(),
                                "{kind:?} staging {index}"
                            );
                        }
                        for (from, to) in plan.transposes.into_iter().flatten() {
                            assert!(to < kind.kmajor_tiles());
                            assert!(kmajor[to as usize].replace(from).is_none(), "{kind:?} K-major {to}");
                        }
                    }
                    for group in kind.producers()..kind.warpgroups() {
                        let plan = kind.plan(group, block);
                        assert_eq!(staged[plan.row_index as usize], Some(plan.tile_row), "{kind:?} rows");
                        for k in 0..kind.cols() / TILE {
                            let (row, col) = (plan.tile_row, plan.tile_col + k);
                            let from = kmajor[(plan.b_index + k) as usize].expect("B transposed");
                            assert_eq!(staged[from as usize], Some(plan.tile_col + k), "{kind:?} B");
                            if row >= col && row < tiles {
                                *computed.entry((row, col)).or_insert(0) += 1;
                            }
                        }
                    }
                }
                for row in 0..tiles {
                    for col in 0..=row {
                        assert_eq!(
                            computed.get(&(row, col)),
                            Some(&1),
                            "{kind:?} {tiles} tiles: ({row}, {col})"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn shared_memory_layout() {
        // Three pair blocks per SM (the register count allows three); one channel block.
        assert!(3 * Kind::Pair.smem_bytes() <= 227 * 1024);
        assert!(Kind::Channel.smem_bytes() <= 227 * 1024);
        assert!(Kind::Wide.smem_bytes() <= 227 * 1024);
        assert!(Kind::Split.smem_bytes() <= 227 * 1024);
        assert!(Kind::ChannelSplit.smem_bytes() <= 227 * 1024);
        for kind in [Kind::Pair, Kind::Channel, Kind::Wide, Kind::Split, Kind::ChannelSplit] {
            // K-major tiles stay 1024-aligned (swizzle atoms); staging rows 16-aligned.
            assert_eq!(KMAJOR_TILE_BYTES % 1024, 0);
            assert_eq!(kind.staging_offset() % 16, 0);
            assert_eq!(kind.colsum_offset() % 16, 0);
            // The regions are disjoint and inside the allocation.
            let mut regions = std::vec::Vec::new();
            assert_eq!(kind.barrier_offset() % 8, 0);
            for parity in 0..kind.kmajor_buffers() {
                for index in 0..kind.kmajor_tiles() {
                    let at = kind.kmajor_tile(parity, index);
                    assert_eq!(at % 1024, 0);
                    regions.push((at, at + KMAJOR_TILE_BYTES));
                }
            }
            for slot in 0..kind.ring() {
                for index in 0..kind.tiles() {
                    let at = kind.staging_tile(slot, index);
                    regions.push((at, at + SMEM_TILE_BYTES));
                }
            }
            regions.push((kind.colsum_offset(), kind.barrier_offset()));
            if kind.barriers() > 0 {
                regions.push((kind.barrier_offset(), kind.smem_bytes() - 1024));
            }
            regions.sort();
            assert!(regions.windows(2).all(|w| w[0].1 <= w[1].0), "{kind:?}: {regions:?}");
            assert!(regions.iter().all(|r| r.0 < r.1));
        }
    }
}
