//! FRB beamformer, second kernel by a type-2 non-uniform FFT (issue 8, "Going further"; seed
//! 000 secs. 2.2-2.3 and 5, eqs. 6-8 and 137): a third resampling path next to the exact
//! GEMMs of [`super::resample`], here as an f64 CPU implementation with its error bound.
//!
//! Why it works: eq. 7 written with exponentials is
//! `U^N_q(theta) = (1/2N) sum_{|t| <= N} a_t exp(i pi (2 theta - q) t / N)`, `a_t = 1` for
//! `|t| < N` and `1/2` at `|t| = N`. Put into eq. 137, J of one (f, tbar) is a 2-d
//! trigonometric polynomial of degree (M, N) in `(x, y) = (theta / M, theta' / N)`:
//!
//! `J(theta, theta') = sum_{|s| <= M, |t| <= N} a_s a_t c_st exp(2 pi i (s x + t y))`,
//! `c_st = (1/4MN) sum_pq I_pq exp(-2 pi i (p s / 2M + q t / 2N))`,
//!
//! so the `c_st` are a (2M x 2N) DFT of I (2M-periodic in s, 2N-periodic in t), and
//! evaluating J at B beams is a type-2 NUFFT. The plan ([`NufftPlan`]):
//!
//! 1. fine grid, once per (f, tbar): `b_st = a_s a_t c_st / (phi_M(s) phi_N(t))` placed on an
//!    `L_M x L_N` spectrum (`L = ceil(2 sigma M)`, [`fine_len`]), one inverse FFT to the real
//!    grid `g[l][l']` (real because I is real and the kernel even: `b_{-s,-t} = conj(b_st)`);
//! 2. interpolation, per beam: `J ~= sum_{i,j < w} wx_i wy_j g[x0 + i][y0 + j]` (indices mod L)
//!    with the "exponential of semicircle" kernel of FINUFFT ([`es_kernel`]) of width w fine
//!    cells, whose Fourier transform `phi` ([`es_fourier`]) is what step 1 divides by. The 2w
//!    weights and the two grid offsets depend on (f, beta) only: the plan computes them once
//!    ([`beam_taps`]) and every tbar reuses them.
//!
//! The error is the kernel's aliasing (Poisson summation: the grid's image of mode k at
//! `k + m L`, m != 0), independent of I's layout and of B; it falls roughly like
//! `exp(-beta)` with `beta = 0.97 pi w (1 - 1/2 sigma)` ([`es_beta`]): measured at full CHORD
//! with random I, relative L2 6.1e-4, 6.0e-5, 7.5e-6, 9.8e-7 for w = 4, 5, 6, 7 (sigma = 2).
//! [`NUFFT_DEFAULT`] (sigma = 2, w = 6) keeps it below [`NUFFT_F16_BOUND`] = 2^-13 (a quarter of
//! f16's unit roundoff) in two senses, both tested: relative L2 against the exact f64 path
//! for random I in every Table 2 case (~7.5e-6, 17-24x below the 1.3-1.8e-4 that rounding J
//! to f16 adds),
//! and absolutely for every single unit mode `I_pq = cos(2 pi (p s / 2M + q t / 2N))`,
//! Nyquist modes included (the worst: w = 5 misses there, by 5.6e-4).
//!
//! Cost per (f, tbar, beam) ([`NufftPlan::macs_per_output`]): `w (w + 1)` multiply-adds for the
//! interpolation (w rows of w taps, then the row sum; 42 at w = 6) against `4MN` for the exact
//! path (2304 at full CHORD: 55x fewer; 1024 at HIRAX square: 24x), plus the fine-grid step's
//! FFTs shared by the B beams of an (f, tbar) ([`NufftPlan::grid_flops_per_sample`]: 0.74
//! Mflop at full CHORD = 128 flops per beam, 0.30 Mflop at HIRAX square = 116 per beam; in
//! the two-matrix form [`NufftPlan::fine_matrices`], 115 and 77 multiply-adds per beam).
//! In flops per output: 84 + 128 = 212 against 4608 (22x fewer) at full CHORD, 84 + 116 = 200
//! against 2048 (10x) at HIRAX square.
//!
//! Layouts as in [`super::resample`]: I f16 bits `[f][tbar][p][q]`, beam positions f32
//! `[f][beta]` in grid units of eq. 1, J `[f][tbar][beta]` (f64 here).
use crate::error::{DriverContext, Error, Result};
use crate::frb_beamformer::resample::check_position_values;
use crate::frb_beamformer::FRB_CASES;
use crate::runtime::{allow_dynamic_shared, DeviceBuffer, Gpu, PushKernelArg, Stream};
use cudarc::driver::{CudaFunction, LaunchConfig};
use half::f16;
use rand::Rng;
use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};
use std::f64::consts::PI;
use std::sync::Arc;

pub use radio_kernels_gpu::frb_beamformer::nufft::{
    pack_origin, smem_layout, SmemLayout, GRIDS, TBAR_PER_BLOCK, THREADS, WEIGHTS_PER_BEAM, WIDTH,
};

/// The kernel's oversampling and width: the fine grid has `ceil(2 sigma M) x ceil(2 sigma N)`
/// cells, each beam reads `width x width` of them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NufftParams {
    pub sigma: f64,
    pub width: u32,
}

/// sigma = 2, w = 6: the smallest width whose error stays below [`NUFFT_F16_BOUND`] for every
/// unit mode (w = 5 reaches 5.6e-4 at the Nyquist modes); the fine grid is 4M x 4N.
pub const NUFFT_DEFAULT: NufftParams = NufftParams { sigma: 2.0, width: 6 };

/// The relative L2 error (against [`super::resample::resample_reference`]) that
/// [`NUFFT_DEFAULT`] stays below: 2^-13, a quarter of f16's unit roundoff 2^-11.
pub const NUFFT_F16_BOUND: f64 = 1.0 / 8192.0;

/// Accepted oversampling factors (the kernel's beta formula is FINUFFT's, tuned for this range).
pub const SIGMA_RANGE: (f64, f64) = (1.25, 4.0);
/// Accepted kernel widths in fine cells.
pub const WIDTH_RANGE: (u32, u32) = (2, 16);
/// Largest accepted |theta| (grid units): over 100x the largest physical position
/// `M |sigma| / lambda` of eq. 1; f32 still resolves 2^-11 grid units there. The same bound
/// as the GEMM resamplers'.
pub use super::resample::MAX_ABS_POSITION;

