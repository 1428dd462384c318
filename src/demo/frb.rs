//! The demo's FRB beamformer: the first kernel's intensity on the half-integer grid
//! ([`intensity`], whose map at the reference channel peaks at the brightest source,
//! [`map`]), the second kernel's resampling to the beam directions ([`resample`], whose mean
//! power per beam is one of the science checks, [`power`]), and the streaming engine that
//! chains both with the quantiser from `E` to 8-bit codes ([`stream`]).
use super::baseband::Int4Voltages;
use super::chain::{cpu_stage, percent, real_time, relative_l2, sustained_ms, timed, Chain};
use super::files::FrbCodes;
use super::sky::{self, LIGHT};
use super::{Stage, BEAMS, CHECK_CHANNELS, DEPTH, T_DS};
use half::f16;
use radio_kernels_host::frb_beamformer::quantize::{
    quantize_reference, Format as CodeFormat, QuantizeConfig, Quantizer,
};
use radio_kernels_host::frb_beamformer::resample::{
    resample_reference, FusedResampler, ResampleConfig, Resampler,
};
use radio_kernels_host::frb_beamformer::{
    frb_intensity_reference, FrbBeamformer, FrbConfig, FrbResampling, FRB_REL_L2_BOUND,
};
use radio_kernels_host::{Ci4, Complex, DeviceBuffer, Error, Gpu, Result};

/// The first kernel's output `I[f][tbar][p][q]` (f16 bits) and what made it: the dishes'
/// grid cells and the weights (all `1 / D`).
pub(super) struct Intensity {
    pub config: FrbConfig,
    pub grid: Vec<(u32, u32)>,
    pub weights: Vec<Complex<f16>>,
    pub data: Vec<f16>,
}

/// The first kernel on every channel, `T_ds` = [`T_DS`]. On the GPU, one timed launch on
/// the uploaded `E`, checked on [`CHECK_CHANNELS`] channels within [`FRB_REL_L2_BOUND`].
pub(super) fn intensity(chain: &Chain, e: &Int4Voltages) -> Result<(Intensity, Stage)> {
    let (d_n, n, t_n) = (chain.d_n, chain.n, chain.t_n);
    let side = chain.array.side();
    let config = FrbConfig { dishes: d_n, m: side, n: side, freqs: n, times: t_n, t_ds: T_DS };
    let grid: Vec<(u32, u32)> = (0..d_n).map(|d| chain.array.cell(d)).collect();
    let w_frb = Complex::new(f16::from_f64(1.0 / d_n as f64), f16::ZERO);
    let weights = vec![w_frb; config.weights_len()];
    let (k2, q2) = (2 * side, 2 * side);
    let shape = format!("D={d_n} grid {side}x{side} F={n} T={t_n} T_ds={T_DS} -> I {k2}x{q2}");
    let mut intensity = Intensity { config, grid, weights, data: Vec::new() };
    let stage = match (chain.gpu, &e.device) {
        (Some(gpu), Some(e_dev)) => {
            let (data, stage) = intensity_gpu(chain, gpu, e, e_dev, &intensity, shape)?;
            intensity.data = data;
            stage
        }
        _ => {
            let stage = cpu_stage("FRB beamformer 1", shape);
            intensity.data =
                frb_intensity_reference(&config, Ci4::from_bytes(&e.e), &intensity.grid, &intensity.weights)?
                    .iter()
                    .map(|&v| f16::from_f64(v))
                    .collect();
            stage
        }
    };
    Ok((intensity, stage))
}

