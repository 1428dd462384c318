//! `cargo bench --bench frb_beamformer`: the tensor-core short FFT (sec. 3 of
//! Smith, CHORD FRB beamformer design note (2022)) in a
//! register-resident loop (`frb_short_fft_loop_n*`), FFTs per second per N, against
//! - the note's Table 1 (A40 predictions) scaled by this GPU's measured m16n8k16 f16 ceiling over
//!   the A40's (the note's cycle model: 84 SMs x 1.7 GHz x 4096 flops / 4 cycles = 146 TOPS);
//! - batched fp32 cuFFT of length 2N, measured earlier on an H200 (target 10x);
//! - the tensor pipe's ceiling: the fraction of the time the measured m16n8k8 and m16n8k16
//!   (dense or sparse) rates leave for one FFT's two MMAs that the loop uses.
//!
//! Then the first FRB kernel (part B: the straightforward version, and at full CHORD the
//! even/odd kernel) per case of the note's Table 2 at its Table 3's F, sampling time and T_ds: time
//! per launch, real-time fraction and output samples per block.
//!
//! Ceilings come from `ceilings.json` (run the ceilings bench first).
mod common;

use common::{fill_random, median_ms, read_ceiling};
use criterion::Throughput;
use half::f16;
use radio_kernels::frb_beamformer::{
    fft_kernel, fft_methods, FftMethod, FrbBeamformer, FrbConfig, ShortFft, FFT_THREADS, FRB_CASES,
};
use radio_kernels::gpu_shared::frb_beamformer::{
    direct_has_k8, direct_k16_tiles, sparse_selector, FFT_SIZES,
};
use radio_kernels::{Ci4, Complex};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const REPS: usize = 9;
const ITERATIONS: u32 = 4096;
/// Flips the lowest mantissa bit of both halves on odd iterations: fresh data every FFT.
const SALT: u32 = 0x0001_0001;
/// The note's Table 1, GFFT/s on an A40.
const NOTE_A40: [f64; 7] = [97.0, 49.0, 49.0, 18.0, 18.0, 18.0, 18.0];
/// The A40's m16n8k16 f16 rate in the note's cycle model (App. C.2), TOPS.
const A40_M16N8K16_TOPS: f64 = 84.0 * 1.7e9 * 4096.0 / 4.0 / 1e12;
/// Batched fp32 cuFFT of length 2N, measured earlier on an H200, GFFT/s.
const CUFFT_H200: [f64; 7] = [14.2, 9.1, 6.1, 6.5, 5.3, 4.7, 4.1];

fn main() {
    let Some(gpu) = common::open_gpu("frb_beamformer bench") else {
        return;
    };
    let k16 = read_ceiling("mma f16 m16n8k16 f16-acc");
    let k8 = read_ceiling("mma f16 m16n8k8");
    let sp = read_ceiling("mma f16 mma.sp m16n8k16");
    let mut criterion = common::kernel_criterion();
    let mut group = criterion.benchmark_group("frb_short_fft");
    let blocks = gpu.sm_count() * 8;
    let threads = (blocks * FFT_THREADS) as usize;
    let mut rng = StdRng::seed_from_u64(7);
    let mut rows = Vec::new();
    for (n, method) in FFT_SIZES.into_iter().flat_map(|n| fft_methods(n).into_iter().map(move |m| (n, m))) {
        let kernels = fft_kernel(n, method).expect("short FFT kernels");
        let fft = ShortFft::with_kernel(&gpu, n, &kernels.looped).expect("short FFT");
        let words: Vec<Complex<f16>> = (0..4 * threads)
            .map(|_| {
                let mut half = || f16::from_f32(rng.random_range(-1.0f32..1.0));
                Complex::new(half(), half())
            })
            .collect();
        let x = gpu.upload(&words).expect("x");
        let mut y = gpu.alloc::<Complex<f16>>(threads, 0).expect("y");
        let run = |y: &mut _| fft.run_loop(&x, y, blocks, ITERATIONS, SALT).expect("launch");
        let ffts = fft.loop_ffts(blocks, ITERATIONS);
        let ms = median_ms(&gpu, REPS, || run(&mut y));
        rows.push((n, method, fft.ffts_per_group(), ffts as f64 / ms / 1e6));
        group.throughput(Throughput::Elements(ffts));
        let label = if method == FftMethod::Direct { format!("N={n} direct") } else { format!("N={n}") };
        group.bench_function(label, |b| {
            b.iter_custom(|iters| common::event_time(&gpu, iters, || run(&mut y)))
        });
    }
    group.finish();

    println!(
        "\ntensor-core short FFT on {} ({} blocks x {FFT_THREADS} threads, {ITERATIONS} x 4 FFT groups per warp, medians of {REPS})",
        gpu.name(),
        blocks
    );
    let scale = k16.map(|c| c / A40_M16N8K16_TOPS);
    match scale {
        Some(s) => println!(
            "the FRB note's Table 1 scaled by {s:.2} (m16n8k16 f16 ceiling / A40's {A40_M16N8K16_TOPS:.0} TOPS)"
        ),
        None => println!("no ceilings.json: run the ceilings bench first for the scaled and ceiling columns"),
    }
    println!(
        "{:>3} {:>12} {:>10} {:>12} {:>9} {:>10} {:>9} {:>12}",
        "N", "method", "GFFT/s", "note scaled", "of note", "cuFFT", "x cuFFT", "tensor pipe"
    );
    for (n, method, per_group, gffts) in rows {
        let k = FFT_SIZES.iter().position(|&m| m == n).expect("N");
        let scaled = scale.map(|s| NOTE_A40[k] * s);
        // Tensor-pipe time of one warp's FFT group at the measured GPU-wide rates (ops per
        // MMA / TOPS): three-factor, one m16n8k8 plus one m16n8k16 (sparse for N <= 16);
        // direct, N / 4 row tiles of 2N / 16 m16n8k16 (plus one m16n8k8 where N % 8 = 4).
        let third = if sparse_selector(n).is_some() { sp } else { k16 };
        let busy = match (method, k8, third, k16) {
            (FftMethod::ThreeFactor, Some(a), Some(b), _) => {
                let group_s = 2048.0 / (a * 1e12) + 4096.0 / (b * 1e12);
                Some(gffts * 1e9 / per_group as f64 * group_s)
            }
            (FftMethod::Direct, Some(a), _, Some(b)) => {
                let tile_s = direct_k16_tiles(n) as f64 * 4096.0 / (b * 1e12)
                    + if direct_has_k8(n) { 2048.0 / (a * 1e12) } else { 0.0 };
                Some(gffts * 1e9 / per_group as f64 * (n / 4) as f64 * tile_s)
            }
            _ => None,
        };
        let pct = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{:.0}%", 100.0 * v));
        println!(
            "{:>3} {:>12} {:>10.1} {:>12} {:>9} {:>10.1} {:>8.1}x {:>12}",
            n,
            format!("{method:?}"),
            gffts,
            scaled.map_or("n/a".to_string(), |s| format!("{s:.0}")),
            pct(scaled.map(|s| gffts / s)),
            CUFFT_H200[k],
            gffts / CUFFT_H200[k],
            pct(busy)
        );
    }
    first_kernel(&gpu);
}

