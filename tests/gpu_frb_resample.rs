//! GPU tests of the FRB beamformer's second kernel: the W kernel and the tensor-core GEMM
//! `J = I W` against the f64 reference of eq. 137 of Smith, CHORD FRB beamformer design note (2022) for
//! every grid of its Table 2, ragged
//! time and beam counts (1 and odd ones included), random and half-integer beam positions,
//! moving (tracking) beams, outputs poisoned with NaN before each launch; the fused path
//! (W formed in shared memory on sm_80, W^T in registers on sm_90a, every kernel instance)
//! against the W path, bit for bit, and the same reference.
//! On Hopper every test runs both GEMM kernels: the sm_90a `wgmma` ones (the W path with
//! both of its tiles, 128 x 256 and 192 x 256) and, with `set_wgmma_enabled(false)`, the
//! sm_80 ones Ampere runs; and the two paths' J are compared
//! (`wgmma_j_is_the_sm80_j_to_f32_rounding`).
//!
//! Bound: I and W are f16 (relative rounding 2^-11 each) and J is rounded once to f16, with
//! f32 accumulation; the reference uses f64 U of the same f32 positions and the same f16 I.
//! So J's relative L2 error is about 2^-11 (W) + 2^-11 (J) plus the f32 U's 2e-5: 2^-9 bounds it.
mod common;

use common::*;
use half::f16;
use radio_kernels::frb_beamformer::resample::{
    resample_reference, FusedResampler, ResampleConfig, Resampler, FUSED_KERNEL, GEMM_KERNEL,
    HOPPER_GEMM_KERNEL, RS_KERNELS, WIDE_GEMM_KERNEL,
};
use radio_kernels::frb_beamformer::FRB_CASES;
use radio_kernels::gpu_shared::modules::KernelSpec;
use radio_kernels::Error;
use rand::Rng;

const BOUND: f64 = 1.0 / 512.0;

/// The GEMM kernels to test on this GPU: `wgmma` (true, Hopper only) and `mma.sync` (false).
fn paths(gpu: &radio_kernels::Gpu) -> Vec<bool> {
    gpu.set_wgmma_enabled(true);
    if gpu.wgmma_enabled() {
        vec![true, false]
    } else {
        vec![false]
    }
}

/// The W-path GEMMs to test with `wgmma` on or off: both Hopper tiles (narrow 128 x 256,
/// wide 192 x 256) whatever `Resampler::new` would pick for the shape; sm_80 has one.
fn tiles(wgmma: bool) -> Vec<&'static KernelSpec> {
    if wgmma {
        vec![&HOPPER_GEMM_KERNEL.spec, &WIDE_GEMM_KERNEL.spec]
    } else {
        vec![&GEMM_KERNEL.spec]
    }
}
/// f16 NaN in both bytes (0x7e7e).
const POISON: u8 = 0x7e;

/// f16 data held as its bits (so that comparisons are bit-exact) as the API's `f16`.
fn halves(bits: &[u16]) -> &[f16] {
    bytemuck::cast_slice(bits)
}

/// The bits of f16 data.
fn bits(halves: &[f16]) -> Vec<u16> {
    bytemuck::cast_slice(halves).to_vec()
}

