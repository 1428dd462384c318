//! The correlator's pure layout: tiles, the triangle mapping of blocks, receivers of a tile,
//! shared-memory offsets and the `ldmatrix` addresses of the m16n8k32 fragments, the input
//! vectors each thread loads, and the output index. Shared by the kernels, the host and the
//! CPU tests (formulas and design: the parent module).

use super::{Format, Order};

/// Receivers per tile side.
pub const TILE: u32 = 64;
/// Time samples per shared-memory stage; T must be a multiple of it.
pub const TIME_TILE: u32 = 64;
/// Bytes per shared-memory row (one time sample of 64 complex int8 receivers, plus 16 bytes of
/// padding so the 8 rows an `ldmatrix` phase reads fall in distinct bank groups).
pub const SMEM_ROW_BYTES: u32 = 2 * TILE + 16;
/// Bytes of one tile's stage in shared memory.
pub const SMEM_TILE_BYTES: u32 = TIME_TILE * SMEM_ROW_BYTES;
/// Dynamic shared memory per block: two tiles, double-buffered.
pub const SMEM_BYTES: u32 = 4 * SMEM_TILE_BYTES;
/// A kernel variant's block: warps, each computing `16 m_tiles x 8 n_tiles` receivers of the
/// 64 x 64 tile pair as m16n8k32 fragments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// m16 fragments per warp along the tile's rows (receivers of the first tile).
    pub m_tiles: u32,
    /// n8 fragments per warp along the tile's columns (receivers of the second tile).
    pub n_tiles: u32,
}

impl Shape {
    /// Receiver rows of one warp's sub-tile, `16 m_tiles` (32 for both shapes).
    pub const fn warp_rows(self) -> u32 {
        16 * self.m_tiles
    }
    /// Receiver columns of one warp's sub-tile, `8 n_tiles` (64 async, 32 staged).
    pub const fn warp_cols(self) -> u32 {
        8 * self.n_tiles
    }
    /// Warps per block: sub-tiles covering the [`TILE`] x [`TILE`] tile pair (2 async, 4
    /// staged); warp `w`'s sub-tile starts at [`Shape::warp_origin`]`(w)`.
    pub const fn warps(self) -> u32 {
        (TILE / self.warp_rows()) * (TILE / self.warp_cols())
    }
    /// Threads per block, `32 * warps()`: the block size the kernels of this shape launch with.
    pub const fn threads(self) -> u32 {
        32 * self.warps()
    }
    /// First (row, column) receiver of warp `warp`'s sub-tile.
    pub const fn warp_origin(self, warp: u32) -> (u32, u32) {
        let across = TILE / self.warp_cols();
        (self.warp_rows() * (warp / across), self.warp_cols() * (warp % across))
    }
}

/// cp.async kernels (16-byte aligned int8 rows): 2 warps of 32 x 64 receivers, so each
/// fragment load and each operand transform serves twice as many MMAs.
pub const ASYNC_SHAPE: Shape = Shape { m_tiles: 2, n_tiles: 8 };
/// Register-staged kernels (int4, unaligned int8): 4 warps of 32 x 32, leaving registers for
/// the staged vectors.
pub const STAGED_SHAPE: Shape = Shape { m_tiles: 2, n_tiles: 4 };

/// Index of visibility (i, pi; j, pj) of `channel` in the output layout `[c][b(i,j)][pi][pj]`
/// (complex elements), `baselines` = N (N + 1) / 2.
pub const fn visibility_index(
    channel: u32,
    baselines: u64,
    pols: u32,
    i: u32,
    j: u32,
    pi: u32,
    pj: u32,
) -> u64 {
    ((channel as u64 * baselines + baseline_index(i, j)) * pols as u64 + pi as u64) * pols as u64 + pj as u64
}

/// Stations per tile for `pols` polarisations (1 or 2).
pub const fn stations_per_tile(pols: u32) -> u32 {
    TILE / pols
}

/// Number of station tiles covering `stations`.
pub const fn station_tiles(stations: u32, pols: u32) -> u32 {
    stations.div_ceil(stations_per_tile(pols))
}

