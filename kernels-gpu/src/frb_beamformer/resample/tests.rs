//! CPU tests of the resampler's layouts (bank conflicts, coverage, fragment positions), its
//! registry and its kernel choice.
extern crate std;
use super::*;
use crate::bank::is_conflict_free;
use crate::frb_beamformer::FRB_CASES;
use crate::wgmma::swizzle_128b;
use std::vec::Vec;

/// The production tiling and, for the layout functions' generality, k-steps of 64.
const TILINGS: [GemmShape; 2] = [GEMM, GemmShape { bk: 64, stages: 3, ..GEMM }];

#[test]
fn swizzle_is_a_bijection_onto_the_tile() {
    for shape in TILINGS {
        let rows = shape.bm().max(shape.bn());
        let mut seen = [false; 256 * 8];
        for row in 0..rows {
            for chunk in 0..shape.chunks_per_row() {
                let at = swizzled(row, chunk, shape.bk);
                assert!(at.is_multiple_of(16) && at < rows * shape.row_bytes());
                assert!(!core::mem::replace(&mut seen[(at / 16) as usize], true), "{shape:?}");
                // The additive form the kernel uses for rows R + r, R a multiple of 16.
                let (big, small) = (row / 16 * 16, row % 16);
                assert_eq!(at, big * shape.row_bytes() + swizzled(small, chunk, shape.bk));
            }
        }
    }
}

#[test]
fn staged_j_takes_each_fragment_pair_once_without_conflicts() {
    // Per (m-tile, n-tile, half) lane 4 g + c of a warp stores the f16 pair (row 16 mt + g
    // + 8 h, columns 8 nt + 2c ..) of its tile.
    let mut seen = [false; (GEMM.bm() * GEMM.bn() / 2) as usize];
    for warp in 0..GEMM.threads() / 32 {
        let (warp_row, warp_col) = GEMM.warp_origin(warp);
        for (mt, nt, h) in
            (0..GEMM.mt).flat_map(|mt| (0..GEMM.nt).flat_map(move |nt| [(mt, nt, 0), (mt, nt, 1)]))
        {
            let at: [u32; 32] = core::array::from_fn(|lane| {
                let (g, c) = (lane as u32 / 4, lane as u32 % 4);
                staged_offset(warp_row + 16 * mt + g + 8 * h, warp_col + 8 * nt + 2 * c)
            });
            assert!(is_conflict_free(&at, 4), "warp {warp} ({mt}, {nt}, {h})");
            for a in at {
                assert!(a.is_multiple_of(4) && a < GEMM.bm() * GEMM.bn() * 2);
                assert!(!core::mem::replace(&mut seen[(a / 4) as usize], true));
            }
        }
    }
    assert!(seen.iter().all(|&s| s), "every pair of the tile staged");
}

#[test]
fn ldmatrix_reads_are_conflict_free() {
    for shape in TILINGS {
        for ks in 0..shape.bk / 16 {
            for tile in 0..shape.bm().max(shape.bn()) / 16 {
                let base = 16 * tile * shape.row_bytes();
                let a: [u32; 32] = core::array::from_fn(|l| base + a_ldmatrix_offset(l as u32, ks, shape.bk));
                let b: [u32; 32] = core::array::from_fn(|l| base + b_ldmatrix_offset(l as u32, ks, shape.bk));
                assert!(is_conflict_free(&a, 16), "{shape:?} A ks {ks} tile {tile}");
                assert!(is_conflict_free(&b, 16), "{shape:?} B ks {ks} tile {tile}");
            }
        }
    }
}

/// The rows and k each lane's `ldmatrix` address names are the m16n8k16 A and B layouts.
#[test]
fn ldmatrix_rows_are_the_fragment_rows() {
    for bk in [32, 64] {
        for ks in 0..bk / 16 {
            for lane in 0..32 {
                let a = a_ldmatrix_offset(lane, ks, bk);
                let b = b_ldmatrix_offset(lane, ks, bk);
                // Matrix i of the x4 is addressed by lanes 8i..8i+8, row lane % 8.
                let (i, r) = (lane / 8, lane % 8);
                // A: a0 rows 0-7 k 0-7, a1 rows 8-15, a2 rows 0-7 k 8-15, a3 rows 8-15.
                assert_eq!(a, swizzled(r + 8 * (i % 2), 2 * ks + i / 2, bk));
                // B: b0 b1 (k 0-7, 8-15) of beams 0-7, then of beams 8-15.
                assert_eq!(b, swizzled(r + 8 * (i / 2), 2 * ks + i % 2, bk));
            }
        }
    }
}

