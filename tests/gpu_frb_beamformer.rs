//! GPU tests of the FRB beamformer's tensor-core short FFT (seed 000 sec. 3): for every N,
//! fresh random complex f16 inputs, outputs poisoned with NaN before each launch, and the
//! result within `FFT_REL_L2_BOUND` (2^-8, derived in `radio_kernels::frb_beamformer`) of the
//! f64 padded DFT of the same f16 inputs, over the batch and for every single FFT. Batches
//! that end inside a warp check the spectator masking; a second launch over the same output
//! checks that nothing depends on leftovers.
//!
//! Part B (module `frb`): the first FRB kernel for all five cases against the f64 reference
//! (`FRB_REL_L2_BOUND`, 2^-6), T_ds of 1, 3 and T, scrambled dish maps, a plane-wave pixel
//! check, typed errors for bad shapes, maps, non-finite weights and foreign buffers; a
//! property test over random valid shapes and data (extremes included); and the two launches
//! past 2^32: E of 4.3 GB and I of 4.4 G values, checked against the reference at the samples
//! around 2^32 and at the end, every other output exactly zero.
//!
//! Part C (module `streaming`): every FRB launcher runs on the stream `set_stream` gives it
//! (checked by holding that stream behind a gate and seeing the output still poisoned), with
//! the default stream's bytes; the streaming engine (first kernel, each resampler,
//! quantiser) equals the one-shot chain chunk by chunk, bit for bit, for random shapes, both
//! code widths and ring depths 1 to 4, with levels changed mid-stream, through back-pressure
//! (`Backlog`) and registered host memory; stages that do not chain are typed errors; and
//! `first_launch_probe` (run by hand) times the first kernel's first launches.
mod common;

use common::*;
use half::f16;
use radio_kernels::frb_beamformer::{
    fft_kernel, fft_methods, padded_dft, relative_l2, unpack_c16, FftMethod, ShortFft, C64, FFT_REL_L2_BOUND,
};
use radio_kernels::gpu_shared::frb_beamformer::{ffts_per_warp, FFT_SIZES};
use radio_kernels::gpu_shared::packing::pack_f16x2;
use radio_kernels::Error;
use rand::Rng;

/// f16 NaN in both halves (0x7e7e): an element the kernel never wrote cannot pass.
const POISON: u8 = 0x7e;

