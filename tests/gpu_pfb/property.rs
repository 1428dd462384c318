//! The property test over the valid configuration space against the reference.
use super::*;

/// A configuration of the GPU property test, with the seed of its data.
#[derive(Clone, Debug)]
struct PropCase {
    config: ChannelizerConfig,
    path: Option<PfbPath>,
    sigma: f32,
    /// One packet in `loss` lost (0: none).
    loss: u32,
    /// Samples only at the two extremes of the width.
    extreme: bool,
    seed: u64,
}

fn prop_case() -> impl proptest::strategy::Strategy<Value = PropCase> {
    use proptest::prelude::*;
    let shape = (
        prop_oneof![Just(1024u32), (6u32..=12).prop_map(|k| 1 << k)],
        1u32..=32,
        prop::sample::select(vec![4u32, 8, 10, 12, 16]),
        (1u32..=8).prop_map(|k| 4 * k),
        1u32..=3,
        prop::sample::select(vec![32u32, 64, 128, 256]),
        1u32..=16,
        0u32..=600,
        prop_oneof![Just(OutputFormat::Ci8), Just(OutputFormat::Ci4)],
    );
    let data = (
        prop::sample::select(vec![None, Some(PfbPath::Fused), Some(PfbPath::ThreeKernel)]),
        prop::sample::select(vec![2.0f32, 20.0, 60.0, 400.0]),
        prop::sample::select(vec![0u32, 3, 40]),
        any::<bool>(),
        any::<u64>(),
    );
    (shape, data).prop_map(|((n, taps, bits, s, heaps, packet, k, max_delay, output), data)| {
        // Small shapes: at most 2^16 complex values per polarisation and chunk.
        let s = s.min((65536 / n).max(4) / 4 * 4).max(4);
        let heaps = heaps.min((65536 / (n * s)).max(1));
        let config = ChannelizerConfig {
            channels: n,
            taps,
            bits,
            spectra_per_heap: s,
            heaps_per_chunk: heaps,
            chunk_samples: packet * k,
            packet_samples: packet,
            max_delay,
            output,
        };
        let (path, sigma, loss, extreme, seed) = data;
        PropCase { config, path, sigma, loss, extreme, seed }
    })
}

/// GPU property test over the valid configuration space (channels 64 ..= 4096, every tap
/// count, every width, int8 and int4, heaps, chunk and packet sizes, delays up to
/// `max_delay`, lost packets, samples at the extremes, each path): two output chunks of each
/// case against the f64 reference with the criteria of the tests above (every component within
/// one LSB, saturation counts, lost flags). 16 cases; a failure shrinks to its smallest shape
/// and prints the seed to replay it.
#[test]
#[ignore = "needs a CUDA GPU"]
fn property_gpu_matches_the_reference_over_valid_configurations() {
    use proptest::prelude::*;
    use rand::SeedableRng;
    let gpu = gpu();
    gpu_proptest(16, prop_case(), |case| {
        let config = &case.config;
        prop_assert!(config.validate().is_ok(), "{config:?}");
        // The fused path where the cluster kernel applies, else the default.
        let fused_applies = |&p: &PfbPath| p == PfbPath::ThreeKernel || cluster_kernel_applies(&gpu, config);
        let path = case.path.filter(fused_applies).unwrap_or_else(|| PfbPath::for_config(&gpu, config));
        println!("{config:?} {path:?} sigma {} loss {} extreme {}", case.sigma, case.loss, case.extreme);
        let mut rng = StdRng::seed_from_u64(case.seed);
        let n2 = 2 * config.channels as usize;
        let chunk = config.chunk_samples as usize;
        let needed = n2 * 2 * config.spectra_per_chunk() as usize
            + config.window() as usize
            + 2 * config.max_delay as usize;
        let len = needed.div_ceil(chunk) * chunk;
        let (lo, hi) = (-(1i32 << (config.bits - 1)), (1i32 << (config.bits - 1)) - 1);
        let samples = [0, 1].map(|_| {
            if case.extreme {
                (0..len).map(|_| if rng.random::<bool>() { lo } else { hi }).collect()
            } else {
                random_stream(len, config.bits, &mut rng)
            }
        });
        let packets = len / config.packet_samples as usize;
        let present = [0, 1].map(|_| {
            (0..packets).map(|_| case.loss == 0 || rng.random_range(0..case.loss) != 0).collect::<Vec<bool>>()
        });
        let models = [0, 1].map(|_| {
            if config.max_delay < 4 {
                DelayModel { phase: rng.random_range(0.0..6.3), ..Default::default() }
            } else {
                random_model(config.max_delay as f64, len, &mut rng)
            }
        });
        let gains = random_gains(config, case.sigma, &mut rng);
        let mut ch = on_path(&gpu, config.clone(), path).unwrap();
        ch.poison_before_runs(Some(POISON));
        ch.set_gains(&gains).unwrap();
        for (p, m) in models.iter().enumerate() {
            ch.set_delay_model(p, *m).unwrap();
        }
        let (s, f) = ([&samples[0][..], &samples[1][..]], [&present[0][..], &present[1][..]]);
        let mut out = Vec::new();
        for k in 0..len / chunk {
            out.extend(push_chunk(&mut ch, s, f, k).unwrap());
        }
        prop_assert!(out.len() >= 2, "two output chunks, got {}", out.len());
        let weights = hann_sinc_weights(config.channels, config.taps);
        for chunk in &out[..2] {
            assert_chunk_matches_reference(config, &weights, &gains, &models, s, f, chunk);
        }
        Ok(())
    });
}
