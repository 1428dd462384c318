//! The streaming drivers, one per engine family ([`drive`]): each builds its engine at the
//! headline shape, measures the kernel-only time per chunk with the one-shot launcher on
//! device-resident random data (CUDA events, median of [`KERNEL_REPS`]), fills the input slots
//! with random data ([`prime`]) and hands the engine and its [`Setup`] to the visitor.
//!
//! Headline shapes: the correlator at 512 dual-polarisation stations, 16 channels, chunks of
//! 8192 samples, integrations of 64 chunks ([`correlator_config`]; `--stations`); the
//! F-engine at n = 1024, 4096 and 32768 ([`PFB_CHANNELS`](super::PFB_CHANNELS);
//! `--channels`, `--bits`), 16 taps, chunks of 2^24 samples per polarisation; the baseband beamformer at
//! full CHORD (D = 512, B = 96, F = 16, T = 32768: 55.9 ms of data per chunk); the delay
//! beamformer at MeerKAT's 8 dithered beams from 64 dual-polarisation antennas (C = 512,
//! T = 4096, the `delay_beamformer` bench's first row); the FRB beamformer at full CHORD
//! (D = 512 on the 24 x 24 grid, F = 256, T = 1920, T_ds = 40, the `frb_beamformer` bench's
//! case) resampled to 5760 beams and quantised to 8 bits.
use super::{
    correlator_config, fill_host_random, pfb_config, prime, EngineKind, Options, Setup, Visit,
    CORRELATOR_CHUNKS_PER_INTEGRATION, KERNEL_REPS,
};
use crate::baseband_beamformer::SAMPLE_TIME_S as CHORD_SAMPLE_TIME_S;
use crate::baseband_beamformer::{BasebandBeamformer, BeamformerConfig};
use crate::correlator::Correlator;
use crate::delay_beamformer::{Beam, DelayBeamformer, DelayBeamformerConfig};
use crate::frb_beamformer::quantize::{Format as QuantizeFormat, QuantizeConfig, Quantizer};
use crate::frb_beamformer::resample::{FusedResampler, ResampleConfig};
use crate::frb_beamformer::{FrbBeamformer, FrbConfig};
use crate::pfb::{Channelizer, PfbPath};
use crate::summary::{fill_random, median_ms};
use crate::{Ci4, Complex, Gpu, Result, Shift};
use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Baseband beamformer: samples per chunk (full CHORD otherwise, [`BeamformerConfig::chord`]).
pub const BASEBAND_TIMES: u32 = 32768;

/// Delay beamformer: seconds per spectrum of its input, MeerKAT's L band in the 4096-channel
/// mode, `2 x 4096 / 1712 MHz`.
pub const DELAY_SPECTRUM_S: f64 = 2.0 * 4096.0 / 1.712e9;

/// FRB beamformer: CHORD's upchannelised sampling time, 16 x 4096 / 2.4 GHz (27.3 us).
pub const FRB_SAMPLE_TIME_S: f64 = 16.0 * CHORD_SAMPLE_TIME_S;
/// FRB beamformer: beams of the resampling stage (full CHORD's 5760).
pub const FRB_BEAMS: u32 = 5760;

/// The drivers of this file, by family.
pub(super) fn drive(gpu: &Gpu, kind: EngineKind, options: &Options, visit: &mut Visit<'_>) -> Result<()> {
    match kind {
        EngineKind::Correlator => correlator(gpu, options.correlator_stations(), options.depth, visit),
        EngineKind::Pfb => pfb(gpu, options, visit),
        EngineKind::Baseband => baseband(gpu, options.depth, visit),
        EngineKind::Delay => delay(gpu, options.depth, visit),
        EngineKind::Frb => frb(gpu, options.depth, visit),
    }
}