/// Gauss-Legendre nodes and weights on [-1, 1] (Newton on the three-term recurrence).
pub fn gauss_legendre(n: usize) -> Vec<(f64, f64)> {
    (0..n)
        .map(|i| {
            let mut x = (PI * (i as f64 + 0.75) / (n as f64 + 0.5)).cos();
            let mut derivative = 1.0;
            for _ in 0..100 {
                let (mut p0, mut p1) = (1.0, x);
                for k in 2..=n {
                    let p2 = ((2 * k - 1) as f64 * x * p1 - (k - 1) as f64 * p0) / k as f64;
                    p0 = p1;
                    p1 = p2;
                }
                let p = if n == 0 { 1.0 } else { p1 };
                derivative = n as f64 * (x * p - p0) / (x * x - 1.0);
                let step = p / derivative;
                x -= step;
                if step.abs() < 1e-16 {
                    break;
                }
            }
            (x, 2.0 / ((1.0 - x * x) * derivative * derivative))
        })
        .collect()
}

/// Fine-grid cells per period along an axis of degree M: `ceil(2 sigma M)`. A NaN or
/// infinite sigma is `NonFinite`; a length that is not in `1..=u32::MAX` `InvalidConfig`.
pub fn fine_len(m: u32, sigma: f64) -> Result<u32> {
    if !sigma.is_finite() {
        return Err(Error::NonFinite { what: "NUFFT oversampling sigma", index: 0 });
    }
    let len = (2.0 * sigma * m as f64 - 1e-9).ceil();
    if !(1.0..=u32::MAX as f64).contains(&len) {
        return Err(Error::InvalidConfig(format!(
            "a fine grid of ceil(2 sigma M) = {len} cells (sigma = {sigma}, M = {m}) is not in 1..=2^32 - 1"
        )));
    }
    Ok(len as u32)
}

/// The ES kernel's shape parameter for width w and oversampling sigma (FINUFFT's choice).
pub fn es_beta(width: u32, sigma: f64) -> f64 {
    0.97 * PI * width as f64 * (1.0 - 0.5 / sigma)
}

/// The "exponential of semicircle" kernel at `z = 2 u / w` (u in fine cells):
/// `exp(beta (sqrt(1 - z^2) - 1))` for `|z| <= 1`, else 0. Peak 1 at z = 0.
pub fn es_kernel(z: f64, beta: f64) -> f64 {
    if z.abs() > 1.0 {
        0.0
    } else {
        (beta * ((1.0 - z * z).sqrt() - 1.0)).exp()
    }
}

/// `phi(k) = int phi(u) exp(-2 pi i k u / L) du` over `|u| <= w/2` (real: the kernel is even),
/// by Gauss-Legendre in `z = sin t`, where the integrand is smooth (no sqrt edge).
pub fn es_fourier(k: f64, len: u32, width: u32, beta: f64) -> f64 {
    let half = width as f64 / 2.0;
    gauss_legendre(64)
        .iter()
        .map(|&(node, weight)| {
            let t = node * PI / 2.0;
            let z = t.sin();
            weight * (beta * (t.cos() - 1.0)).exp() * (2.0 * PI * k * half * z / len as f64).cos() * t.cos()
        })
        .sum::<f64>()
        * half
        * PI
        / 2.0
}

/// One axis of one beam: the first fine cell (already reduced mod L) and the w weights, cell
/// `first + i (mod L)` taking `weights[i]`. The beam sits at `pos = (theta mod M) L / M` fine
/// cells; the taps are the w cells from `ceil(pos - w/2)`, weights `es_kernel(2 (pos - l) / w)`.
/// Errors: theta or beta not finite (`NonFinite`), M, L or w zero (`InvalidConfig`).
pub fn beam_taps(theta: f64, m: u32, len: u32, width: u32, beta: f64) -> Result<(u32, Vec<f64>)> {
    for (what, value) in [("beam position theta", theta), ("NUFFT kernel shape beta", beta)] {
        if !value.is_finite() {
            return Err(Error::NonFinite { what, index: 0 });
        }
    }
    if m == 0 || len == 0 || width == 0 {
        return Err(Error::InvalidConfig(format!(
            "beam taps need a positive degree M, fine length L and width w, got {m}, {len}, {width}"
        )));
    }
    let pos = theta.rem_euclid(m as f64) * len as f64 / m as f64;
    let first = (pos - width as f64 / 2.0).ceil();
    let weights =
        (0..width).map(|i| es_kernel(2.0 * (pos - (first + i as f64)) / width as f64, beta)).collect();
    Ok((((first as i64).rem_euclid(len as i64)) as u32, weights))
}

/// Validates (M, N) against seed Table 2 and the kernel parameters.
fn check_params(m: u32, n: u32, params: &NufftParams) -> Result<()> {
    if !FRB_CASES.iter().any(|c| (c.m, c.n) == (m, n)) {
        return Err(Error::InvalidConfig(format!(
            "(M, N) = ({m}, {n}) is not a case of seed Table 2 ((8, 8), (8, 12), (16, 16), (16, 20), (24, 24))"
        )));
    }
    let NufftParams { sigma, width } = *params;
    if !sigma.is_finite() {
        return Err(Error::NonFinite { what: "NUFFT oversampling sigma", index: 0 });
    }
    if !(SIGMA_RANGE.0..=SIGMA_RANGE.1).contains(&sigma) {
        return Err(Error::InvalidConfig(format!(
            "NUFFT oversampling sigma = {sigma} is outside {SIGMA_RANGE:?}"
        )));
    }
    if width < WIDTH_RANGE.0 || width > WIDTH_RANGE.1 {
        return Err(Error::InvalidConfig(format!(
            "NUFFT kernel width w = {width} is outside {WIDTH_RANGE:?}"
        )));
    }
    Ok(())
}

/// One axis: the fine length, the per-mode deapodisation `a_s / (2M phi(s))` for `s = 0..=M`
/// (the DFT's 1/2M folded in), and the FFT plans (length 2M forward, L inverse).
struct Axis {
    degree: u32,
    len: u32,
    deapodise: Vec<f64>,
    forward: Arc<dyn Fft<f64>>,
    inverse: Arc<dyn Fft<f64>>,
}

