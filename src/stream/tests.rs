//! Tests of the command's parts that need no GPU: chunk counts, bounds, measured figures,
//! option and setup checks, headline shapes, and what is read from the host.
use super::system::{parse_driver_version, parse_stat_seconds};
use super::*;
use std::time::Instant;

fn ceilings() -> Ceilings {
    // Ceilings of the order of an H200's on PCIe Gen5.
    Ceilings { h2d: 55.4, d2h: 55.2, both: 100.9, device_copy: 4000.0 }
}

fn setup() -> Setup {
    Setup {
        engine: "test",
        configuration: "a chunk".into(),
        input_bytes: 128e6,
        output_bytes: 0.5e6,
        data_seconds: 14e-3,
        work: 1e9,
        rate_unit: "Gsample/s",
        rate_scale: 1e9,
        kernel_s: 2e-3,
        chunk_multiple: 1,
        pfb_shape: None,
    }
}

#[test]
fn chunk_counts_cover_the_seconds_the_minimum_and_the_multiple() {
    assert_eq!(chunks_for(2.0, 32, 14e-3, 1).unwrap(), 143);
    assert_eq!(chunks_for(2.0, 32, 1.0, 1).unwrap(), 32);
    assert_eq!(chunks_for(2.0, 32, 14e-3, 64).unwrap(), 192);
    assert_eq!(chunks_for(1e-9, 1, 1.0, 1).unwrap(), 1);
    // Too many chunks, or a degenerate chunk, is an error, never a wrap or a panic.
    assert!(chunks_for(3600.0, 1, 1e-12, 1).is_err());
    assert!(chunks_for(1.0, 1, 0.0, 1).is_err());
    assert!(chunks_for(1.0, MAX_CHUNKS, 1.0, 3).is_err());
}

#[test]
fn the_bounds_follow_their_definitions() {
    let c = ceilings();
    let (input, output) = (128e6, 32e6);
    let transfer = (input / 55.4e9f64).max(output / 55.2e9);
    assert!((c.transfer_s(input, output) - transfer).abs() < 1e-15);
    let duplex = output / 50.45e9 + (input - output) / 55.4e9;
    assert!((c.both_s(input, output) - transfer.max(duplex)).abs() < 1e-15);
    // A balanced chunk is bound by the shared rate, not by either direction alone.
    assert!(c.both_s(64e6, 64e6) > c.transfer_s(64e6, 64e6));
}

#[test]
fn measured_figures_follow_their_definitions() {
    let c = ceilings();
    // 100 chunks of 14 ms of data in 0.25 s: 2.5 ms per chunk.
    let m = Measured { setup: setup(), chunks: 100, wall_s: 0.25, cpu_s: Some(0.1) };
    assert!((m.chunk_s() - 2.5e-3).abs() < 1e-12);
    assert!((m.rate() - 400.0).abs() < 1e-9); // 1e9 per chunk over 2.5 ms, in G
    assert!((m.real_time_factor() - 5.6).abs() < 1e-9);
    let t = c.transfer_s(128e6, 0.5e6);
    assert!((m.of_transfer(&c) - t / 2.5e-3).abs() < 1e-12);
    assert!((m.of_kernel() - 0.8).abs() < 1e-12);
    let (bound, which) = m.of_bound(&c);
    assert_eq!(which, "PCIe");
    assert!((bound - t / 2.5e-3).abs() < 1e-12);
    assert!((m.cpu_per_data_s().unwrap() - 0.1 / 1.4).abs() < 1e-12);
    assert!((m.cores().unwrap() - 0.4).abs() < 1e-12);
    let fast_pcie = Ceilings { h2d: 1e6, d2h: 1e6, both: 2e6, device_copy: 1.0 };
    assert_eq!(m.of_bound(&fast_pcie).1, "kernel");
    let text = format_rows(&c, std::slice::from_ref(&m));
    assert!(text.contains("400.00 Gsample/s") && text.contains("5.60x"), "{text}");
    assert!(m.detail(&c).contains("100 chunks"));
}

