//! The correlator's configuration: validation, sizes, the input and output layouts, and the
//! kernel a configuration runs.
use super::{Format, Order, TIME_TILE};
use crate::error::{Error, Result};
use crate::size;
use num_complex::Complex;
use radio_kernels_gpu::correlator::{self as layout, Kernel};
use radio_kernels_gpu::packing::unpack_ci4;

/// What one launch correlates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CorrelatorConfig {
    /// Stations (antennas), 1 ..= 65535.
    pub stations: u32,
    /// Polarisations per station, 1 or 2.
    pub pols: u32,
    /// Frequency channels, 1 ..= 65535.
    pub channels: u32,
    /// Time samples per launch: a multiple of [`TIME_TILE`] (64), at most
    /// `Format::max_times_per_launch()` (65535 for int8, so 65472) so int32 sums are exact.
    pub times: u32,
    /// Sample format of the input: complex int8+8 or int4+4.
    pub format: Format,
    /// Memory order of a time sample's stations and polarisations.
    pub order: Order,
}

impl CorrelatorConfig {
    /// Checks every parameter; the first violation is returned as `InvalidConfig`.
    pub fn validate(&self) -> Result<()> {
        let bad = |message: String| Err(Error::InvalidConfig(message));
        if self.stations == 0 || self.stations > 65535 {
            return bad(format!("stations must be 1..=65535, got {}", self.stations));
        }
        if self.pols != 1 && self.pols != 2 {
            return bad(format!("pols must be 1 or 2, got {}", self.pols));
        }
        if self.channels == 0 || self.channels > 65535 {
            return bad(format!("channels must be 1..=65535, got {}", self.channels));
        }
        if self.times == 0 || !self.times.is_multiple_of(TIME_TILE) {
            return bad(format!(
                "times per launch must be a positive multiple of the kernel's time tile ({TIME_TILE}), got {}",
                self.times
            ));
        }
        let limit = self.format.max_times_per_launch();
        if self.times as u64 > limit {
            return bad(format!(
                "times per launch {} exceeds {limit}, the most for which {:?} int32 sums are exact \
                 (T * 2 * {}^2 < 2^31): split the integration into launches accumulated in int64",
                self.times,
                self.format,
                self.format.max_magnitude()
            ));
        }
        // Every field is in range here, so both sizes fit in u64; on hosts with a narrower
        // usize they may not. The kernels index with 64-bit offsets throughout.
        if self.checked_input_bytes().is_none() {
            return bad(format!(
                "the input would hold {} bytes, more than this host can address",
                self.times as u128
                    * self.channels as u128
                    * self.stations as u128
                    * self.pols as u128
                    * self.format.bytes() as u128
            ));
        }
        let accumulator_bytes = self.checked_output_len().and_then(|n| n.checked_mul(16));
        if accumulator_bytes.is_none() {
            return bad(format!(
                "the int64 output would hold {} complex values (16 bytes each), more than this host can address",
                self.channels as u128 * self.baselines() as u128 * (self.pols as u128).pow(2)
            ));
        }
        Ok(())
    }

