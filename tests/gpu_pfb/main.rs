//! GPU tests of the PFB channelizer against the f64 CPU reference, on fresh random streams
//! (seed printed) with random delay tracks, fringe phases, gains and lost packets: every output
//! component within one LSB for every bit width, n in {64, 1024, 4096, 32768, 65536}, T in
//! {1, 4, 16, 32} and FIR threads running many batches; saturation counts; lost-data flags
//! against a sample-by-sample check; a chunked stream equal bit for bit to one long buffer; the
//! phase of a delayed tone; the channel response against the transform of the weights (plot
//! saved as a PNG); typed errors for bad input. Intermediate and output buffers are poisoned
//! before every launch. `Channelizer::new` runs the cluster kernel at n = 1024 on Hopper, so
//! the tests above at that size test it there; every compiled kernel runs through
//! `Channelizer::with_kernel`, and the three-kernel tests keep that path covered at n = 1024
//! and compare the two paths' outputs. Then: a push that fails its checks changes nothing (the stream goes on
//! with the bytes of one that never saw it); a property test over the valid configuration
//! space against the reference; and the 2^32 boundaries (the largest output chunk and kept
//! input `validate` accepts), skipped where device memory is short. The streaming engine
//! (`ChannelizerStream`) gives, chunk for chunk, the bytes of `push` on the same stream: random
//! chunk sizes against output chunk sizes, lost packets, delay steps and tracks and gain changes
//! mid-stream, both paths, the back-pressure and checked-error paths, registered memory, the
//! most output chunks one submit can complete, and engine-sized chunks; the channelizer's own
//! calls on a caller's stream.
mod boundaries;
#[path = "../common/mod.rs"]
mod common;
mod errors;
mod kernels;
mod property;
mod response;
mod streaming;

use common::*;
use radio_kernels::gpu_shared::modules::KernelSpec;
use radio_kernels::pfb::{
    cluster_kernel_applies, hann_sinc_weights, output_value, pack_samples, reference_chunk, Channelizer,
    ChannelizerConfig, ChannelizerStream, Complex, DelayModel, OutputChunk, OutputFormat, PfbKernel, PfbPath,
    PfbStage, Schedule, DELAY_MODEL_FIELDS, MAX_CAPACITY_SAMPLES, MAX_OUTPUT_VALUES, PFB_KERNELS,
};
use radio_kernels::{Error, Gpu};
use rand::rngs::StdRng;
use rand::Rng;

const POISON: u8 = 0xA5;

/// A random stream of `len` samples of `bits` bits, with the extremes forced in.
fn random_stream(len: usize, bits: u32, rng: &mut StdRng) -> Vec<i32> {
    let (lo, hi) = (-(1i32 << (bits - 1)), (1i32 << (bits - 1)) - 1);
    (0..len)
        .map(|_| match rng.random_range(0..64) {
            0 => lo,
            1 => hi,
            _ => rng.random_range(lo..=hi),
        })
        .collect()
}

/// Gains of random phase giving output components of standard deviation about `sigma`.
fn random_gains(config: &ChannelizerConfig, sigma: f32, rng: &mut StdRng) -> Vec<Complex<f32>> {
    let rms = (1u32 << (config.bits - 1)) as f32 / 3f32.sqrt(); // uniform samples
    (0..2 * config.channels)
        .map(|_| {
            let (s, c) = rng.random_range(0.0f32..std::f32::consts::TAU).sin_cos();
            let g = sigma * std::f32::consts::SQRT_2 / rms * rng.random_range(0.5f32..1.5);
            Complex::new(g * c, g * s)
        })
        .collect()
}

/// A delay track whose coarse part changes within a chunk: |delay| stays below `max` over a
/// stream of `len` samples.
fn random_model(max: f64, len: usize, rng: &mut StdRng) -> DelayModel {
    let rate = max / 4.0 / len as f64;
    DelayModel {
        reference_sample: rng.random_range(0.0..len as f64),
        delay: rng.random_range(-max / 2.0..max / 2.0),
        delay_rate: rng.random_range(-rate..rate),
        phase: rng.random_range(0.0..std::f64::consts::TAU),
        phase_rate: rng.random_range(-1e-3..1e-3),
    }
}