/// The fused path's shared-memory accesses: each warp's B writes (thread t = beam row t,
/// chunk c, 16 bytes) and its U^N reads (two 16-byte loads of 4 q each) are conflict-free;
/// the U^M read (4 bytes at a 16-byte stride) takes 4 wavefronts, half of the two
/// U^N reads' 8; U and the ring fit every grid of Table 2 of Smith's FRB note.
#[test]
fn fused_b_writes_and_u_reads_are_conflict_free() {
    let (bn, bk) = (GEMM.bn(), GEMM.bk);
    for warp in 0..GEMM.threads() / 32 {
        let beam = |l: usize| 32 * warp + l as u32;
        for c in 0..bk / 8 {
            let at: [u32; 32] = core::array::from_fn(|l| swizzled(beam(l), c, bk));
            assert!(is_conflict_free(&at, 16), "B write warp {warp} chunk {c}");
        }
        for x in (0..48).step_by(4) {
            let at: [u32; 32] = core::array::from_fn(|l| fused_u_offset(x, beam(l), bn));
            assert!(is_conflict_free(&at, 16), "U^N read warp {warp} x {x}");
            for sub in 0..4 {
                let at: [u32; 32] = core::array::from_fn(|l| fused_u_offset(x + sub, beam(l), bn));
                assert_eq!(crate::bank::wavefronts(&at, 4), 4, "U^M read warp {warp} x {}", x + sub);
            }
        }
    }
    for (m, n) in [(8, 8), (8, 12), (16, 16), (16, 20), (24, 24)] {
        assert!(fused_smem_bytes(m, n) <= 227 * 1024, "({m}, {n})");
        // The U arrays are whole 16-byte chunks: 2M and 2N are multiples of 4, and a B
        // chunk (8 rho) holds one p since 2N is a multiple of 8.
        assert!((2 * m) % 4 == 0 && (2 * n) % 8 == 0);
        // U^M and U^N tiles lie between the ring and the end, without overlap.
        let ring = GEMM.smem_bytes();
        assert_eq!(ring + fused_u_offset(2 * m - 1, bn - 1, bn) + 4, ring + 4 * bn * 2 * m);
        assert_eq!(fused_u_offset(2 * n - 1, bn - 1, bn) + 4, 4 * bn * 2 * n);
    }
}

#[test]
fn copies_cover_each_stage_once_without_conflicts() {
    for shape in TILINGS {
        for rows in [shape.bm(), shape.bn()] {
            let mut seen = [0u32; 256 * 8];
            for j in 0..shape.copies(rows) {
                for warp in 0..shape.threads() / 32 {
                    let at: [u32; 32] = core::array::from_fn(|l| {
                        let (r, c) = copy_chunk(&shape, 32 * warp + l as u32);
                        swizzled(r, c, shape.bk) + shape.copy_row_stride() * j * shape.row_bytes()
                    });
                    assert!(is_conflict_free(&at, 16), "{shape:?} copy {j} warp {warp}");
                    for (l, &a) in at.iter().enumerate() {
                        // The chunk lands where ldmatrix looks for its (row, chunk).
                        let (r, c) = copy_chunk(&shape, 32 * warp + l as u32);
                        if r + shape.copy_row_stride() * j >= rows {
                            continue; // the kernel skips this copy
                        }
                        assert_eq!(a, swizzled(r + shape.copy_row_stride() * j, c, shape.bk));
                        seen[(a / 16) as usize] += 1;
                    }
                }
            }
            let chunks = (rows * shape.chunks_per_row()) as usize;
            assert!(seen[..chunks].iter().all(|&n| n == 1), "{shape:?}");
        }
    }
}

#[test]
fn the_swizzle_is_the_sm80_kernels_for_128_byte_rows() {
    for row in 0..256 {
        for chunk in 0..8 {
            assert_eq!(swizzle_128b(row, 16 * chunk), swizzled(row, chunk, 64));
        }
    }
}

/// `copies(rows)` copies by `threads` threads through `chunk(thread, j)` cover a stage of
/// `rows` x 128 bytes once, each warp's 16-byte stores conflict-free, and every later copy
/// of a thread is its first plus whole rows (the form the kernel computes).
fn check_copies(threads: u32, copies: impl Fn(u32) -> u32, chunk: impl Fn(u32, u32) -> (u32, u32)) {
    for rows in [HOPPER_BM, HOPPER_BN] {
        let mut seen = [0u32; (HOPPER_BN * 8) as usize];
        for j in 0..copies(rows) {
            for warp in 0..threads / 32 {
                let at: [u32; 32] = core::array::from_fn(|l| {
                    let (r, c) = chunk(32 * warp + l as u32, j);
                    let (r0, _) = chunk(32 * warp + l as u32, 0);
                    assert_eq!(swizzle_128b(r, 16 * c), swizzle_128b(r0, 16 * c) + (r - r0) * 128);
                    swizzle_128b(r, 16 * c)
                });
                assert!(is_conflict_free(&at, 16), "rows {rows} copy {j} warp {warp}");
                for a in at {
                    seen[(a / 16) as usize] += 1;
                }
            }
        }
        assert!(seen[..(rows * 8) as usize].iter().all(|&n| n == 1), "rows {rows}");
    }
}

#[test]
fn wgmma_copies_cover_each_stage_once_without_conflicts() {
    check_copies(HOPPER_THREADS, hopper_copies, hopper_copy_chunk);
}

