//! Baseband beamformer (B-engine) on int8 tensor cores, after K. M. Smith, "CHORD 8-bit baseband
//! beamformer", CHORD design note (2022) (its equations and sections are cited as "the note's").
//!
//! Computes, for frequency f, polarisation p, beam beta and time tau, exactly:
//! `J[beta][f][p][tau] = Q4( round( (sum_d A[f][p][beta][d] * E[tau][f][p][d]) / 2^s[f][p][beta] ) )`
//! where round is `(x + 2^(s-1)) >> s` (the note's footnote 1; `x` for s = 0) and Q4 saturates re
//! and im to `[-7, 7]` (never -8).
//!
//! Layouts (bytes; ci4 = one byte, re in the low nibble; ci8 = two bytes, re first):
//! E ci4 `[tau][f][p][d]`; A ci8 `[f][p][beta][d]`; s i32 `[f][p][beta]`; J ci4 `[beta][f][p][tau]`.
//!
//! Design (the note's secs. 2-6, on m16n8k32 rather than m8n8k16, which Hopper issues at a
//! fraction of the rate):
//! - One warp per 8 beams holds its whole `8 x D` slice of A in registers for as long as the
//!   block stays on one (f, p) (the note's eq. 9: `B D / 2` registers per block). So `W_d = 1`: no
//!   cross-warp reduction (the note's eq. 19-24 16-bit partial sums, which change low bits,
//!   do not exist here), and each warp reads all of E from shared memory, which costs one
//!   byte per 64 MMA operations (well inside the shared-memory bandwidth).
//! - MMA roles: E is the 16 x 32 row operand (16 times x 32 dishes), A the 32 x 8 column
//!   operand (32 dishes x 8 beams), J the 16 x 8 result (times x beams). With the dish order
//!   of [`fragment_dish`] (the note's eq. 12 idea), a lane's row fragment for two k-steps is
//!   one 16-byte `ld.shared` from the natural `[tau][d]` layout, conflict-free with rows of
//!   [`smem_row_bytes`] (the note's eq. 13 padding), and its A fragment one 32-byte global load:
//! ```text
//! [(16 x 32) ci4 E_tau,k]  b0 b1 <-> k0 k1   r0 r1 <-> tau3 k4   t0 t1 t2 t3 t4 <-> k2 k3 tau0 tau1 tau2
//! [(32 x 8) int8 A_k,beta] b0 b1 <-> k0 k1   r0 <-> k4           t0 t1 t2 t3 t4 <-> k2 k3 beta0 beta1 beta2
//! [(16 x 8) int32 J_tau,beta] r0 r1 <-> beta0 tau3               t0 t1 t2 t3 t4 <-> beta1 beta2 tau0 tau1 tau2
//! ```
//! - int4 is never fed to an int4 MMA (emulated on Hopper). Each E word gives two s8 operands
//!   with one single-constant `lop3` each: `v = w ^ 0x08..` is `16 Ei + Er + 8` and
//!   `h = w & 0xf0..` is `16 Ei` ([`real_offset_operand`], [`imaginary_operand`]; the
//!   `Er + 8` operand `(w ^ 0x08..) & 0x0f..` would need two, as `lop3` takes one immediate).
//!   Four s8 MMAs per complex product, none on a negated value (so E = -8 and A = -128 are
//!   exact): with `Q1 = A_re . v`, `Q2 = A_im . v`, `Q3 = A_re . h`, `Q4 = A_im . h`,
//!   `Re = Q1 - Q3 - Q4 / 16 - 8 sum_d A_re` and `Im = Q2 - Q4 + Q3 / 16 - 8 sum_d A_im`
//!   ([`combine`]): the divisions by 16 are exact shifts, and the per-beam constants
//!   ([`beam_constants`]) come with the weights. All partial sums are exact int32
//!   (`|x| <= 2 D 128 * 128 < 2^26`).
//! - E streams through a ring of [`STAGES`] shared-memory stages of [`stage_rows`] rows via
//!   `cp.async`. Blocks are persistent: block i takes a contiguous run of 128-sample work
//!   items (f, p, chunk) and reloads A when its (f, p) changes.
//! - Output (the note's sec. 6): each 16-time block leaves one byte per (beam parity, tau3) in one
//!   32-bit word per lane (staged in shared memory, [`OUT_STAGING_BYTES`]); after 128 samples
//!   the eight words are loaded back and three warp transposes and a 4 x 4 byte transpose
//!   ([`transpose_output`]) give each lane 16 consecutive samples of one beam, stored with
//!   16-byte stores of 128-byte runs.
//!
//! Kernels (module `baseband_beamformer`, sm_80 PTX for every supported GPU):
//! `baseband_beamform_d<D>_w<W>` takes D dishes (the A slice's registers are compile-time)
//! and blocks of at most W warps (8 W beams), under the register cap [`max_registers`]`(W)`.
//! The instances are listed once (`bb_instances!`), which makes both the entry points
//! (`device`) and the registry ([`INSTANCES`], [`KERNELS`]); [`instance`] selects one and
//! [`launch_split`] says when a block needs two.
//!
//! Files: `layout` (the pure shared-memory, fragment, operand and output functions the
//! host's tests share), `device` (the entry points and the kernel body).

