//! The main job's CPU path at a small size (runs in CI): the simulated sky through the CPU
//! references finds the brightest source in the correlator's image and on the FRB map, beams
//! on the sources beat beams off them, and the four figures are written as PNG files.
use radio_kernels::demo::{self, Options};

#[test]
fn cpu_chain_finds_the_sources_and_writes_the_figures() {
    let out = std::env::temp_dir().join(format!("radio-kernels-demo-test-{}", std::process::id()));
    let options = Options { channels: 64, out: out.clone(), ..Options::cpu_default() };
    let stages = std::cell::Cell::new(0);
    let outcome = demo::run(&options, None, &|_| stages.set(stages.get() + 1)).expect("the CPU chain runs");
    println!("{}", demo::report(&outcome));
    // The command's progress bar has as many steps as the stages announced.
    assert_eq!(stages.get(), demo::stage_count(false));
    assert!(outcome.checks_passed());
    let s = outcome.sources[0];
    let (l, m) = outcome.image_peak;
    assert!(
        (l - s.l).hypot(m - s.m) <= demo::image_tolerance(&outcome),
        "image peak ({l}, {m}) vs ({}, {})",
        s.l,
        s.m
    );
    assert_eq!(outcome.frb_peak, outcome.frb_expected);
    assert!(demo::science_ok(&outcome));
    assert_eq!(outcome.images.len(), 4);
    for image in &outcome.images {
        let bytes = std::fs::read(image).expect("figure written");
        assert!(bytes.len() > 1000 && bytes.starts_with(b"\x89PNG"), "{}", image.display());
    }
    let _ = std::fs::remove_dir_all(out);
}

