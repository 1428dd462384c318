//! The resampling GEMM `J = I W` (and its fused form) on Hopper's warpgroup tensor cores
//! (`wgmma`, sm_90a; seed 000 sec. 5.2, issue 8), for the module `build.rs` compiles with
//! `--cfg radio_sm90a`. Same formula, layouts and results as the sm_80 kernels of the parent
//! module: I `[f][tbar][rho]`, W `[f][beta][rho]` (f16 bits), J `[f][tbar][beta]` f16.
//!
//! Both operands are already K-major (rho contiguous), the form `wgmma` wants, so a stage is
//! a `64 WG x 64` tile of I and a `256 x 64` tile of W, each row 128 bytes in the 128-byte
//! swizzle ([`crate::wgmma::swizzle_128b`]; the sm_80 kernels' `swizzled(.., 64)` is the same
//! map). A block of `WG` warpgroups computes a `64 WG` (tbar) x [`HOPPER_BN`] (beam) tile:
//! warpgroup `w` rows `64 w .. 64 w + 63` with 4 `m64n256k16` per stage (128 f32 accumulators
//! per thread). All threads copy stages ahead with `cp.async` while the tensor cores run
//! stage `s`; one `wgmma` group stays in flight (`wgmma.wait_group 1`). After issuing stage
//! `s`, every thread waits for its group `s - 1` and the block meets a second barrier, so
//! stage `s + S - 1` can go into `s - 1`'s slot. J is staged in the ring ([`staged_offset`])
//! and stored in whole 16-byte chunks, a warp per 512-byte row: on the H200 the direct
//! fragment stores had cost 20% of the HIRAX time (BENCHMARKS.md).
//!
//! Two tiles: narrow, `WG` = 2 ([`HOPPER_BM`] = 128 rows, 256 threads, [`HOPPER_STAGES`] = 4);
//! a tile whose rows all lie in its first 64 (full CHORD's last, 21 of 128) is split by beams
//! instead (`m64n128`, half the wgmma work; the block-uniform branch keeps ptxas from
//! serialising the wgmmas, as a per-warpgroup skip did, C7518). Wide, `WG` = 3 ([`WIDE_BM`] =
//! 192 rows, 384 threads, `.maxnreg 168`): a third more MMA work per byte of I and W pulled
//! from L2, which bounds the narrow kernel near 7 TB/s. Its tiles are never split; instead a
//! warpgroup whose 64 rows all lie past the edge (HIRAX's 980 = 5 x 192 + 20: two of the
//! last tile's three) skips its wgmmas and J staging, which made the wide W GEMM 1.08-1.10x
//! and the wide fused GEMM 1.04-1.11x faster for HIRAX on the H200. The host takes the wide
//! tile where it pads no more rows ([`use_wide_tile`]): a tile with idle warpgroups still
//! pulls its whole W tile, so for HIRAX the narrow one stays as fast.
//!
//! Fused path (`frb_resample_fused_wide_sm90a`, the wide tile, [`WIDE_FUSED_STAGES`] = 3):
//! instead of copying the B stage, all 384 threads form it in the shadow of the running
//! wgmma group, job `tid + 384 i` writing B row `job % 256`'s chunk `job / 256` =
//! `U^M_p U^N_q .. U^N_{q+7}` (f32 product, f16 rn: the W kernel's arithmetic, so the B tiles
//! and hence J are the W path's bit for bit). U^N of the tile sits in shared memory after
//! the ring (the sm_80 fused kernel's `[q/4][beam][4]`, [`super::fused_u_offset`]); U^M is
//! read from device memory (one f32 per chunk). On the H200 this was 1.06-1.30x faster than the
//! earlier warp-specialised 128 x 256 kernel (one producer warpgroup forming B for two
//! consumer warpgroups), whose single producer bounded it (BENCHMARKS.md).

/// Block tile rows (tbar): two warpgroups of 64.
pub const HOPPER_BM: u32 = 128;
/// Block tile columns (beams): one `m64n256` per warpgroup.
pub const HOPPER_BN: u32 = 256;
/// K per stage, in halves: one 128-byte swizzle row.
pub const HOPPER_BK: u32 = 64;
pub const HOPPER_THREADS: u32 = 256;
/// Ring depth of the W-path kernel (copies 3 stages ahead).
pub const HOPPER_STAGES: u32 = 4;
/// Slack for rounding the dynamic shared memory's base up to 1024 bytes.
pub const HOPPER_ALIGN_SLACK: u32 = 1024;

/// Bytes of one stage: the A tile then the B tile, 128 bytes per row.
pub const fn hopper_stage_bytes() -> u32 {
    (HOPPER_BM + HOPPER_BN) * 2 * HOPPER_BK
}

