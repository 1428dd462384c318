//! A simulated telescope and sky: dishes on a square grid (CHORD's 6.3 m north-south and
//! 8.5 m east-west spacing), point sources of Gaussian noise near zenith plus receiver noise,
//! sampled by 10-bit digitisers at [`SAMPLE_RATE`].
//!
//! A source in direction `s` (direction cosines `(l, m)` along north and east) reaches dish
//! `d` at position `r_d` earlier by `r_d . s / c`, so in the frequency domain its voltage is
//! `S(f) exp(+2 pi i f r_d . s / c)`. Each polarisation of each source is an independent
//! complex Gaussian spectrum; the record is made in the frequency domain (exact fractional
//! delays) and inverse-transformed to real samples.
use radio_kernels_host::{Error, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rustfft::num_complex::Complex;
use rustfft::FftPlanner;

/// Digitiser sample rate (Hz): the first Nyquist zone is 0 - 1.6 GHz.
pub const SAMPLE_RATE: f64 = 3.2e9;
/// Speed of light (m/s).
pub const LIGHT: f64 = 299_792_458.0;
/// Dish spacing north-south and east-west (m): CHORD's, the FRB beamformer's sigma and sigma'.
pub const SPACING: (f64, f64) = (6.3, 8.5);
/// Receiver noise rms per polarisation in ADC units (10-bit range +-511).
pub const NOISE_RMS: f64 = 30.0;

/// A point source: direction cosines (north, east) and rms in ADC units per polarisation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Source {
    /// Direction cosine toward north.
    pub l: f64,
    /// Direction cosine toward east.
    pub m: f64,
    /// Amplitude: rms per polarisation in ADC units.
    pub rms: f64,
}

/// A square array of `side x side` dual-polarisation dishes, `side` in 1 ..= [`MAX_SIDE`]
/// (checked by [`Array::new`], so every method is defined and no product overflows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Array {
    side: u32,
}

/// The largest array side: 65025 dishes.
pub const MAX_SIDE: u32 = 255;

impl Array {
    /// The array of `side x side` dishes; an error unless `side` is in 1 ..= [`MAX_SIDE`].
    pub fn new(side: u32) -> Result<Array> {
        if !(1..=MAX_SIDE).contains(&side) {
            return Err(Error::InvalidConfig(format!("array side must be 1 ..= {MAX_SIDE}, got {side}")));
        }
        Ok(Array { side })
    }
    /// Dishes along each side.
    pub fn side(&self) -> u32 {
        self.side
    }
    /// Dishes in the array, `side^2`.
    pub fn dishes(&self) -> u32 {
        self.side * self.side
    }
    /// Grid cell of dish `d`: (north index, east index).
    pub fn cell(&self, d: u32) -> (u32, u32) {
        (d / self.side, d % self.side)
    }
    /// Position of dish `d` (m): (north, east).
    pub fn position(&self, d: u32) -> (f64, f64) {
        let (i, j) = self.cell(d);
        (SPACING.0 * i as f64, SPACING.1 * j as f64)
    }
    /// How much earlier (s) a signal from direction (l, m) reaches dish `d` than the origin.
    pub fn lead(&self, d: u32, l: f64, m: f64) -> f64 {
        let (x, y) = self.position(d);
        (x * l + y * m) / LIGHT
    }
}

/// Centre frequency (Hz) of channel `k` of an `n`-channel PFB of the digitised band.
pub fn channel_frequency(k: u32, n: u32) -> f64 {
    f64::from(k) * SAMPLE_RATE / (2.0 * f64::from(n))
}

/// The demo's sources: `count` (1 to 8) sources placed so that, at frequency `reference`
/// (finite, above 0), they fall on distinct half-integer points of the FRB beamformer's
/// `side x side` grid ([`frb_coordinates`]), the first the brightest. Other values are errors.
pub fn sources(count: u32, side: u32, reference: f64) -> Result<Vec<Source>> {
    if !(1..=8).contains(&count) {
        return Err(Error::InvalidConfig(format!("sources: count must be 1 ..= 8, got {count}")));
    }
    if side == 0 || !reference.is_finite() || reference <= 0.0 {
        return Err(Error::InvalidConfig(format!(
            "sources: side {side} and reference frequency {reference} Hz must be above 0 and finite"
        )));
    }
    // Grid units (theta, theta') of each source, then back to direction cosines.
    const PLACES: [(f64, f64); 8] = [
        (1.5, 2.0),
        (-2.5, 0.5),
        (3.0, -3.0),
        (-1.0, -2.5),
        (0.5, 3.5),
        (2.5, -1.0),
        (-3.5, 2.5),
        (0.0, -1.5),
    ];
    const RMS: [f64; 8] = [30.0, 18.0, 14.0, 12.0, 11.0, 10.0, 9.0, 8.0];
    let lambda = LIGHT / reference;
    Ok(PLACES
        .iter()
        .zip(RMS)
        .take(count as usize)
        .map(|(&(theta, theta_prime), rms)| {
            let (l, m) = frb_direction(theta, theta_prime, side, lambda);
            Source { l, m, rms }
        })
        .collect())
}

