//! GPU tests of the FRB beamformer's second kernel for factorizable beams (sec. 5.3 of
//! Smith, CHORD FRB beamformer design note (2022)): the fused kernel `frb_factorized_M_N` against the
//! f64 reference of eqs. 143-144 for every grid of the note's Table 2, Table 4's beam grids (4M x
//! 4N) and ragged ones (odd G', G and G' not multiples of 16, sample counts not multiples of the
//! block's 32), random and half-integer grids, a moved grid, outputs poisoned with NaN before each
//! launch.
//!
//! Bound: U^M, U^N and I are f16, V is rounded to f16 between the contractions and J once at
//! the end, with f32 accumulation: four roundings of relative 2^-11 each, amplified by at most
//! about 2 (the U's Lebesgue constant: sum_p |U_p| stays near 2 for these grids) against the
//! reference's f64 U of the same f32 positions and the same f16 I: 2^-8 bounds the relative L2
//! error, and each output stays within 2^-7 of the largest.
mod common;

use common::*;
use half::f16;
use radio_kernels::frb_beamformer::factorized::{
    factorized_reference, FactorizedConfig, FactorizedResampler,
};
use radio_kernels::frb_beamformer::FRB_CASES;
use radio_kernels::Error;
use rand::Rng;

const BOUND: f64 = 1.0 / 256.0;
/// f16 NaN in both bytes (0x7e7e).
const POISON: u8 = 0x7e;

fn run(
    gpu: &radio_kernels::Gpu,
    resampler: &mut FactorizedResampler,
    i: &[f16],
    theta: &[f32],
    theta_prime: &[f32],
) -> Vec<f16> {
    let c = *resampler.config();
    resampler.set_grid(theta, theta_prime).unwrap();
    let mut j = gpu.alloc::<f16>(c.output_len(), POISON).unwrap();
    resampler.resample(&gpu.upload(i).unwrap(), &mut j).unwrap();
    j.download().unwrap()
}