/// Dynamic shared memory of the W-path kernel.
pub const fn hopper_smem_bytes() -> u32 {
    HOPPER_STAGES * hopper_stage_bytes() + HOPPER_ALIGN_SLACK
}

/// Bytes of one stage of the `WG`-warpgroup GEMM (tile `64 WG` x [`HOPPER_BN`]): A then B.
pub const fn gemm_stage_bytes(warpgroups: u32) -> u32 {
    (64 * warpgroups + HOPPER_BN) * 2 * HOPPER_BK
}

/// Offset of the B tile within a stage of the `WG`-warpgroup GEMM (whole 1024-byte atoms).
pub const fn gemm_b_offset(warpgroups: u32) -> u32 {
    64 * warpgroups * 2 * HOPPER_BK
}

/// Warpgroups and ring depth of the wide GEMMs (tile 192 x 256, 384 threads): a third more
/// MMA work per byte of I and W tiles pulled from L2 than the 128 x 256 tile.
pub const WIDE_WARPGROUPS: u32 = 3;
pub const WIDE_THREADS: u32 = 128 * WIDE_WARPGROUPS;
pub const WIDE_BM: u32 = 64 * WIDE_WARPGROUPS;
pub const WIDE_STAGES: u32 = 4;
pub const WIDE_FUSED_STAGES: u32 = 3;

/// Dynamic shared memory of the wide W-path GEMM.
pub const fn wide_smem_bytes() -> u32 {
    WIDE_STAGES * gemm_stage_bytes(WIDE_WARPGROUPS) + HOPPER_ALIGN_SLACK
}

/// Dynamic shared memory of the wide fused GEMM for grid N: the ring, then U^N of the tile.
pub const fn wide_fused_smem_bytes(n: u32) -> u32 {
    WIDE_FUSED_STAGES * gemm_stage_bytes(WIDE_WARPGROUPS) + 4 * HOPPER_BN * 2 * n + HOPPER_ALIGN_SLACK
}

/// The 16-byte chunk thread `thread` of a `WG`-warpgroup block copies in copy `j` of an
/// operand tile: (row, chunk); eight threads per 128-byte row.
pub const fn gemm_copy_chunk(warpgroups: u32, thread: u32, j: u32) -> (u32, u32) {
    (thread / 8 + 16 * warpgroups * j, thread % 8)
}

/// Fused wide GEMM: chunk job `thread + WIDE_THREADS i` of a stage forms B row `job % 256`,
/// 16-byte chunk `job / 256` (jobs past 2047 idle).
pub const fn wide_form_job(thread: u32, i: u32) -> Option<(u32, u32)> {
    let job = thread + WIDE_THREADS * i;
    if job < HOPPER_BN * 8 {
        Some((job % HOPPER_BN, job / HOPPER_BN))
    } else {
        None
    }
}

/// The 16-byte chunk thread `thread` copies in copy `j` of an operand tile: (row, chunk).
/// Eight threads cover one 128-byte row, so a warp's copy fills 4 rows and, the 8 lanes of a
/// phase hitting distinct swizzled chunks of one row, stores without bank conflicts.
pub const fn hopper_copy_chunk(thread: u32, j: u32) -> (u32, u32) {
    (thread / 8 + (HOPPER_THREADS / 8) * j, thread % 8)
}

/// Copies per thread per stage of an operand tile of `rows` rows.
pub const fn hopper_copies(rows: u32) -> u32 {
    rows * 8 / HOPPER_THREADS
}

/// Offset of warpgroup `w`'s A rows (and of the B tile) within a stage: whole 1024-byte
/// atoms, as the descriptors require.
pub const fn hopper_a_offset(warpgroup: u32) -> u32 {
    64 * warpgroup * 2 * HOPPER_BK
}
pub const fn hopper_b_offset() -> u32 {
    HOPPER_BM * 2 * HOPPER_BK
}

/// Byte offset of J's f16 element (row, col) of a block tile staged in shared memory for
/// the epilogue: rows of 512 bytes whose 16-byte chunks are XOR-swizzled by `row % 8`, so a
/// warp's accumulator pairs (8 rows, 4 words of one chunk each) hit 32 distinct banks and a
/// warp reading one row's 32 chunks takes the minimum 4 wavefronts.
pub const fn staged_offset(row: u32, col: u32) -> u32 {
    row * 2 * HOPPER_BN + 16 * ((col / 8) ^ (row % 8)) + 2 * (col % 8)
}

