//! Part B: the first FRB kernel.
use super::*;
use radio_kernels::frb_beamformer::{
    frb_intensity_reference, frb_intensity_reference_sample, FrbBeamformer, FrbConfig, FRB_CASES, FRB_POLS,
    FRB_REL_L2_BOUND,
};
use rand::rngs::StdRng;

/// A random injective dish map (a scrambled grid: dish order has nothing to do with the
/// grid order).
pub(super) fn random_grid(c: &FrbConfig, rng: &mut StdRng) -> Vec<(u32, u32)> {
    let mut points: Vec<(u32, u32)> = (0..c.m).flat_map(|m| (0..c.n).map(move |n| (m, n))).collect();
    for k in (1..points.len()).rev() {
        points.swap(k, rng.random_range(0..=k));
    }
    points.truncate(c.dishes as usize);
    points
}

/// Weights with |re|, |im| <= w_max, w_max chosen so uniform int4 noise gives I near 1000
/// (the magnitudes the module documents as realistic).
pub(super) fn random_weights(c: &FrbConfig, rng: &mut StdRng) -> Vec<Complex<f16>> {
    let w_max = (1000.0 / (4.0 * c.t_ds as f64 * c.dishes as f64 * 21.5)).sqrt() / 2f64.sqrt();
    (0..c.weights_len())
        .map(|_| {
            let mut h = || f16::from_f64(rng.random_range(-w_max..w_max));
            Complex::new(h(), h())
        })
        .collect()
}

fn run(
    gpu: &radio_kernels::Gpu,
    c: FrbConfig,
    grid: &[(u32, u32)],
    weights: &[Complex<f16>],
    e: &[Ci4],
) -> Vec<f64> {
    let beamformer = FrbBeamformer::new(gpu, c, grid, weights).unwrap();
    let e = gpu.upload(e).unwrap();
    let mut i = gpu.alloc::<f16>(c.output_len(), POISON).unwrap();
    beamformer.beamform(&e, &mut i).unwrap();
    i.download().unwrap().into_iter().map(|h| h.to_f64()).collect()
}

fn run_per_block(
    gpu: &radio_kernels::Gpu,
    c: FrbConfig,
    grid: &[(u32, u32)],
    weights: &[Complex<f16>],
    e: &[Ci4],
    per_block: Option<u32>,
) -> Vec<f64> {
    let mut beamformer = FrbBeamformer::new(gpu, c, grid, weights).unwrap();
    if let Some(k) = per_block {
        beamformer.set_output_samples_per_block(k).unwrap();
    }
    let e = gpu.upload(e).unwrap();
    let mut i = gpu.alloc::<f16>(c.output_len(), POISON).unwrap();
    beamformer.beamform(&e, &mut i).unwrap();
    i.download().unwrap().into_iter().map(|h| h.to_f64()).collect()
}

/// Full CHORD (the even/odd kernel up to T_ds = 96) at T_ds 1, 3, 40 and 72, with the
/// rule's chunks (one output sample per block at these sizes) and chunks of 5 (several
/// output samples per block, phases split by T_ds, short tails): within the bound, every
/// output written and finite.
#[test]
#[ignore = "needs a CUDA GPU"]
fn full_chord_matches_the_reference_with_several_samples_per_block() {
    let gpu = gpu();
    let mut rng = rng();
    for (times, t_ds) in [(96, 1), (144, 3), (240, 40), (144, 72)] {
        let c = FrbConfig { dishes: 512, m: 24, n: 24, freqs: 3, times, t_ds };
        let grid = random_grid(&c, &mut rng);
        let weights = random_weights(&c, &mut rng);
        let e: Vec<Ci4> = (0..c.e_len()).map(|_| Ci4(rng.random())).collect();
        let want = frb_intensity_reference(&c, &e, &grid, &weights).unwrap();
        for per_block in [None, Some(5)] {
            let got = run_per_block(&gpu, c, &grid, &weights, &e, per_block);
            assert!(got.iter().all(|v| v.is_finite()), "{c:?} {per_block:?}: unwritten or non-finite I");
            let err = rel_l2(&got, &want);
            println!("full CHORD T_ds {t_ds:3} per block {per_block:?}: relative L2 {err:.2e}");
            assert!(err <= FRB_REL_L2_BOUND, "{c:?} {per_block:?}: {err}");
        }
    }
}

pub(super) fn rel_l2(got: &[f64], want: &[f64]) -> f64 {
    let num: f64 = got.iter().zip(want).map(|(g, w)| (g - w).powi(2)).sum();
    let den: f64 = want.iter().map(|w| w * w).sum();
    (num / den).sqrt()
}