#[test]
fn setups_and_options_are_checked() {
    assert!(setup().validate().is_ok());
    for bad in [
        Setup { kernel_s: f64::NAN, ..setup() },
        Setup { data_seconds: 0.0, ..setup() },
        Setup { output_bytes: -1.0, ..setup() },
        Setup { chunk_multiple: 0, ..setup() },
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
    assert!(Options::default().validate().is_ok());
    let bad_run = |run: RunOptions| Options { run, ..Options::default() }.validate().is_err();
    assert!(bad_run(RunOptions { seconds: 0.0, ..RunOptions::default() }));
    assert!(bad_run(RunOptions { seconds: f64::INFINITY, ..RunOptions::default() }));
    assert!(bad_run(RunOptions { seconds: MAX_SECONDS * 2.0, ..RunOptions::default() }));
    assert!(bad_run(RunOptions { min_chunks: 0, ..RunOptions::default() }));
    assert!(Options { depth: 0, ..Options::default() }.validate().is_err());
    assert!(Options { depth: MAX_DEPTH + 1, ..Options::default() }.validate().is_err());
    assert!(Options { stations: Some(0), ..Options::default() }.validate().is_err());
    assert!(Options { channels: Some(65536), ..Options::default() }.validate().is_err());
    assert!(Options { channels: Some(96), ..Options::default() }.validate().is_err());
    assert!(Options { bits: Some(9), ..Options::default() }.validate().is_err());
    assert!(Options { sample_rate_hz: Some(f64::NAN), ..Options::default() }.validate().is_err());
    for kind in EngineKind::ALL {
        assert_eq!(EngineKind::from_name(kind.name()), Some(kind));
        let one = Options { selection: Selection::One(kind), ..Options::default() };
        assert!(one.validate().is_ok(), "{kind:?}");
    }
    assert!(Selection::All.includes(EngineKind::Correlator));
}

#[test]
fn headline_shapes_are_valid() {
    let c = correlator_config(CORRELATOR_STATIONS).unwrap();
    assert_eq!(c.input_bytes(), 256 << 20); // complex int8: 2 bytes a sample
    for n in PFB_CHANNELS {
        let p = pfb_config(n, PFB_BITS).unwrap();
        assert_eq!(2 * n as u64 * p.spectra_per_chunk(), PFB_CHUNK_SAMPLES as u64, "n = {n}");
    }
    for bits in merry::MERRY_BITS {
        for n in merry::MERRY_CHANNELS {
            pfb_config(n, bits).unwrap();
        }
    }
    assert!(pfb_config(0, 10).is_err());
    assert!(pfb_config(65536, 10).is_err());
}

#[test]
fn host_cpu_time_and_driver_version_are_read_or_absent() {
    if cfg!(target_os = "linux") {
        let before = process_cpu_seconds().expect("Linux has /proc");
        let mut x = 0u64;
        let start = Instant::now();
        while start.elapsed().as_millis() < 50 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        let after = process_cpu_seconds().expect("Linux has /proc");
        assert!(after - before >= 0.02, "{before} -> {after} after 50 ms of spinning ({x})");
    }
    let line = "2 (radio kernels) S 1 2 3 4 5 6 7 8 9 10 250 30 0 0";
    assert_eq!(parse_stat_seconds(line), Some(2.8));
    assert_eq!(parse_stat_seconds("garbage"), None);
    let version = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n";
    assert_eq!(parse_driver_version(version).as_deref(), Some("550.54.15"));
    assert_eq!(parse_driver_version(""), None);
}

#[test]
fn host_fill_writes_every_byte() {
    let mut bytes = vec![0u8; 4099];
    fill_host_random(&mut bytes, 7);
    assert!(bytes[4090..].iter().any(|&b| b != 0));
    assert!(bytes.iter().filter(|&&b| b == 0).count() < 64);
}
