//! Delay beamformer (MeerKAT-style B-engine, seed 003 "Beamforming: GPU kernel", "Higher beam
//! counts", "Dithering"): float32 tied-array beams steered by per-antenna delays.
//!
//! For single-polarisation beam b (reading input polarisation pol(b)), channel c, time t:
//! `y[b][c][t] = Q( sum_a W[a][b][c] x[a][c][t][pol(b)] + dither )`,
//! `W[a][b][c] = w[a][b] exp(j pi c' d[a][b])` with `c' = first_channel + c` (absolute channel),
//! `Q` = round to nearest even and saturate to [-127, 127] ([`quantise`]).
//!
//! Layouts: x complex int8 `[antenna][channel][time][pol]`; w complex f32 and d f32
//! `[antenna][beam]`; y complex int8 `[beam][channel][time]`; saturation counts u32 `[beam]`.
//!
//! Why it is shaped this way. The kernel is bound by DRAM at few beams, so each input byte is
//! read once, through a `cp.async` ring of [`STAGES`] buffers of [`STAGE_BYTES`] (a stage is
//! `stage_antennas` antennas of one time tile), which keeps 32 KB per block in flight without
//! costing registers. One block handles one channel (seed), one beam batch and a run of time
//! tiles; W of the seed is computed on the fly into shared memory for a batch of antennas
//! (all antennas when they fit in [`MAX_COEFFICIENT_BYTES`], so once per block; otherwise
//! per batch and tile), with our own f32 `sincospi` (no libm on the device). Every thread keeps
//! the accumulators of its `times_per_thread` consecutive samples for every beam slot of the
//! batch in registers; beams beyond the slots of a batch go to further batches (grid x; the
//! seed's outer beam loop, run by concurrent blocks so the re-read tile comes from L2).
//!
//! On the H200 the FP32 pipe, not DRAM, is the tighter limit at 8 beams (8.6 FMA per DRAM
//! byte available against ~7.5 needed with a plain complex product), so the complex product
//! uses three real FMAs (Gauss): with `W = p + jq`, `x = a + jb`,
//! `Re = p(a+b) - (p+q) b`, `Im = p(a+b) + (q-p) a`, accumulating `p(a+b)`, `(q-p) a` and
//! `-(p+q) b` separately ([`gauss_planes`]); int8 becomes f32 with one `prmt` and one add
//! ([`ci8_component`]) instead of the quarter-rate I2F. Slots have a fixed polarisation (the
//! first half pol 0, the second pol 1 when there are two), so no per-beam select is needed.
//!
//! Dither: each thread owns one XORWOW state ([`crate::xorwow`]), kept in device memory
//! between launches at [`state_index`]; it draws, per time tile, for each dithered slot in
//! slot order, for each of its samples in time order, re then im, only for samples inside
//! the launch. Dither is added in f32 before quantisation.

use crate::packing::saturate_symmetric;

/// Threads per block (every variant).
pub const THREADS: u32 = 128;
/// Bytes of one input stage in shared memory.
pub const STAGE_BYTES: u32 = 16384;
/// Stages in the cp.async ring (two in flight while one is read).
pub const STAGES: u32 = 3;
/// Shared memory for coefficients: this many bytes bounds the antennas of one batch.
pub const MAX_COEFFICIENT_BYTES: u32 = 32768;
/// Times must be a multiple of this (16-byte rows for cp.async at one polarisation).
pub const TIME_GRANULE: u32 = 8;
/// Slot-table entry of an unused slot.
pub const EMPTY_SLOT: u32 = u32::MAX;
/// Slot-table flag: the slot's beam is dithered.
pub const DITHER_FLAG: u32 = 1 << 31;
/// Slot-table bits of the beam index.
pub const BEAM_MASK: u32 = DITHER_FLAG - 1;

/// A compiled kernel shape: beam slots per batch, time samples per thread, input
/// polarisations. Accumulators take `3 * slots * times_per_thread` = 96 registers in each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub slots: u32,
    pub times_per_thread: u32,
    pub pols: u32,
}

