//! GPU tests of the FRB beamformer's tensor-core short FFT (sec. 3 of Smith, CHORD FRB
//! beamformer design note (2022)): for every N,
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
#[path = "../common/mod.rs"]
mod common;
mod frb;
mod streaming;

use common::*;
use half::f16;
use radio_kernels::frb_beamformer::{
    fft_kernel, fft_methods, padded_dft, relative_l2, unpack_c16, FftMethod, ShortFft, C64, FFT_REL_L2_BOUND,
};
use radio_kernels::gpu_shared::frb_beamformer::{ffts_per_warp, FFT_SIZES};
use radio_kernels::{Ci4, Complex, Error};
use rand::Rng;

/// f16 NaN in both halves (0x7e7e): an element the kernel never wrote cannot pass.
const POISON: u8 = 0x7e;

fn random_c16(rng: &mut impl Rng, len: usize) -> Vec<Complex<f16>> {
    (0..len)
        .map(|_| {
            let re = f16::from_f32(rng.random_range(-1.0f32..1.0));
            let im = f16::from_f32(rng.random_range(-1.0f32..1.0));
            Complex::new(re, im)
        })
        .collect()
}

/// Complex f16 values as the 32-bit words the kernels' registers hold (re in bits 0..16).
fn words(values: &[Complex<f16>]) -> Vec<u32> {
    values.iter().map(|&v| bytemuck::cast(v)).collect()
}

/// Register words (re in bits 0..16) as the complex f16 values of the launchers (no copy).
fn c16s(words: &[u32]) -> &[Complex<f16>] {
    bytemuck::cast_slice(words)
}

/// The bits of f16 values (no copy), for bit-exact comparisons.
fn f16_bits(values: &[f16]) -> &[u16] {
    bytemuck::cast_slice(values)
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
            let mut y = gpu.alloc::<Complex<f16>>(batch * 2 * n as usize, POISON).unwrap();
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
        let mut x_words = vec![Complex::new(f16::ZERO, f16::ZERO); batch * n as usize];
        for m in 0..n as usize {
            x_words[m * n as usize + m] = Complex::new(f16::ONE, f16::ZERO);
        }
        let x = gpu.upload(&x_words).unwrap();
        let mut y = gpu.alloc::<Complex<f16>>(batch * 2 * n as usize, POISON).unwrap();
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
    let x = gpu.alloc::<Complex<f16>>(12 * 5, 0).unwrap();
    let mut y = gpu.alloc::<Complex<f16>>(24 * 5, POISON).unwrap();
    assert!(matches!(fft.run(&x, &mut y, 4), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(fft.run(&x, &mut y, 0), Err(Error::InvalidConfig(_))));
    let mut short = gpu.alloc::<Complex<f16>>(24 * 5 - 1, POISON).unwrap();
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
        let regs: Vec<u32> = words(&random_c16(&mut rng, 4 * threads));
        let x = gpu.upload(c16s(&regs)).unwrap();
        let mut y = gpu.alloc::<Complex<f16>>(threads, POISON).unwrap();
        fft.run_loop(&x, &mut y, 1, 1, 0).unwrap();
        let got = words(&y.download().unwrap());
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
                let xd = gpu.upload(c16s(&xb)).unwrap();
                let mut yd = gpu.alloc::<Complex<f16>>(per_warp * 2 * n as usize, POISON).unwrap();
                fft.run(&xd, &mut yd, per_warp).unwrap();
                let yb = words(&yd.download().unwrap());
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
        let regs: Vec<u32> = words(&random_c16(&mut rng, 4 * threads));
        let x = gpu.upload(c16s(&regs)).unwrap();
        let mut y = gpu.alloc::<Complex<f16>>(threads, POISON).unwrap();
        fft.run_loop(&x, &mut y, 1, 1, 0).unwrap();
        let got = words(&y.download().unwrap());
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
                let xd = gpu.upload(c16s(&xb)).unwrap();
                let mut yd = gpu.alloc::<Complex<f16>>(8 * 2 * nn, POISON).unwrap();
                fft.run(&xd, &mut yd, 8).unwrap();
                let yb = words(&yd.download().unwrap());
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
