//! FRB beamformer, third kernel (footnotes 1 and 10 of
//! Smith, CHORD FRB beamformer design note (2022)): transpose the
//! resampled intensities `J[f][tbar][beta]` (f16) into beam-major, time-contiguous rows and
//! quantise them to unsigned 8 or 4 bits for network transmission:
//! `Q[f][beta][tbar] = clamp(rne(fma(J[f][tbar][beta], scale[f][beta], offset[f][beta])), 0, qmax)`
//! with `rne` round half to even, the fma rounded once in f32, `qmax` = 255 ([`Format::U8`]) or
//! 15 ([`Format::U4`]); NaN gives 0. The receiver decodes `J ~ (Q - offset) / scale`.
//! Non-finite values are quantised and counted as clipped, never rejected (J is data, and
//! scale and offset stay on the device): a NaN J, scale or offset (or an fma that is NaN,
//! e.g. an infinite J times a zero scale) gives 0, `+inf` gives `qmax` and `-inf` 0, each
//! counted in `saturated`. The CPU reference (`quantize_reference` on the host) does the same,
//! value by value.
//! Intensities are non-negative, so the codes are unsigned; `offset` lets a team centre a
//! baseline-subtracted stream (e.g. `offset = 128 - mean * scale`).
//! `saturated[f][beta]` (u32) counts the values of a row that clipped (rounded below 0 or
//! above `qmax`, or NaN).
//!
//! Output rows (what a per-beam FRB search consumes): row `(f, beta)` is [`row_bytes`] bytes,
//! `ceil(T bits / 8)` rounded up to 16 so every row starts 16-byte aligned (the kernel's
//! stores are 16 bytes); the padding bytes are 0. U4 holds two samples per byte, the earlier
//! (even) tbar in the low nibble, as the project's int4 packing (`packing.rs`).
//!
//! Kernel: one block of [`THREADS`] threads per tile of [`TILE_T`] tbar x [`TILE_B`] beams of
//! one channel (grid x = beam tiles, y = tbar tiles, z = channels). Each thread loads 16 bytes
//! of J (8 beams at one tbar; 8 threads cover a 128-byte line), quantises them with its 8
//! beams' scale and offset held in registers, and stores the 8 codes as bytes into a shared
//! tile `[beam][tbar]` of 128-byte rows whose 16-byte chunks are XOR-swizzled
//! ([`tile_offset`]), so both those byte stores and the 16-byte reads along tbar are
//! conflict-free. After one barrier each thread reads 16 (U8) or 32 (U4, packed to 16) codes
//! of one beam and stores them with one 16-byte store.

/// tbar per tile: one 128-byte shared row per beam.
pub const TILE_T: u32 = 128;
/// Beams per tile.
pub const TILE_B: u32 = 64;
/// Threads per block.
pub const THREADS: u32 = 256;
/// Bytes of the shared tile.
pub const TILE_BYTES: u32 = TILE_T * TILE_B;
/// Rows of J (tbar) one load pass of the block covers: 8 threads per 64-beam line.
pub const LOAD_ROWS: u32 = THREADS / (TILE_B / 8);
/// Load passes per tile.
pub const LOAD_PASSES: u32 = TILE_T / LOAD_ROWS;

/// The output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One unsigned byte per value, 0..=255.
    U8,
    /// Two unsigned 4-bit values per byte, 0..=15, earlier tbar in the low nibble.
    U4,
}

impl Format {
    /// Bits of one output code: 8 for [`Format::U8`], 4 for [`Format::U4`].
    pub const fn bits(self) -> u32 {
        match self {
            Format::U8 => 8,
            Format::U4 => 4,
        }
    }
    /// Largest code.
    pub const fn max(self) -> u32 {
        (1 << self.bits()) - 1
    }
}

/// Bytes of one output row of `times` samples: the packed samples, padded to 16 bytes.
/// Saturates at `u32::MAX` where that does not fit 32 bits (U8 rows of more than
/// `2^32 - 16` samples, far past what the quantiser accepts).
pub const fn row_bytes(times: u32, format: Format) -> u32 {
    let packed = (times as u64 * format.bits() as u64).div_ceil(8);
    let bytes = packed.div_ceil(16) * 16;
    if bytes > u32::MAX as u64 {
        u32::MAX
    } else {
        bytes as u32
    }
}

