//! The delay beamformer's layouts, shared by the kernel, the host and the CPU tests: the
//! variants' stages, coefficient fragments and output staging, the MMA k order, the
//! fixed-point limbs, and the time and dither-state indices.
use super::*;

impl Variant {
    /// Time samples of one tile (a block's threads side by side; 4 warps of [`M_TILES`]).
    pub const fn time_tile(self) -> u32 {
        THREADS * self.times_per_thread
    }
    /// Bytes of one antenna's row of a stage (one tile of samples), before padding.
    pub const fn row_bytes(self) -> u32 {
        self.time_tile() * self.pols * 2
    }
    /// Shared-memory bytes from one antenna's row to the next.
    pub const fn row_pitch(self) -> u32 {
        self.row_bytes() + ROW_PAD
    }
    /// Antennas per stage (a whole number of k-steps).
    pub const fn stage_antennas(self) -> u32 {
        STAGE_BYTES / self.row_bytes()
    }
    /// Shared-memory bytes of one stage.
    pub const fn stage_bytes(self) -> u32 {
        self.stage_antennas() * self.row_pitch()
    }
    /// Beam slots per input polarisation: 8 for one polarisation, 4 for two (slots
    /// `p * slots_per_pol ..` read polarisation p).
    pub const fn slots_per_pol(self) -> u32 {
        self.slots / self.pols
    }
    /// The input polarisation slot `slot` reads.
    pub const fn slot_pol(self, slot: u32) -> u32 {
        slot / self.slots_per_pol()
    }
    /// B fragment sets per k-step and limb: one per 4 slots (n = 8 = 4 beams x re/im).
    pub const fn fragment_sets(self) -> u32 {
        self.slots / 4
    }
    /// Shared-memory bytes of one k-step's coefficients: every set and limb.
    pub const fn k_step_coefficient_bytes(self) -> u32 {
        self.fragment_sets() * LIMBS * FRAGMENT_BYTES
    }
    /// Shared-memory bytes of coefficients per antenna.
    pub const fn coefficient_bytes(self) -> u32 {
        self.k_step_coefficient_bytes() / K_STEP_ANTENNAS
    }
    /// Most antennas one coefficient batch holds (a multiple of the stage's antennas).
    pub const fn max_coefficient_antennas(self) -> u32 {
        let fit = MAX_COEFFICIENT_BYTES / self.coefficient_bytes();
        fit / self.stage_antennas() * self.stage_antennas()
    }
    /// Bytes from one slot's staged outputs to the next: `time_tile` (re, im) f32 pairs,
    /// padded by 32 so the 8-byte fragment writes are conflict-free ([`staging_offset`]).
    pub const fn slot_stride(self) -> u32 {
        self.time_tile() * 8 + 32
    }
    /// Dynamic shared memory of a launch with `coefficient_antennas` per batch: the stage
    /// ring, the output staging, the per-slot output units, the coefficients.
    pub const fn shared_bytes(self, coefficient_antennas: u32) -> u32 {
        STAGES * self.stage_bytes()
            + self.slots * self.slot_stride()
            + 4 * self.slots
            + coefficient_antennas * self.coefficient_bytes()
    }
    /// 16-byte chunks of a stage each thread copies.
    pub const fn chunks_per_thread(self) -> u32 {
        STAGE_BYTES / 16 / THREADS
    }
    /// 16-byte chunks of one antenna row (a power of two dividing `THREADS`), so thread
    /// `thread`'s chunk m of a stage is antenna `thread / per_row + m * THREADS / per_row`,
    /// byte `16 (thread % per_row)`: an affine walk the kernel issues with one add per chunk.
    pub const fn chunks_per_row(self) -> u32 {
        self.row_bytes() / 16
    }
}

