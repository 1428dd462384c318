//! GPU tests of the delay beamformer against the f64 CPU reference on fresh random inputs
//! (seed printed), with -128 forced in and saturation provoked: every output within one LSB,
//! and exact wherever the reference value is farther from a rounding boundary than the f32
//! error bound; the dither stream bit for bit (states, raw draws, dithered outputs); dither
//! statistics over 10^8 draws; unbiased output for a constant input; steering; input
//! validation; the launcher on a caller's stream; and the streaming engine, bit for bit
//! against consecutive one-shot calls (the dither state carried across chunks) and, in its
//! undithered beams, one long call, with back-pressure, registered memory and steering
//! changes between chunks. Outputs are poisoned before every launch.
#[path = "../common/mod.rs"]
mod common;
mod dither;
mod streaming;

use common::*;
use radio_kernels::delay_beamformer::{
    beamform_reference, curand_init, dither, engine_subsequence, reference_states, Beam, DelayBeamformer,
    DelayBeamformerConfig, DeviceSteering, DitherState, Plan, Reference, Xorwow, THREADS, VARIANTS,
};
use radio_kernels::{Complex, DeviceBuffer, Error, Gpu};
use rand::rngs::StdRng;
use rand::Rng;

const POISON: u8 = 0xA5;

/// The (real, imaginary) parts of a complex value, for loops over both components.
fn parts<T: Copy>(x: Complex<T>) -> [T; 2] {
    [x.re, x.im]
}

/// Random complex int8 with one sample in sixteen a -128 component.
fn random_input(len: usize, rng: &mut StdRng) -> Vec<Complex<i8>> {
    (0..len)
        .map(|_| {
            let mut x = [rng.random::<i8>(), rng.random::<i8>()];
            if rng.random_range(0..16) == 0 {
                x[rng.random_range(0..2)] = -128;
            }
            Complex::new(x[0], x[1])
        })
        .collect()
}