fn run(
    gpu: &radio_kernels::Gpu,
    resampler: &mut Resampler,
    i: &[u16],
    theta: &[f32],
    theta_prime: &[f32],
) -> Vec<u16> {
    let c = *resampler.config();
    resampler.set_beams(&gpu.upload(theta).unwrap(), &gpu.upload(theta_prime).unwrap()).unwrap();
    let mut j = gpu.alloc::<f16>(c.output_len(), POISON).unwrap();
    resampler.resample(&gpu.upload(halves(i)).unwrap(), &mut j).unwrap();
    bits(&j.download().unwrap())
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn random_beams_match_the_f64_reference_for_every_grid() {
    let gpu = gpu();
    let mut rng = rng();
    for wgmma in paths(&gpu) {
        gpu.set_wgmma_enabled(wgmma);
        for case in FRB_CASES {
            for (gemm, (channels, times, beams)) in tiles(wgmma).into_iter().flat_map(|w| {
                [(3, 200, 333), (1, 128, 1), (2, 1, 130), (1, 300, 256)].map(|shape| (w, shape))
            }) {
                let config = ResampleConfig { channels, times, m: case.m, n: case.n, beams };
                let mut resampler = Resampler::with_kernel(&gpu, config, gemm).unwrap();
                let i = random_intensity(&mut rng, config.intensity_len());
                let theta: Vec<f32> =
                    (0..config.positions_len()).map(|_| rng.random_range(-40.0..40.0)).collect();
                let theta_prime: Vec<f32> =
                    (0..config.positions_len()).map(|_| rng.random_range(-40.0..40.0)).collect();
                let got = run(&gpu, &mut resampler, &i, &theta, &theta_prime);
                let want = resample_reference(&config, halves(&i), &theta, &theta_prime).unwrap();
                let error = relative_l2(&got, &want);
                println!("{} {config:?}: relative L2 {error:.2e}", gemm.name);
                assert!(error < BOUND, "{config:?}: relative L2 {error:e}");
                // Every output, not only the norm: each within 2^-8 of the reference's scale.
                let scale = want.iter().fold(0.0f64, |a, &w| a.max(w.abs()));
                for (o, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    let g = f16::from_bits(g).to_f64();
                    assert!((g - w).abs() <= scale / 256.0, "{config:?} output {o}: {g} vs {w}");
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn half_integer_beams_reproduce_the_intensity_and_beams_can_move() {
    let gpu = gpu();
    let mut rng = rng();
    for wgmma in paths(&gpu) {
        gpu.set_wgmma_enabled(wgmma);
        for (gemm, case) in tiles(wgmma).into_iter().flat_map(|w| FRB_CASES.iter().map(move |c| (w, c))) {
            let (m, n) = (case.m, case.n);
            let config = ResampleConfig { channels: 2, times: 70, m, n, beams: 4 * m * n };
            let mut resampler = Resampler::with_kernel(&gpu, config, gemm).unwrap();
            let i = random_intensity(&mut rng, config.intensity_len());
            // Beam (f, beta) at (p / 2, q / 2) for rho = beta = 2N p + q, the grid reversed in
            // channel 1.
            let k = config.k() as usize;
            let rho_of = |f: usize, beta: usize| if f == 0 { beta } else { k - 1 - beta };
            let theta: Vec<f32> = (0..config.positions_len())
                .map(|x| (rho_of(x / k, x % k) / (2 * n) as usize) as f32 / 2.0)
                .collect();
            let theta_prime: Vec<f32> = (0..config.positions_len())
                .map(|x| (rho_of(x / k, x % k) % (2 * n) as usize) as f32 / 2.0)
                .collect();
            let got = run(&gpu, &mut resampler, &i, &theta, &theta_prime);
            for f in 0..2 {
                for t in 0..config.times as usize {
                    for beta in 0..k {
                        let want =
                            f16::from_bits(i[(f * config.times as usize + t) * k + rho_of(f, beta)]).to_f64();
                        let g = f16::from_bits(got[(f * config.times as usize + t) * k + beta]).to_f64();
                        // The f32 U at half-integers is a delta to ~1e-7, and those residues
                        // (f16 subnormals in W) add up to ~2e-2 over 4MN intensities below 100.
                        assert!(
                            (g - want).abs() <= want * 2f64.powi(-10) + 0.05,
                            "({m}, {n}) f {f} t {t} beam {beta}: {g} vs {want}"
                        );
                    }
                }
            }
            // Tracking: new positions, same resampler.
            let moved: Vec<f32> = theta.iter().map(|&x| x + rng.random_range(-0.5..0.5)).collect();
            let got = run(&gpu, &mut resampler, &i, &moved, &theta_prime);
            let want = resample_reference(&config, halves(&i), &moved, &theta_prime).unwrap();
            assert!(relative_l2(&got, &want) < BOUND);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_input_is_rejected_before_launch() {
    let gpu = gpu();
    for wgmma in paths(&gpu) {
        gpu.set_wgmma_enabled(wgmma);
        let config = ResampleConfig { channels: 2, times: 10, m: 16, n: 20, beams: 7 };
        assert!(matches!(
            Resampler::new(&gpu, ResampleConfig { n: 18, ..config }),
            Err(Error::InvalidConfig(_))
        ));
        let mut resampler = Resampler::new(&gpu, config).unwrap();
        let i = gpu.alloc::<f16>(config.intensity_len(), 0).unwrap();
        let mut j = gpu.alloc::<f16>(config.output_len(), 0).unwrap();
        // No beams yet.
        assert!(matches!(resampler.resample(&i, &mut j), Err(Error::InvalidConfig(_))));
        let theta = gpu.alloc::<f32>(config.positions_len(), 0).unwrap();
        let short = gpu.alloc::<f32>(config.positions_len() - 1, 0).unwrap();
        assert!(matches!(resampler.set_beams(&theta, &short), Err(Error::ShapeMismatch { .. })));
        resampler.set_beams(&theta, &theta).unwrap();
        let short_i = gpu.alloc::<f16>(config.intensity_len() - 1, 0).unwrap();
        assert!(matches!(resampler.resample(&short_i, &mut j), Err(Error::ShapeMismatch { .. })));
        let mut long_j = gpu.alloc::<f16>(config.output_len() + 1, 0).unwrap();
        assert!(matches!(resampler.resample(&i, &mut long_j), Err(Error::ShapeMismatch { .. })));
        resampler.resample(&i, &mut j).unwrap();
        // Every GEMM of this path too (their tiles past the edge; under the sanitizers).
        for gemm in tiles(wgmma) {
            let mut other = Resampler::with_kernel(&gpu, config, gemm).unwrap();
            other.set_beams(&theta, &theta).unwrap();
            other.resample(&i, &mut j).unwrap();
        }
        // Kernels that are no W-path GEMM, or sm_90a ones without wgmma: typed errors.
        let mut refused = vec![FUSED_KERNEL.spec, RS_KERNELS[0].spec()];
        if !wgmma {
            refused.push(HOPPER_GEMM_KERNEL.spec);
        }
        for spec in refused {
            assert!(
                matches!(Resampler::with_kernel(&gpu, config, &spec), Err(Error::InvalidConfig(_))),
                "{}",
                spec.name
            );
        }
        gpu.synchronize().unwrap();
    }
}

fn run_fused(
    gpu: &radio_kernels::Gpu,
    resampler: &mut FusedResampler,
    i: &[u16],
    theta: &[f32],
    theta_prime: &[f32],
) -> Vec<u16> {
    let c = *resampler.config();
    resampler.set_beams(&gpu.upload(theta).unwrap(), &gpu.upload(theta_prime).unwrap()).unwrap();
    let mut j = gpu.alloc::<f16>(c.output_len(), POISON).unwrap();
    resampler.resample(&gpu.upload(halves(i)).unwrap(), &mut j).unwrap();
    bits(&j.download().unwrap())
}

/// The fused kernels to test for `config`: with `wgmma` on every transposed (RS) instance
/// of its grid, with `wgmma` off the sm_80 kernel.
fn fused_kernels(config: &ResampleConfig, wgmma: bool) -> Vec<KernelSpec> {
    if !wgmma {
        return vec![FUSED_KERNEL.spec];
    }
    RS_KERNELS.iter().filter(|k| (k.m, k.n) == (config.m, config.n)).map(|k| k.spec()).collect()
}

fn fused_resampler<'g>(
    gpu: &'g radio_kernels::Gpu,
    config: ResampleConfig,
    kernel: &KernelSpec,
) -> FusedResampler<'g> {
    let mut resampler = FusedResampler::with_kernel(gpu, config, kernel).unwrap();
    // Persistent kernels: 3 resident blocks, so that each loops over several tiles (their
    // epilogue overlapping the next tile's first copies) even on small shapes.
    resampler.set_resident_blocks(3);
    resampler
}

/// J of a fused kernel against the W path's J (`want`), which it must equal bit for bit: the
/// sm_80 fused kernel forms W in shared memory and runs the W path's MMA sequence on the W
/// path's f16 weights; the transposed kernels form the same f16 W^T bits in registers and
/// sum the same k16 products in the same k order as J^T, the operands' roles swapped, which
/// gives the same f32 sums on the H200 (every output of every test, docs/design-notes.md).
/// Both outputs start as the same poison, so every output must also have been written.
fn check_against_w_path(label: &str, got: &[u16], want: &[u16]) {
    let unwritten = got.iter().filter(|&&v| v == u16::from_ne_bytes([POISON; 2])).count();
    assert_eq!(unwritten, 0, "{label}: {unwritten} of {} outputs still hold the poison", got.len());
    let differing = got.iter().zip(want).filter(|(a, b)| a != b).count();
    assert_eq!(differing, 0, "{label}: {differing} of {} outputs differ from the W path", got.len());
}

/// The fused path forms the W path's f16 weights bit for bit (in shared memory, or as W^T
/// in registers for the transposed kernels): J equal to the W path's ([`check_against_w_path`])
/// and within `BOUND` of the f64 reference. Ragged times and beams (1, odd, one past a tile,
/// 980 = 4 x 248 - 12), several channels, half-integer beams, moved beams; every fused kernel.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fused_path_equals_the_w_path_bit_for_bit_and_the_f64_reference() {
    let gpu = gpu();
    let mut rng = rng();
    for wgmma in paths(&gpu) {
        gpu.set_wgmma_enabled(wgmma);
        for case in FRB_CASES {
            for (channels, times, beams) in
                [(3, 200, 333), (1, 128, 1), (2, 1, 130), (1, 300, 256), (2, 129, 257), (1, 980, 130)]
            {
                let config = ResampleConfig { channels, times, m: case.m, n: case.n, beams };
                let mut w_paths: Vec<Resampler> = tiles(wgmma)
                    .into_iter()
                    .map(|gemm| Resampler::with_kernel(&gpu, config, gemm).unwrap())
                    .collect();
                let kernels = fused_kernels(&config, wgmma);
                let mut fused: Vec<FusedResampler> =
                    kernels.iter().map(|k| fused_resampler(&gpu, config, k)).collect();
                let i = random_intensity(&mut rng, config.intensity_len());
                let mut theta: Vec<f32> =
                    (0..config.positions_len()).map(|_| rng.random_range(-40.0..40.0)).collect();
                let theta_prime: Vec<f32> =
                    (0..config.positions_len()).map(|_| rng.random_range(-40.0..40.0)).collect();
                // Some beams at exact half-integers (U a delta there).
                for x in theta.iter_mut().step_by(7) {
                    *x = (*x * 2.0).round() / 2.0;
                }
                for round in 0..2 {
                    if round == 1 {
                        // Tracking: the same resamplers, moved beams.
                        theta.iter_mut().for_each(|x| *x += rng.random_range(-0.5..0.5));
                    }
                    // Every W-path tile gives the same bits (on Hopper the narrow and the wide).
                    let w_j: Vec<Vec<u16>> =
                        w_paths.iter_mut().map(|w| run(&gpu, w, &i, &theta, &theta_prime)).collect();
                    for (tile, other) in w_j.iter().enumerate().skip(1) {
                        assert_eq!(other, &w_j[0], "{config:?} round {round}: W-path tile {tile} differs");
                    }
                    let want = resample_reference(&config, halves(&i), &theta, &theta_prime).unwrap();
                    for (kernel, resampler) in kernels.iter().zip(fused.iter_mut()) {
                        let got = run_fused(&gpu, resampler, &i, &theta, &theta_prime);
                        let label = format!("fused {} {config:?} round {round}", kernel.name);
                        check_against_w_path(&label, &got, &w_j[0]);
                        let error = relative_l2(&got, &want);
                        println!("{label}: relative L2 {error:.2e}");
                        assert!(error < BOUND, "{label}: relative L2 {error:e}");
                    }
                }
            }
        }
    }
}

/// Every fused kernel on two slow-sample tiles and two beam tiles, both ragged (the
/// sanitizers' test: small, every instance, every edge).
#[test]
#[ignore = "needs a CUDA GPU"]
fn fused_kernels_cover_ragged_tiles() {
    let gpu = gpu();
    let mut rng = rng();
    for wgmma in paths(&gpu) {
        gpu.set_wgmma_enabled(wgmma);
        for case in FRB_CASES {
            let probe = ResampleConfig { channels: 2, times: 1, m: case.m, n: case.n, beams: 1 };
            for kernel in fused_kernels(&probe, wgmma) {
                let shape = RS_KERNELS.iter().find(|k| k.name == kernel.name);
                // Beams a part chunk past a tile (the f16 stores of unaligned J rows) and one
                // whole 8-beam chunk past it (16-byte stores in a ragged last beam tile).
                for extra in [5, 8] {
                    let (times, beams) = shape.map_or((200, 300 + extra), |k| (k.nt + 9, k.beams() + extra));
                    let config = ResampleConfig { times, beams, ..probe };
                    let mut w_path = Resampler::with_kernel(&gpu, config, tiles(wgmma)[0]).unwrap();
                    let mut fused = fused_resampler(&gpu, config, &kernel);
                    let i = random_intensity(&mut rng, config.intensity_len());
                    let theta: Vec<f32> =
                        (0..config.positions_len()).map(|_| rng.random_range(-40.0..40.0)).collect();
                    let theta_prime: Vec<f32> =
                        (0..config.positions_len()).map(|_| rng.random_range(-40.0..40.0)).collect();
                    let want = run(&gpu, &mut w_path, &i, &theta, &theta_prime);
                    let got = run_fused(&gpu, &mut fused, &i, &theta, &theta_prime);
                    let label = format!("ragged fused {} {config:?}", kernel.name);
                    check_against_w_path(&label, &got, &want);
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fused_bad_input_is_rejected_before_launch() {
    let gpu = gpu();
    for wgmma in paths(&gpu) {
        gpu.set_wgmma_enabled(wgmma);
        let config = ResampleConfig { channels: 2, times: 10, m: 24, n: 24, beams: 7 };
        assert!(matches!(
            FusedResampler::new(&gpu, ResampleConfig { m: 20, ..config }),
            Err(Error::InvalidConfig(_))
        ));
        // A transposed kernel of another grid, a kernel that is no fused one, and (without
        // wgmma) a transposed kernel of this grid.
        let other_grid = RS_KERNELS.iter().find(|k| k.n != config.n).unwrap().spec();
        let mut refused = vec![other_grid, HOPPER_GEMM_KERNEL.spec, GEMM_KERNEL.spec];
        if !wgmma {
            refused.push(RS_KERNELS.iter().find(|k| k.n == config.n).unwrap().spec());
        }
        for spec in refused {
            assert!(
                matches!(FusedResampler::with_kernel(&gpu, config, &spec), Err(Error::InvalidConfig(_))),
                "{}",
                spec.name
            );
        }
        let mut resampler = FusedResampler::new(&gpu, config).unwrap();
        let i = gpu.alloc::<f16>(config.intensity_len(), 0).unwrap();
        let mut j = gpu.alloc::<f16>(config.output_len(), 0).unwrap();
        assert!(matches!(resampler.resample(&i, &mut j), Err(Error::InvalidConfig(_))));
        let theta = gpu.alloc::<f32>(config.positions_len(), 0).unwrap();
        let short = gpu.alloc::<f32>(config.positions_len() - 1, 0).unwrap();
        assert!(matches!(resampler.set_beams(&short, &theta), Err(Error::ShapeMismatch { .. })));
        resampler.set_beams(&theta, &theta).unwrap();
        let short_i = gpu.alloc::<f16>(config.intensity_len() - 1, 0).unwrap();
        assert!(matches!(resampler.resample(&short_i, &mut j), Err(Error::ShapeMismatch { .. })));
        resampler.resample(&i, &mut j).unwrap();
        gpu.synchronize().unwrap();
    }
}

/// The `wgmma` and `mma.sync` kernels add the same f32 products of the same f16 operands in
/// different orders, so their J differ only by f32 rounding of the sum (relative ~1e-6 of
/// the sum of |terms|) carried through J's single f16 rounding: at most one f16 ulp of
/// |J| where the f32 sums straddle a rounding boundary, plus the f32 error itself, bounded
/// here by `scale * 2^-14` (scale = max |J|). Ragged shapes, all five grids, W and fused paths.
#[test]
#[ignore = "needs a CUDA GPU"]
fn wgmma_j_is_the_sm80_j_to_f32_rounding() {
    let gpu = gpu();
    if paths(&gpu).len() < 2 {
        println!("no wgmma on this GPU: nothing to compare");
        return;
    }
    let mut rng = rng();
    for case in FRB_CASES {
        for (channels, times, beams) in [(3, 200, 333), (2, 129, 257), (1, 917, 600)] {
            let config = ResampleConfig { channels, times, m: case.m, n: case.n, beams };
            let i = random_intensity(&mut rng, config.intensity_len());
            let theta: Vec<f32> =
                (0..config.positions_len()).map(|_| rng.random_range(-40.0..40.0)).collect();
            let theta_prime: Vec<f32> =
                (0..config.positions_len()).map(|_| rng.random_range(-40.0..40.0)).collect();
            let mut j = Vec::new();
            for wgmma in [true, false] {
                gpu.set_wgmma_enabled(wgmma);
                let mut w_path = Resampler::new(&gpu, config).unwrap();
                let mut fused = FusedResampler::new(&gpu, config).unwrap();
                j.push(run(&gpu, &mut w_path, &i, &theta, &theta_prime));
                j.push(run_fused(&gpu, &mut fused, &i, &theta, &theta_prime));
            }
            gpu.set_wgmma_enabled(true);
            let as_f64 = |v: &[u16]| v.iter().map(|&x| f16::from_bits(x).to_f64()).collect::<Vec<_>>();
            let sm80 = as_f64(&j[2]);
            let scale = sm80.iter().fold(0.0f64, |a, &w| a.max(w.abs()));
            for (label, got) in [("W path", &j[0]), ("fused", &j[1])] {
                let mut differing = 0;
                let mut worst: f64 = 0.0;
                for (o, (&g, &w)) in as_f64(got).iter().zip(&sm80).enumerate() {
                    let ulp = f16::from_f64(w.abs()).to_f64() * 2f64.powi(-10);
                    let d = (g - w).abs();
                    differing += (d > 0.0) as usize;
                    worst = worst.max(d / scale);
                    assert!(
                        d <= ulp.max(2f64.powi(-24)) + scale * 2f64.powi(-14),
                        "{config:?} {label} output {o}: wgmma {g} vs sm80 {w}"
                    );
                }
                println!(
                    "wgmma vs sm80 {label} {config:?}: {differing} of {} outputs differ, worst {worst:.1e} of max |J|",
                    sm80.len()
                );
            }
            assert_eq!(j[2], j[3], "{config:?}: the sm80 fused J differs from the sm80 W path");
        }
    }
}

/// Non-finite beam positions are `NonFinite` naming the argument and the first bad index,
/// positions past `MAX_ABS_POSITION` `InvalidConfig` (found by the W and U kernels' checks,
/// before any GEMM), for both resamplers; after a refused call `resample` refuses to run
/// until good positions are set, which give the same J as before.
#[test]
#[ignore = "needs a CUDA GPU"]
fn non_finite_positions_are_rejected_before_the_gemm() {
    use radio_kernels::frb_beamformer::resample::MAX_ABS_POSITION;
    let gpu = gpu();
    let mut rng = rng();
    for wgmma in paths(&gpu) {
        gpu.set_wgmma_enabled(wgmma);
        let config = ResampleConfig { channels: 2, times: 9, m: 8, n: 12, beams: 5 };
        let i = random_intensity(&mut rng, config.intensity_len());
        let theta: Vec<f32> = (0..config.positions_len()).map(|_| rng.random_range(-40.0..40.0)).collect();
        let good = gpu.upload(&theta).unwrap();
        let i_gpu = gpu.upload(halves(&i)).unwrap();
        let mut resampler = Resampler::new(&gpu, config).unwrap();
        let mut fused = FusedResampler::new(&gpu, config).unwrap();
        let mut j = gpu.alloc::<f16>(config.output_len(), POISON).unwrap();
        resampler.set_beams(&good, &good).unwrap();
        resampler.resample(&i_gpu, &mut j).unwrap();
        let before = bits(&j.download().unwrap());
        let want = resample_reference(&config, halves(&i), &theta, &theta).unwrap();
        assert!(relative_l2(&before, &want) < BOUND);
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut values = theta.clone();
            values[7] = bad;
            values[8] = bad;
            let bad_gpu = gpu.upload(&values).unwrap();
            for (what, (t, tp)) in [("theta", (&bad_gpu, &good)), ("theta'", (&good, &bad_gpu))] {
                let r = resampler.set_beams(t, tp);
                assert!(
                    matches!(r, Err(Error::NonFinite { what: w, index: 7 }) if w == what),
                    "{bad} {what}: {r:?}"
                );
                let r = fused.set_beams(t, tp);
                assert!(
                    matches!(r, Err(Error::NonFinite { what: w, index: 7 }) if w == what),
                    "{bad} {what}: {r:?}"
                );
                assert!(matches!(resampler.resample(&i_gpu, &mut j), Err(Error::InvalidConfig(_))));
                assert!(matches!(fused.resample(&i_gpu, &mut j), Err(Error::InvalidConfig(_))));
            }
        }
        let mut far = theta.clone();
        far[3] = MAX_ABS_POSITION.next_up();
        let far = gpu.upload(&far).unwrap();
        assert!(matches!(resampler.set_beams(&far, &good), Err(Error::InvalidConfig(_))));
        assert!(matches!(fused.set_beams(&good, &far), Err(Error::InvalidConfig(_))));
        // The largest accepted positions pass.
        let edge = gpu.upload(&vec![-MAX_ABS_POSITION; config.positions_len()]).unwrap();
        resampler.set_beams(&edge, &good).unwrap();
        fused.set_beams(&good, &edge).unwrap();
        // Good positions again: the same J.
        resampler.set_beams(&good, &good).unwrap();
        fused.set_beams(&good, &good).unwrap();
        for label in ["W path", "fused"] {
            j.poison(POISON).unwrap();
            if label == "W path" {
                resampler.resample(&i_gpu, &mut j).unwrap();
            } else {
                fused.resample(&i_gpu, &mut j).unwrap();
            }
            assert_eq!(bits(&j.download().unwrap()), before, "wgmma {wgmma} {label}: J after good positions");
        }
    }
}

/// Buffers of another GPU are `WrongDevice` (on a machine with one GPU the test says so).
#[test]
#[ignore = "needs a CUDA GPU"]
fn buffers_of_another_device_are_refused() {
    let gpu = gpu();
    let Some(other) = second_gpu() else { return };
    let config = ResampleConfig { channels: 1, times: 4, m: 8, n: 8, beams: 3 };
    let wrong = |r: radio_kernels::Result<()>| matches!(r, Err(Error::WrongDevice { .. }));
    let theta = gpu.alloc::<f32>(config.positions_len(), 0).unwrap();
    let foreign_theta = other.alloc::<f32>(config.positions_len(), 0).unwrap();
    let i = gpu.alloc::<f16>(config.intensity_len(), 0).unwrap();
    let foreign_i = other.alloc::<f16>(config.intensity_len(), 0).unwrap();
    let mut j = gpu.alloc::<f16>(config.output_len(), 0).unwrap();
    let mut foreign_j = other.alloc::<f16>(config.output_len(), 0).unwrap();
    let mut resampler = Resampler::new(&gpu, config).unwrap();
    let mut fused = FusedResampler::new(&gpu, config).unwrap();
    assert!(wrong(resampler.set_beams(&foreign_theta, &theta)));
    assert!(wrong(fused.set_beams(&theta, &foreign_theta)));
    resampler.set_beams(&theta, &theta).unwrap();
    fused.set_beams(&theta, &theta).unwrap();
    assert!(wrong(resampler.resample(&foreign_i, &mut j)));
    assert!(wrong(resampler.resample(&i, &mut foreign_j)));
    assert!(wrong(fused.resample(&foreign_i, &mut j)));
    assert!(wrong(fused.resample(&i, &mut foreign_j)));
    resampler.resample(&i, &mut j).unwrap();
    fused.resample(&i, &mut j).unwrap();
}

/// Any valid small resampling job: every grid, 1 to 3 channels, ragged times and beams
/// (1 included, and up to two tiles), positions random, at exact half-integers or far out
/// (up to 1023.25 grid units), I random or at the f16 extremes (0, subnormal,
/// up to 1000): the W path and the fused path (the GPU's default kernels) within `BOUND`
/// of the f64 reference, the fused J equal to the W path's bit for bit, nothing unwritten.
#[test]
#[ignore = "needs a CUDA GPU"]
fn property_random_jobs_match_the_reference() {
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    let gpu = gpu();
    gpu.set_wgmma_enabled(true);
    let shape = (
        0..FRB_CASES.len(),
        1u32..=3,
        prop_oneof![Just(1u32), 1u32..=400],
        prop_oneof![Just(1u32), 1u32..=300],
    );
    let strategy = (shape, any::<bool>(), 0u8..3, any::<u64>());
    gpu_proptest(14, strategy, |((k, channels, times, beams), extreme_i, positions, seed)| {
        let case = FRB_CASES[k];
        let config = ResampleConfig { channels, times, m: case.m, n: case.n, beams };
        let mut rng = StdRng::seed_from_u64(seed);
        let i: Vec<u16> = (0..config.intensity_len())
            .map(|_| {
                if extreme_i {
                    let v = [0.0, 6e-8, 1000.0, 65504.0 / 8192.0, 0.5][rng.random_range(0..5)];
                    f16::from_f64(v).to_bits()
                } else {
                    f16::from_f64(rng.random_range(0.0..100.0)).to_bits()
                }
            })
            .collect();
        let position = |rng: &mut StdRng| -> f32 {
            match positions {
                0 => rng.random_range(-40.0..40.0),
                1 => (rng.random_range(-80i32..80) as f32) / 2.0,
                // Far positions (U is M- and N-periodic): exact in f32, whose phase error
                // grows with |theta| (at MAX_ABS_POSITION it reaches the bound's size).
                _ => [512.0, -512.0, 0.0, 511.5, -1023.25][rng.random_range(0..5)],
            }
        };
        let theta: Vec<f32> = (0..config.positions_len()).map(|_| position(&mut rng)).collect();
        let theta_prime: Vec<f32> = (0..config.positions_len()).map(|_| position(&mut rng)).collect();
        let mut w_path = Resampler::new(&gpu, config).unwrap();
        let mut fused = FusedResampler::new(&gpu, config).unwrap();
        let w_j = run(&gpu, &mut w_path, &i, &theta, &theta_prime);
        let f_j = run_fused(&gpu, &mut fused, &i, &theta, &theta_prime);
        let want = resample_reference(&config, halves(&i), &theta, &theta_prime).unwrap();
        let poison = u16::from_ne_bytes([POISON; 2]);
        prop_assert!(w_j.iter().chain(&f_j).all(|&v| v != poison), "{config:?}: unwritten J");
        prop_assert_eq!(&f_j, &w_j, "{:?}: the fused J differs from the W path's", config);
        let norm: f64 = want.iter().map(|x| x * x).sum();
        if norm > 0.0 {
            let error = relative_l2(&w_j, &want);
            println!("{config:?} extreme I {extreme_i} positions {positions}: relative L2 {error:.2e}");
            prop_assert!(error < BOUND, "{config:?}: relative L2 {error:e}");
        }
        Ok(())
    });
}