/// Pushes `samples` chunk by chunk (with `present` packet flags) and returns every output chunk.
fn run_stream(ch: &mut Channelizer, samples: [&[i32]; 2], present: [&[bool]; 2]) -> Vec<OutputChunk> {
    let c = ch.config().clone();
    let per = c.chunk_samples as usize;
    let packets = c.chunk_packets();
    let mut out = Vec::new();
    for k in 0..samples[0].len() / per {
        let bytes = [0, 1].map(|p| pack_samples(&samples[p][k * per..(k + 1) * per], c.bits).unwrap());
        let flags = [0, 1].map(|p| &present[p][k * packets..(k + 1) * packets]);
        out.extend(ch.push([&bytes[0], &bytes[1]], flags).unwrap());
    }
    out
}

struct Case {
    channels: u32,
    taps: u32,
    bits: u32,
    spectra_per_heap: u32,
    heaps_per_chunk: u32,
    output: OutputFormat,
    /// Output standard deviation per component (large values provoke saturation).
    sigma: f32,
}

impl Case {
    fn config(&self) -> ChannelizerConfig {
        let heap_samples = 2 * self.channels * self.spectra_per_heap;
        let packet = 256.min(heap_samples);
        ChannelizerConfig {
            channels: self.channels,
            taps: self.taps,
            bits: self.bits,
            spectra_per_heap: self.spectra_per_heap,
            heaps_per_chunk: self.heaps_per_chunk,
            chunk_samples: heap_samples,
            packet_samples: packet,
            max_delay: 300,
            output: self.output,
        }
    }
}

/// A channelizer on `path`, through [`Channelizer::with_kernel`] with the path's kernel for
/// `config` ([`PfbPath::kernel`]: the fused path only where the cluster kernel applies).
fn on_path<'g>(
    gpu: &'g Gpu,
    config: ChannelizerConfig,
    path: PfbPath,
) -> radio_kernels::Result<Channelizer<'g>> {
    let kernel = path.kernel(gpu, &config)?;
    Channelizer::with_kernel(gpu, config, None, kernel)
}

/// Runs `case` on the GPU (default path) and compares two output chunks with the reference.
fn check_case(gpu: &Gpu, case: &Case, rng: &mut StdRng) {
    let path = PfbPath::for_config(gpu, &case.config());
    check_case_on(gpu, case, rng, path);
}

/// As [`check_case`] on `path`.
fn check_case_on(gpu: &Gpu, case: &Case, rng: &mut StdRng, path: PfbPath) {
    let kernel = path.kernel(gpu, &case.config()).unwrap();
    check_case_with(gpu, case, rng, kernel);
}

