//! GPU tests of the NUFFT resampling path (issue 8, "Going further"): the fused kernel
//! `frb_nufft_resample` against the exact f64 reference of eq. 137 (relative L2 within
//! f16 rounding of J plus the NUFFT bound) and against the f64 CPU NUFFT path (f32 arithmetic
//! and f16 rounding only), for every seed Table 2 case, random and edge beams (exact
//! half-integers, period ends, range ends), ragged slow-sample counts (not multiples of the
//! block's 16 or the pass's 4), and a full CHORD channel of 5760 beams. Outputs are poisoned
//! (0xffff, an f16 NaN) before each launch.
mod common;

use common::*;
use half::f16;
use radio_kernels::frb_beamformer::nufft::{probe_beams, GpuNufft, NufftParams, NufftPlan, NUFFT_DEFAULT};
use radio_kernels::frb_beamformer::resample::{resample_reference, ResampleConfig};
use radio_kernels::frb_beamformer::FRB_CASES;
use radio_kernels::Error;
use rand::Rng;

/// f16 rounding of J (~1.5e-4 relative L2 for these inputs) + the NUFFT's 7.5e-6 + f32 sums.
const TOLERANCE_EXACT: f64 = 4e-4;
/// f16 rounding and f32 sums only.
const TOLERANCE_CPU: f64 = 3e-4;

fn check(
    gpu: &radio_kernels::Gpu,
    m: u32,
    n: u32,
    channels: u32,
    times: u32,
    random: usize,
    rng: &mut impl Rng,
) {
    let (mut theta, mut theta_prime) = (vec![], vec![]);
    for _ in 0..channels {
        let (t, tp) = probe_beams(m, n, random, rng);
        theta.extend(t);
        theta_prime.extend(tp);
    }
    let plan = NufftPlan::new(m, n, channels, &theta, &theta_prime, NUFFT_DEFAULT).expect("plan");
    let config = ResampleConfig { channels, times, m, n, beams: plan.beams() };
    let intensity: Vec<u16> =
        (0..config.intensity_len()).map(|_| f16::from_f64(rng.random_range(0.0..2.0)).to_bits()).collect();
    let exact = resample_reference(&config, &intensity, &theta, &theta_prime).expect("reference");
    let mut cpu = vec![0.0; config.output_len()];
    plan.resample(times, &intensity, &mut cpu).expect("CPU NUFFT");
    let nufft = GpuNufft::new(gpu, &plan).expect("GPU NUFFT");
    let id = gpu.upload(&intensity).unwrap();
    let mut out = gpu.alloc::<u16>(config.output_len(), 0xff).unwrap();
    nufft.resample(times, &id, &mut out).expect("launch");
    let got = out.download().unwrap();
    let (e_exact, e_cpu) = (relative_l2(&got, &exact), relative_l2(&got, &cpu));
    println!(
        "({m}, {n}) F = {channels} T = {times} B = {}: relative L2 vs exact {e_exact:.3e}, vs CPU NUFFT {e_cpu:.3e}",
        plan.beams()
    );
    assert!(e_exact < TOLERANCE_EXACT, "({m}, {n}): {e_exact:e}");
    assert!(e_cpu < TOLERANCE_CPU, "({m}, {n}): {e_cpu:e}");
    // Every element within 4 f16 ulps of the f64 NUFFT value, relative to the job's scale.
    let scale = cpu.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    for (k, (&g, &c)) in got.iter().zip(&cpu).enumerate() {
        let g = f16::from_bits(g).to_f64();
        assert!((g - c).abs() <= 4.0 * c.abs().max(scale / 16.0) / 2048.0, "element {k}: {g} vs {c}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_case_matches_the_exact_and_cpu_paths() {
    let gpu = gpu();
    let mut rng = rng();
    for case in FRB_CASES {
        for (channels, times) in [(2, 21), (3, 4), (1, 1), (2, 33)] {
            check(&gpu, case.m, case.n, channels, times, 60, &mut rng);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn full_chord_channel_of_5760_beams() {
    let gpu = gpu();
    let mut rng = rng();
    check(&gpu, 24, 24, 1, 35, 5760 - 55, &mut rng);
    check(&gpu, 16, 16, 2, 18, 2560 - 39, &mut rng);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_inputs_are_rejected() {
    let gpu = gpu();
    let t = vec![0.5f32; 6];
    let plan = NufftPlan::new(8, 12, 2, &t, &t, NUFFT_DEFAULT).unwrap();
    let nufft = GpuNufft::new(&gpu, &plan).unwrap();
    let i = gpu.alloc::<u16>(2 * 5 * 384, 0).unwrap();
    let mut j = gpu.alloc::<u16>(2 * 5 * 3, 0xff).unwrap();
    assert!(nufft.resample(5, &i, &mut j).is_ok());
    let got = j.download().unwrap();
    assert!(got.iter().all(|&h| f16::from_bits(h).to_f64() == 0.0), "J of I = 0 is 0");
    assert!(matches!(nufft.resample(4, &i, &mut j), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(nufft.resample(0, &i, &mut j), Err(Error::InvalidConfig(_))));
    let mut short = gpu.alloc::<u16>(2 * 5 * 3 - 1, 0).unwrap();
    assert!(matches!(nufft.resample(5, &i, &mut short), Err(Error::ShapeMismatch { .. })));
    let other = NufftPlan::new(8, 12, 2, &t, &t, NufftParams { sigma: 2.0, width: 5 }).unwrap();
    assert!(matches!(GpuNufft::new(&gpu, &other), Err(Error::InvalidConfig(_))));
}

/// Buffers of another GPU are `WrongDevice` (on a machine with one GPU the test says so).
#[test]
#[ignore = "needs a CUDA GPU"]
fn buffers_of_another_device_are_refused() {
    let gpu = gpu();
    let Some(other) = second_gpu() else { return };
    let plan = NufftPlan::new(8, 8, 1, &[0.5, 3.25], &[1.0, -2.5], NUFFT_DEFAULT).unwrap();
    let nufft = GpuNufft::new(&gpu, &plan).unwrap();
    let times = 3;
    let i = gpu.alloc::<u16>(times * 256, 0).unwrap();
    let foreign_i = other.alloc::<u16>(times * 256, 0).unwrap();
    let mut j = gpu.alloc::<u16>(times * 2, 0).unwrap();
    let mut foreign_j = other.alloc::<u16>(times * 2, 0).unwrap();
    assert!(matches!(nufft.resample(times as u32, &foreign_i, &mut j), Err(Error::WrongDevice { .. })));
    assert!(matches!(nufft.resample(times as u32, &i, &mut foreign_j), Err(Error::WrongDevice { .. })));
    nufft.resample(times as u32, &i, &mut j).unwrap();
}
