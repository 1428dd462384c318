//! The transposed fused GEMM `J^T = W^T I^T` (`frb_resample_fused_rsp*`, [`RsKernel`]): W^T
//! formed in registers as the RS `wgmma`'s A operand, in its `cp`, TMA and resident forms
//! (the `hopper` module docs give the design).

use super::super::*;
use crate::intrinsics::*;
use crate::wgmma::{
    bulk_commit, bulk_wait, bulk_wait_read, commit_group, descriptor_k_major_128b, fence,
    fence_mbarrier_init, fence_proxy_async_shared, mbarrier_arrive, mbarrier_arrive_expect_tx, mbarrier_init,
    mbarrier_wait, set_max_registers, swizzle_128b, tma_load_3d, tma_store_3d, wait_group,
};

use core::arch::asm;

/// `stmatrix.sync.aligned.m8n8.x4.trans.shared.b16`: register i of lane l holds elements
/// (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1) of matrix i (low half first); lanes
/// 8 i .. 8 i + 7 give the addresses of the 16-byte rows of matrix i's transpose.
#[inline(always)]
unsafe fn stmatrix_x4_trans(address: u32, r: [u32; 4]) {
    asm!("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [{a}], {{{0}, {1}, {2}, {3}}};",
        in(reg32) r[0], in(reg32) r[1], in(reg32) r[2], in(reg32) r[3], a = in(reg32) address,
        options(nostack));
}

/// The 1024-aligned base of the dynamic shared memory, as `dynamic_shared` rounds it, read
/// anew at each use (not `pure`): LLVM then cannot keep one copy in a register across the
/// main loop, which under a register cap spilled it.
#[inline(always)]
fn fresh_smem() -> u32 {
    let base: u32;
    // SAFETY: takes the address of the module-scope extern shared array.
    unsafe { asm!("mov.u32 {0}, radio_kernels_dynamic_smem;", out(reg32) base, options(nomem, nostack)) };
    (base + 1023) & !1023
}

/// As [`stmatrix_x4_trans`] for two matrices (lanes 0..16 give the addresses).
#[inline(always)]
unsafe fn stmatrix_x2_trans(address: u32, r: [u32; 2]) {
    asm!("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [{a}], {{{0}, {1}}};",
        in(reg32) r[0], in(reg32) r[1], a = in(reg32) address, options(nostack));
}

/// The transposed fused GEMM (module comment, [`RsKernel`]): `WG` warpgroups of 64 beams,
/// a tile of `NT` slow samples (`ACC` = NT / 2 accumulators per thread), grid (M, N), a
/// ring of `S` I tiles copied `d = S - WG` ahead. Persistent: a 1-d grid of resident
/// blocks, each taking every `gridDim.x`-th tile (slow-sample tile fastest, then beam tile,
/// then channel): a tile's first copies are issued before the previous tile's epilogue,
/// which goes through the ring's last `WG` slots (`NT x 64 WG` beams x 2 bytes: exactly
/// `WG` stages), so the two overlap. The TMA form's ring is the first `S - WG` slots, on
/// across tiles, and J has the last `WG` to itself; the resident form walks its tiles and
/// fills its ring otherwise (module comment, [`rs_next_tile`]).
///
/// One function of about 600 lines: its stages (TMA producer, U loads, mainloop, epilogue,
/// tile scheduler) share the accumulators and dozens of per-tile values, and the generated
/// code must stay what was measured. Even a one-line wrapper around an unchanged body made
/// LLVM renumber the registers of a kernel (the sm_80 fused GEMM), so splitting this one into
/// `#[inline(always)]` stages is left for a change that re-measures it.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(in crate::frb_beamformer::resample) unsafe fn fused_rs<
    const WG: u32,
    const NT: u32,
    const M: u32,
    const N: u32,
    const S: u32,
    const ACC: usize,
    const TMA: bool,
    const RESIDENT: bool,
