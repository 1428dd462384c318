//! The two paths and every compiled kernel: the kernels through `Channelizer::with_kernel`, the
//! three-kernel path at sizes the fused kernel covers, the two paths against each other, and the
//! cluster kernel under delay steps.
use super::*;

/// Every compiled kernel through [`Channelizer::with_kernel`]: each FIR at its own tap count
/// and at fewer (zero weights in front), at n = 64 and 4096, with the post kernel of the
/// output format; each cluster kernel (sm_90 GPUs) at n = 1024 for its tap count, both output
/// formats; and the kernel overrides that do not fit a configuration are typed errors.
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_compiled_kernel_matches_the_reference() {
    let (gpu, mut rng) = (gpu(), rng());
    for (i, kernel) in PFB_KERNELS.iter().enumerate() {
        let (channels, spectra_per_heap) = match kernel.stage {
            PfbStage::Fir => ([64, 4096][i % 2], 16),
            PfbStage::Post => continue,
            PfbStage::Cluster if gpu.wgmma_enabled() => (1024, 8),
            PfbStage::Cluster => continue,
        };
        let int4 = kernel.int4;
        for taps in [kernel.taps, kernel.taps.div_ceil(2)] {
            let case = Case {
                channels,
                taps,
                bits: [4, 8, 10, 12][(taps as usize + i) % 4],
                spectra_per_heap,
                heaps_per_chunk: 2,
                output: if int4 { OutputFormat::Ci4 } else { OutputFormat::Ci8 },
                sigma: if int4 { 4.0 } else { 50.0 },
            };
            check_case_with(&gpu, &case, &mut rng, &kernel.spec);
        }
    }
    let config = ChannelizerConfig { taps: 16, ..ChannelizerConfig::new(1024) };
    let ci4 = ChannelizerConfig { output: OutputFormat::Ci4, ..config.clone() };
    let refused = |config: &ChannelizerConfig, kernel: &KernelSpec| {
        let got = Channelizer::with_kernel(&gpu, config.clone(), None, kernel);
        assert!(matches!(got, Err(Error::InvalidConfig(_))), "{} {config:?}", kernel.name);
    };
    refused(&config, &PfbKernel::fir(8).unwrap().spec);
    refused(&config, &PfbKernel::post(true).unwrap().spec);
    refused(&ci4, &PfbKernel::post(false).unwrap().spec);
    refused(&config, &PfbKernel::cluster(16, true).unwrap().spec);
    refused(
        &ChannelizerConfig { channels: 2048, ..config.clone() },
        &PfbKernel::cluster(16, false).unwrap().spec,
    );
    let other = radio_kernels::gpu_shared::modules::kernels().find(|k| !k.name.starts_with("pfb_")).unwrap();
    refused(&config, other);
    let post =
        Channelizer::with_kernel(&gpu, ci4.clone(), None, &PfbKernel::post(true).unwrap().spec).unwrap();
    assert_eq!(post.kernels(), [&PfbKernel::fir(16).unwrap().spec, &PfbKernel::post(true).unwrap().spec]);
}

/// The three-kernel path (named explicitly) at sizes the fused kernel also covers: every bit
/// width at n = 1024, n = 4096 with 16 and 32 taps, and FIR threads running many batches.
#[test]
#[ignore = "needs a CUDA GPU"]
fn three_kernel_path_matches_the_reference_below_4096_channels() {
    let (gpu, mut rng) = (gpu(), rng());
    for bits in [4, 8, 10, 12, 16] {
        let case = Case {
            channels: 1024,
            taps: 16,
            bits,
            spectra_per_heap: 16,
            heaps_per_chunk: 2,
            output: OutputFormat::Ci8,
            sigma: 60.0,
        };
        check_case_on(&gpu, &case, &mut rng, PfbPath::ThreeKernel);
    }
    for taps in [16, 32] {
        let case = Case {
            channels: 4096,
            taps,
            bits: 10,
            spectra_per_heap: 8,
            heaps_per_chunk: 2,
            output: OutputFormat::Ci8,
            sigma: 50.0,
        };
        check_case_on(&gpu, &case, &mut rng, PfbPath::ThreeKernel);
    }
    let case = Case {
        channels: 1024,
        taps: 16,
        bits: 10,
        spectra_per_heap: 256,
        heaps_per_chunk: 16,
        output: OutputFormat::Ci8,
        sigma: 50.0,
    };
    check_case_on(&gpu, &case, &mut rng, PfbPath::ThreeKernel);
}