/// Polarisations (p in {0, 1}, each processed independently).
pub const POLS: u32 = 2;
/// Time samples per output run and per work item; T must be a multiple of it.
pub const CHUNK: u32 = 128;
/// Dishes per register group of a warp's A slice (two m16n8k32 k-steps).
pub const DISH_GROUP: u32 = 64;
/// Beams per warp (the MMA's n = 8).
pub const BEAMS_PER_WARP: u32 = 8;
/// Fewest dishes D: one [`DISH_GROUP`]. D must be a multiple of [`DISH_GROUP`] in
/// `MIN_DISHES..=MAX_DISHES`, one compiled instance per value.
pub const MIN_DISHES: u32 = 64;
/// Most dishes D: 16 [`DISH_GROUP`]s.
pub const MAX_DISHES: u32 = 1024;
/// Most beams B per launch: 16 warps of [`BEAMS_PER_WARP`] (and [`MAX_BEAMS_TIMES_DISHES`]
/// limits B further for D > 512). B must be a positive multiple of [`BEAMS_PER_WARP`].
pub const MAX_BEAMS: u32 = 128;
/// Largest `beams * dishes`: A must fit in registers (the note's eq. 9, `B D / 2` per block).
pub const MAX_BEAMS_TIMES_DISHES: u32 = 65536;
/// Shared-memory stages in the cp.async ring.
pub const STAGES: u32 = 3;

use crate::modules::{Arch, Family, KernelSpec};

mod layout;
pub use layout::*;

/// Every instance of the kernel, written once: `$callback!` gets (entry point, dishes, most
/// warps) for each. The A slice's register count is compile-time, so there is one instance
/// per dish count; and the register cap that lets a block fit one SM depends on its warps, so
/// dish counts whose blocks may exceed 12 warps have a second, tighter-capped instance
/// ([`max_registers`]): a 12-warp block (CHORD's 96 beams) then keeps 168 registers instead
/// of the 128 a 16-warp block allows. Where the weights leave too few registers under a cap
/// (576 dishes at 128, 832 and 896 at 168), the larger blocks (104 or 112 beams at 576
/// dishes, 72 at 832 or 896) run as two launches of fewer warps ([`launch_split`]).
/// [`INSTANCES`], [`KERNELS`] and the entry points are all made from this list.
macro_rules! bb_instances {
    ($callback:ident) => {
        $callback!(
            (baseband_beamform_d64_w12, 64, 12),
            (baseband_beamform_d64_w16, 64, 16),
            (baseband_beamform_d128_w12, 128, 12),
            (baseband_beamform_d128_w16, 128, 16),
            (baseband_beamform_d192_w12, 192, 12),
            (baseband_beamform_d192_w16, 192, 16),
            (baseband_beamform_d256_w12, 256, 12),
            (baseband_beamform_d256_w16, 256, 16),
            (baseband_beamform_d320_w12, 320, 12),
            (baseband_beamform_d320_w16, 320, 16),
            (baseband_beamform_d384_w12, 384, 12),
            (baseband_beamform_d384_w16, 384, 16),
            (baseband_beamform_d448_w12, 448, 12),
            (baseband_beamform_d448_w16, 448, 16),
            (baseband_beamform_d512_w12, 512, 12),
            (baseband_beamform_d512_w16, 512, 16),
            (baseband_beamform_d576_w12, 576, 12),
            (baseband_beamform_d640_w12, 640, 12),
            (baseband_beamform_d704_w12, 704, 12),
            (baseband_beamform_d768_w12, 768, 12),
            (baseband_beamform_d832_w8, 832, 8),
            (baseband_beamform_d896_w8, 896, 8),
            (baseband_beamform_d960_w8, 960, 8),
            (baseband_beamform_d1024_w8, 1024, 8),
        );
    };
}