impl Variant {
    /// Time samples of one tile (a block's threads side by side).
    pub const fn time_tile(self) -> u32 {
        THREADS * self.times_per_thread
    }
    /// Input bytes one thread reads per antenna (its samples, every polarisation).
    pub const fn thread_bytes(self) -> u32 {
        self.times_per_thread * self.pols * 2
    }
    /// Bytes of one antenna's row of a stage (one tile of samples).
    pub const fn row_bytes(self) -> u32 {
        self.time_tile() * self.pols * 2
    }
    /// Antennas per stage.
    pub const fn stage_antennas(self) -> u32 {
        STAGE_BYTES / self.row_bytes()
    }
    pub const fn slots_per_pol(self) -> u32 {
        self.slots / self.pols
    }
    /// The input polarisation slot `slot` reads.
    pub const fn slot_pol(self, slot: u32) -> u32 {
        slot / self.slots_per_pol()
    }
    /// Shared-memory bytes of one antenna's coefficients (three planes of `slots` f32).
    pub const fn coefficient_bytes(self) -> u32 {
        3 * 4 * self.slots
    }
    /// Most antennas one coefficient batch holds (a multiple of the stage's antennas).
    pub const fn max_coefficient_antennas(self) -> u32 {
        let fit = MAX_COEFFICIENT_BYTES / self.coefficient_bytes();
        fit / self.stage_antennas() * self.stage_antennas()
    }
    /// Dynamic shared memory of a launch with `coefficient_antennas` per batch.
    pub const fn shared_bytes(self, coefficient_antennas: u32) -> u32 {
        STAGES * STAGE_BYTES + coefficient_antennas * self.coefficient_bytes()
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
    pub const fn kernel_name(self) -> &'static str {
        match (self.pols, self.slots, self.times_per_thread) {
            (1, 8, 4) => "delay_beamformer_p1_s8_t4",
            (1, 8, _) => "delay_beamformer_p1_s8_t2",
            (1, 16, _) => "delay_beamformer_p1_s16_t2",
            (1, _, _) => "delay_beamformer_p1_s32_t1",
            (_, 8, 4) => "delay_beamformer_p2_s8_t4",
            (_, 8, _) => "delay_beamformer_p2_s8_t2",
            (_, 16, _) => "delay_beamformer_p2_s16_t2",
            _ => "delay_beamformer_p2_s32_t1",
        }
    }
}

/// The variants plans choose from, smallest batch first for each polarisation count.
pub const VARIANTS: [Variant; 6] = [
    Variant { slots: 8, times_per_thread: 4, pols: 1 },
    Variant { slots: 16, times_per_thread: 2, pols: 1 },
    Variant { slots: 32, times_per_thread: 1, pols: 1 },
    Variant { slots: 8, times_per_thread: 4, pols: 2 },
    Variant { slots: 16, times_per_thread: 2, pols: 2 },
    Variant { slots: 32, times_per_thread: 1, pols: 2 },
];

/// Further compiled variants for tuning (a plan takes them only when asked): 8 slots with
/// half the samples per thread, so half the accumulators and more blocks per SM.
pub const TUNING_VARIANTS: [Variant; 2] =
    [Variant { slots: 8, times_per_thread: 2, pols: 1 }, Variant { slots: 8, times_per_thread: 2, pols: 2 }];

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

// -------------------------------------------------------------------------------------------
// Float arithmetic, identical on the host (CPU tests) and the device.

/// `a * b + c` rounded once: `fma.rn.f32` on the device; on the host, the exact product in
/// f64, the sum rounded to odd (its error found by TwoSum), then rounded to f32, which is
/// the correctly rounded fused result (f64 has more than 2 * 24 + 2 bits).
#[inline(always)]
pub fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::intrinsics::fma_rn_f32(a, b, c)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let p = a as f64 * b as f64;
        let c = c as f64;
        let s = p + c;
        let bb = s - p;
        let err = (p - (s - bb)) + (c - bb);
        let bits = s.to_bits();
        let odd = if err != 0.0 && bits & 1 == 0 {
            // Move one ulp toward the exact value: away from zero when err has s's sign.
            if (err > 0.0) == (s > 0.0) {
                bits + 1
            } else {
                bits - 1
            }
        } else {
            bits
        };
        f64::from_bits(odd) as f32
    }
}

/// Round to the nearest integer, ties to even, in f32 (every |x| >= 2^23 is an integer).
#[inline(always)]
pub fn rint_f32(x: f32) -> f32 {
    const TWO_23: f32 = 8_388_608.0;
    let a = x.abs();
    if a < TWO_23 {
        // a + 2^23 lies in [2^23, 2^24), where the f32 spacing is 1: the addition rounds.
        ((a + TWO_23) - TWO_23).copysign(x)
    } else {
        x
    }
}

const PI_HI: f32 = core::f32::consts::PI;
/// pi - PI_HI.
const PI_LO: f32 = -8.742_278e-8;
/// Taylor coefficients of sin(pi f) / f - pi and (cos(pi f) - 1) / f^2 in f^2, for |f| <= 1/4
/// (truncation below 2e-9).
const SIN: [f32; 4] = [-5.167_712_7, 2.550_164, -0.599_264_5, 0.082_145_885];
const COS: [f32; 5] = [-4.934_802, 4.058_712, -1.335_262_8, 0.235_330_63, -0.025_806_89];

