//! The resampling GEMM `J = I W` (and its fused form) on Hopper's warpgroup tensor cores
//! (`wgmma`, sm_90a; seed 000 sec. 5.2, issue 8), for the module `build.rs` compiles with
//! `--cfg radio_sm90a`. Same formula, layouts and results as the sm_80 kernels of the parent
//! module: I `[f][tbar][rho]`, W `[f][beta][rho]` (f16 bits), J `[f][tbar][beta]` f16.
//!
//! Both operands are already K-major (rho contiguous), the form `wgmma` wants, so a stage is
//! a `128 x 64` tile of I and a `256 x 64` tile of W, each row 128 bytes in the 128-byte
//! swizzle ([`crate::wgmma::swizzle_128b`]; the sm_80 kernels' `swizzled(.., 64)` is the same
//! map). A block of 2 warpgroups computes a [`HOPPER_BM`] (tbar) x [`HOPPER_BN`] (beam) tile:
//! warpgroup `w` rows `64 w .. 64 w + 63` with 4 `m64n256k16` per stage (128 f32 accumulators
//! per thread). All 256 threads copy stages ahead with `cp.async` while the tensor cores run
//! stage `s`; one `wgmma` group stays in flight (`wgmma.wait_group 1`).
//!
//! W path ([`HOPPER_STAGES`] = 4): after issuing stage `s`, every thread waits for its group
//! `s - 1` and the block meets a second barrier, so stage `s + 3` can go into `s - 1`'s slot
//! (3 stages ahead). A tile whose rows all lie in its first 64 (full CHORD's last, 21 of 128)
//! is split by beams instead (`m64n128`, half the wgmma work); the block-uniform branch keeps
//! ptxas from serialising the wgmmas, as a per-warpgroup skip did (C7518). J is staged in the
//! ring ([`staged_offset`]) and stored in whole 16-byte chunks, a warp per 512-byte row: on
//! the H200 the direct fragment stores had cost 20% of the HIRAX time (BENCHMARKS.md).
//!
//! Fused path (`frb_resample_fused_ws_sm90a`, warp-specialised, 384 threads): a producer
//! warpgroup (`setmaxnreg` down to [`WS_PRODUCER_REGISTERS`]) copies the I stage with
//! `cp.async` and writes the B stage itself, thread `t` forming beams `t` and `t + 128`'s 8
//! chunks `U^M_p U^N_q .. U^N_{q+7}` each (f32 product, f16 rn: the W kernel's arithmetic,
//! so the B tiles and hence J are the W path's bit for bit); two consumer warpgroups (up to
//! [`WS_CONSUMER_REGISTERS`]) only wait, issue the wgmmas above and release. Stages pass
//! through a ring of [`WS_STAGES`] = 3 by mbarriers: the producer fills slot `s % 3` once the
//! consumers' empty barrier says stage `s - 3` is read, copies I one stage ahead, and after
//! its own `cp.async` wait and `fence.proxy.async` arrives on the full barrier. U^N of the
//! tile sits in shared memory after the ring (the sm_80 fused kernel's `[q/4][beam][4]`,
//! [`super::fused_u_offset`]); U^M is read from device memory (one f32 per chunk, L1-cached),
//! which keeps the ring inside 227 KiB for (24, 24). J is staged as in the W path. On the
//! H200 this was 1-15% faster than the same work done by all 256 threads of a 2-warpgroup
//! block between barriers; the same structure made the W path slower (BENCHMARKS.md).

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

/// The warp-specialised fused kernel: one producer warpgroup (copies I, forms B) and two
/// consumer warpgroups (wgmma only), stages handed over by mbarriers.
pub const WS_THREADS: u32 = 384;
pub const WS_PRODUCER_THREADS: u32 = 128;
/// `setmaxnreg` budgets: 128 x 88 + 256 x 208 = 64 512 of the SM's 65 536 registers, within
/// the kernel's `.maxnreg` ([`REGISTER_LIMITS`]) times 384 threads. With 56 for the producer
/// (and 224 for the consumers) ptxas spilled the producer's U and address registers.
pub const WS_PRODUCER_REGISTERS: u32 = 88;
pub const WS_CONSUMER_REGISTERS: u32 = 208;
/// Ring depth and copy lead (stages): the producer issues stage `s + 1`'s I copies before
/// forming and publishing stage `s`; the lead is at most depth - 2, as a slot is released
/// only once the consumers' next group is in flight. 3 stages leave room for U^N at N = 24.
pub const WS_STAGES: u32 = 3;
pub const WS_LEAD: u32 = 1;