impl Axis {
    /// For checked parameters (`check_params`).
    fn new(degree: u32, params: &NufftParams, planner: &mut FftPlanner<f64>) -> Result<Axis> {
        let len = fine_len(degree, params.sigma)?;
        let beta = es_beta(params.width, params.sigma);
        let deapodise = (0..=degree)
            .map(|s| {
                let a = if s == degree { 0.5 } else { 1.0 };
                a / (2.0 * degree as f64 * es_fourier(s as f64, len, params.width, beta))
            })
            .collect();
        Ok(Axis {
            degree,
            len,
            deapodise,
            forward: planner.plan_fft_forward(2 * degree as usize),
            inverse: planner.plan_fft_inverse(len as usize),
        })
    }
}

/// A type-2 NUFFT resampling plan (rustfft style): for given (M, N), channels, beam positions
/// and [`NufftParams`], it owns the deapodisation factors, the FFT plans and every beam's taps,
/// and resamples any number of slow samples with [`NufftPlan::resample`].
pub struct NufftPlan {
    channels: u32,
    beams: u32,
    params: NufftParams,
    x: Axis,
    y: Axis,
    /// `[f][beta]` first fine cells along theta and theta'.
    first: Vec<(u32, u32)>,
    /// `[f][beta][i]` weights along theta and theta' (w each).
    weights_x: Vec<f64>,
    weights_y: Vec<f64>,
}

impl NufftPlan {
    /// Plans for `channels` channels of `theta.len() / channels` beams: `theta`, `theta'` f32
    /// `[f][beta]` in grid units (any finite value with `|theta| <= MAX_ABS_POSITION`; J is
    /// M-periodic in theta and N-periodic in theta').
    pub fn new(
        m: u32,
        n: u32,
        channels: u32,
        theta: &[f32],
        theta_prime: &[f32],
        params: NufftParams,
    ) -> Result<NufftPlan> {
        check_params(m, n, &params)?;
        if channels == 0 {
            return Err(Error::InvalidConfig("NUFFT plan for 0 channels".into()));
        }
        if theta.is_empty() {
            return Err(Error::InvalidConfig("NUFFT plan for no beams".into()));
        }
        if !theta.len().is_multiple_of(channels as usize)
            || theta.len() / channels as usize > u32::MAX as usize
        {
            return Err(Error::ShapeMismatch {
                what: "theta (channels x beams)",
                expected: theta.len().next_multiple_of(channels as usize),
                actual: theta.len(),
            });
        }
        if theta_prime.len() != theta.len() {
            return Err(Error::ShapeMismatch {
                what: "theta'",
                expected: theta.len(),
                actual: theta_prime.len(),
            });
        }
        // NaN or infinite: `NonFinite`; past the bound: `InvalidConfig`.
        check_position_values("theta", theta)?;
        check_position_values("theta'", theta_prime)?;
        let mut planner = FftPlanner::new();
        let (x, y) = (Axis::new(m, &params, &mut planner)?, Axis::new(n, &params, &mut planner)?);
        let beta = es_beta(params.width, params.sigma);
        let mut first = Vec::with_capacity(theta.len());
        let (mut weights_x, mut weights_y) = (Vec::new(), Vec::new());
        for (&t, &tp) in theta.iter().zip(theta_prime) {
            let (x0, wx) = beam_taps(t as f64, m, x.len, params.width, beta)?;
            let (y0, wy) = beam_taps(tp as f64, n, y.len, params.width, beta)?;
            first.push((x0, y0));
            weights_x.extend(wx);
            weights_y.extend(wy);
        }
        let beams = (theta.len() / channels as usize) as u32;
        Ok(NufftPlan { channels, beams, params, x, y, first, weights_x, weights_y })
    }

    pub fn params(&self) -> NufftParams {
        self.params
    }
    pub fn channels(&self) -> u32 {
        self.channels
    }
    pub fn beams(&self) -> u32 {
        self.beams
    }
    /// Fine grid `(L_M, L_N)`.
    pub fn fine_shape(&self) -> (u32, u32) {
        (self.x.len, self.y.len)
    }
    /// Half-integer grid points `4MN` of one (f, tbar).
    pub fn k(&self) -> usize {
        4 * (self.x.degree * self.y.degree) as usize
    }

    /// Interpolation multiply-adds per (f, tbar, beam): w rows of w taps, then w for the rows.
    pub fn macs_per_output(&self) -> u64 {
        let w = self.params.width as u64;
        w * (w + 1)
    }

    /// Flops of the fine-grid step per (f, tbar) with radix-2-like FFTs (`5 n log2 n` per
    /// complex FFT of n points): the 2M x 2N forward transform and the L_M x L_N inverse.
    pub fn grid_flops_per_sample(&self) -> f64 {
        let fft = |n: f64| 5.0 * n * n.log2();
        let (m2, n2) = (2.0 * self.x.degree as f64, 2.0 * self.y.degree as f64);
        let (lm, ln) = (self.x.len as f64, self.y.len as f64);
        n2 * fft(m2) + m2 * fft(n2) + ln * fft(lm) + lm * fft(ln)
    }

    /// The real fine grid `g[l][l']` (`L_M x L_N`, row-major) of one (f, tbar) from its
    /// half-integer intensities `I[p][q]` (2M x 2N, any real values).
    pub fn fine_grid(&self, intensity: &[f64]) -> Result<Vec<f64>> {
        let (m2, n2) = (2 * self.x.degree as usize, 2 * self.y.degree as usize);
        if intensity.len() != m2 * n2 {
            return Err(Error::ShapeMismatch {
                what: "NUFFT grid input",
                expected: m2 * n2,
                actual: intensity.len(),
            });
        }
        // c = DFT of I, both axes (rows along q, then columns along p).
        let mut c: Vec<Complex<f64>> = intensity.iter().map(|&v| Complex::new(v, 0.0)).collect();
        self.y.forward.process(&mut c);
        transposed_fft(&mut c, m2, n2, &self.x.forward);
        // The spectrum: modes |s| <= M, |t| <= N, deapodised, at their fine-grid wavenumbers.
        let (lm, ln) = (self.x.len as usize, self.y.len as usize);
        let mut spectrum = vec![Complex::new(0.0, 0.0); lm * ln];
        let (m, n) = (self.x.degree as i64, self.y.degree as i64);
        for s in -m..=m {
            let ds = self.x.deapodise[s.unsigned_abs() as usize];
            for t in -n..=n {
                let dt = self.y.deapodise[t.unsigned_abs() as usize];
                let from = s.rem_euclid(2 * m) as usize * n2 + t.rem_euclid(2 * n) as usize;
                let to = s.rem_euclid(lm as i64) as usize * ln + t.rem_euclid(ln as i64) as usize;
                spectrum[to] = c[from] * (ds * dt);
            }
        }
        self.y.inverse.process(&mut spectrum);
        transposed_fft(&mut spectrum, lm, ln, &self.x.inverse);
        Ok(spectrum.iter().map(|z| z.re).collect())
    }