fn intensity_gpu(
    chain: &Chain,
    gpu: &Gpu,
    e: &Int4Voltages,
    e_dev: &DeviceBuffer<Ci4>,
    intensity: &Intensity,
    shape: String,
) -> Result<(Vec<f16>, Stage)> {
    let (check_first, config, grid) = (chain.check_first, &intensity.config, &intensity.grid);
    let frb = FrbBeamformer::new(gpu, *config, grid, &intensity.weights)?;
    let mut out = gpu.alloc::<f16>(config.output_len(), 0x7e)?;
    let ((), ms) = timed(gpu, || frb.beamform(e_dev, &mut out))?;
    let got = out.download()?;
    let sub = FrbConfig { freqs: CHECK_CHANNELS, ..*config };
    // Every weight is the same 1 / D.
    let sub_weights = &intensity.weights[..sub.weights_len()];
    let reference = frb_intensity_reference(
        &sub,
        Ci4::from_bytes(&e.channels(check_first, CHECK_CHANNELS)),
        grid,
        sub_weights,
    )?;
    // I is channel-major, so the checked channels are one contiguous run.
    let first = config.output_index(check_first, 0, 0, 0);
    let rel = relative_l2(reference.iter().enumerate().map(|(i, &r)| (got[first + i].to_f64(), r)));
    let stage = Stage {
        name: "FRB beamformer 1",
        shape,
        ms: Some(ms),
        throughput: format!("kernel only, {} of real time", percent(ms * 1e-3 / chain.duration)),
        check: if rel < FRB_REL_L2_BOUND {
            Ok(format!("rel. L2 {rel:.1e} (< {FRB_REL_L2_BOUND:.1e})"))
        } else {
            Err(format!("rel. L2 {rel:.1e}"))
        },
    };
    Ok((got, stage))
}

/// The FRB map at the reference channel: `I` summed over time on the `k2 x q2`
/// half-integer grid, its brightest pixel, and where the brightest source should be.
pub(super) struct FrbMap {
    pub map: Vec<f64>,
    pub k2: u32,
    pub q2: u32,
    pub peak: (u32, u32),
    pub expected: (u32, u32),
}

/// The half-integer pixel (2 theta, 2 theta') of direction (l, m) at the reference channel,
/// wrapped onto the `2 side x 2 side` grid.
pub(super) fn pixel(chain: &Chain, (l, m): (f64, f64)) -> (f64, f64) {
    let side = chain.array.side();
    let (k2, q2) = (2 * side, 2 * side);
    let (theta, theta_prime) = sky::frb_coordinates(l, m, side, chain.lambda_ref);
    ((2.0 * theta).round().rem_euclid(k2 as f64), (2.0 * theta_prime).round().rem_euclid(q2 as f64))
}

/// The map of [`FrbMap`] from the first kernel's output.
pub(super) fn map(chain: &Chain, intensity: &Intensity) -> FrbMap {
    let side = chain.array.side();
    let (k2, q2) = (2 * side, 2 * side);
    let tbar = chain.t_n / T_DS;
    let mut frb_map = vec![0.0; (k2 * q2) as usize];
    for tb in 0..tbar {
        for p in 0..k2 {
            for q in 0..q2 {
                frb_map[(p * q2 + q) as usize] +=
                    intensity.data[intensity.config.output_index(chain.k_ref, tb, p, q)].to_f64();
            }
        }
    }
    let best = (0..frb_map.len()).max_by(|&a, &b| frb_map[a].total_cmp(&frb_map[b])).unwrap_or(0) as u32;
    let expected = pixel(chain, (chain.sources[0].l, chain.sources[0].m));
    FrbMap {
        map: frb_map,
        k2,
        q2,
        peak: (best / q2, best % q2),
        expected: (expected.0 as u32, expected.1 as u32),
    }
}

/// The second kernel's output `J[f][tbar][b]` (in f64) and its inputs: the beams' grid
/// coordinates `theta`, `theta'` per channel and beam.
pub(super) struct Beams {
    pub config: ResampleConfig,
    pub theta: Vec<f32>,
    pub theta_prime: Vec<f32>,
    pub data: Vec<f64>,
}

