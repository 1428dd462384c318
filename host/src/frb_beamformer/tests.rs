use super::*;
use radio_kernels_gpu::packing::unpack_f16x2;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn random_input(rng: &mut StdRng, len: usize) -> Vec<C64> {
    (0..len).map(|_| (rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0))).collect()
}

/// Eqs. 28-30 of Smith's FRB note with the zero padding of eqs. 23-24 reproduce the padded DFT (eq. 18).
#[test]
fn three_factor_decomposition_is_the_padded_dft() {
    let mut rng = StdRng::seed_from_u64(1);
    for n in FFT_SIZES {
        for trial in 0..4 {
            let mut x = random_input(&mut rng, n as usize);
            if trial == 0 {
                // A unit impulse at each n in turn gives the DFT's columns.
                for m in 0..n as usize {
                    x.iter_mut().for_each(|v| *v = (0.0, 0.0));
                    x[m] = (1.0, 0.0);
                    let err = relative_l2(&three_factor_fft(&x).unwrap(), &padded_dft(&x));
                    assert!(err < 1e-13, "N={n} impulse at {m}: {err}");
                }
                continue;
            }
            let err = relative_l2(&three_factor_fft(&x).unwrap(), &padded_dft(&x));
            assert!(err < 1e-13, "N={n}: {err}");
        }
    }
}

/// The sparse G3 (N <= 16), compressed and rebuilt through the universal metadata of eqs.
/// 171-173 with selector f, is the dense G3 with its Kronecker deltas (eq. 168), and so
/// gives the same product.
#[test]
fn sparse_gamma3_with_universal_metadata_equals_dense() {
    let mut rng = StdRng::seed_from_u64(2);
    for n in [8, 12, 16] {
        let f = sparse_selector(n).unwrap();
        let dense = gamma3_matrix(n).unwrap();
        // The delta(i_f, j_1) of eq. 168: every nonzero has j1 = i_f.
        for i in 0..16 {
            for j in 0..16 {
                if dense[i * 16 + j] != 0.0 {
                    assert_eq!((j >> 1) & 1, (i >> f) & 1, "N={n} ({i}, {j})");
                }
            }
        }
        let rebuilt = decompress_universal(&compress_sparse(&dense, f).unwrap(), f).unwrap();
        assert_eq!(rebuilt, dense, "N={n}");
        let b: Vec<f64> = (0..128).map(|_| rng.random_range(-1.0..1.0)).collect();
        assert_eq!(matmul(&rebuilt, &b, (16, 16, 8)), matmul(&dense, &b, (16, 16, 8)));
        // A wrong selector does not rebuild it: the test can tell.
        assert_ne!(
            decompress_universal(&compress_sparse(&dense, f).unwrap(), f ^ 3).unwrap(),
            dense,
            "N={n}"
        );
    }
}

/// The whole warp algorithm through the register images in f64 is the padded DFT, and the
/// images hold what eqs. 39, 41 and 45-47 say (dense register 3 = register 0, eq. 32).
#[test]
fn warp_emulation_is_the_padded_dft() {
    let mut rng = StdRng::seed_from_u64(3);
    for n in FFT_SIZES {
        let gammas = gamma_image_f64(n).unwrap();
        let s = ffts_per_warp(n) as usize;
        let x = random_input(&mut rng, s * n as usize);
        let y = emulate_warp_fft(n, &gammas, &x, false).unwrap();
        let want: Vec<C64> = x.chunks(n as usize).flat_map(padded_dft).collect();
        let err = relative_l2(&y, &want);
        assert!(err < 1e-13, "N={n}: {err}");
        for lane in 0..32 {
            let w = |k: usize, e: usize| gammas[(lane * GAMMA_WORDS + k) * 2 + e];
            if sparse_selector(n).is_none() {
                assert_eq!([w(G3_WORD + 3, 0), w(G3_WORD + 3, 1)], [w(G3_WORD, 0), w(G3_WORD, 1)]);
            } else {
                assert_eq!([w(G3_WORD + 2, 0), w(G3_WORD + 3, 1)], [0.0, 0.0]);
            }
        }
    }
}

