//! FRB beamformer, third kernel (footnotes 1 and 10 of
//! Smith, CHORD FRB beamformer design note (2022)), host side: the
//! packet format, the CPU reference and [`Quantizer`], which transposes `J[f][tbar][beta]`
//! (f16) to beam-major rows `Q[f][beta][tbar]` of unsigned 8- or 4-bit codes
//! `clamp(rne(fma(J, scale[f][beta], offset[f][beta])), 0, 255 or 15)` and counts the clipped
//! values per (f, beta). Format, layouts and kernel: `radio_kernels_gpu::frb_beamformer::quantize`.
//!
//! Non-finite values are quantised, not rejected, and counted as clipped: J is data (an f16
//! infinity from an overflowed intensity sum is a saturated value), and scale and offset stay
//! on the device. A NaN J, scale or offset, or a NaN fma (an infinite J times a zero scale),
//! gives code 0; `+inf` gives the largest code and `-inf` 0; each is counted in `saturated`.
//! [`quantize_reference`] and the kernel agree on every such value.
use crate::error::{DriverContext, Error, Result};
use crate::runtime::{DeviceBuffer, Gpu, PushKernelArg, Stream};
use crate::size;
use cudarc::driver::{CudaFunction, LaunchConfig};
use half::f16;
use radio_kernels_gpu::frb_beamformer::quantize::kernel;
pub use radio_kernels_gpu::frb_beamformer::quantize::{row_bytes, Format, THREADS, TILE_B, TILE_T};

/// One quantisation job: `channels` x `times` x `beams` values of J, to `format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantizeConfig {
    /// Frequency channels F, 1..=65535.
    pub channels: u32,
    /// Slow samples T (tbar) per channel and beam, positive, in at most 65535 tiles of
    /// [`TILE_T`].
    pub times: u32,
    /// Beams B per channel, 1..=[`MAX_BEAMS`].
    pub beams: u32,
    /// Output code width: [`Format::U8`] (one byte per value) or [`Format::U4`] (two per
    /// byte, earlier tbar in the low nibble).
    pub format: Format,
}

/// Largest beam count of a quantisation job, 2^31: the kernel's beam indices are 32-bit,
/// with a tile of [`TILE_B`] beams of headroom.
pub const MAX_BEAMS: u32 = 1 << 31;

impl QuantizeConfig {
    /// Every size positive, the grid within its limits, the output addressable.
    pub fn validate(&self) -> Result<()> {
        if self.channels == 0 || self.times == 0 || self.beams == 0 {
            return Err(Error::InvalidConfig(format!("empty quantisation job: {self:?}")));
        }
        if self.beams > MAX_BEAMS {
            return Err(Error::InvalidConfig(format!(
                "{} beams exceed 2^31: the quantiser's beam indices are 32-bit",
                self.beams
            )));
        }
        if self.channels > 65535 || self.times.div_ceil(TILE_T) > 65535 {
            return Err(Error::InvalidConfig(format!(
                "{self:?} exceeds the grid (at most 65535 channels and 65535 tiles of {TILE_T} samples)"
            )));
        }
        if self.channels as u128 * self.times as u128 * self.beams as u128 > 1 << 40 {
            return Err(Error::InvalidConfig(format!("{self:?} is too large")));
        }
        Ok(())
    }
    // The size helpers are exact for every configuration `validate` accepts; for others they
    // neither panic nor wrap: they saturate (at u32::MAX or usize::MAX).

    /// Bytes of one output row `(f, beta)`: the packed samples padded to 16 bytes.
    pub fn row_bytes(&self) -> u32 {
        row_bytes(self.times, self.format)
    }
    fn row_bytes_exact(&self) -> u128 {
        (self.times as u128 * self.format.bits() as u128).div_ceil(8).div_ceil(16) * 16
    }
    /// f16 values of J, `F T B`.
    pub fn input_len(&self) -> usize {
        size::saturate(self.channels as u128 * self.times as u128 * self.beams as u128)
    }
    /// Entries of each of scale (f32), offset (f32) and the saturation counts (u32):
    /// `[f][beta]`, `F B`.
    pub fn params_len(&self) -> usize {
        size::saturate(self.channels as u128 * self.beams as u128)
    }
    /// Output bytes: `[f][beta][row_bytes]`.
    pub fn output_len(&self) -> usize {
        size::saturate(self.channels as u128 * self.beams as u128 * self.row_bytes_exact())
    }
    /// Bytes the kernel must move at least: J, the codes, scale and offset.
    pub fn bytes_moved(&self) -> usize {
        let params = self.channels as u128 * self.beams as u128;
        size::saturate(2 * params * self.times as u128 + params * self.row_bytes_exact() + 8 * params)
    }
}