/// The input sample that MMA k-index `k` (0..32) of a k-step stands for: (antenna within the
/// k-step, component 0 = re, 1 = im). A lane's A register holds k = 4 c .. 4 c + 4 (c = lane
/// % 4, plus 16 for registers 2 and 3): re and im of antennas `2 c` and `2 c + 1` (plus 8),
/// i.e. the same polarisation's bytes of two input words.
pub const fn k_input(k: u32) -> (u32, u32) {
    (2 * ((k >> 2) & 3) + ((k >> 1) & 1) + 8 * (k >> 4), k & 1)
}

/// Inverse of [`k_input`].
pub const fn k_index(antenna: u32, component: u32) -> u32 {
    component | ((antenna & 1) << 1) | (((antenna >> 1) & 3) << 2) | ((antenna >> 3) << 4)
}

/// Byte of B element (k, n) in its shared-memory fragment: the m16n8k32 B assignment
/// `b0 b1 <-> k0 k1, r0 <-> k4, t0 t1 t2 t3 t4 <-> k2 k3 n0 n1 n2`, stored `[lane][register]`,
/// so each lane loads its two registers with one 8-byte load.
pub const fn b_fragment_byte(k: u32, n: u32) -> u32 {
    let lane = ((k >> 2) & 3) | (n << 2);
    8 * lane + 4 * (k >> 4) + (k & 3)
}

/// Stage offset of the input word that supplies A register `register` (0..4) of lane `lane`
/// in warp `warp`, row tile `m_tile`, k-step `k_step` of the stage: `second` picks the
/// second antenna of the register's pair. Two polarisations: the word holds one time's
/// `re0 im0 re1 im1`; one polarisation: two times' `re im re im`.
pub const fn a_word_offset(
    v: Variant,
    lane: u32,
    warp: u32,
    m_tile: u32,
    k_step: u32,
    register: u32,
    second: u32,
) -> u32 {
    let time = 16 * (M_TILES * warp + m_tile) + lane / 4 + 8 * (register & 1);
    let antenna = K_STEP_ANTENNAS * k_step + 2 * (lane % 4) + 8 * (register >> 1) + second;
    antenna * v.row_pitch() + (time * v.pols * 2) / 4 * 4
}

/// The `prmt` selector that builds an A register from its two words (first antenna's in the
/// low operand): the bytes of polarisation `pol` (two polarisations), or of the lane's time
/// (one polarisation, where the word holds an even and an odd time).
pub const fn a_selector(v: Variant, lane: u32, pol: u32) -> u32 {
    let upper = if v.pols == 2 { pol } else { (lane / 4) & 1 };
    if upper == 1 {
        0x7632
    } else {
        0x5410
    }
}

/// Byte offset in the staging area of slot `slot`, tile time `time` (8 bytes: re, im f32).
pub const fn staging_offset(v: Variant, slot: u32, time: u32) -> u32 {
    slot * v.slot_stride() + 8 * time
}

/// `rint(value * inverse_scale)` as an integer, clamped to `+-(2^22 + 2^16)` (only reached
/// by values above their scale, i.e. non-finite weights), so its [`limbs`] fit int8. NaN
/// gives 0 (as `cvt.rni.s32.f32`).
#[inline(always)]
pub fn fixed_point(value: f32, inverse_scale: f32) -> i32 {
    const LIMIT: i32 = (1 << FIXED_BITS) + (1 << 16);
    let x = value * inverse_scale;
    #[cfg(target_arch = "nvptx64")]
    let r = crate::intrinsics::cvt_rni_s32_f32(x);
    #[cfg(not(target_arch = "nvptx64"))]
    let r = rint_f32(x) as i32; // saturating cast, NaN to 0
    r.clamp(-LIMIT, LIMIT)
}

/// Balanced base-256 digits `[l0, l1, l2]` of `x` with `x = 2^16 l0 + 2^8 l1 + l2` and
/// `l1, l2` in [-128, 127]; for `|x| <= 2^22 + 2^16`, `|l0| <= 65`.
pub const fn limbs(x: i32) -> [i8; 3] {
    let l2 = x as i8;
    let y = (x - l2 as i32) >> 8;
    let l1 = y as i8;
    [((y - l1 as i32) >> 8) as i8, l1, l2]
}

