//! The baseband beamformer's pure layout functions, shared by the kernel, the host and the
//! CPU tests: shared-memory stages, the MMA fragments' dish order and loads, the operand
//! forming and combination, quantisation, the output transposes and the work split.
use super::*;

/// Time rows per shared-memory stage for a block of `warps` warps on a device allowing
/// `smem_limit` bytes of shared memory per block: about 16 KiB of E (a power of two in
/// 16..=128, so it divides [`CHUNK`] and is a whole number of 16-row MMA blocks), doubled for
/// blocks of 8 or more warps where it fits (they run one block per SM, and every stage ends
/// in a barrier that drains the tensor pipe, so fewer, longer stages keep it busier). `None`
/// if not even 16 rows fit.
pub const fn stage_rows(dishes: u32, warps: u32, smem_limit: u32) -> Option<u32> {
    let mut rows = 128;
    while rows > 16 && rows * dishes > 16384 {
        rows /= 2;
    }
    if warps >= 8 && rows < 128 && smem_bytes(dishes, warps * BEAMS_PER_WARP, 2 * rows) <= smem_limit {
        return Some(2 * rows);
    }
    while smem_bytes(dishes, warps * BEAMS_PER_WARP, rows) > smem_limit {
        if rows == 16 {
            return None;
        }
        rows /= 2;
    }
    Some(rows)
}

/// Bytes per shared-memory row (one time sample of `dishes` ci4 values): padded to 64 mod
/// 128 so the two rows a quarter-warp reads with one 16-byte load fall in distinct banks.
pub const fn smem_row_bytes(dishes: u32) -> u32 {
    if dishes.is_multiple_of(128) {
        dishes + 64
    } else {
        dishes
    }
}

/// Bytes of one stage of `rows` time rows.
pub const fn stage_bytes(dishes: u32, rows: u32) -> u32 {
    rows * smem_row_bytes(dishes)
}

/// Bytes per beam of the per-beam table in shared memory after the stages: the two
/// [`beam_constants`], the shift, padding (one 16-byte word, read once per 16-time block; kept
/// out of registers so the 512-dish kernel fits 128 registers).
pub const BEAM_TABLE_BYTES: u32 = 16;

/// Bytes per warp of output staging: the quantised bytes of the 8 16-time blocks of a chunk,
/// one 32-bit word per lane and block (`[block][lane]`, so writes are conflict-free), held
/// here instead of in 8 registers until the chunk's transposes.
pub const OUT_STAGING_BYTES: u32 = 8 * 32 * 4;

/// Dynamic shared memory of a block of `beams` beams: stages, beam table, output staging.
pub const fn smem_bytes(dishes: u32, beams: u32, rows: u32) -> u32 {
    STAGES * stage_bytes(dishes, rows) + beams * BEAM_TABLE_BYTES + beams / BEAMS_PER_WARP * OUT_STAGING_BYTES
}

/// The dish (within a 64-dish group) that MMA k-index `k` (0..32) of k-step `step` (0 or 1)
/// stands for. Lane column c = k2 k3 owns dishes `16 c .. 16 c + 16` of the group, so its
/// row fragments of both k-steps are one 16-byte load and its A fragments one 32-byte load.
pub const fn fragment_dish(step: u32, k: u32) -> u32 {
    let c = (k >> 2) & 3;
    16 * c + 8 * step + 4 * (k >> 4) + (k & 3)
}

/// Shared-memory byte offset of lane `lane`'s 16-byte row-fragment load for MMA row `half`
/// (0: rows 0..8, 1: rows 8..16) of the 16-row block starting at `row0`, dish group `group`.
pub const fn e_fragment_offset(dishes: u32, lane: u32, row0: u32, half: u32, group: u32) -> u32 {
    (row0 + 8 * half + lane / 4) * smem_row_bytes(dishes) + DISH_GROUP * group + 16 * (lane % 4)
}

/// Byte offset in A (ci8 `[f][p][beta][d]`, `fp = f * POLS + p`) of lane `lane`'s 32 weight
/// bytes for group `group` of warp `warp`: beam `8 warp + lane / 4`, dishes `64 group + 16
/// (lane % 4) ..+ 16`.
pub const fn weight_offset(beams: u32, dishes: u32, fp: u32, warp: u32, lane: u32, group: u32) -> u64 {
    let beam = BEAMS_PER_WARP * warp + lane / 4;
    ((fp as u64 * beams as u64 + beam as u64) * dishes as u64 + (DISH_GROUP * group + 16 * (lane % 4)) as u64)
        * 2
}

