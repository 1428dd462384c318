//! The command line refuses what it cannot do as asked: every bad argument (out of its type's
//! range, out of the option's range, non-finite, a derived size that does not fit, an
//! unwritable output folder, an unknown option, a missing value) exits with status 2 and a
//! message on stderr naming the option, before any work: nothing on stdout (no stage ran, no
//! table row) and no output folder made. A valid small run on the CPU still exits 0.
//!
//! These run the built binary and need no GPU: every rejection happens before a GPU is
//! opened, and the valid run passes `--cpu`.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh folder for one test, removed first if a previous run left it.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("radio-kernels-cli-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

/// Runs the binary with `args` in `cwd` (so a default `demo-out` would land there).
fn radio_kernels(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_radio-kernels"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("the radio-kernels binary runs")
}

/// Runs the demo with `args` plus an `--out` folder that does not exist yet, and checks the
/// refusal: status 2, a first stderr line `error: <option>...` naming every option in
/// `named`, nothing on stdout, and no output folder (nor default `demo-out`) created.
fn demo_refuses(test: &str, args: &[&str], named: &[&str]) -> String {
    let dir = scratch(test);
    let out = dir.join("figures");
    let mut all: Vec<&str> = args.to_vec();
    let out_arg = out.to_str().expect("a UTF-8 temp path");
    all.extend(["--out", out_arg]);
    let message = refuses(&dir, &all, named);
    assert!(!out.exists(), "{args:?}: the output folder was created");
    assert!(!dir.join("demo-out").exists(), "{args:?}: demo-out was created");
    let _ = std::fs::remove_dir_all(&dir);
    message
}

