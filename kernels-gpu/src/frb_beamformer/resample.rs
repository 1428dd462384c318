//! FRB beamformer, second kernel (seed 000 secs. 2.2-2.3 and 5.2, issue 8): exact resampling of
//! the half-integer intensity `I[f][tbar][p][q]` of the first kernel to arbitrary beams,
//! `J[f][tbar][beta] = sum_{p < 2M} sum_{q < 2N} U^M_p(theta[f][beta]) U^N_q(theta'[f][beta]) I[f][tbar][p][q]`
//! (eq. 137), with the stable form of eq. 7,
//! `U^N_q(theta) = (1/N) sum_{s=0}^{N} A_s cos(pi (2 theta - q) s / N)`, `A_0 = A_N = 1/2`, else 1.
//!
//! Non-factorizable beams (sec. 5.2) as one GEMM per channel, `J = I W` with
//! `W[rho][beta] = U^M_p(theta) U^N_q(theta')` and `rho = 2N p + q` (eq. 138-140).
//! Layouts (f16 as raw `u16` bits): I `[f][tbar][rho]` (the first kernel's `[f][tbar][p][q]`),
//! W `[f][beta][rho]` (a beam's weights contiguous: the m16n8k16 B operand in column-major
//! form, so `ldmatrix` without `.trans` yields B fragments), J `[f][tbar][beta]`; beam
//! positions theta, theta' f32 `[f][beta]` in the seed's grid units (eq. 1).
//!
//! GEMM ([`GEMM`], CUTLASS's sm80 multistage design): a block computes a `bm` (tbar) x
//! `bn` (beam) tile of one channel with warps of `16 mt` x `8 nt`, over k-steps of `bk`
//! staged through a ring of `stages` `cp.async` buffers with one barrier per stage
//! (`cp.async.wait_group stages - 2`). Tiles are stored unpadded with the 16-byte chunks of
//! each 128-byte line XOR-swizzled ([`swizzled`]), so `ldmatrix` and the copies are
//! conflict-free; fragments are double-buffered across the k16 sub-steps; m16n8k16 f16 MMAs
//! accumulate in f32, J is rounded once to f16 and leaves through shared memory as the
//! wgmma W GEMM's does (the tile staged in the ring at [`hopper::staged_offset`], then whole
//! 16-byte chunks of J rows; the fragments' own 4-byte stores had cost 1.11-1.33x on the
//! H200, BENCHMARKS.md). One block per tile, tbar tile fastest in the
//! grid, so the blocks of one beam tile (one W tile) are resident together and W is read from
//! DRAM once. Ragged tbar and beam edges are zero-filled and not stored; warps whose rows or
//! beams are all past the edge skip their MMAs. `K = 4MN` is a multiple of 64 for every seed
//! Table 2 case, so k needs no edge (the host checks it against the tiling's k-step).
//! Sustained on the H200 it runs at the 700 W power cap, at 1.9 pJ per flop against
//! cuBLAS's `wgmma` 1.2: operands through the register file (`ldmatrix`, then the MMA) cost
//! energy that `wgmma`'s shared-memory operands do not (BENCHMARKS.md).
//! The W kernel ([`weights_kernel`]): one warp per (f, beta), U in f32 from eq. 7.
//!
//! Fused path (issue 8 item 4, `frb_resample_fused`): the same GEMM, but W never exists in
//! device memory. A small kernel (`frb_resample_u`) writes U^M and U^N in f32 (`[f][x/4][beta][4]`,
//! x = p or q: `4 F B (2M + 2N)` bytes, 1/(2 MN / (M + N)) of W's bytes); each GEMM block
//! copies its beam tile's U into shared memory once ([`fused_u_offset`]) and, in place of the
//! W tile's `cp.async`, writes every B stage itself: thread `t` forms beam `t`'s 8-rho chunks
//! `U^M_p U^N_q .. U^N_{q+7}` (one p per chunk: 2N is a multiple of 8) with the same f32
//! product and f16 rounding as the W kernel, stored at the same swizzled place
//! ([`swizzled`]), so the MMA loop, the k order and hence J are bit for bit those of the W path.
//! On Hopper the fused path is instead the transposed GEMM `J^T = W^T I^T` with W^T formed in
//! registers as `wgmma`'s A operand ([`hopper`]).

pub mod hopper;