/// The correlator's [`Integration`](crate::correlator::Integration) for `stations`
/// dual-polarisation stations ([`correlator_config`]), integrations of
/// [`CORRELATOR_CHUNKS_PER_INTEGRATION`] chunks, `depth` slots per ring. Kernel-only time:
/// [`Correlator::accumulate`] on a device buffer. Data time: CHORD's sampling time per sample.
/// Rate: useful TOPS (`8 N (N + 1) / 2 P^2 C T` per chunk).
pub fn correlator(gpu: &Gpu, stations: u32, depth: usize, visit: &mut Visit<'_>) -> Result<()> {
    let config = correlator_config(stations)?;
    let correlator = Correlator::new(gpu, config)?;
    let kernel_ms = {
        let mut input = gpu.alloc::<u8>(config.input_bytes(), 0)?;
        fill_random(gpu, input.borrow_mut(), 5)?;
        let mut accumulator = gpu.alloc::<Complex<i64>>(config.output_len(), 0)?;
        let ms = median_ms(gpu, KERNEL_REPS, || correlator.accumulate(&input, &mut accumulator))?;
        gpu.synchronize()?;
        ms
    };
    let per_integration = CORRELATOR_CHUNKS_PER_INTEGRATION;
    let mut engine = correlator.streaming(per_integration, depth)?;
    prime(&mut engine, depth, |engine, slot| {
        fill_host_random(engine.input()?, 0xc0 + slot as u64);
        Ok(())
    })?;
    let kind = correlator.wgmma_kind().map_or("mma.sync".to_string(), |k| format!("wgmma {k:?}"));
    let setup = Setup {
        engine: "correlator",
        configuration: format!(
            "N={} P=2 C={} T={} int8 ({kind}), {per_integration} chunks per integration",
            config.stations, config.channels, config.times
        ),
        input_bytes: config.input_bytes() as f64,
        output_bytes: (config.output_len() * std::mem::size_of::<Complex<i64>>()) as f64
            / per_integration as f64,
        data_seconds: config.times as f64 * CHORD_SAMPLE_TIME_S,
        work: config.useful_ops(),
        rate_unit: "TOPS",
        rate_scale: 1e12,
        kernel_s: kernel_ms * 1e-3,
        chunk_multiple: per_integration as u64,
        pfb_shape: None,
    };
    visit(&mut engine, setup)
}

/// The F-engine ([`crate::pfb::ChannelizerStream`]) at each of `options.pfb_channels()`,
/// `options.pfb_bits()`-bit input, int8 output, on the path the channelizer takes by default.
/// Kernel-only: [`Channelizer::run`] after `fill_input_with`. Rate: Gsample/s per
/// polarisation; data time: samples over `options.pfb_sample_rate_hz()`.
pub fn pfb(gpu: &Gpu, options: &Options, visit: &mut Visit<'_>) -> Result<()> {
    let bits = options.pfb_bits();
    let rate = options.pfb_sample_rate_hz();
    for channels in options.pfb_channels() {
        let config = pfb_config(channels, bits)?;
        // Random words include the input's extremes; a gain of 1/64 keeps the output in range.
        let gains = vec![Complex::new(1.0f32 / 64.0, 0.0); 2 * channels as usize];
        let kernel_ms = {
            let mut channelizer = Channelizer::new(gpu, config.clone(), None)?;
            let mut failure = None;
            channelizer.fill_input_with(|buffer| {
                if let Err(e) = fill_random(gpu, buffer, 17) {
                    failure.get_or_insert(e);
                }
            })?;
            if let Some(e) = failure {
                return Err(e);
            }
            channelizer.set_gains(&gains)?;
            let ms = median_ms(gpu, KERNEL_REPS, || channelizer.run())?;
            gpu.synchronize()?;
            ms
        };
        let mut channelizer = Channelizer::new(gpu, config.clone(), None)?;
        channelizer.set_gains(&gains)?;
        let path = match channelizer.path() {
            PfbPath::Fused => "cluster",
            PfbPath::ThreeKernel => "three-kernel",
            _ => "other",
        };
        let mut engine = channelizer.streaming(options.depth)?;
        prime(&mut engine, options.depth, |engine, slot| {
            let input = engine.input()?;
            for (pol, samples) in input.samples.into_iter().enumerate() {
                fill_host_random(samples, 0xf0 + 2 * slot as u64 + pol as u64);
            }
            for present in input.present {
                present.fill(true);
            }
            Ok(())
        })?;
        let samples = config.chunk_samples as f64;
        let setup = Setup {
            engine: "pfb",
            configuration: format!(
                "n={channels} T={} {bits}-bit int8 ({path}), 2^24 samples/pol per chunk",
                config.taps
            ),
            // Both polarisations' samples. The delay models are constant, so each output
            // slot's schedule is uploaded once, not per chunk.
            input_bytes: 2.0 * config.chunk_bytes() as f64,
            // The output chunk and its saturation counts (u32 per heap and polarisation).
            output_bytes: config.output_bytes() as f64 + 8.0 * config.heaps_per_chunk as f64,
            data_seconds: samples / rate,
            work: samples,
            rate_unit: "Gsample/s/pol",
            rate_scale: 1e9,
            kernel_s: kernel_ms * 1e-3,
            chunk_multiple: 1,
            pfb_shape: Some((channels, bits)),
        };
        visit(&mut engine, setup)?;
    }
    Ok(())
}