fn random_c16(rng: &mut impl Rng, len: usize) -> Vec<u32> {
    (0..len)
        .map(|_| {
            let re = f16::from_f32(rng.random_range(-1.0f32..1.0));
            let im = f16::from_f32(rng.random_range(-1.0f32..1.0));
            pack_f16x2(re.to_bits(), im.to_bits())
        })
        .collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn short_fft_matches_the_f64_padded_dft_for_every_n() {
    let gpu = gpu();
    let mut rng = rng();
    for (n, method) in FFT_SIZES.into_iter().flat_map(|n| fft_methods(n).into_iter().map(move |m| (n, m))) {
        let fft = ShortFft::with_kernel(&gpu, n, &fft_kernel(n, method).unwrap().batch).unwrap();
        // A whole number of blocks, one that ends inside a warp, and a single FFT.
        for batch in [4096, 1003 + 4 * rng.random_range(0..200), 1] {
            let x_words = random_c16(&mut rng, batch * n as usize);
            let x = gpu.upload(&x_words).unwrap();
            let mut y = gpu.alloc::<u32>(batch * 2 * n as usize, POISON).unwrap();
            fft.run(&x, &mut y, batch).unwrap();
            let got = unpack_c16(&y.download().unwrap());
            let input = unpack_c16(&x_words);
            let want: Vec<C64> = input.chunks(n as usize).flat_map(padded_dft).collect();
            assert!(
                got.iter().all(|v| v.0.is_finite() && v.1.is_finite()),
                "N={n}: unwritten or non-finite output"
            );
            let err = relative_l2(&got, &want);
            let worst = got
                .chunks(2 * n as usize)
                .zip(want.chunks(2 * n as usize))
                .map(|(g, w)| relative_l2(g, w))
                .fold(0.0, f64::max);
            println!("N={n:2} {method:?} batch {batch:5}: relative L2 {err:.2e}, worst single FFT {worst:.2e} (bound {FFT_REL_L2_BOUND:.2e})");
            assert!(
                err <= FFT_REL_L2_BOUND && worst <= FFT_REL_L2_BOUND,
                "N={n} {method:?} batch {batch}: {err} / {worst}"
            );
            // Again into a freshly poisoned buffer: same bits (the kernel is deterministic).
            y.poison(POISON).unwrap();
            fft.run(&x, &mut y, batch).unwrap();
            assert_eq!(unpack_c16(&y.download().unwrap()), got, "N={n}: second launch differs");
        }
    }
}

/// Impulses: input `delta(n - m)` gives `exp(2 pi i m q / 2N)`, which pins every (n, q) pair
/// (a permuted input or output index would show at once).
#[test]
#[ignore = "needs a CUDA GPU"]
fn short_fft_of_impulses_is_the_dft_matrix() {
    let gpu = gpu();
    for (n, method) in FFT_SIZES.into_iter().flat_map(|n| fft_methods(n).into_iter().map(move |m| (n, m))) {
        let fft = ShortFft::with_kernel(&gpu, n, &fft_kernel(n, method).unwrap().batch).unwrap();
        let batch = n as usize;
        let mut x_words = vec![0u32; batch * n as usize];
        for m in 0..n as usize {
            x_words[m * n as usize + m] = pack_f16x2(f16::ONE.to_bits(), 0);
        }
        let x = gpu.upload(&x_words).unwrap();
        let mut y = gpu.alloc::<u32>(batch * 2 * n as usize, POISON).unwrap();
        fft.run(&x, &mut y, batch).unwrap();
        let got = unpack_c16(&y.download().unwrap());
        let want: Vec<C64> = unpack_c16(&x_words).chunks(n as usize).flat_map(padded_dft).collect();
        let err = relative_l2(&got, &want);
        println!("N={n:2} {method:?} impulses: relative L2 {err:.2e}");
        assert!(err <= FFT_REL_L2_BOUND, "N={n} {method:?}: {err}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_launches_are_typed_errors() {
    let gpu = gpu();
    assert!(matches!(ShortFft::new(&gpu, 10), Err(Error::InvalidConfig(_))));
    assert!(matches!(ShortFft::new(&gpu, 64), Err(Error::InvalidConfig(_))));
    // A kernel of another N, and a spec that is no short FFT kernel.
    let direct = fft_kernel(20, FftMethod::Direct).unwrap();
    assert!(matches!(ShortFft::with_kernel(&gpu, 16, &direct.batch), Err(Error::InvalidConfig(_))));
    assert!(matches!(ShortFft::with_kernel(&gpu, 10, &direct.batch), Err(Error::InvalidConfig(_))));
    let first = &radio_kernels::gpu_shared::frb_beamformer::FRB_KERNELS[0].spec;
    assert!(matches!(ShortFft::with_kernel(&gpu, 20, first), Err(Error::InvalidConfig(_))));
    assert_eq!(ShortFft::with_kernel(&gpu, 20, &direct.looped).unwrap().method(), FftMethod::Direct);
    let fft = ShortFft::new(&gpu, 12).unwrap();
    let x = gpu.alloc::<u32>(12 * 5, 0).unwrap();
    let mut y = gpu.alloc::<u32>(24 * 5, POISON).unwrap();
    assert!(matches!(fft.run(&x, &mut y, 4), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(fft.run(&x, &mut y, 0), Err(Error::InvalidConfig(_))));
    let mut short = gpu.alloc::<u32>(24 * 5 - 1, POISON).unwrap();
    assert!(matches!(fft.run(&x, &mut short, 5), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(fft.run_loop(&x, &mut y, 0, 1, 0), Err(Error::InvalidConfig(_))));
    assert!(matches!(fft.run_loop(&x, &mut y, 1, 1, 0), Err(Error::ShapeMismatch { .. })));
    fft.run(&x, &mut y, 5).unwrap();
}

/// The benchmark kernel computes the same FFTs: with one iteration and `salt = 0` its output
/// word is the xor of the four FFTs' output registers, which we rebuild from the batch
/// kernel's results of the same inputs (bit-exact: same instructions, same Gammas). Words in
/// zero-padding lanes (`d >= N/4`) are random here but meet `G2 = 0`, so they cannot reach
/// the output.
#[test]
#[ignore = "needs a CUDA GPU"]
fn loop_kernel_runs_the_same_fft() {
    use radio_kernels::gpu_shared::frb_beamformer::{x_coordinates, y_coordinates};
    use radio_kernels::gpu_shared::layout::Location;
    let gpu = gpu();
    let mut rng = rng();
    for n in FFT_SIZES {
        // The three-factor kernels' register maps (eqs. 25-26), also at N = 20, whose
        // default is the direct DFT (checked by `direct_loop_kernel_runs_the_same_dft`).
        let fft =
            ShortFft::with_kernel(&gpu, n, &fft_kernel(n, FftMethod::ThreeFactor).unwrap().batch).unwrap();
        let threads = radio_kernels::frb_beamformer::FFT_THREADS as usize;
        // Registers: x[4 t + k] is chain k's input register of thread t.
        let regs: Vec<u32> = random_c16(&mut rng, 4 * threads);
        let x = gpu.upload(&regs).unwrap();
        let mut y = gpu.alloc::<u32>(threads, POISON).unwrap();
        fft.run_loop(&x, &mut y, 1, 1, 0).unwrap();
        let got = y.download().unwrap();
        // The same register images as batched FFT inputs: warp w, chain k -> FFTs of warp (w, k).
        let per_warp = ffts_per_warp(n) as usize;
        let mut expect = vec![0u32; threads];
        for warp in 0..threads / 32 {
            for k in 0..4 {
                let mut xb = vec![0u32; per_warp * n as usize];
                for lane in 0..32 {
                    let (c, d, s) = x_coordinates(n, lane);
                    if d < n / 4 {
                        xb[s as usize * n as usize + ((n / 4) * c + d) as usize] =
                            regs[4 * (warp * 32 + lane as usize) + k];
                    }
                }
                let xd = gpu.upload(&xb).unwrap();
                let mut yd = gpu.alloc::<u32>(per_warp * 2 * n as usize, POISON).unwrap();
                fft.run(&xd, &mut yd, per_warp).unwrap();
                let yb = yd.download().unwrap();
                for lane in 0..32u32 {
                    let (u, v, s, _) = y_coordinates(n, Location { lane, register: 0, element: 0 });
                    let (a, b) = if u < n / 4 {
                        let at = s as usize * 2 * n as usize + (8 * u + v) as usize;
                        (yb[at], yb[at + 1])
                    } else {
                        (0, 0)
                    };
                    // Registers (Re of v, v+1) and (Im of v, v+1) from the complex words.
                    let re = (a & 0xffff) | (b << 16);
                    let im = (a >> 16) | (b & 0xffff_0000);
                    expect[warp * 32 + lane as usize] ^= re ^ im;
                }
            }
        }
        assert_eq!(got, expect, "N={n}");
        println!("N={n}: loop kernel output matches the batch kernel bit for bit");
    }
}

/// As `loop_kernel_runs_the_same_fft` for the direct DFT: group k's input register m of
/// thread t is `x[4 t + (k + m) % 4]`, which holds `X_{4 m + lane % 4}` of FFT `lane / 4`;
/// the output word is the xor over groups and row tiles of both result registers.
#[test]
#[ignore = "needs a CUDA GPU"]
fn direct_loop_kernel_runs_the_same_dft() {
    use radio_kernels::gpu_shared::frb_beamformer::{direct_y_location, has_direct_dft};
    let gpu = gpu();
    let mut rng = rng();
    for n in FFT_SIZES.into_iter().filter(|&n| has_direct_dft(n)) {
        let fft = ShortFft::with_kernel(&gpu, n, &fft_kernel(n, FftMethod::Direct).unwrap().batch).unwrap();
        let threads = radio_kernels::frb_beamformer::FFT_THREADS as usize;
        let regs: Vec<u32> = random_c16(&mut rng, 4 * threads);
        let x = gpu.upload(&regs).unwrap();
        let mut y = gpu.alloc::<u32>(threads, POISON).unwrap();
        fft.run_loop(&x, &mut y, 1, 1, 0).unwrap();
        let got = y.download().unwrap();
        let nn = n as usize;
        let mut expect = vec![0u32; threads];
        for warp in 0..threads / 32 {
            for k in 0..4 {
                let mut xb = vec![0u32; 8 * nn];
                for lane in 0..32 {
                    for m in 0..nn / 4 {
                        xb[(lane / 4) * nn + 4 * m + lane % 4] = regs[4 * (warp * 32 + lane) + (k + m) % 4];
                    }
                }
                let xd = gpu.upload(&xb).unwrap();
                let mut yd = gpu.alloc::<u32>(8 * 2 * nn, POISON).unwrap();
                fft.run(&xd, &mut yd, 8).unwrap();
                let yb = yd.download().unwrap();
                // Rebuild every result register of every lane from the batch output.
                let mut words = vec![[0u32; 12]; 32];
                for s in 0..8u32 {
                    for q in 0..2 * n {
                        let word = yb[s as usize * 2 * nn + q as usize];
                        for reim in 0..2 {
                            let at = direct_y_location(q, s, reim);
                            let half = (word >> (16 * reim)) & 0xffff;
                            words[at.lane as usize][at.register as usize] |= half << (16 * at.element);
                        }
                    }
                }
                for lane in 0..32 {
                    expect[warp * 32 + lane] ^= words[lane].iter().fold(0, |a, w| a ^ w);
                }
            }
        }
        assert_eq!(got, expect, "N={n}");
        println!("N={n}: direct loop kernel output matches the batch kernel bit for bit");
    }
}

// --- Part B: the first FRB kernel -------------------------------------------------------

mod frb {
    use super::*;
    use radio_kernels::frb_beamformer::{
        frb_intensity_reference, frb_intensity_reference_sample, FrbBeamformer, FrbConfig, FRB_CASES,
        FRB_POLS, FRB_REL_L2_BOUND,
    };
    use radio_kernels::gpu_shared::packing::pack_ci4;
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
    pub(super) fn random_weights(c: &FrbConfig, rng: &mut StdRng) -> Vec<u32> {
        let w_max = (1000.0 / (4.0 * c.t_ds as f64 * c.dishes as f64 * 21.5)).sqrt() / 2f64.sqrt();
        (0..c.weights_len())
            .map(|_| {
                let mut h = || f16::from_f64(rng.random_range(-w_max..w_max)).to_bits();
                pack_f16x2(h(), h())
            })
            .collect()
    }

    fn run(
        gpu: &radio_kernels::Gpu,
        c: FrbConfig,
        grid: &[(u32, u32)],
        weights: &[u32],
        e: &[u8],
    ) -> Vec<f64> {
        let beamformer = FrbBeamformer::new(gpu, c, grid, weights).unwrap();
        let e = gpu.upload(e).unwrap();
        let mut i = gpu.alloc::<u16>(c.output_len(), POISON).unwrap();
        beamformer.beamform(&e, &mut i).unwrap();
        i.download().unwrap().into_iter().map(|h| f16::from_bits(h).to_f64()).collect()
    }

    fn run_per_block(
        gpu: &radio_kernels::Gpu,
        c: FrbConfig,
        grid: &[(u32, u32)],
        weights: &[u32],
        e: &[u8],
        per_block: Option<u32>,
    ) -> Vec<f64> {
        let mut beamformer = FrbBeamformer::new(gpu, c, grid, weights).unwrap();
        if let Some(k) = per_block {
            beamformer.set_output_samples_per_block(k).unwrap();
        }
        let e = gpu.upload(e).unwrap();
        let mut i = gpu.alloc::<u16>(c.output_len(), POISON).unwrap();
        beamformer.beamform(&e, &mut i).unwrap();
        i.download().unwrap().into_iter().map(|h| f16::from_bits(h).to_f64()).collect()
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
            let e: Vec<u8> = (0..c.e_len()).map(|_| rng.random()).collect();
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
                let e: Vec<u8> = (0..c.e_len()).map(|_| rng.random()).collect();
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
            let mut e = vec![0u8; c.e_len()];
            for tau in 0..c.times {
                for f in 0..c.freqs {
                    for pol in 0..FRB_POLS {
                        for (d, &(m, n)) in grid.iter().enumerate() {
                            let phase = -std::f64::consts::PI
                                * ((m * p0) as f64 / c.m as f64 + (n * q0) as f64 / c.n as f64);
                            let (re, im) =
                                ((7.0 * phase.cos()).round() as i8, (7.0 * phase.sin()).round() as i8);
                            e[c.e_index(tau, f, pol, d as u32)] = pack_ci4(re, im);
                        }
                    }
                }
            }
            // |W| = 1 / (8 D) keeps the coherent peak 2 T_ds (7 D / (8 D))^2 well inside f16.
            let w = f16::from_f64(1.0 / (8.0 * c.dishes as f64)).to_bits();
            let weights = vec![pack_f16x2(w, 0); c.weights_len()];
            let got = run(&gpu, c, &grid, &weights, &e);
            for f in 0..c.freqs {
                for tbar in 0..c.out_times() {
                    let first = c.output_index(f, tbar, 0, 0);
                    let block = &got[first..first + (4 * c.m * c.n) as usize];
                    let best =
                        block.iter().enumerate().fold(0, |b, (k, &v)| if v > block[b] { k } else { b });
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
        assert!(matches!(
            FrbBeamformer::new(&gpu, ok, &grid, &weights[1..]),
            Err(Error::ShapeMismatch { .. })
        ));
        let beamformer = FrbBeamformer::new(&gpu, ok, &grid, &weights).unwrap();
        let e = gpu.alloc::<u8>(ok.e_len(), 0).unwrap();
        let mut short = gpu.alloc::<u16>(ok.output_len() - 1, POISON).unwrap();
        assert!(matches!(beamformer.beamform(&e, &mut short), Err(Error::ShapeMismatch { .. })));
        let e_short = gpu.alloc::<u8>(ok.e_len() - 1, 0).unwrap();
        let mut i = gpu.alloc::<u16>(ok.output_len(), POISON).unwrap();
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
            weights[at] = bad;
            let r = FrbBeamformer::new(&gpu, c, &grid, &weights);
            assert!(
                matches!(r, Err(Error::NonFinite { what: "FRB weights", index }) if index == at),
                "{bad:#x} at {at}"
            );
        }
        let largest = vec![pack_f16x2(f16::MAX.to_bits(), f16::MIN.to_bits()); c.weights_len()];
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
        let (e, foreign_e) =
            (gpu.alloc::<u8>(c.e_len(), 0).unwrap(), other.alloc::<u8>(c.e_len(), 0).unwrap());
        let mut i = gpu.alloc::<u16>(c.output_len(), POISON).unwrap();
        let mut foreign_i = other.alloc::<u16>(c.output_len(), POISON).unwrap();
        assert!(matches!(beamformer.beamform(&foreign_e, &mut i), Err(Error::WrongDevice { .. })));
        assert!(matches!(beamformer.beamform(&e, &mut foreign_i), Err(Error::WrongDevice { .. })));
        beamformer.beamform(&e, &mut i).unwrap();
        let fft = ShortFft::new(&gpu, 16).unwrap();
        let x = other.alloc::<u32>(16, 0).unwrap();
        let mut y = gpu.alloc::<u32>(32, POISON).unwrap();
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
        let strategy =
            (case, 1u32..=2, t_ds, 1u32..=2, prop::option::of(1u32..=5), fill, weights, any::<u64>());
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
                    let w_max =
                        0.9 * 256.0 / ((2.0 * t_ds as f64).sqrt() * 8.0 * 2f64.sqrt() * c.dishes as f64);
                    let h = f16::from_f64(w_max / 2f64.sqrt());
                    (0..c.weights_len())
                        .map(|_| {
                            let mut signed = || if rng.random() { h.to_bits() } else { (-h).to_bits() };
                            pack_f16x2(signed(), signed())
                        })
                        .collect()
                }
            };
            let e: Vec<u8> = (0..c.e_len())
                .map(|_| match fill {
                    Fill::Uniform => rng.random(),
                    Fill::Extreme => pack_ci4(-8, -8),
                    Fill::Sparse => match rng.random_range(0..8) {
                        0 => pack_ci4(-8, -8),
                        1 => pack_ci4(7, -8),
                        2 => rng.random(),
                        _ => 0,
                    },
                })
                .collect();
            let got = run_per_block(&gpu, c, &grid, &w, &e, per_block);
            let want = frb_intensity_reference(&c, &e, &grid, &w).unwrap();
            prop_assert!(got.iter().all(|v| v.is_finite()), "{c:?}: unwritten or non-finite I");
            let norm: f64 = want.iter().map(|x| x * x).sum();
            let err =
                if norm == 0.0 { got.iter().map(|x| x.abs()).sum::<f64>() } else { rel_l2(&got, &want) };
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
        let e_gpu = gpu.upload(&e).unwrap();
        let mut i = gpu.alloc::<u16>(c.output_len(), POISON).unwrap();
        beamformer.beamform(&e_gpu, &mut i).unwrap();
        let got = i.download().unwrap();
        drop((e_gpu, i));
        let k = (4 * c.m * c.n) as usize;
        for &(f, tbar) in samples {
            let at = c.output_index(f, tbar, 0, 0);
            let sample: Vec<f64> = got[at..at + k].iter().map(|&h| f16::from_bits(h).to_f64()).collect();
            let want = frb_intensity_reference_sample(&c, &e, &grid, &weights, f, tbar).unwrap();
            let err = rel_l2(&sample, &want);
            println!("{c:?} sample (f, tbar) = ({f}, {tbar}), I[{at}..]: relative L2 {err:.2e}");
            assert!(sample.iter().all(|v| v.is_finite()), "({f}, {tbar}): unwritten or non-finite");
            assert!(err <= FRB_REL_L2_BOUND, "({f}, {tbar}): {err}");
        }
        // Every other row of I: zeros, compared row by row (a memcmp each).
        let zeros = vec![0u16; k];
        let checked: Vec<usize> =
            samples.iter().map(|&(f, tbar)| c.output_index(f, tbar, 0, 0) / k).collect();
        let wrong: Vec<usize> = got
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
}

// --- Part C: callers' streams and the streaming engine ------------------------------------

mod streaming {
    use super::frb::{random_grid, random_weights, rel_l2};
    use super::*;
    use radio_kernels::frb_beamformer::factorized::{FactorizedConfig, FactorizedResampler};
    use radio_kernels::frb_beamformer::quantize::{Format, QuantizeConfig, Quantizer};
    use radio_kernels::frb_beamformer::resample::{FusedResampler, ResampleConfig, Resampler};
    use radio_kernels::frb_beamformer::{
        frb_intensity_reference_sample, FrbBeamformer, FrbConfig, FrbResampling, FrbStream, FRB_CASES,
        FRB_REL_L2_BOUND,
    };
    use radio_kernels::{DeviceBuffer, Gpu};
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use std::time::Instant;

    /// The FRB launchers and engine can move between threads (and the launchers be shared).
    #[test]
    fn thread_safety_is_as_documented() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<FrbBeamformer<'static>>();
        send_sync::<Resampler<'static>>();
        send_sync::<FusedResampler<'static>>();
        send_sync::<FactorizedResampler<'static>>();
        send_sync::<Quantizer<'static>>();
        send_sync::<ShortFft<'static>>();
        send::<FrbStream<'static, 'static>>();
    }

    /// The three FRB stages of one test: the first kernel, one resampler, the quantiser.
    enum Stage<'g> {
        Weights(Resampler<'g>),
        Fused(FusedResampler<'g>),
        Factorized(FactorizedResampler<'g>),
    }

    impl<'g> Stage<'g> {
        fn resample(&self, i: &DeviceBuffer<u16>, j: &mut DeviceBuffer<u16>) {
            match self {
                Stage::Weights(r) => r.resample(i, j).unwrap(),
                Stage::Fused(r) => r.resample(i, j).unwrap(),
                Stage::Factorized(r) => r.resample(i, j).unwrap(),
            }
        }
        fn as_stage(&self) -> FrbResampling<'_, 'g> {
            match self {
                Stage::Weights(r) => r.into(),
                Stage::Fused(r) => r.into(),
                Stage::Factorized(r) => r.into(),
            }
        }
        fn name(&self) -> &'static str {
            match self {
                Stage::Weights(_) => "W path",
                Stage::Fused(_) => "fused",
                Stage::Factorized(_) => "factorized",
            }
        }
    }

    /// A random small chain: a pathfinder case, 1 to 3 channels, T_ds from 1 to past the f16
    /// sums' limit (both first-kernel families), T a multiple of lcm(T_outer, T_ds), 1 to 80
    /// beams (a beam grid for the factorized stage), random positions. `kind`: 0 the W path,
    /// 1 fused, 2 factorized.
    fn chain<'g>(
        gpu: &'g Gpu,
        rng: &mut StdRng,
        kind: usize,
        format: Format,
    ) -> (FrbBeamformer<'g>, Stage<'g>, Quantizer<'g>) {
        let case = FRB_CASES[rng.random_range(0..2)];
        let t_ds = [1u32, 2, 3, 4, 16, 24, 48, 128][rng.random_range(0..8)];
        let (mut a, mut b) = (case.t_outer, t_ds);
        while b != 0 {
            (a, b) = (b, a % b);
        }
        let times = case.t_outer / a * t_ds * rng.random_range(1..=2);
        let c = FrbConfig {
            dishes: case.dishes,
            m: case.m,
            n: case.n,
            freqs: rng.random_range(1..=3),
            times,
            t_ds,
        };
        let first = FrbBeamformer::new(gpu, c, &random_grid(&c, rng), &random_weights(&c, rng)).unwrap();
        let (slow, m, n) = (c.out_times(), c.m, c.n);
        let positions = |rng: &mut StdRng, len: usize| -> DeviceBuffer<f32> {
            gpu.upload(&(0..len).map(|_| rng.random_range(-12.0f32..12.0)).collect::<Vec<_>>()).unwrap()
        };
        let stage = if kind == 2 {
            let (g, g_prime) = (rng.random_range(1..=9), rng.random_range(1..=9));
            let fc = FactorizedConfig { channels: c.freqs, times: slow, m, n, g, g_prime };
            let mut r = FactorizedResampler::new(gpu, fc).unwrap();
            let t: Vec<f32> = (0..fc.theta_len()).map(|_| rng.random_range(-12.0..12.0)).collect();
            let tp: Vec<f32> = (0..fc.theta_prime_len()).map(|_| rng.random_range(-12.0..12.0)).collect();
            r.set_grid(&t, &tp).unwrap();
            Stage::Factorized(r)
        } else {
            let rc = ResampleConfig { channels: c.freqs, times: slow, m, n, beams: rng.random_range(1..=80) };
            let (t, tp) = (positions(rng, rc.positions_len()), positions(rng, rc.positions_len()));
            if kind == 0 {
                let mut r = Resampler::new(gpu, rc).unwrap();
                r.set_beams(&t, &tp).unwrap();
                Stage::Weights(r)
            } else {
                let mut r = FusedResampler::new(gpu, rc).unwrap();
                r.set_beams(&t, &tp).unwrap();
                Stage::Fused(r)
            }
        };
        let beams = match &stage {
            Stage::Weights(r) => r.config().beams,
            Stage::Fused(r) => r.config().beams,
            Stage::Factorized(r) => r.config().beams(),
        };
        let qc = QuantizeConfig { channels: c.freqs, times: slow, beams, format };
        (first, stage, Quantizer::new(gpu, qc).unwrap())
    }

    /// J of one chunk through the one-shot calls on device buffers (outputs poisoned).
    fn one_shot_j(gpu: &Gpu, first: &FrbBeamformer, stage: &Stage, e: &[u8]) -> DeviceBuffer<u16> {
        let beams = match stage {
            Stage::Weights(r) => r.config().output_len(),
            Stage::Fused(r) => r.config().output_len(),
            Stage::Factorized(r) => r.config().output_len(),
        };
        let e = gpu.upload(e).unwrap();
        let mut i = gpu.alloc::<u16>(first.config().output_len(), POISON).unwrap();
        first.beamform(&e, &mut i).unwrap();
        let mut j = gpu.alloc::<u16>(beams, POISON).unwrap();
        stage.resample(&i, &mut j);
        j
    }

    /// One chunk through the one-shot chain (outputs poisoned): the codes and clip counts.
    fn one_shot(
        gpu: &Gpu,
        (first, stage, quantizer): (&FrbBeamformer, &Stage, &Quantizer),
        e: &[u8],
        (scale, offset): &(Vec<f32>, Vec<f32>),
    ) -> (Vec<u8>, Vec<u32>) {
        let q = quantizer.config();
        let j = one_shot_j(gpu, first, stage, e);
        let (scale, offset) = (gpu.upload(scale).unwrap(), gpu.upload(offset).unwrap());
        let mut out = gpu.alloc::<u8>(q.output_len(), 0xa5).unwrap();
        let mut saturated = gpu.alloc::<u32>(q.params_len(), 0x5a).unwrap();
        quantizer.quantize(&j, &scale, &offset, &mut out, &mut saturated).unwrap();
        (out.download().unwrap(), saturated.download().unwrap())
    }

    /// Takes the engine's oldest output (there must be one) as (chunk, codes, counts).
    fn take(engine: &mut FrbStream) -> (u64, Vec<u8>, Vec<u32>) {
        let out = engine.output().unwrap().expect("a pending output");
        (out.chunk, out.beams.to_vec(), out.saturated.to_vec())
    }

    /// Levels that spread J over the codes, from a chunk's J: per (f, beta) the scale maps
    /// 0.7 to 1.5 times the largest |J| of the chunk to the largest code (so some values clip
    /// at the top), and the offset is up to a tenth of the codes either way (some clip at 0).
    fn levels(q: &QuantizeConfig, j: &[u16], rng: &mut StdRng) -> (Vec<f32>, Vec<f32>) {
        let (t_len, b_len) = (q.times as usize, q.beams as usize);
        let max = q.format.max() as f32;
        let mut scale = Vec::with_capacity(q.params_len());
        let mut offset = Vec::with_capacity(q.params_len());
        for f in 0..q.channels as usize {
            for beta in 0..b_len {
                let peak = (0..t_len)
                    .map(|t| f16::from_bits(j[(f * t_len + t) * b_len + beta]).to_f32().abs())
                    .fold(1e-3f32, f32::max);
                scale.push(max / (peak * rng.random_range(0.7..1.5)));
                offset.push(rng.random_range(-0.1..0.1) * max);
            }
        }
        (scale, offset)
    }

    /// The streamed outputs are the one-shot chain's, chunk by chunk and bit for bit, for the
    /// three resamplers, both code widths, and ring depths 1 to 4: fresh random E per chunk
    /// through the pinned input slots, outputs taken when the ring is full (and so
    /// interleaved with submits), new levels from a random chunk on (the earlier chunks keep
    /// the old ones). On Hopper also with the sm_80 resampling kernels.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn streaming_engine_equals_the_one_shot_chain() {
        let gpu = gpu();
        let mut rng = StdRng::seed_from_u64(fresh_seed());
        gpu.set_wgmma_enabled(true);
        let paths = if gpu.wgmma_enabled() { vec![true, false] } else { vec![false] };
        for wgmma in paths {
            gpu.set_wgmma_enabled(wgmma);
            for kind in 0..3 {
                for format in [Format::U8, Format::U4] {
                    let (first, stage, quantizer) = chain(&gpu, &mut rng, kind, format);
                    let (c, q) = (*first.config(), *quantizer.config());
                    let chunks = rng.random_range(4..8usize);
                    let e: Vec<Vec<u8>> =
                        (0..chunks).map(|_| (0..c.e_len()).map(|_| rng.random()).collect()).collect();
                    let stages = (&first, &stage, &quantizer);
                    let j0 = one_shot_j(&gpu, &first, &stage, &e[0]).download().unwrap();
                    let old = levels(&q, &j0, &mut rng);
                    let new = levels(&q, &j0, &mut rng);
                    let switch = rng.random_range(1..chunks);
                    let expected: Vec<(Vec<u8>, Vec<u32>)> = e
                        .iter()
                        .enumerate()
                        .map(|(k, e)| one_shot(&gpu, stages, e, if k < switch { &old } else { &new }))
                        .collect();
                    let distinct = expected[0].0.iter().collect::<std::collections::BTreeSet<_>>().len();
                    assert!(distinct > 2, "the codes hardly vary ({distinct} values): the test is weak");
                    for depth in 1..=4 {
                        let mut engine =
                            first.streaming(stage.as_stage(), &quantizer, &old.0, &old.1, depth).unwrap();
                        let mut got = Vec::new();
                        for (k, chunk) in e.iter().enumerate() {
                            if k == switch {
                                engine.set_levels(&new.0, &new.1).unwrap();
                            }
                            if engine.pending() == depth {
                                got.push(take(&mut engine));
                            }
                            engine.input().unwrap().copy_from_slice(chunk);
                            engine.submit().unwrap();
                        }
                        while engine.pending() > 0 {
                            got.push(take(&mut engine));
                        }
                        assert!(engine.output().unwrap().is_none());
                        assert_eq!(got.len(), chunks);
                        for (k, ((chunk, codes, counts), (want_codes, want_counts))) in
                            got.iter().zip(&expected).enumerate()
                        {
                            let label = format!(
                                "{} {format:?} wgmma {wgmma} depth {depth} chunk {k} of {c:?}",
                                stage.name()
                            );
                            assert_eq!(*chunk, k as u64, "{label}");
                            assert!(codes == want_codes, "{label}: quantised beams differ");
                            assert_eq!(counts, want_counts, "{label}: clip counts differ");
                        }
                    }
                    println!(
                        "{} {format:?} wgmma {wgmma}: {chunks} chunks of {c:?} -> {} beams, levels switched at chunk {switch}: streamed = one-shot",
                        stage.name(),
                        q.beams
                    );
                }
            }
        }
        gpu.set_wgmma_enabled(true);
    }

    /// Back-pressure and caller memory: with every output slot full a submit is `Backlog`
    /// and changes nothing (the input slot keeps its chunk, nothing is enqueued); taking one
    /// output lets the same chunk through, and the stream goes on with the one-shot bytes.
    /// Chunks from registered host memory (no host copy) give the same bytes; a chunk past
    /// its end is refused, changing nothing. `pump` drives the engine as a driver would.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn streaming_engine_backlog_and_registered_memory() {
        let gpu = gpu();
        let mut rng = StdRng::seed_from_u64(fresh_seed());
        let kind = rng.random_range(0..3);
        let (first, stage, quantizer) = chain(&gpu, &mut rng, kind, Format::U8);
        let (c, q) = (*first.config(), *quantizer.config());
        let chunks = 6;
        let mut all: Vec<u8> = (0..chunks * c.e_len()).map(|_| rng.random()).collect();
        let j0 = one_shot_j(&gpu, &first, &stage, &all[..c.e_len()]).download().unwrap();
        let lv = levels(&q, &j0, &mut rng);
        let stages = (&first, &stage, &quantizer);
        let expected: Vec<(Vec<u8>, Vec<u32>)> =
            all.chunks(c.e_len()).map(|e| one_shot(&gpu, stages, e, &lv)).collect();
        let depth = 2;
        // Pinned slots.
        let mut engine = first.streaming(stage.as_stage(), &quantizer, &lv.0, &lv.1, depth).unwrap();
        let mut got = Vec::new();
        let mut refused = 0;
        for chunk in all.chunks(c.e_len()) {
            engine.input().unwrap().copy_from_slice(chunk);
            match engine.submit() {
                Ok(()) => {}
                Err(Error::Backlog { slots, .. }) => {
                    assert_eq!((slots, engine.pending()), (depth, depth));
                    refused += 1;
                    assert!(engine.input().unwrap() == chunk, "a refused submit changed the input slot");
                    got.push(take(&mut engine));
                    engine.submit().unwrap();
                }
                Err(e) => panic!("{e}"),
            }
        }
        while engine.pending() > 0 {
            got.push(take(&mut engine));
        }
        assert!(refused > 0, "the ring never filled");
        for (k, (g, w)) in got.iter().zip(&expected).enumerate() {
            assert!(g.0 == k as u64 && g.1 == w.0 && g.2 == w.1, "pinned slots, chunk {k}");
        }
        // Registered memory, backlogged the same way.
        let mut engine = first.streaming(stage.as_stage(), &quantizer, &lv.0, &lv.1, depth).unwrap();
        let registered = gpu.register_host(&mut all).unwrap();
        let mut got = Vec::new();
        for k in 0..chunks {
            if let Err(e) = engine.submit_registered(&registered, k * c.e_len()) {
                assert!(matches!(e, Error::Backlog { .. }), "{e}");
                got.push(take(&mut engine));
                engine.submit_registered(&registered, k * c.e_len()).unwrap();
            }
        }
        let pending = engine.pending();
        assert!(matches!(
            engine.submit_registered(&registered, chunks * c.e_len() - 1),
            Err(Error::InvalidConfig(_) | Error::Backlog { .. })
        ));
        assert_eq!(engine.pending(), pending, "a refused submit enqueued an output");
        while engine.pending() > 0 {
            got.push(take(&mut engine));
        }
        assert_eq!(got.len(), chunks);
        for (k, (g, w)) in got.iter().zip(&expected).enumerate() {
            assert!(g.0 == k as u64 && g.1 == w.0 && g.2 == w.1, "registered memory, chunk {k}");
        }
        // With a free slot the out-of-range chunk is refused for its range.
        assert!(matches!(
            engine.submit_registered(&registered, chunks * c.e_len() - 1),
            Err(Error::InvalidConfig(_))
        ));
        assert_eq!(engine.pending(), 0);
        drop(registered);
        // A driver's loop; then the engine starts over.
        radio_kernels::streaming::pump(&mut engine, 5, |_| {}).unwrap();
        assert_eq!(engine.pending(), 0);
        engine.reset().unwrap();
        engine.input().unwrap().copy_from_slice(&all[..c.e_len()]);
        engine.submit().unwrap();
        let (chunk, codes, counts) = take(&mut engine);
        assert!(chunk == 0 && codes == expected[0].0 && counts == expected[0].1, "after reset");
        println!(
            "{}: {chunks} chunks of {c:?}, depth {depth}: {refused} submits refused and retried",
            stage.name()
        );
    }

    /// Stages that do not chain are refused when the engine is made, with typed errors: the
    /// resampler's channels, slow samples or grid, the quantiser's beams, levels of the wrong
    /// length, a resampler without beams, no slots.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn streaming_engine_rejects_stages_that_do_not_chain() {
        let gpu = gpu();
        let mut rng = StdRng::seed_from_u64(fresh_seed());
        let c = FrbConfig { dishes: 64, m: 8, n: 8, freqs: 2, times: 128, t_ds: 4 };
        let first =
            FrbBeamformer::new(&gpu, c, &random_grid(&c, &mut rng), &random_weights(&c, &mut rng)).unwrap();
        let rc = ResampleConfig { channels: 2, times: 32, m: 8, n: 8, beams: 20 };
        let qc = QuantizeConfig { channels: 2, times: 32, beams: 20, format: Format::U8 };
        let quantizer = Quantizer::new(&gpu, qc).unwrap();
        let positions = gpu.upload(&[0.25f32; 2 * 20]).unwrap();
        let levels = vec![1.0f32; qc.params_len()];
        let resampler = |config: ResampleConfig| {
            let mut r = Resampler::new(&gpu, config).unwrap();
            r.set_beams(
                &gpu.upload(&vec![0.25f32; config.positions_len()]).unwrap(),
                &gpu.upload(&vec![0.5f32; config.positions_len()]).unwrap(),
            )
            .unwrap();
            r
        };
        let good = resampler(rc);
        assert!(first.streaming(&good, &quantizer, &levels, &levels, 3).is_ok());
        for (label, bad) in [
            ("channels", ResampleConfig { channels: 3, ..rc }),
            ("slow samples", ResampleConfig { times: 16, ..rc }),
            ("grid", ResampleConfig { n: 12, ..rc }),
        ] {
            let r = resampler(bad);
            assert!(
                matches!(
                    first.streaming(&r, &quantizer, &levels, &levels, 3),
                    Err(Error::ShapeMismatch { .. })
                ),
                "{label}"
            );
        }
        let other_beams = Quantizer::new(&gpu, QuantizeConfig { beams: 21, ..qc }).unwrap();
        assert!(matches!(
            first.streaming(&good, &other_beams, &[1.0; 42], &[1.0; 42], 3),
            Err(Error::ShapeMismatch { .. })
        ));
        assert!(matches!(
            first.streaming(&good, &quantizer, &levels[1..], &levels, 3),
            Err(Error::ShapeMismatch { what: "quantiser scale", .. })
        ));
        assert!(matches!(
            first.streaming(&good, &quantizer, &levels, &[], 3),
            Err(Error::ShapeMismatch { what: "quantiser offset", .. })
        ));
        assert!(matches!(
            first.streaming(&good, &quantizer, &levels, &levels, 0),
            Err(Error::InvalidConfig(_))
        ));
        let unset = Resampler::new(&gpu, rc).unwrap();
        assert!(matches!(
            first.streaming(&unset, &quantizer, &levels, &levels, 3),
            Err(Error::InvalidConfig(_))
        ));
        let unset = FusedResampler::new(&gpu, rc).unwrap();
        assert!(matches!(
            first.streaming(&unset, &quantizer, &levels, &levels, 3),
            Err(Error::InvalidConfig(_))
        ));
        let fc = FactorizedConfig { channels: 2, times: 32, m: 8, n: 8, g: 4, g_prime: 5 };
        let unset = FactorizedResampler::new(&gpu, fc).unwrap();
        assert!(matches!(
            first.streaming(&unset, &quantizer, &levels, &levels, 3),
            Err(Error::InvalidConfig(_))
        ));
        let mut fused = FusedResampler::new(&gpu, rc).unwrap();
        fused.set_beams(&positions, &positions).unwrap();
        let mut engine = FrbStream::new(&first, &fused, &quantizer, &levels, &levels, 3).unwrap();
        assert!(engine.output().unwrap().is_none());
        assert!(matches!(engine.set_levels(&levels[1..], &levels), Err(Error::ShapeMismatch { .. })));
    }

    /// Where the first FRB launch's extra time goes (the demo shape: D = 64, 8 x 8, F = 1024,
    /// T = 512, T_ds = 64). Prints, with CUDA events and host clocks: opening the GPU (module
    /// load), a first kernel of the process (the quantiser), `FrbBeamformer` construction
    /// without the warm-up launch, its first, second and third `beamform` (the third behind
    /// a gate of memsets, so its event time is GPU time only), a fresh beamformer of another
    /// shape with the same kernel, the first launch of another kernel behind a gate (host
    /// enqueue time against GPU time), `new` with its warm-up and the first `beamform` after
    /// it, and an explicit `warm_up`; then each kernel's attributes as the driver loaded it
    /// and the context's stack limit. Asserts only that every result is right. Run with
    /// `--ignored --nocapture first_launch_probe`, under `CUDA_MODULE_LOADING=EAGER` and
    /// `=LAZY`.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn first_launch_probe() {
        use cudarc::driver::sys;
        use radio_kernels::frb_beamformer::selected_kernel;
        let opened = Instant::now();
        let gpu = gpu();
        let open_ms = opened.elapsed().as_secs_f64() * 1e3;
        let mut rng = StdRng::seed_from_u64(fresh_seed());
        let mut loading = 0u32;
        let mut driver = 0i32;
        let stack_limit = || {
            let mut bytes = 0usize;
            gpu.context().bind_to_thread().unwrap();
            // SAFETY: writes one size_t.
            unsafe { sys::cuCtxGetLimit(&mut bytes, sys::CUlimit::CU_LIMIT_STACK_SIZE) }.result().unwrap();
            bytes
        };
        // SAFETY: each writes one value of the type given (the loading mode as its u32).
        unsafe {
            sys::cuModuleGetLoadingMode((&mut loading as *mut u32).cast()).result().unwrap();
            sys::cuDriverGetVersion(&mut driver).result().unwrap();
        }
        eprintln!(
            "{} (driver {driver}), CUDA_MODULE_LOADING={:?}, loading mode {loading} (1 eager, 2 lazy);              opening the GPU and loading the modules: {open_ms:.1} ms; stack limit {} B per thread",
            gpu.name(),
            std::env::var("CUDA_MODULE_LOADING").ok(),
            stack_limit()
        );
        let stream = gpu.stream().clone();
        let event = || gpu.context().new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).unwrap();
        let ms =
            |a: &cudarc::driver::CudaEvent, b: &cudarc::driver::CudaEvent| a.elapsed_ms(b).unwrap() as f64;
        // Host time of `work` (enqueue), event time around it (as the demo times a stage), and
        // host time until the GPU is done.
        let timed = |what: &str, work: &mut dyn FnMut()| {
            let (start, stop) = (event(), event());
            start.record(&stream).unwrap();
            let t0 = Instant::now();
            work();
            let call = t0.elapsed().as_secs_f64() * 1e3;
            stop.record(&stream).unwrap();
            stop.synchronize().unwrap();
            let total = t0.elapsed().as_secs_f64() * 1e3;
            eprintln!(
                "{what:58}: host call {call:8.3} ms, events {:8.3} ms, host until done {total:8.3} ms",
                ms(&start, &stop)
            );
        };
        // As `timed`, with the stream held by ~64 GiB of memsets first: if the host call ends
        // before the gate, the event time is the GPU's time for the work alone.
        let mut gate = gpu.alloc::<u8>(1 << 30, 0).unwrap();
        let mut gated = |what: &str, work: &mut dyn FnMut()| {
            let (open, start, stop) = (event(), event(), event());
            open.record(&stream).unwrap();
            for _ in 0..64 {
                // SAFETY: the allocation is only filled, never replaced.
                stream.memset_zeros(unsafe { gate.raw_mut() }).unwrap();
            }
            start.record(&stream).unwrap();
            let t0 = Instant::now();
            work();
            let call = t0.elapsed().as_secs_f64() * 1e3;
            let gate_running = !start.is_complete();
            stop.record(&stream).unwrap();
            stop.synchronize().unwrap();
            eprintln!(
                "{what:58}: host call {call:8.3} ms, GPU {:8.3} ms (gate {:.1} ms, {})",
                ms(&start, &stop),
                ms(&open, &start),
                if gate_running {
                    "still running after the call: GPU time only"
                } else {
                    "ended during the call: host time included"
                }
            );
        };
        // A first kernel of the process (not an FRB one), as the demo has run others before.
        let qc = QuantizeConfig { channels: 1, times: 16, beams: 8, format: Format::U8 };
        let quantizer = Quantizer::new(&gpu, qc).unwrap();
        let (j, sc, of) = (
            gpu.alloc::<u16>(qc.input_len(), 0).unwrap(),
            gpu.alloc::<f32>(8, 0).unwrap(),
            gpu.alloc::<f32>(8, 0).unwrap(),
        );
        let (mut qo, mut qs) =
            (gpu.alloc::<u8>(qc.output_len(), 0).unwrap(), gpu.alloc::<u32>(8, 0).unwrap());
        gpu.synchronize().unwrap();
        timed("first kernel of the process (quantiser), first launch", &mut || {
            quantizer.quantize(&j, &sc, &of, &mut qo, &mut qs).unwrap()
        });
        timed("quantiser, second launch", &mut || {
            quantizer.quantize(&j, &sc, &of, &mut qo, &mut qs).unwrap()
        });
        // Shape A, the demo's, without the warm-up.
        let demo = FrbConfig { dishes: 64, m: 8, n: 8, freqs: 1024, times: 512, t_ds: 64 };
        let setup = |c: FrbConfig, rng: &mut StdRng| {
            let grid = random_grid(&c, rng);
            let weights = random_weights(&c, rng);
            let mut e = vec![0u8; c.e_len()];
            rng.fill(&mut e[..]);
            (grid, weights, e)
        };
        let check = |c: &FrbConfig,
                     (grid, weights, e): &(Vec<(u32, u32)>, Vec<u32>, Vec<u8>),
                     got: &[u16],
                     rng: &mut StdRng| {
            assert!(got.iter().all(|&h| f16::from_bits(h).is_finite()), "{c:?}: unwritten or non-finite I");
            for _ in 0..2 {
                let (f, tbar) = (rng.random_range(0..c.freqs), rng.random_range(0..c.out_times()));
                let at = c.output_index(f, tbar, 0, 0);
                let k = (4 * c.m * c.n) as usize;
                let sample: Vec<f64> = got[at..at + k].iter().map(|&h| f16::from_bits(h).to_f64()).collect();
                let want = frb_intensity_reference_sample(c, e, grid, weights, f, tbar).unwrap();
                let err = rel_l2(&sample, &want);
                assert!(err <= FRB_REL_L2_BOUND, "{c:?} ({f}, {tbar}): {err}");
            }
        };
        let input_a = setup(demo, &mut rng);
        let e_a = gpu.upload(&input_a.2).unwrap();
        let mut i_a = gpu.alloc::<u16>(demo.output_len(), POISON).unwrap();
        gpu.synchronize().unwrap();
        let mut a = None;
        timed("A demo shape: FrbBeamformer::without_warm_up", &mut || {
            a = Some(FrbBeamformer::without_warm_up(&gpu, demo, &input_a.0, &input_a.1).unwrap())
        });
        let a = a.unwrap();
        timed("A: first beamform", &mut || a.beamform(&e_a, &mut i_a).unwrap());
        let first_result = i_a.download().unwrap();
        check(&demo, &input_a, &first_result, &mut rng);
        i_a.poison(POISON).unwrap();
        timed("A: second beamform", &mut || a.beamform(&e_a, &mut i_a).unwrap());
        assert_eq!(i_a.download().unwrap(), first_result, "second launch differs");
        gated("A: third beamform, gated", &mut || a.beamform(&e_a, &mut i_a).unwrap());
        // Shape B: the same kernel, another shape, a fresh beamformer.
        let b_config = FrbConfig { freqs: 512, times: 1024, ..demo };
        let input_b = setup(b_config, &mut rng);
        let e_b = gpu.upload(&input_b.2).unwrap();
        let mut i_b = gpu.alloc::<u16>(b_config.output_len(), POISON).unwrap();
        let b = FrbBeamformer::without_warm_up(&gpu, b_config, &input_b.0, &input_b.1).unwrap();
        gpu.synchronize().unwrap();
        timed("B same kernel, F = 512, T = 1024, fresh: first beamform", &mut || {
            b.beamform(&e_b, &mut i_b).unwrap()
        });
        check(&b_config, &input_b, &i_b.download().unwrap(), &mut rng);
        // Shape C: another kernel (8 x 12), first launch behind the gate.
        let c_config = FrbConfig { dishes: 64, m: 8, n: 12, freqs: 1024, times: 480, t_ds: 48 };
        let input_c = setup(c_config, &mut rng);
        let e_c = gpu.upload(&input_c.2).unwrap();
        let mut i_c = gpu.alloc::<u16>(c_config.output_len(), POISON).unwrap();
        let cb = FrbBeamformer::without_warm_up(&gpu, c_config, &input_c.0, &input_c.1).unwrap();
        gpu.synchronize().unwrap();
        gated("C other kernel (8 x 12, f16 sums): first beamform, gated", &mut || {
            cb.beamform(&e_c, &mut i_c).unwrap()
        });
        gated("C: second beamform, gated", &mut || cb.beamform(&e_c, &mut i_c).unwrap());
        check(&c_config, &input_c, &i_c.download().unwrap(), &mut rng);
        // Shape D: another kernel (8 x 8, T_ds = 128), made by `new` (with the warm-up).
        let d_config = FrbConfig { times: 512, t_ds: 128, ..demo };
        let input_d = setup(d_config, &mut rng);
        let e_d = gpu.upload(&input_d.2).unwrap();
        let mut i_d = gpu.alloc::<u16>(d_config.output_len(), POISON).unwrap();
        gpu.synchronize().unwrap();
        let mut d = None;
        timed("D other kernel (8 x 8, f32 phase sums): FrbBeamformer::new", &mut || {
            d = Some(FrbBeamformer::new(&gpu, d_config, &input_d.0, &input_d.1).unwrap())
        });
        let d = d.unwrap();
        timed("D: first beamform after new's warm-up", &mut || d.beamform(&e_d, &mut i_d).unwrap());
        check(&d_config, &input_d, &i_d.download().unwrap(), &mut rng);
        // Shape E: another kernel (8 x 12, T_ds = 144): warm-up timed on its own.
        let e_config = FrbConfig { dishes: 64, m: 8, n: 12, freqs: 1024, times: 576, t_ds: 144 };
        let input_e = setup(e_config, &mut rng);
        let e_e = gpu.upload(&input_e.2).unwrap();
        let mut i_e = gpu.alloc::<u16>(e_config.output_len(), POISON).unwrap();
        let eb = FrbBeamformer::without_warm_up(&gpu, e_config, &input_e.0, &input_e.1).unwrap();
        gpu.synchronize().unwrap();
        timed("E other kernel (8 x 12, f32 phase sums): warm_up", &mut || eb.warm_up().unwrap());
        timed("E: first beamform after warm_up", &mut || eb.beamform(&e_e, &mut i_e).unwrap());
        check(&e_config, &input_e, &i_e.download().unwrap(), &mut rng);
        // The kernels as the driver loaded them (queried last: a query may itself load).
        use sys::CUfunction_attribute::*;
        for c in [demo, c_config, d_config, e_config] {
            let spec = selected_kernel(&c).unwrap().spec;
            let (name, function) = (spec.name, gpu.kernel(&spec).unwrap());
            let attr = |a| function.get_attribute(a).unwrap();
            eprintln!(
                "{name:34}: {} registers, {} B local per thread, {} B static shared, {} B const, max {} threads, PTX {} binary {}",
                attr(CU_FUNC_ATTRIBUTE_NUM_REGS),
                attr(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
                attr(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
                attr(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES),
                attr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
                attr(CU_FUNC_ATTRIBUTE_PTX_VERSION),
                attr(CU_FUNC_ATTRIBUTE_BINARY_VERSION),
            );
        }
        eprintln!("stack limit now {} B per thread", stack_limit());
    }
}
