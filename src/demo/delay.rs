//! The demo's delay beamformer: int8 beams toward the sources and off them from the
//! F-engine's int8 channels, steered by the geometric delays ([`beamform`]); their mean power
//! per beam is one of the science checks.
use super::chain::{cpu_stage, real_time, sustained_ms, Chain};
use super::fengine::Channelized;
use super::files::DelayBeams;
use super::sky::SAMPLE_RATE;
use super::{Stage, BEAMS, CHECK_CHANNELS, DEPTH};
use radio_kernels_host::delay_beamformer::{self as db, Beam, DelayBeamformer, DelayBeamformerConfig, Plan};
use radio_kernels_host::{Complex, Error, Gpu, Result};

/// The delay beamformer's input `x[a][c][t][p]` for channels `first .. first + count`.
fn input(chain: &Chain, x: &Channelized, first: u32, count: u32) -> Vec<Complex<i8>> {
    let (d_n, t_n) = (chain.d_n, chain.t_n);
    let mut out = Vec::with_capacity(d_n as usize * count as usize * t_n as usize * 2);
    for a in 0..d_n {
        for c in first..first + count {
            for t in 0..t_n {
                for p in 0..2 {
                    let (re, im) = x.value(a, c, t, p);
                    out.push(Complex::new(re as i8, im as i8));
                }
            }
        }
    }
    out
}

/// Steering of `config`'s channels: unit gains, beam gains of 1/16, each beam's geometric
/// delay per antenna and no phase offset.
fn steer(chain: &Chain, config: &DelayBeamformerConfig) -> Result<(Vec<Complex<f32>>, Vec<f32>)> {
    let count = config.steering_len();
    let delay: Vec<f64> = (0..count)
        .map(|i| {
            -chain.array.lead(
                i as u32 / BEAMS,
                chain.directions[i % BEAMS as usize].0,
                chain.directions[i % BEAMS as usize].1,
            )
        })
        .collect();
    db::steering(
        config,
        &vec![Complex::new(1.0, 0.0); count],
        &vec![1.0 / 16.0; BEAMS as usize],
        &delay,
        &vec![0.0; count],
        SAMPLE_RATE / (2 * chain.n) as f64,
    )
}

/// The delay beamformer on every channel, [`BEAMS`] single-polarisation beams without
/// dither ([`power`] gives their mean power). On the GPU, the streaming engine, checked on
/// [`CHECK_CHANNELS`] channels within 1 LSB.
pub(super) fn beamform(chain: &Chain, x: &Channelized) -> Result<(DelayBeams, Stage)> {
    let (d_n, n, t_n) = (chain.d_n, chain.n, chain.t_n);
    let beams: Vec<Beam> = (0..BEAMS).map(|_| Beam { pol: 0, dither: false }).collect();
    let config =
        DelayBeamformerConfig { antennas: d_n, pols: 2, channels: n, first_channel: 0, times: t_n, beams };
    let (w, dl) = steer(chain, &config)?;
    let full = input(chain, x, 0, n);
    let shape = format!("A={d_n} P=2 C={n} T={t_n} int8 -> {BEAMS} beams int8");
    let (out, stage) = match chain.gpu {
        Some(gpu) => beamform_gpu(chain, gpu, x, &config, (&w, &dl), &full, shape)?,
        None => {
            let stage = cpu_stage("delay beamformer", shape);
            let plan = Plan::new(&config, 1)?;
            (db::beamform_reference(&config, &plan, &full, &w, &dl, None)?.output, stage)
        }
    };
    Ok((DelayBeams { config, y: out }, stage))
}

/// The mean power `|y|^2` per beam over the upper three quarters of the band.
pub(super) fn power(chain: &Chain, beams: &DelayBeams) -> Vec<f64> {
    let (n, t_n, config, out) = (chain.n, chain.t_n, &beams.config, &beams.y);
    (0..BEAMS)
        .map(|beam| {
            let mut sum = 0.0;
            for c in n / 4..n {
                for t in 0..t_n {
                    let y = out[config.output_index(beam, c, t)];
                    sum += (y.re as f64).powi(2) + (y.im as f64).powi(2);
                }
            }
            sum / (3 * n / 4 * t_n) as f64
        })
        .collect()
}

fn beamform_gpu(
    chain: &Chain,
    gpu: &Gpu,
    x: &Channelized,
    config: &DelayBeamformerConfig,
    (w, dl): (&[Complex<f32>], &[f32]),
    full: &[Complex<i8>],
    shape: String,
) -> Result<(Vec<Complex<i8>>, Stage)> {
    let (t_n, check_first) = (chain.t_n, chain.check_first);
    let beamformer = DelayBeamformer::new(gpu, config.clone())?;
    let steering = beamformer.upload_steering(w, dl)?;
    let mut engine = beamformer.streaming(&steering, None, DEPTH)?;
    for _ in 0..DEPTH {
        engine.input()?.copy_from_slice(full);
        engine.submit()?;
    }
    let got = engine.output()?.ok_or_else(|| Error::InvalidConfig("no beams".into()))?.beams.to_vec();
    while engine.output()?.is_some() {}
    let ms = sustained_ms(&mut engine)?;
    let sub =
        DelayBeamformerConfig { channels: CHECK_CHANNELS, first_channel: check_first, ..config.clone() };
    let (sw, sd) = steer(chain, &sub)?;
    let plan = Plan::new(&sub, 1)?;
    let reference =
        db::beamform_reference(&sub, &plan, &input(chain, x, check_first, CHECK_CHANNELS), &sw, &sd, None)?;
    let (mut off_by_one, mut worse) = (0, 0);
    for beam in 0..BEAMS {
        for c in 0..CHECK_CHANNELS {
            for t in 0..t_n {
                let (g, r) = (
                    got[config.output_index(beam, check_first + c, t)],
                    reference.output[sub.output_index(beam, c, t)],
                );
                for (g, r) in [(g.re, r.re), (g.im, r.im)] {
                    match (g as i32 - r as i32).abs() {
                        0 => {}
                        1 => off_by_one += 1,
                        _ => worse += 1,
                    }
                }
            }
        }
    }
    let stage = Stage {
        name: "delay beamformer",
        shape,
        ms: Some(ms),
        throughput: real_time(
            format!("{:.0} GB/s", config.bytes() as f64 / (ms * 1e-3) / 1e9),
            ms * 1e-3 / chain.duration,
        ),
        check: if worse == 0 {
            Ok(format!("{CHECK_CHANNELS} channels within 1 LSB ({off_by_one} ties)"))
        } else {
            Err(format!("{worse} values off by more than 1"))
        },
    };
    Ok((got, stage))
}