/// `(sin(pi x), cos(pi x))` in f32 for |x| < 2^22: x = q/2 + f with |f| <= 1/4 exactly, two
/// polynomials in f ([`sincospi_reduced`]), then the quadrant q mod 4, chosen with selects
/// (a `match` here became an indirect branch on the device). Max error about 1 ulp (CPU test:
/// `sincospi_is_accurate_to_about_one_ulp`).
#[inline(always)]
pub fn sincospi(x: f32) -> (f32, f32) {
    let q = rint_f32(x + x);
    let f = fma_f32(q, -0.5, x); // exact: |f| <= 1/4 and a multiple of x's ulp
    let (s, c) = sincospi_reduced(f);
    let q = q as i32;
    // Quadrant 1: (c, -s); 2: (-s, -c); 3: (-c, s) = the swap of odd quadrants, then the
    // negation of quadrants 2 and 3.
    let (s, c) = if q & 1 != 0 { (c, -s) } else { (s, c) };
    if q & 2 != 0 {
        (-s, -c)
    } else {
        (s, c)
    }
}

/// `(sin(pi f), cos(pi f))` in f32 for |f| <= 1/4, without range reduction.
#[inline(always)]
pub fn sincospi_reduced(f: f32) -> (f32, f32) {
    let f2 = f * f;
    let mut ps = SIN[3];
    ps = fma_f32(ps, f2, SIN[2]);
    ps = fma_f32(ps, f2, SIN[1]);
    ps = fma_f32(ps, f2, SIN[0]);
    let t = fma_f32(f2, ps, PI_LO);
    let s = fma_f32(f, PI_HI, f * t);
    let mut pc = COS[4];
    pc = fma_f32(pc, f2, COS[3]);
    pc = fma_f32(pc, f2, COS[2]);
    pc = fma_f32(pc, f2, COS[1]);
    pc = fma_f32(pc, f2, COS[0]);
    let c = fma_f32(f2, pc, 1.0);
    (s, c)
}

/// `channel * d` modulo 2 (in half turns), in [-2, 2], with one rounding: the product is
/// split exactly into `p + e` by an FMA, both parts are reduced modulo 2 exactly, and only
/// their sum rounds. So the phase keeps f32 accuracy however large `channel * d` is.
#[inline(always)]
pub fn half_turns(channel: u32, d: f32) -> f32 {
    let c = channel as f32; // exact below 2^24 (validated)
    let p = c * d;
    let e = fma_f32(c, d, -p);
    // x - 2 rint(x / 2) is exact: a multiple of x's ulp, at most 1 in magnitude.
    let reduce = |x: f32| fma_f32(-2.0, rint_f32(x * 0.5), x);
    reduce(p) + reduce(e)
}

/// `W = w exp(j pi channel d)` in f32.
#[inline(always)]
pub fn steering_coefficient(w: [f32; 2], d: f32, channel: u32) -> [f32; 2] {
    let (s, c) = sincospi(half_turns(channel, d));
    [fma_f32(w[0], c, -(w[1] * s)), fma_f32(w[0], s, w[1] * c)]
}

/// The three coefficient planes of the Gauss product for `W = p + jq`: `[p, q - p, -(p + q)]`.
/// With accumulators `k0 += p (a + b)`, `k1 += (q - p) a`, `k2 += -(p + q) b`:
/// `Re = k0 + k2`, `Im = k0 + k1`.
#[inline(always)]
pub fn gauss_planes(w: [f32; 2]) -> [f32; 3] {
    [w[0], w[1] - w[0], -(w[0] + w[1])]
}

/// Component `byte` of a word of four int8 components whose sign bits were flipped
/// (`word ^ 0x80808080`), as an exact f32: the byte goes under the exponent of 2^23 (`prmt`),
/// giving 2^23 + 128 + x, and one subtraction leaves x.
#[inline(always)]
pub fn ci8_component(flipped: u32, byte: u32) -> f32 {
    const MAGIC: u32 = 0x4b00_0000; // 2^23
    let selector = 0x7440 | byte; // byte `byte` of `flipped`, then 0x00, 0x00, 0x4b
    #[cfg(target_arch = "nvptx64")]
    let bits = crate::intrinsics::prmt(flipped, MAGIC, selector);
    #[cfg(not(target_arch = "nvptx64"))]
    let bits = crate::packing::byte_perm(flipped, MAGIC, selector);
    f32::from_bits(bits) - 8_388_736.0
}

/// Q of the module comment: round to nearest even, saturate to [-127, 127]. Returns the
/// value and whether it saturated. NaN gives 0, not saturated.
#[inline(always)]
pub fn quantise(v: f32) -> (i8, bool) {
    // cvt.rni.s32.f32 is this rounding with the same saturation and NaN -> 0 in one instruction.
    #[cfg(target_arch = "nvptx64")]
    let r = crate::intrinsics::cvt_rni_s32_f32(v);
    #[cfg(not(target_arch = "nvptx64"))]
    let r = rint_f32(v) as i32; // Rust's cast saturates and maps NaN to 0
    let q = saturate_symmetric(r, 127);
    (q as i8, q != r)
}

#[cfg(target_arch = "nvptx64")]
pub use device::*;