/// One instance of the kernel: its dish count, the most warps its blocks may have, and its
/// registry entry (threads: the largest block, `32 * warps`; register cap
/// [`max_registers`]`(warps)`; shared memory depends on the block and the device,
/// [`smem_bytes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instance {
    /// Dish count D the instance is compiled for (its A slice is `8 x D` ci8 per warp, held
    /// in `D / 8` registers per lane); a multiple of [`DISH_GROUP`].
    pub dishes: u32,
    /// Most warps a block of this instance may have (8 beams each): 8, 12 or 16. Launches
    /// may use fewer ([`Instance::takes`]).
    pub warps: u32,
    /// The registry entry: entry point `baseband_beamform_d{dishes}_w{warps}`, threads
    /// `32 * warps`, register cap [`max_registers`]`(warps)`.
    pub spec: KernelSpec,
}

impl Instance {
    const fn new(name: &'static str, dishes: u32, warps: u32) -> Instance {
        let spec = KernelSpec::new(name, Family::BasebandBeamformer, Arch::Sm80)
            .threads(32 * warps)
            .max_registers(max_registers(warps));
        Instance { dishes, warps, spec }
    }

    /// Whether this instance runs a block of `warps` warps for `dishes` dishes.
    pub const fn takes(&self, dishes: u32, warps: u32) -> bool {
        self.dishes == dishes && warps >= 1 && warps <= self.warps && warps <= max_warps(dishes)
    }
}

macro_rules! bb_table {
    ($(($name:ident, $dishes:literal, $warps:literal)),* $(,)?) => {
        /// Every instance of the kernel (`bb_instances!`), by dishes, then most warps.
        pub const INSTANCES: &[Instance] = &[$(Instance::new(stringify!($name), $dishes, $warps)),*];

        /// The family's kernels: every entry point of its PTX module, with what `build.rs`
        /// adds to each (register cap) and what the host launches it with.
        pub const KERNELS: &[KernelSpec] = &[$(Instance::new(stringify!($name), $dishes, $warps).spec),*];
    };
}
bb_instances!(bb_table);

// After the instance list, which the entry points are made from.
#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod device;
#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
pub use device::*;

/// The instance for `dishes` and a block of `warps` warps: the most generously capped one
/// whose blocks may have that many warps (`None` if no instance takes such a block).
pub fn instance(dishes: u32, warps: u32) -> Option<&'static Instance> {
    INSTANCES.iter().find(|k| k.takes(dishes, warps))
}

/// How a launch of `beams` beams is split: `(first beam, beams)` per kernel launch. One
/// launch when an instance takes the whole block; otherwise (only the cases in
/// `bb_instances!`' comment) halves of whole warps, the second reading E once more.
pub fn launch_split(dishes: u32, beams: u32) -> [(u32, u32); 2] {
    let warps = beams / BEAMS_PER_WARP;
    if instance(dishes, warps).is_some() || warps < 2 {
        [(0, beams), (beams, 0)]
    } else {
        let first = warps.div_ceil(2) * BEAMS_PER_WARP;
        [(0, first), (first, beams - first)]
    }
}

/// Most warps a block for `dishes` can have: `beams <= 128` and `beams * dishes <= 65536`.
pub const fn max_warps(dishes: u32) -> u32 {
    let by_registers = MAX_BEAMS_TIMES_DISHES / dishes / BEAMS_PER_WARP;
    let by_beams = MAX_BEAMS / BEAMS_PER_WARP;
    if by_registers < by_beams {
        by_registers
    } else {
        by_beams
    }
}