/// `y = (2^16 acc0 + 2^8 acc1 + acc2) * unit`: the limb sums (exact in i64), rounded to f32,
/// times the slot's unit `s_b 2^-22`.
#[inline(always)]
pub fn combine_limbs(acc: [i32; 3], unit: f32) -> f32 {
    let exact = ((acc[0] as i64) << 16) + ((acc[1] as i64) << 8) + acc[2] as i64;
    exact as f32 * unit
}

/// Which 16-byte chunk of a stage copy `m` of thread `thread` moves: (antenna within the
/// stage, byte within the antenna's row). Consecutive threads take consecutive chunks, so
/// the chunk lands at byte `16 (thread + m THREADS)` of the stage.
pub const fn stage_chunk(variant: Variant, thread: u32, m: u32) -> (u32, u32) {
    let per_row = variant.chunks_per_row();
    (thread / per_row + m * (THREADS / per_row), (thread % per_row) * 16)
}

/// First time sample of thread `thread` in tile `tile`.
pub const fn first_time(variant: Variant, tile: u32, thread: u32) -> u32 {
    tile * variant.time_tile() + thread * variant.times_per_thread
}

/// Index of the dither state of thread `thread` of block (batch, group, channel) in a launch
/// of `groups` time groups and `batches` beam batches; its curand subsequence is the dither
/// state's first subsequence plus this index.
pub const fn state_index(
    channel: u32,
    group: u32,
    batch: u32,
    thread: u32,
    groups: u32,
    batches: u32,
) -> u64 {
    ((channel as u64 * groups as u64 + group as u64) * batches as u64 + batch as u64) * THREADS as u64
        + thread as u64
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::layout::{Location, M16N8K32_S32_C, M16N8K32_S8_A, M16N8K32_S8_B};
    use std::vec::Vec;

    #[test]
    fn variants_fit_their_resources() {
        const { assert!(STAGE_BYTES.is_multiple_of(16 * THREADS)) };
        for v in VARIANTS {
            assert_eq!(v.time_tile(), 4 * 16 * M_TILES, "4 warps of M_TILES row tiles");
            assert!(THREADS.is_multiple_of(v.chunks_per_row()) && v.chunks_per_row().is_power_of_two());
            assert!(v.slots == 8 && v.slots % v.pols == 0 && v.fragment_sets() == 2);
            assert!(TIME_GRANULE.is_multiple_of(v.times_per_thread));
            assert!(v.stage_antennas().is_multiple_of(K_STEP_ANTENNAS));
            assert!(STAGE_BYTES.is_multiple_of(v.row_bytes()));
            assert!(v.max_coefficient_antennas() >= v.stage_antennas());
            assert!(v.row_pitch().is_multiple_of(16) && v.slot_stride().is_multiple_of(16));
            // Every region starts 16-byte aligned; the largest block fits sm_86's 99 KiB.
            assert!(v.stage_bytes().is_multiple_of(16));
            assert!(v.shared_bytes(v.max_coefficient_antennas()) <= 99 * 1024, "{v:?}");
            // A 16-byte chunk is wholly inside or wholly past the last time.
            assert!(TIME_GRANULE.is_multiple_of(16 / (2 * v.pols)));
        }
        let names: std::collections::BTreeSet<_> = VARIANTS.iter().map(|v| v.spec().name).collect();
        assert_eq!(names.len(), VARIANTS.len());
    }

    #[test]
    fn stage_chunks_cover_each_stage_byte_once() {
        for v in VARIANTS {
            let mut hits = std::vec![0u8; v.stage_bytes() as usize];
            for thread in 0..THREADS {
                for m in 0..v.chunks_per_thread() {
                    let (al, byte) = stage_chunk(v, thread, m);
                    assert!(al < v.stage_antennas() && byte + 16 <= v.row_bytes());
                    // The kernel's affine walk: antenna advances by THREADS / per_row per copy.
                    assert_eq!(al, stage_chunk(v, thread, 0).0 + m * (THREADS / v.chunks_per_row()));
                    for b in 0..16 {
                        hits[(al * v.row_pitch() + byte + b) as usize] += 1;
                    }
                }
            }
            // Every row byte once, no padding byte.
            for (at, &h) in hits.iter().enumerate() {
                let inside = (at as u32 % v.row_pitch()) < v.row_bytes();
                assert_eq!(h, inside as u8, "{v:?} byte {at}");
            }
        }
    }

    #[test]
    fn k_indices_are_a_bijection_onto_a_k_steps_samples() {
        let mut seen = std::collections::BTreeSet::new();
        for k in 0..32 {
            let (antenna, component) = k_input(k);
            assert!(antenna < K_STEP_ANTENNAS && component < 2);
            assert_eq!(k_index(antenna, component), k);
            assert!(seen.insert((antenna, component)));
        }
    }

    #[test]
    fn a_fragments_hold_the_m16n8k32_assignment() {
        // Register r of lane t is prmt(word(second = 0), word(second = 1), selector): bytes
        // 0, 1 of each word (selector 0x5410) or bytes 2, 3 (0x7632).
        for v in VARIANTS {
            for set in 0..2 {
                for warp in 0..4 {
                    for lane in 0..32 {
                        for m in 0..M_TILES {
                            for k_step in 0..v.stage_antennas() / K_STEP_ANTENNAS {
                                for register in 0..4 {
                                    let selector = a_selector(v, lane, set);
                                    for byte in 0..4 {
                                        let second = byte / 2;
                                        let in_word = byte % 2 + if selector == 0x7632 { 2 } else { 0 };
                                        let at = a_word_offset(v, lane, warp, m, k_step, register, second)
                                            + in_word;
                                        let (antenna, rest) = (at / v.row_pitch(), at % v.row_pitch());
                                        let (time, pol, component) =
                                            (rest / (2 * v.pols), rest / 2 % v.pols, rest % 2);
                                        let (i, k) = M16N8K32_S8_A.coordinates(Location {
                                            lane,
                                            register,
                                            element: byte,
                                        });
                                        assert_eq!(time, 16 * (M_TILES * warp + m) + i);
                                        let (ka, kc) = k_input(k);
                                        assert_eq!((antenna, component), (K_STEP_ANTENNAS * k_step + ka, kc));
                                        // Two polarisations: set = polarisation; one: pol 0.
                                        assert_eq!(pol, if v.pols == 2 { set } else { 0 });
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn b_fragment_bytes_hold_the_m16n8k32_assignment() {
        let mut seen = std::collections::BTreeSet::new();
        for lane in 0..32 {
            for register in 0..2 {
                for byte in 0..4 {
                    let (k, n) = M16N8K32_S8_B.coordinates(Location { lane, register, element: byte });
                    // The kernel loads 8 bytes at 8 lane: register r is bytes 4 r ..
                    assert_eq!(b_fragment_byte(k, n), 8 * lane + 4 * register + byte);
                    assert!(seen.insert(b_fragment_byte(k, n)));
                }
            }
        }
        assert_eq!(seen.len() as u32, FRAGMENT_BYTES);
        // The C fragment's c0 c1 (c2 c3) are re and im of output column pair c = lane % 4
        // (the kernel's slot 4 set + c), times g and g + 8.
        for lane in 0..32 {
            for register in 0..4 {
                let (i, n) = M16N8K32_S32_C.coordinates(Location { lane, register, element: 0 });
                assert_eq!((i, n), (lane / 4 + 8 * (register / 2), 2 * (lane % 4) + register % 2));
            }
        }
    }

    #[test]
    fn shared_memory_accesses_are_bank_conflict_free() {
        use crate::bank::is_conflict_free;
        for v in VARIANTS {
            for warp in 0..4 {
                for m in 0..M_TILES {
                    for k_step in 0..v.stage_antennas() / K_STEP_ANTENNAS {
                        for register in 0..4 {
                            for second in 0..2 {
                                // One polarisation: lanes g = 2u, 2u + 1 read one word (a broadcast).
                                let at: [u32; 32] = core::array::from_fn(|lane| {
                                    a_word_offset(v, lane as u32, warp, m, k_step, register, second)
                                });
                                assert!(is_conflict_free(&at, 4), "{v:?} A load");
                            }
                        }
                    }
                    for set in 0..2 {
                        for h in 0..2 {
                            let at: [u32; 32] = core::array::from_fn(|lane| {
                                let time = 16 * (M_TILES * warp + m) + lane as u32 / 4 + 8 * h;
                                staging_offset(v, 4 * set + lane as u32 % 4, time)
                            });
                            assert!(is_conflict_free(&at, 8), "{v:?} staging write");
                        }
                    }
                }
            }
            for slot in 0..v.slots {
                for warp in 0..4 {
                    let at: [u32; 32] = core::array::from_fn(|lane| {
                        staging_offset(v, slot, v.times_per_thread * (32 * warp + lane as u32))
                    });
                    assert!(is_conflict_free(&at, 16), "{v:?} staging read");
                }
            }
            let b: [u32; 32] = core::array::from_fn(|lane| 8 * lane as u32);
            assert!(is_conflict_free(&b, 8));
        }
    }

    #[test]
    fn limbs_and_fixed_point_are_exact() {
        for x in [0, 1, -1, 127, 128, -128, -129, 255, 256, 1 << 22, -(1 << 22), (1 << 22) + (1 << 16)] {
            let [l0, l1, l2] = limbs(x);
            assert_eq!(((l0 as i32) << 16) + ((l1 as i32) << 8) + l2 as i32, x);
        }
        for x in [(1 << 22) + (1 << 16), -(1 << 22) - (1 << 16)] {
            assert!(limbs(x)[0].unsigned_abs() <= 65);
        }
        assert_eq!(fixed_point(1.0, (1 << FIXED_BITS) as f32), 1 << FIXED_BITS);
        assert_eq!(fixed_point(-0.5, (1 << FIXED_BITS) as f32), -(1 << (FIXED_BITS - 1)));
        assert_eq!(fixed_point(f32::NAN, 1.0), 0);
        assert_eq!(fixed_point(f32::INFINITY, 1.0), (1 << FIXED_BITS) + (1 << 16));
        assert_eq!(combine_limbs([1, 2, 3], 0.5), ((1 << 16) + (2 << 8) + 3) as f32 * 0.5);
    }

    #[test]
    fn slots_split_evenly_between_polarisations() {
        for v in VARIANTS {
            let per_pol: Vec<u32> =
                (0..v.pols).map(|p| (0..v.slots).filter(|&s| v.slot_pol(s) == p).count() as u32).collect();
            assert!(per_pol.iter().all(|&n| n == v.slots / v.pols), "{v:?}");
            // Slot groups of four (one 16-byte coefficient load) never mix polarisations.
            for g in 0..v.slots / 4 {
                assert!((0..4).all(|e| v.slot_pol(4 * g + e) == v.slot_pol(4 * g)));
            }
        }
    }

    #[test]
    fn threads_tile_time_and_states_are_distinct() {
        let v = VARIANTS[1];
        let mut seen = std::collections::BTreeSet::new();
        for tile in 0..3 {
            for thread in 0..THREADS {
                for j in 0..v.times_per_thread {
                    assert!(seen.insert(first_time(v, tile, thread) + j));
                }
            }
        }
        assert_eq!(seen.len() as u32, 3 * v.time_tile());
        assert_eq!(*seen.iter().last().unwrap(), 3 * v.time_tile() - 1);
        let (c, g, b) = (3, 5, 2);
        let mut states = std::collections::BTreeSet::new();
        for channel in 0..c {
            for group in 0..g {
                for batch in 0..b {
                    for thread in 0..THREADS {
                        assert!(states.insert(state_index(channel, group, batch, thread, g, b)));
                    }
                }
            }
        }
        assert_eq!(*states.iter().last().unwrap() + 1, (c * g * b * THREADS) as u64);
    }
}