/// The first s8 MMA operand of an E word: each byte `16 im + re + 8` (the real part offset to
/// 0..16 in the low nibble, the imaginary part's two's complement in the high nibble).
pub const fn real_offset_operand(word: u32) -> u32 {
    word ^ 0x0808_0808
}

/// The second s8 MMA operand of an E word: each byte `16 im`.
pub const fn imaginary_operand(word: u32) -> u32 {
    word & 0xf0f0_f0f0
}

/// A beam's constant terms of [`combine`] from its weight sums over dishes: `-8 sum_d A_re`,
/// `-8 sum_d A_im`.
pub const fn beam_constants(sum_re: i32, sum_im: i32) -> (i32, i32) {
    (-8 * sum_re, -8 * sum_im)
}

/// Re and im of one output from the four accumulators (see the module comment):
/// `q1 = A_re . v`, `q2 = A_im . v`, `q3 = A_re . h`, `q4 = A_im . h`, and the beam's
/// [`beam_constants`].
pub const fn combine(q1: i32, q2: i32, q3: i32, q4: i32, (const_re, const_im): (i32, i32)) -> (i32, i32) {
    (q1 - q3 - (q4 >> 4) + const_re, q2 - q4 + (q3 >> 4) + const_im)
}

/// The output rule `saturate(round(x / 2^s), 7)` in 32-bit arithmetic, valid for
/// `|x| < 2^30` (the beamformer's sums are below `2^22`) and `s` in 0..=31. Equals
/// [`crate::packing::shift_round_saturate_i4`] there.
pub const fn quantize(x: i32, s: u32) -> i32 {
    let half = (1u32 << (s & 31)) >> 1;
    crate::packing::saturate_symmetric((x + half as i32) >> (s & 31), 7)
}

/// Where output byte (time `g + 8 h + 16 block`, beam `2 c + e` of the warp) goes before the
/// transposes: register `block` (tau4 tau5 tau6), byte `h + 2 e` (b0 <-> tau3, b1 <-> beta0).
pub const fn output_byte(h: u32, e: u32) -> u32 {
    h + 2 * e
}

/// Lane bit exchanged with register bit `i` by the output's warp transpose `i` (0..3): the
/// time bits tau0 tau1 tau2 held in lane bits t2 t3 t4 trade places with the block bits
/// tau4 tau5 tau6 held in register bits r0 r1 r2.
pub const fn output_transpose_lane_bit(i: u32) -> u32 {
    4 << i
}

/// The local part of the output transpose, after the three warp transposes: from
/// `b0 b1 r0 r1 r2 <-> tau3 beta0 tau0 tau1 tau2` to `tau0 tau1 tau2 tau3 beta0`, i.e. two
/// 4 x 4 byte transposes (8 `prmt` each). `prmt` is the device instruction or its host model
/// `packing::byte_perm`. Output registers 0..4 are then 16 consecutive samples of beam
/// `2 c`, 4..8 of beam `2 c + 1`.
#[inline(always)]
pub fn transpose_output<P: Fn(u32, u32, u32) -> u32>(x: [u32; 8], prmt: P) -> [u32; 8] {
    let mut out = [0u32; 8];
    let mut half = 0;
    while half < 2 {
        let b = 4 * half;
        let t0 = prmt(x[b], x[b + 1], 0x5140);
        let t1 = prmt(x[b], x[b + 1], 0x7362);
        let t2 = prmt(x[b + 2], x[b + 3], 0x5140);
        let t3 = prmt(x[b + 2], x[b + 3], 0x7362);
        out[half] = prmt(t0, t2, 0x5410);
        out[2 + half] = prmt(t0, t2, 0x7632);
        out[4 + half] = prmt(t1, t3, 0x5410);
        out[6 + half] = prmt(t1, t3, 0x7632);
        half += 1;
    }
    out
}

