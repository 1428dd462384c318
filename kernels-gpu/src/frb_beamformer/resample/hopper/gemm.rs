//! The `wgmma` W-path GEMMs `J = I W` (`frb_resample_gemm_sm90a`, 128 x 256 tiles, and
//! `frb_resample_gemm_wide_sm90a`, 192 x 256): the `hopper` module docs give the design.

use super::super::store::store_j;
use super::super::*;
use crate::intrinsics::*;
use crate::wgmma::{
    commit_group, descriptor_k_major_128b, fence, fence_proxy_async_shared, mma_m64n128k16_f32_f16,
    mma_m64n256k16_f32_f16, swizzle_128b, wait_group,
};

/// The GEMM of both paths for `WG` warpgroups (module comment), instantiated for the
/// wide tile (`WG` = 3). Grid: x = tbar tiles of `64 WG` rows, y = beam tiles, z =
/// channels; `128 WG` threads. `k` = 4MN, a multiple of [`HOPPER_BK`]. Copies run `S - 1`
/// stages ahead (a second barrier per stage frees the slot) and J goes through shared
/// memory. With `WG` = 2, tiles of at most 64 rows are split by beams; that form measured
/// slower than the narrow [`gemm`] it generalises (LLVM hoists its epilogue's addresses over
/// the main loop, a few more registers), so the narrow kernel stays [`gemm`].
#[inline(always)]
pub(in crate::frb_beamformer::resample) unsafe fn gemm_wide<const S: u32, const WG: u32>(
    intensity: *const u16,
    weights: *const u16,
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
                    copy_b(next, next_slot);
                }
                cp_async_commit();
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

/// The W-path GEMM (module comment). Grid: x = tbar tiles, y = beam tiles, z = channels;
/// [`HOPPER_THREADS`] threads. `k` = 4MN, a multiple of [`HOPPER_BK`]. Copies run `S - 1`
/// stages ahead (a second barrier per stage frees the slot), tiles of at most 64 rows are
/// split by beams, and J goes through shared memory.
#[inline(always)]
pub(in crate::frb_beamformer::resample) unsafe fn gemm<const S: u32>(
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
