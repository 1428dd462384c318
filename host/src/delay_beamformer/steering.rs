//! Steering: per-antenna weights and delays to the coefficients `W = w exp(j pi c d)`.
use super::*;

/// Checks `weights` (w) and `delays` (d), `[antenna][beam]`, for a launch of `config`, as
/// every launch does: lengths (`ShapeMismatch`), then [`Error::NonFinite`] at the first
/// (flat) index whose w or d is NaN or infinite, whose `|Re w| + |Im w|` overflows f32 (the
/// kernel's beam scale), or whose phase `c d` overflows f32 at the last channel `c` (the
/// kernel's `half_turns`; `|d|` below about `2 * 10^31` always passes).
pub fn check_steering(
    config: &DelayBeamformerConfig,
    weights: &[Complex<f32>],
    delays: &[f32],
) -> Result<()> {
    config.validate()?;
    let n = config.steering_len();
    for (what, len) in
        [("delay beamformer weights", weights.len()), ("delay beamformer delays", delays.len())]
    {
        if len != n {
            return Err(Error::ShapeMismatch { what, expected: n, actual: len });
        }
    }
    let first = |what: &'static str, bad: Option<usize>| match bad {
        Some(index) => Err(Error::NonFinite { what, index }),
        None => Ok(()),
    };
    first("delay beamformer weights", weights.iter().position(|w| !w.re.is_finite() || !w.im.is_finite()))?;
    first(
        "|Re w| + |Im w| (the kernel's beam scale, f32) of delay beamformer weights",
        weights.iter().position(|w| !(w.re.abs() + w.im.abs()).is_finite()),
    )?;
    first("delay beamformer delays", delays.iter().position(|d| !d.is_finite()))?;
    // Exact: the last channel is below 2^24. f32 products are monotonic in |c|, so the last
    // channel's is the largest of the launch.
    let last = config.last_channel() as f32;
    first(
        "last channel x delay (the kernel's phase, f32) of delay beamformer delays",
        delays.iter().position(|&d| !(last * d).is_finite()),
    )
}

/// Builds the kernel's `w` and `d` (`[antenna][beam]`) from the external parameters of the
/// MeerKAT beamformer design: a complex `weight[a][b]`, a quantisation `gain[b]`, a `delay[a][b]` in seconds and a
/// fringe `phase[a][b]` in radians, for channels `channel_width` Hz apart.
///
/// `w = weight * gain * exp(j phase)`, `d = 2 * channel_width * delay`, so the phase applied to
/// absolute channel c is `phase + 2 pi c channel_width delay`: it undoes a delay of `delay`
/// (a signal arriving later by tau has phase `-2 pi f tau`), with `phase` the fringe phase at
/// the frequency of channel 0 (the reference the channel index counts from).
///
/// Errors: `ShapeMismatch` for a wrong length; [`Error::NonFinite`] for a NaN or infinite
/// input (`channel width` with index 0), for a result that overflows f32 (`steering result
/// w` / `steering result d`), and for results [`check_steering`] rejects. So an `Ok` result
/// is finite and launches as it is.
pub fn steering(
    config: &DelayBeamformerConfig,
    weight: &[Complex<f64>],
    gain: &[f64],
    delay: &[f64],
    phase: &[f64],
    channel_width: f64,
) -> Result<(Vec<Complex<f32>>, Vec<f32>)> {
    config.validate()?;
    let n = config.steering_len();
    for (what, len) in [
        ("steering weights", weight.len()),
        ("steering delays", delay.len()),
        ("steering phases", phase.len()),
    ] {
        if len != n {
            return Err(Error::ShapeMismatch { what, expected: n, actual: len });
        }
    }
    if gain.len() != config.beams.len() {
        return Err(Error::ShapeMismatch {
            what: "beam gains",
            expected: config.beams.len(),
            actual: gain.len(),
        });
    }
    let first = |what: &'static str, bad: Option<usize>| match bad {
        Some(index) => Err(Error::NonFinite { what, index }),
        None => Ok(()),
    };
    first("steering weights", weight.iter().position(|w| !w.re.is_finite() || !w.im.is_finite()))?;
    first("beam gains", gain.iter().position(|g| !g.is_finite()))?;
    first("steering delays", delay.iter().position(|d| !d.is_finite()))?;
    first("steering phases", phase.iter().position(|p| !p.is_finite()))?;
    first("channel width", (!channel_width.is_finite()).then_some(0))?;
    let beams = config.beams.len();
    let mut w = Vec::with_capacity(n);
    let mut d = Vec::with_capacity(n);
    for i in 0..n {
        let g = gain[i % beams];
        let (s, c) = phase[i].sin_cos();
        let Complex { re, im } = weight[i];
        w.push(Complex::new((g * (re * c - im * s)) as f32, (g * (re * s + im * c)) as f32));
        d.push((2.0 * channel_width * delay[i]) as f32);
    }
    first(
        "steering result w = weight x gain x exp(j phase) (f32)",
        w.iter().position(|w: &Complex<f32>| !w.re.is_finite() || !w.im.is_finite()),
    )?;
    first(
        "steering result d = 2 x channel width x delay (f32)",
        d.iter().position(|d: &f32| !d.is_finite()),
    )?;
    check_steering(config, &w, &d)?;
    Ok((w, d))
}

/// The coefficient the kernel approximates, in f64: `w exp(j pi channel d)`, the product
/// `channel * d` taken exactly (40 bits) and reduced modulo 2 before the sine. Never panics;
/// non-finite `w` or `d` (which [`check_steering`] rejects) give NaN.
pub fn coefficient_reference(w: Complex<f32>, d: f32, channel: u32) -> Complex<f64> {
    let r = (channel as f64 * d as f64).rem_euclid(2.0);
    let (s, c) = (std::f64::consts::PI * r).sin_cos();
    let (wr, wi) = (w.re as f64, w.im as f64);
    Complex::new(wr * c - wi * s, wr * s + wi * c)
}
