//! The delay beamformer's entry points (sm_80 PTX, run on every supported GPU) and their
//! body: the input ring, the steering coefficients as int8 limb fragments, the MMAs and the
//! dithered, quantised epilogue (module documentation).
use super::*;
use crate::intrinsics::*;
use crate::mma::mma_m16n8k32_s8;
use crate::xorwow::{self, Xorwow, STATE_WORDS};

#[derive(Clone, Copy)]
struct Args {
    input: *const u8,
    weights: *const f32,
    delays: *const f32,
    slots: *const u32,
    output: *mut u8,
    saturated: *mut u32,
    states: *mut u32,
    antennas: u32,
    beams: u32,
    channels: u32,
    first_channel: u32,
    times: u32,
    coefficient_antennas: u32,
    tiles_per_group: u32,
}

/// Shared-memory regions of a block.
#[derive(Clone, Copy)]
struct Regions {
    stages: u32,
    staging: u32,
    units: u32,
    coefficients: u32,
}

/// Issues the copies of the stage of tile `tile`, antennas from `a0`, into ring buffer
/// `ring`, and commits a group (an empty one when `valid` is false, past the block's last
/// stage, so the group count per thread stays uniform). Times past the end are
/// zero-filled; antennas past the end are not copied (their coefficients are zero).
#[inline(always)]
unsafe fn issue_stage(
    v: Variant,
    a: &Args,
    stages: u32,
    channel: u32,
    tile: u32,
    a0: u32,
    ring: u32,
    valid: bool,
) {
    if valid {
        let t0 = tile * v.time_tile();
        let (antenna, byte) = stage_chunk(v, thread_idx_x(), 0);
        let step = THREADS / v.chunks_per_row();
        let row_stride = a.channels as u64 * a.times as u64 * (v.pols * 2) as u64;
        let inside = t0 + byte / (v.pols * 2) < a.times;
        // A chunk past the last time reads nothing (size 0) from the row start.
        let offset = ((a0 + antenna) as u64 * a.channels as u64 + channel as u64)
            * a.times as u64
            * (v.pols * 2) as u64
            + t0 as u64 * (v.pols * 2) as u64
            + if inside { byte as u64 } else { 0 };
        let dst = stages + ring * v.stage_bytes() + antenna * v.row_pitch() + byte;
        let size = if inside { 16 } else { 0 };
        let mut m = 0;
        while m < v.chunks_per_thread() {
            if a0 + antenna + m * step < a.antennas {
                let src = a.input.add((offset + (m * step) as u64 * row_stride) as usize);
                cp_async_16(dst + m * step * v.row_pitch(), src, size);
            }
            m += 1;
        }
    }
    cp_async_commit();
}

/// The next stage after (tile, a0): the next antennas of the tile, or the next tile.
#[inline(always)]
fn advance(v: Variant, antennas: u32, tile: &mut u32, a0: &mut u32) {
    *a0 += v.stage_antennas();
    if *a0 >= antennas {
        *a0 = 0;
        *tile += 1;
    }
}

/// Each slot's scale `s_b = max_a (|Re w| + |Im w|)` over all antennas, stored as the
/// output unit `s_b 2^-22` at `units` (0 for an empty slot).
#[inline(always)]
unsafe fn compute_units<const S: usize>(a: &Args, slots: *const u32, units: u32) {
    // THREADS / S consecutive threads (inside one warp) share a slot.
    let per_slot = THREADS / S as u32;
    let (slot, part) = (thread_idx_x() / per_slot, thread_idx_x() % per_slot);
    let entry = *slots.add(slot as usize);
    let mut scale = 0.0f32;
    if entry != EMPTY_SLOT {
        // Four loads in flight per pass.
        let mut antenna = part;
        while antenna < a.antennas {
            let mut sums = [0.0f32; 4];
            unroll!(j in [0, 1, 2, 3] {
                let at = antenna + j as u32 * per_slot;
                if at < a.antennas {
                    let k = (at * a.beams + (entry & BEAM_MASK)) as usize;
                    sums[j] = (*a.weights.add(2 * k)).abs() + (*a.weights.add(2 * k + 1)).abs();
                }
            });
            scale = scale.max(sums[0].max(sums[1]).max(sums[2].max(sums[3])));
            antenna += 4 * per_slot;
        }
    }
    // Non-negative floats order as their bits.
    let mut bits = scale.to_bits();
    let mut width = per_slot / 2;
    while width > 0 {
        bits = bits.max(shfl_xor(bits, width));
        width /= 2;
    }
    if part == 0 {
        st_shared_u32(
            units + 4 * slot,
            (f32::from_bits(bits) * (1.0 / (1u32 << FIXED_BITS) as f32)).to_bits(),
        );
    }
}

