//! The correlator on Hopper's warpgroup tensor cores (sm_90a module; the parent module's
//! formula, tiles, triangle mapping, time slices and output layout).
//!
//! A warpgroup (128 threads) computes 64 rows x 64 or 128 columns of receivers of one channel
//! and time slice with `wgmma` m64n64k32 / m64n128k32 s8 (s32 accumulate, exact), A (rows)
//! from registers and B (columns) from shared memory: `Re V = [a1, b1] . [a2, b2]` and
//! `Im V = [b1, ~a1] . [a2, b2] + sum_t b2` as in the parent module, so no input is negated
//! and -128 stays exact; the two products share B. Block kinds ([`Kind`], [`Plan`]), chosen by
//! the tiles per channel:
//! - `Pair` (one tile): one warpgroup per lower-triangle 64-tile pair (the triangle mapping
//!   of Clark, La Plante & Greenhill sec. 4.2).
//! - `Split` (three tiles or more): one block per lower-triangle pair of 128-receiver
//!   super-tiles, each consumer warpgroup 64 x 128 (m64n128k32), so each staged byte feeds
//!   twice the MMAs of a pair block (half the L2 traffic, which bounds the pair block as N
//!   grows). Warp-specialised: a producer warpgroup (two warps copying, two transposing the
//!   column tiles, `setmaxnreg` down to [`PRODUCER_REGISTERS`]) and two consumer warpgroups
//!   (up to [`CONSUMER_REGISTERS`]) that only load A fragments and issue `wgmma`s. Stages are
//!   handed over with `mbarrier`s instead of block barriers, so the copies and transposes run
//!   ahead (a ring of 4 staging slots, 3 K-major buffers) while each consumer loads A, issues
//!   and retires its stage (the other consumer's `wgmma`s fill the gaps), and the copying
//!   warps never fence (see below).
//! - `ChannelSplit` (exactly two tiles, 65-128 receivers): `Split`'s recipe with one block per
//!   channel: consumer 1 computes pair (0, 0) with m64n64, consumer 2 pairs (1, 0) and (1, 1)
//!   with m64n128, and the ring has 8 slots of the two tiles (the input comes from DRAM, read
//!   once).
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
//! `cp.async` copies still in flight, a DRAM or L2 round trip per stage. So in the `Split`
//! blocks the warps that copy and those that transpose (and fence) are different, and the
//! single-warpgroup `Pair` block issues its refill after the fence.
//!
//! Shared memory (base rounded up to 1024 B): K-major tiles `[parity][tile]`, then the ring of
//! staging tiles `[slot][tile]`, then the column sums `[tile][64]`, then the `Split` blocks'
//! mbarriers.

use super::{triangle_blocks, triangle_tile, SMEM_TILE_BYTES, TILE, TIME_TILE};
use crate::wgmma::swizzle_128b;

/// One K-major tile: 64 receivers x 128 bytes (64 complex times).
pub const KMAJOR_TILE_BYTES: u32 = TILE * 2 * TIME_TILE;

const _: () = assert!(2 * TIME_TILE == 128, "one stage is one 128-byte K-major row");

/// The block kinds: one sm_90a kernel each per memory order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
#[non_exhaustive]
pub enum Kind {
    /// One warpgroup per lower-triangle 64-tile pair (channels of one tile).
    Pair = 0,
    /// One block per lower-triangle pair of 128-receiver super-tiles, warp-specialised (one
    /// producer and two consumer warpgroups of 64 x 128, `mbarrier` hand-off; see the module
    /// documentation).
    Split = 3,
    /// `Split`'s recipe for a channel of exactly two tiles (one block per channel): the
    /// consumers compute pair (0, 0) with m64n64 and pairs (1, 0), (1, 1) with m64n128, and
    /// the ring has 8 slots of the two tiles (the input comes from DRAM, read once).
    ChannelSplit = 4,
}
// The discriminants are those the kinds had while the retired `Channel` (1) and `Wide` (2)
// stood between them: with them the kernels' code is unchanged.