/// Grid coordinates (theta, theta') of direction (l, m) at wavelength `lambda` for the FRB
/// beamformer's Fourier convention: E has phase `+2 pi (i sigma l + j sigma' m) / lambda`
/// at cell (i, j), and the beam `sum_ij E exp(2 pi i (i theta / M + j theta' / N))` peaks at
/// `theta = -M sigma l / lambda` (modulo M).
pub fn frb_coordinates(l: f64, m: f64, side: u32, lambda: f64) -> (f64, f64) {
    let s = side as f64;
    (-s * SPACING.0 * l / lambda, -s * SPACING.1 * m / lambda)
}

/// Inverse of [`frb_coordinates`].
pub fn frb_direction(theta: f64, theta_prime: f64, side: u32, lambda: f64) -> (f64, f64) {
    let s = side as f64;
    (-theta * lambda / (s * SPACING.0), -theta_prime * lambda / (s * SPACING.1))
}

/// Digitised samples `[dish][pol][sample]` (10-bit signed) of `samples` (even, above 0) per
/// polarisation. Errors on an odd or zero `samples` and on a source with a non-finite field.
pub fn observe(array: Array, sources: &[Source], samples: usize, seed: u64) -> Result<Vec<[Vec<i32>; 2]>> {
    if samples == 0 || !samples.is_multiple_of(2) {
        return Err(Error::InvalidConfig(format!(
            "observe: samples must be even and above 0, got {samples}"
        )));
    }
    if let Some(index) =
        sources.iter().position(|s| !(s.l.is_finite() && s.m.is_finite() && s.rms.is_finite()))
    {
        return Err(Error::NonFinite { what: "sources", index });
    }
    let bins = samples / 2 + 1;
    // Per source and polarisation, its spectrum (unit complex Gaussians per bin).
    let mut rng = StdRng::seed_from_u64(seed);
    let spectra: Vec<[Vec<Complex<f64>>; 2]> = sources
        .iter()
        .map(|_| [0, 1].map(|_| (0..bins).map(|_| complex_gaussian(&mut rng)).collect()))
        .collect();
    let inverse = FftPlanner::<f64>::new().plan_fft_inverse(samples);
    let dishes = array.dishes() as usize;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(dishes);
    let mut out: Vec<[Vec<i32>; 2]> = vec![[Vec::new(), Vec::new()]; dishes];
    // Dishes in parallel; each dish's noise has its own generator, so the record does not
    // depend on the thread count.
    std::thread::scope(|scope| {
        for (t, part) in out.chunks_mut(dishes.div_ceil(threads)).enumerate() {
            let (spectra, inverse) = (&spectra, &inverse);
            scope.spawn(move || {
                for (k, slot) in part.iter_mut().enumerate() {
                    let d = (t * dishes.div_ceil(threads) + k) as u32;
                    *slot = observe_dish(array, sources, spectra, inverse.as_ref(), samples, seed, d);
                }
            });
        }
    });
    Ok(out)
}

fn complex_gaussian(rng: &mut StdRng) -> Complex<f64> {
    // Box-Muller: two independent unit normals.
    let u: f64 = rng.random_range(f64::EPSILON..1.0);
    let v: f64 = rng.random();
    let r = (-2.0 * u.ln()).sqrt();
    let (s, c) = (std::f64::consts::TAU * v).sin_cos();
    Complex::new(r * c, r * s)
}

/// One dish's two polarisations: sources delayed to the dish plus its own noise.
fn observe_dish(
    array: Array,
    sources: &[Source],
    spectra: &[[Vec<Complex<f64>>; 2]],
    inverse: &dyn rustfft::Fft<f64>,
    samples: usize,
    seed: u64,
    d: u32,
) -> [Vec<i32>; 2] {
    let bins = samples / 2 + 1;
    let mut rng = StdRng::seed_from_u64(seed ^ (0x9e37_79b9_7f4a_7c15u64.wrapping_mul(d as u64 + 1)));
    // A real signal of rms r from bins of unit complex Gaussians: scale r / sqrt(samples).
    let unit = 1.0 / (samples as f64).sqrt();
    [0, 1].map(|pol| {
        let mut x: Vec<Complex<f64>> = (0..bins)
            .map(|k| {
                let f = k as f64 * SAMPLE_RATE / samples as f64;
                let mut v = complex_gaussian(&mut rng) * NOISE_RMS;
                for (s, spectrum) in sources.iter().zip(spectra) {
                    let phase = std::f64::consts::TAU * f * array.lead(d, s.l, s.m);
                    v += spectrum[pol][k] * s.rms * Complex::from_polar(1.0, phase);
                }
                v * unit
            })
            .collect();
        // Hermitian completion, DC and Nyquist real.
        x[0].im = 0.0;
        x[bins - 1].im = 0.0;
        x.resize(samples, Complex::new(0.0, 0.0));
        for k in 1..samples / 2 {
            x[samples - k] = x[k].conj();
        }
        inverse.process(&mut x);
        // Each complex bin pair contributes 2 |v|^2 of power over `samples` points: the
        // factor 1/sqrt(2) brings the real rms back to the requested one.
        x.iter()
            .map(|v| (v.re * std::f64::consts::FRAC_1_SQRT_2).round().clamp(-511.0, 511.0) as i32)
            .collect()
    })
}