/// One tiling of the resampling GEMM: warps of `16 mt` rows x `8 nt` beams, `wr` x `wc` of
/// them per block, k-steps of `bk`, a ring of `stages` shared-memory buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    /// The kernel's entry point.
    pub name: &'static str,
    pub mt: u32,
    pub nt: u32,
    pub wr: u32,
    pub wc: u32,
    pub bk: u32,
    pub stages: u32,
}

impl GemmShape {
    /// Block tile rows (tbar).
    pub const fn bm(&self) -> u32 {
        16 * self.mt * self.wr
    }
    /// Block tile columns (beams).
    pub const fn bn(&self) -> u32 {
        8 * self.nt * self.wc
    }
    pub const fn threads(&self) -> u32 {
        32 * self.wr * self.wc
    }
    /// Warp `warp`'s tile origin in the block tile: (row, beam), warps row-major over
    /// `wr` x `wc`.
    pub const fn warp_origin(&self, warp: u32) -> (u32, u32) {
        (16 * self.mt * (warp / self.wc), 8 * self.nt * (warp % self.wc))
    }
    /// Bytes of one operand row of one stage.
    pub const fn row_bytes(&self) -> u32 {
        2 * self.bk
    }
    /// Bytes of one stage (A then B tile).
    pub const fn stage_bytes(&self) -> u32 {
        (self.bm() + self.bn()) * self.row_bytes()
    }
    /// Dynamic shared memory of the kernel: the ring.
    pub const fn smem_bytes(&self) -> u32 {
        self.stages * self.stage_bytes()
    }
    /// 16-byte chunks per operand row of a stage.
    pub const fn chunks_per_row(&self) -> u32 {
        self.bk / 8
    }
    /// Rows between one thread's successive copies: the block copies `threads` chunks at once.
    pub const fn copy_row_stride(&self) -> u32 {
        self.threads() / self.chunks_per_row()
    }
    /// 16-byte copies per thread per stage for `rows` rows of an operand (the last one only
    /// for the threads whose row is below `rows`).
    pub const fn copies(&self, rows: u32) -> u32 {
        rows.div_ceil(self.copy_row_stride())
    }
    /// The constraints the kernel relies on: at most 8 copies per thread and operand, row
    /// strides and warp row offsets that keep the swizzle pattern (multiples of 16 rows),
    /// `bk` 32 or 64, an even number of n-tiles (B is loaded two n-tiles per `ldmatrix.x4`),
    /// >= 2 stages.
    pub const fn is_valid(&self) -> bool {
        (self.bk == 32 || self.bk == 64)
            && self.nt.is_multiple_of(2)
            && self.stages >= 2
            && self.threads().is_multiple_of(self.chunks_per_row())
            && self.copy_row_stride().is_multiple_of(16)
            && self.copies(self.bm()) <= 8
            && self.copies(self.bn()) <= 8
            && self.smem_bytes() <= 227 * 1024
    }
}

/// The production tiling: 128 x 256 blocks of 8 warps of 64 x 64, k-steps of 32, a ring of
/// 4 stages (96 KiB, 1 block per SM): the fastest of 11 tilings measured on the H200
/// (BENCHMARKS.md), 128 x 256 x 64 x 3 stages within 0.3%.
pub const GEMM: GemmShape =
    GemmShape { name: "frb_resample_gemm", mt: 4, nt: 8, wr: 2, wc: 4, bk: 32, stages: 4 };

const _: () = assert!(GEMM.is_valid());
// The fused path forms B row `t` (one beam) in thread `t`.
const _: () = assert!(GEMM.bn() == GEMM.threads());
// J leaves as the wgmma W GEMM's does: the 128 x 256 tile staged in the ring at
// `hopper::staged_offset`, copied out by 256 threads (`store_j::<2>`).
const _: () = assert!(GEMM.bm() == hopper::HOPPER_BM && GEMM.bn() == hopper::HOPPER_BN);
const _: () = assert!(GEMM.threads() == hopper::HOPPER_THREADS);
const _: () = assert!(GEMM.bm() * GEMM.bn() * 2 <= GEMM.stages * GEMM.stage_bytes());

/// Dynamic shared memory of the fused GEMM for grid (M, N): the [`GEMM`] ring, then the beam
/// tile's U^M and U^N in f32 (192 KiB for (24, 24)).
pub const fn fused_smem_bytes(m: u32, n: u32) -> u32 {
    GEMM.smem_bytes() + 4 * GEMM.bn() * (2 * m + 2 * n)
}