/// Work items (128-sample chunks of one (f, p)) of block `block` of `blocks`: a contiguous
/// run, balanced to within one item.
pub const fn block_items(items: u32, block: u32, blocks: u32) -> (u32, u32) {
    let first = (block as u64 * items as u64 / blocks as u64) as u32;
    let end = ((block as u64 + 1) * items as u64 / blocks as u64) as u32;
    (first, end)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::super::tests::all_dishes;
    use super::*;
    use crate::bank::is_conflict_free;
    use crate::layout::{Location, M16N8K32_S32_C, M16N8K32_S8_A, M16N8K32_S8_B};
    use crate::packing::{byte_perm, shift_round_saturate_i4, unpack_ci4};
    use std::vec::Vec;

    #[test]
    fn stages_tile_the_chunk_and_fit_ampere_shared_memory() {
        for d in all_dishes() {
            assert!(smem_row_bytes(d) % 128 == 64 && smem_row_bytes(d) >= d);
            for warps in 1..=max_warps(d) {
                // sm_86 allows 99 KiB of dynamic shared memory per block, the H200 227 KiB.
                for limit in [99 * 1024, 227 * 1024] {
                    let rows = stage_rows(d, warps, limit).expect("fits");
                    assert!(rows.is_power_of_two() && (16..=CHUNK).contains(&rows), "d {d} rows {rows}");
                    assert!(smem_bytes(d, warps * BEAMS_PER_WARP, rows) <= limit);
                }
            }
        }
        assert_eq!(stage_rows(512, 12, 227 * 1024), Some(64));
        assert_eq!(stage_rows(512, 12, 99 * 1024), Some(32));
        assert_eq!(stage_rows(512, 2, 227 * 1024), Some(32));
        assert_eq!(stage_rows(64, 1, 0), None);
    }

    #[test]
    fn fragment_dishes_are_a_bijection_onto_each_group() {
        let mut seen = [false; 64];
        for step in 0..2 {
            for k in 0..32 {
                let d = fragment_dish(step, k) as usize;
                assert!(!seen[d], "dish {d} twice");
                seen[d] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
    }

    /// The E row fragment a lane loads (two 16-byte loads, words split as in the kernel) holds
    /// exactly the (time, dish) elements the m16n8k32 A-operand table assigns to it, and the
    /// weight words hold the B-operand's (dish, beam) elements, under `fragment_dish`.
    #[test]
    fn loads_deliver_the_mma_register_assignment() {
        let d = 512;
        for lane in 0..32 {
            for group in 0..d / DISH_GROUP {
                for step in 0..2u32 {
                    for reg in 0..4u32 {
                        // Kernel: words = [top[2s], bottom[2s], top[2s+1], bottom[2s+1]].
                        let half = reg & 1;
                        let word = 2 * step + (reg >> 1);
                        let base = e_fragment_offset(d, lane, 0, half, group) + 4 * word;
                        for byte in 0..4 {
                            let at = base + byte;
                            let (row, col) = (at / smem_row_bytes(d), at % smem_row_bytes(d));
                            let (i, k) =
                                M16N8K32_S8_A.coordinates(Location { lane, register: reg, element: byte });
                            assert_eq!(row, i, "lane {lane} reg {reg} byte {byte}");
                            assert_eq!(col, DISH_GROUP * group + fragment_dish(step, k));
                        }
                    }
                    for reg in 0..2u32 {
                        // Kernel: weights[m][2 step + reg], dishes 16 c + 4 (2 step + reg) ..
                        let word = 2 * step + reg;
                        for byte in 0..4 {
                            let dish = 16 * (lane % 4) + 4 * word + byte;
                            let (k, beam) =
                                M16N8K32_S8_B.coordinates(Location { lane, register: reg, element: byte });
                            assert_eq!(beam, lane / 4);
                            assert_eq!(dish, fragment_dish(step, k));
                            let at = weight_offset(96, d, 3, 2, lane, group) as u32 + 2 * (4 * word + byte);
                            let expected = ((3 * 96 + 16 + lane / 4) * d + DISH_GROUP * group + dish) * 2;
                            assert_eq!(at, expected);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn row_fragment_loads_are_bank_conflict_free() {
        for d in all_dishes() {
            for row0 in [0, 16, CHUNK - 16] {
                for half in 0..2 {
                    for group in 0..d / DISH_GROUP {
                        let addresses: [u32; 32] =
                            core::array::from_fn(|lane| e_fragment_offset(d, lane as u32, row0, half, group));
                        assert!(
                            is_conflict_free(&addresses, 16),
                            "d {d} row0 {row0} half {half} group {group}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn operands_and_combination_reproduce_the_complex_product() {
        // Every ci4 value against weights including -128, with per-beam sums over 4 dishes.
        for byte in 0..=255u8 {
            let (er, ei) = unpack_ci4(byte);
            let word = u32::from_le_bytes([byte; 4]);
            let v = real_offset_operand(word).to_le_bytes()[0] as i8 as i32;
            let h = imaginary_operand(word).to_le_bytes()[0] as i8 as i32;
            assert_eq!(v, 16 * ei as i32 + er as i32 + 8);
            assert_eq!(h, 16 * ei as i32);
            for (ar, ai) in [(-128i32, -128i32), (127, -128), (-128, 127), (5, -3), (0, 0)] {
                let n = 4; // dishes with these values
                let constants = beam_constants(n * ar, n * ai);
                let (re, im) = combine(n * ar * v, n * ai * v, n * ar * h, n * ai * h, constants);
                assert_eq!(re, n * (ar * er as i32 - ai * ei as i32));
                assert_eq!(im, n * (ar * ei as i32 + ai * er as i32));
            }
        }
    }

    #[test]
    fn quantize_matches_the_reference_rule() {
        let bound = 1 << 23;
        let xs = [0, 1, -1, 7, -7, 8, -8, 15, -15, 16, -16, 17, -17, bound, -bound, 123_457, -98_765];
        for s in 0..=31 {
            for &x in &xs {
                assert_eq!(quantize(x, s), shift_round_saturate_i4(x, s) as i32, "x {x} s {s}");
            }
            for x in (-300..300).chain((-(1 << 22)..(1 << 22)).step_by(4099)) {
                assert_eq!(quantize(x, s), shift_round_saturate_i4(x, s) as i32, "x {x} s {s}");
            }
        }
    }

    /// Host model of the output path of one warp: bytes placed per 16-time block, three warp
    /// transposes (modelled on `intrinsics::warp_transpose`), the local transpose; each lane
    /// must then hold samples `16 (lane / 4) .. + 16` of beams `2 (lane % 4)` and `+ 1`.
    #[test]
    fn output_transposes_give_each_lane_sixteen_consecutive_samples() {
        // Each (time, beam parity) gets a distinct byte; lanes of different c (lane bits 0, 1)
        // never exchange data, which the lane-bit assertion checks.
        for i in 0..3 {
            assert_eq!(output_transpose_lane_bit(i) & 3, 0);
        }
        {
            let tag = |tau: u32, beam: u32| -> u8 { tau as u8 | (((beam & 1) as u8) << 7) };
            let mut regs = [[0u32; 8]; 32];
            for (lane, r) in regs.iter_mut().enumerate() {
                let (g, c) = (lane as u32 / 4, lane as u32 % 4);
                for block in 0..8u32 {
                    let mut word = 0u32;
                    for h in 0..2 {
                        for e in 0..2 {
                            // MMA C assignment: register 2h + e is (time g + 8h, beam 2c + e).
                            let (tau_in, beam) = M16N8K32_S32_C.coordinates(Location {
                                lane: lane as u32,
                                register: 2 * h + e,
                                element: 0,
                            });
                            assert_eq!((tau_in, beam), (g + 8 * h, 2 * c + e));
                            let byte = tag(tau_in + 16 * block, beam) as u32;
                            word |= byte << (8 * output_byte(h, e));
                        }
                    }
                    r[block as usize] = word;
                }
            }
            for i in 0..3 {
                let bit = 1usize << i;
                let lane_bit = output_transpose_lane_bit(i as u32) as usize;
                let before = regs;
                for (lane, lane_regs) in regs.iter_mut().enumerate() {
                    for r in 0..8 {
                        if r & bit == 0 {
                            let upper = lane & lane_bit != 0;
                            let partner = lane ^ lane_bit;
                            // warp_transpose: the lane keeps r0 (lower) or r1 (upper) and receives
                            // the partner's sent register into the other.
                            if upper {
                                lane_regs[r] = before[partner][r + bit];
                            } else {
                                lane_regs[r + bit] = before[partner][r];
                            }
                        }
                    }
                }
            }
            for (lane, r) in regs.iter().enumerate() {
                let runs = transpose_output(*r, byte_perm);
                let (g, c) = (lane as u32 / 4, lane as u32 % 4);
                for e in 0..2u32 {
                    let bytes: Vec<u8> = runs[4 * e as usize..4 * e as usize + 4]
                        .iter()
                        .flat_map(|w| w.to_le_bytes())
                        .collect();
                    let expected: Vec<u8> = (0..16).map(|t| tag(16 * g + t, 2 * c + e)).collect();
                    assert_eq!(bytes, expected, "lane {lane} beam parity {e}");
                }
            }
        }
    }

    #[test]
    fn work_items_are_split_contiguously_and_evenly() {
        for (items, blocks) in [(1, 1), (7, 3), (8192, 132), (65536, 3696), (5, 8)] {
            let mut next = 0;
            for b in 0..blocks {
                let (first, end) = block_items(items, b, blocks);
                assert_eq!(first, next);
                assert!(end - first <= items.div_ceil(blocks) && end - first >= items / blocks);
                next = end;
            }
            assert_eq!(next, items);
        }
    }
}
