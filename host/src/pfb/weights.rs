//! PFB weights and the coefficient checks shared by weights and gains.
use super::*;

/// Largest magnitude [`Channelizer`] and [`reference_chunk`] accept for a PFB weight or a gain
/// component (2^32). With samples below 2^15 in magnitude, at most 32 taps and a 2^17-point
/// transform, every f32 intermediate of the GPU path then stays below 2^40 x 2^32 x 2^32 =
/// 2^104, far from f32's 2^128: finite inputs give finite products, so the quantiser never
/// sees NaN or an infinity (see the module documentation).
pub const MAX_COEFFICIENT: f32 = 4_294_967_296.0;

/// The first value of `values` (flattened) that is not finite ([`Error::NonFinite`]) or whose
/// magnitude passes [`MAX_COEFFICIENT`] (`InvalidConfig`).
pub(super) fn check_coefficients(what: &'static str, values: impl Iterator<Item = f32>) -> Result<()> {
    for (index, v) in values.enumerate() {
        if !v.is_finite() {
            return Err(Error::NonFinite { what, index });
        }
        if v.abs() > MAX_COEFFICIENT {
            return Err(Error::InvalidConfig(format!(
                "{what}[{index}] = {v:e} is beyond 2^32 in magnitude: the f32 FIR, FFT and gain \
                 products could overflow"
            )));
        }
    }
    Ok(())
}

/// The PFB weights `w[t + 2n j]` (length `2 n T`): a Hann window times a sinc whose main lobe
/// spans one channel, computed in f64 and normalised to unit sum of squares (so white noise
/// keeps its power through the FIR), then rounded to f32. Defined for channel and tap counts
/// a valid [`ChannelizerConfig`] may hold (1 ..= 65536 channels, 1 ..= 32 taps): outside that
/// range (including 0) it returns an empty vector, which every caller that needs `2 n T`
/// weights rejects by length.
pub fn hann_sinc_weights(channels: u32, taps: u32) -> Vec<f32> {
    if !(1..=MAX_CHANNELS).contains(&channels) || !(1..=MAX_TAPS).contains(&taps) {
        return Vec::new();
    }
    let step = 2.0 * channels as f64;
    let len = 2 * channels as usize * taps as usize;
    let raw: Vec<f64> = (0..len)
        .map(|i| {
            let i = i as f64;
            let hann = (std::f64::consts::PI * (i + 0.5) / len as f64).sin().powi(2);
            let x = (i + 0.5) / step - taps as f64 / 2.0;
            let sinc =
                if x == 0.0 { 1.0 } else { (std::f64::consts::PI * x).sin() / (std::f64::consts::PI * x) };
            hann * sinc
        })
        .collect();
    let norm = raw.iter().map(|w| w * w).sum::<f64>().sqrt();
    raw.iter().map(|w| (w / norm) as f32).collect()
}