#[cfg(target_arch = "nvptx64")]
mod device {
    use super::*;
    use crate::intrinsics::*;
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

    /// Issues the copies of the stage of tile `tile`, antennas from `a0`, into ring buffer
    /// `ring`, and commits a group (an empty one when `valid` is false, past the block's last
    /// stage, so the group count per thread stays uniform). Times past the end are
    /// zero-filled; antennas past the end are not read by anyone.
    #[inline(always)]
    unsafe fn issue_stage(
        v: Variant,
        a: &Args,
        smem: u32,
        channel: u32,
        tile: u32,
        a0: u32,
        ring: u32,
        valid: bool,
    ) {
        if valid {
            let t0 = tile * v.time_tile();
            let (antenna, byte) = stage_chunk(v, thread_idx_x(), 0);
            let antenna = a0 + antenna;
            let step = THREADS / v.chunks_per_row();
            let row_stride = a.channels as u64 * a.times as u64 * (v.pols * 2) as u64;
            let inside = t0 + byte / (v.pols * 2) < a.times;
            // A chunk past the last time reads nothing (size 0) from the row start.
            let offset =
                (antenna as u64 * a.channels as u64 + channel as u64) * a.times as u64 * (v.pols * 2) as u64
                    + t0 as u64 * (v.pols * 2) as u64
                    + if inside { byte as u64 } else { 0 };
            let dst = smem + ring * STAGE_BYTES + 16 * thread_idx_x();
            let size = if inside { 16 } else { 0 };
            let mut m = 0;
            while m < v.chunks_per_thread() {
                if antenna + m * step < a.antennas {
                    let src = a.input.add((offset + (m * step) as u64 * row_stride) as usize);
                    cp_async_16(dst + 16 * THREADS * m, src, size);
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

    /// Coefficients of antennas `first .. first + count` for every slot into the planes
    /// `[antenna][plane][slot]` at `base`.
    #[inline(always)]
    unsafe fn compute_coefficients(
        v: Variant,
        a: &Args,
        slots: *const u32,
        base: u32,
        channel: u32,
        first: u32,
    ) {
        let count = (a.antennas - first).min(a.coefficient_antennas) * v.slots;
        let mut idx = thread_idx_x();
        while idx < count {
            let (al, slot) = (idx / v.slots, idx % v.slots);
            let entry = *slots.add(slot as usize);
            let planes = if entry == EMPTY_SLOT {
                [0.0; 3]
            } else {
                let k = ((first + al) * a.beams + (entry & BEAM_MASK)) as usize;
                let w = [*a.weights.add(2 * k), *a.weights.add(2 * k + 1)];
                gauss_planes(steering_coefficient(w, *a.delays.add(k), a.first_channel + channel))
            };
            let at = base + al * v.coefficient_bytes() + 4 * slot;
            st_shared_u32(at, planes[0].to_bits());
            st_shared_u32(at + 4 * v.slots, planes[1].to_bits());
            st_shared_u32(at + 8 * v.slots, planes[2].to_bits());
            idx += THREADS;
        }
    }

    /// This thread's input bytes of one antenna row, as words (at most four); two-byte
    /// loads (one time, one polarisation) land in the low half of word 0.
    #[inline(always)]
    unsafe fn load_samples<const TPT: usize, const P: usize>(at: u32) -> [u32; 4] {
        match TPT * P * 2 {
            16 => ld_shared_v4(at),
            8 => {
                let [x, y] = ld_shared_v2(at);
                [x, y, 0, 0]
            }
            4 => [ld_shared_u32(at), 0, 0, 0],
            _ => [ld_shared_u32(at & !3) >> ((at & 2) * 8), 0, 0, 0],
        }
    }

    /// Adds one antenna: this thread's samples at `x_at`, the antenna's coefficient planes at
    /// `w_at`.
    #[inline(always)]
    unsafe fn accumulate<const S: usize, const TPT: usize, const P: usize>(
        v: Variant,
        k: &mut [[[f32; TPT]; S]; 3],
        x_at: u32,
        w_at: u32,
    ) {
        let words = load_samples::<TPT, P>(x_at);
        // x[j][p] = (a, b, a + b) of sample j, polarisation p.
        let mut x = [[[0.0f32; 3]; P]; TPT];
        unroll!(j in [0, 1, 2, 3] {
            if j < TPT {
                unroll!(p in [0, 1] {
                    if p < P {
                        let byte = ((j * P + p) * 2) as u32;
                        let flipped = words[(byte / 4) as usize] ^ 0x8080_8080;
                        let re = ci8_component(flipped, byte % 4);
                        let im = ci8_component(flipped, byte % 4 + 1);
                        x[j][p] = [re, im, re + im];
                    }
                });
            }
        });
        unroll!(g in [0, 1, 2, 3, 4, 5, 6, 7] {
            if g < S / 4 {
                let planes = [
                    ld_shared_v4(w_at + 16 * g as u32),
                    ld_shared_v4(w_at + 4 * v.slots + 16 * g as u32),
                    ld_shared_v4(w_at + 8 * v.slots + 16 * g as u32),
                ];
                unroll!(e in [0, 1, 2, 3] {
                    let slot = 4 * g + e;
                    let p = v.slot_pol(slot as u32) as usize;
                    let (c0, c1, c2) = (
                        f32::from_bits(planes[0][e]),
                        f32::from_bits(planes[1][e]),
                        f32::from_bits(planes[2][e]),
                    );
                    unroll!(j in [0, 1, 2, 3] {
                        if j < TPT {
                            k[0][slot][j] = fma_f32(c0, x[j][p][2], k[0][slot][j]);
                            k[1][slot][j] = fma_f32(c1, x[j][p][0], k[1][slot][j]);
                            k[2][slot][j] = fma_f32(c2, x[j][p][1], k[2][slot][j]);
                        }
                    });
                });
            }
        });
    }

    /// The kernel body for one variant; see the module comment.
    #[inline(always)]
    unsafe fn beamform<const S: usize, const TPT: usize, const P: usize>(a: Args) {
        let v = Variant { slots: S as u32, times_per_thread: TPT as u32, pols: P as u32 };
        let (batch, group, channel) = (block_idx_x(), block_idx_y(), block_idx_z());
        let tid = thread_idx_x();
        let tiles = a.times.div_ceil(v.time_tile());
        let tile0 = group * a.tiles_per_group;
        if tile0 >= tiles {
            return; // block-uniform: the plan never launches such a group
        }
        let tile_end = (tile0 + a.tiles_per_group).min(tiles);
        let smem = dynamic_shared();
        let coefficients = smem + STAGES * STAGE_BYTES;
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
            issue_stage(v, &a, smem, channel, issue_tile, issue_a0, issue_ring, issue_tile < tile_end);
            advance(v, a.antennas, &mut issue_tile, &mut issue_a0);
            issue_ring += 1;
            n += 1;
        }

        // k[0] += p (a + b), k[1] += (q - p) a, k[2] += -(p + q) b, per slot and sample.
        let mut k = [[[0.0f32; TPT]; S]; 3];
        // First antenna of the coefficient batch in shared memory (none yet).
        let mut w_first = u32::MAX;
        let (mut tile, mut a0, mut ring) = (tile0, 0, 0);
        while tile < tile_end {
            // A new batch starts a tile (unless one batch holds every antenna) or follows the
            // last antenna of the previous batch.
            if w_first == u32::MAX || (a0 != w_first && (a0 == 0 || a0 == w_first + a.coefficient_antennas)) {
                if w_first != u32::MAX {
                    sync_threads(); // every thread is done with the previous batch
                }
                compute_coefficients(v, &a, slots, coefficients, channel, a0);
                w_first = a0;
            }
            cp_async_wait_group::<{ STAGES - 2 }>();
            sync_threads(); // this stage and the coefficients are visible; the last buffer is free
            if issue_ring == STAGES {
                issue_ring = 0;
            }
            issue_stage(v, &a, smem, channel, issue_tile, issue_a0, issue_ring, issue_tile < tile_end);
            advance(v, a.antennas, &mut issue_tile, &mut issue_a0);
            issue_ring += 1;

            if a0 == 0 {
                k = [[[0.0; TPT]; S]; 3];
            }
            let buffer = smem + ring * STAGE_BYTES + tid * v.thread_bytes();
            let mut w_at = coefficients + (a0 - w_first) * v.coefficient_bytes();
            let n = (a.antennas - a0).min(v.stage_antennas());
            // Two antennas per iteration (stages hold an even number unless the last is
            // ragged), so the second's loads can be scheduled under the first's FMAs.
            let mut al = 0;
            while al + 2 <= n {
                accumulate::<S, TPT, P>(v, &mut k, buffer + al * v.row_bytes(), w_at);
                accumulate::<S, TPT, P>(
                    v,
                    &mut k,
                    buffer + (al + 1) * v.row_bytes(),
                    w_at + v.coefficient_bytes(),
                );
                w_at += 2 * v.coefficient_bytes();
                al += 2;
            }
            if al < n {
                accumulate::<S, TPT, P>(v, &mut k, buffer + al * v.row_bytes(), w_at);
            }

            if a0 + v.stage_antennas() >= a.antennas {
                finish_tile::<S, TPT>(v, &a, slots, channel, tile, &k, &mut rng);
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

    /// Combines, dithers, quantises and stores one tile's samples of every slot, and adds the
    /// saturated samples (either component clipped) to the beams' counters.
    #[inline(always)]
    unsafe fn finish_tile<const S: usize, const TPT: usize>(
        v: Variant,
        a: &Args,
        slots: *const u32,
        channel: u32,
        tile: u32,
        k: &[[[f32; TPT]; S]; 3],
        rng: &mut Xorwow,
    ) {
        let t = first_time(v, tile, thread_idx_x());
        let inside = t < a.times; // all TPT samples or none: TPT divides TIME_GRANULE
        unroll!(slot in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
            if slot < S {
                let entry = *slots.add(slot);
                if entry != EMPTY_SLOT {
                    let beam = entry & BEAM_MASK;
                    let dithered = entry & DITHER_FLAG != 0;
                    let mut saturated = 0u32;
                    if inside {
                        let mut packed = [0u32; 2];
                        unroll!(j in [0, 1, 2, 3] {
                            if j < TPT {
                                let mut re = k[0][slot][j] + k[2][slot][j];
                                let mut im = k[0][slot][j] + k[1][slot][j];
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
                                packed[j / 2] |= pair << (16 * (j % 2));
                            }
                        });
                        let at = ((beam as u64 * a.channels as u64 + channel as u64) * a.times as u64 + t as u64) * 2;
                        let out = a.output.add(at as usize);
                        match TPT {
                            4 => st_global_v2(out as *mut u32, packed),
                            2 => *(out as *mut u32) = packed[0],
                            _ => *(out as *mut u16) = packed[0] as u16,
                        }
                    }
                    let count = redux_add_u32(saturated);
                    if lane_id() == 0 && count != 0 {
                        red_add_u32(a.saturated.add(beam as usize), count);
                    }
                }
            }
        });
    }

    macro_rules! delay_beamformer_kernel {
        ($name:ident, $slots:literal, $tpt:literal, $pols:literal) => {
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
                beamform::<$slots, $tpt, $pols>(Args {
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
        };
    }

    delay_beamformer_kernel!(delay_beamformer_p1_s8_t4, 8, 4, 1);
    delay_beamformer_kernel!(delay_beamformer_p1_s8_t2, 8, 2, 1);
    delay_beamformer_kernel!(delay_beamformer_p1_s16_t2, 16, 2, 1);
    delay_beamformer_kernel!(delay_beamformer_p1_s32_t1, 32, 1, 1);
    delay_beamformer_kernel!(delay_beamformer_p2_s8_t4, 8, 4, 2);
    delay_beamformer_kernel!(delay_beamformer_p2_s8_t2, 8, 2, 2);
    delay_beamformer_kernel!(delay_beamformer_p2_s16_t2, 16, 2, 2);
    delay_beamformer_kernel!(delay_beamformer_p2_s32_t1, 32, 1, 2);

    /// Dither states: thread i (< count) stores `curand_init(seed, s + i, offset)` given
    /// `base` = that state for i = 0 and `jumps[k]` = the xorshift matrix of 2^(67 + k) steps
    /// (k < 32, built on the host): the subsequence jump by i is the product of the jumps of
    /// its set bits (powers of one matrix commute).
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn delay_beamformer_dither_init(
        states: *mut u32,
        count: u32,
        base: *const u32,
        jumps: *const xorwow::Jump,
    ) {
        let i = global_thread_x();
        if i >= count {
            return;
        }
        let mut g = Xorwow::from_words(core::array::from_fn(|w| *base.add(w)));
        let mut bit = 0;
        while bit < 32 {
            if (i >> bit) & 1 != 0 {
                g.v = xorwow::apply(&*jumps.add(bit as usize), g.v);
            }
            bit += 1;
        }
        for (w, value) in g.to_words().into_iter().enumerate() {
            *states.add(i as usize * STATE_WORDS + w) = value;
        }
    }

    /// Test kernel: `draws` draws from each of `count` states, raw into `raw[draw][state]` and
    /// as dither values into `values[draw][state]`; the states are advanced in place.
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn delay_beamformer_dither_draws(
        states: *mut u32,
        count: u32,
        draws: u32,
        raw: *mut u32,
        values: *mut f32,
    ) {
        let i = global_thread_x();
        if i >= count {
            return;
        }
        let at = states.add(i as usize * STATE_WORDS);
        let mut g = Xorwow::from_words(core::array::from_fn(|w| *at.add(w)));
        let mut n = 0;
        while n < draws {
            let r = g.next_u32();
            let o = n as usize * count as usize + i as usize;
            *raw.add(o) = r;
            *values.add(o) = xorwow::dither(r);
            n += 1;
        }
        for (w, value) in g.to_words().into_iter().enumerate() {
            *at.add(w) = value;
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    #[test]
    fn variants_fit_their_resources() {
        const { assert!(STAGE_BYTES.is_multiple_of(16 * THREADS)) };
        for v in VARIANTS.into_iter().chain(TUNING_VARIANTS) {
            assert!(3 * v.slots * v.times_per_thread <= 96, "{v:?}");
            assert!(THREADS.is_multiple_of(v.chunks_per_row()) && v.chunks_per_row().is_power_of_two());
            assert!(v.slots % 4 == 0 && v.slots % v.pols == 0);
            assert!(TIME_GRANULE.is_multiple_of(v.times_per_thread));
            assert!(v.stage_antennas() >= 1 && STAGE_BYTES.is_multiple_of(v.row_bytes()));
            assert!(v.max_coefficient_antennas() >= v.stage_antennas());
            assert!(
                v.shared_bytes(v.max_coefficient_antennas()) <= STAGES * STAGE_BYTES + MAX_COEFFICIENT_BYTES
            );
            // A 16-byte chunk is wholly inside or wholly past the last time.
            assert!(TIME_GRANULE.is_multiple_of(16 / (2 * v.pols)));
        }
        let names: std::collections::BTreeSet<_> =
            VARIANTS.iter().chain(&TUNING_VARIANTS).map(|v| v.kernel_name()).collect();
        assert_eq!(names.len(), VARIANTS.len() + TUNING_VARIANTS.len());
    }

    #[test]
    fn stage_chunks_cover_each_stage_byte_once() {
        for v in VARIANTS.into_iter().chain(TUNING_VARIANTS) {
            let mut hits = std::vec![0u8; STAGE_BYTES as usize];
            for thread in 0..THREADS {
                for m in 0..v.chunks_per_thread() {
                    let (al, byte) = stage_chunk(v, thread, m);
                    assert!(al < v.stage_antennas() && byte + 16 <= v.row_bytes());
                    // Where the kernel puts it: 16 bytes per thread, THREADS chunks per copy.
                    assert_eq!(al * v.row_bytes() + byte, 16 * (thread + m * THREADS));
                    for b in 0..16 {
                        hits[(al * v.row_bytes() + byte + b) as usize] += 1;
                    }
                }
            }
            assert!(hits.iter().all(|&h| h == 1), "{v:?}");
        }
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
        let v = VARIANTS[3];
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

    #[test]
    fn fma_emulation_rounds_once() {
        // A double-rounding trap: a*b + c lies just above a midpoint of f32 by less than an
        // f64 ulp of the sum; rounding to f64 first would land on the midpoint and round even.
        let a = 1.0 + 2f32.powi(-12);
        let b = 1.0 + 2f32.powi(-12);
        let c = -2f32.powi(-60);
        // a*b = 1 + 2^-11 + 2^-24 (exact): a midpoint of f32 near 1, plus c below it.
        assert_eq!(fma_f32(a, b, c), 1.0 + 2f32.powi(-11));
        assert_eq!(fma_f32(a, b, 0.0), 1.0 + 2f32.powi(-11)); // tie to even
        assert_eq!(fma_f32(a, b, 2f32.powi(-60)), 1.0 + 2f32.powi(-11) + 2f32.powi(-23));
        assert_eq!(fma_f32(3.0, 5.0, -15.0), 0.0);
    }

    #[test]
    fn rint_rounds_ties_to_even() {
        for (x, r) in [(0.5f32, 0.0f32), (1.5, 2.0), (2.5, 2.0), (-0.5, -0.0), (-1.5, -2.0), (-2.5, -2.0)] {
            assert_eq!(rint_f32(x), r);
            assert_eq!(rint_f32(x).to_bits(), r.to_bits(), "{x}");
        }
        assert_eq!(rint_f32(0.499_999_97), 0.0);
        assert_eq!(rint_f32(8_388_607.5), 8_388_608.0);
        assert_eq!(rint_f32(1e30), 1e30);
        assert!(rint_f32(f32::NAN).is_nan());
    }

    /// Error of sincospi against f64 over a dense sweep, in units of the f32 spacing at the
    /// true value (and absolutely, since the rotation adds the errors of both polynomials).
    #[test]
    fn sincospi_is_accurate_to_about_one_ulp() {
        let ulp = |x: f64| {
            let f = (x.abs() as f32).max(f32::MIN_POSITIVE);
            (f32::from_bits(f.to_bits() + 1) - f) as f64
        };
        let (mut worst_ulps, mut worst_abs) = (0.0f64, 0.0f64);
        let mut check = |x: f32| {
            let (s, c) = sincospi(x);
            // Reduce exactly by quarter turns first, so exact zeros stay exact:
            // x = n/2 + r with |r| <= 1/4 (exact in f64), then the angle-sum identities.
            let n = (2.0 * x as f64).round();
            let r = x as f64 - n / 2.0;
            let (sr, cr) = (core::f64::consts::PI * r).sin_cos();
            let (es, ec) = match (n as i64).rem_euclid(4) {
                0 => (sr, cr),
                1 => (cr, -sr),
                2 => (-sr, -cr),
                _ => (-cr, sr),
            };
            for (got, expected) in [(s as f64, es), (c as f64, ec)] {
                worst_ulps = worst_ulps.max((got - expected).abs() / ulp(expected));
                worst_abs = worst_abs.max((got - expected).abs());
            }
            assert!(s.abs() <= 1.0 && c.abs() <= 1.0);
        };
        let n = 1 << 20;
        for i in -n..=n {
            check(i as f32 / n as f32);
            check(i as f32 / n as f32 * 3.0 + 0.1);
        }
        for x in [0.25f32, 0.5, 0.75, 1.0, -0.25, 1e-30, 0.0, -0.0, 2f32.powi(-24), 0.249_999_98] {
            check(x);
        }
        std::println!("sincospi: worst {worst_ulps:.3} ulp, {worst_abs:e} absolute");
        assert!(worst_ulps <= 1.5 && worst_abs <= 1.5 * 2f64.powi(-24), "{worst_ulps} ulp, {worst_abs:e}");
        assert_eq!(sincospi(0.0), (0.0, 1.0));
        assert_eq!(sincospi(0.5), (1.0, -0.0));
        assert_eq!(sincospi(1.0).1, -1.0);
    }

    #[test]
    fn half_turns_keeps_the_phase_exact_for_large_products() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for _ in 0..20000 {
            let channel = (next() % 65536) as u32;
            let d = f32::from_bits((next() as u32 & 0x807f_ffff) | (((next() % 40) as u32 + 107) << 23));
            let exact = (channel as f64 * d as f64).rem_euclid(2.0); // exact: 40-bit product
            let got = half_turns(channel, d) as f64;
            assert!(got.abs() <= 2.0);
            let diff = (got - exact).rem_euclid(2.0);
            let diff = diff.min(2.0 - diff);
            assert!(diff <= 2f64.powi(-24), "channel {channel} d {d}: {got} vs {exact}");
            let w = [0.3f32, -0.7];
            let coefficient = steering_coefficient(w, d, channel);
            let (s, c) = (core::f64::consts::PI * exact).sin_cos();
            let (er, ei) = (w[0] as f64 * c - w[1] as f64 * s, w[0] as f64 * s + w[1] as f64 * c);
            assert!((coefficient[0] as f64 - er).abs() < 3e-7 && (coefficient[1] as f64 - ei).abs() < 3e-7);
        }
    }

    #[test]
    fn gauss_planes_give_the_complex_product() {
        for (w, x) in [
            ([0.5f32, -1.25], [3.0f32, -7.0]),
            ([-2.0, 0.75], [-128.0, 127.0]),
            ([1.0, 0.0], [-128.0, -128.0]),
        ] {
            let [p0, p1, p2] = gauss_planes(w);
            let s = x[0] + x[1];
            let (k0, k1, k2) = (p0 * s, p1 * x[0], p2 * x[1]);
            assert_eq!(k0 + k2, w[0] * x[0] - w[1] * x[1]);
            assert_eq!(k0 + k1, w[0] * x[1] + w[1] * x[0]);
        }
    }

    #[test]
    fn ci8_components_are_exact() {
        for word in [0u32, 0x8080_8080, 0x7f7f_7f7f, 0x0180_ff7f, 0xdead_beef] {
            let flipped = word ^ 0x8080_8080;
            for byte in 0..4 {
                assert_eq!(ci8_component(flipped, byte), (word >> (8 * byte)) as u8 as i8 as f32);
            }
        }
    }

    #[test]
    fn quantise_rounds_even_and_saturates_symmetrically() {
        let cases = [
            (0.5f32, 0, false),
            (1.5, 2, false),
            (-2.5, -2, false),
            (126.5, 126, false),
            (127.49, 127, false),
            (127.5, 127, true),
            (-127.5, -127, true),
            (-127.49, -127, false),
            (1e9, 127, true),
            (-1e30, -127, true),
            (f32::NAN, 0, false),
        ];
        for (v, q, s) in cases {
            assert_eq!(quantise(v), (q, s), "{v}");
        }
    }

    proptest! {
        #[test]
        fn prop_fma_is_correctly_rounded(a in -1e6f32..1e6, b in -1e6f32..1e6, c in -1e12f32..1e12) {
            // std's mul_add is the C library's correctly rounded fmaf.
            prop_assert_eq!(fma_f32(a, b, c).to_bits(), a.mul_add(b, c).to_bits());
        }

        #[test]
        fn prop_rint_matches_f64(x in -1e8f32..1e8) {
            prop_assert_eq!(rint_f32(x) as f64, (x as f64).round_ties_even());
        }

        #[test]
        fn prop_quantise_matches_the_rule(v in -300.0f32..300.0) {
            let r = (v as f64).round_ties_even();
            prop_assert_eq!(quantise(v), (r.clamp(-127.0, 127.0) as i8, r.abs() > 127.0));
        }

        #[test]
        fn prop_ci8_words(word in any::<u32>()) {
            let flipped = word ^ 0x8080_8080;
            for byte in 0..4 {
                prop_assert_eq!(ci8_component(flipped, byte), (word >> (8 * byte)) as u8 as i8 as f32);
            }
        }
    }
}