/// The 16-byte chunk swizzle of tile row `beam`: beams `8c + j` for the 8 values of `c` a
/// warp's byte store touches (fixed `j`) get 8 distinct chunks, and the beams `2b, 2b + 1`
/// a U4 read pairs get complementary ones.
pub const fn swizzle(beam: u32) -> u32 {
    (beam ^ (beam / 8)) % 8
}

/// Byte offset in the shared tile of the code of (tile beam `beam`, tile tbar `t`).
pub const fn tile_offset(beam: u32, t: u32) -> u32 {
    beam * TILE_T + 16 * ((t / 16) ^ swizzle(beam)) + t % 16
}

/// Load side of thread `thread`: (first tile beam of its 8, tile tbar of pass 0); pass `i`
/// is `LOAD_ROWS i` rows further.
pub const fn load_slot(thread: u32) -> (u32, u32) {
    (8 * (thread % (TILE_B / 8)), thread / (TILE_B / 8))
}

/// Store side of thread `thread` for U8: (tile beam of pass 0, 16-byte chunk k covering tile
/// tbar `16k .. 16k + 16`); pass `i` is `THREADS / 8` beams further (two passes).
pub const fn store_slot_u8(thread: u32) -> (u32, u32) {
    (thread / 8, thread % 8)
}

/// Store side of thread `thread` for U4: (tile beam, k) covering tile tbar `32k .. 32k + 32`
/// (chunks `2k`, `2k + 1`), one pass.
pub const fn store_slot_u4(thread: u32) -> (u32, u32) {
    (thread / 4, thread % 4)
}

/// Packs 8 codes (each 0..=15, one per byte of `lo` then `hi`, earlier tbar first) into one
/// word of 8 nibbles, earlier tbar in the lower nibble.
pub const fn pack_nibbles(lo: u32, hi: u32) -> u32 {
    const fn half(x: u32) -> u32 {
        // Bytes v0 v1 v2 v3 -> (v0 | v1 << 4) in bits 0..8, (v2 | v3 << 4) in bits 16..24.
        let y = (x & 0x000f_000f) | ((x >> 4) & 0x00f0_00f0);
        (y & 0xff) | ((y >> 8) & 0xff00)
    }
    half(lo) | (half(hi) << 16)
}