/// The fused (cluster) and three-kernel paths on the same stream (sm_90 GPUs): every output
/// component within one
/// LSB of the other (the FIR outputs are the same f32 values; the FFTs round differently, so
/// values near a rounding boundary may differ), and each chunk of both against the f64
/// reference (values, saturation counts, lost flags).
#[test]
#[ignore = "needs a CUDA GPU"]
fn fused_and_three_kernel_outputs_agree_within_one_lsb() {
    let (gpu, mut rng) = (gpu(), rng());
    assert!(gpu.wgmma_enabled(), "the cluster kernel runs on sm_90 GPUs");
    for (channels, taps, bits, output, sigma) in [
        (1024, 16, 10, OutputFormat::Ci8, 50.0),
        (1024, 16, 12, OutputFormat::Ci8, 300.0),
        (1024, 4, 8, OutputFormat::Ci4, 5.0),
    ] {
        let config = ChannelizerConfig {
            channels,
            taps,
            bits,
            spectra_per_heap: 32,
            heaps_per_chunk: 2,
            chunk_samples: 2 * channels * 32,
            packet_samples: 256,
            max_delay: 500,
            output,
        };
        let len = 2 * channels as usize * 32 * 8;
        let samples = [0, 1].map(|_| random_stream(len, bits, &mut rng));
        let present =
            [0, 1].map(|_| (0..len / 256).map(|_| rng.random_range(0..40) != 0).collect::<Vec<bool>>());
        let models = [random_model(450.0, len, &mut rng), random_model(450.0, len, &mut rng)];
        let gains = random_gains(&config, sigma, &mut rng);
        let mut outputs = Vec::new();
        for path in [PfbPath::Fused, PfbPath::ThreeKernel] {
            let mut ch = on_path(&gpu, config.clone(), path).unwrap();
            ch.poison_before_runs(Some(POISON));
            ch.set_gains(&gains).unwrap();
            for (p, m) in models.iter().enumerate() {
                ch.set_delay_model(p, *m).unwrap();
            }
            outputs.push(run_stream(&mut ch, [&samples[0], &samples[1]], [&present[0], &present[1]]));
        }
        let (fused, three) = (&outputs[0], &outputs[1]);
        assert!(fused.len() >= 3 && fused.len() == three.len());
        let (mut equal, mut total, mut saturated) = (0usize, 0usize, 0u32);
        let weights = hann_sinc_weights(channels, taps);
        for (a, b) in fused.iter().zip(three) {
            assert_eq!(a.first_spectrum, b.first_spectrum);
            // Counts against the reference (values within 0.05 of the clipping boundary may
            // count on one path and not the other, even where both quantised to +-max).
            for chunk in [a, b] {
                assert_chunk_matches_reference(
                    &config,
                    &weights,
                    &gains,
                    &models,
                    [&samples[0], &samples[1]],
                    [&present[0], &present[1]],
                    chunk,
                );
            }
            for i in 0..config.output_values() {
                let (x, y) = (output_value(&a.data, output, i), output_value(&b.data, output, i));
                for (u, v) in [(x.0, y.0), (x.1, y.1)] {
                    assert!((u - v).abs() <= 1, "n {channels}, value {i}: fused {u}, three-kernel {v}");
                    equal += (u == v) as usize;
                    total += 1;
                }
            }
            saturated += a.saturated.iter().sum::<u32>();
        }
        println!(
            "n {channels} T {taps} {bits}-bit {output:?}: {} chunks, {equal} of {total} components equal ({:.4}%), \
             {saturated} saturated",
            fused.len(),
            100.0 * equal as f64 / total as f64
        );
        assert!(saturated > 0 || output == OutputFormat::Ci8, "int4 case saturates some values");
    }
}

