//! GPU tests of the delay beamformer against the f64 CPU reference on fresh random inputs
//! (seed printed), with -128 forced in and saturation provoked: every output within one LSB,
//! and exact wherever the reference value is farther from a rounding boundary than the f32
//! error bound; the dither stream bit for bit (states, raw draws, dithered outputs); dither
//! statistics over 10^8 draws; unbiased output for a constant input; steering; input
//! validation. Outputs are poisoned before every launch.
mod common;

use common::*;
use radio_kernels::delay_beamformer::{
    beamform_reference, curand_init, dither, engine_subsequence, reference_states, Beam, DelayBeamformer,
    DelayBeamformerConfig, Reference, Xorwow, VARIANTS,
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
/// lies within the error bound of a rounding boundary; saturation counts between the
/// definite and the possible ones.
fn assert_matches(
    config: &DelayBeamformerConfig,
    reference: &Reference,
    got: &[[i8; 2]],
    saturated: &[u32],
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
    for b in 0..config.beams.len() {
        assert!(
            definite[b] <= saturated[b] && saturated[b] <= possible[b],
            "beam {b}: {} saturated, reference {}..={}",
            saturated[b],
            definite[b],
            possible[b]
        );
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
    let mut states = reference_states(seed, state.first_subsequence, 0, plan.state_count() as usize);
    let mut total = Summary::default();
    for _ in 0..2 {
        let input = random_input(config.input_len(), rng);
        let device_input = gpu.upload(&input).unwrap();
        let (got, saturated) = launch(gpu, &beamformer, &device_input, &dw, &dd, Some(&mut state));
        let reference = beamform_reference(&config, &plan, &input, &w, &d, Some(&mut states)).unwrap();
        let s = assert_matches(&config, &reference, &got, &saturated);
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
        (plan.variant.slots, plan.variant.times_per_thread),
        plan.batches,
        plan.groups,
        plan.tiles_per_group
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
        let config = random_config(37, v.pols, 3, 1000, 2 * v.slots + 3, &mut rng);
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
    let mut states = reference_states(seed, 12345, 0, plan.state_count() as usize);
    for _ in 0..2 {
        let input: Vec<[i8; 2]> = (0..config.input_len())
            .map(|_| [rng.random_range(-63i8..63) * 2 + 1, rng.random_range(-63i8..63) * 2 + 1])
            .collect();
        let (got, _) = launch(&gpu, &beamformer, &gpu.upload(&input).unwrap(), &dw, &dd, Some(&mut state));
        let reference = beamform_reference(&config, &plan, &input, &w, &d, Some(&mut states)).unwrap();
        let s = assert_matches(&config, &reference, &got, &vec![0; config.beams.len()]);
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
            got == reference_states(seed, first, offset, got.len()),
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
    let mut cpu = reference_states(seed, 0, 0, count);
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
    assert!(state.states().unwrap() == reference_states(1, 0, 0, state.count() as usize));
    let before: Vec<Xorwow> = state.states().unwrap();
    beamformer.beamform(&input, &w, &d, Some(&mut state), &mut output, &mut saturated).unwrap();
    assert!(state.states().unwrap() != before);
}
