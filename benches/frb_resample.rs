//! `cargo bench --bench frb_resample`: the FRB beamformer's second kernel, non-factorizable
//! beams, for the cases of Table 4 of Smith, CHORD FRB beamformer design note (2022):
//! one launch covers one second of data
//! (F channels of 1 / t_f slow samples), so its time is the time per second of data (and the
//! real-time fraction). Also the W kernel (`set_beams`, run when beams move), f16 tensor
//! TFLOP/s (`2 * 4MN` per output) as a fraction of this GPU's f16 m16n8k16 f32-accumulate
//! ceiling and, for the wgmma GEMM, of the wgmma f16 m64n256k16 one (`ceilings.json`; run the
//! ceilings bench first), and cuBLAS's HGEMM on the same arrays, measured in the same process
//! (strided-batched over channels, f16 in and out, f32 and f16 accumulation; `common::cublas`).
//! On Hopper both GEMM kernel families run: sm_90a `wgmma` and the sm_80 `mma.sync` ones
//! (`set_wgmma_enabled(false)`), W path and fused path each; times are also given as
//! multiples of the measured cuBLAS time with f32 accumulation, the kernels' own arithmetic
//! (targets: GEMM <= 1.25, fused <= 1), and earlier H200 cuBLAS figures are listed beside it.
mod common;

use common::cublas::{Accumulate, Hgemm};
use common::{median_ms, read_ceiling};
use criterion::Throughput;
use half::f16;
use radio_kernels::frb_beamformer::resample::{FusedResampler, ResampleConfig, Resampler};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const REPS: usize = 7;

/// cuBLAS on one case: medians with f32 and f16 accumulation, and how its J (f32
/// accumulation) compares with the W path's: largest difference over max |J|, and the
/// fraction of outputs with the same bits.
struct Cublas {
    f32_ms: f64,
    f16_ms: f64,
    max_difference: f64,
    same_bits: f64,
}

/// One case's medians: (GEMM, fused) ms per kernel family, W and U kernels, cuBLAS.
struct Row {
    label: &'static str,
    config: ResampleConfig,
    earlier_cublas: Option<&'static str>,
    wgmma: Option<(f64, f64)>,
    sm80: Option<(f64, f64)>,
    w_ms: f64,
    u_ms: f64,
    cublas: Option<Cublas>,
}

/// Largest |a - b| over max |a|, and the fraction of equal bit patterns, of two f16 arrays.
fn compare(ours: &[f16], theirs: &[f16]) -> (f64, f64) {
    let value = |x: f16| x.to_f64();
    let scale = ours.iter().map(|&a| value(a).abs()).fold(0.0, f64::max).max(f64::MIN_POSITIVE);
    let max_difference =
        ours.iter().zip(theirs).map(|(&a, &b)| (value(a) - value(b)).abs()).fold(0.0, f64::max);
    let same = ours.iter().zip(theirs).filter(|(a, b)| a.to_bits() == b.to_bits()).count();
    (max_difference / scale, same as f64 / ours.len().max(1) as f64)
}