/// The cluster kernel (the default, fused path at n = 1024 on sm_90): delay tracks that step
/// inside batches (each window read directly), between batches (the window reloaded) and
/// rarely (windows sliding across batches) give, chunk by chunk, the bits of one long buffer,
/// the f64 reference within one LSB (flags and saturation counts too) and values within one
/// LSB of the three-kernel path, for every bit width up to 12, tap variant and both output
/// formats; 16-bit input is refused on the fused path and runs the three kernels by default.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cluster_kernel_handles_delay_steps_and_streams_bit_for_bit() {
    let (gpu, mut rng) = (gpu(), rng());
    assert!(gpu.wgmma_enabled(), "the cluster kernel runs on sm_90 GPUs");
    for (taps, bits, output, sigma) in [
        (16, 10, OutputFormat::Ci8, 50.0),
        (13, 4, OutputFormat::Ci4, 4.0),
        (8, 12, OutputFormat::Ci8, 2000.0),
        (4, 8, OutputFormat::Ci8, 40.0),
        (1, 10, OutputFormat::Ci4, 3.0),
    ] {
        let small = ChannelizerConfig {
            channels: 1024,
            taps,
            bits,
            spectra_per_heap: 16,
            heaps_per_chunk: 2,
            chunk_samples: 4096,
            packet_samples: 512,
            max_delay: 6000,
            output,
        };
        let len = 2048 * 16 * 2 * 10;
        let long = ChannelizerConfig { chunk_samples: len as u32, ..small.clone() };
        let samples = [0, 1].map(|_| random_stream(len, bits, &mut rng));
        let present =
            [0, 1].map(|_| (0..len / 512).map(|_| rng.random_range(0..60) != 0).collect::<Vec<bool>>());
        // Pol 0 steps about every 2.4 spectra (most batches have a step inside), pol 1 about
        // every 16 (batches slide, a few reload).
        let models = [
            DelayModel {
                delay: 2500.0,
                delay_rate: 2e-4,
                phase: 0.3,
                phase_rate: 1e-3,
                reference_sample: 0.0,
            },
            DelayModel {
                delay: -900.0,
                delay_rate: -3e-5,
                phase: -1.0,
                phase_rate: 0.0,
                reference_sample: 5e4,
            },
        ];
        let gains = random_gains(&small, sigma, &mut rng);
        let mut outputs = Vec::new();
        for (config, path) in
            [(&small, PfbPath::Fused), (&long, PfbPath::Fused), (&long, PfbPath::ThreeKernel)]
        {
            let mut ch = on_path(&gpu, config.clone(), path).unwrap();
            let cluster = path == PfbPath::Fused;
            assert_eq!(ch.resident_clusters().is_some(), cluster, "{bits}-bit {path:?}");
            // It is the default path wherever it applies.
            assert_eq!(PfbPath::for_config(&gpu, config), PfbPath::Fused, "{bits}-bit");
            ch.poison_before_runs(Some(POISON));
            ch.set_gains(&gains).unwrap();
            for (p, m) in models.iter().enumerate() {
                ch.set_delay_model(p, *m).unwrap();
            }
            outputs.push(run_stream(&mut ch, [&samples[0], &samples[1]], [&present[0], &present[1]]));
        }
        let (chunked, whole, three) = (&outputs[0], &outputs[1], &outputs[2]);
        assert!(whole.len() >= 6 && chunked.len() >= whole.len() && three.len() == whole.len());
        for (a, b) in chunked.iter().zip(whole) {
            assert_eq!(a, b, "T {taps} {bits}-bit: output chunk from spectrum {}", a.first_spectrum);
        }
        let weights = hann_sinc_weights(1024, taps);
        let (mut equal, mut total, mut saturated) = (0usize, 0usize, 0u32);
        for (a, b) in whole.iter().zip(three) {
            assert_chunk_matches_reference(
                &small,
                &weights,
                &gains,
                &models,
                [&samples[0], &samples[1]],
                [&present[0], &present[1]],
                a,
            );
            assert_eq!(a.first_spectrum, b.first_spectrum);
            for i in 0..small.output_values() {
                let (x, y) = (output_value(&a.data, output, i), output_value(&b.data, output, i));
                for (u, v) in [(x.0, y.0), (x.1, y.1)] {
                    assert!(
                        (u - v).abs() <= 1,
                        "T {taps} {bits}-bit, value {i}: cluster {u}, three-kernel {v}"
                    );
                    equal += (u == v) as usize;
                    total += 1;
                }
            }
            saturated += a.saturated.iter().sum::<u32>();
        }
        println!(
            "T {taps} {bits}-bit {output:?}: {} chunks streamed, {} whole; {equal} of {total} components equal \
             to the three-kernel path ({:.4}%), {saturated} saturated",
            chunked.len(),
            whole.len(),
            100.0 * equal as f64 / total as f64
        );
        assert!(saturated > 0 || (sigma < 100.0 && output == OutputFormat::Ci8), "some values saturate");
    }
    let wide = ChannelizerConfig { bits: 16, spectra_per_heap: 16, ..ChannelizerConfig::new(1024) };
    assert!(matches!(on_path(&gpu, wide.clone(), PfbPath::Fused), Err(Error::InvalidConfig(_))));
    assert_eq!(PfbPath::for_config(&gpu, &wide), PfbPath::ThreeKernel);
}