#[test]
fn options_are_validated() {
    let good = Options::cpu_default();
    assert!(good.validate().is_ok());
    for bad in [
        Options { dishes: 100, ..good.clone() },
        Options { channels: 96, ..good.clone() },
        Options { channels: 32, ..good.clone() },
        Options { sources: 0, ..good.clone() },
        Options { sources: 9, ..good.clone() },
        Options { spectra_per_heap: 100, ..good.clone() },
        Options { heaps: 0, ..good.clone() },
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
    let mut seconds = good.clone();
    seconds.set_seconds(1e-3).expect("1 ms fits");
    assert!(seconds.duration() >= 1e-3 && seconds.heaps > 1);
    assert!(seconds.validate().is_ok());
}

#[test]
fn sizes_that_do_not_fit_are_refused_not_wrapped() {
    let good = Options::cpu_default();
    // 128 x 2^25 spectra is 2^32, which a u32 product wraps to 0.
    let wraps = Options { heaps: 1 << 25, ..good.clone() };
    assert_eq!(wraps.spectra(), 1 << 32);
    assert!(wraps.validate().is_err());
    assert!(Options { heaps: u32::MAX, spectra_per_heap: u32::MAX - 127, ..good.clone() }
        .validate()
        .is_err());
    assert!(Options { spectra_per_heap: 0, ..good.clone() }.validate().is_err());
    assert!(Options { heaps: demo::MAX_SPECTRA / 128 + 1, ..good.clone() }.validate().is_err());
    assert!(Options { heaps: demo::MAX_SPECTRA / 128, ..good.clone() }.validate().is_ok());
    // Helpers are exact (no wrap) on any value.
    let huge = Options { channels: u32::MAX, spectra_per_heap: u32::MAX, heaps: u32::MAX, ..good.clone() };
    assert_eq!(huge.spectra(), u64::from(u32::MAX) * u64::from(u32::MAX));
    assert!(huge.duration() > 1e18);
    assert_eq!(huge.reference_channel(), (3 * u64::from(u32::MAX) / 4) as u32);

    // --seconds: finite, above 0, and the heaps it needs must fit; a refusal changes nothing.
    for bad in [-1.0, 0.0, f64::NAN, f64::INFINITY, -f64::INFINITY, 343.5974, 1e300] {
        let mut options = Options { channels: 128, ..good.clone() };
        assert!(options.set_seconds(bad).is_err(), "{bad}");
        assert_eq!(options, Options { channels: 128, ..good.clone() }, "{bad}");
    }
    // The most that fits: 16384 spectra of 2 x 128 samples at 3.2 GHz.
    let most = 16384.0 * 256.0 / 3.2e9;
    let mut options = good.clone();
    options.set_seconds(most * (1.0 - 1e-9)).expect("fits");
    assert_eq!(options.spectra(), u64::from(demo::MAX_SPECTRA));
    assert!(options.set_seconds(most * (1.0 + 1e-6)).is_err());
    assert!(Options { channels: 0, ..good.clone() }.set_seconds(1e-3).is_err());
}

#[test]
fn the_output_folder_is_checked_before_any_work() {
    let dir = std::env::temp_dir().join(format!("radio-kernels-demo-out-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let file = dir.join("a-file");
    std::fs::write(&file, b"x").expect("write the file");
    // A folder under a regular file cannot be made, even by root.
    let options = Options { channels: 64, out: file.join("figures"), ..Options::cpu_default() };
    let why = demo::check_out(&options.out).expect_err("not writable");
    assert!(why.contains("cannot create the folder"), "{why}");
    let started = std::time::Instant::now();
    let stages = std::cell::Cell::new(0);
    let e = demo::run(&options, None, &|_| stages.set(stages.get() + 1)).expect_err("refused");
    assert!(e.to_string().contains(&file.display().to_string()), "{e}");
    assert_eq!(stages.get(), 0, "a stage started");
    assert!(started.elapsed().as_secs() < 5);
    // A writable folder is made and left empty.
    let fresh = dir.join("fresh").join("figures");
    demo::check_out(&fresh).expect("writable");
    assert_eq!(std::fs::read_dir(&fresh).expect("made").count(), 0);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn public_helpers_refuse_what_they_cannot_do() {
    use radio_kernels::demo::{plot, sky};
    assert!(demo::channel_response(0).is_err());
    let (offsets, db) = demo::channel_response(64).expect("64 channels");
    assert_eq!(offsets.len(), db.len());
    assert!(sky::Array::new(0).is_err() && sky::Array::new(sky::MAX_SIDE + 1).is_err());
    let array = sky::Array::new(2).expect("2 x 2");
    assert_eq!(array.dishes(), 4);
    for count in [0, 9, u32::MAX] {
        assert!(sky::sources(count, 8, 1.2e9).is_err(), "{count} sources");
    }
    assert!(sky::sources(3, 8, f64::NAN).is_err() && sky::sources(3, 0, 1.2e9).is_err());
    let sources = sky::sources(3, 8, 1.2e9).expect("3 sources");
    assert_eq!(sources.len(), 3);
    assert!(sky::observe(array, &sources, 0, 1).is_err());
    assert!(sky::observe(array, &sources, 33, 1).is_err());
    let mut bad = sources.clone();
    bad[1].rms = f64::INFINITY;
    assert!(matches!(
        sky::observe(array, &bad, 64, 1),
        Err(radio_kernels::Error::NonFinite { what: "sources", index: 1 })
    ));
    assert_eq!(sky::observe(array, &sources, 64, 1).expect("64 samples").len(), 4);

    // Figures: shapes and axis ranges are checked before drawing (plotters would index out of
    // bounds, or loop forever laying out an infinite axis); nothing is written.
    let dir = std::env::temp_dir().join(format!("radio-kernels-plot-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let png = dir.join("figure.png");
    assert!(plot::intensity_map(&png, "short", &[0.0; 15], 4, 4, &[]).is_err());
    assert!(plot::intensity_map(&png, "empty", &[], 0, 4, &[]).is_err());
    let infinite = vec![("beams", vec![("src0".to_string(), f64::INFINITY)])];
    assert!(plot::beam_power(&png, &infinite).is_err());
    assert!(plot::beam_power(&png, &[]).is_err());
    assert!(plot::visibilities(&png, "inf", &[(f64::INFINITY, 1.0, 0.0, 0.0)]).is_err());
    assert!(plot::channel_response(&png, &[f64::NAN, 1.0], &[0.0, 0.0]).is_err());
    assert!(!png.exists());
    let _ = std::fs::remove_dir_all(dir);
}

/// The demo's data files carry its results: the delay beams' filterbank files average to the
/// demo's own delay beam powers (file channel `k` is the demo's channel `k + 1`), and the
/// FRB files hold 8-bit codes of the brightest beam first. With the `uvh5` feature, the
/// UVH5 file's visibilities of the one source have the phase `+2 pi f uvw . s / c` that
/// pyuvdata's `phase` removes.
#[test]
fn data_files_hold_the_demo_results() {
    use radio_kernels::formats::filterbank::{read_file, Spectra};
    let dir = std::env::temp_dir().join(format!("radio-kernels-demo-files-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let uvh5 = cfg!(feature = "uvh5").then(|| dir.join("vis.uvh5"));
    let options = Options {
        channels: 64,
        sources: 1,
        out: dir.join("figures"),
        filterbank: Some(dir.join("beams")),
        uvh5: uvh5.clone(),
        ..Options::cpu_default()
    };
    let outcome = demo::run(&options, None, &|_| {}).expect("the CPU chain runs");
    assert_eq!(outcome.files.len(), 16 + uvh5.is_some() as usize, "{:?}", outcome.files);
    for beam in 0..8usize {
        let file =
            read_file(dir.join("beams/delay").join(format!("beam_{beam:04}.fil"))).expect("delay beam");
        let Spectra::F32(power) = &file.data else { panic!("delay beams are f32") };
        // The demo's mean over channels 16..64 (its upper three quarters) and all times.
        let (nchans, spectra) = (63, file.spectra());
        let mut sum = 0.0;
        for t in 0..spectra {
            for k in 15..nchans {
                sum += power[t * nchans + k] as f64;
            }
        }
        let mean = sum / (48 * spectra) as f64;
        let want = outcome.beam_power[2][beam];
        assert!((mean - want).abs() <= 1e-9 * want, "beam {beam}: file {mean} vs demo {want}");
    }
    #[cfg(feature = "uvh5")]
    {
        use radio_kernels::Complex;
        let f = hdf5::File::open(uvh5.as_ref().unwrap()).expect("the UVH5 file");
        let uvw = f.dataset("Header/uvw_array").unwrap().read_raw::<f64>().unwrap();
        let freq = f.dataset("Header/freq_array").unwrap().read_raw::<f64>().unwrap();
        let ant1 = f.dataset("Header/ant_1_array").unwrap().read_raw::<i64>().unwrap();
        let ant2 = f.dataset("Header/ant_2_array").unwrap().read_raw::<i64>().unwrap();
        let data = f.dataset("Data/visdata").unwrap().read_raw::<Complex<f64>>().unwrap();
        let src = outcome.sources[0];
        // ENU direction of the source: l is toward north, m toward east.
        let s = [src.m, src.l, (1.0 - src.l * src.l - src.m * src.m).sqrt()];
        // Coherence of XX after removing the predicted phase (sign +1) or its opposite (-1).
        let coherence = |sign: f64| {
            let (mut sum, mut norm) = (Complex::new(0.0, 0.0), 0.0);
            for b in 0..ant1.len() {
                if ant1[b] == ant2[b] {
                    continue;
                }
                let w: f64 = (0..3).map(|k| uvw[3 * b + k] * s[k]).sum();
                for (c, &nu) in freq.iter().enumerate().skip(15) {
                    let v = data[(b * freq.len() + c) * 4];
                    sum +=
                        v * Complex::from_polar(1.0, -sign * std::f64::consts::TAU * nu * w / 299_792_458.0);
                    norm += v.norm();
                }
            }
            sum.norm() / norm
        };
        let (right, wrong) = (coherence(1.0), coherence(-1.0));
        assert!(right > 0.5 && wrong < 0.2, "coherence {right} with pyuvdata's sign, {wrong} without");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(not(feature = "uvh5"))]
#[test]
fn uvh5_needs_the_feature() {
    let options = Options { uvh5: Some("v.uvh5".into()), ..Options::cpu_default() };
    let e = options.validate().expect_err("no UVH5 writer in this build");
    assert!(e.to_string().contains("--features uvh5"), "{e}");
}
