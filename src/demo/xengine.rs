//! The demo's X-engine: the correlator's visibilities of every baseline and channel
//! ([`correlate`]), and the dirty image near the reference channel whose peak should be the
//! brightest source ([`dirty_image`]).
use super::chain::{cpu_stage, real_time, sustained_ms, Chain};
use super::fengine::Channelized;
use super::sky::{self, Source};
use super::{Stage, CHECK_CHANNELS, DEPTH};
use radio_kernels_host::correlator::{self as xc, Correlator, CorrelatorConfig, Format, Order};
use radio_kernels_host::{Complex, Error, Gpu, Result};

/// Grid steps per axis of the correlator's dirty-image search.
pub(super) const IMAGE_STEPS: u32 = 60;

/// Half-width (direction cosine) of the dirty-image search: 1.5 times the farthest source.
pub(super) fn image_span(sources: &[Source]) -> f64 {
    1.5 * sources.iter().map(|s| s.l.abs().max(s.m.abs())).fold(0.0, f64::max).max(0.005)
}

/// The correlator's output: `V[c][b(i,j)][pi][pj]` of every channel.
pub(super) struct Visibilities {
    pub config: CorrelatorConfig,
    pub data: Vec<Complex<i64>>,
}

/// The correlator's input for `channels` of the F-engine's output: its configuration (of
/// those channels) and the `[t][c][s][p]` bytes.
fn input(
    config: &CorrelatorConfig,
    x: &Channelized,
    channels: std::ops::Range<u32>,
) -> (CorrelatorConfig, Vec<u8>) {
    let c = CorrelatorConfig { channels: channels.len() as u32, ..*config };
    let mut input = vec![0u8; c.input_bytes()];
    for t in 0..config.times {
        for (ci, ch) in channels.clone().enumerate() {
            for d in 0..config.stations {
                for p in 0..2 {
                    let (re, im) = x.value(d, ch, t, p);
                    let at = c.input_offset(t, ci as u32, d, p);
                    input[at] = re as i8 as u8;
                    input[at + 1] = im as i8 as u8;
                }
            }
        }
    }
    (c, input)
}

/// The correlator on every channel, integrating the whole observation. On the GPU, the
/// streaming engine with the observation in every slot, checked bit-exact on
/// [`CHECK_CHANNELS`] channels.
pub(super) fn correlate(chain: &Chain, x: &Channelized) -> Result<(Visibilities, Stage)> {
    let (d_n, n, t_n) = (chain.d_n, chain.n, chain.t_n);
    let config = CorrelatorConfig {
        stations: d_n,
        pols: 2,
        channels: n,
        times: t_n,
        format: Format::Ci8,
        order: Order::StationPol,
    };
    let (_, full_input) = input(&config, x, 0..n);
    let shape = format!("N={d_n} P=2 C={n} T={t_n} int8 -> {} baselines", config.baselines());
    let (data, stage) = match chain.gpu {
        Some(gpu) => correlate_gpu(chain, gpu, &config, x, &full_input, shape)?,
        None => (xc::correlate_reference(&config, &full_input)?, cpu_stage("correlator", shape)),
    };
    Ok((Visibilities { config, data }, stage))
}