    /// Baselines `N (N + 1) / 2` (autos included), exact in u64 for every `stations` (0 for
    /// none).
    pub fn baselines(&self) -> u64 {
        let n = self.stations as u64;
        // n (n + 1) < 2^64 for every u32 n.
        n * (n + 1) / 2
    }
    /// Input size in bytes: `times * channels * stations * pols` elements, exact whenever it
    /// fits in `usize` (every configuration `validate()` accepts); saturates at `usize::MAX`
    /// otherwise.
    pub fn input_bytes(&self) -> usize {
        self.checked_input_bytes().unwrap_or(usize::MAX)
    }
    /// Output size: number of complex values (`Complex<i32>` per launch, `Complex<i64>`
    /// accumulated), `channels * baselines * pols^2`, exact whenever it fits
    /// in `usize` (every configuration `validate()` accepts); saturates at `usize::MAX`
    /// otherwise.
    pub fn output_len(&self) -> usize {
        self.checked_output_len().unwrap_or(usize::MAX)
    }
    fn checked_input_bytes(&self) -> Option<usize> {
        size::checked_product(&[
            self.times as u128,
            self.channels as u128,
            self.stations as u128,
            self.pols as u128,
            self.format.bytes() as u128,
        ])
    }
    fn checked_output_len(&self) -> Option<usize> {
        size::checked_product(&[
            self.channels as u128,
            self.baselines() as u128,
            self.pols as u128,
            self.pols as u128,
        ])
    }
    /// Position of `V[channel][b(i, j)][pi][pj]` (i >= j) in the output, computed exactly in
    /// u128: meaningful for in-range arguments of a valid configuration; saturates at
    /// `usize::MAX` where the position does not fit in `usize`.
    pub fn output_index(&self, channel: u32, i: u32, j: u32, pi: u32, pj: u32) -> usize {
        let (p, baseline) = (self.pols as u128, layout::baseline_index(i, j) as u128);
        (channel as u128 * self.baselines() as u128 + baseline)
            .checked_mul(p)
            .and_then(|x| (x + pi as u128).checked_mul(p))
            .and_then(|x| x.checked_add(pj as u128))
            .and_then(|x| usize::try_from(x).ok())
            .unwrap_or(usize::MAX)
    }
    /// Whether the input rows the kernels copy start on 16-byte boundaries (stations x pols,
    /// or stations for `[t][c][p][s]`, times the element size, a multiple of 16).
    pub fn rows_aligned(&self) -> bool {
        layout::rows_aligned(self.format, self.order, self.stations, self.pols)
    }
    /// The kernel this configuration runs on a GPU with (`wgmma`: Hopper) or without the
    /// sm_90a `wgmma` kernels: [`Correlator::new`](super::Correlator::new)'s choice.
    /// `InvalidConfig` for an invalid configuration.
    pub fn kernel(&self, wgmma: bool) -> Result<&'static Kernel> {
        self.validate()?;
        layout::select(self.format, self.order, self.stations, self.pols, wgmma).ok_or_else(|| {
            Error::InvalidConfig(format!("no correlator kernel reads {:?} in {:?}", self.format, self.order))
        })
    }
    /// Useful operations of one launch: 8 per complex multiply-accumulate over the lower
    /// triangle including autos, `8 N (N + 1) / 2 P^2 C T`.
    pub fn useful_ops(&self) -> f64 {
        8.0 * self.baselines() as f64
            * (self.pols as f64 * self.pols as f64)
            * self.channels as f64
            * self.times as f64
    }
    /// Byte offset of element (t, channel, station, pol) in the input, computed exactly in
    /// u128: meaningful for in-range arguments of a valid configuration; saturates at
    /// `usize::MAX` where the offset does not fit in `usize`.
    pub fn input_offset(&self, t: u32, channel: u32, station: u32, pol: u32) -> usize {
        let row = t as u128 * self.channels as u128 + channel as u128;
        let (stations, pols) = (self.stations as u128, self.pols as u128);
        let element = match self.order {
            Order::StationPol => {
                (row * stations + station as u128).checked_mul(pols).map(|x| x + pol as u128)
            }
            Order::PolStation => {
                (row * pols + pol as u128).checked_mul(stations).map(|x| x + station as u128)
            }
        };
        element
            .and_then(|x| x.checked_mul(self.format.bytes() as u128))
            .and_then(|x| usize::try_from(x).ok())
            .unwrap_or(usize::MAX)
    }
    /// Decodes input element (t, channel, station, pol). `input` must hold
    /// `input_bytes()` bytes of a valid configuration and each index must be in range;
    /// otherwise `ShapeMismatch` or `InvalidConfig` names what is wrong.
    pub fn sample(&self, input: &[u8], t: u32, channel: u32, station: u32, pol: u32) -> Result<Complex<i64>> {
        self.validate()?;
        self.check_input_len(input.len())?;
        for (what, value, limit) in [
            ("t", t, self.times),
            ("channel", channel, self.channels),
            ("station", station, self.stations),
            ("pol", pol, self.pols),
        ] {
            if value >= limit {
                return Err(Error::InvalidConfig(format!(
                    "sample index {what} = {value} is past the configuration's {limit}"
                )));
            }
        }
        let (re, im) = self.decode(input, t, channel, station, pol);
        Ok(Complex::new(re, im))
    }
    /// [`CorrelatorConfig::sample`] for a validated configuration, an input of
    /// `input_bytes()` bytes and in-range indices.
    pub(super) fn decode(&self, input: &[u8], t: u32, channel: u32, station: u32, pol: u32) -> (i64, i64) {
        let at = self.input_offset(t, channel, station, pol);
        match self.format {
            Format::Ci8 => (input[at] as i8 as i64, input[at + 1] as i8 as i64),
            Format::Ci4 => {
                let (re, im) = unpack_ci4(input[at]);
                (re as i64, im as i64)
            }
        }
    }
    pub(super) fn check_input_len(&self, len: usize) -> Result<()> {
        if len != self.input_bytes() {
            return Err(Error::ShapeMismatch {
                what: "correlator input (bytes)",
                expected: self.input_bytes(),
                actual: len,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::correlate_reference;
    use super::*;

    fn config(stations: u32, pols: u32, format: Format, order: Order) -> CorrelatorConfig {
        CorrelatorConfig { stations, pols, channels: 2, times: 64, format, order }
    }

    #[test]
    fn validation_rejects_bad_configurations() {
        let good = config(5, 2, Format::Ci8, Order::StationPol);
        assert!(good.validate().is_ok());
        for bad in [
            CorrelatorConfig { stations: 0, ..good },
            CorrelatorConfig { pols: 3, ..good },
            CorrelatorConfig { channels: 0, ..good },
            CorrelatorConfig { times: 0, ..good },
            CorrelatorConfig { times: 100, ..good },
            CorrelatorConfig { times: 65536, ..good },
        ] {
            assert!(matches!(bad.validate(), Err(Error::InvalidConfig(_))), "{bad:?}");
        }
        assert!(CorrelatorConfig { times: 65472, ..good }.validate().is_ok());
        assert!(CorrelatorConfig { times: 65536, format: Format::Ci4, ..good }.validate().is_ok());
        let input = vec![0u8; good.input_bytes() - 1];
        assert!(matches!(correlate_reference(&good, &input), Err(Error::ShapeMismatch { .. })));
    }
}