/// `.maxnreg` of the `Split` and `ChannelSplit` kernels: 384 threads x 168 fill the register
/// file (64 K registers per SM), then the producer gives registers to the consumers with
/// `setmaxnreg`.
pub const SPLIT_LAUNCH_REGISTERS: u32 = 168;
/// `setmaxnreg` targets of the `Split` producer and consumer warpgroups: the consumers use
/// 192 registers, but at 200 or 208 ptxas serialised their wgmmas (C7520); the producer's
/// 72 let each transposing warp load a 16-receiver unit, and the next, before storing it.
pub const PRODUCER_REGISTERS: u32 = 72;
/// `setmaxnreg` target of the `Split` and `ChannelSplit` consumer warpgroups (see
/// [`PRODUCER_REGISTERS`]): 128 x 72 + 256 x 216 registers fit the 384 x
/// [`SPLIT_LAUNCH_REGISTERS`] the block launched with.
pub const CONSUMER_REGISTERS: u32 = 216;
const _: () = assert!(128 * PRODUCER_REGISTERS + 256 * CONSUMER_REGISTERS <= 384 * SPLIT_LAUNCH_REGISTERS);
/// `Split` producer roles: warps 0-1 copy (`cp.async`), warps 2-3 transpose column tile
/// `warp - 2` (these two never have copies in flight when they fence).
pub const COPY_THREADS: u32 = 64;

/// What one warpgroup of a block computes, stages and transposes. Tiles are 64-receiver
/// tiles; staging and K-major indices number the block's tiles in shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Tile of the A rows, and its staging index.
    pub tile_row: u32,
    /// Staging index (slot within a ring stage) of the A row tile `tile_row`.
    pub row_index: u32,
    /// Tile of the first B column (B spans `Kind::cols() / 64` consecutive tiles), and the
    /// K-major index holding it (the next ones follow).
    pub tile_col: u32,
    /// K-major index of the first B column tile `tile_col` (the next ones follow it).
    pub b_index: u32,
    /// Tiles this warpgroup copies each stage: (tile, staging index).
    pub copies: [Option<(u32, u32)>; 4],
    /// (staging index, K-major index) of the tiles this warpgroup transposes each stage.
    pub transposes: [Option<(u32, u32)>; 2],
}

/// The two 64 x 128 warpgroups of a block of 128-receiver super-tiles (super-tile pair
/// `block`): warpgroup 0 copies every tile, warpgroup 1 transposes both column tiles, and
/// warpgroup g computes rows of tile `2 row + g`. `Split` splits these roles between its
/// producer and consumers.
const fn super_tile_plan(group: u32, block: u32) -> Plan {
    let (row, col) = triangle_tile(block);
    let diagonal = row == col;
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
        transposes: if group == 1 { [Some((col_index, 0)), Some((col_index + 1, 1))] } else { [None; 2] },
    }
}

impl Kind {
    /// Every kind, one sm_90a kernel each per memory order.
    pub const ALL: [Kind; 3] = [Kind::Pair, Kind::Split, Kind::ChannelSplit];

