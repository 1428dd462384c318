//! GPU tests of the correlator: bit-exact against the i64 CPU reference on fresh random
//! inputs (with -128 / -8 forced in), for every format, memory order, polarisation count and
//! a spread of station and channel counts; int64 accumulation, the streaming path, the int32
//! bound at its edge, output properties, and input validation. On Hopper every check runs
//! twice: with the sm_90a `wgmma` kernels (int8, aligned rows) and with the sm_80 kernels
//! (`Gpu::set_wgmma_enabled(false)`, the path Ampere GPUs take).
mod common;

use common::*;
use radio_kernels::correlator::{correlate_reference, Correlator, CorrelatorConfig, Format, Order};
use radio_kernels::{Error, Gpu};
use rand::rngs::StdRng;
use rand::Rng;

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

/// The kernel families this GPU runs: `wgmma` on (Hopper) and off, or only the sm_80 one.
fn paths(gpu: &Gpu) -> Vec<bool> {
    if gpu.wgmma_enabled() {
        vec![true, false]
    } else {
        vec![false]
    }
}

/// Runs `check` once per kernel family, with `wgmma` set accordingly; restores it after.
fn for_each_path(gpu: &Gpu, mut check: impl FnMut(bool)) {
    let all = paths(gpu);
    for &wgmma in &all {
        gpu.set_wgmma_enabled(wgmma);
        check(wgmma);
    }
    gpu.set_wgmma_enabled(all[0]);
}

/// One launch on `input` into a poisoned output.
fn launch(gpu: &Gpu, config: CorrelatorConfig, input: &[u8]) -> Vec<[i32; 2]> {
    let correlator = Correlator::new(gpu, config).unwrap();
    let device_input = gpu.upload(input).unwrap();
    let mut output = gpu.alloc::<[i32; 2]>(config.output_len(), 0xA5).unwrap();
    correlator.correlate(&device_input, &mut output).unwrap();
    output.download().unwrap()
}

/// Every kernel family bit-exact on `input` against one CPU reference.
fn check_on(gpu: &Gpu, config: CorrelatorConfig, input: &[u8]) {
    let expected = correlate_reference(&config, input).unwrap();
    for_each_path(gpu, |wgmma| {
        let got = launch(gpu, config, input);
        assert_exact(&config, wgmma, &got, &expected);
    });
}

fn check_once(gpu: &Gpu, config: CorrelatorConfig, rng: &mut StdRng) {
    check_on(gpu, config, &random_input(&config, rng))
}

fn assert_exact(config: &CorrelatorConfig, wgmma: bool, got: &[[i32; 2]], expected: &[[i64; 2]]) {
    assert_eq!(got.len(), expected.len());
    let wrong: Vec<usize> =
        (0..got.len()).filter(|&n| [got[n][0] as i64, got[n][1] as i64] != expected[n]).collect();
    if let Some(&first) = wrong.first() {
        panic!(
            "{config:?} (wgmma {wgmma}): {} of {} values wrong; first at {first}: {:?}, expected {:?}",
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
        for_each_path(&gpu, |_| {
            let v = launch(&gpu, config, &input);
            for c in 0..config.channels {
                for i in 0..config.stations {
                    for p in 0..2 {
                        let auto = v[config.output_index(c, i, i, p, p)];
                        assert!(auto[0] >= 0 && auto[1] == 0, "auto {auto:?}");
                    }
                    let x01 = v[config.output_index(c, i, i, 0, 1)];
                    let x10 = v[config.output_index(c, i, i, 1, 0)];
                    assert_eq!(x01, [x10[0], -x10[1]]);
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
        for_each_path(&gpu, |wgmma| {
            let correlator = Correlator::new(&gpu, launch).unwrap();
            let mut accumulator = gpu.alloc::<[i64; 2]>(launch.output_len(), 0).unwrap();
            for chunk in input.chunks(launch.input_bytes()) {
                correlator.accumulate(&gpu.upload(chunk).unwrap(), &mut accumulator).unwrap();
            }
            assert_eq!(accumulator.download().unwrap(), expected, "{format:?} wgmma {wgmma}");
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
    for_each_path(&gpu, |wgmma| {
        let correlator = Correlator::new(&gpu, launch).unwrap();
        assert_eq!(correlator.integrate(&parts).unwrap(), expected, "wgmma {wgmma}");

        // One integration reused for two batches: `finish` returns each batch alone.
        let mut integration = correlator.integration().unwrap();
        for (batch, expected) in batches.iter().zip(&batch_expected) {
            for part in batch.iter() {
                integration.buffer().unwrap().copy_from_slice(part);
                integration.submit().unwrap();
            }
            assert_eq!(&integration.finish().unwrap(), expected, "wgmma {wgmma}");
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
    let mut output = gpu.alloc::<[i32; 2]>(good.output_len(), 0).unwrap();
    assert!(matches!(correlator.correlate(&short, &mut output), Err(Error::ShapeMismatch { .. })));
    let input = gpu.alloc::<u8>(good.input_bytes(), 0).unwrap();
    let mut small = gpu.alloc::<[i32; 2]>(good.output_len() - 1, 0).unwrap();
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
        assert_exact(&config, correlator.uses_wgmma(), &launch(&gpu, config, &input), &expected);
        let mut accumulator = gpu.alloc::<[i64; 2]>(config.output_len(), 0).unwrap();
        let device_input = gpu.upload(&input).unwrap();
        correlator.accumulate(&device_input, &mut accumulator).unwrap();
        correlator.accumulate(&device_input, &mut accumulator).unwrap();
        let twice: Vec<[i64; 2]> = expected.iter().map(|v| [2 * v[0], 2 * v[1]]).collect();
        assert_eq!(accumulator.download().unwrap(), twice, "{config:?} accumulated");
    }
    // Int4 and unaligned rows stay on the sm_80 kernels.
    for (stations, format) in [(4, Format::Ci4), (5, Format::Ci8)] {
        let config =
            CorrelatorConfig { stations, pols: 2, channels: 1, times: 64, format, order: Order::StationPol };
        assert!(!Correlator::new(&gpu, config).unwrap().uses_wgmma(), "{config:?}");
    }
}