#[test]
fn wide_copies_cover_each_stage_once_without_conflicts() {
    // 384 threads: A (192 rows) in 4 copies; B (256 rows) in 5 whole copies and a sixth
    // of the first 16 rows of 48 (threads 0..127, whole warps).
    for (rows, copies) in [(WIDE_BM, 4), (HOPPER_BN, 6)] {
        let mut seen = [0u32; (HOPPER_BN * 8) as usize];
        for j in 0..copies {
            for warp in 0..WIDE_THREADS / 32 {
                let lanes: Vec<u32> = (0..32)
                    .map(|l| 32 * warp + l)
                    .filter(|&t| gemm_copy_chunk(WIDE_WARPGROUPS, t, j).0 < rows)
                    .collect();
                assert!(lanes.is_empty() || lanes.len() == 32, "rows {rows} copy {j}: partial warp {warp}");
                let at: Vec<u32> = lanes
                    .iter()
                    .map(|&t| {
                        let (r, c) = gemm_copy_chunk(WIDE_WARPGROUPS, t, j);
                        let (r0, _) = gemm_copy_chunk(WIDE_WARPGROUPS, t, 0);
                        // A thread's later copies are its first plus whole rows.
                        assert_eq!(swizzle_128b(r, 16 * c), swizzle_128b(r0, 16 * c) + (r - r0) * 128);
                        swizzle_128b(r, 16 * c)
                    })
                    .collect();
                if let Ok(at) = <[u32; 32]>::try_from(at) {
                    assert!(is_conflict_free(&at, 16), "rows {rows} copy {j} warp {warp}");
                    for a in at {
                        seen[(a / 16) as usize] += 1;
                    }
                }
            }
        }
        assert!(seen[..(rows * 8) as usize].iter().all(|&n| n == 1), "rows {rows}");
        assert!(seen[(rows * 8) as usize..].iter().all(|&n| n == 0), "rows {rows}");
    }
    // The kernel's copy guard: whole copies `256 / 48`, then rows below `256 % 48`.
    assert_eq!((HOPPER_BN / (WIDE_THREADS / 8), HOPPER_BN % (WIDE_THREADS / 8)), (5, 16));
    for t in 0..HOPPER_THREADS {
        assert_eq!(gemm_copy_chunk(2, t, 3), hopper_copy_chunk(t, 3));
    }
}

#[test]
fn rs_periods_cover_whole_quads_of_p_in_whole_stages() {
    for case in FRB_CASES {
        let (m, n) = (case.m, case.n);
        let (stages, quads) = rs_period(n);
        let n8 = n / 4;
        // 8 chunks per stage, n8 chunks per p, 4 p per quad.
        assert_eq!(8 * stages, 4 * quads * n8, "N = {n}");
        assert!((m * n / 16).is_multiple_of(stages), "({m}, {n}): whole periods");
        assert!((2 * m).is_multiple_of(4 * quads));
        // The kernel's unroll bounds: 4 P <= 20 k16 steps, Q <= 2 quads, n8 <= 6.
        assert!(4 * stages <= 20 && quads <= 2 && n8 <= 6, "N = {n}");
    }
    assert_eq!([8, 12, 16, 20, 24].map(rs_period), [(1, 1), (3, 2), (2, 1), (5, 2), (3, 1)]);
}

#[test]
fn rs_a_fragment_is_w_transposed_at_k_2n_p_plus_q() {
    // Thread (lane = 4 g + c), register `reg`, half `e` of k16 step `u` of period `pi`:
    // the kernel takes chunk 2u + reg / 2 of the period, (p, q0) = rs_chunk_pq, q = q0 +
    // 2c + e, U^M from `[quad][h][p % 4]` of the period's quads and U^N from
    // rs_un_index(q0 / 8, h, e); this must be W^T[row][k] with k = 2N p + q (global).
    for case in FRB_CASES {
        let n = case.n;
        let (stages, quads) = rs_period(n);
        for pi in 0..(case.m * n / 16 / stages) {
            for u in 0..4 * stages {
                let mut seen = [[false; 16]; 16];
                for lane in 0..32 {
                    let (g, c) = (lane / 4, lane % 4);
                    for reg in 0..4 {
                        for e in 0..2 {
                            let (row, k_rel) = rs_a_position(lane, reg, e, u);
                            assert!(!core::mem::replace(
                                &mut seen[row as usize][(k_rel % 16) as usize],
                                true
                            ));
                            let (p, q0) = rs_chunk_pq(2 * u + reg / 2, n);
                            let h = reg % 2;
                            assert_eq!(row, g + 8 * h);
                            let k = 64 * stages * pi + k_rel;
                            assert_eq!(
                                (k / (2 * n), k % (2 * n)),
                                (4 * quads * pi + p, q0 + 2 * c + e),
                                "N {n}"
                            );
                            // Constant register indices inside the kernel's arrays.
                            assert!(p / 4 < quads && (2 * (p / 4) + h) * 4 + p % 4 < 16);
                            let i = rs_un_index(q0 / 8, h, e);
                            assert!(q0 % 8 == 0 && i < n && i < 24);
                        }
                    }
                }
                assert!(seen.iter().flatten().all(|&s| s), "the m16k16 fragment once");
            }
        }
        // A thread's U^N registers: each (j, h, e) once.
        let mut used = [false; 24];
        for j in 0..n / 4 {
            for h in 0..2 {
                for e in 0..2 {
                    assert!(!core::mem::replace(&mut used[rs_un_index(j, h, e) as usize], true));
                }
            }
        }
    }
}