/// Coefficients of antennas `first ..` (a coefficient batch, rounded up to whole k-steps;
/// antennas past the last are zero) for every slot, as limb B fragments at `base`:
/// `[k-step][set][limb]` fragments of [`FRAGMENT_BYTES`].
#[inline(always)]
unsafe fn compute_coefficients(
    v: Variant,
    a: &Args,
    slots: *const u32,
    units: u32,
    base: u32,
    channel: u32,
    first: u32,
) {
    let batch = (a.antennas - first).min(a.coefficient_antennas);
    let padded = batch.next_multiple_of(K_STEP_ANTENNAS);
    // Thread t computes slot t % slots for antennas t / slots + j THREADS / slots.
    let slot = thread_idx_x() % v.slots;
    let entry = *slots.add(slot as usize);
    let unit = f32::from_bits(ld_shared_u32(units + 4 * slot));
    let live = entry != EMPTY_SLOT && unit != 0.0;
    let inverse = if live { 1.0 / unit } else { 0.0 }; // 2^22 / s_b
    let stride = THREADS / v.slots;
    let mut al0 = thread_idx_x() / v.slots;
    while al0 < padded {
        // Four antennas per pass, their loads issued together.
        let mut w = [[0.0f32; 2]; 4];
        let mut d = [0.0f32; 4];
        unroll!(j in [0, 1, 2, 3] {
            let antenna = first + al0 + j as u32 * stride;
            if live && antenna < a.antennas {
                let k = (antenna * a.beams + (entry & BEAM_MASK)) as usize;
                w[j] = [*a.weights.add(2 * k), *a.weights.add(2 * k + 1)];
                d[j] = *a.delays.add(k);
            }
        });
        unroll!(j in [0, 1, 2, 3] {
            let al = al0 + j as u32 * stride;
            if al < padded {
                // Zero weights (past the last antenna, or an empty slot) give zeros.
                let coefficient = steering_coefficient(w[j], d[j], a.first_channel + channel);
                let (re, im) = (fixed_point(coefficient[0], inverse), fixed_point(coefficient[1], inverse));
                // B = [[Re W, Im W], [-Im W, Re W]] over (input re/im) x (output re/im).
                let (step, antenna) = (al / K_STEP_ANTENNAS, al % K_STEP_ANTENNAS);
                let set = slot / 4;
                let entries = [(0, 0, re), (1, 0, -im), (0, 1, im), (1, 1, re)];
                let mut e = 0;
                while e < 4 {
                    let (component, out, value) = entries[e];
                    let byte = b_fragment_byte(k_index(antenna, component), 2 * (slot % 4) + out);
                    let digits = limbs(value);
                    let mut l = 0;
                    while l < LIMBS {
                        let fragment = (step * v.fragment_sets() + set) * LIMBS + l;
                        st_shared_u8(base + fragment * FRAGMENT_BYTES + byte, digits[l as usize] as u8);
                        l += 1;
                    }
                    e += 1;
                }
            }
        });
        al0 += 4 * stride;
    }
}