/// Runs the binary with `args` in `cwd` and checks the refusal (see [`demo_refuses`]); returns
/// the error line.
fn refuses(cwd: &Path, args: &[&str], named: &[&str]) -> String {
    let output = radio_kernels(cwd, args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{args:?}: stdout {stdout:?}, stderr {stderr:?}");
    assert!(stdout.is_empty(), "{args:?}: work was done or printed: {stdout:?}");
    let line = stderr.lines().next().unwrap_or_default().to_string();
    assert!(line.starts_with(&format!("error: {}", named[0])), "{args:?}: {stderr:?}");
    for name in named {
        assert!(line.contains(name), "{args:?}: the message does not name {name}: {line:?}");
    }
    line
}

#[test]
fn dishes_past_u32_are_refused_not_wrapped() {
    let line = demo_refuses("dishes", &["--dishes", "4294967360"], &["--dishes"]);
    assert!(line.contains("4294967360") && line.contains("out of range"), "{line}");
}

#[test]
fn channels_past_u32_are_refused_not_wrapped() {
    let line = demo_refuses("channels", &["--channels", "4294967424"], &["--channels"]);
    assert!(line.contains("4294967424") && line.contains("out of range"), "{line}");
}

#[test]
fn sources_past_u32_are_refused_not_wrapped() {
    let line = demo_refuses("sources", &["--sources", "4294967299"], &["--sources"]);
    assert!(line.contains("4294967299") && line.contains("out of range"), "{line}");
}

#[test]
fn negative_seconds_are_refused_not_clamped() {
    let line = demo_refuses("seconds-negative", &["--seconds", "-1"], &["--seconds"]);
    assert!(line.contains("-1"), "{line}");
}

#[test]
fn nan_seconds_are_refused_not_clamped() {
    let line = demo_refuses("seconds-nan", &["--seconds", "NaN"], &["--seconds"]);
    assert!(line.contains("NaN") && line.contains("finite"), "{line}");
    demo_refuses("seconds-inf", &["--seconds", "inf"], &["--seconds"]);
}

#[test]
fn seconds_whose_spectra_do_not_fit_are_refused_not_wrapped() {
    // 343.5974 s at 128 channels is 2^32 + 256 spectra, which a u32 product wraps to 256.
    let line = demo_refuses(
        "seconds-wrap",
        &["--channels", "128", "--seconds", "343.5974"],
        &["--seconds", "--channels"],
    );
    assert!(line.contains("4294967552 spectra"), "{line}");
}

#[test]
fn zero_cases_are_refused_not_clamped() {
    let dir = scratch("cases");
    let line = refuses(&dir, &["selftest", "--cases", "0"], &["--cases"]);
    assert!(line.contains("out of range"), "{line}");
    refuses(&dir, &["selftest", "--cases", "4097"], &["--cases"]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn unknown_options_are_refused() {
    let line = demo_refuses("unknown", &["--frobnicate"], &["--frobnicate"]);
    assert!(line.contains("unknown option"), "{line}");
    // An option of another subcommand is unknown here.
    demo_refuses("unknown-cases", &["demo", "--cases", "3"], &["--cases"]);
    let dir = scratch("unknown-bench");
    refuses(&dir, &["bench", "--seed", "3"], &["--seed"]);
    refuses(&dir, &["selftest", "--dishes", "64"], &["--dishes"]);
    refuses(&dir, &["frobnicate"], &["frobnicate"]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn missing_values_are_refused() {
    let dir = scratch("missing");
    for (args, option) in [
        (&["--dishes"][..], "--dishes"),
        (&["demo", "--seconds"][..], "--seconds"),
        (&["selftest", "--cases"][..], "--cases"),
        (&["bench", "--device"][..], "--device"),
        // The next token is an option, not a value.
        (&["--out", "--cpu"][..], "--out"),
    ] {
        let line = refuses(&dir, args, &[option]);
        assert!(line.contains("missing value"), "{line}");
    }
    assert!(!dir.join("demo-out").exists());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn malformed_and_repeated_values_are_refused() {
    for (test, args, option) in [
        ("word", &["--dishes", "sixty-four"][..], "--dishes"),
        ("negative", &["--sources", "-3"][..], "--sources"),
        ("not-allowed", &["--dishes", "100"][..], "--dishes"),
        ("not-power", &["--channels", "96"][..], "--channels"),
        ("seed-past-u64", &["--seed", "18446744073709551616"][..], "--seed"),
        ("zero-seconds", &["--seconds", "0"][..], "--seconds"),
        ("twice", &["--dishes", "64", "--dishes", "256"][..], "--dishes"),
        ("empty", &["--sources", ""][..], "--sources"),
    ] {
        demo_refuses(test, args, &[option]);
    }
}

#[cfg(unix)]
#[test]
fn arguments_that_are_not_utf8_are_refused() {
    use std::os::unix::ffi::OsStrExt;
    let dir = scratch("utf8");
    let output = Command::new(env!("CARGO_BIN_EXE_radio-kernels"))
        .args(["--cpu", "--out"])
        .arg(std::ffi::OsStr::from_bytes(b"figures-\xff"))
        .current_dir(&dir)
        .output()
        .expect("the radio-kernels binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        output.stdout.is_empty() && stderr.starts_with("error: ") && stderr.contains("UTF-8"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_dir(&dir).expect("scratch").count(), 0, "something was written");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_unwritable_output_folder_is_refused_before_any_work() {
    // A folder under a regular file cannot be made, even by root.
    let dir = scratch("out");
    let file = dir.join("a-file");
    std::fs::write(&file, b"not a folder").expect("write the file");
    let out = file.join("figures");
    let args = ["--cpu", "--channels", "64", "--seconds", "1e-6", "--sources", "1", "--out"];
    let mut all = args.to_vec();
    all.push(out.to_str().expect("a UTF-8 temp path"));
    let line = refuses(&dir, &all, &["--out"]);
    assert!(line.contains(out.to_str().unwrap()), "{line}");
    assert_eq!(std::fs::read(&file).expect("the file is still there"), b"not a folder");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn help_exits_zero_with_the_usage() {
    let dir = scratch("help");
    for args in [&["--help"][..], &["-h"][..], &["help"][..]] {
        let output = radio_kernels(&dir, args);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        assert!(stdout.contains("Usage: radio-kernels [OPTIONS]"), "{args:?}: {stdout}");
        // The program's help lists every subcommand and the demo's options (the default).
        for word in ["demo", "selftest", "bench", "stream", "--dishes", "--out", "--version"] {
            assert!(stdout.contains(word), "{args:?}: the usage does not mention {word}: {stdout}");
        }
        assert!(output.stderr.is_empty(), "{args:?}: {:?}", String::from_utf8_lossy(&output.stderr));
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn version_prints_the_package_version() {
    let dir = scratch("version");
    for args in [&["--version"][..], &["-V"][..]] {
        let output = radio_kernels(&dir, args);
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(stdout.trim(), format!("radio-kernels {}", env!("CARGO_PKG_VERSION")), "{args:?}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn each_subcommand_has_its_own_help() {
    let dir = scratch("sub-help");
    let options: [(&str, &[&str]); 4] = [
        (
            "demo",
            &[
                "--dishes",
                "--channels",
                "--seconds",
                "--sources",
                "--out",
                "--cpu",
                "--device",
                "--seed",
                "--uvh5",
                "--filterbank",
            ],
        ),
        ("selftest", &["--device", "--ptx", "--cases", "--seed"]),
        ("bench", &["--device", "--ptx"]),
        (
            "stream",
            &[
                "--engine",
                "--seconds",
                "--depth",
                "--device",
                "--stations",
                "--channels",
                "--bits",
                "--sample-rate",
            ],
        ),
    ];
    let all = [
        "--uvh5",
        "--filterbank",
        "--dishes",
        "--sources",
        "--out",
        "--cpu",
        "--ptx",
        "--cases",
        "--seed",
        "--engine",
        "--depth",
        "--stations",
        "--bits",
        "--sample-rate",
    ];
    for (sub, own) in options {
        for help in [&[sub, "--help"][..], &[sub, "-h"][..], &["help", sub][..]] {
            let output = radio_kernels(&dir, help);
            assert_eq!(output.status.code(), Some(0), "{help:?}");
            let usage = String::from_utf8_lossy(&output.stdout);
            assert!(usage.contains(&format!("Usage: radio-kernels {sub}")), "{help:?}: {usage}");
            for option in own {
                assert!(usage.contains(option), "{help:?} does not describe {option}: {usage}");
            }
            // No option of another subcommand.
            for option in all.iter().filter(|o| !own.contains(o)) {
                assert!(!usage.contains(&format!("{option} ")), "{help:?} describes {option}: {usage}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_small_valid_cpu_run_exits_zero_and_writes_its_figures() {
    let dir = scratch("valid");
    let out = dir.join("figures");
    let output = radio_kernels(
        &dir,
        &[
            "demo",
            "--cpu",
            "--channels",
            "64",
            "--seconds",
            "1e-6",
            "--sources",
            "1",
            "--seed",
            "7",
            "--out",
            out.to_str().expect("a UTF-8 temp path"),
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stdout {stdout}\nstderr {stderr}");
    // Progress bars are drawn only on a terminal: none in a captured stderr.
    assert!(!stderr.contains(['\r', '\u{1b}']), "{stderr:?}");
    // On the CPU, one heap of 128 spectra (the fewest that cover 1 us) at 64 channels.
    assert!(stdout.contains("64 ch x 128 spectra"), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("PFB channelizer")), "{stdout}");
    for figure in ["pfb_channel_response.png", "visibilities.png", "frb_map.png", "beam_power.png"] {
        assert!(out.join(figure).is_file(), "{figure} missing");
    }
    // The write probe is gone.
    let left: Vec<_> = std::fs::read_dir(&out).expect("figures").flatten().map(|e| e.file_name()).collect();
    assert_eq!(left.len(), 4, "{left:?}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Runs `radio-kernels stream` with `args` in a scratch folder and checks the refusal (see
/// [`refuses`]); returns the error line.
fn stream_refuses(test: &str, args: &[&str], named: &[&str]) -> String {
    let dir = scratch(test);
    let mut all = vec!["stream"];
    all.extend_from_slice(args);
    let line = refuses(&dir, &all, named);
    assert_eq!(std::fs::read_dir(&dir).expect("scratch").count(), 0, "{args:?}: something was written");
    let _ = std::fs::remove_dir_all(dir);
    line
}

#[test]
fn stream_options_out_of_range_are_refused_before_any_work() {
    for (test, args, option, says) in [
        ("stream-seconds-zero", &["--seconds", "0"][..], "--seconds", "out of range"),
        ("stream-seconds-negative", &["--seconds", "-2"][..], "--seconds", "out of range"),
        ("stream-seconds-nan", &["--seconds", "NaN"][..], "--seconds", "finite"),
        ("stream-seconds-inf", &["--seconds", "inf"][..], "--seconds", "finite"),
        ("stream-seconds-long", &["--seconds", "3601"][..], "--seconds", "out of range"),
        ("stream-seconds-word", &["--seconds", "two"][..], "--seconds", "not a number"),
        ("stream-depth-zero", &["--depth", "0"][..], "--depth", "out of range"),
        ("stream-depth-deep", &["--depth", "17"][..], "--depth", "out of range"),
        ("stream-depth-wrap", &["--depth", "18446744073709551619"][..], "--depth", "out of range"),
        ("stream-stations-zero", &["--stations", "0"][..], "--stations", "out of range"),
        ("stream-stations-wrap", &["--stations", "4294967808"][..], "--stations", "out of range"),
        ("stream-engine", &["--engine", "xengine"][..], "--engine", "not an engine"),
        ("stream-engine-empty", &["--engine", ""][..], "--engine", "empty"),
    ] {
        let line = stream_refuses(test, args, &[option]);
        assert!(line.contains(says), "{args:?}: {line}");
    }
}

#[test]
fn stream_pfb_shapes_are_checked() {
    // Each is refused for its range before any work, naming the option.
    for (test, args, option) in [
        ("stream-channels-power", &["--channels", "1000"][..], "--channels"),
        ("stream-channels-big", &["--channels", "65536"][..], "--channels"),
        ("stream-bits", &["--bits", "9"][..], "--bits"),
        ("stream-rate-zero", &["--sample-rate", "0"][..], "--sample-rate"),
        ("stream-rate-nan", &["--sample-rate", "nan"][..], "--sample-rate"),
    ] {
        stream_refuses(test, args, &[option]);
    }
    // A shape option of an engine that does not run is refused.
    let line = stream_refuses(
        "stream-shape-other-engine",
        &["--engine", "correlator", "--channels", "1024"],
        &["--channels"],
    );
    assert!(line.contains("pfb"), "{line}");
}

#[test]
fn stream_options_belong_to_stream_only() {
    let dir = scratch("stream-foreign");
    refuses(&dir, &["stream", "--seed", "3"], &["--seed"]);
    refuses(&dir, &["stream", "--cpu"], &["--cpu"]);
    refuses(&dir, &["stream", "--dishes", "64"], &["--dishes"]);
    refuses(&dir, &["stream", "--engine", "correlator", "--engine", "pfb"], &["--engine"]);
    refuses(&dir, &["stream", "--depth"], &["--depth"]);
    refuses(&dir, &["bench", "--engine", "correlator"], &["--engine"]);
    refuses(&dir, &["selftest", "--depth", "3"], &["--depth"]);
    let _ = std::fs::remove_dir_all(&dir);
    demo_refuses("demo-engine", &["--engine", "correlator"], &["--engine"]);
    demo_refuses("demo-stations", &["demo", "--stations", "512"], &["--stations"]);
}

#[test]
fn stream_help_names_the_subcommand_and_its_options() {
    let dir = scratch("stream-help");
    let output = radio_kernels(&dir, &["stream", "--help"]);
    assert_eq!(output.status.code(), Some(0));
    let usage = String::from_utf8_lossy(&output.stdout);
    for word in ["radio-kernels stream", "--engine", "--depth", "--stations", "--bits", "--sample-rate"] {
        assert!(usage.contains(word), "the usage does not mention {word}: {usage}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn stream_on_a_device_that_does_not_exist_is_refused() {
    // With or without a driver, an explicit --device past the devices is a usage error.
    let line =
        stream_refuses("stream-device", &["--engine", "correlator", "--device", "4096"], &["--device"]);
    assert!(line.contains("4096"), "{line}");
}

#[test]
fn stream_without_a_gpu_fails_with_the_typed_error_not_a_panic() {
    if radio_kernels::Gpu::device_count().is_ok_and(|n| n > 0) {
        println!("a GPU is present: this test covers machines without one");
        return;
    }
    let dir = scratch("stream-no-gpu");
    let output = radio_kernels(&dir, &["stream", "--seconds", "0.5"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "stdout {stdout:?}, stderr {stderr:?}");
    assert!(stdout.is_empty(), "{stdout}");
    let expected = match radio_kernels::open(0) {
        Err(e) => e.to_string(),
        Ok(_) => unreachable!("no device was counted"),
    };
    assert!(stderr.contains("needs a GPU") && stderr.contains(&expected), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

/// The small CPU run of [`a_small_valid_cpu_run_exits_zero_and_writes_its_figures`] with
/// `extra` options, in `dir`; returns stdout after checking the exit status 0.
fn small_cpu_run(dir: &Path, subcommand: Option<&str>, extra: &[&str]) -> String {
    let out = dir.join("figures");
    let mut args: Vec<&str> = subcommand.into_iter().collect();
    args.extend(["--cpu", "--channels", "64", "--seconds", "1e-6", "--sources", "1", "--seed", "7"]);
    args.extend(["--out", out.to_str().expect("a UTF-8 temp path")]);
    args.extend(extra);
    let output = radio_kernels(dir, &args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stdout {stdout}\nstderr {stderr}");
    stdout
}

#[test]
fn filterbank_files_are_written_one_per_beam_and_read_back() {
    use radio_kernels::formats::filterbank::{read_file, Spectra};
    let dir = scratch("filterbank");
    let fil = dir.join("beams");
    // Without a subcommand, as the demo's other options.
    let stdout = small_cpu_run(&dir, None, &["--filterbank", fil.to_str().unwrap()]);
    assert!(stdout.contains("data files:"), "{stdout}");
    // 64 channels at 3.2 GHz: channel k at 25 k MHz; channel 0 (DC) is left out.
    for (sub, nbits, spectra) in [("frb", 8, 128 / 64), ("delay", 32, 128)] {
        let mut means = Vec::new();
        for beam in 0..8u32 {
            let path = fil.join(sub).join(format!("beam_{beam:04}.fil"));
            assert!(stdout.contains(path.to_str().unwrap()), "{sub} {beam} not listed: {stdout}");
            let file = read_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let h = &file.header;
            assert_eq!((h.nbits, h.nchans, h.nbeams, h.ibeam), (nbits, 63, 8, beam), "{sub} {beam}");
            assert_eq!((h.fch1, h.foff), (25.0, 25.0), "{sub} {beam}");
            assert_eq!(h.source_name, "radio-kernels demo");
            assert_eq!(h.tstart, radio_kernels::demo::EPOCH_MJD);
            let want_tsamp = if sub == "frb" { 64.0 * 128.0 / 3.2e9 } else { 128.0 / 3.2e9 };
            assert!((h.tsamp - want_tsamp).abs() < 1e-15, "{sub}: tsamp {}", h.tsamp);
            assert_eq!(file.spectra(), spectra, "{sub} {beam}");
            let values: Vec<f64> = match &file.data {
                Spectra::U8(v) => v.iter().map(|&x| x as f64).collect(),
                Spectra::F32(v) => v.iter().map(|&x| x as f64).collect(),
            };
            means.push(values.iter().sum::<f64>() / values.len() as f64);
        }
        // Beam 0 points at the only source: it must be the brightest file.
        assert!(means[1..].iter().all(|&m| m < means[0]), "{sub}: mean per beam {means:?}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn unwritable_data_file_paths_are_refused_before_any_work() {
    let dir = scratch("bad-files");
    let file = dir.join("a-file");
    std::fs::write(&file, b"not a folder").expect("write the file");
    let under_file = file.join("beams");
    let line =
        demo_refuses("bad-filterbank", &["--filterbank", under_file.to_str().unwrap()], &["--filterbank"]);
    assert!(line.contains(under_file.to_str().unwrap()), "{line}");
    if cfg!(feature = "uvh5") {
        let line =
            demo_refuses("bad-uvh5", &["--uvh5", under_file.join("v.uvh5").to_str().unwrap()], &["--uvh5"]);
        assert!(line.contains("a-file"), "{line}");
        let line = demo_refuses("uvh5-folder", &["--uvh5", dir.to_str().unwrap()], &["--uvh5"]);
        assert!(line.contains("is a folder"), "{line}");
    }
    assert_eq!(std::fs::read(&file).expect("the file is still there"), b"not a folder");
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(not(feature = "uvh5"))]
#[test]
fn uvh5_without_the_feature_is_a_usage_error() {
    let dir = scratch("no-uvh5");
    let file = dir.join("v.uvh5");
    for args in [&["--uvh5"][..], &["demo", "--uvh5"][..]] {
        let mut all = args.to_vec();
        all.push(file.to_str().unwrap());
        let line = refuses(&dir, &all, &["--uvh5"]);
        assert!(line.contains("--features uvh5"), "{line}");
    }
    assert!(!file.exists());
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(feature = "uvh5")]
#[test]
fn uvh5_file_is_written_with_every_channel_but_dc() {
    let dir = scratch("uvh5");
    let path = dir.join("vis.uvh5");
    let stdout = small_cpu_run(&dir, Some("demo"), &["--uvh5", path.to_str().unwrap()]);
    assert!(stdout.contains(path.to_str().unwrap()), "{stdout}");
    let f = hdf5::File::open(&path).expect("an HDF5 file");
    let int = |name: &str| f.dataset(&format!("Header/{name}")).unwrap().read_scalar::<i64>().unwrap();
    // 64 dishes, 63 channels (DC left out), one integration, four pols.
    assert_eq!(
        [int("Nants_data"), int("Nbls"), int("Ntimes"), int("Nfreqs"), int("Npols")],
        [64, 64 * 65 / 2, 1, 63, 4]
    );
    let freq = f.dataset("Header/freq_array").unwrap().read_raw::<f64>().unwrap();
    assert_eq!((freq[0], freq[62]), (25e6, 63.0 * 25e6));
    let _ = std::fs::remove_dir_all(dir);
}
