//! Shared pieces of the benchmarks: CUDA-event timing and the ceilings file.
#![allow(dead_code)] // each bench binary uses a subset

pub mod cublas;

use radio_kernels::{DeviceBufferMut, Gpu};
use std::path::PathBuf;
use std::time::Duration;

/// Opens GPU 0, or says in one line why a benchmark has nothing to measure.
pub fn open_gpu(bench: &str) -> Option<Gpu> {
    match radio_kernels::open(0) {
        Ok(gpu) => Some(gpu),
        Err(e) => {
            println!("{bench}: no GPU ({e}); nothing to measure");
            None
        }
    }
}

/// Fills `buffer` with random bytes on the device ([`radio_kernels::summary::fill_random`]).
pub fn fill_random<T: bytemuck::Pod>(gpu: &Gpu, buffer: DeviceBufferMut<'_, T>, seed: u32) {
    radio_kernels::summary::fill_random(gpu, buffer, seed).expect("fill launch");
}

/// The criterion settings of the kernel benchmarks (10 samples, 0.2 s warm-up, 2 s of
/// measurement, no plots; the command line may override them).
pub fn kernel_criterion() -> criterion::Criterion {
    criterion_with(Duration::from_millis(200), Duration::from_secs(2))
}

/// The settings every benchmark binary builds its criterion from: 10 samples, the given
/// warm-up and measurement times, and no plots, then the command line's overrides.
///
/// Plots are off because criterion draws them with `plotters`, whose text in this workspace
/// goes through `ab_glyph` (the demo's figures enable that feature) and finds no registered
/// font in a bench binary: the first plot fails with `FontUnavailable` and criterion panics,
/// whether or not the machine has system fonts. The numbers (stdout and `target/criterion`'s
/// JSON) do not need them; `--plotting-backend gnuplot` turns plots back on where gnuplot is
/// installed.
pub fn criterion_with(warm_up: Duration, measurement: Duration) -> criterion::Criterion {
    criterion::Criterion::default()
        .sample_size(10)
        .warm_up_time(warm_up)
        .measurement_time(measurement)
        .without_plots()
        .configure_from_args()
}

/// One measured ceiling.
pub struct Ceiling {
    pub name: String,
    pub unit: &'static str,
    pub value: f64,
    pub median_ms: f64,
}

/// Median over `reps` launches of the GPU time of `launch`, after one warm-up launch
/// ([`radio_kernels::summary::median_ms`]).
pub fn median_ms(gpu: &Gpu, reps: usize, mut launch: impl FnMut()) -> f64 {
    radio_kernels::summary::median_ms(gpu, reps, || {
        launch();
        Ok(())
    })
    .expect("CUDA events")
}

/// GPU time of `n` back-to-back launches, for criterion's `iter_custom`.
pub fn event_time(gpu: &Gpu, n: u64, mut launch: impl FnMut()) -> Duration {
    let timer = gpu.timer().expect("CUDA events");
    timer.start().expect("event");
    for _ in 0..n {
        launch();
    }
    let ms = timer.stop().expect("event") as f64;
    Duration::from_secs_f64(ms / 1e3)
}

/// Where benchmark results go: `$RADIO_KERNELS_BENCH_OUT`, else `target/radio-kernels-bench`.
pub fn out_dir() -> PathBuf {
    let dir = std::env::var_os("RADIO_KERNELS_BENCH_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/radio-kernels-bench"));
    std::fs::create_dir_all(&dir).expect("benchmark output folder");
    dir
}

/// Writes `ceilings.json` (hand-formatted; one object per ceiling) and returns its path.
pub fn write_ceilings(gpu: &Gpu, ceilings: &[Ceiling]) -> PathBuf {
    let entries: Vec<String> = ceilings
        .iter()
        .map(|c| {
            format!(
                "    {{\"name\": \"{}\", \"unit\": \"{}\", \"value\": {:.3}, \"median_ms\": {:.5}}}",
                c.name, c.unit, c.value, c.median_ms
            )
        })
        .collect();
    let json = format!(
        "{{\n  \"gpu\": \"{}\",\n  \"sm_count\": {},\n  \"ceilings\": [\n{}\n  ]\n}}\n",
        gpu.name(),
        gpu.sm_count(),
        entries.join(",\n")
    );
    let path = out_dir().join("ceilings.json");
    std::fs::write(&path, json).expect("write ceilings.json");
    path
}

/// Reads a ceiling value by name from `ceilings.json` (written by `cargo bench --bench
/// ceilings` on this machine), for reporting fractions.
pub fn read_ceiling(name: &str) -> Option<f64> {
    let text = std::fs::read_to_string(out_dir().join("ceilings.json")).ok()?;
    let line = text.lines().find(|l| l.contains(&format!("\"name\": \"{name}\"")))?;
    let value = line.split("\"value\": ").nth(1)?.split(',').next()?;
    value.trim().parse().ok()
}

/// The cases of Table 4 of Smith, CHORD FRB beamformer design note (2022), one second of data each:
/// (label, channels F, slow samples per second, M, N).
pub const FRB_NOTE_TABLE_4: [(&str, u32, u32, u32, u32); 5] = [
    ("pathfinder square (8, 8)", 2048, 917, 8, 8),
    ("pathfinder rect. (8, 12)", 2048, 917, 8, 12),
    ("HIRAX square (16, 16)", 1024, 980, 16, 16),
    ("HIRAX rect. (16, 20)", 1024, 980, 16, 20),
    ("full CHORD (24, 24)", 256, 917, 24, 24),
];