/// Register cap (`.maxnreg`) of an instance whose blocks have at most `warps` warps: the
/// largest multiple of 8 that fits them in one SM. Each of the 4 schedulers has a quarter
/// of the 64K registers and gets every fourth warp, so `ceil(warps / 4)` warps share 16K.
pub const fn max_registers(warps: u32) -> u32 {
    let per_scheduler = warps.div_ceil(4);
    let fit = 16384 / (32 * per_scheduler) / 8 * 8;
    if fit > 255 {
        255
    } else {
        fit
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    pub(super) fn all_dishes() -> impl Iterator<Item = u32> {
        (1..=16).map(|g| DISH_GROUP * g)
    }

    #[test]
    fn kernels_cover_every_supported_block() {
        for d in all_dishes() {
            for warps in 1..=max_warps(d) {
                let [(_, first), (start, second)] = launch_split(d, warps * BEAMS_PER_WARP);
                assert_eq!((start, first + second), (first, warps * BEAMS_PER_WARP));
                if second > 0 {
                    assert!(instance(d, first / BEAMS_PER_WARP).is_some());
                    assert!(instance(d, second / BEAMS_PER_WARP).is_some());
                    assert!(d == 576 || d == 832 || d == 896, "split at d = {d}");
                    continue;
                }
                let k = instance(d, warps).expect("an instance");
                assert_eq!(k.spec.name, std::format!("baseband_beamform_d{d}_w{}", k.warps));
                assert_eq!(k.spec.threads, Some(32 * k.warps));
                assert_eq!(k.spec.max_registers, Some(max_registers(k.warps)));
                // The block fits one SM under the instance's cap.
                assert!(warps.div_ceil(4) * 32 * max_registers(k.warps) <= 16384);
            }
            assert_eq!(instance(d, max_warps(d) + 1), None);
            assert_eq!(instance(d, 0), None);
            assert_eq!(launch_split(d, 8), [(0, 8), (8, 0)]);
        }
        assert_eq!(instance(100, 1), None);
        assert_eq!(instance(0, 1), None);
        assert_eq!(instance(512, 12).map(|k| k.spec.name), Some("baseband_beamform_d512_w12"));
        assert_eq!(instance(512, 13).map(|k| k.spec.name), Some("baseband_beamform_d512_w16"));
    }

    /// Every instance is selected by some supported block, and the registry is the instance
    /// list.
    #[test]
    fn every_instance_is_selected_and_registered() {
        for k in INSTANCES {
            assert!((1..=max_warps(k.dishes)).any(|w| instance(k.dishes, w) == Some(k)), "{}", k.spec.name);
        }
        assert_eq!(KERNELS.len(), INSTANCES.len());
        assert!(KERNELS.iter().zip(INSTANCES).all(|(s, k)| *s == k.spec));
    }

    #[test]
    fn largest_blocks_fit_the_register_file_and_hold_their_weights() {
        for d in all_dishes() {
            let warps = max_warps(d);
            assert!((1..=16).contains(&warps));
            let beams = warps * BEAMS_PER_WARP;
            assert!(beams * d <= MAX_BEAMS_TIMES_DISHES && beams <= MAX_BEAMS);
            // One more warp would break a limit.
            assert!((beams + 8) * d > MAX_BEAMS_TIMES_DISHES || beams + 8 > MAX_BEAMS);
            let cap =
                max_registers(INSTANCES.iter().filter(|k| k.dishes == d).map(|k| k.warps).max().unwrap());
            // A slice: 8 beams x d dishes x (re, im) bytes over 32 lanes, plus working room.
            let weight_registers = 8 * d * 2 / 4 / 32;
            assert!(weight_registers + 48 <= cap, "d = {d}: {weight_registers} weight registers, cap {cap}");
        }
        assert_eq!(max_registers(16), 128);
        assert_eq!(max_registers(12), 168);
        assert_eq!(max_registers(8), 255);
    }
}
