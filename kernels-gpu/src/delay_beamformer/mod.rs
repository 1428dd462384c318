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
//! Why it is shaped this way. At MeerKAT's 8 beams the FP32 pipe, not DRAM, limits a float
//! kernel on the H200 (three FMAs per beam and antenna-sample plus the int8 conversions need
//! about as many issue slots as the copy bandwidth delivers antenna-samples), so the sum runs
//! on int8 tensor cores instead, exactly, and only the end is float:
//! - Each steering coefficient, relative to its beam's scale `s_b = max_a (|Re w| + |Im w|)`
//!   (which bounds `|Re W|` and `|Im W|` for every channel, as `exp(j pi c d)` has modulus 1),
//!   becomes the 23-bit fixed-point number `F = rint(W 2^22 / s_b)` ([`fixed_point`]), split
//!   into three balanced int8 limbs ([`limbs`]). The input is int8 already. Three s8
//!   m16n8k32 MMAs per (16 times x 16 antennas x 4 beams) give the limb sums exactly in
//!   int32, and `y = f32(2^16 acc0 + 2^8 acc1 + acc2) * s_b 2^-22` ([`combine_limbs`]) rounds
//!   twice: the result is as accurate as an f32 sum (coefficients to 2^-23 of the beam's
//!   largest weight). Complex products are real 2 x 2 blocks: the MMA's k runs over
//!   (antenna, re/im) as [`k_input`] maps it, n over (beam, re/im), and B holds
//!   `[[Re W, Im W], [-Im W, Re W]]` per antenna and beam, so no input is negated.
//! - One block handles one channel (seed), one batch of 8 beam slots ([`VARIANTS`]) and a run
//!   of time tiles of 256 samples; each of its 4 warps owns 64 times (4 MMA row tiles) and
//!   keeps `4 x 2 x 3` int32 accumulator fragments (96 registers). Beams beyond 8 go to
//!   further batches (grid x; the seed's outer beam loop, run by concurrent blocks so the
//!   re-read tile comes from L2).
//! - Input streams through a `cp.async` ring of [`STAGES`] stages of 16 antennas
//!   (two polarisations) or 32 (one) of one tile, rows padded by [`ROW_PAD`] so the A
//!   fragment loads ([`a_word_offset`], two 4-byte loads and a `prmt` per register) are
//!   bank-conflict free. The coefficients of a batch of antennas are computed once per block
//!   (all antennas when they fit in [`MAX_COEFFICIENT_BYTES`]; otherwise per batch and tile)
//!   into B fragments in shared memory, with our own f32 `sincospi` (no libm on the device).
//! - After a tile's last antenna the warps write `y` to a staging area `[slot][time]`
//!   ([`Variant::slot_stride`]), and each thread then owns `times_per_thread` consecutive
//!   samples of every slot for dither, quantisation and the stores, as before.
//!
//! Offsets: input, output and dither-state offsets are formed in 64 bits (a valid launch
//! reaches 2^50 input bytes: 65535 antennas x 2 polarisations x 2^32 samples x 2 bytes);
//! the 32-bit products are bounded by the host's validation: `antenna * beams + beam` below
//! 65535^2, `tile * 256 + time` below 2^32 (channels x times fits u32), absolute channels
//! below 2^24, dither states below 2^32 and time groups (grid y) at most 65535.
//!
//! Non-finite values: the host rejects non-finite `w` and `d`, weights whose beam scale
//! `|Re w| + |Im w|` overflows f32 and delays whose `c' d` overflows f32 (every step of
//! [`half_turns`] is then finite), so the beam sums are finite or, for huge weights, +-inf
//! after the final scaling. [`quantise`] counts +-inf (to +-127) and NaN (to 0) as clipped.
//!
//! Dither: each thread owns one XORWOW state ([`crate::xorwow`]), kept in device memory
//! between launches at [`state_index`]; it draws, per time tile, for each dithered slot in
//! slot order, for each of its samples in time order, re then im, only for samples inside
//! the launch. Dither is added in f32 before quantisation.

use crate::packing::saturate_symmetric;

/// Threads per block (every variant).
pub const THREADS: u32 = 128;
/// Input bytes of one stage (before row padding).
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
/// Antennas per MMA k-step (k = 32 int8 values: 16 complex samples).
pub const K_STEP_ANTENNAS: u32 = 16;
/// MMA row tiles (16 times each) per warp.
pub const M_TILES: u32 = 4;
/// Fixed-point bits of a coefficient relative to its beam's scale ([`fixed_point`]).
pub const FIXED_BITS: u32 = 22;
/// int8 limbs per coefficient ([`limbs`]).
pub const LIMBS: u32 = 3;
/// Bytes of one 32 x 8 int8 B fragment in shared memory (8 per lane, `[lane][register]`).
pub const FRAGMENT_BYTES: u32 = 256;
/// Padding after each antenna row of a stage, for conflict-free A fragment loads.
pub const ROW_PAD: u32 = 16;