/// As [`check_case`] with the kernels `kernel` names ([`Channelizer::with_kernel`]).
fn check_case_with(gpu: &Gpu, case: &Case, rng: &mut StdRng, kernel: &KernelSpec) {
    let config = case.config();
    println!(
        "n {} T {} bits {} S {} x{} {:?} {}",
        config.channels,
        config.taps,
        config.bits,
        config.spectra_per_heap,
        config.heaps_per_chunk,
        config.output,
        kernel.name
    );
    let n2 = 2 * config.channels as usize;
    let chunk = config.chunk_samples as usize;
    let needed = n2 * 2 * config.spectra_per_chunk() as usize + config.window() as usize + 2 * 300;
    let len = needed.div_ceil(chunk) * chunk;
    let samples = [0, 1].map(|_| random_stream(len, config.bits, rng));
    let packets = len / config.packet_samples as usize;
    let present = [0, 1].map(|_| (0..packets).map(|_| rng.random_range(0..40) != 0).collect::<Vec<bool>>());
    let models = [random_model(280.0, len, rng), random_model(280.0, len, rng)];
    let gains = random_gains(&config, case.sigma, rng);
    let weights = hann_sinc_weights(config.channels, config.taps);

    let mut ch = Channelizer::with_kernel(gpu, config.clone(), None, kernel).unwrap();
    assert_eq!(ch.kernels()[0], kernel);
    ch.poison_before_runs(Some(POISON));
    ch.set_gains(&gains).unwrap();
    for (p, m) in models.iter().enumerate() {
        ch.set_delay_model(p, *m).unwrap();
    }
    let out = run_stream(&mut ch, [&samples[0], &samples[1]], [&present[0], &present[1]]);
    assert!(out.len() >= 2, "two output chunks from the stream, got {}", out.len());
    for chunk in &out[..2] {
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
}

/// One output chunk against the f64 reference: every component within one LSB, saturation
/// counts equal up to the values within 0.05 of the clipping boundary, the lost flags equal
/// (and checked again sample by sample).
fn assert_chunk_matches_reference(
    config: &ChannelizerConfig,
    weights: &[f32],
    gains: &[Complex<f32>],
    models: &[DelayModel; 2],
    samples: [&[i32]; 2],
    present: [&[bool]; 2],
    chunk: &OutputChunk,
) {
    let config = config.clone();
    let r = reference_chunk(&config, weights, gains, models, samples, present, chunk.first_spectrum).unwrap();
    let max = config.output.max() as f64;
    let mut worst = 0;
    let mut near_boundary = vec![0u32; r.saturated.len()];
    let per_heap = config.spectra_per_heap as usize * config.channels as usize * 2;
    for (i, y) in r.values.iter().enumerate() {
        let (re, im) = output_value(&chunk.data, config.output, i);
        for (got, want) in [(re, y.re), (im, y.im)] {
            let want = want.round_ties_even().clamp(-max, max) as i32;
            let diff = (got - want).abs();
            assert!(diff <= 1, "value {i}: got {got}, reference {want} ({y}), case n {}", config.channels);
            worst = worst.max(diff);
        }
        if [y.re, y.im].iter().any(|v| (v.abs() - (max + 0.5)).abs() < 0.05) {
            near_boundary[(i / per_heap) * 2 + i % 2] += 1;
        }
    }
    for (h, (&got, &want)) in chunk.saturated.iter().zip(&r.saturated).enumerate() {
        assert!(
            got.abs_diff(want) <= near_boundary[h],
            "saturation count [heap][pol] {h}: got {got}, reference {want} (+-{})",
            near_boundary[h]
        );
    }
    let total: u32 = r.saturated.iter().sum();
    println!("  chunk from spectrum {}: worst |diff| {worst}, {total} saturated", chunk.first_spectrum);
    assert_eq!(chunk.lost_spectra, r.lost_spectra);
    assert_eq!(chunk.lost_heaps, r.lost_heaps);
    // Independent check of the flags, sample by sample.
    let schedule = Schedule::new(&config, models, chunk.first_spectrum).unwrap();
    for (i, &lost) in chunk.lost_spectra.iter().enumerate() {
        let want = (0..2).any(|p| {
            let start = schedule.starts[p][i];
            (start..start + config.window() as i64)
                .any(|t| t < 0 || !present[p][(t / config.packet_samples as i64) as usize])
        });
        assert_eq!(lost, want, "spectrum {}", chunk.first_spectrum + i as i64);
    }
}

/// Pushes chunk `k` of `samples` with its packet flags.
fn push_chunk(
    ch: &mut Channelizer,
    samples: [&[i32]; 2],
    present: [&[bool]; 2],
    k: usize,
) -> radio_kernels::Result<Vec<OutputChunk>> {
    let c = ch.config().clone();
    let (per, packets) = (c.chunk_samples as usize, c.chunk_packets());
    let bytes = [0, 1].map(|p| pack_samples(&samples[p][k * per..(k + 1) * per], c.bits).unwrap());
    let flags = [0, 1].map(|p| &present[p][k * packets..(k + 1) * packets]);
    ch.push([&bytes[0], &bytes[1]], flags)
}

/// The paths to compare: the three kernels, and the fused path where the cluster kernel
/// applies.
fn paths(gpu: &Gpu, config: &ChannelizerConfig) -> Vec<PfbPath> {
    if cluster_kernel_applies(gpu, config) {
        vec![PfbPath::ThreeKernel, PfbPath::Fused]
    } else {
        vec![PfbPath::ThreeKernel]
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn matches_the_reference_for_every_bit_width() {
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
        check_case(&gpu, &case, &mut rng);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn matches_the_reference_for_every_channel_count() {
    let (gpu, mut rng) = (gpu(), rng());
    for (channels, spectra_per_heap) in [(64, 32), (1024, 16), (4096, 8), (32768, 8), (65536, 8)] {
        let case = Case {
            channels,
            taps: 16,
            bits: 10,
            spectra_per_heap,
            heaps_per_chunk: 1,
            output: OutputFormat::Ci8,
            sigma: 40.0,
        };
        check_case(&gpu, &case, &mut rng);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn matches_the_reference_for_every_tap_count_and_int4_output() {
    let (gpu, mut rng) = (gpu(), rng());
    for taps in [1, 3, 4, 16, 32] {
        let case = Case {
            channels: 4096,
            taps,
            bits: 10,
            spectra_per_heap: 8,
            heaps_per_chunk: 2,
            output: OutputFormat::Ci8,
            sigma: 50.0,
        };
        check_case(&gpu, &case, &mut rng);
    }
    for sigma in [2.0, 6.0] {
        let case = Case {
            channels: 256,
            taps: 8,
            bits: 8,
            spectra_per_heap: 24,
            heaps_per_chunk: 2,
            output: OutputFormat::Ci4,
            sigma,
        };
        check_case(&gpu, &case, &mut rng);
    }
}

/// Long FIR runs: 32 spectra per thread (four batches), so continuing batches slide the
/// window ring around its end, and the delay track steps inside some runs. The other cases
/// give each FIR thread one batch.
#[test]
#[ignore = "needs a CUDA GPU"]
fn matches_the_reference_when_fir_threads_run_many_batches() {
    let (gpu, mut rng) = (gpu(), rng());
    let case = Case {
        channels: 1024,
        taps: 16,
        bits: 10,
        spectra_per_heap: 256,
        heaps_per_chunk: 16,
        output: OutputFormat::Ci8,
        sigma: 50.0,
    };
    check_case(&gpu, &case, &mut rng);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn saturation_counts_match_when_most_values_clip() {
    let (gpu, mut rng) = (gpu(), rng());
    let case = Case {
        channels: 512,
        taps: 4,
        bits: 12,
        spectra_per_heap: 16,
        heaps_per_chunk: 3,
        output: OutputFormat::Ci8,
        sigma: 2000.0,
    };
    check_case(&gpu, &case, &mut rng);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_chunked_stream_equals_one_long_buffer_bit_for_bit() {
    let (gpu, mut rng) = (gpu(), rng());
    let small = ChannelizerConfig {
        channels: 256,
        taps: 16,
        bits: 10,
        spectra_per_heap: 8,
        heaps_per_chunk: 2,
        chunk_samples: 1024,
        packet_samples: 512,
        max_delay: 4000,
        output: OutputFormat::Ci8,
    };
    let len = 1024 * 300;
    let long = ChannelizerConfig { chunk_samples: len as u32, ..small.clone() };
    let samples = [0, 1].map(|_| random_stream(len, 10, &mut rng));
    let packets = len / 512;
    let present = [0, 1].map(|_| (0..packets).map(|_| rng.random_range(0..50) != 0).collect::<Vec<bool>>());
    // A fast delay track (the coarse delay changes every few spectra) crossing zero.
    let models = [
        DelayModel { delay: 1500.0, delay_rate: -0.01, phase: 0.3, phase_rate: 1e-3, reference_sample: 0.0 },
        DelayModel { delay: -700.0, delay_rate: 0.005, phase: -1.0, phase_rate: 0.0, reference_sample: 5e4 },
    ];
    let gains = random_gains(&small, 40.0, &mut rng);
    // Both paths where the cluster kernel applies.
    for path in paths(&gpu, &small) {
        let mut outputs = Vec::new();
        for config in [small.clone(), long.clone()] {
            let mut ch = on_path(&gpu, config, path).unwrap();
            ch.poison_before_runs(Some(POISON));
            ch.set_gains(&gains).unwrap();
            for (p, m) in models.iter().enumerate() {
                ch.set_delay_model(p, *m).unwrap();
            }
            outputs.push(run_stream(&mut ch, [&samples[0], &samples[1]], [&present[0], &present[1]]));
        }
        let (chunked, whole) = (&outputs[0], &outputs[1]);
        println!("{path:?}: {} chunks streamed, {} from one buffer", chunked.len(), whole.len());
        assert!(whole.len() >= 10 && chunked.len() >= whole.len());
        for (a, b) in chunked.iter().zip(whole) {
            assert_eq!(a, b, "{path:?}: output chunk from spectrum {}", a.first_spectrum);
        }
        assert!(whole.iter().any(|c| c.lost_heaps.iter().any(|&l| l)), "some heaps lost");
        assert!(whole.iter().any(|c| c.lost_heaps.iter().any(|&l| !l)), "some heaps complete");
    }
}