    /// The fine-grid step as two real matrices, `g = A I B^T`: A is `L_M x 2M`, B `L_N x 2N`,
    /// row-major, `A[l][p] = sum_{|s| <= M} d_s cos(2 pi s (l / L_M - p / 2M))` with `d_s` the
    /// deapodisation (DFT of I, deapodise, zero-pad and inverse DFT of one axis in one map;
    /// real because `d` is even). What the GPU kernel multiplies by.
    pub fn fine_matrices(&self) -> (Vec<f64>, Vec<f64>) {
        let matrix = |axis: &Axis| {
            let (m2, len) = (2 * axis.degree as usize, axis.len as usize);
            let mut a = vec![0.0; len * m2];
            for l in 0..len {
                for p in 0..m2 {
                    let x = l as f64 / len as f64 - p as f64 / m2 as f64;
                    a[l * m2 + p] = axis.deapodise[0]
                        + 2.0
                            * (1..=axis.degree as usize)
                                .map(|s| axis.deapodise[s] * (2.0 * PI * s as f64 * x).cos())
                                .sum::<f64>();
                }
            }
            a
        };
        (matrix(&self.x), matrix(&self.y))
    }

    /// J of one (f, tbar) at every beam of channel f, from its fine grid.
    pub fn interpolate(&self, f: u32, grid: &[f64], out: &mut [f64]) -> Result<()> {
        let (lm, ln) = (self.x.len as usize, self.y.len as usize);
        if f >= self.channels {
            return Err(Error::InvalidConfig(format!("channel {f} of a {}-channel plan", self.channels)));
        }
        if grid.len() != lm * ln {
            return Err(Error::ShapeMismatch {
                what: "NUFFT fine grid",
                expected: lm * ln,
                actual: grid.len(),
            });
        }
        if out.len() != self.beams as usize {
            return Err(Error::ShapeMismatch {
                what: "NUFFT beams",
                expected: self.beams as usize,
                actual: out.len(),
            });
        }
        let w = self.params.width as usize;
        for (beta, j) in out.iter_mut().enumerate() {
            let at = f as usize * self.beams as usize + beta;
            let (x0, y0) = self.first[at];
            let (wx, wy) = (&self.weights_x[at * w..][..w], &self.weights_y[at * w..][..w]);
            *j = wx
                .iter()
                .enumerate()
                .map(|(i, &a)| {
                    let row = &grid[(x0 as usize + i) % lm * ln..][..ln];
                    a * wy.iter().enumerate().map(|(k, &b)| b * row[(y0 as usize + k) % ln]).sum::<f64>()
                })
                .sum();
        }
        Ok(())
    }

    /// `J[f][tbar][beta]` (f64) for `times` slow samples of I (f16 bits `[f][tbar][p][q]`),
    /// the NUFFT counterpart of [`super::resample::resample_reference`].
    pub fn resample(&self, times: u32, intensity: &[u16], out: &mut [f64]) -> Result<()> {
        let k = self.k();
        if times == 0 {
            return Err(Error::InvalidConfig("NUFFT resampling of 0 slow samples".into()));
        }
        let (i_len, j_len) = io_lens(self.channels, times, k, self.beams);
        if intensity.len() != i_len {
            return Err(Error::ShapeMismatch {
                what: "FRB intensity",
                expected: i_len,
                actual: intensity.len(),
            });
        }
        if out.len() != j_len {
            return Err(Error::ShapeMismatch { what: "FRB beams", expected: j_len, actual: out.len() });
        }
        for (sample, (row, j)) in intensity.chunks(k).zip(out.chunks_mut(self.beams as usize)).enumerate() {
            let values: Vec<f64> = row.iter().map(|&h| f16::from_bits(h).to_f64()).collect();
            let grid = self.fine_grid(&values)?;
            self.interpolate((sample / times as usize) as u32, &grid, j)?;
        }
        Ok(())
    }
}

/// The lengths of I (`F T k` values) and J (`F T B`), saturating at `usize::MAX` (never the
/// length of a slice, so an impossible size is a `ShapeMismatch`).
fn io_lens(channels: u32, times: u32, k: usize, beams: u32) -> (usize, usize) {
    let samples = channels as u128 * times as u128;
    (crate::size::saturate(samples * k as u128), crate::size::saturate(samples * beams as u128))
}

/// FFTs the columns of a `rows x cols` row-major array in place (through a transpose).
fn transposed_fft(data: &mut [Complex<f64>], rows: usize, cols: usize, fft: &Arc<dyn Fft<f64>>) {
    let mut t: Vec<Complex<f64>> = (0..rows * cols).map(|i| data[(i % rows) * cols + i / rows]).collect();
    fft.process(&mut t);
    for (i, v) in t.into_iter().enumerate() {
        data[(i % rows) * cols + i / rows] = v;
    }
}

/// Beam positions that probe the NUFFT's error, for tests and for validating a plan against
/// the exact path: `random` positions uniform over three periods each way, then the edge
/// beams of (M, N): every half-integer theta, the period ends 0, M, -M and their f32
/// neighbours, and the ends of the valid range ([`MAX_ABS_POSITION`]).
pub fn probe_beams(m: u32, n: u32, random: usize, rng: &mut impl Rng) -> (Vec<f32>, Vec<f32>) {
    let mut theta = vec![];
    let mut theta_prime = vec![];
    for _ in 0..random {
        theta.push(rng.random_range(-3.0 * m as f32..3.0 * m as f32));
        theta_prime.push(rng.random_range(-3.0 * n as f32..3.0 * n as f32));
    }
    for p in 0..2 * m {
        theta.push(p as f32 / 2.0);
        theta_prime.push(((p * 7) % (2 * n)) as f32 / 2.0);
    }
    let (mf, nf) = (m as f32, n as f32);
    let edges = [
        (0.0, 0.0),
        (mf, nf),
        (-mf, -nf),
        (mf.next_down(), nf.next_up()),
        ((-mf).next_up(), 0f32.next_down()),
        (MAX_ABS_POSITION, -MAX_ABS_POSITION),
        (-MAX_ABS_POSITION, MAX_ABS_POSITION.next_down()),
        (0.25, nf - 0.5),
    ];
    for (a, b) in edges {
        theta.push(a);
        theta_prime.push(b);
    }
    (theta, theta_prime)
}