/// The note's Table 3: F per GPU, upchannelised sampling time (us) and T_ds per case; the note's
/// predicted cost on an A40 (% of the GPU).
const TABLE_3: [(u32, f64, u32, f64); 5] = [
    (2048, 27.3067, 40, 9.2),
    (2048, 27.3067, 40, 14.1),
    (1024, 40.96, 25, 12.4),
    (1024, 40.96, 25, 18.9),
    (256, 27.3067, 40, 14.4),
];

fn first_kernel(gpu: &radio_kernels::Gpu) {
    let mut rng = StdRng::seed_from_u64(11);
    println!("\nfirst FRB kernel on {}, medians of 5", gpu.name());
    println!(
        "{:>14} {:>5} {:>6} {:>4} {:>10} {:>10} {:>12} {:>9}",
        "(D, M, N)", "F", "T", "T_ds", "time ms", "real time", "note (A40)", "per block"
    );
    for (case, (freqs, ts_us, t_ds, seed)) in FRB_CASES.into_iter().zip(TABLE_3) {
        // The shortest T that is a multiple of the outer block and of T_ds, at least 1920.
        let step = case.t_outer * t_ds / gcd(case.t_outer, t_ds);
        let times = step * 1920u32.div_ceil(step);
        let config = FrbConfig { dishes: case.dishes, m: case.m, n: case.n, freqs, times, t_ds };
        let mut points: Vec<(u32, u32)> =
            (0..case.m).flat_map(|m| (0..case.n).map(move |n| (m, n))).collect();
        for k in (1..points.len()).rev() {
            points.swap(k, rng.random_range(0..=k));
        }
        points.truncate(case.dishes as usize);
        let w = f16::from_f64(6.0 / ((t_ds * case.dishes) as f64).sqrt() / 4.0);
        let weights = vec![Complex::new(w, w); config.weights_len()];
        let mut e = gpu.alloc::<Ci4>(config.e_len(), 0).expect("E");
        fill_random(gpu, e.borrow_mut(), 5);
        let mut i = gpu.alloc::<f16>(config.output_len(), 0).expect("I");
        let beamformer = FrbBeamformer::new(gpu, config, &points, &weights).expect("FRB beamformer");
        let ms = median_ms(gpu, 5, || beamformer.beamform(&e, &mut i).expect("launch"));
        let real_ms = times as f64 * ts_us / 1e3;
        println!(
            "{:>14} {:>5} {:>6} {:>4} {:>10.3} {:>9.2}% {:>11.1}% {:>9}",
            format!("({}, {}, {})", case.dishes, case.m, case.n),
            freqs,
            times,
            t_ds,
            ms,
            100.0 * ms / real_ms,
            seed,
            beamformer.output_samples_per_block()
        );
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
