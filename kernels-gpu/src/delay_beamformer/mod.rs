//! Delay beamformer (MeerKAT-style B-engine, after the MeerKAT correlator-beamformer design's
//! "Beamforming" sections "GPU kernel", "Higher beam counts" and "Dithering"): float32
//! tied-array beams steered by per-antenna delays.
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
//! kernel (three FMAs per beam and antenna-sample plus the int8 conversions need about as
//! many issue slots as the copy bandwidth delivers antenna-samples), so the sum runs on int8
//! tensor cores instead, exactly, and only the end is float:
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
//! - One block handles one channel (as in the MeerKAT design), one batch of 8 beam slots ([`VARIANTS`]) and a run
//!   of time tiles of 256 samples; each of its 4 warps owns 64 times (4 MMA row tiles) and
//!   keeps `4 x 2 x 3` int32 accumulator fragments (96 registers). Beams beyond 8 go to
//!   further batches (grid x; the MeerKAT design's outer beam loop, run by concurrent blocks so the
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

//!
//! Kernels (module `delay_beamformer`, sm_80 PTX for every supported GPU):
//! `delay_beamformer_p<P>` beamforms input of P polarisations (one [`Variant`] each, listed
//! once in `delay_instances!`, which makes the entry points and their registry entries);
//! `delay_beamformer_dither_init` initialises the dither states and
//! `delay_beamformer_dither_draws` (tests) draws from them.
//!
//! Files: `layout` (the variants' shared-memory and fragment layouts, the fixed-point limbs,
//! the time and state indices), `float` (the f32 arithmetic shared bit for bit by the host
//! and the device: FMA, `sincospi`, the steering phase, the quantiser), `device` (the
//! beamformer's entry points and body), `dither` (the dither-state kernels).

use crate::modules::{Arch, Family, KernelSpec};

mod float;
pub use float::*;
mod layout;
pub use layout::*;

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
/// Register cap of the beamformer kernels: blocks of [`THREADS`] = 128 threads run 3 per SM
/// at up to 170 registers (65536 / (3 x 128)), so 168, the largest multiple of the
/// allocation granule of 8; uncapped, ptxas gives the sm_80 kernels 178, which fits only 2.
pub const MAX_REGISTERS: u32 = 168;
/// Threads per block the host launches the dither-state kernels with (any block size works:
/// one thread per state).
pub const DITHER_THREADS: u32 = 256;

/// A compiled kernel shape and its entry point: beam slots per batch, time samples per thread
/// (in the epilogue), input polarisations. Two polarisations split the slots into halves. The
/// fields are private, so the only values are those of [`VARIANTS`], for which every method
/// of `layout` is exact in u32 (checked by `variants_fit_their_resources`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    slots: u32,
    times_per_thread: u32,
    pols: u32,
    spec: KernelSpec,
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
    /// The variant's kernel.
    pub const fn spec(self) -> KernelSpec {
        self.spec
    }
}

/// Every variant, written once: `$callback!` gets (entry point, input polarisations) for each.
/// [`VARIANTS`], [`KERNELS`] and the entry points are all made from this list.
macro_rules! delay_instances {
    ($callback:ident) => {
        $callback!((delay_beamformer_p1, 1), (delay_beamformer_p2, 2));
    };
}

/// The variant for `pols` polarisations: 8 beam slots (one polarisation: 8 beams of it; two:
/// 4 of each), 2 epilogue samples per thread, so a tile is 256 times.
const fn variant(name: &'static str, pols: u32) -> Variant {
    let spec = KernelSpec::new(name, Family::DelayBeamformer, Arch::Sm80)
        .threads(THREADS)
        .max_registers(MAX_REGISTERS);
    Variant { slots: 8, times_per_thread: 2, pols, spec }
}

/// The dither-state initialisation kernel.
pub const DITHER_INIT: KernelSpec =
    KernelSpec::new("delay_beamformer_dither_init", Family::DelayBeamformer, Arch::Sm80)
        .threads(DITHER_THREADS)
        .shared_bytes(0);
/// The test kernel drawing from dither states.
pub const DITHER_DRAWS: KernelSpec =
    KernelSpec::new("delay_beamformer_dither_draws", Family::DelayBeamformer, Arch::Sm80)
        .threads(DITHER_THREADS)
        .shared_bytes(0);

macro_rules! delay_table {
    ($(($name:ident, $pols:literal)),* $(,)?) => {
        /// The variants, one per polarisation count (`VARIANTS[p - 1]` for p polarisations).
        pub const VARIANTS: [Variant; 2] = [$(variant(stringify!($name), $pols)),*];

        /// The family's kernels: every entry point of its PTX module, with what `build.rs`
        /// adds to each (register cap) and what the host launches it with.
        pub const KERNELS: &[KernelSpec] =
            &[$(variant(stringify!($name), $pols).spec,)* DITHER_INIT, DITHER_DRAWS];
    };
}
delay_instances!(delay_table);

// After the instance list, which the entry points are made from.
#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod device;
#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
pub use device::*;
#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod dither;
#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
pub use dither::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_are_indexed_by_polarisations_and_registered() {
        for (i, v) in VARIANTS.into_iter().enumerate() {
            assert_eq!(v.pols() as usize, i + 1);
            assert_eq!(KERNELS[i], v.spec());
            assert_eq!(v.spec().threads, Some(THREADS));
        }
        assert_eq!(KERNELS.len(), VARIANTS.len() + 2);
    }
}