/// Adds one k-step (16 antennas of the stage at `buffer`, coefficients at `w_at`) to the
/// warp's accumulators `acc[row tile][set][limb]`.
#[inline(always)]
unsafe fn accumulate<const P: usize>(
    v: Variant,
    acc: &mut [[[[i32; 4]; 3]; 2]; 4],
    buffer: u32,
    k_step: u32,
    w_at: u32,
) {
    let (warp, lane) = (thread_idx_x() / 32, lane_id());
    let mut b = [[[0u32; 2]; 3]; 2];
    unroll!(set in [0, 1] {
        unroll!(l in [0, 1, 2] {
            b[set][l] = ld_shared_v2(w_at + ((set * 3 + l) as u32) * FRAGMENT_BYTES + 8 * lane);
        });
    });
    let selectors = [a_selector(v, lane, 0), a_selector(v, lane, 1)];
    unroll!(m in [0, 1, 2, 3] {
        let mut words = [[0u32; 2]; 4];
        unroll!(r in [0, 1, 2, 3] {
            unroll!(second in [0, 1] {
                words[r][second] =
                    ld_shared_u32(buffer + a_word_offset(v, lane, warp, m as u32, k_step, r as u32, second as u32));
            });
        });
        unroll!(set in [0, 1] {
            // Two polarisations: set = polarisation; one: both sets read the same input.
            let selector = if P == 2 { selectors[set] } else { selectors[0] };
            let a_fragment = words.map(|w| prmt(w[0], w[1], selector));
            unroll!(l in [0, 1, 2] {
                acc[m][set][l] = mma_m16n8k32_s8(a_fragment, b[set][l], acc[m][set][l]);
            });
        });
    });
}