fn correlate_gpu(
    chain: &Chain,
    gpu: &Gpu,
    config: &CorrelatorConfig,
    x: &Channelized,
    full_input: &[u8],
    shape: String,
) -> Result<(Vec<Complex<i64>>, Stage)> {
    let (d_n, check_first) = (chain.d_n, chain.check_first);
    let correlator = Correlator::new(gpu, *config)?;
    // Integrations of one chunk (the observation), the chunk in every slot.
    let mut engine = correlator.streaming(1, DEPTH)?;
    for _ in 0..DEPTH {
        engine.input()?.copy_from_slice(full_input);
        engine.submit()?;
    }
    let v = engine.output()?.ok_or_else(|| Error::InvalidConfig("no integration".into()))?.to_vec();
    while engine.output()?.is_some() {}
    let ms = sustained_ms(&mut engine)?;
    let (sub, sub_input) = input(config, x, check_first..check_first + CHECK_CHANNELS);
    let reference = xc::correlate_reference(&sub, &sub_input)?;
    let mut mismatches = 0;
    for c in 0..CHECK_CHANNELS {
        for i in 0..d_n {
            for j in 0..=i {
                for (pi, pj) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                    let got = v[config.output_index(check_first + c, i, j, pi, pj)];
                    mismatches += (got != reference[sub.output_index(c, i, j, pi, pj)]) as usize;
                }
            }
        }
    }
    let stage = Stage {
        name: "correlator",
        shape,
        ms: Some(ms),
        throughput: real_time(
            format!("{:.0} TOPS", config.useful_ops() / (ms * 1e-3) / 1e12),
            ms * 1e-3 / chain.duration,
        ),
        check: if mismatches == 0 {
            Ok(format!("{CHECK_CHANNELS} channels bit-exact"))
        } else {
            Err(format!("{mismatches} values differ"))
        },
    };
    Ok((v, stage))
}

/// The peak (l, m) of the dirty image near the reference channel, searched on a grid of
/// `(IMAGE_STEPS + 1)^2` directions over +-[`image_span`].
///
/// The image: sum over baselines i > j and both pols of Re V exp(-2 pi i f (r_i - r_j) . s / c).
/// The phase factor is e_i conj(e_j) with e_d = exp(-2 pi i f r_d . s / c), the same for both
/// pols: the pols are summed first (V_00 + V_11 per baseline, i > j in order), and each
/// direction and channel needs one e_d per dish.
pub(super) fn dirty_image(chain: &Chain, visibilities: &Visibilities) -> (f64, f64) {
    let (d_n, n, k_ref) = (chain.d_n, chain.n, chain.k_ref);
    let (config, v) = (&visibilities.config, &visibilities.data);
    let image_channels: Vec<u32> = (k_ref.saturating_sub(2)..(k_ref + 3).min(n)).collect();
    let pol_sums: Vec<Vec<(f64, f64)>> = image_channels
        .iter()
        .map(|&c| {
            (0..d_n)
                .flat_map(|i| (0..i).map(move |j| (i, j)))
                .map(|(i, j)| {
                    let (x, y) =
                        (v[config.output_index(c, i, j, 0, 0)], v[config.output_index(c, i, j, 1, 1)]);
                    ((x.re + y.re) as f64, (x.im + y.im) as f64)
                })
                .collect()
        })
        .collect();
    let span = image_span(&chain.sources);
    let steps = IMAGE_STEPS;
    let mut image_peak = (0.0, 0.0, f64::MIN);
    let mut phasors = vec![(0.0, 0.0); d_n as usize];
    for a in 0..=steps {
        for b in 0..=steps {
            let (l, m) =
                (-span + 2.0 * span * a as f64 / steps as f64, -span + 2.0 * span * b as f64 / steps as f64);
            let mut sum = 0.0;
            for (&c, v) in image_channels.iter().zip(&pol_sums) {
                let f = sky::channel_frequency(c, n);
                for (d, e) in (0..d_n).zip(phasors.iter_mut()) {
                    let (s, co) = (-std::f64::consts::TAU * f * chain.array.lead(d, l, m)).sin_cos();
                    *e = (co, s);
                }
                let mut baselines = v.iter();
                for (i, &(ci, si)) in phasors.iter().enumerate() {
                    for (&(cj, sj), &(re, im)) in phasors[..i].iter().zip(&mut baselines) {
                        // Re V (ci + i si)(cj - i sj)
                        sum += re * (ci * cj + si * sj) - im * (si * cj - ci * sj);
                    }
                }
            }
            if sum > image_peak.2 {
                image_peak = (l, m, sum);
            }
        }
    }
    (image_peak.0, image_peak.1)
}