/// Byte offset of `U_x` of beam `beam` (of a tile of `bn`) in an f32 `[x/4][beam][4]` array:
/// 16-byte chunks of 4 consecutive x per beam, so the prologue copies whole chunks and the B
/// writer reads `U^N_q .. U^N_{q+7}` of its beam with two 16-byte loads, lanes on consecutive
/// beams (conflict-free).
pub const fn fused_u_offset(x: u32, beam: u32, bn: u32) -> u32 {
    16 * ((x / 4) * bn + beam) + 4 * (x % 4)
}

/// Threads per block of the U kernel (one per (f, x, beta), beta fastest).
pub const U_THREADS: u32 = 128;

/// Warps (beams) per block of the W kernel.
pub const WEIGHT_WARPS: u32 = 4;
/// Largest 2M or 2N of the seed's cases (Table 2: M, N <= 24).
pub const MAX_HALF_GRID: u32 = 48;

/// Largest accepted |theta| of a beam position (grid units): over 100x the largest
/// physical position of eq. 1. [`u_function`] forms U in f32 from `2 theta`, which overflows
/// to infinity (and U to NaN) near `|theta| = 2^127`; within the bound f32 still resolves
/// 2^-11 grid units.
pub const MAX_ABS_POSITION: f32 = 4096.0;

/// Whether a beam position is one the W and U kernels accept: finite and within
/// [`MAX_ABS_POSITION`] (NaN fails the comparison).
#[inline(always)]
pub fn position_ok(theta: f32) -> bool {
    theta.abs() <= MAX_ABS_POSITION
}

/// `U^N_q(theta)` of eq. 7 in f32 (the device's weights). Stable for every theta.
#[inline(always)]
pub fn u_function(n: u32, q: u32, theta: f32) -> f32 {
    let x = 2.0 * theta - q as f32;
    let step = x / n as f32;
    let mut sum = 0.5 * (1.0 + crate::delay_beamformer::sincospi(step * n as f32).1);
    let mut s = 1;
    while s < n {
        sum += crate::delay_beamformer::sincospi(step * s as f32).1;
        s += 1;
    }
    sum / n as f32
}

/// Byte offset, within an operand tile of rows of `bk` halves (`2 bk` = 64 or 128 bytes), of
/// the 16-byte chunk `chunk` (k / 8) of row `row`: the tile is cut into 128-byte lines (two
/// rows of 64 bytes or one of 128) and chunk `c` of line `L` is stored at `c ^ (L % 8)`. The 8
/// rows one `ldmatrix` phase reads (8 consecutive rows from a multiple of 8, one logical chunk)
/// then hit 8 distinct chunk positions, i.e. all 32 banks once. Rows `R + r` with `R` a
/// multiple of 16 sit at `R * 2 bk + swizzled(r, ..)`.
pub const fn swizzled(row: u32, chunk: u32, bk: u32) -> u32 {
    let linear = row * 2 * bk + 16 * chunk;
    let line = linear / 128;
    let c = (linear / 16) % 8;
    128 * line + 16 * (c ^ (line % 8))
}

/// Tile offset of lane `lane`'s `ldmatrix.x4` row for the A block at rows `0 .. 16` (plus a
/// multiple of 16), k `16 ks .. +16`: lanes 0-15 rows 0..16 at k 16 ks, lanes 16-31 the same
/// rows at 16 ks + 8 (registers a0..a3 of m16n8k16).
pub const fn a_ldmatrix_offset(lane: u32, ks: u32, bk: u32) -> u32 {
    swizzled(lane % 16, 2 * ks + lane / 16, bk)
}

/// Tile offset of lane `lane`'s `ldmatrix.x4` row for two n-tiles of B (`[beam][k]` rows) at
/// beams `0 .. 16` (plus a multiple of 16), k `16 ks .. +16`: lanes 0-7 beams 0..8 at 16 ks,
/// 8-15 the same at 16 ks + 8, 16-23 beams 8..16 at 16 ks, 24-31 at 16 ks + 8, so the
/// registers are b0, b1 of the first n-tile, then b0, b1 of the second.
pub const fn b_ldmatrix_offset(lane: u32, ks: u32, bk: u32) -> u32 {
    swizzled(lane % 8 + 8 * (lane / 16), 2 * ks + (lane / 8) % 2, bk)
}