/// The second kernel: the intensity resampled to the [`BEAMS`] directions. On the GPU, one
/// timed launch of the faster path of the GPU's family, checked on [`CHECK_CHANNELS`]
/// channels within 2^-9 relative L2.
pub(super) fn resample(chain: &Chain, intensity: &Intensity) -> Result<(Beams, Stage)> {
    let n = chain.n;
    let side = chain.array.side();
    let (k2, q2) = (2 * side, 2 * side);
    let tbar = chain.t_n / T_DS;
    let config = ResampleConfig { channels: n, times: tbar, m: side, n: side, beams: BEAMS };
    let mut theta = vec![0f32; config.positions_len()];
    let mut theta_prime = vec![0f32; config.positions_len()];
    for f in 0..n {
        let lambda = LIGHT / sky::channel_frequency(f.max(1), n);
        for (beam, &(l, m)) in chain.directions.iter().enumerate() {
            let (a, b) = sky::frb_coordinates(l, m, side, lambda);
            theta[(f * BEAMS) as usize + beam] = a as f32;
            theta_prime[(f * BEAMS) as usize + beam] = b as f32;
        }
    }
    let shape = format!("{k2}x{q2} grid -> {BEAMS} beams, F={n} x {tbar} samples");
    let mut beams = Beams { config, theta, theta_prime, data: Vec::new() };
    let stage = match chain.gpu {
        Some(gpu) => {
            let (data, stage) = resample_gpu(chain, gpu, intensity, &beams, shape)?;
            beams.data = data;
            stage
        }
        None => {
            let stage = cpu_stage("FRB beamformer 2", shape);
            beams.data = resample_reference(&config, &intensity.data, &beams.theta, &beams.theta_prime)?;
            stage
        }
    };
    Ok((beams, stage))
}

fn resample_gpu(
    chain: &Chain,
    gpu: &Gpu,
    intensity: &Intensity,
    beams: &Beams,
    shape: String,
) -> Result<(Vec<f64>, Stage)> {
    let (config, theta, theta_prime) = (beams.config, &beams.theta, &beams.theta_prime);
    let tbar = config.times;
    let (theta_dev, theta_prime_dev) = (gpu.upload(theta)?, gpu.upload(theta_prime)?);
    let i_dev = gpu.upload(&intensity.data)?;
    let mut out = gpu.alloc::<f16>(config.output_len(), 0x7e)?;
    // The faster path of each GPU family (host module docs): on Hopper the fused one,
    // which also needs no W memory; elsewhere the W path.
    let ((), ms) = if gpu.wgmma_enabled() {
        let mut fused = FusedResampler::new(gpu, config)?;
        fused.set_beams(&theta_dev, &theta_prime_dev)?;
        timed(gpu, || fused.resample(&i_dev, &mut out))?
    } else {
        let mut resampler = Resampler::new(gpu, config)?;
        resampler.set_beams(&theta_dev, &theta_prime_dev)?;
        timed(gpu, || resampler.resample(&i_dev, &mut out))?
    };
    let got: Vec<f64> = out.download()?.iter().map(|&b| b.to_f64()).collect();
    let sub = ResampleConfig { channels: CHECK_CHANNELS, ..config };
    let k = config.k() as usize;
    let rows = (tbar as usize) * k;
    let first = chain.check_first as usize;
    let sub_i = &intensity.data[first * rows..(first + CHECK_CHANNELS as usize) * rows];
    let sub_pos =
        |v: &[f32]| v[first * BEAMS as usize..(first + CHECK_CHANNELS as usize) * BEAMS as usize].to_vec();
    let reference = resample_reference(&sub, sub_i, &sub_pos(theta), &sub_pos(theta_prime))?;
    let offset = first * (tbar * BEAMS) as usize;
    let rel = relative_l2(reference.iter().enumerate().map(|(i, &r)| (got[offset + i], r)));
    let stage = Stage {
        name: "FRB beamformer 2",
        shape,
        ms: Some(ms),
        throughput: format!("kernel only, {} of real time", percent(ms * 1e-3 / chain.duration)),
        check: if rel < 1.0 / 512.0 {
            Ok(format!("rel. L2 {rel:.1e} (< 2.0e-3)"))
        } else {
            Err(format!("rel. L2 {rel:.1e}"))
        },
    };
    Ok((got, stage))
}

