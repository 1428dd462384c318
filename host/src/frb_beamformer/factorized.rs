//! FRB beamformer, second kernel for factorizable beams (sec. 5.3 of
//! Smith, CHORD FRB beamformer design note (2022)),
//! host side: [`FactorizedConfig`], the f64 two-step reference of eqs. 143-144 and
//! [`FactorizedResampler`], which builds U^M and U^N per channel on the host in f64
//! ([`FactorizedResampler::set_grid`], rounded once to f16) and runs the fused kernel
//! `frb_factorized_M_N`. Beam `beta = gamma G' + gamma'` sits at
//! `(theta[f][gamma], theta'[f][gamma'])`. Layouts and kernel:
//! `radio_kernels_gpu::frb_beamformer::factorized`.
use crate::error::{DriverContext, Error, Result};
use crate::frb_beamformer::resample::u_function;
use crate::frb_beamformer::FRB_CASES;
use crate::runtime::{allow_dynamic_shared, DeviceBuffer, Gpu, PushKernelArg, Stream};
use crate::size;
use cudarc::driver::{CudaFunction, LaunchConfig};
use half::f16;
pub use radio_kernels_gpu::frb_beamformer::factorized::{
    kernel, FactorLayout, BLOCK_TIMES, FACTOR_THREADS, FACTOR_WARPS, GROUP_TIMES, MAX_GRID_AXIS,
};

/// One factorized job: `channels` channels of `times` slow samples of the `2M x 2N` grid, to
/// the `g x g_prime` beam grid of each channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FactorizedConfig {
    /// Frequency channels F, 1..=65535 (one grid row of blocks each).
    pub channels: u32,
    /// Slow (time-downsampled) samples T per channel, positive, with `F T < 2^32`.
    pub times: u32,
    /// Grid half-size M along the first axis (I has `2M` rows p); with `n`, one of the
    /// compiled cases ([`FRB_CASES`]).
    pub m: u32,
    /// Grid half-size N along the second axis (I has `2N` columns q).
    pub n: u32,
    /// Beam-grid rows G (positions `theta[f][gamma]`), 1..=[`MAX_GRID_AXIS`].
    pub g: u32,
    /// Beam-grid columns G' (positions `theta'[f][gamma']`), 1..=[`MAX_GRID_AXIS`].
    pub g_prime: u32,
}

impl FactorizedConfig {
    /// (M, N) one of the note's Table 2 cases; every size positive; G, G' at most
    /// [`MAX_GRID_AXIS`]; sample indices `f T + t` within 32 bits.
    pub fn validate(&self) -> Result<()> {
        if !FRB_CASES.iter().any(|c| (c.m, c.n) == (self.m, self.n)) {
            return Err(Error::InvalidConfig(format!(
                "(M, N) = ({}, {}) is not a case of Table 2 of the CHORD FRB beamformer note ((8, 8), (8, 12), (16, 16), (16, 20), (24, 24))",
                self.m, self.n
            )));
        }
        if self.channels == 0 || self.times == 0 || self.g == 0 || self.g_prime == 0 {
            return Err(Error::InvalidConfig(format!("empty factorized job: {self:?}")));
        }
        if self.channels > 65535 {
            return Err(Error::InvalidConfig(format!("{} channels exceed the grid's 65535", self.channels)));
        }
        if self.g > MAX_GRID_AXIS || self.g_prime > MAX_GRID_AXIS {
            return Err(Error::InvalidConfig(format!(
                "beam grid {} x {} exceeds {MAX_GRID_AXIS} per axis",
                self.g, self.g_prime
            )));
        }
        if self.channels as u64 * self.times as u64 > u32::MAX as u64 {
            return Err(Error::InvalidConfig(format!(
                "{} x {} samples exceed 32 bits",
                self.channels, self.times
            )));
        }
        Ok(())
    }
    /// The kernel's layout (its sizes are meaningful for valid configurations only).
    pub fn layout(&self) -> FactorLayout {
        FactorLayout { m: self.m, n: self.n, g: self.g, g_prime: self.g_prime }
    }

    // The size helpers are exact for every configuration `validate` accepts; for others they
    // neither panic nor wrap: they saturate (at u32::MAX or usize::MAX).