/// The kernel body for one polarisation count; see the module comment.
#[inline(always)]
unsafe fn beamform<const P: usize>(a: Args) {
    const S: usize = 8;
    let v = VARIANTS[P - 1];
    let (batch, group, channel) = (block_idx_x(), block_idx_y(), block_idx_z());
    let tid = thread_idx_x();
    let (warp, lane) = (tid / 32, lane_id());
    let tiles = a.times.div_ceil(v.time_tile());
    let tile0 = group * a.tiles_per_group;
    if tile0 >= tiles {
        return; // block-uniform: the plan never launches such a group
    }
    let tile_end = (tile0 + a.tiles_per_group).min(tiles);
    let smem = dynamic_shared();
    let staging = smem + STAGES * v.stage_bytes();
    let units = staging + S as u32 * v.slot_stride();
    let r = Regions { stages: smem, staging, units, coefficients: units + 4 * S as u32 };
    let slots = a.slots.add(batch as usize * S);

    let state_at = if a.states.is_null() {
        core::ptr::null_mut()
    } else {
        let i = state_index(channel, group, batch, tid, grid_dim_y(), grid_dim_x());
        a.states.add(i as usize * STATE_WORDS)
    };
    let mut rng = Xorwow { v: [0; 5], d: 0 };
    if !state_at.is_null() {
        rng = Xorwow::from_words(core::array::from_fn(|k| *state_at.add(k)));
    }

    // Stages run over (tile, first antenna) pairs; the issuer runs STAGES - 1 ahead of
    // the consumer. Counters instead of divisions by the run-time stage count.
    let (mut issue_tile, mut issue_a0, mut issue_ring) = (tile0, 0, 0);
    let mut n = 0;
    while n < STAGES - 1 {
        issue_stage(v, &a, r.stages, channel, issue_tile, issue_a0, issue_ring, issue_tile < tile_end);
        advance(v, a.antennas, &mut issue_tile, &mut issue_a0);
        issue_ring += 1;
        n += 1;
    }
    compute_units::<S>(&a, slots, r.units);

    let mut acc = [[[[0i32; 4]; 3]; 2]; 4];
    // Every slot used and dithered (or none dithered): the epilogue then has no per-slot
    // branch, so the generator's state stays in place instead of being moved into
    // canonical registers at each branch.
    let (mut used, mut dithered) = (0, 0);
    for slot in 0..S {
        let entry = *slots.add(slot);
        used += (entry != EMPTY_SLOT) as u32;
        dithered += (entry != EMPTY_SLOT && entry & DITHER_FLAG != 0) as u32;
    }
    let dither_mode = match (used == S as u32, dithered) {
        (true, d) if d == S as u32 => ALL_DITHERED,
        (true, 0) => NONE_DITHERED,
        _ => MIXED,
    };
    // First antenna of the coefficient batch in shared memory (none yet).
    let mut w_first = u32::MAX;
    let (mut tile, mut a0, mut ring) = (tile0, 0, 0);
    while tile < tile_end {
        // A new batch starts a tile (unless one batch holds every antenna) or follows the
        // last antenna of the previous batch.
        if w_first == u32::MAX || (a0 != w_first && (a0 == 0 || a0 == w_first + a.coefficient_antennas)) {
            // Every thread is done with the previous batch (and the units are written).
            sync_threads();
            compute_coefficients(v, &a, slots, r.units, r.coefficients, channel, a0);
            w_first = a0;
        }
        cp_async_wait_group::<{ STAGES - 2 }>();
        sync_threads(); // this stage and the coefficients are visible; the last buffer is free
        if issue_ring == STAGES {
            issue_ring = 0;
        }
        issue_stage(v, &a, r.stages, channel, issue_tile, issue_a0, issue_ring, issue_tile < tile_end);
        advance(v, a.antennas, &mut issue_tile, &mut issue_a0);
        issue_ring += 1;

        if a0 == 0 {
            acc = [[[[0; 4]; 3]; 2]; 4];
        }
        let buffer = r.stages + ring * v.stage_bytes();
        let first_step = (a0 - w_first) / K_STEP_ANTENNAS;
        let steps = (a.antennas - a0).min(v.stage_antennas()).div_ceil(K_STEP_ANTENNAS);
        let mut step = 0;
        while step < steps {
            let w_at = r.coefficients + (first_step + step) * v.k_step_coefficient_bytes();
            accumulate::<P>(v, &mut acc, buffer, step, w_at);
            step += 1;
        }

        if a0 + v.stage_antennas() >= a.antennas {
            // C fragment: c0 c1 = (time g, slot 4 set + c) re, im; c2 c3 = time g + 8.
            let (g, c) = (lane / 4, lane % 4);
            unroll!(m in [0, 1, 2, 3] {
                unroll!(set in [0, 1] {
                    let slot = 4 * set as u32 + c;
                    let unit = f32::from_bits(ld_shared_u32(r.units + 4 * slot));
                    unroll!(h in [0, 1] {
                        let y = [0, 1].map(|e| {
                            let q = 2 * h + e;
                            let limb_sums = [acc[m][set][0][q], acc[m][set][1][q], acc[m][set][2][q]];
                            combine_limbs(limb_sums, unit).to_bits()
                        });
                        let time = 16 * (M_TILES * warp + m as u32) + g + 8 * h as u32;
                        st_shared_v2(r.staging + staging_offset(v, slot, time), y);
                    });
                });
            });
            sync_threads();
            match dither_mode {
                ALL_DITHERED => {
                    finish_tile::<S, ALL_DITHERED>(v, &a, slots, r.staging, channel, tile, &mut rng)
                }
                NONE_DITHERED => {
                    finish_tile::<S, NONE_DITHERED>(v, &a, slots, r.staging, channel, tile, &mut rng)
                }
                _ => finish_tile::<S, MIXED>(v, &a, slots, r.staging, channel, tile, &mut rng),
            }
        }
        advance(v, a.antennas, &mut tile, &mut a0);
        ring = if ring + 1 == STAGES { 0 } else { ring + 1 };
    }
    cp_async_wait_all();
    if !state_at.is_null() {
        for (w, value) in rng.to_words().into_iter().enumerate() {
            *state_at.add(w) = value;
        }
    }
}