/// A compiled kernel shape: beam slots per batch, time samples per thread (in the epilogue),
/// input polarisations. Two polarisations split the slots into halves. The fields are private,
/// so the only values are those of [`VARIANTS`], for which every method below is exact in
/// u32 (checked by `variants_fit_their_resources`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    slots: u32,
    times_per_thread: u32,
    pols: u32,
}

impl Variant {
    /// Beam slots per batch.
    pub const fn slots(self) -> u32 {
        self.slots
    }
    /// Time samples per thread in the epilogue.
    pub const fn times_per_thread(self) -> u32 {
        self.times_per_thread
    }
    /// Input polarisations.
    pub const fn pols(self) -> u32 {
        self.pols
    }
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
    pub const fn kernel_name(self) -> &'static str {
        match self.pols {
            1 => "delay_beamformer_p1",
            _ => "delay_beamformer_p2",
        }
    }
}

/// The variants, one per polarisation count: 8 beam slots (one polarisation: 8 beams of it;
/// two: 4 of each), 2 epilogue samples per thread, so a tile is 256 times.
pub const VARIANTS: [Variant; 2] =
    [Variant { slots: 8, times_per_thread: 2, pols: 1 }, Variant { slots: 8, times_per_thread: 2, pols: 2 }];

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

/// Q of the module comment: round to nearest even, saturate to [-127, 127]. Returns the
/// value and whether it was clipped. Non-finite values count as clipped: +-infinity gives
/// +-127 (reached for weights near `f32::MAX`), NaN gives 0 (not reached from checked
/// steering, see the module comment, but the rule is total).
#[inline(always)]
pub fn quantise(v: f32) -> (i8, bool) {
    // cvt.rni.s32.f32 is this rounding with the same saturation and NaN -> 0 in one instruction.
    #[cfg(target_arch = "nvptx64")]
    let r = crate::intrinsics::cvt_rni_s32_f32(v);
    #[cfg(not(target_arch = "nvptx64"))]
    let r = rint_f32(v) as i32; // Rust's cast saturates and maps NaN to 0
    let q = saturate_symmetric(r, 127);
    (q as i8, q != r || v.is_nan())
}

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
pub use device::*;

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod device {
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

    macro_rules! delay_beamformer_kernel {
        ($name:ident, $pols:literal) => {
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
        };
    }

    delay_beamformer_kernel!(delay_beamformer_p1, 1);
    delay_beamformer_kernel!(delay_beamformer_p2, 2);

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

use crate::modules::{Arch, Family, KernelSpec};

/// The family's kernels: every entry point of its PTX modules, with what `build.rs` adds to
/// each (register cap, cluster shape) and what the host launches it with.
pub const KERNELS: &[KernelSpec] = &[
    KernelSpec::new("delay_beamformer_dither_draws", Family::DelayBeamformer, Arch::Sm80),
    KernelSpec::new("delay_beamformer_dither_init", Family::DelayBeamformer, Arch::Sm80),
    KernelSpec::new("delay_beamformer_p1", Family::DelayBeamformer, Arch::Sm80).max_registers(168),
    KernelSpec::new("delay_beamformer_p2", Family::DelayBeamformer, Arch::Sm80).max_registers(168),
];

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::layout::{Location, M16N8K32_S32_C, M16N8K32_S8_A, M16N8K32_S8_B};
    use proptest::prelude::*;
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
        let names: std::collections::BTreeSet<_> = VARIANTS.iter().map(|v| v.kernel_name()).collect();
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
            (f32::INFINITY, 127, true),
            (f32::NEG_INFINITY, -127, true),
            (f32::NAN, 0, true),
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
        fn prop_limbs_of_fixed_point_coefficients(w in -1.0f32..1.0, scale in 1e-3f32..1e3, x in -128i32..128) {
            // A coefficient at most its scale becomes at most 2^22 (+1 ulp) and three int8 limbs
            // whose product sums with any input are exact.
            let unit = scale / (1u32 << FIXED_BITS) as f32;
            let f = fixed_point(w * scale, 1.0 / unit);
            prop_assert!(f.abs() <= (1 << FIXED_BITS) + 2);
            let l = limbs(f);
            prop_assert!(l[0].unsigned_abs() <= 65);
            let acc = l.map(|d| d as i32 * x);
            prop_assert_eq!(((acc[0] as i64) << 16) + ((acc[1] as i64) << 8) + acc[2] as i64, f as i64 * x as i64);
            let y = combine_limbs(acc, unit) as f64;
            let exact = (w * scale) as f64 * x as f64;
            prop_assert!((y - exact).abs() <= scale as f64 * 128.0 * 2f64.powi(-22) + exact.abs() * 2f64.powi(-23));
        }
    }
}