/// Blocks per channel: lower-triangle tile pairs including the diagonal.
pub const fn triangle_blocks(tiles: u32) -> u32 {
    tiles * (tiles + 1) / 2
}

/// The triangle mapping of Clark, La Plante & Greenhill (sec. 4.2): linear block index
/// `k = row (row + 1) / 2 + col`, `col <= row` -> (row, col).
pub const fn triangle_tile(k: u32) -> (u32, u32) {
    let mut row = ((8 * k as u64 + 1).isqrt() as u32 - 1) / 2;
    // isqrt is exact, so at most one correction step is ever needed; keep both for clarity.
    while row * (row + 1) / 2 > k {
        row -= 1;
    }
    while (row + 1) * (row + 2) / 2 <= k {
        row += 1;
    }
    (row, k - row * (row + 1) / 2)
}

/// Baseline index of stations `i >= j` (lower triangle, row-major).
pub const fn baseline_index(i: u32, j: u32) -> u64 {
    i as u64 * (i as u64 + 1) / 2 + j as u64
}

/// (station, pol) of tile receiver `rho` (0..64) in station tile `tile`. The local order
/// follows the memory order, so each tile row in shared memory is a copy of contiguous input:
/// `rho = s * pols + p` (StationPol) or `rho = p * stations_per_tile + s` (PolStation).
pub const fn receiver(order: Order, pols: u32, tile: u32, rho: u32) -> (u32, u32) {
    let spt = stations_per_tile(pols);
    let (s, p) = match order {
        Order::StationPol => (rho / pols, rho % pols),
        Order::PolStation => (rho % spt, rho / spt),
    };
    (tile * spt + s, p)
}

/// Smallest and largest station among tile receivers `rho0 .. rho0 + len` (an aligned power
/// of two of at least 8): a warp whose row stations all lie below its column stations (in a
/// diagonal tile) computes nothing that is written.
pub const fn station_span(order: Order, pols: u32, tile: u32, rho0: u32, len: u32) -> (u32, u32) {
    let spt = stations_per_tile(pols);
    if matches!(order, Order::PolStation) && len > spt {
        // The range covers both polarisations: every station of the tile.
        return (tile * spt, tile * spt + spt - 1);
    }
    let first = receiver(order, pols, tile, rho0).0;
    let last = receiver(order, pols, tile, rho0 + len - 1).0;
    if first < last {
        (first, last)
    } else {
        (last, first)
    }
}

/// Shared-memory byte offset of receiver `rho` at stage time `t` within a tile buffer.
pub const fn smem_offset(t: u32, rho: u32) -> u32 {
    t * SMEM_ROW_BYTES + 2 * rho
}

/// Address (offset in a tile buffer) each lane gives `ldmatrix.x4.trans` for the A fragment
/// of m16n8k32 rows `rho0 .. rho0 + 16`, k-step `step` (time samples 16 step .. +16).
/// Matrices: 0 = (t 0-7, rho 0-7), 1 = (t 0-7, rho 8-15), 2 = (t 8-15, rho 0-7),
/// 3 = (t 8-15, rho 8-15), giving a0..a3 of the m16n8k32 A register assignment.
pub const fn ldmatrix_a_offset(lane: u32, rho0: u32, step: u32) -> u32 {
    let (matrix, row) = (lane / 8, lane % 8);
    smem_offset(16 * step + 8 * (matrix / 2) + row, rho0 + 8 * (matrix % 2))
}

/// As [`ldmatrix_a_offset`] for two B fragments (columns `rho0 .. rho0 + 8` and `+8 .. +16`):
/// matrices 0 = (t 0-7, rho 0-7), 1 = (t 8-15, rho 0-7), 2 = (t 0-7, rho 8-15),
/// 3 = (t 8-15, rho 8-15), so registers (0, 1) and (2, 3) are b0, b1 of the two n-tiles.
pub const fn ldmatrix_b_offset(lane: u32, rho0: u32, step: u32) -> u32 {
    let (matrix, row) = (lane / 8, lane % 8);
    smem_offset(16 * step + 8 * (matrix % 2) + row, rho0 + 8 * (matrix / 2))
}

