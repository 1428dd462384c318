//! The dither states and streams on the GPU: curand bit for bit, statistics, unbiased output,
//! states past 4 GiB.
use super::*;

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
    let w = vec![Complex::new(0.5f32, 0.0); config.steering_len()];
    let d = vec![0.0f32; config.steering_len()];
    let (dw, dd) = (gpu.upload(&w).unwrap(), gpu.upload(&d).unwrap());
    let seed = rng.random();
    let mut state = beamformer.dither_state(seed, 12345, 0).unwrap();
    let mut states = reference_states(seed, 12345, 0, plan.state_count() as usize).unwrap();
    for _ in 0..2 {
        let input: Vec<Complex<i8>> = (0..config.input_len())
            .map(|_| Complex::new(rng.random_range(-63i8..63) * 2 + 1, rng.random_range(-63i8..63) * 2 + 1))
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
                let v = parts(reference.values[o])[k];
                if (v - v.floor() - 0.5).abs() < 2f64.powi(-17) {
                    near_zero += 1;
                } else {
                    assert_eq!(parts(*g)[k], parts(*r)[k], "output {o}.{k}: reference {v}");
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
    let input = vec![Complex::new(3i8, -5); config.input_len()];
    // Beam value per antenna pair: 2 * 0.185 * (3, -5) = (1.11, -1.85).
    let w = vec![Complex::new(0.185f32, 0.0); config.steering_len()];
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
        let mean = [0, 1].map(|k| samples.iter().map(|&x| parts(x)[k] as f64).sum::<f64>() / n as f64);
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
    let mut output = gpu.alloc::<Complex<i8>>(config.output_len(), 0x80).unwrap();
    let mut saturated = gpu.alloc::<u32>(176, POISON).unwrap();
    let (dw, dd) = (gpu.upload(&w).unwrap(), gpu.upload(&d).unwrap());
    let device_input = gpu.upload(&input).unwrap();
    beamformer.beamform(&device_input, &dw, &dd, Some(&mut state), &mut output, &mut saturated).unwrap();
    let got = output.download().unwrap();
    assert!(got.iter().all(|&x| !parts(x).contains(&-128)), "an output was not written");
    // The last 8 channels: sub-launch with the same plan shape, states offset by channel.
    let (skip, k) = (65527u32, 8u32);
    let per_channel = 22 * THREADS as u64;
    assert!(skip as u64 * per_channel * 24 > 1 << 32, "the checked states lie past byte 2^32");
    let sub = DelayBeamformerConfig { channels: k, first_channel: skip, ..config.clone() };
    let sub_plan = Plan::new(&sub, 1).unwrap();
    assert_eq!((sub_plan.batches(), sub_plan.groups()), (22, 1));
    let mut sub_input = vec![Complex::new(0i8, 0); sub.input_len()];
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
    let mut got_sub = vec![Complex::new(0i8, 0); sub.output_len()];
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