/// Code and clip flag of one value already scaled and offset (`fma(J, scale, offset)` in
/// f32): round half to even, clamp to `0..=max`; NaN is 0 and clipped.
#[inline(always)]
pub fn quantize_scaled(x: f32, max: u32) -> (u32, bool) {
    #[cfg(target_arch = "nvptx64")]
    let r = crate::intrinsics::cvt_rni_s32_f32(x);
    #[cfg(not(target_arch = "nvptx64"))]
    let r = crate::delay_beamformer::rint_f32(x) as i32; // saturating cast, NaN -> 0
    let q = if r < 0 {
        0
    } else if r > max as i32 {
        max as i32
    } else {
        r
    };
    (q as u32, q != r || x.is_nan())
}

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
pub(crate) use device::*;

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod device {
    use super::*;
    use crate::intrinsics::*;

    crate::static_shared!(fn quantize_tile, TILE_BYTES);

    /// One tile; see the module comment. `j` f16 `[f][tbar][beta]`, `scale`/`offset` f32
    /// `[f][beta]`, `out` `[f][beta][row_bytes]`, `saturated` u32 `[f][beta]` (accumulated).
    #[inline(always)]
    pub(crate) unsafe fn quantize<const U4: bool>(
        j: *const u16,
        scale: *const f32,
        offset: *const f32,
        out: *mut u8,
        saturated: *mut u32,
        times: u32,
        beams: u32,
        row_bytes: u32,
    ) {
        let max = if U4 { 15 } else { 255 };
        let tile = quantize_tile();
        let (b0, t0, channel) = (TILE_B * block_idx_x(), TILE_T * block_idx_y(), block_idx_z());
        let tid = thread_idx_x();
        let (lb, lt) = load_slot(tid);
        let beam = b0 + lb; // first of this thread's 8 beams
        let params = channel as usize * beams as usize;
        let mut sc = [0.0f32; 8];
        let mut of = [0.0f32; 8];
        unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
            if beam + (i as u32) < beams {
                sc[i] = *scale.add(params + beam as usize + i);
                of[i] = *offset.add(params + beam as usize + i);
            }
        });
        // 16-byte loads need every row of J 16-byte aligned (beams % 8 == 0); then a group of
        // 8 beams is either all inside or all outside.
        let vector = beams.is_multiple_of(8);
        let jf = j.add(channel as usize * times as usize * beams as usize);
        let mut raw = [[0u32; 4]; LOAD_PASSES as usize];
        unroll!(p in [0, 1, 2, 3] {
            let t = t0 + lt + LOAD_ROWS * p as u32;
            if t < times && beam < beams {
                let row = jf.add(t as usize * beams as usize + beam as usize);
                if vector {
                    raw[p] = ld_global_nc_v4(row as *const u32);
                } else {
                    unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
                        if beam + (i as u32) < beams {
                            raw[p][i / 2] |= (*row.add(i) as u32) << (16 * (i % 2));
                        }
                    });
                }
            }
        });
        let mut clipped = [0u32; 8];
        unroll!(p in [0, 1, 2, 3] {
            let tt = lt + LOAD_ROWS * p as u32;
            let inside = t0 + tt < times;
            unroll!(w in [0, 1, 2, 3] {
                let (lo, hi) = f16x2_to_f32x2(raw[p][w]);
                unroll!(h in [0, 1] {
                    let i = 2 * w + h;
                    let v = if h == 0 { lo } else { hi };
                    let (q, c) = quantize_scaled(fma_rn_f32(v, sc[i], of[i]), max);
                    let keep = inside && beam + (i as u32) < beams;
                    clipped[i] += (keep && c) as u32;
                    let address = tile + tile_offset(lb + i as u32, tt);
                    crate::bank::debug_assert_conflict_free(address & !3, 4);
                    st_shared_u8(address, if keep { q as u8 } else { 0 });
                });
            });
        });
        // Lanes `l`, `l ^ 8`, `l ^ 16`, `l ^ 24` hold the same 8 beams.
        unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
            let mut n = clipped[i];
            n += shfl_xor(n, 8);
            n += shfl_xor(n, 16);
            if lane_id() < 8 && n != 0 {
                red_add_u32(saturated.add(params + beam as usize + i), n);
            }
        });
        sync_threads();

        let dst = out.add(channel as usize * beams as usize * row_bytes as usize);
        if U4 {
            let (lb, k) = store_slot_u4(tid);
            let byte = t0 / 2 + 16 * k;
            let a = tile + tile_offset(lb, 32 * k);
            let b = tile + tile_offset(lb, 32 * k + 16);
            // The whole warp checks, before the edge branch.
            crate::bank::debug_assert_conflict_free(a, 16);
            crate::bank::debug_assert_conflict_free(b, 16);
            if b0 + lb < beams && byte < row_bytes {
                let x = ld_shared_v4(a);
                let y = ld_shared_v4(b);
                let packed = [
                    pack_nibbles(x[0], x[1]),
                    pack_nibbles(x[2], x[3]),
                    pack_nibbles(y[0], y[1]),
                    pack_nibbles(y[2], y[3]),
                ];
                st_global_v4(
                    dst.add((b0 + lb) as usize * row_bytes as usize + byte as usize) as *mut u32,
                    packed,
                );
            }
        } else {
            let (lb, k) = store_slot_u8(tid);
            unroll!(p in [0, 1] {
                let lb = lb + (THREADS / 8) * p as u32;
                let byte = t0 + 16 * k;
                let a = tile + tile_offset(lb, 16 * k);
                crate::bank::debug_assert_conflict_free(a, 16);
                if b0 + lb < beams && byte < row_bytes {
                    let x = ld_shared_v4(a);
                    st_global_v4(dst.add((b0 + lb) as usize * row_bytes as usize + byte as usize) as *mut u32, x);
                }
            });
        }
    }
}

/// One instance of the quantiser: its spec ([`THREADS`] threads, a static shared tile) and
/// its format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantizeKernel {
    /// The registry entry `frb_quantize_u8` or `frb_quantize_u4`: [`THREADS`] threads, no
    /// dynamic shared memory.
    pub spec: crate::modules::KernelSpec,
    /// The output format the kernel writes.
    pub format: Format,
}

