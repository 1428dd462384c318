//! `cargo bench --bench frb_resample`: the FRB beamformer's second kernel (issue 8),
//! non-factorizable beams, for seed Table 4's cases: one launch covers one second of data
//! (F channels of 1 / t_f slow samples), so its time is the time per second of data (and the
//! real-time fraction). Also the W kernel (`set_beams`, run when beams move), f16 tensor
//! TFLOP/s (`2 * 4MN` per output) as a fraction of this GPU's f16 m16n8k16 f32-accumulate
//! ceiling and, for the wgmma GEMM, of the wgmma f16 m64n256k16 one (`ceilings.json`; run the
//! ceilings bench first), and the cuBLAS figures.
//! On Hopper both GEMM kernel families run: sm_90a `wgmma` and the sm_80 `mma.sync` ones
//! (`set_wgmma_enabled(false)`), W path and fused path each; times are also given as
//! multiples of the cuBLAS time (targets: GEMM <= 1.25, fused <= 1).
mod common;

use common::{median_ms, read_ceiling};
use criterion::Throughput;
use radio_kernels::frb_beamformer::resample::{FusedResampler, ResampleConfig, Resampler};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const REPS: usize = 7;

/// One case's medians: (GEMM, fused) ms per kernel family, W and U kernels.
struct Row {
    label: &'static str,
    config: ResampleConfig,
    cublas: Option<&'static str>,
    wgmma: Option<(f64, f64)>,
    sm80: Option<(f64, f64)>,
    w_ms: f64,
    u_ms: f64,
}

fn main() {
    let Some(gpu) = common::open_gpu("FRB resampling bench") else {
        return;
    };
    let peak = read_ceiling("mma f16 m16n8k16 f32-acc");
    let wgmma_peak = read_ceiling("wgmma f16 m64n256k16 f32-acc");
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
        if let Err(error) = config.validate() {
            println!("{label}: skipped, {error}");
            continue;
        }
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
        group.throughput(Throughput::Elements(config.flops() as u64));
        group.sample_size(10);
        // Both GEMM kernels where the GPU has wgmma (true first), else the sm_80 one only;
        // each path's W resampler, then its fused one (W dropped first, so that the fused
        // case also runs where W would not fit next to it).
        let mut row = Row { label, config, cublas, wgmma: None, sm80: None, w_ms: 0.0, u_ms: 0.0 };
        for wgmma in [true, false] {
            gpu.set_wgmma_enabled(wgmma);
            if wgmma && !gpu.wgmma_enabled() {
                continue;
            }
            let name = if wgmma { "wgmma" } else { "sm80" };
            let mut resampler = Resampler::new(&gpu, config).expect("resampler");
            let w_ms = median_ms(&gpu, REPS, || resampler.set_beams(&theta, &theta_prime).expect("W"));
            let ms = median_ms(&gpu, REPS, || resampler.resample(&i, &mut j).expect("GEMM"));
            group.bench_function(format!("{label} {name}"), |b| {
                b.iter_custom(|iters| {
                    common::event_time(&gpu, iters, || resampler.resample(&i, &mut j).expect("GEMM"))
                })
            });
            drop(resampler);
            let mut fused = FusedResampler::new(&gpu, config).expect("fused resampler");
            let u_ms = median_ms(&gpu, REPS, || fused.set_beams(&theta, &theta_prime).expect("U"));
            let fused_ms = median_ms(&gpu, REPS, || fused.resample(&i, &mut j).expect("fused GEMM"));
            group.bench_function(format!("{label} {name} fused"), |b| {
                b.iter_custom(|iters| {
                    common::event_time(&gpu, iters, || fused.resample(&i, &mut j).expect("fused GEMM"))
                })
            });
            row.w_ms = w_ms;
            row.u_ms = u_ms;
            if wgmma {
                row.wgmma = Some((ms, fused_ms));
            } else {
                row.sm80 = Some((ms, fused_ms));
            }
        }
        gpu.set_wgmma_enabled(true);
        rows.push(row);
    }
    group.finish();

    println!(
        "\nFRB resampling (non-factorizable, J = I W) on {}, one second of data per launch, medians of {REPS} (ms; \
         x cuB = time / the issue's cuBLAS time, its faster figure; TFLOP/s as % of the mma.sync f16 ceiling and, for the wgmma GEMM, of the wgmma f16 one):",
        gpu.name()
    );
    println!(
        "{:<26} {:>11} {:>7} {:>11} {:>7} {:>10} {:>10} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9}",
        "case",
        "wgmma GEMM",
        "x cuB",
        "wgmma fused",
        "x cuB",
        "sm80 GEMM",
        "sm80 fused",
        "W ms",
        "U ms",
        "cuBLAS",
        "wgmma TF",
        "of mma pk",
        "of wgmma"
    );
    let na = || "-".to_string();
    for r in rows {
        let cublas_ms = r.cublas.map(|c| c.split('-').next().unwrap().parse::<f64>().unwrap());
        let ratio = |ms: f64| cublas_ms.map_or_else(na, |c| format!("{:.2}", ms / c));
        let (wg, wf) = r.wgmma.map_or((na(), na()), |(g, f)| (format!("{g:.3}"), format!("{f:.3}")));
        let (wgr, wfr) = r.wgmma.map_or((na(), na()), |(g, f)| (ratio(g), ratio(f)));
        let (sg, sf) = r.sm80.map_or((na(), na()), |(g, f)| (format!("{g:.3}"), format!("{f:.3}")));
        let tflops = r.wgmma.or(r.sm80).map(|(g, _)| r.config.flops() / g / 1e9).unwrap_or(0.0);
        println!(
            "{:<26} {:>11} {:>7} {:>11} {:>7} {:>10} {:>10} {:>8.3} {:>8.3} {:>9} {:>9.0} {:>9} {:>9}",
            r.label,
            wg,
            wgr,
            wf,
            wfr,
            sg,
            sf,
            r.w_ms,
            r.u_ms,
            r.cublas.unwrap_or("-"),
            tflops,
            peak.map_or("n/a".into(), |p| format!("{:.1}%", 100.0 * tflops / p)),
            wgmma_peak
                .filter(|_| r.wgmma.is_some())
                .map_or("n/a".into(), |p| format!("{:.1}%", 100.0 * tflops / p)),
        );
    }
    criterion.final_summary();
}
