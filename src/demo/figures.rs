//! The demo's figures: the PFB's channel response ([`channel_response`]), the visibilities
//! at the reference channel against the brightest source's predicted phase, the FRB map with
//! the sources marked, and the beam powers of the three beamformers ([`write()`]).
use super::chain::Chain;
use super::frb::{self, FrbMap};
use super::plot;
use super::sky;
use super::xengine::Visibilities;
use super::{BEAMS, TAPS};
use radio_kernels_host::pfb;
use radio_kernels_host::{Error, Result};
use std::path::PathBuf;

/// Mean power per beam (sources first) of the baseband, FRB and delay beamformers.
pub(super) type BeamPower = [Vec<f64>; 3];

/// Writes the four figures to the output folder: the paths written. A folder removed since
/// the start is made again, and a figure that cannot be written is logged as a warning
/// (`log`) and skipped, so the results are never lost.
pub(super) fn write(
    chain: &Chain,
    visibilities: &Visibilities,
    frb_map: &FrbMap,
    beam_power: &BeamPower,
) -> Result<Vec<PathBuf>> {
    let (out, n, d_n, k_ref) = (&chain.options.out, chain.n, chain.d_n, chain.k_ref);
    let (array, sources) = (chain.array, &chain.sources);
    if let Err(e) = std::fs::create_dir_all(out) {
        log::warn!("radio-kernels demo: cannot create {}: {e}", out.display());
    }
    let mut images = Vec::new();
    let mut figure = |result: std::result::Result<PathBuf, Box<dyn std::error::Error>>| match result {
        Ok(path) => images.push(path),
        Err(e) => log::warn!("radio-kernels demo: a figure failed: {e}"),
    };
    let (offsets, db_response) = channel_response(n)?;
    figure(plot::channel_response(&out.join("pfb_channel_response.png"), &offsets, &db_response));
    let lead0 = |d: u32| array.lead(d, sources[0].l, sources[0].m);
    let f_ref = sky::channel_frequency(k_ref, n);
    let points: Vec<(f64, f64, f64, f64)> = (0..d_n)
        .flat_map(|i| (0..i).map(move |j| (i, j)))
        .map(|(i, j)| {
            let v = visibilities.data[visibilities.config.output_index(k_ref, i, j, 0, 0)];
            let (pi, pj) = (array.position(i), array.position(j));
            let length = ((pi.0 - pj.0).powi(2) + (pi.1 - pj.1).powi(2)).sqrt();
            let predicted = (std::f64::consts::TAU * f_ref * (lead0(i) - lead0(j)) + std::f64::consts::PI)
                .rem_euclid(std::f64::consts::TAU)
                - std::f64::consts::PI;
            (length, (v.re as f64).hypot(v.im as f64), (v.im as f64).atan2(v.re as f64), predicted)
        })
        .collect();
    figure(plot::visibilities(
        &out.join("visibilities.png"),
        &format!("visibilities at {:.0} MHz (pol 0 x pol 0)", f_ref / 1e6),
        &points,
    ));
    let marks: Vec<(f64, f64)> = sources.iter().map(|s| frb::pixel(chain, (s.l, s.m))).collect();
    figure(plot::intensity_map(
        &out.join("frb_map.png"),
        &format!("FRB intensity at {:.0} MHz on the half-integer grid (circles: sources)", f_ref / 1e6),
        &frb_map.map,
        frb_map.k2,
        frb_map.q2,
        &marks,
    ));
    let names: Vec<String> = (0..BEAMS as usize)
        .map(|b| if b < sources.len() { format!("src{b}") } else { format!("off{}", b - sources.len()) })
        .collect();
    let labelled = |power: &[f64]| names.iter().cloned().zip(power.iter().copied()).collect::<Vec<_>>();
    let [baseband_power, frb_power, delay_power] = beam_power;
    figure(plot::beam_power(
        &out.join("beam_power.png"),
        &[
            ("baseband beamformer (int4 beams, mean |J|^2)", labelled(baseband_power)),
            ("FRB beamformer (resampled intensity)", labelled(frb_power)),
            ("delay beamformer (int8 beams, mean |y|^2)", labelled(delay_power)),
        ],
    ));
    Ok(images)
}

/// The PFB prototype filter's response around one channel, in dB: the Fourier transform of
/// the Hann-windowed sinc weights, zero-padded 16x, normalised to 0 dB at the centre.
/// `channels` must be one a channelizer may have ([`pfb::hann_sinc_weights`]: 1 ..= 65536).
pub fn channel_response(channels: u32) -> Result<(Vec<f64>, Vec<f64>)> {
    use rustfft::num_complex::Complex;
    let weights = pfb::hann_sinc_weights(channels, TAPS);
    if weights.is_empty() {
        return Err(Error::InvalidConfig(format!(
            "channel response: {channels} channels is outside the channelizer's range"
        )));
    }
    let len = weights.len() * 16;
    let mut x: Vec<Complex<f64>> = weights.iter().map(|&w| Complex::new(w as f64, 0.0)).collect();
    x.resize(len, Complex::new(0.0, 0.0));
    rustfft::FftPlanner::new().plan_fft_forward(len).process(&mut x);
    // Bin b is b / (16 T) channels (a channel is 2n / window = 1 / T of the transform's bins x16).
    let per_channel = 16 * TAPS as usize;
    let reach = 4 * per_channel;
    let peak = x[0].norm_sqr();
    let mut offsets = Vec::new();
    let mut db = Vec::new();
    for b in -(reach as i64)..=reach as i64 {
        let v = x[b.rem_euclid(len as i64) as usize].norm_sqr();
        offsets.push(b as f64 / per_channel as f64);
        db.push(10.0 * (v / peak).max(1e-30).log10());
    }
    Ok((offsets, db))
}