/// The f16 pairs of a register image as f64 values, in image order.
fn f16_image_values(words: &[u32]) -> Vec<f64> {
    words
        .iter()
        .flat_map(|&w| {
            let (lo, hi) = unpack_f16x2(w);
            [f16::from_bits(lo).to_f64(), f16::from_bits(hi).to_f64()]
        })
        .collect()
}

/// With f16 Gammas and f16 rounding at each stage the error stays well inside the bound
/// the GPU tests use (and is far from zero, so the rounding model is on).
#[test]
fn f16_model_is_within_the_bound() {
    let mut rng = StdRng::seed_from_u64(4);
    for n in FFT_SIZES {
        let image = f16_image_values(&gamma_image(n).unwrap());
        let s = ffts_per_warp(n) as usize;
        let (mut got, mut want) = (Vec::new(), Vec::new());
        for _ in 0..64 {
            let x: Vec<C64> = random_input(&mut rng, s * n as usize)
                .into_iter()
                .map(|(re, im)| (round_f16(re), round_f16(im)))
                .collect();
            got.extend(emulate_warp_fft(n, &image, &x, true).unwrap());
            want.extend(x.chunks(n as usize).flat_map(padded_dft));
        }
        let err = relative_l2(&got, &want);
        println!("N={n}: f16 model relative L2 {err:.2e} (bound {FFT_REL_L2_BOUND:.2e})");
        assert!(err < FFT_REL_L2_BOUND / 2.0 && err > 1e-5, "N={n}: {err}");
    }
}

/// The even/odd kernel's image, read through the m16n8k16 / m16n8k8 tables and the
/// planar B pairs, is the padded DFT (exact in f64), and its f16 rounding stays within
/// f16 accuracy.
#[test]
fn even_odd_dft_emulation_is_the_padded_dft() {
    let mut rng = StdRng::seed_from_u64(24);
    let image = eo_image_f64();
    let x: [[C64; 24]; 8] = core::array::from_fn(|_| {
        core::array::from_fn(|_| (rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0)))
    });
    let got = emulate_eo_dft(&image, &x).unwrap();
    for g in 0..8 {
        let want = padded_dft(&x[g]);
        let err = relative_l2(&got[g], &want);
        assert!(err < 1e-12, "column {g}: {err}");
    }
    // The f16 image is within f16 rounding of it.
    let rounded: Vec<f64> = eo_image()
        .iter()
        .flat_map(|&w| {
            let (lo, hi) = unpack_f16x2(w);
            [f16::from_bits(lo).to_f64(), f16::from_bits(hi).to_f64()]
        })
        .collect();
    let got = emulate_eo_dft(&rounded, &x).unwrap();
    assert!(relative_l2(&got[3], &padded_dft(&x[3])) < 1e-3);
}

/// The direct DFT's image, read through the m16n8k16 / m16n8k8 tables and the X / Y maps,
/// is the padded DFT (exact in f64), and its f16 rounding stays well inside the bound.
#[test]
fn direct_dft_emulation_is_the_padded_dft() {
    let mut rng = StdRng::seed_from_u64(5);
    for n in FFT_SIZES.into_iter().filter(|&n| has_direct_dft(n)) {
        let x = random_input(&mut rng, 8 * n as usize);
        let want: Vec<C64> = x.chunks(n as usize).flat_map(padded_dft).collect();
        let exact = emulate_direct_dft(n, &direct_image_f64(n).unwrap(), &x).unwrap();
        assert!(relative_l2(&exact, &want) < 1e-12, "N={n}");
        let rounded = f16_image_values(&direct_image(n).unwrap());
        let err = relative_l2(&emulate_direct_dft(n, &rounded, &x).unwrap(), &want);
        println!("N={n}: direct DFT with f16 F, relative L2 {err:.2e}");
        assert!(err < FFT_REL_L2_BOUND / 4.0, "N={n}: {err}");
    }
    assert!(direct_image(16).is_err() && direct_image(24).is_err() && direct_image(10).is_err());
    assert_eq!(fft_methods(20), vec![FftMethod::Direct, FftMethod::ThreeFactor]);
    assert_eq!(fft_methods(16), vec![FftMethod::ThreeFactor]);
}