    /// Beams per channel, `G G'` (saturates at `u32::MAX`).
    pub fn beams(&self) -> u32 {
        self.g.saturating_mul(self.g_prime)
    }
    /// f16 values of I, `F T 4MN`.
    pub fn intensity_len(&self) -> usize {
        size::product(&[self.channels as u128, self.times as u128, 4 * self.m as u128, self.n as u128])
    }
    /// f32 values of theta (beam-grid row positions, grid units), `[f][gamma]`, `F G`.
    pub fn theta_len(&self) -> usize {
        size::product(&[self.channels as u128, self.g as u128])
    }
    /// f32 values of theta' (beam-grid column positions, grid units), `[f][gamma']`, `F G'`.
    pub fn theta_prime_len(&self) -> usize {
        size::product(&[self.channels as u128, self.g_prime as u128])
    }
    /// f16 values of J, `F T G G'`.
    pub fn output_len(&self) -> usize {
        size::product(&[self.channels as u128, self.times as u128, self.g as u128, self.g_prime as u128])
    }
    /// Useful flops (eq. 149): `2 G 2M 2N` (eq. 143) + `2 G G' 2N` (eq. 144) per sample.
    pub fn flops(&self) -> f64 {
        let (m, n, g, gp) = (self.m as f64, self.n as f64, self.g as f64, self.g_prime as f64);
        (self.channels as f64 * self.times as f64) * (8.0 * g * m * n + 4.0 * g * gp * n)
    }
    /// The same beams as a non-factorizable list, `[f][beta]` per axis, for a valid
    /// configuration and positions of its sizes (else the error `set_grid` gives).
    pub fn expand(&self, theta: &[f32], theta_prime: &[f32]) -> Result<(Vec<f32>, Vec<f32>)> {
        self.validate()?;
        self.check_positions(theta, theta_prime)?;
        let (g, gp) = (self.g as usize, self.g_prime as usize);
        let beams = (0..self.channels as usize).flat_map(|f| (0..g * gp).map(move |b| (f, b)));
        Ok((
            beams.clone().map(|(f, b)| theta[f * g + b / gp]).collect(),
            beams.map(|(f, b)| theta_prime[f * gp + b % gp]).collect(),
        ))
    }
    /// One position per (channel, grid row or column), each finite (`NonFinite` with the
    /// argument and index otherwise; any finite value is accepted: U is formed in f64).
    fn check_positions(&self, theta: &[f32], theta_prime: &[f32]) -> Result<()> {
        for (what, expected, values) in
            [("theta", self.theta_len(), theta), ("theta'", self.theta_prime_len(), theta_prime)]
        {
            if expected != values.len() {
                return Err(Error::ShapeMismatch { what, expected, actual: values.len() });
            }
            if let Some(index) = values.iter().position(|x| !x.is_finite()) {
                return Err(Error::NonFinite { what, index });
            }
        }
        Ok(())
    }
}

/// `J[f][tbar][gamma G' + gamma']` in f64 by eqs. 143-144 (V first, then J) from I (f16 bits,
/// `[f][tbar][p][q]`) and the grid positions, with U in f64 of the f32 positions.
pub fn factorized_reference(
    config: &FactorizedConfig,
    intensity: &[f16],
    theta: &[f32],
    theta_prime: &[f32],
) -> Result<Vec<f64>> {
    config.validate()?;
    config.check_positions(theta, theta_prime)?;
    if intensity.len() != config.intensity_len() {
        return Err(Error::ShapeMismatch {
            what: "intensity",
            expected: config.intensity_len(),
            actual: intensity.len(),
        });
    }
    let (m, n) = (config.m as usize, config.n as usize);
    let (g, gp, t_len) = (config.g as usize, config.g_prime as usize, config.times as usize);
    let mut out = vec![0.0; config.output_len()];
    for f in 0..config.channels as usize {
        let um: Vec<Vec<f64>> = (0..g)
            .map(|x| (0..2 * m).map(|p| u_function(m as u32, p as u32, theta[f * g + x] as f64)).collect())
            .collect();
        let un: Vec<Vec<f64>> = (0..gp)
            .map(|x| {
                (0..2 * n).map(|q| u_function(n as u32, q as u32, theta_prime[f * gp + x] as f64)).collect()
            })
            .collect();
        for t in 0..t_len {
            let i = &intensity[(f * t_len + t) * 4 * m * n..][..4 * m * n];
            for (gamma, u) in um.iter().enumerate() {
                let v: Vec<f64> =
                    (0..2 * n).map(|q| (0..2 * m).map(|p| u[p] * i[p * 2 * n + q].to_f64()).sum()).collect();
                for (gamma_prime, u_prime) in un.iter().enumerate() {
                    out[((f * t_len + t) * g + gamma) * gp + gamma_prime] =
                        v.iter().zip(u_prime).map(|(v, u)| v * u).sum();
                }
            }
        }
    }
    Ok(out)
}

/// The factorized resampler on the GPU: owns U^M and U^N (f16, `[f][gamma][p]` and
/// `[f][gamma'][q]`, zero-padded as the kernel's layout says) and the fused kernel.
pub struct FactorizedResampler<'g> {
    gpu: &'g Gpu,
    config: FactorizedConfig,
    kernel: CudaFunction,
    um: DeviceBuffer<f16>,
    un: DeviceBuffer<f16>,
    grid_set: bool,
    /// The stream `set_grid` and `resample` work on.
    stream: Stream,
}