/// `.maxnreg` caps `build.rs` adds: the wide kernels' 384 threads x 168 fit the SM's 65 536
/// registers (without a cap ptxas would take up to 255).
pub const REGISTER_LIMITS: [(&str, u32); 2] =
    [("frb_resample_gemm_wide_sm90a", 168), ("frb_resample_fused_wide_sm90a", 168)];

/// Whether the W-path GEMM takes the wide tile for `times` rows: when its tiles of 192 rows
/// pad no more rows than the 128-row tiles do (a last tile of at most 64 rows counting 64,
/// as it is split by beams). Full CHORD's 917 pad to 960 both ways (wide: a third less L2
/// traffic, 1.05-1.11x faster on the H200); HIRAX's 980 to 1152 against 1024. There the
/// wide tile's last row tile has one busy warpgroup (the other two skip their wgmmas), but
/// that tile still pulls the whole W tile through its ring and costs about 0.6 of a full
/// one, so the narrow tile stays as fast or faster (H200, BENCHMARKS.md, fourth round).
pub const fn use_wide_tile(times: u32) -> bool {
    let rest = times % HOPPER_BM;
    let narrow = times - rest
        + if rest == 0 {
            0
        } else if rest <= 64 {
            64
        } else {
            HOPPER_BM
        };
    times.div_ceil(WIDE_BM) * WIDE_BM <= narrow
}

/// `floor(g / n8)` for the fused wide kernel's chunk counts `g < 2^12` and `n8 = 2N / 8`
/// in 2..=6, by one multiply with `inv_n8 = 1 / n8` (f32) instead of an integer division.
pub fn chunk_p(g: u32, inv_n8: f32) -> u32 {
    ((g as f32 + 0.5) * inv_n8) as u32
}

#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
pub use device::*;

#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
mod device {
    use super::*;
    use crate::intrinsics::*;
    use crate::wgmma::{
        commit_group, descriptor_k_major_128b, fence, fence_proxy_async_shared, mma_m64n128k16_f32_f16,
        mma_m64n256k16_f32_f16, swizzle_128b, wait_group,
    };

