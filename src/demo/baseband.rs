//! The demo's baseband beamformer: the F-engine's channels requantised to complex int4 `E`
//! ([`Int4Voltages`], also the FRB beamformer's input), then int4 beams toward the sources
//! and off them ([`beamform`]), whose mean power per beam is one of the science checks.
use super::chain::{cpu_stage, real_time, sustained_ms, Chain};
use super::fengine::Channelized;
use super::sky;
use super::{Stage, BEAMS, CHECK_CHANNELS, DEPTH};
use radio_kernels_gpu::packing::{pack_ci4, unpack_ci4};
use radio_kernels_host::baseband_beamformer::{self as bb, BasebandBeamformer, BeamformerConfig};
use radio_kernels_host::pfb;
use radio_kernels_host::{Ci4, DeviceBuffer, Error, Gpu, Result, Shift};

/// `E[tau][f][p][d]` complex int4: the int8 channels / 8, round half to even, +-7.
pub(super) struct Int4Voltages {
    pub config: BeamformerConfig,
    pub e: Vec<u8>,
    /// `e` on the GPU, uploaded once for the FRB beamformer's kernel-by-kernel stages.
    pub device: Option<DeviceBuffer<Ci4>>,
}

impl Int4Voltages {
    /// Requantises the F-engine's output (and uploads it where there is a GPU).
    pub fn new(chain: &Chain, x: &Channelized) -> Result<Int4Voltages> {
        let (d_n, n, t_n) = (chain.d_n, chain.n, chain.t_n);
        let config = BeamformerConfig { dishes: d_n, beams: BEAMS, freqs: n, times: t_n };
        let to_int4 = |x: i32| pfb::quantise_reference(x as f64 / 8.0, 7).0 as i8;
        let mut e = vec![0u8; config.e_len()];
        for tau in 0..t_n {
            for f in 0..n {
                for p in 0..2 {
                    for d in 0..d_n {
                        let (re, im) = x.value(d, f, tau, p);
                        e[config.e_index(tau, f, p, d)] = pack_ci4(to_int4(re), to_int4(im));
                    }
                }
            }
        }
        let device = chain.gpu.map(|gpu| gpu.upload(Ci4::from_bytes(&e))).transpose()?;
        Ok(Int4Voltages { config, e, device })
    }

    /// `E` of channels `first .. first + count` only, as a `[tau][count][p][d]` array.
    /// Products in usize: E at the largest valid size holds 2^36 values.
    pub fn channels(&self, first: u32, count: u32) -> Vec<u8> {
        let (d_n, t_n, freqs) = (self.config.dishes, self.config.times, self.config.freqs);
        let width = count as usize * 2 * d_n as usize;
        let mut out = Vec::with_capacity(t_n as usize * width);
        for tau in 0..t_n as usize {
            let row = (tau * freqs as usize + first as usize) * 2 * d_n as usize;
            out.extend_from_slice(&self.e[row..row + width]);
        }
        out
    }
}

/// The baseband beamformer's weights `W[f][p][b][d]`: 127 times the phase that undoes each
/// beam direction's geometric delay.
fn weights(chain: &Chain, config: &BeamformerConfig) -> Vec<[i8; 2]> {
    let mut weights = vec![[0i8; 2]; config.weights_len()];
    for f in 0..chain.n {
        let freq = sky::channel_frequency(f, chain.n);
        for p in 0..2 {
            for (beam, &(l, m)) in chain.directions.iter().enumerate() {
                for d in 0..chain.d_n {
                    // Undo the source's phase exp(+2 pi i f lead).
                    let phase = -std::f64::consts::TAU * freq * chain.array.lead(d, l, m);
                    let w = [(127.0 * phase.cos()).round() as i8, (127.0 * phase.sin()).round() as i8];
                    weights[config.weight_index(f, p, beam as u32, d)] = w;
                }
            }
        }
    }
    weights
}