/// Epilogue modes of a block: every slot used and dithered, every slot used and none
/// dithered, anything else.
const ALL_DITHERED: u32 = 0;
const NONE_DITHERED: u32 = 1;
const MIXED: u32 = 2;

/// Dithers, quantises and stores this thread's samples of one tile for every slot (from
/// the staging area), and adds the saturated samples (either component clipped) to the
/// beams' counters.
#[inline(always)]
unsafe fn finish_tile<const S: usize, const MODE: u32>(
    v: Variant,
    a: &Args,
    slots: *const u32,
    staging: u32,
    channel: u32,
    tile: u32,
    rng: &mut Xorwow,
) {
    const TPT: usize = 2;
    let t = first_time(v, tile, thread_idx_x());
    let inside = t < a.times; // all TPT samples or none: TPT divides TIME_GRANULE
    unroll!(slot in [0, 1, 2, 3, 4, 5, 6, 7] {
        if slot < S {
            let entry = *slots.add(slot);
            if MODE != MIXED || entry != EMPTY_SLOT {
                let beam = entry & BEAM_MASK;
                let dithered = match MODE {
                    ALL_DITHERED => true,
                    NONE_DITHERED => false,
                    _ => entry & DITHER_FLAG != 0,
                };
                let mut saturated = 0u32;
                if inside {
                    let y = ld_shared_v4(staging + staging_offset(v, slot as u32, TPT as u32 * thread_idx_x()));
                    let mut packed = 0u32;
                    unroll!(j in [0, 1] {
                        let mut re = f32::from_bits(y[2 * j]);
                        let mut im = f32::from_bits(y[2 * j + 1]);
                        if dithered {
                            // dither(r) is an exact multiple of 2^-32, so one fused
                            // step rounds exactly as `re + dither(r)` does.
                            re = fma_f32(xorwow::dither_units(rng.next_u32()), xorwow::DITHER_UNIT, re);
                            im = fma_f32(xorwow::dither_units(rng.next_u32()), xorwow::DITHER_UNIT, im);
                        }
                        let (qr, sr) = quantise(re);
                        let (qi, si) = quantise(im);
                        saturated += (sr | si) as u32;
                        let pair = (qr as u8 as u32) | ((qi as u8 as u32) << 8);
                        packed |= pair << (16 * j);
                    });
                    let at = ((beam as u64 * a.channels as u64 + channel as u64) * a.times as u64 + t as u64) * 2;
                    *(a.output.add(at as usize) as *mut u32) = packed;
                }
                let count = redux_add_u32(saturated);
                if lane_id() == 0 && count != 0 {
                    red_add_u32(a.saturated.add(beam as usize), count);
                }
            }
        }
    });
}

macro_rules! delay_entries {
    ($(($name:ident, $pols:literal)),* $(,)?) => {
        $(
        /// See the module documentation. Grid: x = beam batch, y = time group (runs of
        /// `tiles_per_group` tiles), z = channel; `THREADS` threads; dynamic shared memory
        /// `Variant::shared_bytes(coefficient_antennas)`. `slots`: `[batch][slots]` entries
        /// (beam | DITHER_FLAG, or EMPTY_SLOT); `states` may be null when no slot is dithered.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            input: *const u8,
            weights: *const f32,
            delays: *const f32,
            slots: *const u32,
            output: *mut u8,
            saturated: *mut u32,
            states: *mut u32,
            antennas: u32,
            beams: u32,
            channels: u32,
            first_channel: u32,
            times: u32,
            coefficient_antennas: u32,
            tiles_per_group: u32,
        ) {
            beamform::<$pols>(Args {
                input,
                weights,
                delays,
                slots,
                output,
                saturated,
                states,
                antennas,
                beams,
                channels,
                first_channel,
                times,
                coefficient_antennas,
                tiles_per_group,
            });
        }
        )*
    };
}

delay_instances!(delay_entries);