/// Random steering: weights of random phase whose beams have a standard deviation of about
/// 50 (so some samples saturate), delays in [-3, 3] half turns per channel.
fn random_steering(config: &DelayBeamformerConfig, rng: &mut StdRng) -> (Vec<Complex<f32>>, Vec<f32>) {
    let scale = 0.68 / (config.antennas as f32).sqrt();
    let w = (0..config.steering_len())
        .map(|_| {
            let (s, c) = rng.random_range(0.0f32..std::f32::consts::TAU).sin_cos();
            let amplitude = scale * rng.random_range(0.5f32..1.5);
            Complex::new(amplitude * c, amplitude * s)
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
    input: &DeviceBuffer<Complex<i8>>,
    w: &DeviceBuffer<Complex<f32>>,
    d: &DeviceBuffer<f32>,
    dither_state: Option<&mut radio_kernels::delay_beamformer::DitherState>,
) -> (Vec<Complex<i8>>, Vec<u32>) {
    let config = beamformer.config();
    let mut output = gpu.alloc::<Complex<i8>>(config.output_len(), POISON).unwrap();
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
    got: &[Complex<i8>],
    saturated: Option<&[u32]>,
) -> Summary {
    assert_eq!(got.len(), reference.output.len());
    let mut summary = Summary::default();
    let per_beam = (config.channels * config.times) as usize;
    let mut definite = vec![0u32; config.beams.len()];
    let mut possible = vec![0u32; config.beams.len()];
    for o in 0..got.len() {
        let (mut sure, mut maybe) = (false, false);
        for (k, v) in parts(reference.values[o]).into_iter().enumerate() {
            let tol = tolerance(config.antennas, reference.magnitude[o], v);
            let (q, r) = (parts(got[o])[k] as i32, parts(reference.output[o])[k] as i32);
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
    let mut input = vec![Complex::new(0i8, 0); config.input_len()];
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
                    Complex::new((x[0] + noise[0]).round() as i8, (x[1] + noise[1]).round() as i8);
                input[config.input_index(a, c, t, 1)] =
                    Complex::new(rng.random_range(-3..=3), rng.random_range(-3..=3));
            }
        }
    }
    let n = config.steering_len();
    let gain = 1.0 / antennas as f64;
    let delay: Vec<f64> = (0..n).map(|i| if i % 3 == 1 { elsewhere[i / 3] } else { source[i / 3] }).collect();
    let (w, d) = radio_kernels::delay_beamformer::steering(
        &config,
        &vec![Complex::new(1.0, 0.0); n],
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
        got[b * per..(b + 1) * per].iter().map(|x| (x.re as f64).powi(2) + (x.im as f64).powi(2)).sum::<f64>()
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
    let input = vec![Complex::new(-128i8, -128); config.input_len()];
    let w = vec![Complex::new(0.5f32, 0.0); config.steering_len()];
    let d = vec![0.0f32; config.steering_len()];
    let (got, saturated) = launch(
        &gpu,
        &beamformer,
        &gpu.upload(&input).unwrap(),
        &gpu.upload(&w).unwrap(),
        &gpu.upload(&d).unwrap(),
        None,
    );
    assert!(got.iter().all(|&x| x == Complex::new(-127, -127)));
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
    let input = gpu.alloc::<Complex<i8>>(good.input_len(), 0).unwrap();
    let short = gpu.alloc::<Complex<i8>>(good.input_len() - 1, 0).unwrap();
    let w = gpu.alloc::<Complex<f32>>(good.steering_len(), 0).unwrap();
    let d = gpu.alloc::<f32>(good.steering_len(), 0).unwrap();
    let d_short = gpu.alloc::<f32>(good.steering_len() - 1, 0).unwrap();
    let mut output = gpu.alloc::<Complex<i8>>(good.output_len(), 0).unwrap();
    let mut big = gpu.alloc::<Complex<i8>>(good.output_len() + 1, 0).unwrap();
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
fn assert_untouched(output: &DeviceBuffer<Complex<i8>>, saturated: &DeviceBuffer<u32>) {
    assert!(
        output.download().unwrap().iter().all(|&x| x == Complex::new(POISON as i8, POISON as i8)),
        "the output was written"
    );
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
    let mut output = gpu.alloc::<Complex<i8>>(config.output_len(), POISON).unwrap();
    let mut saturated = gpu.alloc::<u32>(2, POISON).unwrap();
    let last = (config.first_channel + config.channels - 1) as f32;
    const WEIGHTS: &str = "delay beamformer weights";
    const DELAYS: &str = "delay beamformer delays";
    // (weights, delays, the argument named, the index named)
    type Case = (Vec<Complex<f32>>, Vec<f32>, &'static str, usize);
    let mut cases: Vec<Case> = Vec::new();
    for (index, bad) in [
        (7, Complex::new(f32::NAN, 0.0)),
        (3, Complex::new(0.0, f32::INFINITY)),
        (9, Complex::new(f32::NEG_INFINITY, 1.0)),
    ] {
        let mut w = w.clone();
        w[index] = bad;
        cases.push((w, d.clone(), WEIGHTS, index));
    }
    let mut huge = w.clone();
    huge[4] = Complex::new(3e38, -3e38); // each finite, the beam scale is not
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
    let mut output2 = gpu.alloc::<Complex<i8>>(config.output_len(), POISON).unwrap();
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
            gpu.alloc::<Complex<i8>>(config.output_len(), POISON).unwrap(),
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
    let mut output = gpu_b.alloc::<Complex<i8>>(config.output_len(), POISON).unwrap();
    let mut saturated = gpu_b.alloc::<u32>(config.beams.len(), POISON).unwrap();
    a.beamform(&input, &dw, &dd, Some(&mut state), &mut output, &mut saturated).unwrap();
    let steering = b.upload_steering(&w, &d).unwrap();
    let mut output2 = gpu_a.alloc::<Complex<i8>>(config.output_len(), POISON).unwrap();
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
            let input: Vec<Complex<i8>> = match fill {
                0 => random_input(config.input_len(), &mut rng),
                1 => vec![Complex::new(-128, -128); config.input_len()],
                _ => (0..config.input_len())
                    .map(|_| {
                        let [re, im] = [0, 1].map(|_| if rng.random() { -128 } else { rng.random() });
                        Complex::new(re, im)
                    })
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
                    w[k] = Complex::new(
                        1e38 * rng.random_range(-1.0f32..1.0),
                        1e38 * rng.random_range(-1.0f32..1.0),
                    );
                    let k2 = a * beams as usize + rng.random_range(0..beams as usize);
                    if k2 != k {
                        w[k2] = Complex::new(0.0, 0.0);
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
    let mut input = vec![Complex::new(0i8, 0); config.input_len()];
    let sub = DelayBeamformerConfig { times: 3 * W, ..config.clone() };
    let mut sub_input = vec![Complex::new(0i8, 0); sub.input_len()];
    for (n, &t0) in windows.iter().enumerate() {
        for a in 0..2 {
            for t in 0..W {
                for p in 0..2 {
                    let x = Complex::new(
                        rng.random::<i8>(),
                        if rng.random_range(0..16) == 0 { -128 } else { rng.random() },
                    );
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
    let mut got_sub = vec![Complex::new(0i8, 0); sub.output_len()];
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