fn check(got: &[f16], want: &[f64], config: &FactorizedConfig) {
    let error = relative_l2(bytemuck::cast_slice(got), want);
    println!("{config:?}: relative L2 {error:.2e}");
    assert!(error < BOUND, "{config:?}: relative L2 {error:e}");
    let scale = want.iter().fold(0.0f64, |a, &w| a.max(w.abs()));
    for (o, (&g, &w)) in got.iter().zip(want).enumerate() {
        let g = g.to_f64();
        assert!((g - w).abs() <= scale / 128.0, "{config:?} output {o}: {g} vs {w}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn random_grids_match_the_f64_reference_for_every_case() {
    let gpu = gpu();
    let mut rng = rng();
    for case in FRB_CASES {
        let (m, n) = (case.m, case.n);
        for (channels, times, g, g_prime) in [
            (2, 45, 4 * m, 4 * n),
            (1, 33, 37, 21),
            (3, 1, 1, 1),
            (1, 70, 2 * m + 3, 2 * n + 5),
            (1, 9, 128, 128),
        ] {
            let config = FactorizedConfig { channels, times, m, n, g, g_prime };
            let mut resampler = FactorizedResampler::new(&gpu, config).unwrap();
            let i: Vec<f16> =
                bytemuck::cast_slice(&random_intensity(&mut rng, config.intensity_len())).to_vec();
            let theta: Vec<f32> = (0..config.theta_len()).map(|_| rng.random_range(-40.0..40.0)).collect();
            let theta_prime: Vec<f32> =
                (0..config.theta_prime_len()).map(|_| rng.random_range(-40.0..40.0)).collect();
            let got = run(&gpu, &mut resampler, &i, &theta, &theta_prime);
            let want = factorized_reference(&config, &i, &theta, &theta_prime).unwrap();
            check(&got, &want, &config);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn half_integer_grids_reproduce_the_intensity_and_grids_can_move() {
    let gpu = gpu();
    let mut rng = rng();
    for case in FRB_CASES {
        let (m, n) = (case.m, case.n);
        let config = FactorizedConfig { channels: 2, times: 37, m, n, g: 2 * m, g_prime: 2 * n };
        let mut resampler = FactorizedResampler::new(&gpu, config).unwrap();
        let i: Vec<f16> = bytemuck::cast_slice(&random_intensity(&mut rng, config.intensity_len())).to_vec();
        // Channel 0 at (p / 2, q / 2) in order, channel 1 both axes reversed.
        let p_of = |f: usize, x: usize, len: usize| if f == 0 { x } else { len - 1 - x };
        let (gm, gn) = (2 * m as usize, 2 * n as usize);
        let theta: Vec<f32> = (0..2 * gm).map(|x| p_of(x / gm, x % gm, gm) as f32 / 2.0).collect();
        let theta_prime: Vec<f32> = (0..2 * gn).map(|x| p_of(x / gn, x % gn, gn) as f32 / 2.0).collect();
        let got = run(&gpu, &mut resampler, &i, &theta, &theta_prime);
        let k = gm * gn;
        for f in 0..2 {
            for t in 0..config.times as usize {
                for beta in 0..k {
                    let (p, q) = (p_of(f, beta / gn, gm), p_of(f, beta % gn, gn));
                    let want = i[(f * config.times as usize + t) * k + p * gn + q];
                    let g = got[(f * config.times as usize + t) * k + beta];
                    // U in f16 at half-integers is exactly 0 or 1, so J is I bit for bit.
                    assert_eq!(g.to_bits(), want.to_bits(), "({m}, {n}) f {f} t {t} beam {beta}");
                }
            }
        }
        // A moved grid, same resampler.
        let moved: Vec<f32> = theta.iter().map(|&x| x + rng.random_range(-0.5..0.5)).collect();
        let got = run(&gpu, &mut resampler, &i, &moved, &theta_prime);
        let want = factorized_reference(&config, &i, &moved, &theta_prime).unwrap();
        check(&got, &want, &config);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_input_is_rejected_before_launch() {
    let gpu = gpu();
    let config = FactorizedConfig { channels: 2, times: 10, m: 16, n: 20, g: 7, g_prime: 9 };
    assert!(matches!(
        FactorizedResampler::new(&gpu, FactorizedConfig { n: 18, ..config }),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        FactorizedResampler::new(&gpu, FactorizedConfig { g: 129, ..config }),
        Err(Error::InvalidConfig(_))
    ));
    let mut resampler = FactorizedResampler::new(&gpu, config).unwrap();
    let i = gpu.alloc::<f16>(config.intensity_len(), 0).unwrap();
    let mut j = gpu.alloc::<f16>(config.output_len(), 0).unwrap();
    assert!(matches!(resampler.resample(&i, &mut j), Err(Error::InvalidConfig(_))));
    let theta = vec![0.0f32; config.theta_len()];
    let theta_prime = vec![0.0f32; config.theta_prime_len()];
    assert!(matches!(resampler.set_grid(&theta_prime, &theta_prime), Err(Error::ShapeMismatch { .. })));
    for bad in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
        let mut values = theta.clone();
        values[3] = bad;
        let r = resampler.set_grid(&values, &theta_prime);
        assert!(matches!(r, Err(Error::NonFinite { what: "theta", index: 3 })), "{bad}: {r:?}");
        let mut values = theta_prime.clone();
        values[10] = bad;
        let r = resampler.set_grid(&theta, &values);
        assert!(matches!(r, Err(Error::NonFinite { what: "theta'", index: 10 })), "{bad}: {r:?}");
    }
    // Refused grids leave no grid set.
    assert!(matches!(resampler.resample(&i, &mut j), Err(Error::InvalidConfig(_))));
    resampler.set_grid(&theta, &theta_prime).unwrap();
    let short_i = gpu.alloc::<f16>(config.intensity_len() - 1, 0).unwrap();
    assert!(matches!(resampler.resample(&short_i, &mut j), Err(Error::ShapeMismatch { .. })));
    let mut long_j = gpu.alloc::<f16>(config.output_len() + 1, 0).unwrap();
    assert!(matches!(resampler.resample(&i, &mut long_j), Err(Error::ShapeMismatch { .. })));
    resampler.resample(&i, &mut j).unwrap();
    gpu.synchronize().unwrap();
}

/// Buffers of another GPU are `WrongDevice` (on a machine with one GPU the test says so).
#[test]
#[ignore = "needs a CUDA GPU"]
fn buffers_of_another_device_are_refused() {
    let gpu = gpu();
    let Some(other) = second_gpu() else { return };
    let config = FactorizedConfig { channels: 1, times: 4, m: 8, n: 8, g: 3, g_prime: 2 };
    let mut resampler = FactorizedResampler::new(&gpu, config).unwrap();
    resampler.set_grid(&[0.5; 3], &[1.5; 2]).unwrap();
    let i = gpu.alloc::<f16>(config.intensity_len(), 0).unwrap();
    let foreign_i = other.alloc::<f16>(config.intensity_len(), 0).unwrap();
    let mut j = gpu.alloc::<f16>(config.output_len(), 0).unwrap();
    let mut foreign_j = other.alloc::<f16>(config.output_len(), 0).unwrap();
    assert!(matches!(resampler.resample(&foreign_i, &mut j), Err(Error::WrongDevice { .. })));
    assert!(matches!(resampler.resample(&i, &mut foreign_j), Err(Error::WrongDevice { .. })));
    resampler.resample(&i, &mut j).unwrap();
}

/// Any valid small factorized job: every grid, 1 or 2 channels, 1 to 70 samples, beam grids
/// from 1 x 1 to 128 x 128 (ragged), positions random, at half-integers or far out, I random
/// or at the f16 extremes: within `BOUND` of the f64 reference ([`check`]), nothing unwritten.
#[test]
#[ignore = "needs a CUDA GPU"]
fn property_random_jobs_match_the_reference() {
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    let gpu = gpu();
    let axis = prop_oneof![Just(1u32), Just(128u32), 1u32..=128];
    let strategy =
        ((0..FRB_CASES.len(), 1u32..=2, 1u32..=70, axis.clone(), axis), any::<bool>(), 0u8..3, any::<u64>());
    gpu_proptest(14, strategy, |((k, channels, times, g, g_prime), extreme_i, positions, seed)| {
        let case = FRB_CASES[k];
        let config = FactorizedConfig { channels, times, m: case.m, n: case.n, g, g_prime };
        let mut rng = StdRng::seed_from_u64(seed);
        let i: Vec<f16> = (0..config.intensity_len())
            .map(|_| {
                let v = if extreme_i {
                    [0.0, 6e-8, 1000.0, 0.5][rng.random_range(0..4)]
                } else {
                    rng.random_range(0.0..100.0)
                };
                f16::from_f64(v)
            })
            .collect();
        let position = |rng: &mut StdRng| -> f32 {
            match positions {
                0 => rng.random_range(-40.0..40.0),
                1 => (rng.random_range(-80i32..80) as f32) / 2.0,
                _ => [4096.0, -4096.0, 0.0, 1e6, -3.25e5][rng.random_range(0..5)],
            }
        };
        let theta: Vec<f32> = (0..config.theta_len()).map(|_| position(&mut rng)).collect();
        let theta_prime: Vec<f32> = (0..config.theta_prime_len()).map(|_| position(&mut rng)).collect();
        let mut resampler = FactorizedResampler::new(&gpu, config).unwrap();
        let got = run(&gpu, &mut resampler, &i, &theta, &theta_prime);
        let want = factorized_reference(&config, &i, &theta, &theta_prime).unwrap();
        prop_assert!(
            got.iter().all(|&v| v.to_bits() != u16::from_ne_bytes([POISON; 2])),
            "{config:?}: unwritten J"
        );
        if want.iter().any(|&w| w != 0.0) {
            check(&got, &want, &config);
        }
        Ok(())
    });
}
