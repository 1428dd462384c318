//! `cargo bench --bench frb_factorized`: the FRB beamformer's second kernel for factorizable
//! beams, the beam grids (B_x, B_y) = (4M, 4N) of Table 4 of Smith, CHORD FRB beamformer
//! design note (2022): one launch covers
//! one second of data (F channels of 1 / t_f slow samples), so its time is the time per second
//! of data. Reported: useful f16 tensor TFLOP/s (eq. 149) as a fraction of this GPU's
//! m16n8k16 f32-accumulate ceiling, I + J bytes per time as a fraction of the device-copy
//! ceiling (`ceilings.json`; run the ceilings bench first), `set_grid` (host U in f64 plus
//! upload), and the non-factorizable GEMM (`Resampler`, W precomputed) on the same B = G G'
//! beams for comparison.
mod common;

use common::{median_ms, read_ceiling};
use criterion::Throughput;
use radio_kernels::frb_beamformer::factorized::{FactorizedConfig, FactorizedResampler};
use radio_kernels::frb_beamformer::resample::{ResampleConfig, Resampler};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;

const REPS: usize = 7;

fn main() {
    let Some(gpu) = common::open_gpu("FRB factorized resampling bench") else {
        return;
    };
    let peak = read_ceiling("mma f16 m16n8k16 f32-acc");
    let copy = read_ceiling("device copy");
    let mut criterion = common::kernel_criterion();
    let mut group = criterion.benchmark_group("frb_factorized");
    // (label, F, slow samples per second = 1 / t_f, M, N); grids (4M, 4N).
    let mut rows = Vec::new();
    let mut rng = StdRng::seed_from_u64(12);
    for (label, channels, times, m, n) in common::FRB_NOTE_TABLE_4 {
        let config = FactorizedConfig { channels, times, m, n, g: 4 * m, g_prime: 4 * n };
        let mut resampler = match FactorizedResampler::new(&gpu, config) {
            Ok(r) => r,
            Err(error) => {
                println!("{label}: skipped, {error}");
                continue;
            }
        };
        // Intensities in [0, 2) (valid f16 bits), grids anywhere on the sky.
        let i = radio_kernels::summary::random_intensities(config.intensity_len(), 0x9e37_79b9);
        let i = gpu.upload(&i).expect("I");
        let theta: Vec<f32> =
            (0..config.theta_len()).map(|_| rng.random_range(-(m as f32)..m as f32)).collect();
        let theta_prime: Vec<f32> =
            (0..config.theta_prime_len()).map(|_| rng.random_range(-(n as f32)..n as f32)).collect();
        let start = Instant::now();
        resampler.set_grid(&theta, &theta_prime).expect("U");
        gpu.synchronize().expect("sync");
        let grid_ms = start.elapsed().as_secs_f64() * 1e3;
        let mut j = gpu.alloc::<radio_kernels::f16>(config.output_len(), 0).expect("J");
        let ms = median_ms(&gpu, REPS, || resampler.resample(&i, &mut j).expect("factorized"));
        group.throughput(Throughput::Elements(config.flops() as u64));
        group.sample_size(10);
        group.bench_function(label, |b| {
            b.iter_custom(|iters| {
                common::event_time(&gpu, iters, || resampler.resample(&i, &mut j).expect("factorized"))
            })
        });
        drop(j);
        drop(resampler);
        // The non-factorizable GEMM on the same beams (W built on the GPU beforehand).
        let general = ResampleConfig { channels, times, m, n, beams: config.beams() };
        let gemm_ms = Resampler::new(&gpu, general).ok().map(|mut r| {
            let (t, tp) = config.expand(&theta, &theta_prime).expect("expanded beams");
            r.set_beams(&gpu.upload(&t).expect("theta"), &gpu.upload(&tp).expect("theta'")).expect("W");
            let mut j = gpu.alloc::<radio_kernels::f16>(general.output_len(), 0).expect("J");
            median_ms(&gpu, REPS, || r.resample(&i, &mut j).expect("GEMM"))
        });
        rows.push((label, config, ms, grid_ms, gemm_ms));
    }
    group.finish();

    println!(
        "\nFRB factorized resampling (fused V = U^T I, J = V U') on {}, one second of data per launch, medians of {REPS}:",
        gpu.name()
    );
    println!(
        "{:<26} {:>9} {:>8} {:>10} {:>8} {:>9} {:>9} {:>9} {:>11} {:>8}",
        "case",
        "grid",
        "ms",
        "real time",
        "TFLOP/s",
        "of f16 pk",
        "GB/s",
        "of copy",
        "set_grid ms",
        "GEMM ms"
    );
    for (label, config, ms, grid_ms, gemm_ms) in rows {
        let tflops = config.flops() / ms / 1e9;
        let bytes = 2.0 * (config.intensity_len() + config.output_len()) as f64;
        let gbs = bytes / ms / 1e6;
        println!(
            "{:<26} {:>9} {:>8.3} {:>9.3}% {:>8.1} {:>9} {:>9.0} {:>9} {:>11.1} {:>8}",
            label,
            format!("{}x{}", config.g, config.g_prime),
            ms,
            ms / 10.0,
            tflops,
            peak.map_or("n/a".into(), |p| format!("{:.1}%", 100.0 * tflops / p)),
            gbs,
            copy.map_or("n/a".into(), |c| format!("{:.1}%", 100.0 * gbs / c)),
            grid_ms,
            gemm_ms.map_or("n/a".into(), |g| format!("{g:.3}")),
        );
    }
    criterion.final_summary();
}