#[test]
fn bad_sizes_and_buffers_are_typed_errors() {
    for n in [0, 4, 6, 10, 36, 64] {
        assert!(matches!(check_fft_size(n), Err(Error::InvalidConfig(_))));
        assert!(gamma_image(n).is_err());
    }
    assert!(check_fft_buffers(12, 5, 60, 120).is_ok());
    assert!(matches!(check_fft_buffers(12, 0, 0, 0), Err(Error::InvalidConfig(_))));
    assert!(matches!(check_fft_buffers(12, 5, 59, 120), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(check_fft_buffers(12, 5, 60, 121), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(check_fft_buffers(12, MAX_FFT_BATCH + 1, 0, 0), Err(Error::InvalidConfig(_))));
}

fn chord_pathfinder(times: u32, t_ds: u32) -> FrbConfig {
    FrbConfig { dishes: 64, m: 8, n: 12, freqs: 2, times, t_ds }
}

/// A random injective map of D dishes onto the M x N grid.
fn random_grid(config: &FrbConfig, rng: &mut StdRng) -> Vec<(u32, u32)> {
    let mut points: Vec<(u32, u32)> =
        (0..config.m).flat_map(|m| (0..config.n).map(move |n| (m, n))).collect();
    for k in (1..points.len()).rev() {
        points.swap(k, rng.random_range(0..=k));
    }
    points.truncate(config.dishes as usize);
    points
}

fn unit_weights(config: &FrbConfig) -> Vec<Complex<f16>> {
    vec![Complex::new(f16::ONE, f16::ZERO); config.weights_len()]
}

/// Physics check: a plane wave from the half-integer direction (p0 / 2, q0 / 2) (E_d =
/// exp(-2 pi i (m p0 / 2M + n q0 / 2N)) quantised to int4) lights up pixel (p0, q0), for
/// every case, with a scrambled dish map and p0, q0 odd.
#[test]
fn plane_wave_lights_up_its_pixel() {
    let mut rng = StdRng::seed_from_u64(5);
    for case in FRB_CASES {
        let config = FrbConfig {
            dishes: case.dishes,
            m: case.m,
            n: case.n,
            freqs: 1,
            times: case.t_outer,
            t_ds: case.t_outer,
        };
        let grid = random_grid(&config, &mut rng);
        let (p0, q0) = (2 * rng.random_range(0..config.m) + 1, 2 * rng.random_range(0..config.n) + 1);
        let mut e = vec![Ci4::default(); config.e_len()];
        for tau in 0..config.times {
            for pol in 0..FRB_POLS {
                for (d, &(m, n)) in grid.iter().enumerate() {
                    let phase =
                        -PI * (m * p0) as f64 / config.m as f64 - PI * (n * q0) as f64 / config.n as f64;
                    let (re, im) = ((7.0 * phase.cos()).round() as i8, (7.0 * phase.sin()).round() as i8);
                    e[config.e_index(tau, 0, pol, d as u32)] = Ci4::new(re, im);
                }
            }
        }
        let i = frb_intensity_reference(&config, &e, &grid, &unit_weights(&config)).unwrap();
        let (best, _) =
            i.iter().enumerate().fold((0, f64::MIN), |b, (k, &v)| if v > b.1 { (k, v) } else { b });
        assert_eq!(best, config.output_index(0, 0, p0, q0), "{case:?}: brightest pixel");
        // Most of the coherent sum 7 D lands there (int4 rounding moves each phasor by at
        // most 0.71).
        let peak = i[best] / (2.0 * config.times as f64);
        assert!(peak > (0.85 * 7.0 * case.dishes as f64).powi(2), "{case:?}: {peak}");
    }
}

/// The separable reference equals the direct 2-d sum of eq. 51 (random E, W and map), and
/// downsampling by T_ds sums T_ds consecutive T_ds = 1 outputs.
#[test]
fn reference_is_eq_51_and_downsamples() {
    let mut rng = StdRng::seed_from_u64(6);
    let config = chord_pathfinder(48, 1);
    let grid = random_grid(&config, &mut rng);
    let e: Vec<Ci4> = (0..config.e_len()).map(|_| Ci4(rng.random())).collect();
    let weights: Vec<Complex<f16>> = (0..config.weights_len())
        .map(|_| {
            let mut h = || f16::from_f64(rng.random_range(-1.0..1.0));
            Complex::new(h(), h())
        })
        .collect();
    let fine = frb_intensity_reference(&config, &e, &grid, &weights).unwrap();
    let w = unpack_c16(&weights);
    for (f, tau, p, q) in [(0, 0, 0, 0), (1, 5, 3, 17), (0, 47, 15, 23), (1, 20, 8, 12)] {
        let mut total = 0.0;
        for pol in 0..FRB_POLS {
            let mut sum = (0.0, 0.0);
            for (d, &(m, n)) in grid.iter().enumerate() {
                let (re, im) =
                    radio_kernels_gpu::packing::unpack_ci4(e[config.e_index(tau, f, pol, d as u32)].into());
                let x = cmul(w[config.weight_index(f, pol, m, n)], (re as f64, im as f64));
                let phase = PI * (m * p) as f64 / config.m as f64 + PI * (n * q) as f64 / config.n as f64;
                let t = cmul(x, cis(phase));
                sum = (sum.0 + t.0, sum.1 + t.1);
            }
            total += sum.0 * sum.0 + sum.1 * sum.1;
        }
        let got = fine[config.output_index(f, tau, p, q)];
        assert!((got - total).abs() <= 1e-9 * total.max(1.0), "({f}, {tau}, {p}, {q}): {got} vs {total}");
    }
    for t_ds in [3, 16, 48] {
        let coarse_config = FrbConfig { t_ds, ..config };
        let coarse = frb_intensity_reference(&coarse_config, &e, &grid, &weights).unwrap();
        for f in 0..config.freqs {
            for tbar in 0..coarse_config.out_times() {
                for pq in 0..(4 * config.m * config.n) {
                    let (p, q) = (pq / (2 * config.n), pq % (2 * config.n));
                    let sum: f64 = (tbar * t_ds..(tbar + 1) * t_ds)
                        .map(|tau| fine[config.output_index(f, tau, p, q)])
                        .sum();
                    let got = coarse[coarse_config.output_index(f, tbar, p, q)];
                    assert!((got - sum).abs() <= 1e-9 * sum.max(1.0), "T_ds={t_ds}");
                }
            }
        }
    }
}

/// The split at the configurations of Table 3 of Smith's FRB note on 132 SMs: 4 output samples per block at
/// full CHORD (4 resident blocks: 528 slots, 3072 blocks), 12 at the pathfinder, 19 and
/// 16 at HIRAX (at most 480 input samples per block); every split is in range, and short
/// launches still get several blocks per channel.
#[test]
fn output_samples_per_block_follow_the_measured_rule() {
    let table_3 = |dishes, m, n, freqs, times, t_ds| FrbConfig { dishes, m, n, freqs, times, t_ds };
    assert_eq!(frb_output_samples_per_block(&table_3(512, 24, 24, 256, 1920, 40), 528).unwrap(), 4);
    assert_eq!(frb_output_samples_per_block(&table_3(64, 8, 12, 2048, 1920, 40), 528).unwrap(), 12);
    assert_eq!(frb_output_samples_per_block(&table_3(256, 16, 16, 1024, 3200, 25), 528).unwrap(), 19);
    assert_eq!(frb_output_samples_per_block(&table_3(256, 16, 20, 1024, 2000, 25), 528).unwrap(), 16);
    let small = table_3(64, 8, 12, 3, 144, 1);
    assert_eq!(frb_output_samples_per_block(&small, 528).unwrap(), 1);
    for slots in [1, 7, 132, 396, 528, 100_000] {
        for t_ds in [1, 3, 40, 144, 1000] {
            let c = FrbConfig { times: 144 * 1000, t_ds, ..small };
            let k = frb_output_samples_per_block(&c, slots).unwrap();
            assert!(k >= 1 && k <= c.out_times(), "{c:?} {slots}");
        }
    }
    // The grid's 2^31 - 1 blocks bound the chunks: the largest launches of every case,
    // with so many resident slots that the rule wants one sample per block.
    for case in FRB_CASES {
        let times = (FRB_MAX_ROWS / 65535) as u32 / case.t_outer * case.t_outer;
        let c = FrbConfig { dishes: case.dishes, m: case.m, n: case.n, freqs: 65535, times, t_ds: 1 };
        assert!(c.validate().is_ok() && c.freqs as u64 * c.out_times() as u64 > FRB_MAX_BLOCKS);
        for slots in [528, u32::MAX] {
            let k = frb_output_samples_per_block(&c, slots).unwrap();
            assert!(frb_blocks(&c, k) <= FRB_MAX_BLOCKS && k <= c.out_times(), "{c:?}: {k}");
        }
    }
    assert!(frb_output_samples_per_block(&small, 0).is_err());
    assert!(frb_output_samples_per_block(&FrbConfig { t_ds: 0, ..small }, 528).is_err());
}

#[test]
fn frb_configs_and_maps_are_validated() {
    let ok = chord_pathfinder(48, 3);
    assert!(ok.validate().is_ok());
    for c in FRB_CASES {
        let config = FrbConfig { dishes: c.dishes, m: c.m, n: c.n, freqs: 1, times: c.t_outer * 7, t_ds: 7 };
        assert!(config.validate().is_ok(), "{c:?}");
    }
    let invalid = |config: FrbConfig| matches!(config.validate(), Err(Error::InvalidConfig(_)));
    assert!(invalid(FrbConfig { n: 16, ..ok })); // (64, 8, 16): no such case
    assert!(invalid(FrbConfig { dishes: 512, m: 24, n: 32, ..ok }));
    assert!(invalid(FrbConfig { times: 40, ..ok })); // not a multiple of T_outer = 48
    assert!(invalid(FrbConfig { times: 0, ..ok }));
    assert!(invalid(FrbConfig { t_ds: 0, ..ok }));
    assert!(invalid(FrbConfig { t_ds: 5, ..ok })); // 48 is not a multiple of 5
    assert!(invalid(FrbConfig { freqs: 0, ..ok }));
    let mut rng = StdRng::seed_from_u64(8);
    let mut grid = random_grid(&ok, &mut rng);
    assert!(ok.check_grid(&grid).is_ok());
    assert!(matches!(ok.check_grid(&grid[1..]), Err(Error::ShapeMismatch { .. })));
    let keep = grid[3];
    grid[3] = grid[10];
    assert!(matches!(ok.check_grid(&grid), Err(Error::InvalidConfig(m)) if m.contains("both mapped")));
    grid[3] = (8, 0);
    assert!(matches!(ok.check_grid(&grid), Err(Error::InvalidConfig(m)) if m.contains("outside")));
    grid[3] = keep;
    let e = vec![Ci4::default(); ok.e_len()];
    assert!(frb_intensity_reference(&ok, &e[1..], &grid, &unit_weights(&ok)).is_err());
    assert!(frb_intensity_reference(&ok, &e, &grid, &unit_weights(&ok)[1..]).is_err());
}