/// `.maxnreg` caps `build.rs` adds: `setmaxnreg` needs one, and 384 threads x 168 fit the SM.
pub const REGISTER_LIMITS: [(&str, u32); 1] = [("frb_resample_fused_ws_sm90a", 168)];

/// Bytes after the ring and U^N for the stages' full and empty mbarriers.
pub const fn ws_barrier_bytes(stages: u32) -> u32 {
    16 * stages
}

/// Dynamic shared memory of the fused kernel for grid N: the ring, U^N of the tile, the
/// barriers.
pub const fn ws_fused_smem_bytes(n: u32) -> u32 {
    WS_STAGES * hopper_stage_bytes()
        + 4 * HOPPER_BN * 2 * n
        + ws_barrier_bytes(WS_STAGES)
        + HOPPER_ALIGN_SLACK
}

/// The 16-byte chunk producer thread `thread` copies in copy `j` of an operand tile: (row,
/// chunk), as [`hopper_copy_chunk`] with 128 threads (16 rows per copy).
pub const fn ws_copy_chunk(thread: u32, j: u32) -> (u32, u32) {
    (thread / 8 + (WS_PRODUCER_THREADS / 8) * j, thread % 8)
}

#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
pub use device::*;

#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
mod device {
    use super::*;
    use crate::intrinsics::*;
    use crate::wgmma::{
        commit_group, descriptor_k_major_128b, fence, fence_proxy_async_shared, mbarrier_arrive,
        mbarrier_init, mbarrier_wait, mma_m64n128k16_f32_f16, mma_m64n256k16_f32_f16, set_max_registers,
        swizzle_128b, wait_group,
    };

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
        // J's f16 pair (col, col + 1) of tile row `row`, staged in shared memory.
        let put = |row: u32, col: u32, pair: u32| st_shared_u32(smem + staged_offset(row, col), pair);
        if half {
            let mut acc = [0.0f32; 64];
            main_loop!(acc, mma_m64n128k16_f32_f16);
            // The ring is free for staging J once every warpgroup's wgmmas are done.
            sync_threads();
            crate::for_each_accumulator_128!(|reg: u32| {
                if reg < 64 && reg % 2 == 0 {
                    let (row, col) = crate::wgmma::accumulator_position(t, reg);
                    let pair = f32x2_to_f16x2(acc[(reg & 63) as usize], acc[((reg | 1) & 63) as usize]);
                    put(wg_row + row, wg_col + col, pair);
                }
            });
        } else {
            let mut acc = [0.0f32; 128];
            main_loop!(acc, mma_m64n256k16_f32_f16);
            sync_threads();
            crate::for_each_accumulator_128!(|reg: u32| {
                if reg % 2 == 0 {
                    let (row, col) = crate::wgmma::accumulator_position(t, reg);
                    let pair = f32x2_to_f16x2(acc[reg as usize], acc[(reg | 1) as usize]);
                    put(wg_row + row, wg_col + col, pair);
                }
            });
        }
        // Whole 16-byte chunks of J rows: a warp stores 512 contiguous bytes of one row.
        sync_threads();
        let c = tid % 32;
        let col = col0 + 8 * c;
        unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
            let r = tid / 32 + 8 * i as u32;
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