/// The reference's result: the output bytes and the clip counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quantized {
    /// The codes, `[f][beta][row_bytes]` bytes ([`QuantizeConfig::output_len`]), each row's
    /// padding zero.
    pub output: Vec<u8>,
    /// Clipped values per `[f][beta]` ([`QuantizeConfig::params_len`] counts), non-finite
    /// ones included.
    pub saturated: Vec<u32>,
}

fn check_lengths(config: &QuantizeConfig, j: usize, scale: usize, offset: usize) -> Result<()> {
    for (what, expected, actual) in [
        ("J", config.input_len(), j),
        ("scale", config.params_len(), scale),
        ("offset", config.params_len(), offset),
    ] {
        if expected != actual {
            return Err(Error::ShapeMismatch { what, expected, actual });
        }
    }
    Ok(())
}

/// The rule, value by value, straight from the definition: f32 fma (one rounding), round
/// half to even, clamp; NaN is 0; clipped values are counted (non-finite ones included: see
/// the module docs).
pub fn quantize_reference(
    config: &QuantizeConfig,
    j: &[f16],
    scale: &[f32],
    offset: &[f32],
) -> Result<Quantized> {
    config.validate()?;
    check_lengths(config, j.len(), scale.len(), offset.len())?;
    let (t_len, b_len, row) = (config.times as usize, config.beams as usize, config.row_bytes() as usize);
    let max = config.format.max() as f32;
    let mut output = vec![0u8; config.output_len()];
    let mut saturated = vec![0u32; config.params_len()];
    for f in 0..config.channels as usize {
        for beta in 0..b_len {
            let at = f * b_len + beta;
            for t in 0..t_len {
                let x = j[(f * t_len + t) * b_len + beta].to_f32().mul_add(scale[at], offset[at]);
                let r = x.round_ties_even();
                let (code, clipped) = if x.is_nan() || r < 0.0 {
                    (0.0, true)
                } else if r > max {
                    (max, true)
                } else {
                    (r, false)
                };
                saturated[at] += clipped as u32;
                let code = code as u8;
                let out = &mut output[at * row..][..row];
                match config.format {
                    Format::U8 => out[t] = code,
                    Format::U4 => out[t / 2] |= code << (4 * (t % 2)),
                }
            }
        }
    }
    Ok(Quantized { output, saturated })
}

/// The quantiser on the GPU.
pub struct Quantizer<'g> {
    gpu: &'g Gpu,
    config: QuantizeConfig,
    kernel: CudaFunction,
    /// The stream `quantize` works on.
    stream: Stream,
}

impl<'g> Quantizer<'g> {
    /// Validates `config` ([`QuantizeConfig::validate`], `InvalidConfig`) and loads the
    /// quantiser kernel of its format on `gpu` ([`Error::ModuleLoad`] or
    /// [`Error::MissingKernel`] if that fails). Allocates nothing: the caller owns J, scale,
    /// offset, the codes and the counts.
    pub fn new(gpu: &'g Gpu, config: QuantizeConfig) -> Result<Quantizer<'g>> {
        config.validate()?;
        let spec = kernel(config.format)
            .ok_or_else(|| Error::InvalidConfig(format!("no quantiser for {:?}", config.format)))?
            .spec;
        let kernel = gpu.kernel(&spec)?;
        Ok(Quantizer { gpu, config, kernel, stream: gpu.stream().clone() })
    }

    /// The configuration the quantiser was built with (validated).
    pub fn config(&self) -> &QuantizeConfig {
        &self.config
    }

    /// Runs `quantize` (its zeroing of the counts and its launch) on `stream` (the GPU's
    /// default stream until set), so that callers can order their own work with ours;
    /// [`Error::WrongDevice`] for a stream of another GPU. Streaming engines
    /// ([`crate::frb_beamformer::FrbStream`]) use their own lanes.
    pub fn set_stream(&mut self, stream: &Stream) -> Result<()> {
        self.gpu.switch_stream(&mut self.stream, stream, "FRB quantiser stream")
    }

    /// The stream `quantize` works on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The GPU this quantiser runs on.
    pub(crate) fn gpu(&self) -> &'g Gpu {
        self.gpu
    }

