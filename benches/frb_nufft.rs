//! `cargo bench --bench frb_nufft`: the NUFFT resampling path (issue 8, "Going further"),
//! one second of data per launch for seed Table 4's cases (B = 10 MN beams at random
//! positions, I random in [0, 2)), next to the exact W-path GEMM (`Resampler`, wgmma on
//! Hopper) and cuBLAS's HGEMM on the same arrays (f32 accumulation, `common::cublas`) in the
//! same process, and the issue's cuBLAS figures where cuBLAS cannot run. Reports
//! medians, the real-time fraction, and the f32 multiply-adds the fused kernel does per second
//! (grid step `2M 2N 4N + 4M 2M 4N` and interpolation `B w (w + 1)` per (f, tbar); no f32
//! ceiling is measured by `ceilings`, so no fraction of one).
mod common;

use common::cublas::{Accumulate, Hgemm};
use common::median_ms;
use criterion::Throughput;
use radio_kernels::frb_beamformer::nufft::{GpuNufft, NufftPlan, NUFFT_DEFAULT, WIDTH};
use radio_kernels::frb_beamformer::resample::{ResampleConfig, Resampler};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const REPS: usize = 7;

fn main() {
    let Some(gpu) = common::open_gpu("FRB NUFFT bench") else {
        return;
    };
    let hgemm = Hgemm::new(&gpu);
    let mut criterion = common::kernel_criterion();
    let mut group = criterion.benchmark_group("frb_nufft");
    let mut rows = Vec::new();
    for (label, channels, times, m, n) in common::SEED_TABLE_4 {
        let beams = 10 * m * n;
        let mut rng = StdRng::seed_from_u64(0x4e75_b000);
        let positions = channels as usize * beams as usize;
        let theta: Vec<f32> = (0..positions).map(|_| rng.random_range(0.0..m as f32)).collect();
        let theta_prime: Vec<f32> = (0..positions).map(|_| rng.random_range(0.0..n as f32)).collect();
        let plan = NufftPlan::new(m, n, channels, &theta, &theta_prime, NUFFT_DEFAULT).expect("plan");
        let nufft = GpuNufft::new(&gpu, &plan).expect("GPU NUFFT");
        let config = ResampleConfig { channels, times, m, n, beams };
        let intensity = gpu
            .upload(&radio_kernels::summary::random_intensities(config.intensity_len(), 0x4e75))
            .expect("I");
        let mut out = gpu.alloc::<u16>(config.output_len(), 0).expect("J");
        let nufft_ms = median_ms(&gpu, REPS, || nufft.resample(times, &intensity, &mut out).expect("launch"));
        let (exact_ms, cublas_ms) = if matches!((m, n), (16, 16) | (24, 24)) {
            let mut exact = Resampler::new(&gpu, config).expect("resampler");
            let (t, tp) = (gpu.upload(&theta).expect("theta"), gpu.upload(&theta_prime).expect("theta'"));
            exact.set_beams(&t, &tp).expect("W");
            let exact_ms = median_ms(&gpu, REPS, || exact.resample(&intensity, &mut out).expect("GEMM"));
            let cublas_ms = hgemm.as_ref().map(|h| {
                median_ms(&gpu, REPS, || {
                    h.resample(&gpu, &config, Accumulate::F32, &intensity, exact.weights(), &mut out)
                })
            });
            (Some(exact_ms), cublas_ms)
        } else {
            (None, None)
        };
        let samples = channels as f64 * times as f64;
        let (m2, n2, lm, ln) = (2.0 * m as f64, 2.0 * n as f64, 4.0 * m as f64, 4.0 * n as f64);
        let w = WIDTH as f64;
        let fmas = samples * (m2 * n2 * ln + lm * m2 * ln + beams as f64 * w * (w + 1.0));
        if matches!((m, n), (16, 16) | (24, 24)) {
            group.throughput(Throughput::Elements(config.output_len() as u64));
            group.bench_function(label, |b| {
                b.iter_custom(|iters| {
                    common::event_time(&gpu, iters, || {
                        nufft.resample(times, &intensity, &mut out).expect("launch")
                    })
                })
            });
        }
        rows.push((label, m, n, nufft_ms, exact_ms, cublas_ms, fmas));
    }
    group.finish();

    println!(
        "\nFRB resampling by NUFFT (sigma = 2, w = {WIDTH}) on {}, one second of data per launch, medians of {REPS}:",
        gpu.name()
    );
    println!(
        "{:<26} {:>10} {:>10} {:>12} {:>12} {:>10} {:>12} {:>12}",
        "case", "NUFFT ms", "real time", "f32 TFMA/s", "exact GEMM", "x exact", "cuBLAS", "x cuBLAS"
    );
    for (label, m, n, ms, exact, measured_cublas, fmas) in rows {
        // Speed-up over cuBLAS (f32 accumulation) measured here, else over the issue's figure.
        let issue_cublas = match (m, n) {
            (16, 16) => Some(8.7),
            (24, 24) => Some(9.2),
            _ => None,
        };
        let cublas = measured_cublas.or(issue_cublas);
        println!(
            "{:<26} {:>10.3} {:>9.3}% {:>12.1} {:>12} {:>10} {:>12} {:>12}",
            label,
            ms,
            ms / 10.0,
            fmas / ms / 1e9,
            exact.map_or("-".into(), |e| format!("{e:.3} ms")),
            exact.map_or("-".into(), |e| format!("{:.2}", e / ms)),
            match (measured_cublas, issue_cublas) {
                (Some(c), _) => format!("{c:.3} ms"),
                (None, Some(c)) => format!("{c} (issue)"),
                _ => "-".into(),
            },
            cublas.map_or("-".into(), |c| format!("{:.2}", c / ms)),
        );
    }
    criterion.final_summary();
}