/// The NUFFT path on the GPU (`radio_kernels_gpu::frb_beamformer::nufft`): one fused kernel
/// per launch (fine grids in shared memory, f32 arithmetic, J rounded to f16), for plans with
/// [`NUFFT_DEFAULT`] (sigma = 2, w = 6: the kernel's fixed shape). Owns A^T, B^T, the beams'
/// packed tap origins and weights (f32), computed by the plan on the host.
///
/// Correct, not yet fast: on the H200 it takes 46 ms per second of data at full CHORD and
/// 67 ms at HIRAX square, 4.3x and 6.9x the exact W path ([`super::resample::Resampler`],
/// which is the one to use). The interpolation's shared-memory gathers on the CUDA cores,
/// not the operation count, bound it (BENCHMARKS.md, "NUFFT path"). It needs
/// [`smem_layout`]`(M, N).total` bytes of shared memory per block (207 KiB at full CHORD),
/// more than Ampere offers for the larger cases: [`GpuNufft::new`] then returns an error.
pub struct GpuNufft<'g> {
    gpu: &'g Gpu,
    m: u32,
    n: u32,
    channels: u32,
    beams: u32,
    function: CudaFunction,
    layout: SmemLayout,
    at: DeviceBuffer<f32>,
    bt: DeviceBuffer<f32>,
    origins: DeviceBuffer<u32>,
    weights: DeviceBuffer<f32>,
    /// The stream `resample` launches on.
    stream: Stream,
}

