//! The baseband beamformer's configuration: validation, sizes and indices.
use super::{CHUNK, POLS};
use crate::error::{Error, Result};
use crate::size;
use crate::Shift;
use num_complex::Complex;
use radio_kernels_gpu::baseband_beamformer as layout;

/// CHORD's sampling time, 4096 / 2.4 GHz (about 1.7 us).
pub const SAMPLE_TIME_S: f64 = 4096.0 / 2.4e9;

/// What one launch beamforms. Polarisations are fixed at [`POLS`] = 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BeamformerConfig {
    /// Dishes D: a multiple of 64 in 64..=1024.
    pub dishes: u32,
    /// Beams B: a multiple of 8 in 8..=128, with `B * D <= 65536`.
    pub beams: u32,
    /// Frequency channels F, 1..=65535.
    pub freqs: u32,
    /// Time samples T per launch: a positive multiple of [`CHUNK`] (128).
    pub times: u32,
}

impl BeamformerConfig {
    /// Full CHORD per GPU: D = 512, B = 96, F = 16.
    pub const fn chord(times: u32) -> BeamformerConfig {
        BeamformerConfig { dishes: 512, beams: 96, freqs: 16, times }
    }
    /// CHORD pathfinder: D = 64, B = 16, F = 128.
    pub const fn pathfinder(times: u32) -> BeamformerConfig {
        BeamformerConfig { dishes: 64, beams: 16, freqs: 128, times }
    }

    /// Checks every parameter; the first violation is returned as `InvalidConfig`.
    pub fn validate(&self) -> Result<()> {
        let bad = |message: String| Err(Error::InvalidConfig(message));
        let (d, b) = (self.dishes, self.beams);
        if !(layout::MIN_DISHES..=layout::MAX_DISHES).contains(&d) || !d.is_multiple_of(layout::DISH_GROUP) {
            return bad(format!("dishes must be a multiple of 64 in 64..=1024, got {d}"));
        }
        if b == 0 || b > layout::MAX_BEAMS || !b.is_multiple_of(layout::BEAMS_PER_WARP) {
            return bad(format!("beams must be a multiple of 8 in 8..=128, got {b}"));
        }
        if b * d > layout::MAX_BEAMS_TIMES_DISHES {
            return bad(format!(
                "beams * dishes = {b} * {d} exceeds 65536: the beam matrix must fit in registers (B D / 2 per block)"
            ));
        }
        if self.freqs == 0 || self.freqs > 65535 {
            return bad(format!("freqs must be 1..=65535, got {}", self.freqs));
        }
        if self.times == 0 || !self.times.is_multiple_of(CHUNK) {
            return bad(format!(
                "times per launch must be a positive multiple of {CHUNK}, got {}",
                self.times
            ));
        }
        if self.items() > u32::MAX as u64 {
            return bad(format!(
                "freqs * 2 * times / 128 = {} work items exceeds 2^32 - 1, the kernel's 32-bit item index",
                self.items()
            ));
        }
        // Every field is in range here, so every size fits in u64 (the kernels index E, A and
        // J with 64-bit offsets); on hosts with a narrower usize they may not.
        for (what, factors, element_bytes) in [
            ("E", [self.times, self.freqs, POLS, self.dishes], 1u128),
            ("J", [self.beams, self.freqs, POLS, self.times], 1),
            ("A", [self.freqs, POLS, self.beams, self.dishes], 2),
            ("s", [self.freqs, POLS, self.beams, 1], 4),
        ] {
            let bytes = factors.iter().map(|&f| f as u128).product::<u128>() * element_bytes;
            if usize::try_from(bytes).is_err() {
                return bad(format!("{what} would hold {bytes} bytes, more than this host can address"));
            }
        }
        Ok(())
    }

    /// 128-sample work items of one launch: `F * POLS * T / 128`.
    pub fn items(&self) -> u64 {
        self.freqs as u64 * POLS as u64 * (self.times / CHUNK) as u64
    }
    /// E size: number of [`Ci4`](crate::Ci4) values (one byte each), `[tau][f][p][d]`. This
    /// and the other size helpers are exact
    /// whenever the size fits in `usize` (every configuration `validate()` accepts) and
    /// saturate at `usize::MAX` otherwise.
    pub fn e_len(&self) -> usize {
        size::product(&[self.times, self.freqs, POLS, self.dishes])
    }
    /// A size: number of `Complex<i8>` values, `[f][p][beta][d]`.
    pub fn weights_len(&self) -> usize {
        size::product(&[self.freqs, POLS, self.beams, self.dishes])
    }
    /// Number of [`Shift`] values, `[f][p][beta]`.
    pub fn shifts_len(&self) -> usize {
        size::product(&[self.freqs, POLS, self.beams])
    }
    /// J size: number of [`Ci4`](crate::Ci4) values (one byte each), `[beta][f][p][tau]`.
    pub fn output_len(&self) -> usize {
        size::product(&[self.beams, self.freqs, POLS, self.times])
    }
    /// Position of `E[tau][f][p][d]`. This and the other index helpers compute exactly in
    /// u128: meaningful for in-range arguments of a valid configuration, they saturate at
    /// `usize::MAX` where the position does not fit in `usize`.
    pub fn e_index(&self, tau: u32, f: u32, p: u32, d: u32) -> usize {
        size::row_major(&[(tau, 1), (f, self.freqs), (p, POLS), (d, self.dishes)])
    }
    /// Position of `A[f][p][beta][d]`.
    pub fn weight_index(&self, f: u32, p: u32, beam: u32, d: u32) -> usize {
        size::row_major(&[(f, 1), (p, POLS), (beam, self.beams), (d, self.dishes)])
    }
    /// Position of `s[f][p][beta]`.
    pub fn shift_index(&self, f: u32, p: u32, beam: u32) -> usize {
        size::row_major(&[(f, 1), (p, POLS), (beam, self.beams)])
    }
    /// Position of `J[beta][f][p][tau]`.
    pub fn output_index(&self, beam: u32, f: u32, p: u32, tau: u32) -> usize {
        size::row_major(&[(beam, 1), (f, self.freqs), (p, POLS), (tau, self.times)])
    }
    /// Useful operations of one launch: 8 per complex multiply-accumulate, `8 P F B D T`.
    pub fn useful_ops(&self) -> f64 {
        8.0 * POLS as f64 * self.freqs as f64 * self.beams as f64 * self.dishes as f64 * self.times as f64
    }
    /// Telescope time one launch covers: `T * 4096 / 2.4 GHz`.
    pub fn real_time_s(&self) -> f64 {
        self.times as f64 * SAMPLE_TIME_S
    }

    pub(super) fn check_len(&self, what: &'static str, expected: usize, actual: usize) -> Result<()> {
        if expected == actual {
            Ok(())
        } else {
            Err(Error::ShapeMismatch { what, expected, actual })
        }
    }

    /// Checks the configuration, then the lengths of the weight and shift arrays (every
    /// [`Shift`] is in 0..=31 by construction).
    pub fn check_weights(&self, weights: &[Complex<i8>], shifts: &[Shift]) -> Result<()> {
        self.validate()?;
        self.check_len("beamformer weights (complex values)", self.weights_len(), weights.len())?;
        self.check_len("beamformer shifts", self.shifts_len(), shifts.len())
    }
}