fn main() {
    let Some(gpu) = common::open_gpu("FRB resampling bench") else {
        return;
    };
    let peak = read_ceiling("mma f16 m16n8k16 f32-acc");
    let wgmma_peak = read_ceiling("wgmma f16 m64n256k16 f32-acc");
    let hgemm = Hgemm::new(&gpu);
    let mut criterion = common::kernel_criterion();
    let mut group = criterion.benchmark_group("frb_resample");
    // (label, F, slow samples per second = 1 / t_f, M, N, B = 10 MN, cuBLAS ms on the H200).
    let mut rows = Vec::new();
    let mut rng = StdRng::seed_from_u64(11);
    for (label, channels, times, m, n) in common::FRB_NOTE_TABLE_4 {
        // Table 4's beam count, 10 MN, and earlier H200 cuBLAS figures (ms per second of data).
        let beams = 10 * m * n;
        let earlier_cublas = match (m, n) {
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
        let mut j = gpu.alloc::<f16>(config.output_len(), 0).expect("J");
        group.throughput(Throughput::Elements(config.flops() as u64));
        group.sample_size(10);
        // Both GEMM kernels where the GPU has wgmma (true first), else the sm_80 one only;
        // each path's W resampler, then its fused one (W dropped first, so that the fused
        // case also runs where W would not fit next to it).
        let mut row = Row {
            label,
            config,
            earlier_cublas,
            wgmma: None,
            sm80: None,
            w_ms: 0.0,
            u_ms: 0.0,
            cublas: None,
        };
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
            // cuBLAS on the same I and W, once per case (its J checked against the W path's).
            if let (Some(hgemm), None) = (&hgemm, &row.cublas) {
                let mut theirs = gpu.alloc::<f16>(config.output_len(), 0xff).expect("cuBLAS J");
                let w = resampler.weights();
                let run = |accumulate, out: &mut radio_kernels::DeviceBuffer<f16>| {
                    hgemm.resample(&gpu, &config, accumulate, &i, w, out)
                };
                let f16_ms = median_ms(&gpu, REPS, || run(Accumulate::F16, &mut theirs));
                let f32_ms = median_ms(&gpu, REPS, || run(Accumulate::F32, &mut theirs));
                group.bench_function(format!("{label} cuBLAS f32-acc"), |b| {
                    b.iter_custom(|iters| {
                        common::event_time(&gpu, iters, || run(Accumulate::F32, &mut theirs))
                    })
                });
                resampler.resample(&i, &mut j).expect("GEMM");
                let (max_difference, same_bits) =
                    compare(&j.download().expect("J"), &theirs.download().expect("cuBLAS J"));
                row.cublas = Some(Cublas { f32_ms, f16_ms, max_difference, same_bits });
            }
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
         cuBLAS = its strided-batched HGEMM on the same I and W, f32 / f16 accumulation; x cuB = time / cuBLAS f32 \
         (an earlier H200 figure where cuBLAS did not run); TFLOP/s of the fastest GEMM kernel as % of the mma.sync f16 \
         ceiling and, for the wgmma GEMM, of the wgmma f16 one; J vs cuBLAS: max |difference| / max |J| of the W \
         path's J against cuBLAS f32's, and the share of equal bits):",
        gpu.name()
    );
    println!(
        "{:<26} {:>10} {:>10} {:>10} {:>10} {:>6} {:>6} {:>9} {:>10} {:>10} {:>8} {:>8} {:>8} {:>9} {:>9} {:>16}",
        "case",
        "wgmma GEMM",
        "wgmma fus.",
        "cuBLAS f32",
        "cuBLAS f16",
        "x cuB",
        "x cuB",
        "H200 cuB",
        "sm80 GEMM",
        "sm80 fused",
        "W ms",
        "U ms",
        "wgmma TF",
        "of mma pk",
        "of wgmma",
        "J vs cuBLAS"
    );
    let na = || "-".to_string();
    for r in rows {
        let earlier_ms = r.earlier_cublas.map(|c| c.split('-').next().unwrap().parse::<f64>().unwrap());
        let reference_ms = r.cublas.as_ref().map(|c| c.f32_ms).or(earlier_ms);
        let ratio = |ms: f64| reference_ms.map_or_else(na, |c| format!("{:.2}", ms / c));
        let (wg, wf) = r.wgmma.map_or((na(), na()), |(g, f)| (format!("{g:.3}"), format!("{f:.3}")));
        let (wgr, wfr) = r.wgmma.map_or((na(), na()), |(g, f)| (ratio(g), ratio(f)));
        let (sg, sf) = r.sm80.map_or((na(), na()), |(g, f)| (format!("{g:.3}"), format!("{f:.3}")));
        let (c32, c16, agreement) = r.cublas.as_ref().map_or((na(), na(), na()), |c| {
            (
                format!("{:.3}", c.f32_ms),
                format!("{:.3}", c.f16_ms),
                format!("{:.1e}, {:.1}%", c.max_difference, 100.0 * c.same_bits),
            )
        });
        let tflops = r.wgmma.or(r.sm80).map(|(g, _)| r.config.flops() / g / 1e9).unwrap_or(0.0);
        println!(
            "{:<26} {:>10} {:>10} {:>10} {:>10} {:>6} {:>6} {:>9} {:>10} {:>10} {:>8.3} {:>8.3} {:>8.0} {:>9} {:>9} {:>16}",
            r.label,
            wg,
            wf,
            c32,
            c16,
            wgr,
            wfr,
            r.earlier_cublas.unwrap_or("-"),
            sg,
            sf,
            r.w_ms,
            r.u_ms,
            tflops,
            peak.map_or("n/a".into(), |p| format!("{:.1}%", 100.0 * tflops / p)),
            wgmma_peak
                .filter(|_| r.wgmma.is_some())
                .map_or("n/a".into(), |p| format!("{:.1}%", 100.0 * tflops / p)),
            agreement,
        );
    }
    criterion.final_summary();
}
