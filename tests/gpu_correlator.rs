//! GPU tests of the correlator: bit-exact against the i64 CPU reference on fresh random
//! inputs (with -128 / -8 forced in), for every format, memory order, polarisation count and
//! a spread of station and channel counts; int64 accumulation, the streaming path, the int32
//! bound at its edge, output properties, input validation and device ownership; inputs and
//! outputs past 2^32 bytes and output positions past 2^32 values; and a property test over
//! random valid shapes. On Hopper every check that runs an sm_90a `wgmma` kernel (int8,
//! aligned rows) runs again on the sm_80 kernel (`Correlator::with_kernel`), the path Ampere
//! GPUs take.
mod common;

use common::*;
use radio_kernels::correlator::{
    correlate_reference, Correlator, CorrelatorConfig, Format, Order, INSTANCES,
};
use radio_kernels::gpu_shared::modules::Arch;
use radio_kernels::{Complex, DeviceBuffer, Error, Gpu};
use rand::rngs::StdRng;
use rand::Rng;
use std::ops::Range;

/// Random input with one value in eight forced to the most negative component (-128 or -8).
fn random_input(config: &CorrelatorConfig, rng: &mut StdRng) -> Vec<u8> {
    let extreme = match config.format {
        Format::Ci8 => 0x80,
        Format::Ci4 => 0x88,
    };
    (0..config.input_bytes())
        .map(|_| if rng.random_range(0..8) == 0 { extreme } else { rng.random() })
        .collect()
}

/// The correlators a configuration is checked on: the one `Correlator::new` chooses and,
/// where that runs a `wgmma` kernel (Hopper), the sm_80 kernel Ampere GPUs run.
fn correlators(gpu: &Gpu, config: CorrelatorConfig) -> Vec<Correlator<'_>> {
    let chosen = Correlator::new(gpu, config).unwrap();
    if !chosen.uses_wgmma() {
        return vec![chosen];
    }
    let ampere = config.kernel(false).unwrap();
    vec![chosen, Correlator::new(gpu, config).unwrap().with_kernel(&ampere.spec).unwrap()]
}

/// Runs `check` on each of `config`'s correlators ([`correlators`]).
fn for_each_path(gpu: &Gpu, config: CorrelatorConfig, mut check: impl FnMut(&Correlator)) {
    for correlator in correlators(gpu, config) {
        check(&correlator);
    }
}

/// The kernel a correlator runs, for messages.
fn name(correlator: &Correlator) -> &'static str {
    correlator.kernel().spec.name
}

/// An int32 visibility as int64, to compare with the reference.
fn widen(v: Complex<i32>) -> Complex<i64> {
    Complex::new(v.re.into(), v.im.into())
}

/// One launch on `input` into a poisoned output.
fn launch(gpu: &Gpu, correlator: &Correlator, input: &[u8]) -> Vec<Complex<i32>> {
    let config = *correlator.config();
    let device_input = gpu.upload(input).unwrap();
    let mut output = gpu.alloc::<Complex<i32>>(config.output_len(), 0xA5).unwrap();
    correlator.correlate(&device_input, &mut output).unwrap();
    output.download().unwrap()
}

/// Every kernel family bit-exact on `input` against one CPU reference.
fn check_on(gpu: &Gpu, config: CorrelatorConfig, input: &[u8]) {
    let expected = correlate_reference(&config, input).unwrap();
    for_each_path(gpu, config, |correlator| {
        let got = launch(gpu, correlator, input);
        assert_exact(&config, name(correlator), &got, &expected);
    });
}

fn check_once(gpu: &Gpu, config: CorrelatorConfig, rng: &mut StdRng) {
    check_on(gpu, config, &random_input(&config, rng))
}