/// The chunk thread `thread` copies first into an operand tile: (row, chunk); its copy `j`
/// is `copy_row_stride() * j` rows further.
pub const fn copy_chunk(shape: &GemmShape, thread: u32) -> (u32, u32) {
    (thread / shape.chunks_per_row(), thread % shape.chunks_per_row())
}

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
pub use device::*;

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod device {
    use super::hopper::staged_offset;
    use super::hopper::staged_store::store_j;
    use super::*;
    use crate::intrinsics::*;
    use crate::mma::mma_m16n8k16_f16_f32;

    /// `J = I W` for channel `blockIdx.z` with the tiling given by the const parameters (see
    /// [`GemmShape`]). Grid: x = tbar tiles (fastest, so the blocks sharing a W tile are
    /// resident together and W is read from DRAM once), y = beam tiles, z = channels;
    /// `shape.threads()` threads and `shape.smem_bytes()` of dynamic shared memory. `k` = 4MN,
    /// a multiple of `BK`.
    #[inline(always)]
    unsafe fn gemm<
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
        let (bm, bn, row_bytes, stage_bytes) =
            (shape.bm(), shape.bn(), shape.row_bytes(), shape.stage_bytes());
        let ks_per_stage = BK / 16;
        let channel = block_idx_z();
        let (row0, col0) = (bm * block_idx_x(), bn * block_idx_y());
        let a = intensity.add(channel as usize * times as usize * k as usize);
        let b = weights.add(channel as usize * beams as usize * k as usize);
        let smem = dynamic_shared();
        let (warp, lane) = (warp_id(), lane_id());
        let (warp_row, warp_col) = shape.warp_origin(warp);
        // Warps with no row or no beam inside the matrix only copy and wait (the last tbar
        // tile of full CHORD holds 21 of 128 rows: one warp row idle). Also running only the
        // m-tiles with rows inside made every case 5-13% slower on the H200 (BENCHMARKS.md).
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
                cp_async_16(
                    s + fused_u_offset(xx, tid, bn),
                    g.add(at) as *const u8,
                    if inside { 16 } else { 0 },
                );
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

    /// `J = I W` with the [`GEMM`] tiling; see `gemm`.
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn frb_resample_gemm(
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

    /// `J = I W` with W formed in shared memory from U (`frb_resample_u`'s layout) instead
    /// of read from device memory; [`GEMM`] grid and threads, [`fused_smem_bytes`]`(m, n)` of
    /// dynamic shared memory. `k` = 4MN.
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn frb_resample_fused(
        intensity: *const u16,
        u_m: *const f32,
        u_n: *const f32,
        out: *mut u16,
        times: u32,
        beams: u32,
        m: u32,
        n: u32,
    ) {
        const G: GemmShape = GEMM;
        gemm::<{ G.mt as usize }, { G.nt as usize }, { G.wr }, { G.wc }, { G.bk }, { G.stages }, true>(
            intensity,
            core::ptr::null(),
            (u_m, u_n, m, n),
            out,
            times,
            beams,
            4 * m * n,
        )
    }

    /// U^M and U^N of eq. 7 in f32 for the fused GEMM: `U^M[f][p/4][beta][p % 4]` =
    /// `U^M_p(theta[f][beta])` and likewise `U^N` of theta' (the W kernel's `u_function`, so
    /// the fused path's products are the W kernel's bit for bit). Grid: x = beam groups of
    /// [`U_THREADS`], y = x in `0 .. 2M + 2N` (p, then 2M + q), z = channels. Sets
    /// `*rejected = 1` if a position fails [`position_ok`] (each is checked by the threads of
    /// `x = 0` and `x = 2M`; the host clears the word before and reads it after).
    #[no_mangle]
    #[allow(clippy::too_many_arguments)]
    pub unsafe extern "ptx-kernel" fn frb_resample_u(
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

    /// W for one beam per warp: `W[f][beta][2N p + q] = U^M_p(theta) U^N_q(theta')` as f16.
    /// Grid: x = beam groups of [`WEIGHT_WARPS`], y = channels; 32 [`WEIGHT_WARPS`] threads.
    /// Sets `*rejected = 1` if a position fails [`position_ok`] (the host clears the word
    /// before and reads it after).
    #[no_mangle]
    #[allow(clippy::too_many_arguments)]
    pub unsafe extern "ptx-kernel" fn frb_resample_weights(
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
}

use crate::modules::{Arch, Family, KernelSpec};

/// The resampling kernels (part of the FRB family's module): every entry point, with what
/// `build.rs` adds to each and what the host launches it with.
pub const KERNELS: &[KernelSpec] = &[
    KernelSpec::new("frb_resample_fused", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_resample_gemm", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_resample_u", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_resample_weights", Family::FrbBeamformer, Arch::Sm80),
    KernelSpec::new("frb_resample_fused_rsp2_n12_t232_sm90a", Family::FrbBeamformer, Arch::Sm90a),
    KernelSpec::new("frb_resample_fused_rsp2_n12_t248_sm90a", Family::FrbBeamformer, Arch::Sm90a),
    KernelSpec::new("frb_resample_fused_rsp2_n16_t232_sm90a", Family::FrbBeamformer, Arch::Sm90a),
    KernelSpec::new("frb_resample_fused_rsp2_n16_t248_sm90a", Family::FrbBeamformer, Arch::Sm90a),
    KernelSpec::new("frb_resample_fused_rsp2_n20_t232_sm90a", Family::FrbBeamformer, Arch::Sm90a),
    KernelSpec::new("frb_resample_fused_rsp2_n20_t248_sm90a", Family::FrbBeamformer, Arch::Sm90a),
    KernelSpec::new("frb_resample_fused_rsp2_n24_t232_sm90a", Family::FrbBeamformer, Arch::Sm90a),
    KernelSpec::new("frb_resample_fused_rsp2_n24_t248_sm90a", Family::FrbBeamformer, Arch::Sm90a),
    KernelSpec::new("frb_resample_fused_rsp2_n8_t232_sm90a", Family::FrbBeamformer, Arch::Sm90a),
    KernelSpec::new("frb_resample_fused_rsp2_n8_t248_sm90a", Family::FrbBeamformer, Arch::Sm90a),
    KernelSpec::new("frb_resample_fused_rsp2res_n12_t184_sm90a", Family::FrbBeamformer, Arch::Sm90a),
    KernelSpec::new("frb_resample_fused_rsp2res_n8_t232_sm90a", Family::FrbBeamformer, Arch::Sm90a),
    KernelSpec::new("frb_resample_fused_rsp2tma_n16_t232_sm90a", Family::FrbBeamformer, Arch::Sm90a)
        .max_registers(168),
    KernelSpec::new("frb_resample_fused_rsp2tma_n16_t248_sm90a", Family::FrbBeamformer, Arch::Sm90a)
        .max_registers(168),
    KernelSpec::new("frb_resample_fused_rsp2tma_n20_t232_sm90a", Family::FrbBeamformer, Arch::Sm90a)
        .max_registers(168),
    KernelSpec::new("frb_resample_fused_rsp2tma_n20_t248_sm90a", Family::FrbBeamformer, Arch::Sm90a)
        .max_registers(168),
    KernelSpec::new("frb_resample_fused_rsp2tma_n24_t232_sm90a", Family::FrbBeamformer, Arch::Sm90a)
        .max_registers(168),
    KernelSpec::new("frb_resample_fused_rsp2tma_n24_t248_sm90a", Family::FrbBeamformer, Arch::Sm90a)
        .max_registers(168),
    KernelSpec::new("frb_resample_fused_rsp3_n12_t184_sm90a", Family::FrbBeamformer, Arch::Sm90a)
        .max_registers(168),
    KernelSpec::new("frb_resample_fused_rsp3_n24_t184_sm90a", Family::FrbBeamformer, Arch::Sm90a)
        .max_registers(168),
    KernelSpec::new("frb_resample_gemm_sm90a", Family::FrbBeamformer, Arch::Sm90a),
    KernelSpec::new("frb_resample_gemm_wide_sm90a", Family::FrbBeamformer, Arch::Sm90a).max_registers(168),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bank::is_conflict_free;

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
        use hopper::staged_offset;
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
                    let a: [u32; 32] =
                        core::array::from_fn(|l| base + a_ldmatrix_offset(l as u32, ks, shape.bk));
                    let b: [u32; 32] =
                        core::array::from_fn(|l| base + b_ldmatrix_offset(l as u32, ks, shape.bk));
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
    /// U^N reads' 8; U and the ring fit every seed grid.
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
}
