//! The main job's CPU path at a small size (runs in CI): the simulated sky through the CPU
//! references finds the brightest source in the correlator's image and on the FRB map, beams
//! on the sources beat beams off them, and the four figures are written as PNG files.
use radio_kernels::demo::{self, Options};

#[test]
fn cpu_chain_finds_the_sources_and_writes_the_figures() {
    let out = std::env::temp_dir().join(format!("radio-kernels-demo-test-{}", std::process::id()));
    let options = Options { channels: 64, out: out.clone(), ..Options::cpu_default() };
    let outcome = demo::run(&options, None, &|_| {}).expect("the CPU chain runs");
    println!("{}", demo::report(&outcome));
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
    seconds.set_seconds(1e-3);
    assert!(seconds.duration() >= 1e-3 && seconds.heaps > 1);
}