/// All five cases, scrambled random maps, random E over the whole int4 range, random
/// weights, T_ds of 1, 3 (odd), half the launch (72 to 96: the f16-sum kernels at their
/// largest T_ds) and the whole launch (120 to 192: the kernels that add phases in f32):
/// within `FRB_REL_L2_BOUND` of the f64 reference, every output written and finite.
#[test]
#[ignore = "needs a CUDA GPU"]
fn first_kernel_matches_the_reference_for_every_case() {
    let gpu = gpu();
    let mut rng = rng();
    for case in FRB_CASES {
        let times = 3 * case.t_outer;
        for t_ds in [1, 3, times / 2, times] {
            let c = FrbConfig { dishes: case.dishes, m: case.m, n: case.n, freqs: 3, times, t_ds };
            let grid = random_grid(&c, &mut rng);
            let weights = random_weights(&c, &mut rng);
            let e: Vec<Ci4> = (0..c.e_len()).map(|_| Ci4(rng.random())).collect();
            let got = run(&gpu, c, &grid, &weights, &e);
            let want = frb_intensity_reference(&c, &e, &grid, &weights).unwrap();
            assert!(got.iter().all(|v| v.is_finite()), "{c:?}: unwritten or non-finite I");
            let err = rel_l2(&got, &want);
            let mean = want.iter().sum::<f64>() / want.len() as f64;
            println!(
                "(D, M, N) = ({}, {}, {}) T_ds {t_ds:3}: relative L2 {err:.2e} (bound {FRB_REL_L2_BOUND:.2e}), mean I {mean:.0}",
                c.dishes, c.m, c.n
            );
            assert!(err <= FRB_REL_L2_BOUND, "{c:?}: {err}");
        }
    }
}