    /// `J` f16 `[f][tbar][beta]`, `scale` and `offset` f32 `[f][beta]`; writes every byte of
    /// `out` (`[f][beta][row_bytes]`, padding 0) and sets `saturated` (u32 `[f][beta]`) to the
    /// clip counts of this call.
    pub fn quantize(
        &self,
        j: &DeviceBuffer<f16>,
        scale: &DeviceBuffer<f32>,
        offset: &DeviceBuffer<f32>,
        out: &mut DeviceBuffer<u8>,
        saturated: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        self.launch(j, scale, offset, out, saturated, &self.stream)
    }

    /// [`quantize`](Self::quantize) on `stream`.
    pub(crate) fn launch(
        &self,
        j: &DeviceBuffer<f16>,
        scale: &DeviceBuffer<f32>,
        offset: &DeviceBuffer<f32>,
        out: &mut DeviceBuffer<u8>,
        saturated: &mut DeviceBuffer<u32>,
        stream: &Stream,
    ) -> Result<()> {
        let c = self.config;
        check_lengths(&c, j.len(), scale.len(), offset.len())?;
        for (what, expected, actual) in [
            ("quantised output", c.output_len(), out.len()),
            ("saturation counts", c.params_len(), saturated.len()),
        ] {
            if expected != actual {
                return Err(Error::ShapeMismatch { what, expected, actual });
            }
        }
        for (what, owned) in [
            ("J", self.gpu.owns(j)),
            ("scale", self.gpu.owns(scale)),
            ("offset", self.gpu.owns(offset)),
            ("quantised output", self.gpu.owns(out)),
            ("saturation counts", self.gpu.owns(saturated)),
        ] {
            if !owned {
                return Err(Error::WrongDevice { what });
            }
        }
        // The kernel adds its counts.
        saturated.poison_on(stream, 0)?;
        let row = c.row_bytes();
        let mut launch = stream.launch_builder(&self.kernel);
        launch
            .arg(j.raw())
            .arg(scale.raw())
            .arg(offset.raw())
            .arg(out.arg_mut())
            .arg(saturated.arg_mut())
            .arg(&c.times)
            .arg(&c.beams)
            .arg(&row);
        let config = LaunchConfig {
            grid_dim: (c.beams.div_ceil(TILE_B), c.times.div_ceil(TILE_T), c.channels),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: arguments match `frb_quantize_u8/u4`; J holds F T B halves, scale, offset
        // and the counts F B entries, out F B row_bytes bytes (lengths checked above);
        // row_bytes is a multiple of 16 and cudarc allocations are 256-byte aligned, so the
        // 16-byte stores are aligned; J is read with 16-byte loads only when B % 8 == 0; the
        // grid's y and z are at most 65535 (validated).
        unsafe { launch.launch(config) }.during("launching the FRB quantiser")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_packs_nibbles_and_counts_clips() {
        let config = QuantizeConfig { channels: 1, times: 3, beams: 2, format: Format::U4 };
        // J[t][beta]: beam 0 gets 1, 2.5, 40 (clips); beam 1 gets 0.5, -1 (clips), NaN (clips).
        let j: Vec<f16> = [1.0, 0.5, 2.5, -1.0, 40.0, f32::NAN].iter().map(|&x| f16::from_f32(x)).collect();
        let q = quantize_reference(&config, &j, &[1.0, 1.0], &[0.0, 0.0]).unwrap();
        assert_eq!(q.output.len(), 32);
        assert_eq!(q.output[0], 0x21);
        assert_eq!(q.output[1], 0x0f);
        assert!(q.output[2..16].iter().all(|&b| b == 0));
        assert_eq!(q.output[16], 0x00);
        assert_eq!(q.output[17], 0x00);
        assert_eq!(q.saturated, vec![1, 2]);
        let u8c = QuantizeConfig { format: Format::U8, ..config };
        let q = quantize_reference(&u8c, &j, &[2.0, 3.0], &[0.5, 0.25]).unwrap();
        // 1 * 2 + 0.5 = 2.5 -> 2; 2.5 * 2 + 0.5 = 5.5 -> 6; 40 * 2 + 0.5 = 80.5 -> 80.
        assert_eq!(&q.output[..3], &[2, 6, 80]);
        // 0.5 * 3 + 0.25 = 1.75 -> 2; -3 + 0.25 clips to 0; NaN -> 0.
        assert_eq!(&q.output[16..19], &[2, 0, 0]);
        assert_eq!(q.saturated, vec![0, 2]);
    }

    /// Non-finite J, scale and offset: the reference gives the code and clip flag of the
    /// kernel's rule (`quantize_scaled`, the device function built for the host) for each.
    #[test]
    fn non_finite_values_are_clipped_as_the_kernel_clips_them() {
        use radio_kernels_gpu::frb_beamformer::quantize::quantize_scaled;
        let values = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, 3.5, 65504.0, -1.0];
        let params = [
            (1.0, 0.0),
            (f32::NAN, 0.0),
            (f32::INFINITY, 0.0),
            (0.0, f32::INFINITY),
            (1.0, f32::NAN),
            (f32::NEG_INFINITY, 1.0),
            (f32::MAX, f32::MAX),
            (0.0, 0.0),
        ];
        for format in [Format::U8, Format::U4] {
            let config = QuantizeConfig { channels: 1, times: 7, beams: 8, format };
            let j: Vec<f16> =
                (0..7).flat_map(|t| (0..8).map(move |b| f16::from_f32(values[(t + b) % 7]))).collect();
            let (scale, offset): (Vec<f32>, Vec<f32>) = params.iter().copied().unzip();
            let q = quantize_reference(&config, &j, &scale, &offset).unwrap();
            let row = config.row_bytes() as usize;
            for (b, &(sc, of)) in params.iter().enumerate() {
                let mut clipped = 0;
                for t in 0..7 {
                    let x = j[t * 8 + b].to_f32().mul_add(sc, of);
                    let (code, clip) = quantize_scaled(x, format.max());
                    clipped += clip as u32;
                    let got = match format {
                        Format::U8 => q.output[b * row + t] as u32,
                        Format::U4 => (q.output[b * row + t / 2] as u32 >> (4 * (t % 2))) & 15,
                    };
                    assert_eq!(got, code, "{format:?} beam {b} t {t}: x = {x}");
                    if !x.is_finite() {
                        assert!(clip, "{format:?}: {x} must count as clipped");
                    }
                }
                assert_eq!(q.saturated[b], clipped, "{format:?} beam {b}");
            }
        }
    }

    #[test]
    fn bad_configurations_are_rejected() {
        let good = QuantizeConfig { channels: 2, times: 3, beams: 5, format: Format::U8 };
        assert!(good.validate().is_ok());
        for bad in [
            QuantizeConfig { channels: 0, ..good },
            QuantizeConfig { times: 0, ..good },
            QuantizeConfig { beams: 0, ..good },
            QuantizeConfig { channels: 70000, ..good },
            QuantizeConfig { channels: 1, times: 1, beams: MAX_BEAMS + 1, ..good },
            QuantizeConfig { times: 65536 * TILE_T, ..good },
        ] {
            assert!(matches!(bad.validate(), Err(Error::InvalidConfig(_))), "{bad:?}");
        }
        let j = vec![f16::ZERO; good.input_len() - 1];
        let p = vec![0f32; good.params_len()];
        assert!(matches!(quantize_reference(&good, &j, &p, &p), Err(Error::ShapeMismatch { .. })));
    }
}