/// The baseband beamformer ([`crate::baseband_beamformer::BasebandStream`]) at full CHORD,
/// random weights, shifts of 12. Kernel-only: [`BasebandBeamformer::beamform`]. Rate: useful
/// TOPS (`8 P F B D T` per chunk); data time: [`BeamformerConfig::real_time_s`].
pub fn baseband(gpu: &Gpu, depth: usize, visit: &mut Visit<'_>) -> Result<()> {
    let config = BeamformerConfig::chord(BASEBAND_TIMES);
    let mut rng = StdRng::seed_from_u64(7);
    let weights: Vec<Complex<i8>> =
        (0..config.weights_len()).map(|_| Complex::new(rng.random(), rng.random())).collect();
    let beamformer =
        BasebandBeamformer::new(gpu, config, &weights, &vec![Shift::new(12)?; config.shifts_len()])?;
    let kernel_ms = {
        let mut e = gpu.alloc::<Ci4>(config.e_len(), 0)?;
        fill_random(gpu, e.borrow_mut(), 7)?;
        let mut j = gpu.alloc::<Ci4>(config.output_len(), 0)?;
        let ms = median_ms(gpu, KERNEL_REPS, || beamformer.beamform(&e, &mut j))?;
        gpu.synchronize()?;
        ms
    };
    let mut engine = beamformer.streaming(depth)?;
    prime(&mut engine, depth, |engine, slot| {
        fill_host_random(bytemuck::cast_slice_mut(engine.input()?), 0xba + slot as u64);
        Ok(())
    })?;
    let setup = Setup {
        engine: "baseband",
        configuration: format!(
            "full CHORD D={} B={} F={} T={}",
            config.dishes, config.beams, config.freqs, config.times
        ),
        input_bytes: config.e_len() as f64,
        output_bytes: config.output_len() as f64,
        data_seconds: config.real_time_s(),
        work: config.useful_ops(),
        rate_unit: "TOPS",
        rate_scale: 1e12,
        kernel_s: kernel_ms * 1e-3,
        chunk_multiple: 1,
        pfb_shape: None,
    };
    visit(&mut engine, setup)
}

/// The delay beamformer's headline: MeerKAT's 8 single-polarisation dithered beams from 64
/// dual-polarisation antennas, 512 channels from channel 1024, 4096 spectra per chunk.
pub fn delay_config() -> DelayBeamformerConfig {
    DelayBeamformerConfig {
        antennas: 64,
        pols: 2,
        channels: 512,
        first_channel: 1024,
        times: 4096,
        beams: (0..8).map(|b| Beam { pol: b % 2, dither: true }).collect(),
    }
}

/// The delay beamformer ([`crate::delay_beamformer::DelayStream`]) at [`delay_config`], with
/// random steering and the dither state carried across chunks. Kernel-only:
/// [`DelayBeamformer::beamform_steered`]. Rate: Gsample/s of complex input samples; data
/// time: spectra x [`DELAY_SPECTRUM_S`].
pub fn delay(gpu: &Gpu, depth: usize, visit: &mut Visit<'_>) -> Result<()> {
    let config = delay_config();
    let beamformer = DelayBeamformer::new(gpu, config.clone())?;
    let n = config.steering_len();
    let mut rng = StdRng::seed_from_u64(9);
    let w: Vec<Complex<f32>> = (0..n)
        .map(|_| Complex::new(0.01 * rng.random_range(-1.0f32..1.0), 0.01 * rng.random_range(-1.0f32..1.0)))
        .collect();
    let d: Vec<f32> = (0..n).map(|_| rng.random_range(-2.0f32..2.0)).collect();
    let steering = beamformer.upload_steering(&w, &d)?;
    let beams = config.beams.len();
    let kernel_ms = {
        let mut input = gpu.alloc::<Complex<i8>>(config.input_len(), 0)?;
        fill_random(gpu, input.borrow_mut(), 9)?;
        let mut state = beamformer.dither_state(7, 0, 0)?;
        let mut y = gpu.alloc::<Complex<i8>>(config.output_len(), 0)?;
        let mut saturated = gpu.alloc::<u32>(beams, 0)?;
        let ms = median_ms(gpu, KERNEL_REPS, || {
            beamformer.beamform_steered(&input, &steering, Some(&mut state), &mut y, &mut saturated)
        })?;
        gpu.synchronize()?;
        ms
    };
    let mut state = beamformer.dither_state(7, 0, 0)?;
    let mut engine = beamformer.streaming(&steering, Some(&mut state), depth)?;
    prime(&mut engine, depth, |engine, slot| {
        fill_host_random(bytemuck::cast_slice_mut(engine.input()?), 0xde + slot as u64);
        Ok(())
    })?;
    let setup = Setup {
        engine: "delay",
        configuration: format!(
            "A={} P={} C={} T={} B={beams} dithered",
            config.antennas, config.pols, config.channels, config.times
        ),
        input_bytes: 2.0 * config.input_len() as f64,
        output_bytes: 2.0 * config.output_len() as f64 + 4.0 * beams as f64,
        data_seconds: config.times as f64 * DELAY_SPECTRUM_S,
        work: config.input_len() as f64,
        rate_unit: "Gsample/s",
        rate_scale: 1e9,
        kernel_s: kernel_ms * 1e-3,
        chunk_multiple: 1,
        pfb_shape: None,
    };
    visit(&mut engine, setup)
}