    /// The kind for channels of `tiles` tiles: `Pair` for one, `ChannelSplit` for two,
    /// `Split` above.
    pub const fn for_tiles(tiles: u32) -> Kind {
        match tiles {
            0 | 1 => Kind::Pair,
            2 => Kind::ChannelSplit,
            _ => Kind::Split,
        }
    }
    /// Whether the kind's blocks cover channels of `tiles` tiles (`ChannelSplit`: exactly
    /// two; the others any number).
    pub const fn covers(self, tiles: u32) -> bool {
        !matches!(self, Kind::ChannelSplit) || tiles == 2
    }
    /// Warpgroups (128 threads each) per block: 1 for `Pair`; 3 for `Split` and
    /// `ChannelSplit` (one producer, two consumers).
    pub const fn warpgroups(self) -> u32 {
        match self {
            Kind::Pair => 1,
            Kind::Split | Kind::ChannelSplit => 3,
        }
    }
    /// Leading warpgroups that compute nothing (the `Split` producer).
    pub const fn producers(self) -> u32 {
        match self {
            Kind::Split | Kind::ChannelSplit => 1,
            _ => 0,
        }
    }
    /// Threads per block, `128 * warpgroups()`: 128 or 384.
    pub const fn threads(self) -> u32 {
        128 * self.warpgroups()
    }
    /// Columns (B rows) per warpgroup: the wgmma N (`ChannelSplit`: of its wider consumer).
    pub const fn cols(self) -> u32 {
        match self {
            Kind::Split | Kind::ChannelSplit => 128,
            _ => 64,
        }
    }
    /// Tiles a block stages per time step (diagonal blocks use half).
    pub const fn tiles(self) -> u32 {
        match self {
            Kind::Split => 4,
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
            Kind::Split => 4,
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
            Kind::ChannelSplit => 1,
            Kind::Split => triangle_blocks(tiles.div_ceil(2)),
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
            Kind::Split => {
                // The producer copies as the super-tile block's first warpgroup and
                // transposes as its second; consumer g computes as its warpgroup g - 1.
                if group == 0 {
                    let (copier, transposer) = (super_tile_plan(0, block), super_tile_plan(1, block));
                    Plan { copies: copier.copies, transposes: transposer.transposes, ..copier }
                } else {
                    Plan { copies: [None; 4], transposes: [None; 2], ..super_tile_plan(group - 1, block) }
                }
            }
            // Split's diagonal block 0 (consumer 1 uses only the first of its two column tiles).
            Kind::ChannelSplit => Kind::Split.plan(group, 0),
        }
    }
    /// Byte offset (from the 1024-aligned base) of the ring of staging tiles `[slot][tile]`,
    /// which follows the K-major tiles `[parity][tile]`.
    pub const fn staging_offset(self) -> u32 {
        self.kmajor_buffers() * self.kmajor_tiles() * KMAJOR_TILE_BYTES
    }
    /// Byte offset of the column sums `[tile][64]` (int32 `sum_t b2` per column receiver of
    /// each K-major tile), which follow the staging ring.
    pub const fn colsum_offset(self) -> u32 {
        self.staging_offset() + self.ring() * self.tiles() * SMEM_TILE_BYTES
    }
    /// Dynamic shared memory per block, with the 1024 bytes the base may be moved up by.
    pub const fn smem_bytes(self) -> u32 {
        1024 + self.barrier_offset() + 8 * self.barriers()
    }
    /// Byte offset of the `Split` blocks' mbarriers ([`Kind::barriers`] of 8 bytes each),
    /// which follow the column sums; the end of the layout for `Pair`.
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
/// The immediate part of [`kmajor_offset`]: the start of row `16 warp + 8 (reg % 2)`, which
/// the 128-byte swizzle (a function of the row modulo 8) shares with row g of
/// [`kmajor_lane_part`].
pub const fn kmajor_row_part(warp: u32, reg: u32) -> u32 {
    128 * (16 * warp + 8 * (reg % 2))
}

#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
pub(super) mod pair;
#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
pub(super) mod split;

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
        for (kind, counts) in [(Kind::Pair, 1..=7), (Kind::Split, 1..=9), (Kind::ChannelSplit, 2..=2)] {
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
        // Three pair blocks per SM (the register count allows three); one split block.
        assert!(3 * Kind::Pair.smem_bytes() <= 227 * 1024);
        assert!(Kind::Split.smem_bytes() <= 227 * 1024);
        assert!(Kind::ChannelSplit.smem_bytes() <= 227 * 1024);
        for kind in Kind::ALL {
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