/// The baseband beamformer on every channel, shifts of 12: the mean power `|J|^2` per beam
/// over the upper three quarters of the band. On the GPU, the streaming engine, checked
/// bit-exact on [`CHECK_CHANNELS`] channels.
pub(super) fn beamform(chain: &Chain, e: &Int4Voltages) -> Result<(Vec<f64>, Stage)> {
    let (d_n, n, t_n) = (chain.d_n, chain.n, chain.t_n);
    let config = e.config;
    let weights = weights(chain, &config);
    let shifts = vec![Shift::new(12)?; config.shifts_len()];
    let shape = format!("D={d_n} B={BEAMS} F={n} T={t_n} int4 -> int4");
    let (baseband, stage) = match chain.gpu {
        Some(gpu) => beamform_gpu(chain, gpu, e, &weights, &shifts, shape)?,
        None => {
            let stage = cpu_stage("baseband beamformer", shape);
            (
                bb::beamform_reference(
                    &config,
                    Ci4::from_bytes(&e.e),
                    bytemuck::cast_slice(&weights),
                    &shifts,
                )?,
                stage,
            )
        }
    };
    let power: Vec<f64> = (0..BEAMS)
        .map(|beam| {
            let mut sum = 0.0;
            for f in n / 4..n {
                for p in 0..2 {
                    for tau in 0..t_n {
                        let (re, im) = unpack_ci4(baseband[config.output_index(beam, f, p, tau)].into());
                        sum += (re as f64).powi(2) + (im as f64).powi(2);
                    }
                }
            }
            sum / (3 * n / 4 * 2 * t_n) as f64
        })
        .collect();
    Ok((power, stage))
}

fn beamform_gpu(
    chain: &Chain,
    gpu: &Gpu,
    e: &Int4Voltages,
    weights: &[[i8; 2]],
    shifts: &[Shift],
    shape: String,
) -> Result<(Vec<Ci4>, Stage)> {
    let (d_n, t_n, check_first) = (chain.d_n, chain.t_n, chain.check_first);
    let config = e.config;
    let beamformer = BasebandBeamformer::new(gpu, config, bytemuck::cast_slice(weights), shifts)?;
    let mut engine = beamformer.streaming(DEPTH)?;
    for _ in 0..DEPTH {
        engine.input()?.copy_from_slice(Ci4::from_bytes(&e.e));
        engine.submit()?;
    }
    let got = engine.output()?.ok_or_else(|| Error::InvalidConfig("no J".into()))?.to_vec();
    while engine.output()?.is_some() {}
    let ms = sustained_ms(&mut engine)?;
    let sub = BeamformerConfig { freqs: CHECK_CHANNELS, ..config };
    let sub_weights: Vec<[i8; 2]> = (0..CHECK_CHANNELS)
        .flat_map(|c| {
            let at = config.weight_index(check_first + c, 0, 0, 0);
            weights[at..at + (2 * BEAMS * d_n) as usize].to_vec()
        })
        .collect();
    let sub_shifts = vec![Shift::new(12)?; sub.shifts_len()];
    let reference = bb::beamform_reference(
        &sub,
        Ci4::from_bytes(&e.channels(check_first, CHECK_CHANNELS)),
        bytemuck::cast_slice(&sub_weights),
        &sub_shifts,
    )?;
    let mut mismatches = 0;
    for beam in 0..BEAMS {
        for c in 0..CHECK_CHANNELS {
            for p in 0..2 {
                for tau in 0..t_n {
                    mismatches += (got[config.output_index(beam, check_first + c, p, tau)]
                        != reference[sub.output_index(beam, c, p, tau)])
                        as usize;
                }
            }
        }
    }
    let stage = Stage {
        name: "baseband beamformer",
        shape,
        ms: Some(ms),
        throughput: real_time(
            format!("{:.0} TOPS", config.useful_ops() / (ms * 1e-3) / 1e12),
            ms * 1e-3 / chain.duration,
        ),
        check: if mismatches == 0 {
            Ok(format!("{CHECK_CHANNELS} channels bit-exact"))
        } else {
            Err(format!("{mismatches} bytes differ"))
        },
    };
    Ok((got, stage))
}
