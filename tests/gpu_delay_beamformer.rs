//! GPU tests of the delay beamformer against the f64 CPU reference on fresh random inputs
//! (seed printed), with -128 forced in and saturation provoked: every output within one LSB,
//! and exact wherever the reference value is farther from a rounding boundary than the f32
//! error bound; the dither stream bit for bit (states, raw draws, dithered outputs); dither
//! statistics over 10^8 draws; unbiased output for a constant input; steering; input
//! validation; the launcher on a caller's stream; and the streaming engine, bit for bit
//! against consecutive one-shot calls (the dither state carried across chunks) and, in its
//! undithered beams, one long call, with back-pressure, registered memory and steering
//! changes between chunks. Outputs are poisoned before every launch.
mod common;

use common::*;
use radio_kernels::delay_beamformer::{
    beamform_reference, curand_init, dither, engine_subsequence, reference_states, Beam, DelayBeamformer,
    DelayBeamformerConfig, DeviceSteering, DitherState, Plan, Reference, Xorwow, THREADS, VARIANTS,
};
use radio_kernels::{DeviceBuffer, Error, Gpu};
use rand::rngs::StdRng;
use rand::Rng;

const POISON: u8 = 0xA5;

/// Random complex int8 with one sample in sixteen a -128 component.
fn random_input(len: usize, rng: &mut StdRng) -> Vec<[i8; 2]> {
    (0..len)
        .map(|_| {
            let mut x = [rng.random::<i8>(), rng.random::<i8>()];
            if rng.random_range(0..16) == 0 {
                x[rng.random_range(0..2)] = -128;
            }
            x
        })
        .collect()
}

/// Random steering: weights of random phase whose beams have a standard deviation of about
/// 50 (so some samples saturate), delays in [-3, 3] half turns per channel.
fn random_steering(config: &DelayBeamformerConfig, rng: &mut StdRng) -> (Vec<[f32; 2]>, Vec<f32>) {
    let scale = 0.68 / (config.antennas as f32).sqrt();
    let w = (0..config.steering_len())
        .map(|_| {
            let (s, c) = rng.random_range(0.0f32..std::f32::consts::TAU).sin_cos();
            let amplitude = scale * rng.random_range(0.5f32..1.5);
            [amplitude * c, amplitude * s]
        })
        .collect();
    let d = (0..config.steering_len()).map(|_| rng.random_range(-3.0f32..3.0)).collect();
    (w, d)
}

fn random_config(
    antennas: u32,
    pols: u32,
    channels: u32,
    times: u32,
    beams: u32,
    rng: &mut StdRng,
) -> DelayBeamformerConfig {
    DelayBeamformerConfig {
        antennas,
        pols,
        channels,
        first_channel: rng.random_range(0..30000),
        times,
        beams: (0..beams).map(|_| Beam { pol: rng.random_range(0..pols), dither: rng.random() }).collect(),
    }
}

/// One launch into poisoned outputs: (output, saturation counts).
fn launch(
    gpu: &Gpu,
    beamformer: &DelayBeamformer,
    input: &DeviceBuffer<[i8; 2]>,
    w: &DeviceBuffer<[f32; 2]>,
    d: &DeviceBuffer<f32>,
    dither_state: Option<&mut radio_kernels::delay_beamformer::DitherState>,
) -> (Vec<[i8; 2]>, Vec<u32>) {
    let config = beamformer.config();
    let mut output = gpu.alloc::<[i8; 2]>(config.output_len(), POISON).unwrap();
    let mut saturated = gpu.alloc::<u32>(config.beams.len(), POISON).unwrap();
    beamformer.beamform(input, w, d, dither_state, &mut output, &mut saturated).unwrap();
    (output.download().unwrap(), saturated.download().unwrap())
}

/// The f32 error bound of one output (the bound of an f32 kernel, which the int8 tensor-core
/// kernel keeps well inside): coefficients to ~5e-7 relative (`sincospi`) plus their fixed
/// point, 2^-23 of the beam's largest weight (at most ~3 of the weights here, so ~4e-7 of the
/// magnitude); exact integer sums where an f32 kernel would lose 3 (A + 2) units of 2^-24 of
/// the magnitude; and the final roundings and the dither addition (a few units of the value).
fn tolerance(antennas: u32, magnitude: f64, value: f64) -> f64 {
    let u = 2f64.powi(-24);
    magnitude * (1e-6 + 3.0 * (antennas as f64 + 2.0) * u) + 8.0 * u * (value.abs() + 1.0)
}

#[derive(Default, Debug)]
struct Summary {
    components: usize,
    exact_checked: usize,
    ambiguous: usize,
    off_by_one: usize,
}

/// Every output within one LSB of the reference and equal to it unless the reference value
/// lies within the error bound of a rounding boundary; saturation counts (when given: the
/// launch covered exactly these outputs) between the definite and the possible ones.
fn assert_matches(
    config: &DelayBeamformerConfig,
    reference: &Reference,
    got: &[[i8; 2]],
    saturated: Option<&[u32]>,
) -> Summary {
    assert_eq!(got.len(), reference.output.len());
    let mut summary = Summary::default();
    let per_beam = (config.channels * config.times) as usize;
    let mut definite = vec![0u32; config.beams.len()];
    let mut possible = vec![0u32; config.beams.len()];
    for o in 0..got.len() {
        let (mut sure, mut maybe) = (false, false);
        for (k, &v) in reference.values[o].iter().enumerate() {
            let tol = tolerance(config.antennas, reference.magnitude[o], v);
            let (q, r) = (got[o][k] as i32, reference.output[o][k] as i32);
            summary.components += 1;
            let boundary = (v - v.floor() - 0.5).abs();
            if boundary <= tol || (v.abs() - 127.5).abs() <= tol {
                summary.ambiguous += 1;
                summary.off_by_one += (q != r) as usize;
                assert!((q - r).abs() <= 1, "output {o}.{k}: {q}, reference {v} -> {r} (tolerance {tol:e})");
            } else {
                summary.exact_checked += 1;
                assert_eq!(q, r, "output {o}.{k}: reference {v} (tolerance {tol:e}), {config:?}");
            }
            sure |= v.abs() > 127.5 + tol;
            maybe |= v.abs() >= 127.5 - tol;
        }
        definite[o / per_beam] += sure as u32;
        possible[o / per_beam] += maybe as u32;
    }
    if let Some(saturated) = saturated {
        for b in 0..config.beams.len() {
            assert!(
                definite[b] <= saturated[b] && saturated[b] <= possible[b],
                "beam {b}: {} saturated, reference {}..={}",
                saturated[b],
                definite[b],
                possible[b]
            );
        }
    }
    summary
}