/// The FRB streaming engine, `E` to quantised beams (u8 codes, scale 1 and offset 0), on the
/// GPU: timed in its steady state and checked bit-exact against the second stage's beams
/// quantised on the CPU; `progress` hears of it when it starts. On the CPU references, the
/// second stage's beams quantised on the CPU. Returns the codes.
pub(super) fn stream(
    chain: &Chain,
    e: &Int4Voltages,
    intensity: &Intensity,
    beams: &Beams,
    progress: &dyn Fn(&str),
) -> Result<(FrbCodes, Stage)> {
    let (n, tbar) = (chain.n, beams.config.times);
    let codes = QuantizeConfig { channels: n, times: tbar, beams: BEAMS, format: CodeFormat::U8 };
    let shape = format!("E -> I -> {BEAMS} beams -> u8 codes, F={n} x {tbar} samples");
    let (scale, offset) = (vec![1.0f32; codes.params_len()], vec![0.0f32; codes.params_len()]);
    // The stage above's beams (f16, exact in f64) quantised on the CPU.
    let j: Vec<f16> = beams.data.iter().map(|&v| f16::from_f64(v)).collect();
    let want = quantize_reference(&codes, &j, &scale, &offset)?.output;
    let Some(gpu) = chain.gpu else {
        return Ok((FrbCodes { config: codes, q: want }, cpu_stage("FRB engine", shape)));
    };
    progress("FRB beamformer (streaming engine)");
    let quantizer = Quantizer::new(gpu, codes)?;
    let first = FrbBeamformer::new(gpu, intensity.config, &intensity.grid, &intensity.weights)?;
    let (theta_dev, theta_prime_dev) = (gpu.upload(&beams.theta)?, gpu.upload(&beams.theta_prime)?);
    // The resampler of the stage above: fused on Hopper, the W path elsewhere.
    let (mut fused, mut weights_path) = (None, None);
    let resampling: FrbResampling = if gpu.wgmma_enabled() {
        let r = fused.insert(FusedResampler::new(gpu, beams.config)?);
        r.set_beams(&theta_dev, &theta_prime_dev)?;
        (&*r).into()
    } else {
        let r = weights_path.insert(Resampler::new(gpu, beams.config)?);
        r.set_beams(&theta_dev, &theta_prime_dev)?;
        (&*r).into()
    };
    let mut engine = first.streaming(resampling, &quantizer, &scale, &offset, DEPTH)?;
    for _ in 0..DEPTH {
        engine.input()?.copy_from_slice(Ci4::from_bytes(&e.e));
        engine.submit()?;
    }
    let got = engine.output()?.ok_or_else(|| Error::InvalidConfig("no FRB codes".into()))?.beams.to_vec();
    while engine.output()?.is_some() {}
    let ms = sustained_ms(&mut engine)?;
    let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count() + got.len().abs_diff(want.len());
    let stage = Stage {
        name: "FRB engine",
        shape,
        ms: Some(ms),
        throughput: real_time(
            format!("{:.1} GB/s of E", e.e.len() as f64 / (ms * 1e-3) / 1e9),
            ms * 1e-3 / chain.duration,
        ),
        check: if differ == 0 {
            Ok("codes bit-exact (stage 2 quantised)".into())
        } else {
            Err(format!("{differ} codes differ"))
        },
    };
    Ok((FrbCodes { config: codes, q: got }, stage))
}

/// Mean resampled intensity per beam over the upper three quarters of the band.
pub(super) fn power(chain: &Chain, beams: &Beams) -> Vec<f64> {
    let (n, tbar) = (chain.n as usize, beams.config.times as usize);
    (0..BEAMS as usize)
        .map(|beam| {
            let mut sum = 0.0;
            for f in n / 4..n {
                for tb in 0..tbar {
                    sum += beams.data[(f * tbar + tb) * BEAMS as usize + beam];
                }
            }
            sum / (3 * n / 4 * tbar) as f64
        })
        .collect()
}