    /// The fused GEMM, warp-specialised ([`WS_THREADS`] threads; its W-path form was slower
    /// than [`gemm`] on the H200, BENCHMARKS.md): warpgroup 0 produces stage `s` into slot
    /// `s % S` (I by `cp.async`, B formed from U^M and U^N with the W kernel's product and
    /// rounding), then fences and arrives on the slot's full barrier; warpgroups
    /// 1 and 2 wait on it, issue their wgmmas and, once the next group is in flight and this
    /// one done, arrive on the slot's empty barrier, which the producer waits on before
    /// reusing the slot. J is staged through the ring as in the W-path kernel.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm_ws<const S: u32, const D: u32>(
        intensity: *const u16,
        u_m: *const f32,
        u_n: *const f32,
        out: *mut u16,
        times: u32,
        beams: u32,
        k: u32,
        (m, n): (u32, u32),
    ) {
        // One producer warpgroup: with two (512 threads) the kernel's .maxnreg would be 128,
        // fewer than an m64n256 f32 wgmma needs (ptxas C7602).
        const P: u32 = 1;
        const { assert!(D >= 1 && D + 2 <= S) };
        let producers = 128 * P;
        let stage_bytes = hopper_stage_bytes();
        let tid = thread_idx_x();
        // The role through a shuffle, so that ptxas sees it warp-uniform and keeps the
        // consumers' wgmmas unserialised.
        let role = shfl_idx(tid / 128, 0);
        let channel = block_idx_z();
        let (row0, col0) = (HOPPER_BM * block_idx_x(), HOPPER_BN * block_idx_y());
        let smem = (dynamic_shared() + 1023) & !1023;
        let un_s = smem + S * stage_bytes;
        let bars = un_s + 4 * HOPPER_BN * 2 * n;
        let full = |s: u32| bars + 8 * s;
        let empty = |s: u32| bars + 8 * (S + s);
        if tid == 0 {
            let mut s = 0;
            while s < S {
                mbarrier_init(full(s), producers);
                mbarrier_init(empty(s), 256);
                s += 1;
            }
        }
        sync_threads();
        let steps = k / HOPPER_BK;

        if role < P {
            set_max_registers::<WS_PRODUCER_REGISTERS, false>();
            let a = intensity.add(channel as usize * times as usize * k as usize);
            let (r, c) = (tid / 8, tid % 8);
            let dst = swizzle_128b(r, 16 * c);
            let rows_a = times.saturating_sub(row0 + r);
            let src_a = a.wrapping_add((row0 + r) as usize * k as usize + 8 * c as usize);
            let row_stride = producers / 8;
            let row_step = row_stride as usize * k as usize;
            let copy = |step: u32, slot: u32| {
                let base = smem + slot * stage_bytes + dst;
                let k0 = (step * HOPPER_BK) as usize;
                unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                    if (j as u32) < 8 / P {
                        let inside = row_stride * (j as u32) < rows_a;
                        // Past the edge: zero-fill, the channel's first row as a harmless address.
                        let src = if inside { src_a.wrapping_add(j * row_step + k0) } else { a };
                        cp_async_16(base + row_stride * j as u32 * 128, src as *const u8, if inside { 16 } else { 0 });
                    }
                });
            };
            // Fused: thread t forms B rows t and t + 128 (beams col0 + ..) from U^N it copied
            // itself, zero past the last beam; U^M is read there from the last beam, as the
            // zero U^N keeps those rows +-0 (J columns never stored).
            let um_g = u_m.wrapping_add(channel as usize * 2 * m as usize * beams as usize);
            let um_rows = [0, 1].map(|h| {
                let beam = (col0 + tid + 128 * h).min(beams.max(1) - 1);
                um_g.wrapping_add(4 * beam as usize)
            });
            let form_b = |step: u32, slot: u32| {
                let rho = step * HOPPER_BK;
                // A divisor the compiler knows is non-zero (no panic path).
                let two_n = (2 * n).max(2);
                let (mut p, mut q) = (rho / two_n, rho % two_n);
                let base = smem + slot * stage_bytes + hopper_b_offset();
                unroll!(c in [0, 1, 2, 3, 4, 5, 6, 7] {
                    // U^M_p of each row: [p / 4][beam][p % 4], the same offset for both.
                    let at = (4 * (p / 4) * beams + p % 4) as usize;
                    unroll!(h in [0, 1] {
                        if (h as u32) < 2 / P {
                        let row = tid + 128 * h as u32;
                        let um = *um_rows[h].add(at);
                        let lo = ld_shared_v4(un_s + super::super::fused_u_offset(q, row, HOPPER_BN));
                        let hi = ld_shared_v4(un_s + super::super::fused_u_offset(q + 4, row, HOPPER_BN));
                        let un = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]].map(f32::from_bits);
                        // The W kernel's product and rounding: U^M_p U^N_q in f32, then f16 (rn).
                        let w = [0, 1, 2, 3].map(|i| f32x2_to_f16x2(um * un[2 * i], um * un[2 * i + 1]));
                        st_shared_v4(base + swizzle_128b(row, 16 * c as u32), w);
                        }
                    });
                    q += 8;
                    if q == two_n {
                        q = 0;
                        p += 1;
                    }
                });
            };
            let un_g = u_n.add(channel as usize * 2 * n as usize * beams as usize);
            unroll!(h in [0, 1] {
                let row = tid + 128 * h as u32;
                let beam = col0 + row;
                let beam_inside = beam < beams;
                let mut x = if (h as u32) < 2 / P { 0 } else { 2 * n };
                while x < 2 * n {
                    let at = if beam_inside { 4 * ((x / 4) as usize * beams as usize + beam as usize) } else { 0 };
                    cp_async_16(
                        un_s + super::super::fused_u_offset(x, row, HOPPER_BN),
                        un_g.add(at) as *const u8,
                        if beam_inside { 16 } else { 0 },
                    );
                    x += 4;
                }
            });
            cp_async_commit();
            unroll!(s in [0, 1, 2, 3] {
                if (s as u32) < D {
                    if (s as u32) < steps {
                        copy(s as u32, s as u32);
                    }
                    cp_async_commit();
                }
            });
            cp_async_wait_pending(D); // the U^N group, committed before the first D A stages
            let (mut step, mut slot, mut next_slot) = (0, 0, D);
            while step < steps {
                let next = step + D;
                if next < steps {
                    if next >= S {
                        // The slot's previous stage, next - S, released by both consumers.
                        mbarrier_wait(empty(next_slot), (next / S - 1) & 1);
                    }
                    copy(next, next_slot);
                }
                cp_async_commit();
                form_b(step, slot);
                // Stage `step`'s copies (D groups ago) have landed.
                cp_async_wait_pending(D); // stage `step` has landed
                fence_proxy_async_shared();
                mbarrier_arrive(full(slot));
                slot = if slot + 1 == S { 0 } else { slot + 1 };
                next_slot = if next_slot + 1 == S { 0 } else { next_slot + 1 };
                step += 1;
            }
            return;
        }

        set_max_registers::<WS_CONSUMER_REGISTERS, true>();
        let ct = tid - producers;
        let (warpgroup, t) = (role - P, tid % 128);
        // As in [`gemm`]: a tile of at most 64 rows is split by beams (block-uniform).
        let half = times - row0 <= 64;
        let (a_off, b_off) = if half {
            (0, hopper_b_offset() + warpgroup * 128 * 2 * HOPPER_BK)
        } else {
            (hopper_a_offset(warpgroup), hopper_b_offset())
        };
        let (a_desc, b_desc) = (smem + a_off, smem + b_off);
        let (wg_row, wg_col) = if half { (0, 128 * warpgroup) } else { (64 * warpgroup, 0) };

        macro_rules! main_loop {
            ($acc:ident, $mma:ident) => {{
                let (mut step, mut slot, mut previous) = (0, 0, 0);
                while step < steps {
                    mbarrier_wait(full(slot), (step / S) & 1);
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
                    wait_group::<1>();
                    if step > 0 {
                        // The previous stage's group is done: its slot may be refilled.
                        mbarrier_arrive(empty(previous));
                    }
                    previous = slot;
                    slot = if slot + 1 == S { 0 } else { slot + 1 };
                    step += 1;
                }
                wait_group::<0>();
                // Both consumers' wgmmas are done (the producer finished writing before the
                // last full barrier): the ring is free for staging J.
                named_barrier(1, 256);
            }};
        }
        let put = |row: u32, col: u32, pair: u32| st_shared_u32(smem + staged_offset(row, col), pair);
        if half {
            let mut acc = [0.0f32; 64];
            main_loop!(acc, mma_m64n128k16_f32_f16);
            crate::for_each_accumulator_128!(|reg: u32| {
                if reg < 64 && reg % 2 == 0 {
                    let (row, col) = crate::wgmma::accumulator_position(t, reg);
                    let pair = f32x2_to_f16x2(acc[(reg & 63) as usize], acc[((reg | 1) & 63) as usize]);
                    put(wg_row + row, wg_col + col, pair);
                }
            });
        } else {
            let mut acc = [0.0f32; 128];
            main_loop!(acc, mma_m64n256k16_f32_f16);
            crate::for_each_accumulator_128!(|reg: u32| {
                if reg % 2 == 0 {
                    let (row, col) = crate::wgmma::accumulator_position(t, reg);
                    let pair = f32x2_to_f16x2(acc[reg as usize], acc[(reg | 1) as usize]);
                    put(wg_row + row, wg_col + col, pair);
                }
            });
        }
        // Whole 16-byte chunks of J rows: a warp stores 512 contiguous bytes of one row.
        named_barrier(1, 256);
        let j = out.add(channel as usize * times as usize * beams as usize);
        let c = ct % 32;
        let col = col0 + 8 * c;
        unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
            let r = ct / 32 + 8 * i as u32;
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

    /// `J = I W` with W formed in shared memory from U (`frb_resample_u`'s layout), on
    /// sm_90a: [`WS_THREADS`] threads, [`ws_fused_smem_bytes`]`(n)` of dynamic shared memory.
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn frb_resample_fused_ws_sm90a(
        intensity: *const u16,
        u_m: *const f32,
        u_n: *const f32,
        out: *mut u16,
        times: u32,
        beams: u32,
        m: u32,
        n: u32,
    ) {
        gemm_ws::<WS_STAGES, WS_LEAD>(intensity, u_m, u_n, out, times, beams, 4 * m * n, (m, n))
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bank::is_conflict_free;
    use crate::wgmma::swizzle_128b;

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
    fn producer_copies_cover_each_stage_once_without_conflicts() {
        check_copies(WS_PRODUCER_THREADS, |rows| rows * 8 / WS_PRODUCER_THREADS, ws_copy_chunk);
    }

    #[test]
    fn warp_specialised_kernels_fit_registers_and_shared_memory() {
        // setmaxnreg: the producer's and consumers' budgets fit the SM's 65 536 registers and
        // the 384 threads' launch cap; counts are multiples of 8 in 24..=256.
        let cap = REGISTER_LIMITS[0].1;
        assert!(REGISTER_LIMITS.iter().all(|&(_, n)| n == cap) && cap * WS_THREADS <= 65536);
        const {
            assert!(
                WS_PRODUCER_THREADS * WS_PRODUCER_REGISTERS
                    + (WS_THREADS - WS_PRODUCER_THREADS) * WS_CONSUMER_REGISTERS
                    <= 65536
            )
        };
        for r in [WS_PRODUCER_REGISTERS, WS_CONSUMER_REGISTERS] {
            assert!(r % 8 == 0 && (24..=256).contains(&r));
        }
        const { assert!(WS_LEAD >= 1 && WS_LEAD + 2 <= WS_STAGES) };
        for n in [8, 12, 16, 20, 24] {
            assert!(ws_fused_smem_bytes(n) <= 227 * 1024, "N = {n}");
        }
        // The producer forms B rows t and t + 128; J's staging fits the ring.
        assert_eq!(2 * WS_PRODUCER_THREADS, HOPPER_BN);
        assert!(HOPPER_BM * HOPPER_BN * 2 <= WS_STAGES * hopper_stage_bytes());
        assert_eq!(
            (WS_STAGES * hopper_stage_bytes() + 4 * HOPPER_BN * 2 * 24) % 8,
            0,
            "mbarriers 8-byte aligned"
        );
        assert_eq!(WS_THREADS - WS_PRODUCER_THREADS, 2 * 128);
    }

    #[test]
    fn fused_b_writes_are_conflict_free() {
        // Producer warp w writes chunk c of rows 32 w + lane, then of rows 128 + 32 w + lane.
        for warp in 0..WS_PRODUCER_THREADS / 32 {
            for h in 0..2 {
                for c in 0..8 {
                    let at: [u32; 32] =
                        core::array::from_fn(|l| swizzle_128b(128 * h + 32 * warp + l as u32, 16 * c));
                    assert!(is_conflict_free(&at, 16), "warp {warp} rows +{h} chunk {c}");
                }
            }
        }
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