/// Physics check on the GPU: a plane wave from the half-integer direction (p0/2, q0/2)
/// lights up pixel (p0, q0) in every downsampled sample, for every case.
#[test]
#[ignore = "needs a CUDA GPU"]
fn plane_wave_lights_up_its_pixel_on_the_gpu() {
    let gpu = gpu();
    let mut rng = rng();
    for case in FRB_CASES {
        let c = FrbConfig {
            dishes: case.dishes,
            m: case.m,
            n: case.n,
            freqs: 2,
            times: case.t_outer,
            t_ds: case.t_outer / 2,
        };
        let grid = random_grid(&c, &mut rng);
        let (p0, q0) = (2 * rng.random_range(0..c.m) + 1, 2 * rng.random_range(0..c.n) + 1);
        let mut e = vec![Ci4::default(); c.e_len()];
        for tau in 0..c.times {
            for f in 0..c.freqs {
                for pol in 0..FRB_POLS {
                    for (d, &(m, n)) in grid.iter().enumerate() {
                        let phase = -std::f64::consts::PI
                            * ((m * p0) as f64 / c.m as f64 + (n * q0) as f64 / c.n as f64);
                        let (re, im) = ((7.0 * phase.cos()).round() as i8, (7.0 * phase.sin()).round() as i8);
                        e[c.e_index(tau, f, pol, d as u32)] = Ci4::wrapping(re, im);
                    }
                }
            }
        }
        // |W| = 1 / (8 D) keeps the coherent peak 2 T_ds (7 D / (8 D))^2 well inside f16.
        let w = f16::from_f64(1.0 / (8.0 * c.dishes as f64));
        let weights = vec![Complex::new(w, f16::ZERO); c.weights_len()];
        let got = run(&gpu, c, &grid, &weights, &e);
        for f in 0..c.freqs {
            for tbar in 0..c.out_times() {
                let first = c.output_index(f, tbar, 0, 0);
                let block = &got[first..first + (4 * c.m * c.n) as usize];
                let best = block.iter().enumerate().fold(0, |b, (k, &v)| if v > block[b] { k } else { b });
                assert_eq!(best as u32, p0 * 2 * c.n + q0, "{case:?} f={f} tbar={tbar}");
            }
        }
        println!("(D, M, N) = ({}, {}, {}): plane wave at pixel ({p0}, {q0})", c.dishes, c.m, c.n);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn first_kernel_rejects_bad_input() {
    let gpu = gpu();
    let mut rng = rng();
    let ok = FrbConfig { dishes: 64, m: 8, n: 12, freqs: 2, times: 96, t_ds: 3 };
    let grid = random_grid(&ok, &mut rng);
    let weights = random_weights(&ok, &mut rng);
    let invalid = |r: Result<FrbBeamformer, Error>| matches!(r, Err(Error::InvalidConfig(_)));
    assert!(invalid(FrbBeamformer::new(&gpu, FrbConfig { n: 16, ..ok }, &grid, &weights)));
    assert!(invalid(FrbBeamformer::new(&gpu, FrbConfig { times: 100, ..ok }, &grid, &weights)));
    let mut dup = grid.clone();
    dup[5] = dup[6];
    assert!(invalid(FrbBeamformer::new(&gpu, ok, &dup, &weights)));
    let mut outside = grid.clone();
    outside[5] = (0, 12);
    assert!(invalid(FrbBeamformer::new(&gpu, ok, &outside, &weights)));
    assert!(matches!(FrbBeamformer::new(&gpu, ok, &grid, &weights[1..]), Err(Error::ShapeMismatch { .. })));
    let beamformer = FrbBeamformer::new(&gpu, ok, &grid, &weights).unwrap();
    let e = gpu.alloc::<Ci4>(ok.e_len(), 0).unwrap();
    let mut short = gpu.alloc::<f16>(ok.output_len() - 1, POISON).unwrap();
    assert!(matches!(beamformer.beamform(&e, &mut short), Err(Error::ShapeMismatch { .. })));
    let e_short = gpu.alloc::<Ci4>(ok.e_len() - 1, 0).unwrap();
    let mut i = gpu.alloc::<f16>(ok.output_len(), POISON).unwrap();
    assert!(matches!(beamformer.beamform(&e_short, &mut i), Err(Error::ShapeMismatch { .. })));
    beamformer.beamform(&e, &mut i).unwrap();
}

/// Non-finite weights (NaN or infinite in either half) are `NonFinite` with the word's
/// index, before anything is uploaded; the largest finite ones are accepted.
#[test]
#[ignore = "needs a CUDA GPU"]
fn non_finite_weights_are_rejected() {
    let gpu = gpu();
    let mut rng = rng();
    let c = FrbConfig { dishes: 64, m: 8, n: 8, freqs: 2, times: 64, t_ds: 2 };
    let grid = random_grid(&c, &mut rng);
    for bad in [0x7c00u32, 0xfc00, 0x7e01, 0x7c00 << 16, 0xfe00 << 16] {
        let mut weights = random_weights(&c, &mut rng);
        let at = rng.random_range(0..weights.len());
        weights[at] = bytemuck::cast(bad);
        let r = FrbBeamformer::new(&gpu, c, &grid, &weights);
        assert!(
            matches!(r, Err(Error::NonFinite { what: "FRB weights", index }) if index == at),
            "{bad:#x} at {at}"
        );
    }
    let largest = vec![Complex::new(f16::MAX, f16::MIN); c.weights_len()];
    assert!(FrbBeamformer::new(&gpu, c, &grid, &largest).is_ok());
}

/// Buffers of another GPU are `WrongDevice` (on a machine with one GPU the test says so).
#[test]
#[ignore = "needs a CUDA GPU"]
fn buffers_of_another_device_are_refused() {
    let gpu = gpu();
    let Some(other) = second_gpu() else { return };
    let mut rng = rng();
    let c = FrbConfig { dishes: 64, m: 8, n: 12, freqs: 2, times: 48, t_ds: 3 };
    let beamformer =
        FrbBeamformer::new(&gpu, c, &random_grid(&c, &mut rng), &random_weights(&c, &mut rng)).unwrap();
    let (e, foreign_e) = (gpu.alloc::<Ci4>(c.e_len(), 0).unwrap(), other.alloc::<Ci4>(c.e_len(), 0).unwrap());
    let mut i = gpu.alloc::<f16>(c.output_len(), POISON).unwrap();
    let mut foreign_i = other.alloc::<f16>(c.output_len(), POISON).unwrap();
    assert!(matches!(beamformer.beamform(&foreign_e, &mut i), Err(Error::WrongDevice { .. })));
    assert!(matches!(beamformer.beamform(&e, &mut foreign_i), Err(Error::WrongDevice { .. })));
    beamformer.beamform(&e, &mut i).unwrap();
    let fft = ShortFft::new(&gpu, 16).unwrap();
    let x = other.alloc::<Complex<f16>>(16, 0).unwrap();
    let mut y = gpu.alloc::<Complex<f16>>(32, POISON).unwrap();
    assert!(matches!(fft.run(&x, &mut y, 1), Err(Error::WrongDevice { .. })));
}

/// How E of a property case is drawn: uniform int4, every value at the int4 extreme
/// -8 - 8i, or mostly zeros with extremes and random values sprinkled in.
#[derive(Clone, Copy, Debug)]
enum Fill {
    Uniform,
    Extreme,
    Sparse,
}

/// Weights of a property case: the tests' realistic magnitude (I near 1000), or the
/// largest |W| for which the module's f16 range bound keeps every I finite for any E
/// (`256 / (sqrt(2 T_ds) 8 sqrt(2) D)`), with random signs.
#[derive(Clone, Copy, Debug)]
enum Weights {
    Realistic,
    LargestSafe,
}

/// Any valid small launch: every case (the smaller ones more often, their reference is
/// cheaper), 1 or 2 channels, T_ds from 1 up to twice the outer block (both summation
/// kernels), T one (two at the pathfinder) multiple of lcm(T_outer, T_ds), the split rule's or a forced
/// number of output samples per block, random scrambled maps, and E and W from
/// [`Fill`] and [`Weights`]: I (poisoned first) is finite everywhere and within
/// `FRB_REL_L2_BOUND` of the f64 reference.
#[test]
#[ignore = "needs a CUDA GPU"]
fn property_random_valid_launches_match_the_reference() {
    use proptest::prelude::*;
    use rand::SeedableRng;
    let gpu = gpu();
    let case = prop_oneof![4 => 0..2usize, 2 => 2..4usize, 1 => Just(4usize)];
    // T_ds: small ones (odd too), and 0 and 1000 standing for T_outer / 2 and 2 T_outer.
    let t_ds = prop::sample::select(vec![1u32, 2, 3, 4, 5, 6, 8, 0, 1000]);
    let fill = prop_oneof![Just(Fill::Uniform), Just(Fill::Extreme), Just(Fill::Sparse)];
    let weights = prop_oneof![Just(Weights::Realistic), Just(Weights::LargestSafe)];
    let strategy = (case, 1u32..=2, t_ds, 1u32..=2, prop::option::of(1u32..=5), fill, weights, any::<u64>());
    gpu_proptest(14, strategy, |(k, freqs, t_ds, multiple, per_block, fill, weights, seed)| {
        let case = FRB_CASES[k];
        let t_ds = match t_ds {
            0 => case.t_outer / 2,
            1000 => 2 * case.t_outer,
            t => t,
        };
        let (mut a, mut b) = (case.t_outer, t_ds);
        while b != 0 {
            (a, b) = (b, a % b);
        }
        // Two multiples only for the pathfinder cases (the larger cases' references are slow).
        let times = case.t_outer / a * t_ds * if k < 2 { multiple } else { 1 };
        let c = FrbConfig { dishes: case.dishes, m: case.m, n: case.n, freqs, times, t_ds };
        let mut rng = StdRng::seed_from_u64(seed);
        let grid = random_grid(&c, &mut rng);
        let w = match weights {
            Weights::Realistic => random_weights(&c, &mut rng),
            Weights::LargestSafe => {
                // 0.9 of the bound: f16 rounding of W stays inside it.
                let w_max = 0.9 * 256.0 / ((2.0 * t_ds as f64).sqrt() * 8.0 * 2f64.sqrt() * c.dishes as f64);
                let h = f16::from_f64(w_max / 2f64.sqrt());
                (0..c.weights_len())
                    .map(|_| {
                        let mut signed = || if rng.random() { h } else { -h };
                        Complex::new(signed(), signed())
                    })
                    .collect()
            }
        };
        let e: Vec<Ci4> = (0..c.e_len())
            .map(|_| match fill {
                Fill::Uniform => Ci4(rng.random()),
                Fill::Extreme => Ci4::wrapping(-8, -8),
                Fill::Sparse => match rng.random_range(0..8) {
                    0 => Ci4::wrapping(-8, -8),
                    1 => Ci4::wrapping(7, -8),
                    2 => Ci4(rng.random()),
                    _ => Ci4(0),
                },
            })
            .collect();
        let got = run_per_block(&gpu, c, &grid, &w, &e, per_block);
        let want = frb_intensity_reference(&c, &e, &grid, &w).unwrap();
        prop_assert!(got.iter().all(|v| v.is_finite()), "{c:?}: unwritten or non-finite I");
        let norm: f64 = want.iter().map(|x| x * x).sum();
        let err = if norm == 0.0 { got.iter().map(|x| x.abs()).sum::<f64>() } else { rel_l2(&got, &want) };
        println!("{c:?} {fill:?} {weights:?} per block {per_block:?}: relative L2 {err:.2e}");
        prop_assert!(err <= FRB_REL_L2_BOUND, "{c:?} {fill:?} {weights:?}: {err}");
        Ok(())
    });
}

/// A launch past 2^32: E zero except for the time samples of `samples` (random there),
/// I poisoned, then each sample of `samples` within `FRB_REL_L2_BOUND` of
/// `frb_intensity_reference_sample` and every other output exactly zero (the kernel
/// wrote it, from zero E, and nothing else landed there).
fn check_launch_past_2_32(c: FrbConfig, samples: &[(u32, u32)]) {
    let gpu = gpu();
    if !enough_memory(&gpu, (c.e_len() + 2 * c.output_len()) as u64) {
        return;
    }
    let mut rng = rng();
    let grid = random_grid(&c, &mut rng);
    let weights = random_weights(&c, &mut rng);
    let mut e = vec![0u8; c.e_len()];
    for &(f, tbar) in samples {
        for tau in tbar * c.t_ds..(tbar + 1) * c.t_ds {
            let row = c.e_index(tau, f, 0, 0);
            rng.fill(&mut e[row..row + (FRB_POLS * c.dishes) as usize]);
        }
    }
    let beamformer = FrbBeamformer::new(&gpu, c, &grid, &weights).unwrap();
    let e_gpu = gpu.upload(Ci4::from_bytes(&e)).unwrap();
    let mut i = gpu.alloc::<f16>(c.output_len(), POISON).unwrap();
    beamformer.beamform(&e_gpu, &mut i).unwrap();
    let got = i.download().unwrap();
    drop((e_gpu, i));
    let k = (4 * c.m * c.n) as usize;
    for &(f, tbar) in samples {
        let at = c.output_index(f, tbar, 0, 0);
        let sample: Vec<f64> = got[at..at + k].iter().map(|&h| h.to_f64()).collect();
        let want = frb_intensity_reference_sample(&c, Ci4::from_bytes(&e), &grid, &weights, f, tbar).unwrap();
        let err = rel_l2(&sample, &want);
        println!("{c:?} sample (f, tbar) = ({f}, {tbar}), I[{at}..]: relative L2 {err:.2e}");
        assert!(sample.iter().all(|v| v.is_finite()), "({f}, {tbar}): unwritten or non-finite");
        assert!(err <= FRB_REL_L2_BOUND, "({f}, {tbar}): {err}");
    }
    // Every other row of I: zeros, compared row by row (a memcmp each).
    let zeros = vec![0u16; k];
    let checked: Vec<usize> = samples.iter().map(|&(f, tbar)| c.output_index(f, tbar, 0, 0) / k).collect();
    let wrong: Vec<usize> = f16_bits(&got)
        .chunks(k)
        .enumerate()
        .filter(|&(row, values)| !checked.contains(&row) && values != zeros.as_slice())
        .map(|(row, _)| row)
        .take(8)
        .collect();
    assert!(wrong.is_empty(), "{c:?}: rows (f T/T_ds + tbar) {wrong:?} are not zero");
}

/// E of 4.3 GB (full CHORD, F = 16, T = 262176, T_ds = 48): the last output sample of
/// every channel reads E rows on both sides of 2^32 bytes (channel 0's row of sample
/// 262144 starts there). Checked: the first sample, and the last two of the first, a
/// middle and the last channel.
#[test]
#[ignore = "needs a CUDA GPU"]
fn e_past_2_32_bytes_is_read_to_its_end() {
    let _one_at_a_time = large_memory_guard();
    let c = FrbConfig { dishes: 512, m: 24, n: 24, freqs: 16, times: 262_176, t_ds: 48 };
    assert!(c.e_len() as u64 > 1 << 32 && c.e_index(262_144, 0, 0, 0) as u64 == 1 << 32);
    let last = c.out_times() - 1;
    check_launch_past_2_32(c, &[(0, 0), (0, last), (7, last - 1), (15, last)]);
}

/// I of 4.4 G values (full CHORD, F = 16, T = 120000, T_ds = 1, the even/odd kernel):
/// channel 15's sample 64135 is the row that crosses 2^32 values; a 32-bit offset would
/// have written the rows after it over channel 0 (sample 0 included). Checked: channel
/// 0's sample 0, channel 15's samples around the crossing and its last.
#[test]
#[ignore = "needs a CUDA GPU"]
fn i_past_2_32_values_is_written_in_place() {
    let _one_at_a_time = large_memory_guard();
    let c = FrbConfig { dishes: 512, m: 24, n: 24, freqs: 16, times: 120_000, t_ds: 1 };
    let crossing = c.output_index(15, 64_135, 0, 0) as u64;
    assert!(crossing < 1 << 32 && crossing + 2304 > 1 << 32);
    check_launch_past_2_32(c, &[(0, 0), (15, 64_134), (15, 64_135), (15, 64_136), (15, 119_999)]);
}