fn assert_exact(config: &CorrelatorConfig, kernel: &str, got: &[Complex<i32>], expected: &[Complex<i64>]) {
    assert_eq!(got.len(), expected.len());
    let wrong: Vec<usize> = (0..got.len()).filter(|&n| widen(got[n]) != expected[n]).collect();
    if let Some(&first) = wrong.first() {
        panic!(
            "{config:?} ({kernel}): {} of {} values wrong; first at {first}: {:?}, expected {:?}",
            wrong.len(),
            got.len(),
            got[first],
            expected[first]
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bit_exact_for_every_format_order_and_size() {
    let gpu = gpu();
    let mut rng = rng();
    let mut runs = 0;
    for stations in [1, 3, 19, 33, 64, 80, 512] {
        for pols in [1, 2] {
            for format in [Format::Ci8, Format::Ci4] {
                for order in [Order::StationPol, Order::PolStation] {
                    let channels = if stations >= 512 { 2 } else { 1 + (stations + pols) % 4 };
                    let times = if stations >= 512 { 64 } else { 128 };
                    let config = CorrelatorConfig { stations, pols, channels, times, format, order };
                    check_once(&gpu, config, &mut rng);
                    runs += 1;
                }
            }
        }
    }
    println!("{runs} configurations bit-exact");
}

/// Long launches are split into time slices whose partial sums are added atomically.
#[test]
#[ignore = "needs a CUDA GPU"]
fn time_sliced_launches_are_exact() {
    let gpu = gpu();
    let mut rng = rng();
    for (format, order) in
        [(Format::Ci8, Order::StationPol), (Format::Ci8, Order::PolStation), (Format::Ci4, Order::StationPol)]
    {
        let config = CorrelatorConfig { stations: 100, pols: 2, channels: 1, times: 4096, format, order };
        check_once(&gpu, config, &mut rng);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn autos_are_real_nonnegative_and_cross_pols_hermitian() {
    let gpu = gpu();
    let mut rng = rng();
    for order in [Order::StationPol, Order::PolStation] {
        // 40 stations: aligned rows in both orders, so Hopper runs its wgmma kernel here.
        let config =
            CorrelatorConfig { stations: 40, pols: 2, channels: 3, times: 192, format: Format::Ci8, order };
        let input = random_input(&config, &mut rng);
        for_each_path(&gpu, config, |correlator| {
            let v = launch(&gpu, correlator, &input);
            for c in 0..config.channels {
                for i in 0..config.stations {
                    for p in 0..2 {
                        let auto = v[config.output_index(c, i, i, p, p)];
                        assert!(auto.re >= 0 && auto.im == 0, "auto {auto:?}");
                    }
                    let x01 = v[config.output_index(c, i, i, 0, 1)];
                    let x10 = v[config.output_index(c, i, i, 1, 0)];
                    assert_eq!(x01, x10.conj());
                }
            }
        });
    }
}

/// k launches of T accumulated in int64 equal one reference over k T.
#[test]
#[ignore = "needs a CUDA GPU"]
fn accumulated_launches_equal_one_long_integration() {
    let gpu = gpu();
    let mut rng = rng();
    for format in [Format::Ci8, Format::Ci4] {
        let launch = CorrelatorConfig {
            stations: 48,
            pols: 2,
            channels: 3,
            times: 128,
            format,
            order: Order::PolStation,
        };
        let k = 5;
        let long = CorrelatorConfig { times: launch.times * k, ..launch };
        let input = random_input(&long, &mut rng);
        let expected = correlate_reference(&long, &input).unwrap();
        for_each_path(&gpu, launch, |correlator| {
            let mut accumulator = gpu.alloc::<Complex<i64>>(launch.output_len(), 0).unwrap();
            for chunk in input.chunks(launch.input_bytes()) {
                correlator.accumulate(&gpu.upload(chunk).unwrap(), &mut accumulator).unwrap();
            }
            assert_eq!(accumulator.download().unwrap(), expected, "{format:?} {}", name(correlator));
        });
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn streaming_integration_matches_the_reference() {
    let gpu = gpu();
    let mut rng = rng();
    let launch = CorrelatorConfig {
        stations: 72,
        pols: 2,
        channels: 2,
        times: 256,
        format: Format::Ci8,
        order: Order::StationPol,
    };
    let chunks = 7;
    let long = CorrelatorConfig { times: launch.times * chunks, ..launch };
    let input = random_input(&long, &mut rng);
    let parts: Vec<&[u8]> = input.chunks(launch.input_bytes()).collect();
    let expected = correlate_reference(&long, &input).unwrap();
    let batches = [&parts[..3], &parts[3..]];
    let batch_expected: Vec<_> = batches
        .iter()
        .map(|batch| {
            let batch_config = CorrelatorConfig { times: launch.times * batch.len() as u32, ..launch };
            correlate_reference(&batch_config, &batch.concat()).unwrap()
        })
        .collect();
    for_each_path(&gpu, launch, |correlator| {
        assert_eq!(correlator.integrate(&parts).unwrap(), expected, "{}", name(correlator));

        // One integration reused for two batches: `finish` returns each batch alone.
        let mut integration = correlator.integration().unwrap();
        for (batch, expected) in batches.iter().zip(&batch_expected) {
            for part in batch.iter() {
                integration.buffer().unwrap().copy_from_slice(part);
                integration.submit().unwrap();
            }
            assert_eq!(&integration.finish().unwrap(), expected, "{}", name(correlator));
        }
    });
}

/// The largest int8 launch (T = 65472) with every component at -128 or at the extreme mixes
/// that maximise each partial sum stays exact.
#[test]
#[ignore = "needs a CUDA GPU"]
fn int32_sums_are_exact_at_the_bound() {
    let gpu = gpu();
    // 4 stations: aligned rows, so Hopper runs its wgmma kernel too (station 3 stays zero).
    let config = CorrelatorConfig {
        stations: 4,
        pols: 2,
        channels: 1,
        times: 65472,
        format: Format::Ci8,
        order: Order::StationPol,
    };
    // Station 0: -128 - 128i; station 1: -128 + 127i; station 2: 127 - 128i.
    let values = [[0x80u8, 0x80], [0x80, 0x7f], [0x7f, 0x80]];
    let mut input = vec![0u8; config.input_bytes()];
    for t in 0..config.times {
        for s in 0..3 {
            for p in 0..2 {
                let at = config.input_offset(t, 0, s, p);
                input[at..at + 2].copy_from_slice(&values[s as usize]);
            }
        }
    }
    check_on(&gpu, config, &input);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_input_is_rejected_before_launch() {
    let gpu = gpu();
    let good = CorrelatorConfig {
        stations: 8,
        pols: 2,
        channels: 2,
        times: 64,
        format: Format::Ci8,
        order: Order::StationPol,
    };
    for bad in [
        CorrelatorConfig { stations: 0, ..good },
        CorrelatorConfig { times: 96, ..good },
        CorrelatorConfig { times: 65536, ..good },
        CorrelatorConfig { pols: 4, ..good },
    ] {
        assert!(matches!(Correlator::new(&gpu, bad), Err(Error::InvalidConfig(_))), "{bad:?}");
    }
    let correlator = Correlator::new(&gpu, good).unwrap();
    let short = gpu.alloc::<u8>(good.input_bytes() - 2, 0).unwrap();
    let mut output = gpu.alloc::<Complex<i32>>(good.output_len(), 0).unwrap();
    assert!(matches!(correlator.correlate(&short, &mut output), Err(Error::ShapeMismatch { .. })));
    let input = gpu.alloc::<u8>(good.input_bytes(), 0).unwrap();
    let mut small = gpu.alloc::<Complex<i32>>(good.output_len() - 1, 0).unwrap();
    assert!(matches!(correlator.correlate(&input, &mut small), Err(Error::ShapeMismatch { .. })));
    let chunk = vec![0u8; good.input_bytes() + 1];
    assert!(matches!(correlator.integrate(&[&chunk]), Err(Error::ShapeMismatch { .. })));
}

/// The wgmma kernel is the one chosen on Hopper for aligned int8 rows (and only there), and is
/// exact on a ragged last tile, diagonal and off-diagonal tiles, time slices (int32 atomics)
/// and int64 accumulation. Small enough for compute-sanitizer (`wgmma_` filter).
#[test]
#[ignore = "needs a CUDA GPU"]
fn wgmma_kernel_is_chosen_and_exact() {
    let gpu = gpu();
    let mut rng = rng();
    for (stations, pols, order, times) in [
        (4, 2, Order::StationPol, 128),
        (40, 2, Order::StationPol, 192),
        (40, 2, Order::PolStation, 128),
        (72, 1, Order::StationPol, 64),
        (104, 2, Order::PolStation, 2048),
    ] {
        let config = CorrelatorConfig { stations, pols, channels: 2, times, format: Format::Ci8, order };
        let correlator = Correlator::new(&gpu, config).unwrap();
        assert_eq!(correlator.uses_wgmma(), gpu.wgmma_enabled(), "{config:?}");
        let input = random_input(&config, &mut rng);
        let expected = correlate_reference(&config, &input).unwrap();
        assert_exact(&config, name(&correlator), &launch(&gpu, &correlator, &input), &expected);
        let mut accumulator = gpu.alloc::<Complex<i64>>(config.output_len(), 0).unwrap();
        let device_input = gpu.upload(&input).unwrap();
        correlator.accumulate(&device_input, &mut accumulator).unwrap();
        correlator.accumulate(&device_input, &mut accumulator).unwrap();
        let twice: Vec<Complex<i64>> = expected.iter().map(|v| Complex::new(2 * v.re, 2 * v.im)).collect();
        assert_eq!(accumulator.download().unwrap(), twice, "{config:?} accumulated");
    }
    // Int4 and unaligned rows stay on the sm_80 kernels.
    for (stations, format) in [(4, Format::Ci4), (5, Format::Ci8)] {
        let config =
            CorrelatorConfig { stations, pols: 2, channels: 1, times: 64, format, order: Order::StationPol };
        assert!(!Correlator::new(&gpu, config).unwrap().uses_wgmma(), "{config:?}");
    }
}

/// Every kernel of the family that fits a configuration, chosen with `with_kernel`, is
/// bit-exact there (on Hopper also the `wgmma` block kinds chosen for other sizes: `Pair` on
/// several tiles, `Split` on one or two).
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_fitting_kernel_is_exact() {
    let gpu = gpu();
    let mut rng = rng();
    let hopper = gpu.wgmma_enabled();
    for (stations, pols, format, order) in [
        (8, 2, Format::Ci8, Order::StationPol),
        (40, 2, Format::Ci8, Order::PolStation),
        (104, 2, Format::Ci8, Order::StationPol),
        (37, 1, Format::Ci8, Order::PolStation),
        (40, 2, Format::Ci4, Order::StationPol),
    ] {
        let config = CorrelatorConfig { stations, pols, channels: 2, times: 128, format, order };
        let input = random_input(&config, &mut rng);
        let expected = correlate_reference(&config, &input).unwrap();
        let mut ran = 0;
        for kernel in INSTANCES {
            if kernel.misfit(format, order, stations, pols).is_some()
                || (kernel.spec.arch == Arch::Sm90a && !hopper)
            {
                continue;
            }
            let correlator = Correlator::new(&gpu, config).unwrap().with_kernel(&kernel.spec).unwrap();
            assert_eq!(correlator.kernel(), kernel);
            assert_exact(&config, kernel.spec.name, &launch(&gpu, &correlator, &input), &expected);
            ran += 1;
        }
        assert!(ran >= 1, "{config:?}");
    }
}

/// `with_kernel` refuses, with a typed error and before any launch, a spec of another
/// family, a kernel of the other format or order, a copying kernel on rows that are not
/// 16-byte aligned, the channel block on channels of other than two tiles, and (off Hopper)
/// the sm_90a kernels.
#[test]
#[ignore = "needs a CUDA GPU"]
fn with_kernel_refuses_kernels_that_do_not_fit() {
    let gpu = gpu();
    let find = |name: &str| &INSTANCES.iter().find(|k| k.spec.name == name).unwrap().spec;
    let config = |stations, format| CorrelatorConfig {
        stations,
        pols: 2,
        channels: 1,
        times: 64,
        format,
        order: Order::StationPol,
    };
    let other_family =
        radio_kernels::gpu_shared::modules::kernels().find(|k| !k.name.starts_with("correlate_")).unwrap();
    for (config, spec) in [
        (config(8, Format::Ci8), other_family),
        (config(8, Format::Ci8), find("correlate_ci4_station_pol")),
        (config(8, Format::Ci8), find("correlate_ci8_pol_station_async")),
        (config(5, Format::Ci8), find("correlate_ci8_station_pol_async")),
        (config(5, Format::Ci8), find("correlate_ci8_station_pol_wgmma")),
        (config(8, Format::Ci8), find("correlate_ci8_station_pol_wgmma_channel_split")),
        (config(100, Format::Ci8), find("correlate_ci8_station_pol_wgmma_channel_split")),
    ] {
        let result = Correlator::new(&gpu, config).unwrap().with_kernel(spec);
        assert!(matches!(result, Err(Error::InvalidConfig(_))), "{} on {config:?}", spec.name);
    }
    let fits = config(40, Format::Ci8);
    let result = Correlator::new(&gpu, fits)
        .unwrap()
        .with_kernel(find("correlate_ci8_station_pol_wgmma_channel_split"));
    if gpu.compute_capability() == (9, 0) {
        assert!(result.is_ok());
    } else {
        assert!(matches!(result, Err(Error::MissingKernel(_))));
    }
}

/// Elements `range` of a device buffer (the boundary tests read windows, not whole outputs).
fn download_range<T: bytemuck::Pod>(gpu: &Gpu, buffer: &DeviceBuffer<T>, range: Range<usize>) -> Vec<T> {
    let size = std::mem::size_of::<T>();
    let mut out = vec![T::zeroed(); range.len()];
    let view = buffer.raw().slice(range.start * size..range.end * size);
    gpu.stream().memcpy_dtoh(&view, bytemuck::cast_slice_mut::<T, u8>(&mut out)).unwrap();
    gpu.synchronize().unwrap();
    out
}

/// The visibility at output position `index`, computed on the CPU from the samples alone:
/// the reference for outputs past a boundary, without correlating everything before it.
fn visibility_at(config: &CorrelatorConfig, input: &[u8], index: usize) -> Complex<i64> {
    let p = config.pols as u64;
    let index = index as u64;
    let (pj, pi) = ((index % p) as u32, (index / p % p) as u32);
    let rest = index / (p * p);
    let (channel, b) = ((rest / config.baselines()) as u32, rest % config.baselines());
    let mut i = ((8 * b + 1).isqrt() - 1) / 2;
    while i * (i + 1) / 2 > b {
        i -= 1;
    }
    while (i + 1) * (i + 2) / 2 <= b {
        i += 1;
    }
    let (i, j) = (i as u32, (b - i * (i + 1) / 2) as u32);
    assert_eq!(config.output_index(channel, i, j, pi, pj) as u64, index);
    let mut v = Complex::new(0i64, 0);
    for t in 0..config.times {
        let Complex { re: a1, im: b1 } = config.sample(input, t, channel, i, pi).unwrap();
        let Complex { re: a2, im: b2 } = config.sample(input, t, channel, j, pj).unwrap();
        v.re += a1 * a2 + b1 * b2;
        v.im += b1 * a2 - a1 * b2;
    }
    v
}

/// Output positions past 2^32 values (and around 2^29, 2^30 and 2^31: the byte, 4-byte-word
/// and signed wraps of 32-bit offsets): 32768 stations in two channels give 4295098368
/// complex values (34 GB as int32, 69 GB as int64). The windows around each boundary and the
/// last values are checked against the CPU, for int32 stores and int64 accumulation, on
/// every kernel family.
#[test]
#[ignore = "needs a CUDA GPU"]
fn outputs_past_2_pow_32_values_are_exact() {
    let _one_at_a_time = large_memory_guard();
    let gpu = gpu();
    let mut rng = rng();
    let config = CorrelatorConfig {
        stations: 32768,
        pols: 2,
        channels: 2,
        times: 64,
        format: Format::Ci8,
        order: Order::StationPol,
    };
    assert!(config.output_len() > 1 << 32);
    if !enough_memory(&gpu, (config.output_len() * 8 + config.input_bytes()) as u64) {
        return;
    }
    let input = random_input(&config, &mut rng);
    let device_input = gpu.upload(&input).unwrap();
    let mut windows: Vec<Range<usize>> =
        [1usize << 29, 1 << 30, 1 << 31, 1 << 32].iter().map(|&b| b - 1024..b + 1024).collect();
    windows.push(config.output_len() - 2048..config.output_len());
    let expected: Vec<Vec<Complex<i64>>> =
        windows.iter().map(|w| w.clone().map(|n| visibility_at(&config, &input, n)).collect()).collect();
    for_each_path(&gpu, config, |correlator| {
        {
            let mut output = gpu.alloc::<Complex<i32>>(config.output_len(), 0xA5).unwrap();
            correlator.correlate(&device_input, &mut output).unwrap();
            for (window, want) in windows.iter().zip(&expected) {
                let got = download_range(&gpu, &output, window.clone());
                let got: Vec<Complex<i64>> = got.iter().map(|&v| widen(v)).collect();
                assert_eq!(&got, want, "int32, {}, values {window:?}", name(correlator));
            }
        }
        // The int32 output is freed; a synchronisation returns it to the device.
        gpu.synchronize().unwrap();
        if enough_memory(&gpu, (config.output_len() * 16) as u64) {
            let mut accumulator = gpu.alloc::<Complex<i64>>(config.output_len(), 0).unwrap();
            correlator.accumulate(&device_input, &mut accumulator).unwrap();
            for (window, want) in windows.iter().zip(&expected) {
                let got = download_range(&gpu, &accumulator, window.clone());
                assert_eq!(&got, want, "int64, {}, values {window:?}", name(correlator));
            }
        }
    });
}

/// Input past 2^32 bytes and outputs past 2^32 bytes, on each input path: 65535 channels
/// of 64 stations (int8, 16-byte rows: `cp.async` and `wgmma`; int4: register-staged) or 60
/// stations (int8 rows of 120 bytes: element-wise loads) hold 4.8 to 5.4 GB of input, and
/// 3.8 to 4.4 GB of int32 and 7.7 to 8.7 GB of int64 output. The input repeats a random
/// block whose length does not divide 2^32, so a wrapped read would see other samples;
/// channels on both sides of each output's 2^32-byte boundary, and the first and last, are
/// checked against the CPU.
#[test]
#[ignore = "needs a CUDA GPU"]
fn inputs_and_outputs_past_2_pow_32_bytes_are_exact() {
    let _one_at_a_time = large_memory_guard();
    let gpu = gpu();
    let mut rng = rng();
    for (stations, times, format, order) in [
        (64, 320, Format::Ci8, Order::StationPol),
        (64, 576, Format::Ci4, Order::PolStation),
        (60, 320, Format::Ci8, Order::PolStation),
    ] {
        let config = CorrelatorConfig { stations, pols: 2, channels: 65535, times, format, order };
        assert!(config.input_bytes() > 1 << 32 && config.output_len() * 16 > 1 << 32);
        if !enough_memory(&gpu, (config.input_bytes() + config.output_len() * 24) as u64) {
            return;
        }
        let extreme = match format {
            Format::Ci8 => 0x80,
            Format::Ci4 => 0x88,
        };
        let block: Vec<u8> = (0..(16 << 20) + (16 << 10))
            .map(|_| if rng.random_range(0..8) == 0 { extreme } else { rng.random() })
            .collect();
        assert!(!(1usize << 32).is_multiple_of(block.len()));
        let mut device_input = gpu.alloc::<u8>(config.input_bytes(), 0).unwrap();
        fill_repeating(&gpu, &mut device_input, &block);
        let per_channel = config.output_len() / config.channels as usize;
        let row_bytes = (stations * config.pols * format.bytes()) as usize;
        // First channels whose int32 and int64 values start at or past 2^32 bytes.
        let past = |value_bytes: usize| ((1usize << 32) / value_bytes).div_ceil(per_channel) as u32;
        let mut channels = vec![0, 1, past(16) - 1, past(16), 65534];
        if past(8) < config.channels {
            channels.extend([past(8) - 1, past(8)]);
        }
        let one = CorrelatorConfig { channels: 1, ..config };
        let expected: Vec<Vec<Complex<i64>>> = channels
            .iter()
            .map(|&c| {
                let mut samples = Vec::with_capacity(one.input_bytes());
                for t in 0..config.times {
                    let at = config.input_offset(t, c, 0, 0);
                    samples.extend((at..at + row_bytes).map(|x| block[x % block.len()]));
                }
                correlate_reference(&one, &samples).unwrap()
            })
            .collect();
        for_each_path(&gpu, config, |correlator| {
            let mut output = gpu.alloc::<Complex<i32>>(config.output_len(), 0xA5).unwrap();
            correlator.correlate(&device_input, &mut output).unwrap();
            let mut accumulator = gpu.alloc::<Complex<i64>>(config.output_len(), 0).unwrap();
            correlator.accumulate(&device_input, &mut accumulator).unwrap();
            for (&c, want) in channels.iter().zip(&expected) {
                let range = c as usize * per_channel..(c as usize + 1) * per_channel;
                let got = download_range(&gpu, &output, range.clone());
                let got: Vec<Complex<i64>> = got.iter().map(|&v| widen(v)).collect();
                assert_eq!(&got, want, "{config:?} int32, {}, channel {c}", name(correlator));
                assert_eq!(
                    &download_range(&gpu, &accumulator, range),
                    want,
                    "{config:?} int64, {}, channel {c}",
                    name(correlator)
                );
            }
        });
        drop(device_input);
        gpu.synchronize().unwrap();
    }
}

/// Buffers of another device are refused before any launch (needs two GPUs; skipped
/// otherwise).
#[test]
#[ignore = "needs a CUDA GPU"]
fn buffers_of_another_device_are_refused() {
    let gpu = gpu();
    let Some(other) = second_gpu() else { return };
    let config = CorrelatorConfig {
        stations: 8,
        pols: 2,
        channels: 1,
        times: 64,
        format: Format::Ci8,
        order: Order::StationPol,
    };
    let correlator = Correlator::new(&gpu, config).unwrap();
    let (input, foreign_input) = (
        gpu.alloc::<u8>(config.input_bytes(), 0).unwrap(),
        other.alloc::<u8>(config.input_bytes(), 0).unwrap(),
    );
    let mut output = gpu.alloc::<Complex<i32>>(config.output_len(), 0xA5).unwrap();
    let mut foreign_output = other.alloc::<Complex<i32>>(config.output_len(), 0xA5).unwrap();
    let mut foreign_accumulator = other.alloc::<Complex<i64>>(config.output_len(), 0).unwrap();
    let wrong = |r: radio_kernels::Result<()>| matches!(r, Err(Error::WrongDevice { .. }));
    assert!(wrong(correlator.correlate(&foreign_input, &mut output)));
    assert!(wrong(correlator.correlate(&input, &mut foreign_output)));
    assert!(wrong(correlator.accumulate(&input, &mut foreign_accumulator)));
    correlator.correlate(&input, &mut output).unwrap();
}

/// Any valid small shape (stations, pols, channels, times with and without time slices,
/// int8 and int4, both orders, `wgmma` on and off) with random data, -128 / -8 forced in or
/// everywhere: the int32 output (poisoned first) and an int64 accumulation into a poisoned
/// accumulator (adding to its bytes) are bit-exact against the CPU reference.
#[test]
#[ignore = "needs a CUDA GPU"]
fn property_random_shapes_are_bit_exact() {
    use proptest::prelude::*;
    let gpu = gpu();
    let hopper = gpu.wgmma_enabled();
    let shape = (
        prop_oneof![1u32..=72, prop::sample::select(vec![4u32, 8, 32, 40, 64, 65, 128])],
        1u32..=2,
        1u32..=3,
        prop_oneof![1u32..=3, 32u32..=34],
        prop_oneof![Just(Format::Ci8), Just(Format::Ci4)],
        prop_oneof![Just(Order::StationPol), Just(Order::PolStation)],
    )
        .prop_map(|(stations, pols, channels, stages, format, order)| CorrelatorConfig {
            stations,
            pols,
            channels,
            times: stages * 64,
            format,
            order,
        })
        .prop_filter("small enough for the CPU reference", |c| {
            c.baselines() * (c.pols * c.pols * c.channels * c.times) as u64 <= 3_000_000
        });
    // (config, wgmma on, fill: 0 random with 1/8 extremes, 1 all extreme, 2 half extreme, seed)
    let strategy = (shape, any::<bool>(), 0u32..3, any::<u64>());
    gpu_proptest(16, strategy, |(config, wgmma, fill, seed)| {
        use rand::SeedableRng;
        let mut rng = StdRng::seed_from_u64(seed);
        let extreme = match config.format {
            Format::Ci8 => 0x80,
            Format::Ci4 => 0x88,
        };
        let input: Vec<u8> = (0..config.input_bytes())
            .map(|_| match fill {
                1 => extreme,
                2 if rng.random() => extreme,
                0 if rng.random_range(0..8) == 0 => extreme,
                _ => rng.random(),
            })
            .collect();
        let expected = correlate_reference(&config, &input).unwrap();
        let mut correlator = Correlator::new(&gpu, config).unwrap();
        if !wgmma && correlator.uses_wgmma() {
            correlator = correlator.with_kernel(&config.kernel(false).unwrap().spec).unwrap();
        }
        prop_assert!(!correlator.uses_wgmma() || (wgmma && hopper));
        let device_input = gpu.upload(&input).unwrap();
        let mut output = gpu.alloc::<Complex<i32>>(config.output_len(), 0xA5).unwrap();
        correlator.correlate(&device_input, &mut output).unwrap();
        let got = output.download().unwrap();
        let wrong = (0..got.len()).filter(|&n| widen(got[n]) != expected[n]).count();
        prop_assert_eq!(wrong, 0, "int32: {} of {} wrong ({})", wrong, got.len(), name(&correlator));
        let mut accumulator = gpu.alloc::<Complex<i64>>(config.output_len(), 0xA5).unwrap();
        correlator.accumulate(&device_input, &mut accumulator).unwrap();
        let poison = i64::from_ne_bytes([0xA5; 8]);
        let want: Vec<Complex<i64>> = expected
            .iter()
            .map(|v| Complex::new(poison.wrapping_add(v.re), poison.wrapping_add(v.im)))
            .collect();
        prop_assert!(accumulator.download().unwrap() == want, "int64 accumulation differs");
        Ok(())
    });
}

/// The streaming X-engine with integrations of k chunks equals one-shot accumulation over the
/// same data, integration by integration, for several ring depths; chunks come from the
/// pinned slots and from registered host memory; a full output ring refuses a submit
/// (`Backlog`) without losing anything, and the stream continues with the same bytes.
#[test]
#[ignore = "needs a CUDA GPU"]
fn streaming_engine_equals_one_shot_integrations() {
    let gpu = gpu();
    let mut rng = rng();
    let launch = CorrelatorConfig {
        stations: 64,
        pols: 2,
        channels: 3,
        times: 128,
        format: Format::Ci8,
        order: Order::StationPol,
    };
    let per_integration = rng.random_range(2..5usize);
    let integrations = 4;
    let total = per_integration * integrations;
    let long = CorrelatorConfig { times: launch.times * total as u32, ..launch };
    let mut input = random_input(&long, &mut rng);
    let bytes = launch.input_bytes();
    for_each_path(&gpu, launch, |correlator| {
        let expected: Vec<Vec<Complex<i64>>> = input
            .chunks(bytes * per_integration)
            .map(|part| {
                let mut accumulator = gpu.alloc::<Complex<i64>>(launch.output_len(), 0).unwrap();
                for chunk in part.chunks(bytes) {
                    correlator.accumulate(&gpu.upload(chunk).unwrap(), &mut accumulator).unwrap();
                }
                accumulator.download().unwrap()
            })
            .collect();
        for depth in [1, 3, 4] {
            // Pinned slots, outputs taken as soon as the ring is full.
            let mut engine = correlator.streaming(per_integration, depth).unwrap();
            let mut got = Vec::new();
            for chunk in input.chunks(bytes) {
                if engine.pending() == depth {
                    got.push(engine.output().unwrap().unwrap().to_vec());
                }
                engine.input().unwrap().copy_from_slice(chunk);
                engine.submit().unwrap();
            }
            while let Some(v) = engine.output().unwrap() {
                got.push(v.to_vec());
            }
            assert_eq!(got, expected, "pinned slots, depth {depth}, {}", name(correlator));
        }
        // Registered memory, and the back-pressure path: with every output slot full the
        // submit that starts an integration is refused and changes nothing.
        let depth = 2;
        let mut engine = correlator.streaming(per_integration, depth).unwrap();
        let registered = gpu.register_host(&mut input).unwrap();
        let mut got = Vec::new();
        let mut refused = 0;
        for k in 0..total {
            match engine.submit_registered(&registered, k * bytes) {
                Ok(()) => {}
                Err(Error::Backlog { slots, .. }) => {
                    assert_eq!(slots, depth);
                    assert_eq!(engine.pending(), depth);
                    refused += 1;
                    got.push(engine.output().unwrap().unwrap().to_vec());
                    engine.submit_registered(&registered, k * bytes).unwrap();
                }
                Err(e) => panic!("{e}"),
            }
        }
        while let Some(v) = engine.output().unwrap() {
            got.push(v.to_vec());
        }
        assert!(refused > 0, "the ring never filled");
        assert_eq!(got, expected, "registered memory, {}", name(correlator));
        assert!(matches!(
            engine.submit_registered(&registered, total * bytes - 1),
            Err(Error::InvalidConfig(_))
        ));
    });
}