/// The kernel for `format`.
pub fn kernel(format: Format) -> Option<&'static QuantizeKernel> {
    super::QUANTIZE_KERNELS.iter().find(|k| k.format == format)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bank::is_conflict_free;

    #[test]
    fn tile_offset_is_a_bijection() {
        let mut seen = [false; TILE_BYTES as usize];
        for beam in 0..TILE_B {
            for t in 0..TILE_T {
                let at = tile_offset(beam, t);
                assert!(at < TILE_BYTES);
                assert!(!core::mem::replace(&mut seen[at as usize], true));
                // 16 consecutive tbar from a multiple of 16 stay one contiguous chunk.
                assert_eq!(at, tile_offset(beam, t / 16 * 16) + t % 16);
            }
        }
    }

    #[test]
    fn byte_stores_are_conflict_free_and_cover_the_tile() {
        let mut seen = [0u32; TILE_BYTES as usize];
        for warp in 0..THREADS / 32 {
            for p in 0..LOAD_PASSES {
                for i in 0..8 {
                    let at: [u32; 32] = core::array::from_fn(|l| {
                        let (lb, lt) = load_slot(32 * warp + l as u32);
                        tile_offset(lb + i, lt + LOAD_ROWS * p)
                    });
                    // Bytes of one word merge: the model sees the word address.
                    let words = at.map(|a| a & !3);
                    assert!(is_conflict_free(&words, 4), "warp {warp} pass {p} beam {i}");
                    for a in at {
                        seen[a as usize] += 1;
                    }
                }
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
    }

    #[test]
    fn reads_are_conflict_free_and_cover_the_tile() {
        let mut seen = [0u32; TILE_BYTES as usize];
        for warp in 0..THREADS / 32 {
            for p in 0..2 {
                let at: [u32; 32] = core::array::from_fn(|l| {
                    let (lb, k) = store_slot_u8(32 * warp + l as u32);
                    tile_offset(lb + THREADS / 8 * p, 16 * k)
                });
                assert!(is_conflict_free(&at, 16), "u8 warp {warp} pass {p}");
                for a in at {
                    for b in 0..16 {
                        seen[(a + b) as usize] += 1;
                    }
                }
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
        let mut seen = [0u32; TILE_BYTES as usize];
        for warp in 0..THREADS / 32 {
            for half in 0..2 {
                let at: [u32; 32] = core::array::from_fn(|l| {
                    let (lb, k) = store_slot_u4(32 * warp + l as u32);
                    tile_offset(lb, 32 * k + 16 * half)
                });
                assert!(is_conflict_free(&at, 16), "u4 warp {warp} half {half}");
                for a in at {
                    for b in 0..16 {
                        seen[(a + b) as usize] += 1;
                    }
                }
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
    }

    #[test]
    fn nibbles_pack_in_time_order() {
        let codes: [u32; 8] = [1, 2, 3, 4, 5, 6, 7, 15];
        let word = |c: &[u32]| c.iter().enumerate().fold(0, |w, (i, &v)| w | (v << (8 * i)));
        let packed = pack_nibbles(word(&codes[..4]), word(&codes[4..]));
        for (i, &c) in codes.iter().enumerate() {
            assert_eq!((packed >> (4 * i)) & 0xf, c);
        }
    }

    #[test]
    fn rows_are_padded_to_16_bytes() {
        assert_eq!(row_bytes(917, Format::U8), 928);
        assert_eq!(row_bytes(917, Format::U4), 464);
        assert_eq!(row_bytes(1, Format::U4), 16);
        assert_eq!(row_bytes(32, Format::U4), 16);
        assert_eq!(row_bytes(33, Format::U4), 32);
        // The largest rows: exact in 64 bits, saturated where 32 bits cannot hold them.
        assert_eq!(row_bytes(u32::MAX, Format::U4), 1 << 31);
        assert_eq!(row_bytes(u32::MAX - 16, Format::U8), u32::MAX - 15);
        assert_eq!(row_bytes(u32::MAX, Format::U8), u32::MAX);
    }

    #[test]
    fn scaled_values_round_half_even_and_clip() {
        assert_eq!(quantize_scaled(2.5, 255), (2, false));
        assert_eq!(quantize_scaled(3.5, 255), (4, false));
        assert_eq!(quantize_scaled(-0.5, 255), (0, false));
        assert_eq!(quantize_scaled(-0.51, 255), (0, true));
        assert_eq!(quantize_scaled(255.5, 255), (255, true));
        assert_eq!(quantize_scaled(15.5, 15), (15, true));
        assert_eq!(quantize_scaled(14.5, 15), (14, false));
        assert_eq!(quantize_scaled(f32::NAN, 255), (0, true));
        assert_eq!(quantize_scaled(f32::INFINITY, 15), (15, true));
        assert_eq!(quantize_scaled(f32::NEG_INFINITY, 255), (0, true));
        assert_eq!(quantize_scaled(-f32::NAN, 15), (0, true));
        assert_eq!(quantize_scaled(f32::MAX, 255), (255, true));
        assert_eq!(quantize_scaled(f32::MIN, 255), (0, true));
    }
}