impl<'g> GpuNufft<'g> {
    pub fn new(gpu: &'g Gpu, plan: &NufftPlan) -> Result<GpuNufft<'g>> {
        if plan.params != NUFFT_DEFAULT || NUFFT_DEFAULT.width != WIDTH {
            return Err(Error::InvalidConfig(format!(
                "the GPU NUFFT runs sigma = 2, w = {WIDTH} only, not {:?}",
                plan.params
            )));
        }
        if plan.channels > 65535 {
            return Err(Error::InvalidConfig(format!("{} channels exceed the grid's 65535", plan.channels)));
        }
        let (m, n) = (plan.x.degree, plan.y.degree);
        let (a, b) = plan.fine_matrices();
        // Transposed: AT[p][l], BT[q][l'].
        let transpose = |a: &[f64], rows: usize, cols: usize| -> Vec<f32> {
            (0..rows * cols).map(|i| a[(i % rows) * cols + i / rows] as f32).collect()
        };
        let at = transpose(&a, plan.x.len as usize, 2 * m as usize);
        let bt = transpose(&b, plan.y.len as usize, 2 * n as usize);
        let origins: Vec<u32> = plan.first.iter().map(|&(x0, y0)| pack_origin(x0, y0)).collect();
        let w = WIDTH as usize;
        let weights: Vec<f32> = (0..plan.first.len())
            .flat_map(|at| {
                plan.weights_x[at * w..][..w].iter().chain(&plan.weights_y[at * w..][..w]).map(|&v| v as f32)
            })
            .collect();
        let layout = smem_layout(m, n);
        if layout.total > gpu.max_shared_per_block() {
            return Err(Error::InvalidConfig(format!(
                "the GPU NUFFT for (M, N) = ({m}, {n}) needs {} bytes of shared memory per block; \
                 this GPU allows {}",
                layout.total,
                gpu.max_shared_per_block()
            )));
        }
        let function = gpu.function("frb_nufft_resample")?;
        allow_dynamic_shared(&function, layout.total, "raising the NUFFT kernel's shared-memory limit")?;
        Ok(GpuNufft {
            gpu,
            m,
            n,
            channels: plan.channels,
            beams: plan.beams,
            function,
            layout,
            at: gpu.upload(&at)?,
            bt: gpu.upload(&bt)?,
            origins: gpu.upload(&origins)?,
            weights: gpu.upload(&weights)?,
            stream: gpu.stream().clone(),
        })
    }

    /// Launches `resample` on `stream` (the GPU's default stream until set), so that callers
    /// can order their own work with ours; [`Error::WrongDevice`] for a stream of another GPU.
    pub fn set_stream(&mut self, stream: &Stream) -> Result<()> {
        self.gpu.switch_stream(&mut self.stream, stream, "NUFFT resampler stream")
    }

    /// The stream `resample` launches on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// `J[f][tbar][beta]` (f16 bits) for `times` slow samples of I (f16 bits `[f][tbar][p][q]`).
    pub fn resample(
        &self,
        times: u32,
        intensity: &DeviceBuffer<u16>,
        out: &mut DeviceBuffer<u16>,
    ) -> Result<()> {
        if times == 0 {
            return Err(Error::InvalidConfig("NUFFT resampling of 0 slow samples".into()));
        }
        let (i_len, j_len) = io_lens(self.channels, times, 4 * (self.m * self.n) as usize, self.beams);
        for (what, expected, actual) in
            [("FRB intensity", i_len, intensity.len()), ("FRB beams", j_len, out.len())]
        {
            if expected != actual {
                return Err(Error::ShapeMismatch { what, expected, actual });
            }
        }
        self.gpu.check_owner(intensity, "FRB intensity")?;
        self.gpu.check_owner(out, "FRB beams")?;
        let mut launch = self.stream.launch_builder(&self.function);
        launch
            .arg(intensity.raw())
            .arg(self.at.raw())
            .arg(self.bt.raw())
            .arg(self.origins.raw())
            .arg(self.weights.raw())
            .arg(out.arg_mut())
            .arg(&times)
            .arg(&self.beams)
            .arg(&self.m)
            .arg(&self.n);
        let config = LaunchConfig {
            grid_dim: (times.div_ceil(TBAR_PER_BLOCK), self.channels, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: self.layout.total,
        };
        // SAFETY: arguments match `frb_nufft_resample`; I and J hold F T 4MN and F T B halves
        // (checked), A^T, B^T, the origins and weights (16-byte aligned rows of 12 f32) were
        // made by `new` for this (M, N, F, B); the shared-memory limit was raised in `new`.
        unsafe { launch.launch(config) }.during("launching the NUFFT resampling kernel")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frb_beamformer::resample::{resample_reference, ResampleConfig};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn relative_l2(got: &[f64], want: &[f64]) -> f64 {
        let err: f64 = got.iter().zip(want).map(|(a, b)| (a - b) * (a - b)).sum();
        let norm: f64 = want.iter().map(|b| b * b).sum();
        (err / norm).sqrt()
    }

    /// Random I in [0, 2) (the benches' inputs) as f16 bits.
    fn random_intensity(len: usize, rng: &mut StdRng) -> Vec<u16> {
        (0..len).map(|_| f16::from_f64(rng.random_range(0.0..2.0)).to_bits()).collect()
    }

    /// (NUFFT J, exact J) for one random job of `channels` x `times` of (M, N).
    fn job(m: u32, n: u32, params: NufftParams, seed: u64) -> (Vec<f64>, Vec<f64>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (channels, times) = (2, 3);
        let (mut theta, mut theta_prime) = (vec![], vec![]);
        for _ in 0..channels {
            let (t, tp) = probe_beams(m, n, 40, &mut rng);
            theta.extend(t);
            theta_prime.extend(tp);
        }
        let plan = NufftPlan::new(m, n, channels, &theta, &theta_prime, params).unwrap();
        let config = ResampleConfig { channels, times, m, n, beams: plan.beams() };
        let intensity = random_intensity(config.intensity_len(), &mut rng);
        let want = resample_reference(&config, &intensity, &theta, &theta_prime).unwrap();
        let mut got = vec![f64::NAN; config.output_len()];
        plan.resample(times, &intensity, &mut got).unwrap();
        (got, want)
    }

    /// The stated bound: every Table 2 case, random and edge beams, random I, error below
    /// 2^-13 relative L2, below an eighth of f16 rounding's, and each beam within 8 x 2^-13
    /// of the job's RMS.
    #[test]
    fn default_plan_is_within_the_f16_bound_for_every_case() {
        for (k, case) in FRB_CASES.iter().enumerate() {
            let seed = 0x4e75_0000 + k as u64;
            let (got, want) = job(case.m, case.n, NUFFT_DEFAULT, seed);
            let error = relative_l2(&got, &want);
            let rms = (want.iter().map(|v| v * v).sum::<f64>() / want.len() as f64).sqrt();
            let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max) / rms;
            let mean = want.iter().sum::<f64>() / want.len() as f64;
            let spread =
                (want.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / want.len() as f64).sqrt();
            let err_rms = error * rms;
            println!(
                "(M, N) = ({}, {}), seed {seed:#x}: relative L2 {error:.3e}, worst / rms {worst:.3e}, rms error / std(J) {:.3e}",
                case.m,
                case.n,
                err_rms / spread
            );
            let rounded: Vec<f64> = want.iter().map(|&v| f16::from_f64(v).to_f64()).collect();
            let f16_error = relative_l2(&rounded, &want);
            println!("    rounding J to f16: relative L2 {f16_error:.3e}");
            assert!(error < NUFFT_F16_BOUND, "({}, {}): {error:e}", case.m, case.n);
            assert!(error < f16_error / 8.0, "({}, {}): {error:e} vs f16 {f16_error:e}", case.m, case.n);
            assert!(worst < 8.0 * NUFFT_F16_BOUND, "({}, {}): worst {worst:e}", case.m, case.n);
        }
    }

    /// The error falls with the width (sigma = 2 and 1.5), by at least 2.5x per step from
    /// w = 2 to 9, at full CHORD: a wrong kernel transform, deapodisation or tap position
    /// would leave an error floor.
    #[test]
    fn error_falls_as_the_kernel_widens() {
        for sigma in [2.0, 1.5] {
            let errors: Vec<f64> = (2..=9)
                .map(|width| {
                    let (got, want) = job(24, 24, NufftParams { sigma, width }, 0x4e75_1000);
                    relative_l2(&got, &want)
                })
                .collect();
            let shown: Vec<String> = errors.iter().map(|e| format!("{e:.2e}")).collect();
            println!("sigma {sigma}: errors for w = 2..=9: {shown:?}");
            for pair in errors.windows(2) {
                assert!(pair[1] < pair[0] / 2.5, "sigma {sigma}: {errors:?}");
            }
            assert!(errors[errors.len() - 1] < 1e-6, "sigma {sigma}: {errors:?}");
        }
    }

    /// With the deapodisation switched off (phi = phi(0) for every mode) the error stays near
    /// the kernel's spectral droop whatever w: the check above could catch a wrong phi.
    #[test]
    fn without_deapodisation_the_error_is_large() {
        let mut rng = StdRng::seed_from_u64(0x4e75_2000);
        let (m, n) = (16, 16);
        let (theta, theta_prime) = probe_beams(m, n, 40, &mut rng);
        let mut plan = NufftPlan::new(m, n, 1, &theta, &theta_prime, NUFFT_DEFAULT).unwrap();
        for axis in [&mut plan.x, &mut plan.y] {
            let d0 = axis.deapodise[0];
            for (s, d) in axis.deapodise.iter_mut().enumerate() {
                *d = if s == axis.degree as usize { d0 / 2.0 } else { d0 };
            }
        }
        let config = ResampleConfig { channels: 1, times: 2, m, n, beams: plan.beams() };
        let intensity = random_intensity(config.intensity_len(), &mut rng);
        let want = resample_reference(&config, &intensity, &theta, &theta_prime).unwrap();
        let mut got = vec![0.0; config.output_len()];
        plan.resample(2, &intensity, &mut got).unwrap();
        assert!(relative_l2(&got, &want) > 1e-2);
    }

    /// A plan's fine grid of a constant I is the constant over the kernel's mass, and the
    /// interpolation of a single mode reproduces it: the transform and tap conventions agree.
    #[test]
    fn single_modes_are_reproduced() {
        let (m, n) = (8, 12);
        let (theta, theta_prime): (Vec<f32>, Vec<f32>) =
            (0..50).map(|k| (k as f32 * 0.377 - 9.0, k as f32 * 0.291 - 7.0)).unzip();
        let plan = NufftPlan::new(m, n, 1, &theta, &theta_prime, NUFFT_DEFAULT).unwrap();
        for (s, t) in [(0i32, 0i32), (1, 0), (0, -3), (5, 7), (8, 12), (-8, 5)] {
            // I_pq = cos(2 pi (p s / 2M + q t / 2N)): J = U-resampled, by eq. 137.
            let i: Vec<f64> = (0..2 * m)
                .flat_map(|p| (0..2 * n).map(move |q| (p, q)))
                .map(|(p, q)| {
                    (2.0 * PI * (p as f64 * s as f64 / (2 * m) as f64 + q as f64 * t as f64 / (2 * n) as f64))
                        .cos()
                })
                .collect();
            let grid = plan.fine_grid(&i).unwrap();
            let mut got = vec![0.0; theta.len()];
            plan.interpolate(0, &grid, &mut got).unwrap();
            for (beta, &j) in got.iter().enumerate() {
                let want: f64 = (0..2 * m)
                    .flat_map(|p| (0..2 * n).map(move |q| (p, q)))
                    .map(|(p, q)| {
                        crate::frb_beamformer::resample::u_function(m, p, theta[beta] as f64)
                            * crate::frb_beamformer::resample::u_function(n, q, theta_prime[beta] as f64)
                            * i[(p * 2 * n + q) as usize]
                    })
                    .sum();
                assert!((j - want).abs() < NUFFT_F16_BOUND, "mode ({s}, {t}) beam {beta}: {j} vs {want}");
            }
        }
    }

    /// The two-matrix form of the fine-grid step equals the FFT form.
    #[test]
    fn fine_matrices_equal_the_fft_step() {
        let mut rng = StdRng::seed_from_u64(0x4e75_3000);
        for case in FRB_CASES {
            let (m, n) = (case.m, case.n);
            let plan = NufftPlan::new(m, n, 1, &[0.3], &[1.7], NUFFT_DEFAULT).unwrap();
            let (a, b) = plan.fine_matrices();
            let (lm, ln) = (plan.x.len as usize, plan.y.len as usize);
            let (m2, n2) = (2 * m as usize, 2 * n as usize);
            let i: Vec<f64> = (0..m2 * n2).map(|_| rng.random_range(0.0..2.0)).collect();
            let want = plan.fine_grid(&i).unwrap();
            let scale = want.iter().fold(0.0f64, |x, v| x.max(v.abs()));
            for l in 0..lm {
                for l2 in 0..ln {
                    let g: f64 = (0..m2)
                        .map(|p| a[l * m2 + p] * (0..n2).map(|q| i[p * n2 + q] * b[l2 * n2 + q]).sum::<f64>())
                        .sum();
                    assert!((g - want[l * ln + l2]).abs() < 1e-12 * scale, "({m}, {n}) at ({l}, {l2})");
                }
            }
        }
    }

    /// The two-matrix fine-grid step and the interpolation in f32 (the arithmetic a GPU kernel
    /// on the CUDA cores would do: f32 A, B, weights, fma sums in p, q, tap order) stay within
    /// the bound: f32 adds ~1e-7 to the NUFFT's 7.5e-6.
    #[test]
    fn f32_two_matrix_form_is_within_the_bound() {
        let mut rng = StdRng::seed_from_u64(0x4e75_4000);
        for case in FRB_CASES {
            let (m, n) = (case.m, case.n);
            let (theta, theta_prime) = probe_beams(m, n, 200, &mut rng);
            let plan = NufftPlan::new(m, n, 1, &theta, &theta_prime, NUFFT_DEFAULT).unwrap();
            let (a, b) = plan.fine_matrices();
            let (a, b): (Vec<f32>, Vec<f32>) =
                (a.iter().map(|&v| v as f32).collect(), b.iter().map(|&v| v as f32).collect());
            let (lm, ln) = (plan.x.len as usize, plan.y.len as usize);
            let (m2, n2) = (2 * m as usize, 2 * n as usize);
            let config = ResampleConfig { channels: 1, times: 2, m, n, beams: plan.beams() };
            let intensity = random_intensity(config.intensity_len(), &mut rng);
            let want = resample_reference(&config, &intensity, &theta, &theta_prime).unwrap();
            let w = NUFFT_DEFAULT.width as usize;
            let mut got = vec![];
            for row in intensity.chunks(m2 * n2) {
                let i: Vec<f32> = row.iter().map(|&h| f16::from_bits(h).to_f32()).collect();
                let mut v = vec![0f32; m2 * ln];
                for p in 0..m2 {
                    for l2 in 0..ln {
                        v[p * ln + l2] =
                            (0..n2).fold(0.0, |acc, q| i[p * n2 + q].mul_add(b[l2 * n2 + q], acc));
                    }
                }
                let mut g = vec![0f32; lm * ln];
                for l in 0..lm {
                    for l2 in 0..ln {
                        g[l * ln + l2] =
                            (0..m2).fold(0.0, |acc, p| a[l * m2 + p].mul_add(v[p * ln + l2], acc));
                    }
                }
                for beta in 0..plan.beams() as usize {
                    let (x0, y0) = plan.first[beta];
                    let (wx, wy) = (&plan.weights_x[beta * w..][..w], &plan.weights_y[beta * w..][..w]);
                    let j = (0..w).fold(0f32, |acc, r| {
                        let x = (x0 as usize + r) % lm;
                        let inner = (0..w)
                            .fold(0f32, |s, c| (wy[c] as f32).mul_add(g[x * ln + (y0 as usize + c) % ln], s));
                        (wx[r] as f32).mul_add(inner, acc)
                    });
                    got.push(j as f64);
                }
            }
            let error = relative_l2(&got, &want);
            println!("({m}, {n}) f32 two-matrix form: relative L2 {error:.3e}");
            assert!(error < NUFFT_F16_BOUND / 4.0, "({m}, {n}): {error:e}");
        }
    }

    #[test]
    fn quadrature_and_kernel_transform_are_accurate() {
        // Gauss-Legendre of 64 nodes integrates x^126 exactly and cos(5x) to f64 rounding.
        let gl = gauss_legendre(64);
        let poly: f64 = gl.iter().map(|&(x, w)| w * x.powi(126)).sum();
        assert!((poly - 2.0 / 127.0).abs() < 1e-14, "{poly}");
        let cosine: f64 = gl.iter().map(|&(x, w)| w * (5.0 * x).cos()).sum();
        assert!((cosine - 2.0 * 5f64.sin() / 5.0).abs() < 1e-14, "{cosine}");
        // The transform against a fine midpoint rule in u.
        for (width, k, len) in [(7u32, 0.0, 96u32), (7, 24.0, 96), (4, 7.0, 32), (16, 20.0, 50)] {
            let beta = es_beta(width, 2.0);
            let steps = 400_000;
            let h = width as f64 / steps as f64;
            let midpoint: f64 = (0..steps)
                .map(|i| {
                    let u = -(width as f64) / 2.0 + (i as f64 + 0.5) * h;
                    h * es_kernel(2.0 * u / width as f64, beta) * (2.0 * PI * k * u / len as f64).cos()
                })
                .sum();
            let got = es_fourier(k, len, width, beta);
            assert!((got - midpoint).abs() < 1e-8 * midpoint.abs(), "w {width} k {k}: {got} vs {midpoint}");
        }
    }

    #[test]
    fn taps_cover_the_kernel_support() {
        let beta = es_beta(7, 2.0);
        for theta in [0.0, 0.5, 23.999, -0.001, 24.0, -24.0, 100.3, 7.125] {
            let (first, weights) = beam_taps(theta, 24, 96, 7, beta).unwrap();
            assert!(first < 96);
            let pos = theta.rem_euclid(24.0) * 4.0;
            // The taps are the w cells within w/2 of pos (mod L).
            for (i, &w) in weights.iter().enumerate() {
                let cell = (first as f64 + i as f64) % 96.0;
                let d = ((pos - cell).rem_euclid(96.0) + 48.0).rem_euclid(96.0) - 48.0;
                assert!(d.abs() <= 3.5 + 1e-9, "theta {theta}: tap {i} at distance {d}");
                assert!((w - es_kernel(2.0 * d / 7.0, beta)).abs() < 1e-12);
            }
        }
        assert_eq!(fine_len(24, 2.0).unwrap(), 96);
        assert_eq!(fine_len(8, 1.25).unwrap(), 20);
        assert_eq!(fine_len(12, 1.5).unwrap(), 36);
    }

    /// The cost figures of the module comment.
    #[test]
    fn cost_figures_match_the_module_comment() {
        for (m, beams, per_beam) in [(24u32, 5760.0, 128.0), (16, 2560.0, 116.0)] {
            let plan = NufftPlan::new(m, m, 1, &[0.0], &[0.0], NUFFT_DEFAULT).unwrap();
            assert_eq!(plan.macs_per_output(), 42);
            assert_eq!(plan.k(), (4 * m * m) as usize);
            assert!((plan.grid_flops_per_sample() / beams - per_beam).abs() < 0.5, "{m}");
            let matrix_macs = (2 * m * 2 * m * 4 * m + 4 * m * 2 * m * 4 * m) as f64;
            assert_eq!(plan.fine_shape(), (4 * m, 4 * m));
            assert!((matrix_macs / beams).round() == if m == 24 { 115.0 } else { 77.0 });
        }
    }

    #[test]
    fn bad_inputs_are_rejected() {
        let t = vec![0.5f32; 6];
        let ok = NufftPlan::new(8, 12, 2, &t, &t, NUFFT_DEFAULT);
        assert!(ok.is_ok());
        let invalid = |r: Result<NufftPlan>| matches!(r, Err(Error::InvalidConfig(_)));
        let shape = |r: Result<NufftPlan>| matches!(r, Err(Error::ShapeMismatch { .. }));
        assert!(invalid(NufftPlan::new(8, 10, 2, &t, &t, NUFFT_DEFAULT)));
        assert!(invalid(NufftPlan::new(8, 12, 0, &t, &t, NUFFT_DEFAULT)));
        assert!(invalid(NufftPlan::new(8, 12, 1, &[], &[], NUFFT_DEFAULT)));
        assert!(invalid(NufftPlan::new(8, 12, 2, &t, &t, NufftParams { sigma: 1.0, width: 7 })));
        let non_finite = |r: Result<NufftPlan>| matches!(r, Err(Error::NonFinite { .. }));
        assert!(non_finite(NufftPlan::new(8, 12, 2, &t, &t, NufftParams { sigma: f64::NAN, width: 7 })));
        assert!(invalid(NufftPlan::new(8, 12, 2, &t, &t, NufftParams { sigma: 2.0, width: 1 })));
        assert!(invalid(NufftPlan::new(8, 12, 2, &t, &t, NufftParams { sigma: 2.0, width: 17 })));
        for bad in [f32::NAN, f32::INFINITY, -f32::INFINITY] {
            let mut b = t.clone();
            b[3] = bad;
            let r = NufftPlan::new(8, 12, 2, &b, &t, NUFFT_DEFAULT);
            assert!(matches!(r, Err(Error::NonFinite { what: "theta", index: 3 })), "{bad}");
            let r = NufftPlan::new(8, 12, 2, &t, &b, NUFFT_DEFAULT);
            assert!(matches!(r, Err(Error::NonFinite { what: "theta'", index: 3 })), "{bad}");
        }
        for bad in [MAX_ABS_POSITION.next_up(), -5000.0] {
            let mut b = t.clone();
            b[3] = bad;
            assert!(invalid(NufftPlan::new(8, 12, 2, &b, &t, NUFFT_DEFAULT)), "{bad}");
            assert!(invalid(NufftPlan::new(8, 12, 2, &t, &b, NUFFT_DEFAULT)), "{bad}");
        }
        assert!(matches!(fine_len(8, f64::INFINITY), Err(Error::NonFinite { .. })));
        assert!(matches!(fine_len(8, -1.0), Err(Error::InvalidConfig(_))));
        assert!(matches!(fine_len(u32::MAX, 4.0), Err(Error::InvalidConfig(_))));
        assert!(matches!(beam_taps(1.0, 0, 0, 6, 1.0), Err(Error::InvalidConfig(_))));
        assert!(matches!(beam_taps(f64::NAN, 8, 32, 6, 1.0), Err(Error::NonFinite { .. })));
        assert!(shape(NufftPlan::new(8, 12, 4, &t, &t, NUFFT_DEFAULT)));
        assert!(shape(NufftPlan::new(8, 12, 2, &t, &t[..4], NUFFT_DEFAULT)));
        let plan = ok.unwrap();
        let i = vec![0u16; 2 * 2 * 4 * 8 * 12];
        let mut j = vec![0.0; 2 * 2 * 3];
        assert!(plan.resample(2, &i, &mut j).is_ok());
        assert!(matches!(plan.resample(2, &i[1..], &mut j), Err(Error::ShapeMismatch { .. })));
        assert!(matches!(plan.resample(2, &i, &mut j[1..]), Err(Error::ShapeMismatch { .. })));
        assert!(matches!(plan.resample(0, &[], &mut []), Err(Error::InvalidConfig(_))));
        assert!(matches!(plan.fine_grid(&[0.0; 10]), Err(Error::ShapeMismatch { .. })));
        let grid = vec![0.0; 32 * 48];
        assert!(matches!(plan.interpolate(2, &grid, &mut [0.0; 3]), Err(Error::InvalidConfig(_))));
        assert!(matches!(plan.interpolate(0, &grid[1..], &mut [0.0; 3]), Err(Error::ShapeMismatch { .. })));
        assert!(matches!(plan.interpolate(0, &grid, &mut [0.0; 2]), Err(Error::ShapeMismatch { .. })));
    }
}