#[test]
fn rs_staged_epilogue_is_a_conflict_free_bijection() {
    for kernel in RS_KERNELS {
        let (nt, bb) = (kernel.nt, kernel.beams());
        let mut seen = std::vec![false; (nt * bb) as usize];
        for row in 0..nt {
            for beam in 0..bb {
                let at = kernel.staged_offset(row, beam);
                if kernel.tma || kernel.resident {
                    // The tensor store's box of each 64 beams: 128-byte rows from a
                    // 1024-byte aligned base, 16-byte chunks XOR-ed by `row % 8` (the
                    // 128-byte swizzle of the tensor map).
                    let half = (beam / 64) * kernel.stage_bytes();
                    assert_eq!(at - half, swizzle_128b(row, 2 * (beam % 64)));
                }
                assert!(at < nt * bb * 2 && at % 16 == 2 * (beam % 8));
                assert!(!core::mem::replace(&mut seen[(at / 2) as usize], true), "{kernel:?}");
            }
        }
        // stmatrix .x4 .trans: lane l gives row 8 (2 jp + l / 16) + l % 8 of beam chunk
        // (warp beam + 8 ((l / 8) % 2)) / 8; phases are the 4 matrices of 8 lanes.
        for warp in 0..kernel.warpgroups * 4 {
            let warp_beam = 64 * (warp / 4) + 16 * (warp % 4);
            for jp in 0..nt / 16 {
                let at: [u32; 32] = core::array::from_fn(|l| {
                    let (l, mi) = (l as u32, l as u32 / 8);
                    kernel.staged_offset(8 * (2 * jp + mi / 2) + l % 8, warp_beam + 8 * (mi % 2))
                });
                assert!(crate::bank::is_conflict_free(&at, 16), "{kernel:?} warp {warp} jp {jp}");
            }
        }
        // The copy-out: thread `tid` reads chunk `(tid + threads i) % (bb / 8)` of row
        // `(tid + threads i) / (bb / 8)`; whole warps conflict-free.
        let per_row = bb / 8;
        for i in 0..nt.div_ceil(16) {
            for warp in 0..kernel.consumer_threads() / 32 {
                let at: [u32; 32] = core::array::from_fn(|l| {
                    let idx = (32 * warp + l as u32 + kernel.consumer_threads() * i) % (nt * per_row);
                    kernel.staged_offset(idx / per_row, 8 * (idx % per_row))
                });
                assert!(crate::bank::is_conflict_free(&at, 16), "{kernel:?} copy-out {i}");
            }
        }
        // The store loop's bound covers the tile.
        assert!(nt.div_ceil(16) * kernel.consumer_threads() >= nt * per_row && nt.div_ceil(16) <= 16);
    }
}

