//! `cargo bench --bench frb_resample`: the FRB beamformer's second kernel (issue 8),
//! non-factorizable beams, for seed Table 4's cases: one launch covers one second of data
//! (F channels of 1 / t_f slow samples), so its time is the time per second of data (and the
//! real-time fraction). Also the W kernel (`set_beams`, run when beams move), f16 tensor
//! TFLOP/s (`2 * 4MN` per output) as a fraction of this GPU's f16 m16n8k16 f32-accumulate
//! ceiling (`ceilings.json`; run the ceilings bench first), and the cuBLAS figures.
mod common;

use common::{median_ms, read_ceiling};
use criterion::Throughput;
use radio_kernels::frb_beamformer::resample::{FusedResampler, ResampleConfig, Resampler};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const REPS: usize = 7;

fn main() {
    let Some(gpu) = common::open_gpu("FRB resampling bench") else {
        return;
    };
    let peak = read_ceiling("mma f16 m16n8k16 f32-acc");
    let mut criterion = common::kernel_criterion();
    let mut group = criterion.benchmark_group("frb_resample");
    // (label, F, slow samples per second = 1 / t_f, M, N, B = 10 MN, cuBLAS ms on the H200).
    let mut rows = Vec::new();
    let mut rng = StdRng::seed_from_u64(11);
    for (label, channels, times, m, n) in common::SEED_TABLE_4 {
        // Table 4's beam count, 10 MN, and the cuBLAS figures (ms per second of data).
        let beams = 10 * m * n;
        let cublas = match (m, n) {
            (16, 16) => Some("8.7"),
            (24, 24) => Some("9.2-10.2"),
            _ => None,
        };
        let config = ResampleConfig { channels, times, m, n, beams };
        let mut resampler = match Resampler::new(&gpu, config) {
            Ok(r) => r,
            Err(error) => {
                println!("{label}: skipped, {error}");
                continue;
            }
        };
        // Intensities in [0, 2) (valid f16 bits), beams anywhere on the sky.
        let i = radio_kernels::summary::random_intensities(config.intensity_len(), 0x9e37_79b9);
        let i = gpu.upload(&i).expect("I");
        let theta: Vec<f32> =
            (0..config.positions_len()).map(|_| rng.random_range(-(m as f32)..m as f32)).collect();
        let theta_prime: Vec<f32> =
            (0..config.positions_len()).map(|_| rng.random_range(-(n as f32)..n as f32)).collect();
        let (theta, theta_prime) =
            (gpu.upload(&theta).expect("theta"), gpu.upload(&theta_prime).expect("theta'"));
        let mut j = gpu.alloc::<u16>(config.output_len(), 0).expect("J");
        let w_ms = median_ms(&gpu, REPS, || resampler.set_beams(&theta, &theta_prime).expect("W"));
        let ms = median_ms(&gpu, REPS, || resampler.resample(&i, &mut j).expect("GEMM"));
        group.throughput(Throughput::Elements(config.flops() as u64));
        group.sample_size(10);
        group.bench_function(label, |b| {
            b.iter_custom(|iters| {
                common::event_time(&gpu, iters, || resampler.resample(&i, &mut j).expect("GEMM"))
            })
        });
        // The fused path (no W): U kernel and GEMM. W is dropped first so that the fused
        // case also runs where W would not fit next to it.
        drop(resampler);
        let mut fused = FusedResampler::new(&gpu, config).expect("fused resampler");
        let u_ms = median_ms(&gpu, REPS, || fused.set_beams(&theta, &theta_prime).expect("U"));
        let fused_ms = median_ms(&gpu, REPS, || fused.resample(&i, &mut j).expect("fused GEMM"));
        rows.push((label, config, ms, w_ms, cublas, fused_ms, u_ms));
        group.bench_function(format!("{label} fused"), |b| {
            b.iter_custom(|iters| {
                common::event_time(&gpu, iters, || fused.resample(&i, &mut j).expect("fused GEMM"))
            })
        });
    }
    group.finish();

    println!("\nFRB resampling (non-factorizable, J = I W) on {}, one second of data per launch, medians of {REPS}:", gpu.name());
    println!(
        "{:<26} {:>10} {:>10} {:>9} {:>10} {:>10} {:>12} {:>10} {:>10} {:>10}",
        "case",
        "GEMM ms",
        "real time",
        "TFLOP/s",
        "of f16 pk",
        "W ms",
        "cuBLAS ms",
        "fused ms",
        "of f16 pk",
        "U ms"
    );
    for (label, config, ms, w_ms, cublas, fused_ms, u_ms) in rows {
        let tflops = config.flops() / ms / 1e9;
        let fused_tflops = config.flops() / fused_ms / 1e9;
        println!(
            "{:<26} {:>10.3} {:>9.2}% {:>9.0} {:>10} {:>10.3} {:>12} {:>10.3} {:>10} {:>10.3}",
            label,
            ms,
            ms / 10.0,
            tflops,
            peak.map_or("n/a".into(), |p| format!("{:.1}%", 100.0 * tflops / p)),
            w_ms,
            cublas.unwrap_or("-"),
            fused_ms,
            peak.map_or("n/a".into(), |p| format!("{:.1}%", 100.0 * fused_tflops / p)),
            u_ms
        );
    }
    criterion.final_summary();
}