/// Raw 16-byte input vectors per thread per tile per stage.
pub const fn vectors_per_thread(format: Format, threads: u32) -> u32 {
    TIME_TILE * TILE * format.bytes() / 16 / threads
}

/// Which input vector `v` (of a tile-stage) covers: (stage time, first receiver `rho`).
pub const fn vector_position(format: Format, v: u32) -> (u32, u32) {
    let per_row = TILE * format.bytes() / 16;
    (v / per_row, (v % per_row) * (16 / format.bytes()))
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::bank::is_conflict_free;
    use crate::layout::{Location, M16N8K32_S8_A, M16N8K32_S8_B};

    #[test]
    fn triangle_mapping_inverts_the_linear_index() {
        let mut k = 0;
        for row in 0..200 {
            for col in 0..=row {
                assert_eq!(triangle_tile(k), (row, col));
                k += 1;
            }
        }
        assert_eq!(triangle_blocks(200), k);
    }

    #[test]
    fn receivers_of_a_tile_are_distinct_and_cover_its_stations() {
        for order in [Order::StationPol, Order::PolStation] {
            for pols in [1, 2] {
                let mut seen = std::collections::BTreeSet::new();
                for rho in 0..TILE {
                    let (s, p) = receiver(order, pols, 3, rho);
                    assert!(p < pols && s >= 3 * stations_per_tile(pols) && s < 4 * stations_per_tile(pols));
                    assert!(seen.insert((s, p)));
                }
            }
        }
    }

    /// The element index the kernel computes for receiver rho is contiguous over each 16-byte
    /// vector, so a vector load reads exactly the receivers it stores.
    #[test]
    fn vectors_hold_consecutive_elements() {
        for format in [Format::Ci8, Format::Ci4] {
            for order in [Order::StationPol, Order::PolStation] {
                for pols in [1, 2] {
                    let (stations, channels, t, c) = (256u64, 3u64, 5u64, 1u64);
                    let element = |rho: u32| {
                        let (s, p) = receiver(order, pols, 2, rho);
                        match order {
                            Order::StationPol => {
                                ((t * channels + c) * stations + s as u64) * pols as u64 + p as u64
                            }
                            Order::PolStation => {
                                ((t * channels + c) * pols as u64 + p as u64) * stations + s as u64
                            }
                        }
                    };
                    let per_vector = 16 / format.bytes();
                    for v in 0..TIME_TILE * TILE * format.bytes() / 16 {
                        let (_, rho0) = vector_position(format, v);
                        for n in 0..per_vector {
                            assert_eq!(element(rho0 + n), element(rho0) + n as u64);
                        }
                        assert_eq!((element(rho0) * format.bytes() as u64) % 16, 0);
                    }
                }
            }
        }
    }

    #[test]
    fn every_tile_stage_element_is_loaded_once() {
        for format in [Format::Ci8, Format::Ci4] {
            let mut hit = std::vec![0u32; (TIME_TILE * TILE) as usize];
            let per_vector = 16 / format.bytes();
            for v in 0..TIME_TILE * TILE * format.bytes() / 16 {
                let (t, rho0) = vector_position(format, v);
                for n in 0..per_vector {
                    hit[(t * TILE + rho0 + n) as usize] += 1;
                }
            }
            assert!(hit.iter().all(|&h| h == 1));
        }
    }

    /// ldmatrix.trans delivers to lane l, register m, the two time samples 2 (l % 4), +1 of
    /// receiver l / 4 of matrix m; with the offsets above that is exactly the m16n8k32 A and B
    /// register assignments with k = 2 t + ReIm and rows/columns = receivers.
    #[test]
    fn ldmatrix_offsets_give_the_mma_register_assignment() {
        let position = |offset: u32| (offset / SMEM_ROW_BYTES, (offset % SMEM_ROW_BYTES) / 2); // (t, rho)
        for step in 0..TIME_TILE / 16 {
            for lane in 0..32 {
                for reg in 0..4 {
                    // The row address lane 8 reg + (2 q or 2 q + 1) gives for matrix `reg`;
                    // lane `lane` receives column lane / 4 of it: rows 2 q, 2 q + 1.
                    let q = lane % 4;
                    for e in 0..4 {
                        let source_lane = 8 * reg + 2 * q + e / 2;
                        let (t, rho) = position(ldmatrix_a_offset(source_lane, 16, step));
                        let rho = rho + lane / 4;
                        let (row, k) =
                            M16N8K32_S8_A.coordinates(Location { lane, register: reg % 4, element: e });
                        // A register `reg` is matrix `reg`.
                        assert_eq!(
                            (rho - 16, 2 * (t - 16 * step) + e % 2),
                            (row, k),
                            "A lane {lane} reg {reg}"
                        );
                    }
                }
                for reg in 0..2 {
                    for tile in 0..2 {
                        let matrix = 2 * tile + reg;
                        let q = lane % 4;
                        for e in 0..4 {
                            let source_lane = 8 * matrix + 2 * q + e / 2;
                            let (t, rho) = position(ldmatrix_b_offset(source_lane, 32, step));
                            let rho = rho + lane / 4;
                            let (k, col) =
                                M16N8K32_S8_B.coordinates(Location { lane, register: reg, element: e });
                            assert_eq!(
                                (2 * (t - 16 * step) + e % 2, rho - 32 - 8 * tile),
                                (k, col),
                                "B lane {lane} reg {reg} tile {tile}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn shared_memory_accesses_are_bank_conflict_free() {
        for step in 0..TIME_TILE / 16 {
            for rho0 in [0, 16, 32, 48] {
                let a: [u32; 32] = core::array::from_fn(|l| ldmatrix_a_offset(l as u32, rho0, step));
                let b: [u32; 32] = core::array::from_fn(|l| ldmatrix_b_offset(l as u32, rho0, step));
                assert!(is_conflict_free(&a, 16) && is_conflict_free(&b, 16));
            }
        }
        for (format, threads) in [
            (Format::Ci8, STAGED_SHAPE.threads()),
            (Format::Ci4, STAGED_SHAPE.threads()),
            (Format::Ci8, ASYNC_SHAPE.threads()),
        ] {
            for warp in 0..threads / 32 {
                for m in 0..vectors_per_thread(format, threads) {
                    let stores: std::vec::Vec<u32> = (0..32)
                        .map(|l| {
                            let (t, rho) = vector_position(format, warp * 32 + l + threads * m);
                            smem_offset(t, rho)
                        })
                        .collect();
                    let first: [u32; 32] = stores.clone().try_into().unwrap();
                    assert!(is_conflict_free(&first, 16), "{format:?} store");
                    if format == Format::Ci4 {
                        let second: [u32; 32] = core::array::from_fn(|l| first[l] + 16);
                        assert!(is_conflict_free(&second, 16));
                    }
                }
            }
        }
    }

    #[test]
    fn shapes_tile_the_block_and_idle_warps_are_upper() {
        for shape in [ASYNC_SHAPE, STAGED_SHAPE] {
            let mut covered = std::vec![0u32; (TILE * TILE) as usize];
            for warp in 0..shape.warps() {
                let (r0, c0) = shape.warp_origin(warp);
                for r in r0..r0 + shape.warp_rows() {
                    for c in c0..c0 + shape.warp_cols() {
                        covered[(r * TILE + c) as usize] += 1;
                    }
                }
            }
            assert!(covered.iter().all(|&n| n == 1));
        }
        // A warp is idle only if every (row, column) station pair in it is above the diagonal.
        for order in [Order::StationPol, Order::PolStation] {
            for pols in [1, 2] {
                for shape in [ASYNC_SHAPE, STAGED_SHAPE] {
                    for warp in 0..shape.warps() {
                        let (r0, c0) = shape.warp_origin(warp);
                        let rows = station_span(order, pols, 5, r0, shape.warp_rows());
                        let cols = station_span(order, pols, 5, c0, shape.warp_cols());
                        let any_needed = (r0..r0 + shape.warp_rows()).any(|r| {
                            (c0..c0 + shape.warp_cols())
                                .any(|c| receiver(order, pols, 5, r).0 >= receiver(order, pols, 5, c).0)
                        });
                        assert_eq!(rows.1 < cols.0, !any_needed, "{order:?} P={pols} {shape:?} warp {warp}");
                    }
                }
            }
        }
    }
}