    /// The GEMM of both paths for `WG` warpgroups (module comment), instantiated for the
    /// wide tile (`WG` = 3). Grid: x = tbar tiles of `64 WG` rows, y = beam tiles, z =
    /// channels; `128 WG` threads. `k` = 4MN, a multiple of [`HOPPER_BK`]. Copies run `S - 1`
    /// stages ahead (a second barrier per stage frees the slot) and J goes through shared
    /// memory. With `WG` = 2, tiles of at most 64 rows are split by beams: that form passed
    /// the GPU tests but ran 2-3% slower on the H200 than the narrow [`gemm`] it generalises
    /// (LLVM hoists its epilogue's addresses over the main loop: 210 registers against 206),
    /// so the narrow kernel stays [`gemm`]. `FUSED`: the B stage is formed from U^M (device
    /// memory) and U^N (shared memory after the ring, `m`, `n` given) instead of copied.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm_wide<const S: u32, const WG: u32, const FUSED: bool>(
        intensity: *const u16,
        weights: *const u16,
        (u_m, u_n, m, n): (*const f32, *const f32, u32, u32),
        out: *mut u16,
        times: u32,
        beams: u32,
        k: u32,
    ) {
        const { assert!(S >= 3 && (WG == 2 || WG == 3)) };
        let d = S - 1;
        let threads = 128 * WG;
        let stage_bytes = gemm_stage_bytes(WG);
        let b_offset = gemm_b_offset(WG);
        let tid = thread_idx_x();
        let (warpgroup, t) = (tid / 128, tid % 128);
        let channel = block_idx_z();
        let (row0, col0) = (64 * WG * block_idx_x(), HOPPER_BN * block_idx_y());
        let a = intensity.add(channel as usize * times as usize * k as usize);
        let b = weights.wrapping_add(channel as usize * beams as usize * k as usize);
        let smem = (dynamic_shared() + 1023) & !1023;
        // A warpgroup whose 64 rows all lie past the edge (HIRAX's 980 = 5 x 192 + 20: the
        // second and third of the last tbar tile) skips its wgmmas and J staging but keeps
        // copying and meeting the barriers. The condition comes through a shuffle so that
        // ptxas sees it warp-uniform and keeps the wgmmas unserialised (C7518 otherwise).
        let idle = shfl_idx((row0 + 64 * warpgroup >= times) as u32, 0) != 0;

        let (r, c) = gemm_copy_chunk(WG, tid, 0);
        let dst = swizzle_128b(r, 16 * c);
        let rows_a = times.saturating_sub(row0 + r);
        let rows_b = beams.saturating_sub(col0 + r);
        let src_a = a.wrapping_add((row0 + r) as usize * k as usize + 8 * c as usize);
        let src_b = b.wrapping_add((col0 + r) as usize * k as usize + 8 * c as usize);
        let row_stride = threads / 8;
        let row_step = row_stride as usize * k as usize;
        // B copies: whole ones of every thread, then a last one of the first `part` rows.
        let (full_b, part_b) = (HOPPER_BN / row_stride, HOPPER_BN % row_stride);

        let copy_a = |step: u32, slot: u32| {
            let base = smem + slot * stage_bytes + dst;
            let k0 = (step * HOPPER_BK) as usize;
            unroll!(j in [0, 1, 2, 3] {
                let inside = row_stride * (j as u32) < rows_a;
                // Past the edge: zero-fill, the channel's first row as a harmless address.
                let src = if inside { src_a.wrapping_add(j * row_step + k0) } else { a };
                cp_async_16(base + row_stride * j as u32 * 128, src as *const u8, if inside { 16 } else { 0 });
            });
        };
        let copy_b = |step: u32, slot: u32| {
            let base = smem + slot * stage_bytes + b_offset + dst;
            let k0 = (step * HOPPER_BK) as usize;
            unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                if (j as u32) < full_b || ((j as u32) == full_b && r < part_b) {
                    let inside = row_stride * (j as u32) < rows_b;
                    let src = if inside { src_b.wrapping_add(j * row_step + k0) } else { intensity };
                    cp_async_16(base + row_stride * j as u32 * 128, src as *const u8, if inside { 16 } else { 0 });
                }
            });
        };
        // Fused: chunk job `tid + 128 WG i` of a stage is B row `job % 256`, chunk `job / 256`
        // ([`wide_form_job`]); a warp's 32 jobs share the chunk, so p and q are warp-uniform.
        let un_s = smem + S * stage_bytes;
        let um_g = u_m.wrapping_add(channel as usize * 2 * m as usize * beams as usize);
        // Chunks of 8 q per row of p, and its inverse for an exact floor division of the
        // small chunk counts (< 2^12) by a multiply.
        let n8 = (n / 4).max(1);
        let inv_n8 = 1.0 / n8 as f32;
        let form_b = |step: u32, slot: u32| {
            let base = smem + slot * stage_bytes + b_offset;
            // The job's B row, chunk, and its (p, q): warp-uniform chunk, p and q.
            let job = |i: u32| {
                let (row, chunk) = ((tid + threads * i) % HOPPER_BN, (tid + threads * i) / HOPPER_BN);
                let g = step * (HOPPER_BK / 8) + chunk;
                let p = chunk_p(g, inv_n8);
                (row, chunk, p, 8 * (g - p * n8))
            };
            let active = |i: u32| i < 2048 / threads || tid + threads * i < 2048;
            // Three jobs' U^M loads (device memory, mostly L2) at a time, so their latencies
            // overlap; all six at once spill at 168 registers.
            // (A rolled loop over the halves: unrolled, ptxas hoists every job's addresses.)
            let mut h = 0;
            while h < 6 {
                let mut um = [0.0f32; 3];
                unroll!(e in [0, 1, 2] {
                    let i = h + e as u32;
                    if active(i) {
                        let (row, _, p, _) = job(i);
                        // Past the last beam U^N is zero: U^M of the last beam keeps the address valid.
                        let beam = (col0 + row).min(beams.max(1) - 1);
                        um[e] = *um_g.add((4 * ((p / 4) * beams + beam) + p % 4) as usize);
                    }
                });
                unroll!(e in [0, 1, 2] {
                    let i = h + e as u32;
                    if active(i) {
                        let (row, chunk, _, q) = job(i);
                        let lo = ld_shared_v4(un_s + super::super::fused_u_offset(q, row, HOPPER_BN));
                        let hi = ld_shared_v4(un_s + super::super::fused_u_offset(q + 4, row, HOPPER_BN));
                        let un = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]].map(f32::from_bits);
                        // The W kernel's product and rounding: U^M_p U^N_q in f32, then f16 (rn).
                        let w = [0, 1, 2, 3].map(|x| f32x2_to_f16x2(um[e] * un[2 * x], um[e] * un[2 * x + 1]));
                        st_shared_v4(base + swizzle_128b(row, 16 * chunk), w);
                    }
                });
                h += 3;
            }
        };

        let steps = k / HOPPER_BK;
        if FUSED {
            // U^N of the tile's beams, zero past the last; its own group, before the stages'.
            let un_g = u_n.add(channel as usize * 2 * n as usize * beams as usize);
            let per_row = n / 2;
            let mut x = tid;
            while x < HOPPER_BN * per_row {
                let (row, q4) = (x % HOPPER_BN, x / HOPPER_BN);
                let beam = col0 + row;
                let inside = beam < beams;
                let at = if inside { 4 * (q4 as usize * beams as usize + beam as usize) } else { 0 };
                cp_async_16(
                    un_s + super::super::fused_u_offset(4 * q4, row, HOPPER_BN),
                    un_g.add(at) as *const u8,
                    if inside { 16 } else { 0 },
                );
                x += threads;
            }
            cp_async_commit();
        }
        unroll!(s in [0, 1, 2, 3] {
            if (s as u32) < d {
                if (s as u32) < steps {
                    copy_a(s as u32, s as u32);
                    if !FUSED {
                        copy_b(s as u32, s as u32);
                    }
                }
                cp_async_commit();
            }
        });
        if FUSED {
            // U^N has landed (every thread's copies, then the barrier): form the first stages.
            cp_async_wait_pending(d);
            sync_threads();
            unroll!(s in [0, 1, 2, 3] {
                if (s as u32) < d && (s as u32) < steps {
                    form_b(s as u32, s as u32);
                }
            });
        }
        // A tile whose rows all lie in its first 64 (full CHORD's last, 21 rows): both
        // warpgroups take those rows, each with half of the beams (m64n128), instead of the
        // second computing rows past the edge. Block-uniform, so the wgmmas stay unserialised.
        let half = WG == 2 && times - row0 <= 64;
        let (a_off, b_off) = if half {
            (0, b_offset + warpgroup * 128 * 2 * HOPPER_BK)
        } else {
            (hopper_a_offset(warpgroup), b_offset)
        };
        let (a_desc, b_desc) = (smem + a_off, smem + b_off);
        // Tile row and column of this warpgroup's accumulator (0, 0).
        let (wg_row, wg_col) = if half { (0, 128 * warpgroup) } else { (64 * warpgroup, 0) };

        // `main_loop!()`: an idle warpgroup's loop, the same copies and barriers without wgmmas.
        macro_rules! main_loop {
            ($($acc:ident, $mma:ident)?) => {{
                let mut step = 0;
                let mut slot = 0;
                while step < steps {
                    cp_async_wait_pending(d - 1); // stage `step` has landed
                    fence_proxy_async_shared();
                    sync_threads();
                    $(
                        fence();
                        let s = slot * stage_bytes;
                        unroll!(kk in [0, 1, 2, 3] {
                            $mma(
                                &mut $acc,
                                descriptor_k_major_128b(a_desc + s + 32 * kk as u32),
                                descriptor_k_major_128b(b_desc + s + 32 * kk as u32),
                                true,
                            );
                        });
                        commit_group();
                        // The slot of step - 1 is free once every warpgroup has waited for
                        // that step's group: copies run D = S - 1 stages ahead.
                        wait_group::<1>();
                    )?
                    sync_threads();
                    // Stage step + D into the slot read by a group every warpgroup has
                    // waited for before the last barrier, while this step's wgmmas run.
                    let next = step + d;
                    let next_slot = if slot + d >= S { slot + d - S } else { slot + d };
                    if next < steps {
                        copy_a(next, next_slot);
                        if !FUSED {
                            copy_b(next, next_slot);
                        }
                    }
                    cp_async_commit();
                    if FUSED && next < steps {
                        form_b(next, next_slot);
                    }
                    slot = if slot + 1 == S { 0 } else { slot + 1 };
                    step += 1;
                }
                cp_async_wait_all();
                $(
                    let _ = stringify!($mma);
                    wait_group::<0>();
                )?
            }};
        }

        let j = out.add(channel as usize * times as usize * beams as usize);
        if half {
            let mut acc = [0.0f32; 64];
            main_loop!(acc, mma_m64n128k16_f32_f16);
            // The ring is free for staging J once every warpgroup's wgmmas are done.
            sync_threads();
            stage_j(&acc, t, wg_row, wg_col, smem);
        } else if idle {
            // Its rows are never stored, so nothing to stage.
            main_loop!();
            sync_threads();
        } else {
            let mut acc = [0.0f32; 128];
            main_loop!(acc, mma_m64n256k16_f32_f16);
            sync_threads();
            stage_j(&acc, t, wg_row, wg_col, smem);
        }
        sync_threads();
        store_j::<WG>(j, smem, tid, (row0, col0), times, beams);
    }

    /// Stages a warpgroup's f32 accumulators (m64n128 with `R` = 64, m64n256 with 128) as f16
    /// pairs in the shared J tile (`staged_offset`), at the warpgroup's offset (`row`, `col`).
    #[inline(always)]
    unsafe fn stage_j<const R: usize>(acc: &[f32; R], t: u32, row: u32, col: u32, smem: u32) {
        crate::for_each_accumulator_128!(|reg: u32| {
            if (reg as usize) < R && reg % 2 == 0 {
                let (r, c) = crate::wgmma::accumulator_position(t, reg);
                let pair = f32x2_to_f16x2(acc[reg as usize & (R - 1)], acc[(reg | 1) as usize & (R - 1)]);
                st_shared_u32(smem + staged_offset(row + r, col + c), pair);
            }
        });
    }

    /// Stores the staged J tile (rows from `row0`, columns from `col0`) to `j`, in whole 16-byte
    /// chunks of J rows: a warp stores 512 contiguous bytes of one row; `128 WG` threads.
    #[inline(always)]
    unsafe fn store_j<const WG: u32>(
        j: *mut u16,
        smem: u32,
        tid: u32,
        (row0, col0): (u32, u32),
        times: u32,
        beams: u32,
    ) {
        let c = tid % 32;
        let col = col0 + 8 * c;
        unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
            let r = tid / 32 + 4 * WG * i as u32;
            let row = row0 + r;
            if row < times && col < beams {
                let v = ld_shared_v4(smem + staged_offset(r, 8 * c));
                let at = row as usize * beams as usize + col as usize;
                if beams % 8 == 0 {
                    st_global_v4(j.add(at) as *mut u32, v);
                } else {
                    unroll!(e in [0, 1, 2, 3, 4, 5, 6, 7] {
                        if col + (e as u32) < beams {
                            *j.add(at + e) = (v[e / 2] >> (16 * (e % 2))) as u16;
                        }
                    });
                }
            }
        });
    }

    /// The W-path GEMM (module comment). Grid: x = tbar tiles, y = beam tiles, z = channels;
    /// [`HOPPER_THREADS`] threads. `k` = 4MN, a multiple of [`HOPPER_BK`]. Copies run `S - 1`
    /// stages ahead (a second barrier per stage frees the slot), tiles of at most 64 rows are
    /// split by beams, and J goes through shared memory.
    #[inline(always)]
    unsafe fn gemm<const S: u32>(
        intensity: *const u16,
        weights: *const u16,
        out: *mut u16,
        times: u32,
        beams: u32,
        k: u32,
    ) {
        const { assert!(S >= 3) };
        let d = S - 1;
        let stage_bytes = hopper_stage_bytes();
        let tid = thread_idx_x();
        let (warpgroup, t) = (tid / 128, tid % 128);
        let channel = block_idx_z();
        let (row0, col0) = (HOPPER_BM * block_idx_x(), HOPPER_BN * block_idx_y());
        let a = intensity.add(channel as usize * times as usize * k as usize);
        let b = weights.wrapping_add(channel as usize * beams as usize * k as usize);
        let smem = (dynamic_shared() + 1023) & !1023;
        // Every warpgroup runs its wgmmas, also one whose rows are all past the edge (the
        // second of full CHORD's last tbar tile): skipping them puts the wgmmas on a path
        // ptxas deems divergent, and it serialises them (C7518).

        let (r, c) = hopper_copy_chunk(tid, 0);
        let dst = swizzle_128b(r, 16 * c);
        let rows_a = times.saturating_sub(row0 + r);
        let rows_b = beams.saturating_sub(col0 + r);
        let src_a = a.wrapping_add((row0 + r) as usize * k as usize + 8 * c as usize);
        let src_b = b.wrapping_add((col0 + r) as usize * k as usize + 8 * c as usize);
        let row_stride = HOPPER_THREADS / 8;
        let row_step = row_stride as usize * k as usize;

        let copy_a = |step: u32, slot: u32| {
            let base = smem + slot * stage_bytes + dst;
            let k0 = (step * HOPPER_BK) as usize;
            unroll!(j in [0, 1, 2, 3] {
                let inside = row_stride * (j as u32) < rows_a;
                // Past the edge: zero-fill, the channel's first row as a harmless address.
                let src = if inside { src_a.wrapping_add(j * row_step + k0) } else { a };
                cp_async_16(base + row_stride * j as u32 * 128, src as *const u8, if inside { 16 } else { 0 });
            });
        };
        let copy_b = |step: u32, slot: u32| {
            let base = smem + slot * stage_bytes + hopper_b_offset() + dst;
            let k0 = (step * HOPPER_BK) as usize;
            unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                let inside = row_stride * (j as u32) < rows_b;
                let src = if inside { src_b.wrapping_add(j * row_step + k0) } else { intensity };
                cp_async_16(base + row_stride * j as u32 * 128, src as *const u8, if inside { 16 } else { 0 });
            });
        };

        let steps = k / HOPPER_BK;
        unroll!(s in [0, 1, 2, 3] {
            if (s as u32) < d {
                if (s as u32) < steps {
                    copy_a(s as u32, s as u32);
                    copy_b(s as u32, s as u32);
                }
                cp_async_commit();
            }
        });
        // A tile whose rows all lie in its first 64 (full CHORD's last, 21 rows): both
        // warpgroups take those rows, each with half of the beams (m64n128), instead of the
        // second computing rows past the edge. Block-uniform, so the wgmmas stay unserialised.
        let half = times - row0 <= 64;
        let (a_off, b_off) = if half {
            (0, hopper_b_offset() + warpgroup * 128 * 2 * HOPPER_BK)
        } else {
            (hopper_a_offset(warpgroup), hopper_b_offset())
        };
        let (a_desc, b_desc) = (smem + a_off, smem + b_off);
        // Tile row and column of this warpgroup's accumulator (0, 0).
        let (wg_row, wg_col) = if half { (0, 128 * warpgroup) } else { (64 * warpgroup, 0) };

        macro_rules! main_loop {
            ($acc:ident, $mma:ident) => {{
                let mut step = 0;
                let mut slot = 0;
                while step < steps {
                    cp_async_wait_pending(d - 1); // stage `step` has landed
                    fence_proxy_async_shared();
                    sync_threads();
                    fence();
                    let s = slot * stage_bytes;
                    unroll!(kk in [0, 1, 2, 3] {
                        $mma(
                            &mut $acc,
                            descriptor_k_major_128b(a_desc + s + 32 * kk as u32),
                            descriptor_k_major_128b(b_desc + s + 32 * kk as u32),
                            true,
                        );
                    });
                    commit_group();
                    // The slot of step - 1 is free once every warpgroup has waited for that
                    // step's group: copies run D = S - 1 stages ahead.
                    wait_group::<1>();
                    sync_threads();
                    // Stage step + D into the slot read by a group every warpgroup has
                    // waited for before the last barrier, while this step's wgmmas run.
                    let next = step + d;
                    let next_slot = if slot + d >= S { slot + d - S } else { slot + d };
                    if next < steps {
                        copy_a(next, next_slot);
                        copy_b(next, next_slot);
                    }
                    cp_async_commit();
                    slot = if slot + 1 == S { 0 } else { slot + 1 };
                    step += 1;
                }
                cp_async_wait_all();
                wait_group::<0>();
            }};
        }

        let j = out.add(channel as usize * times as usize * beams as usize);
        if half {
            let mut acc = [0.0f32; 64];
            main_loop!(acc, mma_m64n128k16_f32_f16);
            // The ring is free for staging J once every warpgroup's wgmmas are done.
            sync_threads();
            stage_j(&acc, t, wg_row, wg_col, smem);
        } else {
            let mut acc = [0.0f32; 128];
            main_loop!(acc, mma_m64n256k16_f32_f16);
            sync_threads();
            stage_j(&acc, t, wg_row, wg_col, smem);
        }
        sync_threads();
        store_j::<2>(j, smem, tid, (row0, col0), times, beams);
    }

    /// `J = I W` on sm_90a: [`HOPPER_THREADS`] threads, [`hopper_smem_bytes`] of dynamic shared
    /// memory, the sm_80 GEMM's grid with [`HOPPER_BM`] x [`HOPPER_BN`] tiles. `k` = 4MN.
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn frb_resample_gemm_sm90a(
        intensity: *const u16,
        weights: *const u16,
        out: *mut u16,
        times: u32,
        beams: u32,
        k: u32,
    ) {
        gemm::<HOPPER_STAGES>(intensity, weights, out, times, beams, k)
    }

    /// `J = I W` on sm_90a with 192 x 256 tiles: [`WIDE_THREADS`] threads, [`wide_smem_bytes`]
    /// of dynamic shared memory, grid x = tbar tiles of [`WIDE_BM`].
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn frb_resample_gemm_wide_sm90a(
        intensity: *const u16,
        weights: *const u16,
        out: *mut u16,
        times: u32,
        beams: u32,
        k: u32,
    ) {
        let none = core::ptr::null();
        gemm_wide::<WIDE_STAGES, WIDE_WARPGROUPS, false>(
            intensity,
            weights,
            (none, none, 0, 0),
            out,
            times,
            beams,
            k,
        )
    }

    /// `J = I W` with W formed from U by all threads in the wgmmas' shadow, 192 x 256 tiles:
    /// [`WIDE_THREADS`] threads, [`wide_fused_smem_bytes`]`(n)` of dynamic shared memory.
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn frb_resample_fused_wide_sm90a(
        intensity: *const u16,
        u_m: *const f32,
        u_n: *const f32,
        out: *mut u16,
        times: u32,
        beams: u32,
        m: u32,
        n: u32,
    ) {
        gemm_wide::<WIDE_FUSED_STAGES, WIDE_WARPGROUPS, true>(
            intensity,
            core::ptr::null(),
            (u_m, u_n, m, n),
            out,
            times,
            beams,
            4 * m * n,
        )
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::bank::is_conflict_free;
    use crate::wgmma::swizzle_128b;
    use std::vec::Vec;

    #[test]
    fn the_swizzle_is_the_sm80_kernels_for_128_byte_rows() {
        for row in 0..256 {
            for chunk in 0..8 {
                assert_eq!(swizzle_128b(row, 16 * chunk), super::super::swizzled(row, chunk, 64));
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
    fn copies_cover_each_stage_once_without_conflicts() {
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
                    assert!(
                        lanes.is_empty() || lanes.len() == 32,
                        "rows {rows} copy {j}: partial warp {warp}"
                    );
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
    fn wide_fused_jobs_cover_b_once_with_warp_uniform_chunks_and_no_conflicts() {
        let mut seen = [0u32; (HOPPER_BN * 8) as usize];
        for i in 0..6 {
            for warp in 0..WIDE_THREADS / 32 {
                let jobs: Vec<_> = (0..32).map(|l| wide_form_job(32 * warp + l, i)).collect();
                if jobs.iter().all(Option::is_none) {
                    continue;
                }
                let jobs: Vec<(u32, u32)> = jobs.into_iter().map(|j| j.expect("whole warps")).collect();
                assert!(jobs.iter().all(|j| j.1 == jobs[0].1), "job {i} warp {warp}: one chunk");
                let store: [u32; 32] = core::array::from_fn(|l| swizzle_128b(jobs[l].0, 16 * jobs[l].1));
                assert!(is_conflict_free(&store, 16), "job {i} warp {warp}: B stores");
                for q in (0..48).step_by(4) {
                    let load: [u32; 32] =
                        core::array::from_fn(|l| super::super::fused_u_offset(q, jobs[l].0, HOPPER_BN));
                    assert!(is_conflict_free(&load, 16), "job {i} warp {warp}: U^N loads");
                }
                for (row, chunk) in jobs {
                    seen[(8 * row + chunk) as usize] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
        // The kernel's `i < 2048 / 384 || tid < 128` guard is this coverage's.
        for t in 0..WIDE_THREADS {
            assert_eq!(wide_form_job(t, 5).is_some(), t < 128);
        }
    }

    #[test]
    fn p_by_the_inverse_is_the_floor_division() {
        // The fused wide kernel's p = floor(g / (2N / 8)) for g < 2^12 by one f32 multiply.
        for n in [8u32, 12, 16, 20, 24] {
            let n8 = n / 4;
            for g in 0..4096u32 {
                assert_eq!(chunk_p(g, 1.0 / n8 as f32), g / n8, "g {g} / {n8}");
            }
        }
    }

    #[test]
    fn the_wide_tile_is_taken_where_it_pads_no_more_rows() {
        // Seed Table 4: 917 slow samples (pathfinder, full CHORD) and 980 (HIRAX).
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
        for name in ["frb_resample_gemm_wide_sm90a", "frb_resample_fused_wide_sm90a"] {
            let cap = REGISTER_LIMITS.iter().find(|(k, _)| *k == name).expect("listed").1;
            assert!(cap * WIDE_THREADS <= 65536 && cap % 8 == 0);
        }
        assert!(wide_smem_bytes() <= 227 * 1024);
        for n in [8, 12, 16, 20, 24] {
            assert!(wide_fused_smem_bytes(n) <= 227 * 1024, "N = {n}");
        }
        for wg in [2, 3] {
            assert_eq!(gemm_stage_bytes(wg) % 1024, 0);
            assert_eq!(gemm_b_offset(wg) % 1024, 0);
            assert_eq!(hopper_a_offset(wg - 1) % 1024, 0);
        }
        assert_eq!(gemm_stage_bytes(2), hopper_stage_bytes());
        // J (192 x 256 f16) is staged in either ring.
        let staged = (0..HOPPER_BN).map(|col| staged_offset(WIDE_BM - 1, col) + 2).max().unwrap();
        assert_eq!(staged, WIDE_BM * HOPPER_BN * 2);
        assert!(staged <= WIDE_FUSED_STAGES * gemm_stage_bytes(WIDE_WARPGROUPS));
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
}