/// The FRB beamformer's headline first kernel: full CHORD, T = 1920, T_ds = 40.
pub fn frb_config() -> FrbConfig {
    FrbConfig { dishes: 512, m: 24, n: 24, freqs: 256, times: 1920, t_ds: 40 }
}

/// The FRB beamformer ([`crate::frb_beamformer::FrbStream`]) at [`frb_config`]: the first
/// kernel, the fused resampler to [`FRB_BEAMS`] beams, and the 8-bit quantiser, chained on
/// the device. Kernel-only: the three one-shot launches in a row on device buffers. Rate:
/// Gsample/s of E (dish-polarisation samples); data time: T x [`FRB_SAMPLE_TIME_S`].
pub fn frb(gpu: &Gpu, depth: usize, visit: &mut Visit<'_>) -> Result<()> {
    let config = frb_config();
    let grid: Vec<(u32, u32)> = (0..config.dishes).map(|d| (d / config.n, d % config.n)).collect();
    let w = f16::from_f64(6.0 / ((config.t_ds * config.dishes) as f64).sqrt() / 4.0);
    let first = FrbBeamformer::new(gpu, config, &grid, &vec![Complex::new(w, w); config.weights_len()])?;
    let slow = config.out_times();
    let resample =
        ResampleConfig { channels: config.freqs, times: slow, m: config.m, n: config.n, beams: FRB_BEAMS };
    let mut resampler = FusedResampler::new(gpu, resample)?;
    let positions = resample.positions_len();
    let theta = gpu.upload(&(0..positions).map(|i| (i % 97) as f32 * 0.49 - 23.0).collect::<Vec<f32>>())?;
    let theta_prime =
        gpu.upload(&(0..positions).map(|i| (i % 89) as f32 * 0.53 - 23.0).collect::<Vec<f32>>())?;
    resampler.set_beams(&theta, &theta_prime)?;
    let quantize =
        QuantizeConfig { channels: config.freqs, times: slow, beams: FRB_BEAMS, format: QuantizeFormat::U8 };
    let quantizer = Quantizer::new(gpu, quantize)?;
    let (scale, offset) = (vec![1.0f32; quantize.params_len()], vec![0.0f32; quantize.params_len()]);
    let kernel_ms = {
        let mut e = gpu.alloc::<Ci4>(config.e_len(), 0)?;
        fill_random(gpu, e.borrow_mut(), 11)?;
        let mut intensity = gpu.alloc::<f16>(config.output_len(), 0)?;
        let mut beams = gpu.alloc::<f16>(resample.output_len(), 0)?;
        let (scale, offset) = (gpu.upload(&scale)?, gpu.upload(&offset)?);
        let mut codes = gpu.alloc::<u8>(quantize.output_len(), 0)?;
        let mut saturated = gpu.alloc::<u32>(quantize.params_len(), 0)?;
        let ms = median_ms(gpu, KERNEL_REPS, || {
            first.beamform(&e, &mut intensity)?;
            resampler.resample(&intensity, &mut beams)?;
            quantizer.quantize(&beams, &scale, &offset, &mut codes, &mut saturated)
        })?;
        gpu.synchronize()?;
        ms
    };
    let mut engine = first.streaming(&resampler, &quantizer, &scale, &offset, depth)?;
    prime(&mut engine, depth, |engine, slot| {
        fill_host_random(bytemuck::cast_slice_mut(engine.input()?), 0xfb + slot as u64);
        Ok(())
    })?;
    let setup = Setup {
        engine: "frb",
        configuration: format!(
            "full CHORD D={} {}x{} F={} T={} T_ds={} -> {FRB_BEAMS} beams u8",
            config.dishes, config.m, config.n, config.freqs, config.times, config.t_ds
        ),
        input_bytes: config.e_len() as f64,
        output_bytes: quantize.output_len() as f64 + 4.0 * quantize.params_len() as f64,
        data_seconds: config.times as f64 * FRB_SAMPLE_TIME_S,
        work: config.e_len() as f64,
        rate_unit: "Gsample/s",
        rate_scale: 1e9,
        kernel_s: kernel_ms * 1e-3,
        chunk_multiple: 1,
        pfb_shape: None,
    };
    visit(&mut engine, setup)
}