impl<'g> FactorizedResampler<'g> {
    /// Validates `config` ([`FactorizedConfig::validate`], `InvalidConfig`), loads the
    /// `frb_factorized_M_N` kernel and allocates U^M and U^N on `gpu` (zeroed; no beam grid
    /// yet: call [`set_grid`](Self::set_grid) before [`resample`](Self::resample)). Driver
    /// and module-load failures come back as [`Error::Driver`] or [`Error::ModuleLoad`].
    pub fn new(gpu: &'g Gpu, config: FactorizedConfig) -> Result<FactorizedResampler<'g>> {
        config.validate()?;
        let spec = kernel(config.m, config.n)
            .ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "no factorized kernel for (M, N) = ({}, {})",
                    config.m, config.n
                ))
            })?
            .spec;
        let kernel = gpu.kernel(&spec)?;
        allow_dynamic_shared(
            &kernel,
            config.layout().smem_bytes(),
            "raising the factorized resampler's shared-memory limit",
        )?;
        let layout = config.layout();
        let um = gpu.alloc::<f16>(config.channels as usize * layout.um_len() as usize, 0)?;
        let un = gpu.alloc::<f16>(config.channels as usize * layout.un_len() as usize, 0)?;
        let stream = gpu.stream().clone();
        Ok(FactorizedResampler { gpu, config, kernel, um, un, grid_set: false, stream })
    }

    /// The configuration the resampler was built with (validated).
    pub fn config(&self) -> &FactorizedConfig {
        &self.config
    }

    /// Runs `set_grid` and `resample` on `stream` (the GPU's default stream until set), so
    /// that callers can order their own work with ours; [`Error::WrongDevice`] for a stream
    /// of another GPU. Streaming engines ([`crate::frb_beamformer::FrbStream`]) use their
    /// own lanes.
    pub fn set_stream(&mut self, stream: &Stream) -> Result<()> {
        self.gpu.switch_stream(&mut self.stream, stream, "factorized FRB resampler stream")
    }

    /// The stream `set_grid` and `resample` work on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The GPU this resampler runs on.
    pub(crate) fn gpu(&self) -> &'g Gpu {
        self.gpu
    }

    /// Whether the beam grid was set (`resample` refuses to run before).
    pub(crate) fn grid_set(&self) -> bool {
        self.grid_set
    }

    /// The beam grid: `theta` f32 `[f][gamma]`, `theta'` f32 `[f][gamma']` (grid units of eq.
    /// 1). U is computed in f64 and rounded to f16 here, then uploaded on the resampler's
    /// stream from pageable memory (the copy may wait for the stream's earlier work: a set-up
    /// step, not for the hot path).
    pub fn set_grid(&mut self, theta: &[f32], theta_prime: &[f32]) -> Result<()> {
        let c = self.config;
        c.check_positions(theta, theta_prime)?;
        let layout = c.layout();
        let (m, n, kn) = (c.m, c.n, layout.kn());
        let mut um = vec![f16::ZERO; self.um.len()];
        let mut un = vec![f16::ZERO; self.un.len()];
        for f in 0..c.channels as usize {
            let rows = &mut um[f * layout.um_len() as usize..][..layout.um_len() as usize];
            for gamma in 0..c.g as usize {
                let t = theta[f * c.g as usize + gamma] as f64;
                for p in 0..2 * m {
                    rows[gamma * 2 * m as usize + p as usize] = f16::from_f64(u_function(m, p, t));
                }
            }
            let rows = &mut un[f * layout.un_len() as usize..][..layout.un_len() as usize];
            for gamma in 0..c.g_prime as usize {
                let t = theta_prime[f * c.g_prime as usize + gamma] as f64;
                for q in 0..2 * n {
                    rows[gamma * kn as usize + q as usize] = f16::from_f64(u_function(n, q, t));
                }
            }
        }
        self.um.upload_on(&self.stream, &um, "upload source")?;
        self.un.upload_on(&self.stream, &un, "upload source")?;
        self.grid_set = true;
        Ok(())
    }

    /// `J[f][tbar][beta]` (f16) from I (f16 `[f][tbar][p][q]`).
    pub fn resample(&self, intensity: &DeviceBuffer<f16>, out: &mut DeviceBuffer<f16>) -> Result<()> {
        self.launch(intensity, out, &self.stream)
    }

    /// [`resample`](Self::resample) on `stream`.
    pub(crate) fn launch(
        &self,
        intensity: &DeviceBuffer<f16>,
        out: &mut DeviceBuffer<f16>,
        stream: &Stream,
    ) -> Result<()> {
        let c = self.config;
        if !self.grid_set {
            return Err(Error::InvalidConfig("no beam grid yet: call set_grid first".into()));
        }
        for (what, expected, actual) in
            [("FRB intensity", c.intensity_len(), intensity.len()), ("FRB beams", c.output_len(), out.len())]
        {
            if expected != actual {
                return Err(Error::ShapeMismatch { what, expected, actual });
            }
        }
        self.gpu.check_owner(intensity, "FRB intensity")?;
        self.gpu.check_owner(out, "FRB beams")?;
        let mut launch = stream.launch_builder(&self.kernel);
        launch
            .arg(intensity.raw())
            .arg(self.um.raw())
            .arg(self.un.raw())
            .arg(out.arg_mut())
            .arg(&c.times)
            .arg(&c.g)
            .arg(&c.g_prime);
        let config = LaunchConfig {
            grid_dim: (c.times.div_ceil(BLOCK_TIMES), c.channels, 1),
            block_dim: (FACTOR_THREADS, 1, 1),
            shared_mem_bytes: c.layout().smem_bytes(),
        };
        // SAFETY: arguments match `frb_factorized_M_N` for the validated (M, N); I, U^M, U^N
        // and J hold F T 4MN, F Gp 2M, F Gp' KN and F T G G' halves; rows of I (4N bytes), U^M
        // (4M) and U^N (2 KN) are multiples of 16 bytes, so every 16-byte copy is aligned
        // (cudarc allocations are 256-byte aligned); F T fits 32 bits (validated).
        unsafe { launch.launch(config) }.during("launching the FRB factorized resampler")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frb_beamformer::resample::{resample_reference, ResampleConfig};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn factorized_reference_equals_the_general_reference_on_the_expanded_beams() {
        let mut rng = StdRng::seed_from_u64(0xfac7);
        for case in FRB_CASES {
            for (g, g_prime) in [(4 * case.m, 4 * case.n), (3, 5), (1, 1)] {
                let config = FactorizedConfig { channels: 2, times: 3, m: case.m, n: case.n, g, g_prime };
                let i: Vec<f16> = (0..config.intensity_len())
                    .map(|_| f16::from_f64(rng.random_range(0.0..100.0)))
                    .collect();
                let theta: Vec<f32> =
                    (0..config.theta_len()).map(|_| rng.random_range(-40.0..40.0)).collect();
                let theta_prime: Vec<f32> =
                    (0..config.theta_prime_len()).map(|_| rng.random_range(-40.0..40.0)).collect();
                let got = factorized_reference(&config, &i, &theta, &theta_prime).unwrap();
                let (t, tp) = config.expand(&theta, &theta_prime).unwrap();
                let general =
                    ResampleConfig { channels: 2, times: 3, m: case.m, n: case.n, beams: g * g_prime };
                let want = resample_reference(&general, &i, &t, &tp).unwrap();
                let scale = want.iter().fold(0.0f64, |a, w| a.max(w.abs()));
                for (x, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert!((a - b).abs() <= 1e-12 * scale, "{config:?} output {x}: {a} vs {b}");
                }
            }
        }
    }

    #[test]
    fn bad_configurations_and_positions_are_rejected() {
        let good = FactorizedConfig { channels: 2, times: 3, m: 8, n: 12, g: 5, g_prime: 7 };
        assert!(good.validate().is_ok());
        for bad in [
            FactorizedConfig { m: 8, n: 10, ..good },
            FactorizedConfig { channels: 0, ..good },
            FactorizedConfig { times: 0, ..good },
            FactorizedConfig { g: 0, ..good },
            FactorizedConfig { g_prime: MAX_GRID_AXIS + 1, ..good },
            FactorizedConfig { channels: 65536, ..good },
            FactorizedConfig { channels: 65535, times: 1 << 17, ..good },
        ] {
            assert!(matches!(bad.validate(), Err(Error::InvalidConfig(_))), "{bad:?}");
        }
        let i = vec![f16::ZERO; good.intensity_len()];
        let t = vec![0f32; good.theta_len()];
        let tp = vec![0f32; good.theta_prime_len()];
        assert!(factorized_reference(&good, &i, &t, &tp).is_ok());
        assert!(matches!(factorized_reference(&good, &i[1..], &t, &tp), Err(Error::ShapeMismatch { .. })));
        assert!(matches!(factorized_reference(&good, &i, &tp, &tp), Err(Error::ShapeMismatch { .. })));
        let mut nan = t.clone();
        nan[2] = f32::NAN;
        assert!(matches!(
            factorized_reference(&good, &i, &nan, &tp),
            Err(Error::NonFinite { what: "theta", index: 2 })
        ));
        let mut inf = tp.clone();
        inf[6] = f32::NEG_INFINITY;
        assert!(matches!(
            factorized_reference(&good, &i, &t, &inf),
            Err(Error::NonFinite { what: "theta'", index: 6 })
        ));
        assert!(matches!(good.expand(&t[1..], &tp), Err(Error::ShapeMismatch { .. })));
    }
}