/// Launches one configuration twice (the dither streams continue) and checks both against
/// the reference, whose states advance alongside; the GPU's states must then equal the
/// reference's bit for bit.
fn check_case(gpu: &Gpu, config: DelayBeamformerConfig, rng: &mut StdRng) {
    let beamformer = DelayBeamformer::new(gpu, config.clone()).unwrap();
    let plan = beamformer.plan().clone();
    let (w, d) = random_steering(&config, rng);
    let (dw, dd) = (gpu.upload(&w).unwrap(), gpu.upload(&d).unwrap());
    let seed = rng.random();
    let mut state = beamformer.dither_state(seed, engine_subsequence(rng.random_range(0..64)), 0).unwrap();
    let mut states = reference_states(seed, state.first_subsequence, 0, plan.state_count() as usize).unwrap();
    let mut total = Summary::default();
    for _ in 0..2 {
        let input = random_input(config.input_len(), rng);
        let device_input = gpu.upload(&input).unwrap();
        let (got, saturated) = launch(gpu, &beamformer, &device_input, &dw, &dd, Some(&mut state));
        let reference = beamform_reference(&config, &plan, &input, &w, &d, Some(&mut states)).unwrap();
        let s = assert_matches(&config, &reference, &got, Some(&saturated));
        total.components += s.components;
        total.exact_checked += s.exact_checked;
        total.ambiguous += s.ambiguous;
        total.off_by_one += s.off_by_one;
    }
    if config.beams.iter().any(|b| b.dither) {
        assert!(state.states().unwrap() == states, "dither states diverged from the reference");
    }
    println!(
        "A={} P={} C={} T={} B={} ({:?} x{} batches, {} groups of {} tiles): {total:?}",
        config.antennas,
        config.pols,
        config.channels,
        config.times,
        config.beams.len(),
        (plan.variant().slots(), plan.variant().times_per_thread()),
        plan.batches(),
        plan.groups(),
        plan.tiles_per_group()
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn beams_match_the_reference_small_sizes() {
    let gpu = gpu();
    let mut rng = rng();
    for (antennas, pols, channels, times, beams) in [
        (1, 1, 1, 256, 1),
        (1, 2, 1, 256, 8),
        (4, 2, 1, 4096, 45),
        (80, 2, 1, 4096, 45),
        (64, 2, 1, 4096, 64),
        (80, 1, 1, 256, 130),
        (64, 1, 3, 256, 8),
        (80, 2, 3, 200, 45),
        (3, 1, 5, 1000, 16),
        (100, 2, 4, 1024, 64),
        (350, 2, 2, 512, 9),  // more antennas than one coefficient batch (336)
        (333, 1, 1, 264, 17), // one polarisation: batches of 320
        (7, 2, 2, 8, 3),
    ] {
        check_case(&gpu, random_config(antennas, pols, channels, times, beams, &mut rng), &mut rng);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn beams_match_the_reference_large_sizes() {
    let gpu = gpu();
    let mut rng = rng();
    for (antennas, pols, channels, times, beams) in [
        (4, 2, 1024, 256, 8),
        (64, 2, 1024, 256, 8),
        (64, 2, 1024, 4096, 8),
        (4, 2, 1024, 256, 130),
        (1, 2, 1024, 256, 64),
        (64, 2, 16, 4096, 256),
    ] {
        check_case(&gpu, random_config(antennas, pols, channels, times, beams, &mut rng), &mut rng);
    }
}

/// Both kernels on a ragged configuration with more beams than one batch.
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_variant_matches_the_reference() {
    let gpu = gpu();
    let mut rng = rng();
    for v in VARIANTS {
        let config = random_config(37, v.pols(), 3, 1000, 2 * v.slots() + 3, &mut rng);
        check_case(&gpu, config, &mut rng);
    }
}

/// Beam values exactly halfway between integers (weight 1/2 on odd inputs) make every
/// output reveal the sign of its dither value, so the dithered outputs check the stream's
/// position and values bit for bit, over two launches.
#[test]
#[ignore = "needs a CUDA GPU"]
fn dither_on_half_integers_follows_the_stream_bit_for_bit() {
    let gpu = gpu();
    let mut rng = rng();
    let config = DelayBeamformerConfig {
        antennas: 1,
        pols: 2,
        channels: 7,
        first_channel: 100,
        times: 4096,
        beams: (0..8).map(|b| Beam { pol: b % 2, dither: true }).collect(),
    };
    let beamformer = DelayBeamformer::new(&gpu, config.clone()).unwrap();
    let plan = beamformer.plan().clone();
    let w = vec![[0.5f32, 0.0]; config.steering_len()];
    let d = vec![0.0f32; config.steering_len()];
    let (dw, dd) = (gpu.upload(&w).unwrap(), gpu.upload(&d).unwrap());
    let seed = rng.random();
    let mut state = beamformer.dither_state(seed, 12345, 0).unwrap();
    let mut states = reference_states(seed, 12345, 0, plan.state_count() as usize).unwrap();
    for _ in 0..2 {
        let input: Vec<[i8; 2]> = (0..config.input_len())
            .map(|_| [rng.random_range(-63i8..63) * 2 + 1, rng.random_range(-63i8..63) * 2 + 1])
            .collect();
        let (got, _) = launch(&gpu, &beamformer, &gpu.upload(&input).unwrap(), &dw, &dd, Some(&mut state));
        let reference = beamform_reference(&config, &plan, &input, &w, &d, Some(&mut states)).unwrap();
        let s = assert_matches(&config, &reference, &got, Some(&vec![0; config.beams.len()]));
        // Here the f32 beam value is exact, so only the f32 addition of a dither below about
        // 2^-17 (half an ulp at 64) can differ from the reference: every other output is
        // exact, whatever the general tolerance allowed.
        let mut near_zero = 0;
        for (o, (g, r)) in got.iter().zip(&reference.output).enumerate() {
            for k in 0..2 {
                let v = reference.values[o][k];
                if (v - v.floor() - 0.5).abs() < 2f64.powi(-17) {
                    near_zero += 1;
                } else {
                    assert_eq!(g[k], r[k], "output {o}.{k}: reference {v}");
                }
            }
        }
        assert!(near_zero * 1000 < s.components, "{near_zero} dithers near zero");
        println!("{s:?}; {near_zero} dithers within 2^-17 of zero");
    }
    assert!(state.states().unwrap() == states);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn dither_states_are_curand_init_of_consecutive_subsequences() {
    let gpu = gpu();
    let mut rng = rng();
    let config = random_config(5, 2, 300, 1024, 20, &mut rng);
    let config = DelayBeamformerConfig {
        beams: config.beams.iter().map(|b| Beam { dither: true, ..*b }).collect(),
        ..config
    };
    let beamformer = DelayBeamformer::new(&gpu, config).unwrap();
    for (seed, first, offset) in
        [(0u64, 0u64, 0u64), (rng.random(), engine_subsequence(17), 0), (rng.random(), 5, 1001)]
    {
        let state = beamformer.dither_state(seed, first, offset).unwrap();
        let got = state.states().unwrap();
        assert_eq!(got.len() as u64, beamformer.plan().state_count());
        assert!(
            got == reference_states(seed, first, offset, got.len()).unwrap(),
            "seed {seed} first {first} offset {offset}"
        );
        for i in [0, 1, got.len() / 2, got.len() - 1] {
            assert_eq!(got[i], curand_init(seed, first + i as u64, offset));
        }
        println!("{} states of seed {seed:#x} from subsequence {first} offset {offset}: equal", got.len());
    }
}

/// 10^8 draws on the GPU: equal to the CPU generator and mapping bit for bit, and the dither
/// values zero-mean and symmetric within statistical error.
#[test]
#[ignore = "needs a CUDA GPU"]
fn dither_is_the_cpu_stream_zero_mean_and_symmetric_over_1e8_draws() {
    let gpu = gpu();
    let mut rng = rng();
    let config = DelayBeamformerConfig {
        antennas: 1,
        pols: 1,
        channels: 1024,
        first_channel: 0,
        times: 4096,
        beams: vec![Beam { pol: 0, dither: true }],
    };
    let beamformer = DelayBeamformer::new(&gpu, config).unwrap();
    let seed = rng.random();
    let mut state = beamformer.dither_state(seed, 0, 0).unwrap();
    let count = state.count() as usize;
    let draws = 100_000_000usize.div_ceil(count) as u32;
    let (raw, values) = state.draw(&gpu, draws).unwrap();
    let mut cpu = reference_states(seed, 0, 0, count).unwrap();
    for n in 0..draws as usize {
        for (i, g) in cpu.iter_mut().enumerate() {
            let r = g.next_u32();
            assert_eq!(raw[n * count + i], r, "draw {n} of state {i}");
            assert_eq!(values[n * count + i].to_bits(), dither(r).to_bits());
        }
    }
    assert!(state.states().unwrap() == cpu);

    let total = values.len() as f64;
    let mean = values.iter().map(|&v| v as f64).sum::<f64>() / total;
    let third = values.iter().map(|&v| (v as f64).powi(3)).sum::<f64>() / total;
    let (positive, negative) = (
        values.iter().filter(|&&v| v > 0.0).count() as f64,
        values.iter().filter(|&&v| v < 0.0).count() as f64,
    );
    assert!(values.iter().all(|&v| v > -0.5 && v < 0.5));
    // Uniform on (-0.5, 0.5): sd 1/sqrt(12) for the mean, sqrt(1/448) for the third moment.
    let sigma = (1.0 / 12.0f64).sqrt() / total.sqrt();
    assert!(mean.abs() < 6.0 * sigma, "mean {mean:e} (sigma {sigma:e})");
    assert!(third.abs() < 6.0 * (1.0 / 448.0f64).sqrt() / total.sqrt(), "third moment {third:e}");
    assert!((positive - negative).abs() < 6.0 * total.sqrt(), "{positive} positive, {negative} negative");
    // Mirrored histogram bins hold the same counts within chi-square error.
    let bins = 64usize;
    let mut histogram = vec![0u64; bins];
    for &v in &values {
        histogram[(((v as f64 + 0.5) * bins as f64) as usize).min(bins - 1)] += 1;
    }
    let chi2: f64 = (0..bins / 2)
        .map(|k| {
            let (a, b) = (histogram[k] as f64, histogram[bins - 1 - k] as f64);
            (a - b).powi(2) / (a + b)
        })
        .sum();
    assert!(chi2 < 32.0 + 6.0 * 8.0, "mirror chi-square {chi2} over 32 pairs");
    println!(
        "{} draws: mean {mean:e} (sigma {sigma:e}), third moment {third:e}, {positive} > 0, {negative} < 0, mirror chi2 {chi2:.1}",
        values.len()
    );
}

/// A constant input: dithered beams average to the exact beam value, undithered ones to its
/// rounding.
#[test]
#[ignore = "needs a CUDA GPU"]
fn dither_makes_the_output_mean_unbiased() {
    let gpu = gpu();
    let mut rng = rng();
    let config = DelayBeamformerConfig {
        antennas: 2,
        pols: 2,
        channels: 1024,
        first_channel: 0,
        times: 4096,
        beams: vec![
            Beam { pol: 0, dither: true },
            Beam { pol: 1, dither: false },
            Beam { pol: 1, dither: true },
        ],
    };
    let beamformer = DelayBeamformer::new(&gpu, config.clone()).unwrap();
    let input = vec![[3i8, -5]; config.input_len()];
    // Beam value per antenna pair: 2 * 0.185 * (3, -5) = (1.11, -1.85).
    let w = vec![[0.185f32, 0.0]; config.steering_len()];
    let d = vec![0.0f32; config.steering_len()];
    let mut state = beamformer.dither_state(rng.random(), 0, 0).unwrap();
    let (got, _) = launch(
        &gpu,
        &beamformer,
        &gpu.upload(&input).unwrap(),
        &gpu.upload(&w).unwrap(),
        &gpu.upload(&d).unwrap(),
        Some(&mut state),
    );
    let exact = [2.0 * 0.185f32 as f64 * 3.0, 2.0 * 0.185f32 as f64 * -5.0];
    let n = (config.channels * config.times) as usize;
    for b in 0..3 {
        let samples = &got[b * n..(b + 1) * n];
        let mean = [0, 1].map(|k| samples.iter().map(|x| x[k] as f64).sum::<f64>() / n as f64);
        println!("beam {b}: mean ({:.5}, {:.5}), exact ({:.5}, {:.5})", mean[0], mean[1], exact[0], exact[1]);
        for k in 0..2 {
            if config.beams[b].dither {
                // sd of one sample below 0.5; 6 sigma of the mean.
                assert!((mean[k] - exact[k]).abs() < 6.0 * 0.5 / (n as f64).sqrt(), "beam {b}");
            } else {
                assert_eq!(mean[k], exact[k].round_ties_even());
            }
        }
    }
}

/// A source whose signal reaches antenna a delayed (phase slope across channels): the beam
/// steered with those delays adds it coherently (power ~ A^2), a beam steered elsewhere
/// does not (power ~ A).
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_beam_steered_at_a_delayed_source_adds_coherently() {
    let gpu = gpu();
    let mut rng = rng();
    let (antennas, channels, times) = (64u32, 64u32, 1024u32);
    let config = DelayBeamformerConfig {
        antennas,
        pols: 2,
        channels,
        first_channel: 1000,
        times,
        beams: vec![
            Beam { pol: 0, dither: false },
            Beam { pol: 0, dither: false },
            Beam { pol: 1, dither: false },
        ],
    };
    let channel_width = 208e3;
    let source: Vec<f64> = (0..antennas).map(|_| rng.random_range(-2e-6..2e-6)).collect();
    let elsewhere: Vec<f64> = (0..antennas).map(|_| rng.random_range(-2e-6..2e-6)).collect();
    let amplitude = 20.0;
    let mut input = vec![[0i8; 2]; config.input_len()];
    for c in 0..channels {
        for t in 0..times {
            let (s, phase) = (amplitude, rng.random_range(0.0..std::f64::consts::TAU));
            for a in 0..antennas {
                // Arriving later by tau: phase -2 pi f tau at f = (first_channel + c) df.
                let delayed = phase
                    - 2.0 * std::f64::consts::PI * (1000 + c) as f64 * channel_width * source[a as usize];
                let x = [s * delayed.cos(), s * delayed.sin()];
                let noise = [rng.random_range(-3.0..3.0), rng.random_range(-3.0..3.0)];
                input[config.input_index(a, c, t, 0)] =
                    [(x[0] + noise[0]).round() as i8, (x[1] + noise[1]).round() as i8];
                input[config.input_index(a, c, t, 1)] = [rng.random_range(-3..=3), rng.random_range(-3..=3)];
            }
        }
    }
    let n = config.steering_len();
    let gain = 1.0 / antennas as f64;
    let delay: Vec<f64> = (0..n).map(|i| if i % 3 == 1 { elsewhere[i / 3] } else { source[i / 3] }).collect();
    let (w, d) = radio_kernels::delay_beamformer::steering(
        &config,
        &vec![[1.0, 0.0]; n],
        &[gain; 3],
        &delay,
        &vec![0.0; n],
        channel_width,
    )
    .unwrap();
    let (got, _) = launch(
        &gpu,
        &beamformer_of(&gpu, &config),
        &gpu.upload(&input).unwrap(),
        &gpu.upload(&w).unwrap(),
        &gpu.upload(&d).unwrap(),
        None,
    );
    let per = (channels * times) as usize;
    let power = |b: usize| {
        got[b * per..(b + 1) * per].iter().map(|x| (x[0] as f64).powi(2) + (x[1] as f64).powi(2)).sum::<f64>()
            / per as f64
    };
    let (on, off, other_pol) = (power(0), power(1), power(2));
    // Coherent: |A gain s|^2 = s^2; incoherent: A |gain s|^2 = s^2 / A (plus rounding noise).
    println!(
        "power on source {on:.1} (expected {:.1}), elsewhere {off:.2}, other polarisation {other_pol:.2}",
        amplitude * amplitude
    );
    assert!((on / (amplitude * amplitude) - 1.0).abs() < 0.1, "coherent power {on}");
    assert!(off < on / (antennas as f64 / 4.0), "incoherent power {off} vs {on}");
    assert!(other_pol < on / 50.0);
}

fn beamformer_of<'g>(gpu: &'g Gpu, config: &DelayBeamformerConfig) -> DelayBeamformer<'g> {
    DelayBeamformer::new(gpu, config.clone()).unwrap()
}

/// All-minimum input with unit weights: every sample saturates, and the count says so.
#[test]
#[ignore = "needs a CUDA GPU"]
fn minimum_input_saturates_every_sample() {
    let gpu = gpu();
    let config = DelayBeamformerConfig {
        antennas: 3,
        pols: 2,
        channels: 5,
        first_channel: 0,
        times: 520,
        beams: vec![Beam { pol: 0, dither: false }, Beam { pol: 1, dither: false }],
    };
    let beamformer = beamformer_of(&gpu, &config);
    let input = vec![[-128i8, -128]; config.input_len()];
    let w = vec![[0.5f32, 0.0]; config.steering_len()];
    let d = vec![0.0f32; config.steering_len()];
    let (got, saturated) = launch(
        &gpu,
        &beamformer,
        &gpu.upload(&input).unwrap(),
        &gpu.upload(&w).unwrap(),
        &gpu.upload(&d).unwrap(),
        None,
    );
    assert!(got.iter().all(|&x| x == [-127, -127]));
    assert_eq!(saturated, vec![5 * 520; 2]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_input_is_rejected_before_launch() {
    let gpu = gpu();
    let good = DelayBeamformerConfig {
        antennas: 4,
        pols: 2,
        channels: 3,
        first_channel: 0,
        times: 64,
        beams: vec![Beam { pol: 0, dither: true }, Beam { pol: 1, dither: false }],
    };
    for bad in [
        DelayBeamformerConfig { antennas: 0, ..good.clone() },
        DelayBeamformerConfig { times: 60, ..good.clone() },
        DelayBeamformerConfig { pols: 3, ..good.clone() },
        DelayBeamformerConfig { beams: vec![], ..good.clone() },
        DelayBeamformerConfig { beams: vec![Beam { pol: 2, dither: false }], ..good.clone() },
    ] {
        assert!(matches!(DelayBeamformer::new(&gpu, bad), Err(Error::InvalidConfig(_))));
    }
    let beamformer = beamformer_of(&gpu, &good);
    let mut state = beamformer.dither_state(1, 0, 0).unwrap();
    let input = gpu.alloc::<[i8; 2]>(good.input_len(), 0).unwrap();
    let short = gpu.alloc::<[i8; 2]>(good.input_len() - 1, 0).unwrap();
    let w = gpu.alloc::<[f32; 2]>(good.steering_len(), 0).unwrap();
    let d = gpu.alloc::<f32>(good.steering_len(), 0).unwrap();
    let d_short = gpu.alloc::<f32>(good.steering_len() - 1, 0).unwrap();
    let mut output = gpu.alloc::<[i8; 2]>(good.output_len(), 0).unwrap();
    let mut big = gpu.alloc::<[i8; 2]>(good.output_len() + 1, 0).unwrap();
    let mut saturated = gpu.alloc::<u32>(2, 0).unwrap();
    let mut few = gpu.alloc::<u32>(1, 0).unwrap();
    let shape = |r: Result<(), Error>| matches!(r, Err(Error::ShapeMismatch { .. }));
    assert!(shape(beamformer.beamform(&short, &w, &d, Some(&mut state), &mut output, &mut saturated)));
    assert!(shape(beamformer.beamform(&input, &w, &d_short, Some(&mut state), &mut output, &mut saturated)));
    assert!(shape(beamformer.beamform(&input, &w, &d, Some(&mut state), &mut big, &mut saturated)));
    assert!(shape(beamformer.beamform(&input, &w, &d, Some(&mut state), &mut output, &mut few)));
    assert!(matches!(
        beamformer.beamform(&input, &w, &d, None, &mut output, &mut saturated),
        Err(Error::InvalidConfig(_))
    ));
    let other = beamformer_of(&gpu, &DelayBeamformerConfig { channels: 300, ..good.clone() });
    let mut foreign = other.dither_state(1, 0, 0).unwrap();
    assert!(matches!(
        beamformer.beamform(&input, &w, &d, Some(&mut foreign), &mut output, &mut saturated),
        Err(Error::InvalidConfig(_))
    ));
    // Nothing above launched: the state is untouched, and a good call still works.
    assert!(state.states().unwrap() == reference_states(1, 0, 0, state.count() as usize).unwrap());
    let before: Vec<Xorwow> = state.states().unwrap();
    beamformer.beamform(&input, &w, &d, Some(&mut state), &mut output, &mut saturated).unwrap();
    assert!(state.states().unwrap() != before);
}

/// Output bytes poisoned with [`POISON`] and counts never reset: nothing was launched.
fn assert_untouched(output: &DeviceBuffer<[i8; 2]>, saturated: &DeviceBuffer<u32>) {
    assert!(output.download().unwrap().iter().all(|&x| x == [POISON as i8; 2]), "the output was written");
    let poison = u32::from_ne_bytes([POISON; 4]);
    assert!(saturated.download().unwrap().iter().all(|&n| n == poison), "the counts were reset");
}

/// NaN, infinities and f32 overflow in the kernel's steering (beam scale `|Re w| + |Im w|`,
/// phase `c d` at the last channel) are refused with `NonFinite` naming the argument and the
/// first bad index, by `beamform`, `upload_steering` and the reference alike, before any
/// launch; good steering then gives the same output through both launch paths.
#[test]
#[ignore = "needs a CUDA GPU"]
fn non_finite_steering_is_rejected_before_launch() {
    let gpu = gpu();
    let mut rng = rng();
    let config = DelayBeamformerConfig {
        antennas: 5,
        pols: 2,
        channels: 3,
        first_channel: 1000,
        times: 64,
        beams: vec![Beam { pol: 0, dither: true }, Beam { pol: 1, dither: false }],
    };
    let beamformer = beamformer_of(&gpu, &config);
    let plan = beamformer.plan().clone();
    let (w, d) = random_steering(&config, &mut rng);
    let host_input = random_input(config.input_len(), &mut rng);
    let input = gpu.upload(&host_input).unwrap();
    let mut state = beamformer.dither_state(5, 0, 0).unwrap();
    let start = state.states().unwrap();
    let mut output = gpu.alloc::<[i8; 2]>(config.output_len(), POISON).unwrap();
    let mut saturated = gpu.alloc::<u32>(2, POISON).unwrap();
    let last = (config.first_channel + config.channels - 1) as f32;
    const WEIGHTS: &str = "delay beamformer weights";
    const DELAYS: &str = "delay beamformer delays";
    // (weights, delays, the argument named, the index named)
    type Case = (Vec<[f32; 2]>, Vec<f32>, &'static str, usize);
    let mut cases: Vec<Case> = Vec::new();
    for (index, bad) in [(7, [f32::NAN, 0.0]), (3, [0.0, f32::INFINITY]), (9, [f32::NEG_INFINITY, 1.0])] {
        let mut w = w.clone();
        w[index] = bad;
        cases.push((w, d.clone(), WEIGHTS, index));
    }
    let mut huge = w.clone();
    huge[4] = [3e38, -3e38]; // each finite, the beam scale is not
    cases.push((
        huge,
        d.clone(),
        "|Re w| + |Im w| (the kernel's beam scale, f32) of delay beamformer weights",
        4,
    ));
    for (index, bad) in [(2, f32::NAN), (8, f32::INFINITY), (5, 1.5 * f32::MAX / last)] {
        let mut d = d.clone();
        d[index] = bad;
        let what = if bad.is_finite() {
            "last channel x delay (the kernel's phase, f32) of delay beamformer delays"
        } else {
            DELAYS
        };
        cases.push((w.clone(), d, what, index));
    }
    let non_finite = |r: Result<(), Error>, what: &str, index: usize| match r {
        Err(Error::NonFinite { what: got, index: i }) => assert_eq!((got, i), (what, index)),
        other => panic!("{what}[{index}]: {other:?}"),
    };
    for (bad_w, bad_d, what, index) in &cases {
        let (dw, dd) = (gpu.upload(bad_w).unwrap(), gpu.upload(bad_d).unwrap());
        non_finite(
            beamformer.beamform(&input, &dw, &dd, Some(&mut state), &mut output, &mut saturated),
            what,
            *index,
        );
        non_finite(beamformer.upload_steering(bad_w, bad_d).map(|_| ()), what, *index);
        let mut states = start.clone();
        let reference = beamform_reference(&config, &plan, &host_input, bad_w, bad_d, Some(&mut states));
        non_finite(reference.map(|_| ()), what, *index);
    }
    assert_untouched(&output, &saturated);
    assert!(state.states().unwrap() == start, "a refused launch advanced the dither states");

    // Steering checked for another configuration is refused by beamform_steered.
    let other = beamformer_of(&gpu, &DelayBeamformerConfig { antennas: 6, ..config.clone() });
    let (ow, od) = random_steering(other.config(), &mut rng);
    let foreign = other.upload_steering(&ow, &od).unwrap();
    let r = beamformer.beamform_steered(&input, &foreign, Some(&mut state), &mut output, &mut saturated);
    assert!(matches!(r, Err(Error::InvalidConfig(_))), "{r:?}");
    assert_untouched(&output, &saturated);

    // Good steering: both paths, two identical dither states, one output.
    let mut twin = beamformer.dither_state(5, 0, 0).unwrap();
    let steering = beamformer.upload_steering(&w, &d).unwrap();
    let (dw, dd) = (gpu.upload(&w).unwrap(), gpu.upload(&d).unwrap());
    let (got, counts) = launch(&gpu, &beamformer, &input, &dw, &dd, Some(&mut state));
    let mut output2 = gpu.alloc::<[i8; 2]>(config.output_len(), POISON).unwrap();
    let mut saturated2 = gpu.alloc::<u32>(2, POISON).unwrap();
    beamformer.beamform_steered(&input, &steering, Some(&mut twin), &mut output2, &mut saturated2).unwrap();
    assert_eq!(output2.download().unwrap(), got);
    assert_eq!(saturated2.download().unwrap(), counts);
    let mut states = start.clone();
    let reference = beamform_reference(&config, &plan, &host_input, &w, &d, Some(&mut states)).unwrap();
    assert_matches(&config, &reference, &got, Some(&counts));
    assert!(state.states().unwrap() == states && twin.states().unwrap() == states);
}

/// Buffers, dither states and steering of another GPU are refused with `WrongDevice` before
/// any launch, even from an identically configured beamformer (needs two GPUs).
#[test]
#[ignore = "needs a CUDA GPU"]
fn buffers_and_dither_states_of_another_gpu_are_rejected() {
    let Some(gpu1) = second_gpu() else { return };
    let gpu0 = gpu();
    let mut rng = rng();
    let config = DelayBeamformerConfig {
        antennas: 4,
        pols: 2,
        channels: 2,
        first_channel: 0,
        times: 64,
        beams: vec![Beam { pol: 0, dither: true }, Beam { pol: 1, dither: false }],
    };
    let (here, there) = (beamformer_of(&gpu0, &config), beamformer_of(&gpu1, &config));
    let host_input = random_input(config.input_len(), &mut rng);
    let (w, d) = random_steering(&config, &mut rng);
    let on = |gpu: &Gpu| {
        (
            gpu.upload(&host_input).unwrap(),
            gpu.upload(&w).unwrap(),
            gpu.upload(&d).unwrap(),
            gpu.alloc::<[i8; 2]>(config.output_len(), POISON).unwrap(),
            gpu.alloc::<u32>(2, POISON).unwrap(),
        )
    };
    let (input, dw, dd, mut output, mut saturated) = on(&gpu0);
    let (f_input, f_w, f_d, mut f_output, mut f_saturated) = on(&gpu1);
    let mut state = here.dither_state(3, 0, 0).unwrap();
    let mut foreign_state = there.dither_state(3, 0, 0).unwrap();
    assert!(state.belongs_to(&gpu0) && !state.belongs_to(&gpu1) && foreign_state.belongs_to(&gpu1));
    let (start, foreign_start) = (state.states().unwrap(), foreign_state.states().unwrap());
    let wrong = |r: Result<(), Error>, what: &str| match r {
        Err(Error::WrongDevice { what: got }) => assert_eq!(got, what),
        other => panic!("{what}: {other:?}"),
    };
    let s = Some(&mut state);
    wrong(here.beamform(&f_input, &dw, &dd, s, &mut output, &mut saturated), "delay beamformer input");
    let s = Some(&mut state);
    wrong(here.beamform(&input, &f_w, &dd, s, &mut output, &mut saturated), "delay beamformer weights");
    let s = Some(&mut state);
    wrong(here.beamform(&input, &dw, &f_d, s, &mut output, &mut saturated), "delay beamformer delays");
    let s = Some(&mut state);
    wrong(here.beamform(&input, &dw, &dd, s, &mut f_output, &mut saturated), "delay beamformer output");
    let s = Some(&mut state);
    wrong(
        here.beamform(&input, &dw, &dd, s, &mut output, &mut f_saturated),
        "delay beamformer saturation counts",
    );
    let f = Some(&mut foreign_state);
    wrong(here.beamform(&input, &dw, &dd, f, &mut output, &mut saturated), "dither state");
    let foreign_steering = there.upload_steering(&w, &d).unwrap();
    let s = Some(&mut state);
    wrong(
        here.beamform_steered(&input, &foreign_steering, s, &mut output, &mut saturated),
        "delay beamformer weights",
    );
    wrong(state.draw(&gpu1, 1).map(|_| ()), "dither state");
    assert_untouched(&output, &saturated);
    assert_untouched(&f_output, &f_saturated);
    assert!(state.states().unwrap() == start);
    assert!(foreign_state.states().unwrap() == foreign_start);
    // Each on its own GPU works and agrees.
    let a = launch(&gpu0, &here, &input, &dw, &dd, Some(&mut state));
    let b = launch(&gpu1, &there, &f_input, &f_w, &f_d, Some(&mut foreign_state));
    if here.plan() == there.plan() {
        assert_eq!(a, b);
    }
}

/// Two handles opened on one ordinal share the device's primary context: each accepts the
/// other's buffers and dither states, and the results equal the reference.
#[test]
#[ignore = "needs a CUDA GPU"]
fn two_handles_on_one_gpu_accept_each_others_buffers_and_states() {
    let (gpu_a, gpu_b) = (gpu(), radio_kernels::open(0).unwrap());
    let mut rng = rng();
    let config = random_config(9, 2, 3, 520, 11, &mut rng);
    let config = DelayBeamformerConfig {
        beams: config
            .beams
            .iter()
            .enumerate()
            .map(|(b, beam)| Beam { dither: b % 2 == 0, ..*beam })
            .collect(),
        ..config
    };
    let (a, b) = (beamformer_of(&gpu_a, &config), beamformer_of(&gpu_b, &config));
    assert_eq!(a.plan(), b.plan());
    let host_input = random_input(config.input_len(), &mut rng);
    let (w, d) = random_steering(&config, &mut rng);
    let input = gpu_b.upload(&host_input).unwrap();
    let (dw, dd) = (gpu_b.upload(&w).unwrap(), gpu_b.upload(&d).unwrap());
    let mut state = b.dither_state(11, 7, 0).unwrap();
    assert!(state.belongs_to(&gpu_a) && gpu_a.owns(&input));
    let mut output = gpu_b.alloc::<[i8; 2]>(config.output_len(), POISON).unwrap();
    let mut saturated = gpu_b.alloc::<u32>(config.beams.len(), POISON).unwrap();
    a.beamform(&input, &dw, &dd, Some(&mut state), &mut output, &mut saturated).unwrap();
    let steering = b.upload_steering(&w, &d).unwrap();
    let mut output2 = gpu_a.alloc::<[i8; 2]>(config.output_len(), POISON).unwrap();
    let mut saturated2 = gpu_a.alloc::<u32>(config.beams.len(), POISON).unwrap();
    let mut state2 = a.dither_state(11, 7, 0).unwrap();
    a.beamform_steered(&input, &steering, Some(&mut state2), &mut output2, &mut saturated2).unwrap();
    let (got, counts) = (output.download().unwrap(), saturated.download().unwrap());
    assert_eq!(output2.download().unwrap(), got);
    assert_eq!(saturated2.download().unwrap(), counts);
    let mut states = reference_states(11, 7, 0, a.plan().state_count() as usize).unwrap();
    let reference = beamform_reference(&config, a.plan(), &host_input, &w, &d, Some(&mut states)).unwrap();
    assert_matches(&config, &reference, &got, Some(&counts));
    assert!(state.states().unwrap() == states);
    state.draw(&gpu_a, 1).unwrap();
}

/// Any valid small configuration (antennas, polarisations, channels, first channel up to
/// the 2^24 limit, times, beams of random polarisations, dither none/all/random) with random
/// input (one sample in sixteen a -128 component), all -128, or half -128, and random or
/// extreme steering: the GPU within the existing tests' criteria of the CPU reference
/// (exact away from rounding boundaries, one LSB near them, saturation counts between the
/// definite and the possible), and the dither states bit for bit.
#[test]
#[ignore = "needs a CUDA GPU"]
fn property_valid_configurations_match_the_reference() {
    use proptest::prelude::*;
    use rand::SeedableRng;
    let gpu = gpu();
    let first = prop_oneof![Just(0u32), 0u32..30000, Just((1 << 24) - 4)];
    // (antennas, pols, channels, first channel, times / 8, beams, dither mode, fill, steering, seed)
    let strategy =
        (1u32..=40, 1u32..=2, 1u32..=4, first, 1u32..=80, 1u32..=20, 0u32..3, 0u32..3, 0u32..2, any::<u64>());
    gpu_proptest(
        16,
        strategy,
        |(antennas, pols, channels, first_channel, t8, beams, dither, fill, steer, seed)| {
            let mut rng = StdRng::seed_from_u64(seed);
            let config = DelayBeamformerConfig {
                antennas,
                pols,
                channels,
                first_channel,
                times: 8 * t8,
                beams: (0..beams)
                    .map(|_| Beam {
                        pol: rng.random_range(0..pols),
                        dither: match dither {
                            0 => false,
                            1 => true,
                            _ => rng.random(),
                        },
                    })
                    .collect(),
            };
            prop_assert!(config.validate().is_ok());
            let beamformer = DelayBeamformer::new(&gpu, config.clone()).unwrap();
            let plan = beamformer.plan().clone();
            let input: Vec<[i8; 2]> = match fill {
                0 => random_input(config.input_len(), &mut rng),
                1 => vec![[-128, -128]; config.input_len()],
                _ => (0..config.input_len())
                    .map(|_| [0, 1].map(|_| if rng.random() { -128 } else { rng.random() }))
                    .collect(),
            };
            let (mut w, mut d) = random_steering(&config, &mut rng);
            if steer == 1 {
                // Extremes the checks accept: weights near the f32 limit for one beam (its
                // outputs saturate, as +-inf after the kernel's scaling), zero weights, and
                // delays with large phases.
                let b0 = rng.random_range(0..beams as usize);
                for a in 0..antennas as usize {
                    let k = a * beams as usize + b0;
                    w[k] = [1e38 * rng.random_range(-1.0f32..1.0), 1e38 * rng.random_range(-1.0f32..1.0)];
                    let k2 = a * beams as usize + rng.random_range(0..beams as usize);
                    if k2 != k {
                        w[k2] = [0.0, 0.0];
                    }
                    d[k] = rng.random_range(-1e6f32..1e6);
                }
            }
            let (dw, dd) = (gpu.upload(&w).unwrap(), gpu.upload(&d).unwrap());
            let seed = rng.random();
            let mut state =
                beamformer.dither_state(seed, engine_subsequence(rng.random_range(0..8)), 0).unwrap();
            let mut states =
                reference_states(seed, state.first_subsequence, 0, plan.state_count() as usize).unwrap();
            let device_input = gpu.upload(&input).unwrap();
            let (got, saturated) = launch(&gpu, &beamformer, &device_input, &dw, &dd, Some(&mut state));
            let reference = beamform_reference(&config, &plan, &input, &w, &d, Some(&mut states)).unwrap();
            let summary = assert_matches(&config, &reference, &got, Some(&saturated));
            if config.dithered() {
                prop_assert!(state.states().unwrap() == states, "dither states diverged");
            }
            println!("A={antennas} P={pols} C={channels}+{first_channel} T={} B={beams} fill {fill} steer {steer}: {summary:?}", config.times);
            Ok(())
        },
    );
}

/// Input and output offsets past 2^32 bytes: 2 antennas x 2 polarisations x 2^30 + 2^19
/// times (8.6 GB of input, antenna 1 wholly past 2^32 bytes, antenna 0 crossing it) into two
/// beams (4.3 GB of output, beam 1 crossing 2^32 bytes). Random input in three windows of
/// times (across the output boundary, across the input boundary, the last times), zero
/// elsewhere: the windows equal the CPU reference computed for them alone, and every other
/// output is exactly zero (the poison is gone).
#[test]
#[ignore = "needs a CUDA GPU"]
fn offsets_past_4_gib_of_input_and_output_are_exact() {
    let _one_at_a_time = large_memory_guard();
    let gpu = gpu();
    let times = (1u32 << 30) + (1 << 19);
    let config = DelayBeamformerConfig {
        antennas: 2,
        pols: 2,
        channels: 1,
        first_channel: 77,
        times,
        beams: vec![Beam { pol: 0, dither: false }, Beam { pol: 1, dither: false }],
    };
    let (input_bytes, output_bytes) = (2 * config.input_len() as u64, 2 * config.output_len() as u64);
    assert!(input_bytes > 1 << 32 && output_bytes > 1 << 32);
    if !enough_memory(&gpu, input_bytes + output_bytes) {
        return;
    }
    let mut rng = rng();
    const W: u32 = 4096;
    // Beam 1's outputs cross byte 2^32 at time 2^31 - times; antenna 0's input at 2^30.
    let windows = [(1u32 << 31) - times - W / 2, (1 << 30) - W / 2, times - W];
    assert!(windows.iter().all(|&t0| t0 + W <= times));
    assert!((2 * config.output_index(1, 0, windows[0]) as u64) < 1 << 32);
    assert!((2 * config.output_index(1, 0, windows[0] + W - 1) as u64) >= 1 << 32);
    assert!((2 * config.input_index(0, 0, windows[1], 0) as u64) < 1 << 32);
    assert!((2 * config.input_index(0, 0, windows[1] + W - 1, 1) as u64) >= 1 << 32);
    let mut input = vec![[0i8; 2]; config.input_len()];
    let sub = DelayBeamformerConfig { times: 3 * W, ..config.clone() };
    let mut sub_input = vec![[0i8; 2]; sub.input_len()];
    for (n, &t0) in windows.iter().enumerate() {
        for a in 0..2 {
            for t in 0..W {
                for p in 0..2 {
                    let x =
                        [rng.random::<i8>(), if rng.random_range(0..16) == 0 { -128 } else { rng.random() }];
                    input[config.input_index(a, 0, t0 + t, p)] = x;
                    sub_input[sub.input_index(a, 0, n as u32 * W + t, p)] = x;
                }
            }
        }
    }
    let beamformer = beamformer_of(&gpu, &config);
    let (w, d) = random_steering(&config, &mut rng);
    let device_input = gpu.upload(&input).unwrap();
    drop(input);
    let (got, saturated) =
        launch(&gpu, &beamformer, &device_input, &gpu.upload(&w).unwrap(), &gpu.upload(&d).unwrap(), None);
    drop(device_input);
    let mut got_sub = vec![[0i8; 2]; sub.output_len()];
    for b in 0..2 {
        for (n, &t0) in windows.iter().enumerate() {
            for t in 0..W {
                got_sub[sub.output_index(b, 0, n as u32 * W + t)] = got[config.output_index(b, 0, t0 + t)];
            }
        }
    }
    let plan = Plan::new(&sub, 1).unwrap();
    let reference = beamform_reference(&sub, &plan, &sub_input, &w, &d, None).unwrap();
    // The zero input elsewhere saturates nothing: the launch's counts are the windows'.
    let summary = assert_matches(&sub, &reference, &got_sub, Some(&saturated));
    // Everything outside the windows is zero, read 16 bytes at a time.
    let mut outside = 0usize;
    for b in 0..2u32 {
        let mut from = config.output_index(b, 0, 0);
        let mut ranges = Vec::new();
        for &t0 in &windows {
            ranges.push(from..config.output_index(b, 0, t0));
            from = config.output_index(b, 0, t0 + W);
        }
        ranges.push(from..config.output_index(b, 0, times - 1) + 1);
        for range in ranges {
            let bytes: &[u8] = bytemuck::cast_slice(&got[range]);
            // SAFETY: every bit pattern is a valid u128.
            let (head, middle, tail) = unsafe { bytes.align_to::<u128>() };
            assert!(head.iter().chain(tail).all(|&x| x == 0));
            assert!(middle.iter().all(|&x| x == 0), "a nonzero output outside the windows (beam {b})");
            outside += bytes.len() / 2;
        }
    }
    assert_eq!(outside + 2 * 3 * W as usize, config.output_len());
    println!("{} outputs past 2^32 bytes checked: {summary:?}; {outside} zero outputs elsewhere", 2 * 3 * W);
}

/// Dither states past 2^32 bytes: 65535 channels x 22 beam batches x 128 threads = 184.5 M
/// states (4.4 GB); the last channels' states start past byte 2^32. Their outputs equal the
/// reference replaying `curand_init` states of the same subsequences, and their states
/// after the launch equal the reference's bit for bit.
#[test]
#[ignore = "needs a CUDA GPU"]
fn dither_states_past_4_gib_follow_their_subsequences() {
    let _one_at_a_time = large_memory_guard();
    let gpu = gpu();
    let config = DelayBeamformerConfig {
        antennas: 3,
        pols: 1,
        channels: 65535,
        first_channel: 0,
        times: 8,
        beams: (0..176).map(|_| Beam { pol: 0, dither: true }).collect(),
    };
    let beamformer = beamformer_of(&gpu, &config);
    let plan = beamformer.plan().clone();
    assert_eq!((plan.batches(), plan.groups(), plan.tiles_per_group()), (22, 1, 1));
    let state_bytes = plan.state_count() * 24;
    assert!(state_bytes > 1 << 32);
    if !enough_memory(&gpu, state_bytes + 2 * config.output_len() as u64) {
        return;
    }
    let mut rng = rng();
    let input = random_input(config.input_len(), &mut rng);
    let (w, d) = random_steering(&config, &mut rng);
    let seed = rng.random();
    let first_subsequence = engine_subsequence(3);
    let mut state = beamformer.dither_state(seed, first_subsequence, 0).unwrap();
    // Poisoned with -128, which the quantiser never produces: every output must be written.
    let mut output = gpu.alloc::<[i8; 2]>(config.output_len(), 0x80).unwrap();
    let mut saturated = gpu.alloc::<u32>(176, POISON).unwrap();
    let (dw, dd) = (gpu.upload(&w).unwrap(), gpu.upload(&d).unwrap());
    let device_input = gpu.upload(&input).unwrap();
    beamformer.beamform(&device_input, &dw, &dd, Some(&mut state), &mut output, &mut saturated).unwrap();
    let got = output.download().unwrap();
    assert!(got.iter().all(|x| !x.contains(&-128)), "an output was not written");
    // The last 8 channels: sub-launch with the same plan shape, states offset by channel.
    let (skip, k) = (65527u32, 8u32);
    let per_channel = 22 * THREADS as u64;
    assert!(skip as u64 * per_channel * 24 > 1 << 32, "the checked states lie past byte 2^32");
    let sub = DelayBeamformerConfig { channels: k, first_channel: skip, ..config.clone() };
    let sub_plan = Plan::new(&sub, 1).unwrap();
    assert_eq!((sub_plan.batches(), sub_plan.groups()), (22, 1));
    let mut sub_input = vec![[0i8; 2]; sub.input_len()];
    for a in 0..3 {
        for c in 0..k {
            for t in 0..8 {
                sub_input[sub.input_index(a, c, t, 0)] = input[config.input_index(a, skip + c, t, 0)];
            }
        }
    }
    let mut states = reference_states(
        seed,
        first_subsequence + skip as u64 * per_channel,
        0,
        sub_plan.state_count() as usize,
    )
    .unwrap();
    let reference = beamform_reference(&sub, &sub_plan, &sub_input, &w, &d, Some(&mut states)).unwrap();
    let mut got_sub = vec![[0i8; 2]; sub.output_len()];
    for b in 0..176 {
        for c in 0..k {
            for t in 0..8 {
                got_sub[sub.output_index(b, c, t)] = got[config.output_index(b, skip + c, t)];
            }
        }
    }
    let summary = assert_matches(&sub, &reference, &got_sub, None);
    let after = state.states().unwrap();
    assert_eq!(after.len() as u64, plan.state_count());
    assert!(
        after[(skip as u64 * per_channel) as usize..] == states[..],
        "the states past 2^32 bytes diverged"
    );
    println!("{} states ({state_bytes} bytes); the last {k} channels: {summary:?}", plan.state_count());
}

// ---------------------------------------------------------------------------------------------
// Streams and the streaming engine

/// One chunk's outputs: (beams, saturation counts).
type Chunk = (Vec<[i8; 2]>, Vec<u32>);

/// As [`random_input`] (one sample in sixteen with a -128 component), generated in bulk from
/// a SplitMix64 stream seeded by `rng`: fast enough in unoptimised test builds for inputs of
/// many MB.
fn random_input_fast(len: usize, rng: &mut StdRng) -> Vec<[i8; 2]> {
    let mut state: u64 = rng.random();
    let mut x = Vec::with_capacity(len + 4);
    while x.len() < len {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let b = (z ^ (z >> 31)).to_le_bytes();
        x.extend_from_slice(&[[b[0] as i8, b[1] as i8], [b[2] as i8, b[3] as i8]]);
        x.extend_from_slice(&[[b[4] as i8, b[5] as i8], [b[6] as i8, b[7] as i8]]);
    }
    x.truncate(len);
    for group in (0..len).step_by(16) {
        let pick = x[group][0] as u8 as usize;
        let at = group + (pick & 15);
        if at < len {
            x[at][(pick >> 4) & 1] = -128;
        }
    }
    x
}

/// Consecutive one-shot `beamform_steered` calls on `chunks`, one dither state advancing
/// through them, into poisoned outputs; `steering(n)` is chunk n's steering.
fn one_shot_chunks<'s>(
    gpu: &Gpu,
    beamformer: &DelayBeamformer,
    steering: impl Fn(usize) -> &'s DeviceSteering,
    mut state: Option<&mut DitherState>,
    chunks: &[Vec<[i8; 2]>],
) -> Vec<Chunk> {
    let c = beamformer.config();
    let mut out = Vec::new();
    for (n, x) in chunks.iter().enumerate() {
        let mut y = gpu.alloc::<[i8; 2]>(c.output_len(), POISON).unwrap();
        let mut counts = gpu.alloc::<u32>(c.beams.len(), POISON).unwrap();
        let x = gpu.upload(x).unwrap();
        beamformer.beamform_steered(&x, steering(n), state.as_deref_mut(), &mut y, &mut counts).unwrap();
        out.push((y.download().unwrap(), counts.download().unwrap()));
    }
    out
}

/// Streams `chunks` through the pinned input slots of an engine of `depth` slots (beams
/// poisoned), taking outputs when the ring is full and, at random, earlier.
fn stream_chunks(
    beamformer: &DelayBeamformer,
    steering: &DeviceSteering,
    state: Option<&mut DitherState>,
    depth: usize,
    chunks: &[Vec<[i8; 2]>],
    rng: &mut StdRng,
) -> Vec<Chunk> {
    let mut engine = beamformer.streaming(steering, state, depth).unwrap();
    engine.poison_outputs(Some(POISON));
    let mut got = Vec::new();
    for x in chunks {
        while engine.pending() == depth || (engine.pending() > 0 && rng.random_bool(0.3)) {
            let o = engine.output().unwrap().unwrap();
            got.push((o.beams.to_vec(), o.saturated.to_vec()));
        }
        engine.input().unwrap().copy_from_slice(x);
        engine.submit().unwrap();
    }
    while let Some(o) = engine.output().unwrap() {
        got.push((o.beams.to_vec(), o.saturated.to_vec()));
    }
    assert_eq!(engine.submitted(), chunks.len() as u64);
    got
}

/// The chunks' x as one launch over all their times: `x[a][c][n T + t][p]` from chunk n.
fn concatenate_in_time(
    c: &DelayBeamformerConfig,
    chunks: &[Vec<[i8; 2]>],
) -> (DelayBeamformerConfig, Vec<[i8; 2]>) {
    let long = DelayBeamformerConfig { times: c.times * chunks.len() as u32, ..c.clone() };
    let row = (c.times * c.pols) as usize;
    let mut x = vec![[0i8; 2]; long.input_len()];
    for (n, chunk) in chunks.iter().enumerate() {
        for a in 0..c.antennas {
            for ch in 0..c.channels {
                let from = c.input_index(a, ch, 0, 0);
                let to = long.input_index(a, ch, n as u32 * c.times, 0);
                x[to..to + row].copy_from_slice(&chunk[from..from + row]);
            }
        }
    }
    (long, x)
}

fn assert_chunks_equal(c: &DelayBeamformerConfig, got: &[Chunk], expected: &[Chunk], what: &str) {
    assert_eq!(got.len(), expected.len(), "{what}");
    for (n, (g, e)) in got.iter().zip(expected).enumerate() {
        if let Some(o) = (0..g.0.len()).find(|&o| g.0[o] != e.0[o]) {
            let per_beam = (c.channels * c.times) as usize;
            panic!(
                "{what}: chunk {n}: {} of {} outputs differ; first y[beam {}][channel {}][time {}] = {:?}, expected {:?}",
                (0..g.0.len()).filter(|&o| g.0[o] != e.0[o]).count(),
                g.0.len(),
                o / per_beam,
                o % per_beam / c.times as usize,
                o % c.times as usize,
                g.0[o],
                e.0[o]
            );
        }
        assert_eq!(g.1, e.1, "{what}: chunk {n}: saturation counts");
    }
}

/// The streaming engine equals, bit for bit, consecutive one-shot `beamform_steered` calls
/// over the same chunks, dither state included (random chunk lengths and counts, ring depths
/// and take schedules; one and two polarisations, several beam batches, more antennas than
/// one coefficient batch); afterwards the engine's dither state equals the one-shot calls'.
#[test]
#[ignore = "needs a CUDA GPU"]
fn streaming_equals_consecutive_one_shot_calls_and_carries_the_dither() {
    let gpu = gpu();
    let mut rng = rng();
    for (antennas, pols, channels, beams) in [(64, 2, 16, 8), (37, 1, 3, 19), (5, 2, 7, 45), (350, 2, 2, 9)] {
        let times = 8 * rng.random_range(1..=64);
        let mut c = random_config(antennas, pols, channels, times, beams, &mut rng);
        c.beams[0].dither = true;
        let k = rng.random_range(3..=7usize);
        let chunks: Vec<Vec<[i8; 2]>> = (0..k).map(|_| random_input_fast(c.input_len(), &mut rng)).collect();
        let beamformer = DelayBeamformer::new(&gpu, c.clone()).unwrap();
        let (w, d) = random_steering(&c, &mut rng);
        let steering = beamformer.upload_steering(&w, &d).unwrap();
        let (seed, first) = (rng.random(), engine_subsequence(rng.random_range(0..64)));
        let mut one_shot_state = beamformer.dither_state(seed, first, 0).unwrap();
        let mut streamed_state = beamformer.dither_state(seed, first, 0).unwrap();
        let start = streamed_state.states().unwrap();
        let expected = one_shot_chunks(&gpu, &beamformer, |_| &steering, Some(&mut one_shot_state), &chunks);
        let depth = rng.random_range(1..=4);
        let got = stream_chunks(&beamformer, &steering, Some(&mut streamed_state), depth, &chunks, &mut rng);
        let what =
            format!("A={antennas} P={pols} C={channels} T={times} B={beams}, {k} chunks, depth {depth}");
        println!("{what}");
        assert_chunks_equal(&c, &got, &expected, &what);
        let states = one_shot_state.states().unwrap();
        assert!(streamed_state.states().unwrap() == states, "{what}: dither states differ");
        assert!(states != start, "{what}: the dither states did not advance");
    }
}

/// Streamed chunks against one launch over all their times (x concatenated along time, the
/// beams re-sliced): the beam sums carry no state, so undithered beams and their saturation
/// counts (summed over the chunks) are equal bit for bit. The dither is a function of each
/// thread's generator state, not of absolute time: the long launch has other states, and its
/// dithered beams differ from the chunks' by at most one LSB, and somewhere.
#[test]
#[ignore = "needs a CUDA GPU"]
fn undithered_beams_of_streamed_chunks_equal_one_long_launch() {
    let gpu = gpu();
    let mut rng = rng();
    for (antennas, pols, channels, beams) in [(64, 2, 8, 8), (19, 1, 5, 21), (9, 2, 3, 40)] {
        let times = 8 * rng.random_range(1..=64);
        let mut c = random_config(antennas, pols, channels, times, beams, &mut rng);
        c.beams[0].dither = true;
        c.beams[1].dither = false;
        let k = rng.random_range(2..=6usize);
        let chunks: Vec<Vec<[i8; 2]>> = (0..k).map(|_| random_input_fast(c.input_len(), &mut rng)).collect();
        let (long, long_x) = concatenate_in_time(&c, &chunks);
        let beamformer = DelayBeamformer::new(&gpu, c.clone()).unwrap();
        let long_beamformer = DelayBeamformer::new(&gpu, long.clone()).unwrap();
        let (w, d) = random_steering(&c, &mut rng);
        let steering = beamformer.upload_steering(&w, &d).unwrap();
        let seed = rng.random();
        let mut state = beamformer.dither_state(seed, 0, 0).unwrap();
        let got = stream_chunks(&beamformer, &steering, Some(&mut state), 3, &chunks, &mut rng);
        let long_steering = long_beamformer.upload_steering(&w, &d).unwrap();
        let mut long_state = long_beamformer.dither_state(seed, 0, 0).unwrap();
        let (long_y, long_counts) =
            one_shot_chunks(&gpu, &long_beamformer, |_| &long_steering, Some(&mut long_state), &[long_x])
                .pop()
                .unwrap();
        let (mut dithered, mut differing) = (0usize, 0usize);
        for (b, beam) in c.beams.iter().enumerate() {
            let b32 = b as u32;
            for (n, (y, _)) in got.iter().enumerate() {
                for ch in 0..c.channels {
                    for t in 0..c.times {
                        let g = y[c.output_index(b32, ch, t)];
                        let l = long_y[long.output_index(b32, ch, n as u32 * c.times + t)];
                        if beam.dither {
                            for i in 0..2 {
                                let diff = (g[i] as i32 - l[i] as i32).abs();
                                assert!(
                                    diff <= 1,
                                    "beam {b} chunk {n} channel {ch} time {t}: {g:?} vs {l:?}"
                                );
                                dithered += 1;
                                differing += (diff != 0) as usize;
                            }
                        } else {
                            assert_eq!(g, l, "undithered beam {b}, chunk {n}, channel {ch}, time {t}");
                        }
                    }
                }
            }
            if !beam.dither {
                let total: u32 = got.iter().map(|(_, counts)| counts[b]).sum();
                assert_eq!(total, long_counts[b], "saturation count of undithered beam {b}");
            }
        }
        println!(
            "A={antennas} P={pols} C={channels} T={times} B={beams}, {k} chunks: {differing} of {dithered} \
             dithered components differ from the long launch"
        );
        assert!(dithered < 1000 || differing > 0, "the dither looked like a function of absolute time");
    }
}

/// A full output ring refuses a submit (`Backlog`) and changes nothing (pending outputs, the
/// chunk count, the dither state: the stream goes on with the same bytes once an output is
/// taken). Chunks come from registered memory at a skewed offset; the steering changes
/// between chunks through pinned memory (`set_steering`) and from the device
/// (`set_device_steering`), and the chunks before each change keep the old steering; refused
/// calls (an offset past the memory, NaN delays, a short weight array, steering of another
/// shape) change nothing.
#[test]
#[ignore = "needs a CUDA GPU"]
fn streaming_back_pressure_registered_memory_and_steering_changes() {
    let gpu = gpu();
    let mut rng = rng();
    let mut c = random_config(16, 2, 5, 8 * rng.random_range(4..=64), 12, &mut rng);
    c.beams[0].dither = true;
    let beamformer = DelayBeamformer::new(&gpu, c.clone()).unwrap();
    let k = 8usize;
    let len = c.input_len();
    let chunks: Vec<Vec<[i8; 2]>> = (0..k).map(|_| random_input_fast(len, &mut rng)).collect();
    let skew = rng.random_range(1..50usize);
    let mut host = vec![[0i8; 2]; skew + k * len];
    for (n, x) in chunks.iter().enumerate() {
        host[skew + n * len..][..len].copy_from_slice(x);
    }
    let (w1, d1) = random_steering(&c, &mut rng);
    let (w2, d2) = random_steering(&c, &mut rng);
    let (w3, d3) = random_steering(&c, &mut rng);
    let steerings = [
        beamformer.upload_steering(&w1, &d1).unwrap(),
        beamformer.upload_steering(&w2, &d2).unwrap(),
        beamformer.upload_steering(&w3, &d3).unwrap(),
    ];
    let (second, third) = (rng.random_range(1..4), rng.random_range(4..k));
    let which = |n: usize| {
        if n < second {
            0
        } else if n < third {
            1
        } else {
            2
        }
    };
    let seed = rng.random();
    let mut one_shot_state = beamformer.dither_state(seed, 77, 0).unwrap();
    let expected =
        one_shot_chunks(&gpu, &beamformer, |n| &steerings[which(n)], Some(&mut one_shot_state), &chunks);
    let other_shape = DelayBeamformerConfig { antennas: c.antennas + 1, ..c.clone() };
    let other = DelayBeamformer::new(&gpu, other_shape.clone()).unwrap();
    let (wo, d_o) = random_steering(&other_shape, &mut rng);
    let other_steering = other.upload_steering(&wo, &d_o).unwrap();

    let mut state = beamformer.dither_state(seed, 77, 0).unwrap();
    let depth = 2;
    let mut engine = beamformer.streaming(&steerings[0], Some(&mut state), depth).unwrap();
    engine.poison_outputs(Some(POISON));
    let registered = gpu.register_host(&mut host).unwrap();
    let mut got = Vec::new();
    let mut refused = 0;
    for n in 0..k {
        if n == second {
            let mut nan = d2.clone();
            let at = rng.random_range(0..nan.len());
            nan[at] = f32::NAN;
            assert!(matches!(engine.set_steering(&w2, &nan), Err(Error::NonFinite { .. })));
            assert!(matches!(engine.set_steering(&w2[1..], &d2), Err(Error::ShapeMismatch { .. })));
            engine.set_steering(&w2, &d2).unwrap();
        }
        if n == third {
            assert!(matches!(engine.set_device_steering(&other_steering), Err(Error::InvalidConfig(_))));
            engine.set_device_steering(&steerings[2]).unwrap();
        }
        if engine.pending() < depth {
            let before = (engine.pending(), engine.submitted());
            assert!(matches!(
                engine.submit_registered(&registered, skew + (k - 1) * len + 1),
                Err(Error::InvalidConfig(_))
            ));
            assert_eq!((engine.pending(), engine.submitted()), before);
        }
        match engine.submit_registered(&registered, skew + n * len) {
            Ok(()) => {}
            Err(Error::Backlog { slots, .. }) => {
                assert_eq!((slots, engine.pending(), engine.submitted()), (depth, depth, n as u64));
                refused += 1;
                let o = engine.output().unwrap().unwrap();
                got.push((o.beams.to_vec(), o.saturated.to_vec()));
                engine.submit_registered(&registered, skew + n * len).unwrap();
            }
            Err(e) => panic!("{e}"),
        }
    }
    while let Some(o) = engine.output().unwrap() {
        got.push((o.beams.to_vec(), o.saturated.to_vec()));
    }
    drop(engine);
    assert!(refused > 0, "the ring never filled");
    assert_chunks_equal(&c, &got, &expected, "registered memory with steering changes");
    assert!(state.states().unwrap() == one_shot_state.states().unwrap(), "dither states differ");
}

/// The engine's arguments: a dithered configuration needs a dither state of its own plan,
/// steering must fit its antennas, beams and last channel, and a ring needs a slot
/// (`InvalidConfig` each); an undithered configuration accepts a state and leaves it as it
/// is, like the one-shot call. The engine runs under `pump`.
#[test]
#[ignore = "needs a CUDA GPU"]
fn streaming_arguments_are_checked_and_the_engine_runs_under_pump() {
    use radio_kernels::streaming::{pump, Engine};
    let gpu = gpu();
    let mut rng = rng();
    let mut c = random_config(8, 2, 4, 1024, 10, &mut rng);
    c.first_channel = 1000;
    c.beams[0].dither = true;
    let beamformer = DelayBeamformer::new(&gpu, c.clone()).unwrap();
    let (w, d) = random_steering(&c, &mut rng);
    let steering = beamformer.upload_steering(&w, &d).unwrap();
    let mut state = beamformer.dither_state(5, 0, 0).unwrap();
    let invalid = |r: Result<radio_kernels::delay_beamformer::DelayStream, Error>, what: &str| match r {
        Err(Error::InvalidConfig(_)) => {}
        Err(other) => panic!("{what}: {other:?}"),
        Ok(_) => panic!("{what}: accepted"),
    };
    invalid(beamformer.streaming(&steering, None, 3), "no dither state");
    let fewer = DelayBeamformerConfig { channels: 3, ..c.clone() };
    let other = DelayBeamformer::new(&gpu, fewer.clone()).unwrap();
    let mut other_state = other.dither_state(5, 0, 0).unwrap();
    invalid(beamformer.streaming(&steering, Some(&mut other_state), 3), "another plan's state");
    // `fewer` ends at a lower channel than `c`: its steering was not checked up to c's last.
    let (wf, df) = random_steering(&fewer, &mut rng);
    invalid(
        beamformer.streaming(&other.upload_steering(&wf, &df).unwrap(), Some(&mut state), 3),
        "short steering",
    );
    let wider = DelayBeamformerConfig { antennas: 9, ..c.clone() };
    let (ww, dw) = random_steering(&wider, &mut rng);
    let wide = DelayBeamformer::new(&gpu, wider).unwrap().upload_steering(&ww, &dw).unwrap();
    invalid(beamformer.streaming(&wide, Some(&mut state), 3), "other antennas");
    invalid(beamformer.streaming(&steering, Some(&mut state), 0), "no slot");
    let start = state.states().unwrap();

    let mut engine = beamformer.streaming(&steering, Some(&mut state), 3).unwrap();
    let x = random_input_fast(c.input_len(), &mut rng);
    engine.input().unwrap().copy_from_slice(&x);
    let mut progress = 0;
    pump(&mut engine, 7, |n| progress = n).unwrap();
    assert_eq!((progress, Engine::pending(&engine), engine.free_outputs(), engine.submitted()), (7, 0, 3, 7));
    drop(engine);
    assert!(state.states().unwrap() != start, "pump did not advance the dither");

    // Undithered: a state is accepted and stays as it is.
    let plain = DelayBeamformerConfig {
        beams: c.beams.iter().map(|b| Beam { dither: false, ..*b }).collect(),
        ..c.clone()
    };
    let plain_beamformer = DelayBeamformer::new(&gpu, plain.clone()).unwrap();
    let plain_steering = plain_beamformer.upload_steering(&w, &d).unwrap();
    let mut plain_state = plain_beamformer.dither_state(5, 0, 0).unwrap();
    let plain_start = plain_state.states().unwrap();
    let chunks = vec![x.clone(), random_input_fast(c.input_len(), &mut rng)];
    let expected = one_shot_chunks(&gpu, &plain_beamformer, |_| &plain_steering, None, &chunks);
    let got = stream_chunks(&plain_beamformer, &plain_steering, Some(&mut plain_state), 2, &chunks, &mut rng);
    assert_chunks_equal(&plain, &got, &expected, "undithered with a state");
    assert!(plain_state.states().unwrap() == plain_start);
}

/// The launcher on a caller's stream: dither states, steering uploads, `beamform` (with its
/// steering download) and `beamform_steered` run there and give the default stream's bytes;
/// a stream of another GPU is refused (needs two GPUs for that part).
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_launcher_runs_on_a_callers_stream() {
    let gpu = gpu();
    let mut rng = rng();
    let mut c = random_config(24, 2, 6, 2048, 16, &mut rng);
    c.beams[0].dither = true;
    let x = random_input_fast(c.input_len(), &mut rng);
    let (w, d) = random_steering(&c, &mut rng);
    let run = |beamformer: &DelayBeamformer| -> (Chunk, Chunk, Vec<Xorwow>) {
        let mut state = beamformer.dither_state(99, 3, 0).unwrap();
        let steering = beamformer.upload_steering(&w, &d).unwrap();
        let first =
            one_shot_chunks(&gpu, beamformer, |_| &steering, Some(&mut state), std::slice::from_ref(&x))
                .pop()
                .unwrap();
        let input = gpu.upload(&x).unwrap();
        let (dw, dd) = (gpu.upload(&w).unwrap(), gpu.upload(&d).unwrap());
        let second = launch(&gpu, beamformer, &input, &dw, &dd, Some(&mut state));
        (first, second, state.states().unwrap())
    };
    let mut beamformer = DelayBeamformer::new(&gpu, c.clone()).unwrap();
    let on_default = run(&beamformer);
    let stream = gpu.new_stream().unwrap();
    beamformer.set_stream(&stream).unwrap();
    assert!(std::sync::Arc::ptr_eq(beamformer.stream(), &stream));
    let on_caller = run(&beamformer);
    assert_chunks_equal(
        &c,
        &[on_caller.0.clone(), on_caller.1.clone()],
        &[on_default.0, on_default.1],
        "caller's stream",
    );
    assert!(on_caller.2 == on_default.2, "dither states differ");
    if let Some(other) = second_gpu() {
        let foreign = other.new_stream().unwrap();
        assert!(matches!(beamformer.set_stream(&foreign), Err(Error::WrongDevice { .. })));
    }
}