>(
    intensity: *const u16,
    u_m: *const f32,
    u_n: *const f32,
    out: *mut u16,
    (times, beams, channels): (u32, u32, u32),
    tensor_map: u64,
    mma: impl Fn(&mut [f32; ACC], [u32; 4], u64),
) {
    const {
        assert!(2 * ACC as u32 == NT && NT.is_multiple_of(8));
        assert!(!TMA || WG == 2, "TMA form: one 64-beam J half per consumer warpgroup, barrier 4 for two");
        assert!(S >= 3 && N.is_multiple_of(4) && N <= 24 && WG >= 2 && WG <= 4);
        assert!(S >= WG + 2 && S - WG <= 7, "the staged J tile is the last WG slots");
        assert!(WG == 2 || M.is_multiple_of(4), "U^M copies: M / 4 per thread");
        assert!(!RESIDENT || (!TMA && WG == 2 && M * N / 16 <= S - WG), "the whole K in the ring");
        assert!(!TMA || rs_tma_lead_fits(S - WG, M * N / 16, RS_TMA_LEAD), "the lead fits the ring");
    };
    let kernel =
        RsKernel { name: "", warpgroups: WG, nt: NT, m: M, n: N, stages: S, tma: TMA, resident: RESIDENT };
    // TMA form: I's ring is the first `S - WG` slots, J's staged halves the last `WG`.
    let ring = kernel.ring_slots();
    let next_slot = |slot: u32| if slot + 1 == ring { 0 } else { slot + 1 };
    let previous_slot = |slot: u32| if slot == 0 { ring - 1 } else { slot - 1 };
    let own_halves = kernel.own_halves();
    // U^M in shared memory (`RsKernel::um_in_smem`) for 3 and 4 warpgroups.
    let um_smem = WG >= 3;
    let threads = 128 * WG;
    let bb = 64 * WG;
    let stage_bytes = NT * 2 * HOPPER_BK;
    let k = 4 * M * N;
    let steps = M * N / 16;
    let (period, quads) = const { rs_period(N) };
    let periods = steps / period;
    let n8 = N / 4;
    // Copies run `S - WG` stages ahead, so that the next tile's first stages leave the
    // last WG slots (J's staged tile) alone.
    let d = S - WG;
    let smem = (dynamic_shared() + 1023) & !1023;
    let staged = smem + (S - WG) * stage_bytes;
    // The tile's U^M, `[p / 4][beam in tile][4]` f32, after the ring.
    let um_s = smem + S * stage_bytes;
    let (tiles_x, tiles_y) = (times.div_ceil(NT), beams.div_ceil(bb));
    let total = tiles_x * tiles_y * channels;
    // Resident form: tiles in beam-tile-fastest order, a block taking every
    // `gridDim.x`-th unit (slow-sample tile, channel) and all of its beam tiles.
    let (first, stride) = if RESIDENT {
        (block_idx_x() * tiles_y, grid_dim_x() * tiles_y)
    } else {
        (block_idx_x(), grid_dim_x())
    };
    let next_tile = |tile: u32| rs_next_tile(tile, stride, if RESIDENT { tiles_y } else { 1 });
    // The tile's first slow sample, first beam and channel. Past the last tile (the
    // consumers' pass that only stores the previous J): the last tile's channel, so that
    // the U loads stay inside the arrays.
    let tile_origin = |tile: u32| {
        let channel = tile.min(total - 1) / (tiles_x * tiles_y);
        if RESIDENT {
            (NT * ((tile / tiles_y) % tiles_x), bb * (tile % tiles_y), channel)
        } else {
            (NT * (tile % tiles_x), bb * ((tile / tiles_x) % tiles_y), channel)
        }
    };
    // TMA form (warp-specialised): warpgroup 0 is the producer, whose thread 0 copies
    // every stage of the block's tiles by one tensor copy into the ring, in order, each
    // once the slot is free; warpgroups 1 ..= WG are the consumers, the `WG` warpgroups of
    // the `cp` form (thread indices from 0 again). `full[slot]` completes when a stage has
    // landed (thread 0's arrival plus the stage's bytes); `empty[slot]` when every consumer
    // warpgroup has released the slot (one arrival each) after waiting for the wgmmas
    // that read it.
    let bars = smem + kernel.barrier_offset();
    let full = |slot: u32| bars + 8 * slot;
    let empty = |slot: u32| bars + 8 * (ring + slot);
    if TMA {
        if thread_idx_x() == 0 {
            for slot in 0..ring {
                mbarrier_init(full(slot), 1);
                mbarrier_init(empty(slot), WG);
            }
            fence_mbarrier_init();
        }
        sync_threads();
        if thread_idx_x() < 128 {
            set_max_registers::<RS_PRODUCER_REGISTERS, false>();
            if thread_idx_x() == 0 {
                // Per slot: filled before, and the parity of the next release to wait for.
                // The ring runs on across tiles (`slot`: the next stage's).
                let (mut filled, mut empty_phase) = (0u32, 0u32);
                let mut tile = first;
                let mut slot = 0u32;
                while tile < total {
                    let (row0, _, channel) = tile_origin(tile);
                    for step in 0..steps {
                        if filled & (1 << slot) != 0 {
                            mbarrier_wait(empty(slot), (empty_phase >> slot) & 1);
                            empty_phase ^= 1 << slot;
                        } else {
                            filled |= 1 << slot;
                        }
                        mbarrier_arrive_expect_tx(full(slot), stage_bytes);
                        tma_load_3d(
                            smem + slot * stage_bytes,
                            tensor_map,
                            full(slot),
                            [step * HOPPER_BK, row0, channel],
                        );
                        slot = next_slot(slot);
                    }
                    tile = next_tile(tile);
                }
            }
            return;
        }
        set_max_registers::<RS_CONSUMER_REGISTERS, true>();
    }
    let tid = if TMA { thread_idx_x() - 128 } else { thread_idx_x() };
    let (warpgroup, t) = (tid / 128, tid % 128);
    let lane = t % 32;
    let c = lane % 4;
    // The warpgroup's own barrier (resident and TMA forms: each stages and stores its J half).
    let wg_sync = || named_barrier(2 + warpgroup, 128);
    // Per slot, the parity of the phase the next wait names (persisting across tiles).
    let mut full_phase = 0u32;
    // A consumer warpgroup's release of `slot`.
    let release = |slot: u32| {
        if t == 0 {
            mbarrier_arrive(empty(slot));
        }
    };
    // This thread's beams within a tile: A rows g and g + 8 of its warp's 16 (lane = 4 g + c).
    let beam_in_tile = 64 * warpgroup + 16 * (t / 32) + lane / 4;
    let (r, cc) = (tid / 8, tid % 8);
    let dst = swizzle_128b(r, 16 * cc);
    let row_stride = threads / 8;
    let row_step = row_stride as usize * k as usize;

    // J of the tile at (row0, col0, channel) from `acc`, staged transposed as J rows (slow
    // samples) of `bb` beams: matrix (j, h) of the accumulators (slow samples 8 j ..,
    // beams 16 w + 8 h ..) per `stmatrix`; then whole 16-byte chunks of J rows, 8
    // consecutive threads reading 8 chunks of one row. `cp` form: callers put a barrier
    // between the last wgmma reading the staging slots and this; TMA and resident forms:
    // the warpgroup's thread 0 has waited for its previous tensor store's reads, then the
    // warpgroup's barrier.
    let warp_beam = 64 * warpgroup + 16 * (t / 32);
    let mi = lane / 8;
    // 8 J values (beams col .. col + 7 of a row, one staged chunk `v`) to `to`: one 16-byte
    // store where rows are whole chunks, else those inside `beams` one by one.
    let store_chunk = |to: *mut u16, col: u32, v: [u32; 4]| {
        if beams.is_multiple_of(8) {
            st_global_v4(to as *mut u32, v);
        } else {
            unroll!(e in [0, 1, 2, 3, 4, 5, 6, 7] {
                if col + (e as u32) < beams {
                    *to.add(e) = (v[e / 2] >> (16 * (e % 2))) as u16;
                }
            });
        }
    };
    let epilogue = |acc: &[f32; ACC], (row0, col0, channel): (u32, u32, u32)| {
        // Capped kernels (WG >= 3): the staging base afresh, so that it is not kept in a
        // register across the main loop (it spilled at 168).
        let staged = if WG >= 3 { fresh_smem() + (S - WG) * stage_bytes } else { staged };
        unroll!(jp in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
            let pack = |i: usize| {
                f32x2_to_f16x2(acc[(8 * jp + 2 * i).min(ACC - 2)], acc[(8 * jp + 2 * i + 1).min(ACC - 1)])
            };
            if 16 * (jp as u32) + 16 <= NT {
                let row = 8 * (2 * jp as u32 + mi / 2) + lane % 8;
                let at = staged + kernel.staged_offset(row, warp_beam + 8 * (mi % 2));
                stmatrix_x4_trans(at, [pack(0), pack(1), pack(2), pack(3)]);
            } else if 16 * (jp as u32) + 8 == NT {
                let row = 8 * (2 * jp as u32) + lane % 8;
                stmatrix_x2_trans(staged + kernel.staged_offset(row, warp_beam + 8 * (mi % 2)), [pack(0), pack(1)]);
            }
        });
        let j = out.add(channel as usize * times as usize * beams as usize);
        if own_halves && beams.is_multiple_of(8) {
            // This warpgroup's half (64 beams, its own slot) by one tensor store, issued
            // by its thread 0, which waits for its reads before the next staging.
            fence_proxy_async_shared();
            wg_sync();
            if t == 0 {
                tma_store_3d(
                    tensor_map + 128,
                    [col0 + 64 * warpgroup, row0, channel],
                    staged + warpgroup * NT * 128,
                );
                bulk_commit();
            }
            return;
        }
        if own_halves {
            // This warpgroup's half (64 beams, its own slot): 8 threads per 128-byte row.
            wg_sync();
            let chunk = t % 8;
            let half_beam = 64 * warpgroup + 8 * chunk;
            let col = col0 + half_beam;
            unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                let r = t / 8 + 16 * i as u32;
                if r < NT && row0 + r < times && col < beams {
                    let v = ld_shared_v4(staged + rs_staged_offset_halves(r, half_beam, NT));
                    store_chunk(j.add((row0 + r) as usize * beams as usize + col as usize), col, v);
                }
            });
            return;
        }
        sync_threads();
        let per_row = bb / 8;
        if WG == 2 {
            // The 2-warpgroup kernels keep the form they were measured fastest in: every
            // step's (row, chunk) unrolled.
            unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                let idx = tid + threads * i as u32;
                if (i as u32) < NT.div_ceil(16) && idx < NT * per_row {
                    let (r, chunk) = (idx / per_row, idx % per_row);
                    let (row, col) = (row0 + r, col0 + 8 * chunk);
                    if row < times && col < beams {
                        let v = ld_shared_v4(staged + kernel.staged_offset(r, 8 * chunk));
                        store_chunk(j.add(row as usize * beams as usize + col as usize), col, v);
                    }
                }
            });
            return;
        }
        // The block's `128 WG` threads cover 16 rows of `8 WG` chunks: a thread keeps its
        // chunk and its row modulo 16 (so its swizzle) and steps 16 rows at a time, one
        // shared and one global address advanced by constants (the unrolled form above,
        // with every step's addresses precomputed, spilled at 168 registers).
        let (r0, chunk) = (tid / per_row, tid % per_row);
        let col = col0 + 8 * chunk;
        let from = staged + rs_staged_offset(r0, 8 * chunk, bb);
        let mut to = j.wrapping_add((row0 + r0) as usize * beams as usize + col as usize);
        let mut r = r0;
        while r < NT {
            if row0 + r < times && col < beams {
                store_chunk(to, col, ld_shared_v4(from + (r - r0) * 2 * bb));
            }
            to = to.wrapping_add(16 * beams as usize);
            r += 16;
        }
    };

    let mut acc = [0.0f32; ACC];
    let mut prev = (0, 0, 0);
    let mut have_prev = false;
    let mut ran = false;
    let mut tile = first;
    // Resident form: each warpgroup's U^M and U^N of its 64 beams, a tile ahead, in two
    // buffers by tile parity (`RsKernel::u_ahead_offset`); `count` tiles done so far.
    let mut count = 0u32;
    let mut ring_slot = 0u32;
    // (A group is committed even past the last tile, so the main loop's wait can always
    // leave exactly the newest one pending.)
    let u_ahead = |tile: u32, buffer: u32| {
        if !RESIDENT {
            return;
        }
        if tile < total {
            let (_, col0, channel) = tile_origin(tile);
            let um_g = u_m.add(channel as usize * (M / 2) as usize * beams as usize * 4);
            let un_g = u_n.add(channel as usize * (N / 2) as usize * beams as usize * 4);
            let base = smem + kernel.u_ahead_offset(warpgroup, buffer);
            unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] {
                if (j as u32) < (M + N) / 4 {
                    // Rows of 64 beams x 16 bytes: the quads of U^M, then those of U^N.
                    let (row, b) = ((t + 128 * j as u32) / 64, t % 64);
                    let beam = col0 + 64 * warpgroup + b;
                    let ok = beam < beams;
                    let from = if row < M / 2 {
                        um_g.wrapping_add(4 * (row * beams + beam) as usize)
                    } else {
                        un_g.wrapping_add(4 * ((row - M / 2) * beams + beam) as usize)
                    };
                    // Past the last beam: zero (the W^T row is 0; its J is not stored).
                    let from = if ok { from } else { um_g };
                    cp_async_16(base + 16 * (row * 64 + b), from as *const u8, if ok { 16 } else { 0 });
                }
            });
        }
        cp_async_commit();
    };
    u_ahead(tile, 0);
    // One call site for the (large) epilogue, so that it is inlined and `acc` stays in
    // registers: each pass stores the previous tile's J, after the next tile's first copies.
    loop {
        let has_tile = tile < total;
        let (row0, col0, channel) = tile_origin(tile);
        let a = intensity.add(channel as usize * times as usize * k as usize);

        // I tile copies: thread `tid` copies chunk `tid % 8` of rows `tid / 8 + (threads / 8) j`.
        let rows_left = times.saturating_sub(row0 + r);
        let src = a.wrapping_add((row0 + r) as usize * k as usize + 8 * cc as usize);
        let copy = |step: u32, slot: u32| {
            let base = smem + slot * stage_bytes + dst;
            let k0 = (step * HOPPER_BK) as usize;
            unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                // Whole warps: NT and the warp's 4 rows are multiples of 4 and 8 rows apart.
                if r + row_stride * (j as u32) < NT {
                    let ok = row_stride * (j as u32) < rows_left;
                    // Past the edge: zero-fill, the channel's first row as a harmless address.
                    let from = if ok { src.wrapping_add(j * row_step + k0) } else { a };
                    cp_async_16(base + row_stride * j as u32 * 128, from as *const u8, if ok { 16 } else { 0 });
                }
            });
        };
        // The tile's U^M (2M x bb f32, `M / 4` 16-byte chunks per thread) into shared memory
        // with stage 0's group; read after the previous tile's last barrier, so free.
        let um_g = u_m.add(channel as usize * (M / 2) as usize * beams as usize * 4);
        if um_smem && has_tile {
            unroll!(j in [0, 1, 2, 3, 4, 5] {
                if (j as u32) < M / 4 {
                    let (quad, b) = (2 * j as u32 + tid / bb, tid % bb);
                    let ok = col0 + b < beams;
                    // Past the last beam: zero (the W^T row is 0; its J is not stored).
                    let from = if ok { um_g.add(4 * (quad * beams + col0 + b) as usize) } else { um_g };
                    // (The base afresh: kept across the main loop, it spilled at 168.)
                    let to = fresh_smem() + S * stage_bytes + 16 * (quad * bb + b);
                    cp_async_16(to, from as *const u8, if ok { 16 } else { 0 });
                }
            });
        }
        // The first stages into slots 0 .. S - WG - 1, free once every warpgroup waited
        // for the previous tile's last group (the barrier that ended its main loop). (The
        // TMA form's producer copies every stage.) Resident form: the whole K at a unit's
        // first beam tile, once both warpgroups are done with the previous unit's I.
        let fresh = !RESIDENT || tile % tiles_y == 0;
        if RESIDENT && has_tile && fresh {
            if have_prev {
                sync_threads();
            }
            unroll!(s in [0, 1, 2, 3, 4, 5, 6, 7] {
                if (s as u32) < steps {
                    copy(s as u32, s as u32);
                }
            });
            cp_async_commit();
        }
        if RESIDENT && has_tile {
            // The next tile's U (its buffer's last reader, this warpgroup's main loop of
            // the previous tile, ended at the warpgroup barrier).
            u_ahead(next_tile(tile), (count + 1) % 2);
        } else if has_tile && !TMA && !RESIDENT {
            unroll!(s in [0, 1, 2, 3, 4, 5, 6, 7] {
                if (s as u32) < d {
                    if (s as u32) < steps {
                        copy(s as u32, s as u32);
                    }
                    cp_async_commit();
                }
            });
        }

        // U of this tile's beams (device memory) before the previous tile's epilogue, so
        // that their latency overlaps it.
        let first_beam = col0 + beam_in_tile;
        let beam = [first_beam, first_beam + 8];
        let inside = beam.map(|b| has_tile && b < beams);
        // Past the last beam: the last beam's U^M (a valid address; U^N is zero there, so
        // the row of W^T is +-0 and its J is never stored).
        let clamped = beam.map(|b| b.min(beams - 1));
        // U^N_{8 j + 2 c + e} of both beams, for the whole tile (`rs_un_index`).
        let un_g = u_n.add(channel as usize * (N / 2) as usize * beams as usize * 4);
        let mut un = [0.0f32; 24];
        unroll!(j in [0, 1, 2, 3, 4, 5] {
            if !RESIDENT && (j as u32) < n8 {
                unroll!(h in [0, 1] {
                    let at = 4 * ((2 * j as u32 + c / 2) * beams + clamped[h]) + 2 * (c % 2);
                    let v = ld_global_nc_v2(un_g.add(at as usize) as *const u32);
                    let i = rs_un_index(j as u32, h as u32, 0) as usize;
                    un[i] = if inside[h] { f32::from_bits(v[0]) } else { 0.0 };
                    un[i + 1] = if inside[h] { f32::from_bits(v[1]) } else { 0.0 };
                });
            }
        });
        // U^M of both beams for the `quads` quads of p of a period: `[quad][h][p % 4]`
        // (device memory, mostly L1/L2 hits: a tile's U^M is 2M x 128 x 4 bytes). With
        // U^M in shared memory, none.
        let load_um = |period_index: u32| {
            let mut um = [0.0f32; 16];
            unroll!(x in [0, 1] {
                if !um_smem && !RESIDENT && (x as u32) < quads {
                    unroll!(h in [0, 1] {
                        let quad = period_index * quads + x as u32;
                        let v = ld_global_nc_v4(um_g.add(4 * (quad * beams + clamped[h]) as usize) as *const u32);
                        unroll!(i in [0, 1, 2, 3] {
                            um[(2 * x + h) * 4 + i] = f32::from_bits(v[i]);
                        });
                    });
                }
            });
            um
        };
        let mut um = load_um(0);

        if have_prev {
            epilogue(&acc, prev);
        }
        if !has_tile {
            break;
        }
        if um_smem {
            // U^M (stage 0's group) has landed and is visible to the block.
            cp_async_wait_pending(d - 1);
            sync_threads();
        }
        // Resident form: the tile's U (and at a unit's first tile its I) has landed; only
        // the next tile's U may still be in flight.
        let u_base = smem + kernel.u_ahead_offset(warpgroup, count % 2);
        if RESIDENT {
            cp_async_wait_pending(1);
            if fresh {
                fence_proxy_async_shared();
                sync_threads();
            } else {
                wg_sync();
            }
            let beam_in_wg = 16 * (t / 32) + lane / 4;
            unroll!(j in [0, 1, 2, 3, 4, 5] {
                if (j as u32) < n8 {
                    unroll!(h in [0, 1] {
                        let row = M / 2 + 2 * j as u32 + c / 2;
                        let v = ld_shared_v2(u_base + 16 * (row * 64 + beam_in_wg + 8 * h as u32) + 8 * (c % 2));
                        let i = rs_un_index(j as u32, h as u32, 0) as usize;
                        un[i] = f32::from_bits(v[0]);
                        un[i + 1] = f32::from_bits(v[1]);
                    });
                }
            });
        }

        // The A fragment of k16 step `u` of a period: chunks 2u (registers 0, 1) and 2u + 1
        // (2, 3), beams g (0, 2) and g + 8 (1, 3); U^M_p U^N_q in f32, then f16 (rn): the
        // W kernel's arithmetic, so W^T is the W path's W bit for bit.
        // With U^M in shared memory (period `pi`), each beam's U^M_p is loaded once per p,
        // at the chunk that starts it (q = 0), into `cur`: two LDS.32 per p, 8 distinct
        // 16-byte chunks per warp (conflict-free, `rs_um_offset`).
        let (um_beam, um_stride) = if RESIDENT {
            (u_base + rs_um_offset(0, 16 * (t / 32) + lane / 4, 64), 64)
        } else {
            (um_s + rs_um_offset(0, beam_in_tile, bb), bb)
        };
        let form = |u: u32, um: &[f32; 16], pi: u32, cur: &mut [f32; 2]| {
            let mut r = [0u32; 4];
            unroll!(half in [0, 1] {
                let chunk = 2 * u + half as u32;
                let (p, q) = rs_chunk_pq(chunk, N);
                unroll!(h in [0, 1] {
                    let x = if um_smem || RESIDENT {
                        if q == 0 {
                            let at = um_beam + rs_um_offset(4 * quads * pi + p, 8 * h as u32, um_stride);
                            cur[h] = f32::from_bits(ld_shared_u32(at));
                        }
                        cur[h]
                    } else {
                        um[((2 * (p / 4) + h as u32) * 4 + p % 4) as usize]
                    };
                    let i = rs_un_index(q / 8, h as u32, 0) as usize;
                    r[2 * half + h] = f32x2_to_f16x2(x * un[i], x * un[i + 1]);
                });
            });
            r
        };

        if TMA && warpgroup == 1 {
            // Warpgroup 1 starts each tile's main loop once warpgroup 0 has issued stage
            // `RS_TMA_LEAD`'s first wgmma, so that either's epilogue runs beside the
            // other's wgmmas.
            named_barrier(4, 256);
        }
        if RESIDENT && (warpgroup == 1 || ran) {
            // Our turn at the tensor cores: the other warpgroup has issued its main loop.
            named_barrier(if warpgroup == 0 { 5 } else { 4 }, 256);
        }
        acc = [0.0f32; ACC];
        let mut cur = [0.0f32; 2];
        let mut frag = [form(0, &um, 0, &mut cur), [0u32; 4]];
        let mut slot = if TMA { ring_slot } else { 0 };
        let mut stage = 0;
        let mut pi = 0;
        // Resident form: a warpgroup whose 64 beams all lie past the last skips its
        // wgmmas (pathfinder rect.'s 960 = 7.5 x 128); its J is not stored.
        let idle = RESIDENT && col0 + 64 * warpgroup >= beams;
        while pi < periods && !idle {
            // The next period's U^M (the last period reloads its own), a period ahead.
            let pn = if pi + 1 < periods { pi + 1 } else { pi };
            let um_next = load_um(pn);
            unroll!(u in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19] {
                if (u as u32) < 4 * period {
                    let kk = u as u32 % 4;
                    if kk == 0 && TMA {
                        mbarrier_wait(full(slot), (full_phase >> slot) & 1);
                        full_phase ^= 1 << slot;
                    } else if kk == 0 && !RESIDENT {
                        cp_async_wait_pending(d - 1); // stage `stage` has landed
                        fence_proxy_async_shared();
                        // Also: the previous tile's staged J has been read out.
                        sync_threads();
                    }
                    fence();
                    mma(&mut acc, frag[u % 2], descriptor_k_major_128b(smem + slot * stage_bytes + 32 * kk));
                    commit_group();
                    if TMA && warpgroup == 0 && kk == 0 && stage == RS_TMA_LEAD {
                        named_barrier_arrive(4, 256);
                    }
                    let mut form_next = |cur: &mut [f32; 2]| {
                        if (u as u32) + 1 < 4 * period {
                            form(u as u32 + 1, &um, pi, cur)
                        } else {
                            form(0, &um_next, pn, cur)
                        }
                    };
                    // Resident form: the next step's A into fresh registers while this
                    // step's and the previous step's wgmmas run (only one warpgroup issues
                    // at a time when the two take turns).
                    let early = if RESIDENT { form_next(&mut cur) } else { [0; 4] };
                    // The group of step u - 1 is done: its A registers are free.
                    wait_group::<1>();
                    if kk == 0 && TMA {
                        // Stage - 1's groups are done: release its slot (the tile's last
                        // stage is released after the loop).
                        if stage >= 1 {
                            release(previous_slot(slot));
                        }
                    } else if kk == 0 && !RESIDENT {
                        // Every warpgroup waited for stage - WG's groups before the
                        // barrier above, so its slot takes stage + d (d = S - WG).
                        let next = stage + d;
                        let next_slot = if slot + d >= S { slot + d - S } else { slot + d };
                        if next < steps {
                            copy(next, next_slot);
                        }
                        cp_async_commit();
                    }
                    frag[(u + 1) % 2] = if RESIDENT { early } else { form_next(&mut cur) };
                    if kk == 3 {
                        slot = next_slot(slot);
                        stage += 1;
                    }
                }
            });
            um = um_next;
            pi += 1;
        }
        if RESIDENT {
            named_barrier_arrive(if warpgroup == 0 { 4 } else { 5 }, 256);
        }
        ran = true;
        wait_group::<0>();
        if TMA {
            // The tile's last stage; the next tile goes on in the ring from the next slot.
            release(previous_slot(slot));
            ring_slot = slot;
        }
        // `cp` form: the ring is free (for staging J, or the next tile's first copies) once
        // every warpgroup's wgmmas are done. Resident and TMA forms: this warpgroup's J
        // slot is free once the previous tile's tensor store has read it.
        if own_halves {
            if t == 0 {
                // The previous tile's tensor store has read this warpgroup's J half.
                bulk_wait_read();
            }
            wg_sync();
        } else {
            sync_threads();
        }
        prev = (row0, col0, channel);
        have_prev = true;
        count += 1;
        tile = next_tile(tile);
    }
    if RESIDENT && warpgroup == 0 && ran {
        // The other warpgroup's last turn.
        named_barrier(5, 256);
    }
    if own_halves && t == 0 {
        bulk_wait();
    }
    if !TMA {
        cp_async_wait_all();
    }
}