#[test]
fn rs_um_in_shared_memory_is_copied_once_and_read_conflict_free() {
    for kernel in RS_KERNELS.iter().filter(|k| k.um_in_smem()) {
        let (bb, threads) = (kernel.beams(), kernel.threads());
        // Copy j of thread tid: chunk (quad 2 j + tid / bb, beam tid % bb), whole warps
        // storing 512 consecutive bytes.
        let mut seen = std::vec![0u32; (kernel.um_bytes() / 16) as usize];
        for j in 0..kernel.m / 4 {
            for warp in 0..threads / 32 {
                let at: [u32; 32] = core::array::from_fn(|l| {
                    let tid = 32 * warp + l as u32;
                    let (quad, b) = (2 * j + tid / bb, tid % bb);
                    assert_eq!(rs_um_offset(4 * quad, b, bb), 16 * (quad * bb + b));
                    16 * (quad * bb + b)
                });
                assert!(is_conflict_free(&at, 16), "{kernel:?}");
                for a in at {
                    seen[(a / 16) as usize] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "{kernel:?}");
        // Reads: lane 4 g + c of warp w loads U^M_p of beam 16 (w % 4) + 64 (w / 4) + g + 8 h.
        for p in 0..2 * kernel.m {
            for warp in 0..threads / 32 {
                for h in 0..2 {
                    let at: [u32; 32] = core::array::from_fn(|l| {
                        let beam = 64 * (warp / 4) + 16 * (warp % 4) + l as u32 / 4;
                        rs_um_offset(0, beam, bb) + rs_um_offset(p, 8 * h, bb)
                    });
                    assert!(at.iter().all(|&a| a + 4 <= kernel.um_bytes() && a % 4 == 0));
                    assert!(is_conflict_free(&at, 4), "{kernel:?} p {p}");
                }
            }
        }
    }
}

#[test]
fn rs_resident_form_covers_every_tile_and_its_buffers_fit() {
    // Every tile once, a block's units in beam-tile runs.
    for (tiles, run, grid) in [(40, 5, 3), (12, 2, 5), (7, 7, 1), (8, 1, 3), (30, 3, 132)] {
        let mut seen = std::vec![0u32; tiles as usize];
        for block in 0..grid {
            let mut tile = block * run;
            while tile < tiles {
                seen[tile as usize] += 1;
                let next = rs_next_tile(tile, grid * run, run);
                assert!(next > tile && (next == tile + 1 || next.is_multiple_of(run)));
                tile = next;
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "{tiles} {run} {grid}");
    }
    assert_eq!(rs_next_tile(u32::MAX - 1, 10, 1), u32::MAX);
    for kernel in RS_KERNELS.iter().filter(|k| k.resident) {
        let (m, n, wg) = (kernel.m, kernel.n, kernel.warpgroups);
        assert!(wg == 2 && !kernel.tma && !kernel.um_in_smem());
        // The whole K in the slots before J's staging slots; U copies per thread.
        assert!(m * n / 16 <= kernel.stages - wg && (m + n) / 4 <= 12 && (m + n) % 4 == 0);
        assert!((kernel.u_ahead_bytes() / 16).is_multiple_of(128));
        // The four U buffers follow the ring, apart, before the (unused) barrier slot.
        let ring = kernel.stages * kernel.stage_bytes();
        for (i, (w, b)) in [(0, 0), (0, 1), (1, 0), (1, 1)].into_iter().enumerate() {
            assert_eq!(kernel.u_ahead_offset(w, b), ring + i as u32 * kernel.u_ahead_bytes());
        }
        assert_eq!(kernel.u_ahead_offset(1, 1) + kernel.u_ahead_bytes(), kernel.barrier_offset());
        assert!(kernel.smem_bytes() <= 227 * 1024, "{kernel:?}");
        // U copies: row (t + 128 j) / 64, beam t % 64, each chunk once, warps conflict-free.
        let rows = (m + n) / 2;
        let mut seen = std::vec![0u32; (rows * 64) as usize];
        for j in 0..(m + n) / 4 {
            for warp in 0..4 {
                let at: [u32; 32] = core::array::from_fn(|l| {
                    let t = 32 * warp + l as u32;
                    16 * ((t + 128 * j) / 64 * 64 + t % 64)
                });
                assert!(is_conflict_free(&at, 16));
                for a in at {
                    seen[(a / 16) as usize] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&s| s == 1), "{kernel:?}");
        // Reads of lane 4 g + c of warp w (beams 16 w + g + 8 h): U^M_p (4 bytes, four
        // lanes per word) conflict-free; U^N pairs (8 bytes) at most 2-way, once per tile.
        for warp in 0..4 {
            for h in 0..2 {
                for p in 0..2 * m {
                    let at: [u32; 32] = core::array::from_fn(|l| {
                        rs_um_offset(0, 16 * warp + l as u32 / 4, 64) + rs_um_offset(p, 8 * h, 64)
                    });
                    assert!(is_conflict_free(&at, 4));
                }
                for j in 0..n / 4 {
                    let at: [u32; 32] = core::array::from_fn(|l| {
                        let (g, c) = (l as u32 / 4, l as u32 % 4);
                        let row = m / 2 + 2 * j + c / 2;
                        16 * (row * 64 + 16 * warp + g + 8 * h) + 8 * (c % 2)
                    });
                    assert!(at.iter().all(|&a| a + 8 <= kernel.u_ahead_bytes()));
                    assert!(crate::bank::wavefronts(&at, 8) <= 4);
                }
            }
        }
        // J: each warpgroup's copy-out of its half, 8 threads per row, conflict-free.
        for w in 0..2 {
            for i in 0..kernel.nt.div_ceil(16) {
                for warp in 0..4 {
                    let at: [u32; 32] = core::array::from_fn(|l| {
                        let t = 32 * warp + l as u32;
                        kernel.staged_offset((t / 8 + 16 * i) % kernel.nt, 64 * w + 8 * (t % 8))
                    });
                    assert!(is_conflict_free(&at, 16), "{kernel:?}");
                }
            }
        }
    }
}

#[test]
fn rs_copies_cover_each_i_tile_once_without_conflicts() {
    for kernel in RS_KERNELS {
        let (threads, nt) = (kernel.threads(), kernel.nt);
        let stride = threads / 8;
        let mut seen = std::vec![0u32; (nt * 8) as usize];
        for j in 0..8 {
            for warp in 0..threads / 32 {
                let lanes: Vec<u32> =
                    (0..32).map(|l| 32 * warp + l).filter(|t| t / 8 + stride * j < nt).collect();
                assert!(lanes.is_empty() || lanes.len() == 32, "{kernel:?}: whole warps");
                if let Ok(at) = <[u32; 32]>::try_from(
                    lanes.iter().map(|t| swizzle_128b(t / 8 + stride * j, 16 * (t % 8))).collect::<Vec<_>>(),
                ) {
                    assert!(crate::bank::is_conflict_free(&at, 16));
                    for a in at {
                        seen[(a / 16) as usize] += 1;
                    }
                }
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "{kernel:?}");
    }
}

/// A model of the TMA form's protocol over `tiles` tiles of `steps` stages, a ring of
/// `ring` slots and warpgroup 1 starting each tile `lead` stages behind: the producer
/// fills a slot once both consumer warpgroups released its previous stage; a warpgroup
/// issues a stage once it has landed, releasing the previous one as it does (a tile's last
/// stage after the tile); warpgroup 0 arrives on barrier 4 as it issues a tile's stage
/// `lead`, and warpgroup 1 waits there before each tile. The producer goes first, then
/// warpgroup 0, warpgroup 1 only when neither can move: warpgroup 0 as far ahead as the
/// ring lets it. Err if the three stop short of the last stage (a deadlock), or if
/// warpgroup 0 arrives for tile t + 1 before warpgroup 1 has passed tile t's wait (the
/// arrival would fall into the wrong phase of the barrier).
fn rs_tma_protocol(ring: u32, steps: u32, lead: u32, tiles: u32) -> Result<(), std::string::String> {
    let total = tiles * steps;
    // Stages loaded; issued per warpgroup.
    let (mut loaded, mut issued) = (0u32, [0u32; 2]);
    let released = |issued: u32| if issued.is_multiple_of(steps) { issued } else { issued - 1 };
    while issued != [total; 2] {
        if loaded < total && loaded < ring + released(issued[0]).min(released(issued[1])) {
            loaded += 1;
        } else if issued[0] < total && issued[0] < loaded {
            let (tile, stage) = (issued[0] / steps, issued[0] % steps);
            // Warpgroup 1 has passed tile - 1's wait once it has issued a stage of it.
            if stage == lead && tile >= 1 && issued[1] <= (tile - 1) * steps {
                return Err(std::format!(
                    "arrival for tile {tile} while warpgroup 1 waits for tile {}",
                    tile - 1
                ));
            }
            issued[0] += 1;
        } else if issued[1] < total
            && issued[1] < loaded
            && (!issued[1].is_multiple_of(steps) || issued[0] > issued[1] + lead)
        {
            issued[1] += 1;
        } else {
            return Err(std::format!("stuck at {loaded} loaded, {issued:?} issued"));
        }
    }
    Ok(())
}

#[test]
fn rs_tma_protocol_runs_to_the_end_exactly_where_the_lead_fits() {
    for ring in 2..9 {
        for steps in 1..12 {
            for lead in 0..10 {
                for tiles in 1..5 {
                    let model = rs_tma_protocol(ring, steps, lead, tiles);
                    // One tile has no next arrival to misplace.
                    let fits =
                        rs_tma_lead_fits(ring, steps, lead) || (tiles == 1 && lead < ring && lead < steps);
                    assert_eq!(
                        model.is_ok(),
                        fits,
                        "ring {ring}, {steps} stages, lead {lead}, {tiles} tiles: {model:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn rs_kernels_fit_and_the_default_pads_least() {
    for (i, kernel) in RS_KERNELS.iter().enumerate() {
        assert!(RS_KERNELS[..i].iter().all(|k| k.name != kernel.name));
        assert!(FRB_CASES.iter().any(|c| (c.m, c.n) == (kernel.m, kernel.n)));
        assert!(kernel.nt % 8 == 0 && kernel.nt <= 256 && kernel.stages >= 3);
        assert!(kernel.stage_bytes() % 1024 == 0, "{kernel:?}: whole atoms per stage");
        // J's staged tile is exactly the last WG slots (`cp` form: of the ring, which the
        // next tile's first S - WG stages, at least 2, at most 7 groups pending, leave
        // alone; TMA form: after its ring of S - WG).
        let wg = kernel.warpgroups;
        assert!((2..=4).contains(&wg) && kernel.stages >= wg + 2 && kernel.stages - wg <= 7);
        assert_eq!(kernel.nt * 2 * kernel.beams(), wg * kernel.stage_bytes());
        // U^M in shared memory: M / 4 whole 16-byte chunks per thread, after the ring.
        assert_eq!(kernel.um_in_smem(), wg >= 3);
        if kernel.um_in_smem() {
            assert!(kernel.m.is_multiple_of(4) && kernel.m / 4 <= 6);
            assert_eq!(kernel.um_bytes(), 16 * (kernel.m / 4) * kernel.threads());
        }
        // 256 threads without a cap run one block per SM (ptxas may take 255 registers);
        // capped kernels fit their blocks per SM in registers and shared memory.
        let cap = kernel.spec().max_registers;
        // TMA instances: capped at launch; two warpgroups consume.
        if kernel.tma {
            assert!(cap == Some(RS_TMA_LAUNCH_REGISTERS) && kernel.warpgroups == 2);
            let (ring, steps) = (kernel.ring_slots(), kernel.m * kernel.n / 16);
            assert!(rs_tma_lead_fits(ring, steps, RS_TMA_LEAD), "{kernel:?}");
            for tiles in 1..6 {
                assert_eq!(rs_tma_protocol(ring, steps, RS_TMA_LEAD, tiles), Ok(()), "{kernel:?}");
            }
        }
        let blocks = match cap {
            Some(cap) => 65536 / (cap * kernel.threads()),
            None => {
                assert_eq!(kernel.threads(), 256, "{kernel:?} needs a register cap");
                1
            }
        };
        assert!(blocks >= 1 && blocks * (kernel.smem_bytes() + 1024) <= 228 * 1024, "{kernel:?}");
    }
    assert_eq!(rs_pick_tile(917, &RS_DEFAULT_TILES), 232);
    assert_eq!(rs_pick_tile(980, &RS_DEFAULT_TILES), 248);
    assert_eq!(rs_pick_tile(1, &RS_DEFAULT_TILES), 232);
    assert_eq!(rs_pick_tile(496, &RS_DEFAULT_TILES), 248);
    for case in FRB_CASES {
        for times in [1, 200, 917, 980] {
            for beams in [1, 640, 960, 2560, 5760] {
                let k = rs_default_kernel(case.n, times, beams).expect("a default for every grid");
                assert_eq!(k.m, case.m);
                assert!(k.warpgroups == RS_DEFAULT_WARPGROUPS || k.warpgroups == RS_WIDE_WARPGROUPS);
            }
        }
    }
    // Table 4 of Smith's FRB note (B = 10 MN): the TMA form for full CHORD and HIRAX.
    let pick = |n, times, beams| rs_default_kernel(n, times, beams).unwrap().name;
    assert_eq!(pick(24, 917, 5760), "frb_resample_fused_rsp2tma_n24_t232_sm90a");
    // N = 12 where the resident tile pads more rows (496 = 2 x 248 against 3 x 184): the
    // 192-beam kernel where it pads no more work (552 x 192 against 496 x 256), else the
    // 2-warpgroup `cp` kernel (552 x 1152 against 496 x 1024).
    assert_eq!(pick(12, 496, 192), "frb_resample_fused_rsp3_n12_t184_sm90a");
    // The pathfinder grids: the resident form.
    assert_eq!(pick(12, 917, 960), "frb_resample_fused_rsp2res_n12_t184_sm90a");
    assert_eq!(pick(8, 917, 640), "frb_resample_fused_rsp2res_n8_t232_sm90a");
    // Not where its tile pads more rows: 496 = 2 x 248, against 3 x 232.
    assert_eq!(pick(8, 496, 640), "frb_resample_fused_rsp2_n8_t248_sm90a");
    assert_eq!(pick(16, 980, 2560), "frb_resample_fused_rsp2tma_n16_t248_sm90a");
    assert_eq!(pick(20, 980, 3200), "frb_resample_fused_rsp2tma_n20_t248_sm90a");
    assert_eq!(pick(16, 917, 2560), "frb_resample_fused_rsp2tma_n16_t232_sm90a");
    assert_eq!(pick(24, 980, 5760), "frb_resample_fused_rsp2tma_n24_t248_sm90a");
    assert_eq!(pick(24, 917, 128), "frb_resample_fused_rsp2tma_n24_t232_sm90a");
    assert_eq!(pick(12, 496, 1024), "frb_resample_fused_rsp2_n12_t248_sm90a");
    for kernel in RS_KERNELS.iter().filter(|k| k.warpgroups == RS_WIDE_WARPGROUPS) {
        assert_eq!(kernel.nt, RS_WIDE_TILE);
    }
}

#[test]
fn the_wide_tile_is_taken_where_it_pads_no_more_rows() {
    // Table 4 of Smith's FRB note: 917 slow samples (pathfinder, full CHORD) and 980 (HIRAX).
    assert!(use_wide_tile(917));
    assert!(!use_wide_tile(980));
    for times in [1, 64, 70, 128, 200, 300] {
        assert!(!use_wide_tile(times), "{times}");
    }
    for times in [129, 192, 384, 576, 960] {
        assert!(use_wide_tile(times), "{times}");
    }
}

#[test]
fn wide_kernels_fit_registers_shared_memory_and_atoms() {
    let cap = WIDE_GEMM_KERNEL.spec.max_registers.expect("capped");
    assert!(cap * WIDE_THREADS <= 65536 && cap.is_multiple_of(8));
    assert!(wide_smem_bytes() <= 227 * 1024);
    for wg in [2, 3] {
        assert_eq!(gemm_stage_bytes(wg) % 1024, 0);
        assert_eq!(gemm_b_offset(wg) % 1024, 0);
        assert_eq!(hopper_a_offset(wg - 1) % 1024, 0);
    }
    assert_eq!(gemm_stage_bytes(2), hopper_stage_bytes());
    // J (192 x 256 f16) is staged in the ring.
    let staged = (0..HOPPER_BN).map(|col| staged_offset(WIDE_BM - 1, col) + 2).max().unwrap();
    assert_eq!(staged, WIDE_BM * HOPPER_BN * 2);
    assert!(staged <= WIDE_STAGES * gemm_stage_bytes(WIDE_WARPGROUPS));
}

#[test]
fn staged_epilogue_is_a_conflict_free_bijection() {
    use crate::wgmma::accumulator_position;
    let mut seen = [false; (HOPPER_BM * HOPPER_BN) as usize];
    for row in 0..HOPPER_BM {
        for col in 0..HOPPER_BN {
            let at = staged_offset(row, col);
            assert!(at < HOPPER_BM * HOPPER_BN * 2 && at.is_multiple_of(2));
            assert!(!core::mem::replace(&mut seen[(at / 2) as usize], true));
            // 8 consecutive columns from a multiple of 8 stay one 16-byte chunk.
            assert_eq!(at % 16, 2 * (col % 8));
        }
    }
    // Accumulator pair stores (full tiles: rows 64 w + ..; half tiles: columns 128 w + ..).
    for (row_base, col_base) in [(0, 0), (64, 0), (0, 128)] {
        for warp in 0..4 {
            for reg in (0..128).step_by(2) {
                let at: [u32; 32] = core::array::from_fn(|l| {
                    let (r, c) = accumulator_position(32 * warp + l as u32, reg);
                    staged_offset(row_base + r, (col_base + c) % HOPPER_BN)
                });
                assert!(is_conflict_free(&at, 4), "warp {warp} reg {reg}");
            }
        }
    }
    // The copy-out: warp w reads row r's 32 chunks.
    for row in 0..HOPPER_BM {
        let at: [u32; 32] = core::array::from_fn(|c| staged_offset(row, 8 * c as u32));
        assert!(is_conflict_free(&at, 16), "row {row}");
    }
    assert!(HOPPER_BM * HOPPER_BN * 2 <= HOPPER_STAGES * hopper_stage_bytes());
}

#[test]
fn tiles_sit_on_1024_byte_atoms_and_fit_shared_memory() {
    assert_eq!(hopper_stage_bytes() % 1024, 0);
    assert_eq!(hopper_a_offset(1) % 1024, 0);
    assert_eq!(hopper_b_offset() % 1024, 0);
    assert!(hopper_smem_bytes() <= 227 * 1024);
    const { assert!(HOPPER_STAGES >= 3, "the W kernel copies S - 1 >= 2 stages ahead") };
    assert_eq!(hopper_copies(HOPPER_BM), 4);
    assert_eq!(hopper_copies(HOPPER_BN), 8);
}

/// The register caps `build.rs` emits: the wide W-path GEMM, the 3-warpgroup transposed
/// kernel and the TMA instances at 168, nothing else; threads and shared memory as the
/// descriptors give them.
#[test]
fn the_registry_is_the_descriptors_specs_with_the_caps_of_before() {
    assert_eq!(KERNELS.len(), RESAMPLE_KERNELS.len());
    for (spec, kernel) in KERNELS.iter().zip(RESAMPLE_KERNELS) {
        assert_eq!(spec, &kernel.spec);
        assert_eq!(kernel_of(spec), Some(kernel));
        assert!(spec.threads.is_some(), "{}", spec.name);
        let capped = spec.name == "frb_resample_gemm_wide_sm90a"
            || spec.name.starts_with("frb_resample_fused_rsp3")
            || spec.name.starts_with("frb_resample_fused_rsp2tma");
        assert_eq!(spec.max_registers, capped.then_some(168), "{}", spec.name);
        assert_eq!(spec.cluster, None);
        match kernel.role {
            Role::Transposed(rs) => {
                assert_eq!(rs.spec(), *spec);
                assert!(RS_KERNELS.contains(&rs));
                assert_eq!(spec.arch, Arch::Sm90a);
                assert_eq!((spec.threads, spec.shared_bytes), (Some(rs.threads()), Some(rs.smem_bytes())));
            }
            Role::Fused => assert_eq!(spec.shared_bytes, None),
            _ => assert!(spec.shared_bytes.is_some(), "{}", spec.name),
        }
    }
    assert_eq!(
        RESAMPLE_KERNELS.iter().filter(|k| matches!(k.role, Role::Transposed(_))).count(),
        RS_KERNELS.len()
    );
    assert_eq!(GEMM_KERNEL.role, Role::WPath { rows: GEMM.bm(), beams: GEMM.bn() });
    assert_eq!(WIDE_GEMM_KERNEL.role, Role::WPath { rows: WIDE_BM, beams: HOPPER_BN });
    assert_eq!(HOPPER_GEMM_KERNEL.role, Role::WPath { rows: HOPPER_BM, beams: HOPPER_BN });
}

/// No dead variants: every transposed instance is `rs_default_kernel`'s choice for some
/// (grid, rows, beams), and both `wgmma` W-path tiles are `use_wide_tile`'s for some rows.
#[test]
fn every_kernel_is_the_production_choice_somewhere() {
    let mut chosen = std::collections::BTreeSet::new();
    for case in FRB_CASES {
        for times in 1..=2048 {
            for beams in [1, 128, 192, 640, 1024, 1152, 5760] {
                chosen.insert(rs_default_kernel(case.n, times, beams).unwrap().name);
            }
        }
    }
    for kernel in RS_KERNELS {
        assert!(chosen.contains(kernel.name), "{} is never chosen", kernel.name);
    }
    assert_eq!(chosen.len(), RS_KERNELS.len());
    assert!((1..2048).any(use_wide_tile) && (1..2048).any(|t| !use_wide_tile(t)));
}
