//! FRB beamformer, host side of the tensor-core short FFT (seed 000 sec. 3): the Gamma
//! matrices of eqs. 28-30 in f64, rounded to f16 into the register image of eqs. 39, 41 and
//! 45-47, and at N = 20 the direct DFT's matrix image (no twiddle, faster on Hopper:
//! [`FftMethod`]); the launcher ([`ShortFft`]) with validation; and the CPU references: the padded DFT
//! of eq. 18, the three-factor form of eqs. 28-30, and an emulation of the warp algorithm
//! through the register tables (optionally rounding each stage to f16 like the kernel).
//! Index maps and kernels: `radio_kernels_gpu::frb_beamformer`.
//!
//! Complex f16 data is one `u32` per value, real part in bits 0..16 (`packing::pack_f16x2`).
//!
//! The first kernel ([`FrbBeamformer`]), the resamplers ([`resample`], [`factorized`],
//! [`nufft`]) and the quantiser ([`quantize`]) each run on one stream, the GPU's default
//! until `set_stream`; [`FrbStream`] chains the first kernel, a resampler and the quantiser
//! on the device and streams E chunks through them from host memory ([`streaming`]).
use crate::error::{DriverContext, Error, Result};
use crate::fragment::{from_slots, to_slots};
use crate::runtime::{allow_dynamic_shared, launch_1d, DeviceBuffer, Gpu, PushKernelArg, Stream};
use crate::size;
use cudarc::driver::CudaFunction;
use half::f16;
use radio_kernels_gpu::frb_beamformer::*;
pub use radio_kernels_gpu::frb_beamformer::{FrbCase, FRB_CASES};
use radio_kernels_gpu::layout::{
    sparse_metadata_slot, universal_sparse_metadata, Location, M16N8K16_F16_A, M16N8K16_F16_B,
    M16N8K16_SPARSE_F16_A, M16N8K8_F16_A, M16N8K8_F16_B, M16N8_F16_C,
};
use radio_kernels_gpu::packing::{pack_f16x2, unpack_f16x2};
use std::f64::consts::PI;

/// A complex number (re, im) in f64.
pub type C64 = (f64, f64);

fn cmul(a: C64, b: C64) -> C64 {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

fn cis(angle: f64) -> C64 {
    (angle.cos(), angle.sin())
}

/// Rejects N outside [`FFT_SIZES`].
pub fn check_fft_size(n: u32) -> Result<()> {
    if is_fft_size(n) {
        Ok(())
    } else {
        Err(Error::InvalidConfig(format!("short FFT length N must be one of {FFT_SIZES:?}, got {n}")))
    }
}

/// `G1_cv = exp(pi i c v / 4)` (eq. 28; the product `c v` in 64 bits, so no argument
/// overflows).
pub fn gamma1(c: u32, v: u32) -> C64 {
    cis(PI * (c as u64 * v as u64) as f64 / 4.0)
}

/// `G2_dv = exp(pi i d v / N)`, zero for `d >= N/4` (eq. 29; the product `d v` in 64 bits).
pub fn gamma2(n: u32, d: u32, v: u32) -> C64 {
    if d < n / 4 {
        cis(PI * (d as u64 * v as u64) as f64 / n as f64)
    } else {
        (0.0, 0.0)
    }
}

/// `G3_du = exp(8 pi i d u / N)`, zero for `d` or `u >= N/4` (eq. 30; the product `d u` in
/// 64 bits).
pub fn gamma3(n: u32, d: u32, u: u32) -> C64 {
    if d < n / 4 && u < n / 4 {
        cis(8.0 * PI * (d as u64 * u as u64) as f64 / n as f64)
    } else {
        (0.0, 0.0)
    }
}

fn real_entry(z: C64, entry: RealEntry) -> f64 {
    entry.sign as f64 * if entry.part == 0 { z.0 } else { z.1 }
}

/// The first MMA's A matrix (16 x 8, row-major), eqs. 32 and 38.
pub fn gamma1_matrix() -> Vec<f64> {
    let mut a = vec![0.0; 16 * 8];
    for i in 0..16 {
        for j in 0..8 {
            let (c, v, entry) = gamma1_entry(i, j);
            a[(i * 8 + j) as usize] = real_entry(gamma1(c, v), entry);
        }
    }
    a
}

/// The third MMA's dense A matrix (16 x 16, row-major) with the spectator Kronecker deltas,
/// eqs. 32, 34-36 and 43; `InvalidConfig` for N outside [`FFT_SIZES`].
pub fn gamma3_matrix(n: u32) -> Result<Vec<f64>> {
    check_fft_size(n)?;
    let mut a = vec![0.0; 16 * 16];
    for i in 0..16 {
        for j in 0..16 {
            if let Some((d, u, entry)) = gamma3_entry(n, i, j) {
                a[(i * 16 + j) as usize] = real_entry(gamma3(n, d, u), entry);
            }
        }
    }
    Ok(a)
}

/// Checks a matrix argument's length and a sparse selector (`f < 4`: the lanes with
/// `t0 t1 = f` of a quad).
fn check_sparse_args(what: &'static str, values: &[f64], expected: usize, f: u32) -> Result<()> {
    if values.len() != expected {
        return Err(Error::ShapeMismatch { what, expected, actual: values.len() });
    }
    if f >= 4 {
        return Err(Error::InvalidConfig(format!("sparse selector f must be 0..=3, got {f}")));
    }
    Ok(())
}

/// The compressed sparse operand (16 x 8, column `2 j' + J`, eq. 164) of a dense A that
/// contains `delta(i_f, j_1)` (eq. 169: `Asp[i][j'][J] = A[i][4 j' + 2 i_f + J]`). `dense`
/// is 16 x 16 (row-major) and `f < 4`, else a typed error.
pub fn compress_sparse(dense: &[f64], f: u32) -> Result<Vec<f64>> {
    check_sparse_args("dense A (16 x 16)", dense, 16 * 16, f)?;
    let mut asp = vec![0.0; 16 * 8];
    for i in 0..16u32 {
        for c in 0..8u32 {
            let j = 4 * (c >> 1) + 2 * ((i >> f) & 1) + (c & 1);
            asp[(i * 8 + c) as usize] = dense[(i * 16 + j) as usize];
        }
    }
    Ok(asp)
}

/// What `mma.sp` with selector `f` multiplies by: the dense A that eq. 163 rebuilds from
/// the compressed operand and the metadata registers of eq. 173 read as eq. 167 says (from
/// lanes with `t0 t1 = f`). `asp` is 16 x 8 (row-major) and `f < 4`, else a typed error.
pub fn decompress_universal(asp: &[f64], f: u32) -> Result<Vec<f64>> {
    check_sparse_args("compressed sparse A (16 x 8)", asp, 16 * 8, f)?;
    let mut dense = vec![0.0; 16 * 16];
    for i in 0..16u32 {
        for group in 0..4u32 {
            for half in 0..2u32 {
                let (lane, shift) = sparse_metadata_slot(i, group, half);
                let e = (universal_sparse_metadata(lane | f) >> shift) & 3;
                dense[(i * 16 + 4 * group + e) as usize] += asp[(i * 8 + 2 * group + half) as usize];
            }
        }
    }
    Ok(dense)
}

/// The Gamma register image in f64: `[lane][GAMMA_WORDS][2]` (two f16 slots per word).
pub fn gamma_image_f64(n: u32) -> Result<Vec<f64>> {
    check_fft_size(n)?;
    let mut image = vec![0.0; 32 * GAMMA_WORDS * 2];
    let mut put = |lane: u32, word: usize, element: u32, value: f64| {
        image[(lane as usize * GAMMA_WORDS + word) * 2 + element as usize] = value;
    };
    // G1, eq. 39 (= eq. 156 under eq. 38).
    let g1 = to_slots(&M16N8K8_F16_A, &gamma1_matrix());
    for (k, &value) in g1.iter().enumerate() {
        put((k / 4) as u32, G1_WORD + (k / 2) % 2, (k % 2) as u32, value);
    }
    // G2, eq. 41: Z's assignment (eq. 40), the same value for every spectator.
    for lane in 0..32 {
        for register in 0..2 {
            for element in 0..2 {
                let (d, v, _, reim) = z_coordinates(n, Location { lane, register, element });
                let g = gamma2(n, d, v);
                put(lane, G2_WORD + register as usize, element, if reim == 0 { g.0 } else { g.1 });
            }
        }
    }
    // G3, eq. 45 (dense) or eqs. 46-47 (sparse, the selector of eq. 168).
    let dense = gamma3_matrix(n)?;
    let (fragment, values) = match sparse_selector(n) {
        Some(f) => (&M16N8K16_SPARSE_F16_A, to_slots(&M16N8K16_SPARSE_F16_A, &compress_sparse(&dense, f)?)),
        None => (&M16N8K16_F16_A, to_slots(&M16N8K16_F16_A, &dense)),
    };
    let per_lane = (fragment.registers() * 2) as usize;
    for (k, &value) in values.iter().enumerate() {
        put((k / per_lane) as u32, G3_WORD + (k % per_lane) / 2, (k % 2) as u32, value);
    }
    Ok(image)
}

/// The Gamma register image the kernels take: [`gamma_image_f64`] rounded to f16,
/// `[lane][GAMMA_WORDS]` words.
pub fn gamma_image(n: u32) -> Result<Vec<u32>> {
    let image = gamma_image_f64(n)?;
    Ok(image
        .chunks(2)
        .map(|pair| pack_f16x2(f16::from_f64(pair[0]).to_bits(), f16::from_f64(pair[1]).to_bits()))
        .collect())
}

/// How [`ShortFft`] computes the padded DFT: the three-factor FFT of eqs. 28-30 (every N),
/// or the direct DFT as one matrix product (N = 20; `radio_kernels_gpu::frb_beamformer`,
/// "Part A'"), which needs no twiddle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FftMethod {
    ThreeFactor,
    Direct,
}

/// The methods that exist for N, the default ([`ShortFft::new`]) first.
pub fn fft_methods(n: u32) -> Vec<FftMethod> {
    let mut methods = vec![default_fft_method(n)];
    let other = if methods[0] == FftMethod::Direct { FftMethod::ThreeFactor } else { FftMethod::Direct };
    if other == FftMethod::ThreeFactor || has_direct_dft(n) {
        methods.push(other);
    }
    methods
}

/// The faster method for N on the H200 (BENCHMARKS.md): the direct DFT at N = 20 (78 vs 60
/// GFFT/s), the three-factor FFT elsewhere.
pub fn default_fft_method(n: u32) -> FftMethod {
    if has_direct_dft(n) {
        FftMethod::Direct
    } else {
        FftMethod::ThreeFactor
    }
}

/// FFTs one warp of the test and benchmark kernels computes per group; `InvalidConfig` for
/// N outside [`FFT_SIZES`] or a method N does not have.
pub fn ffts_per_group(n: u32, method: FftMethod) -> Result<u32> {
    check_fft_size(n)?;
    match method {
        FftMethod::ThreeFactor => Ok(ffts_per_warp(n)),
        FftMethod::Direct if has_direct_dft(n) => Ok(DIRECT_FFTS_PER_WARP),
        FftMethod::Direct => Err(Error::InvalidConfig(format!("no direct DFT for N = {n} (only 20)"))),
    }
}

/// The direct DFT's A-operand image in f64, `[word][lane][2]` (two f16 slots per word;
/// [`direct_words`] words): row tile T's k16 tiles (4 words each) then its k8 tile (2).
pub fn direct_image_f64(n: u32) -> Result<Vec<f64>> {
    check_fft_size(n)?;
    if !has_direct_dft(n) {
        return Err(Error::InvalidConfig(format!("no direct DFT for N = {n} (only 20)")));
    }
    let words = direct_words(n) as usize;
    let mut image = vec![0.0; words * 32 * 2];
    let k16 = direct_k16_tiles(n);
    for tile in 0..n / 4 {
        for i in 0..16 {
            for j in 0..2 * n {
                let (q, nn, entry) = direct_entry(tile, i, j);
                let value = real_entry(cis(PI * (nn * q) as f64 / n as f64), entry);
                let (at, base) = if j < 16 * k16 {
                    (M16N8K16_F16_A.location(i, j % 16), 4 * (j / 16))
                } else {
                    (M16N8K8_F16_A.location(i, j % 16), 4 * k16)
                };
                let word = (tile * direct_tile_words(n) + base + at.register) as usize;
                image[(word * 32 + at.lane as usize) * 2 + at.element as usize] = value;
            }
        }
    }
    Ok(image)
}

/// [`direct_image_f64`] rounded to f16, `[word][lane]` words.
pub fn direct_image(n: u32) -> Result<Vec<u32>> {
    Ok(direct_image_f64(n)?
        .chunks(2)
        .map(|pair| pack_f16x2(f16::from_f64(pair[0]).to_bits(), f16::from_f64(pair[1]).to_bits()))
        .collect())
}

/// The even/odd kernel's A image in f64 (`radio_kernels_gpu::frb_beamformer`, "Part B'"),
/// `[word][lane][2]`, [`EO_WORDS`] words: for parity `par` and row tile T, `exp(2 pi i n q /
/// 48)` at `q = 8 T + i % 8`, n from [`eo_k_entry`], through the k16 and k8 A tables.
pub fn eo_image_f64() -> Vec<f64> {
    let mut image = vec![0.0; EO_WORDS * 64];
    for par in 0..2 {
        for tile in 0..3 {
            for i in 0..16 {
                let q = 8 * tile + (i & 7);
                for (k8, ks) in [(false, 16), (true, 8)] {
                    for k in 0..ks {
                        let (n, reim_in) = eo_k_entry(par, k8, k);
                        let value =
                            real_entry(cis(PI * (n * q) as f64 / EO_N as f64), realify(i >> 3, reim_in));
                        let at =
                            if k8 { M16N8K8_F16_A.location(i, k) } else { M16N8K16_F16_A.location(i, k) };
                        let word = eo_word(par, tile, k8, at.register) as usize;
                        image[(word * 32 + at.lane as usize) * 2 + at.element as usize] = value;
                    }
                }
            }
        }
    }
    image
}

/// [`eo_image_f64`] rounded to f16, `[word][lane]`.
pub fn eo_image() -> Vec<u32> {
    eo_image_f64()
        .chunks(2)
        .map(|pair| pack_f16x2(f16::from_f64(pair[0]).to_bits(), f16::from_f64(pair[1]).to_bits()))
        .collect()
}

/// The even/odd DFT of eight columns on the CPU in f64, through the image and the A and B
/// tables: `x[g][n]` (n < 24) placed by [`eo_b_pair`] into the planar B registers, `Y[g][q]`
/// (q < 48) read from the C table as `E + O` (q < 24) and `E - O`. `image` holds
/// [`EO_WORDS`] x 64 values (as [`eo_image_f64`]), else `ShapeMismatch`.
pub fn emulate_eo_dft(image: &[f64], x: &[[C64; 24]; 8]) -> Result<Vec<[C64; 48]>> {
    if image.len() != EO_WORDS * 64 {
        return Err(Error::ShapeMismatch {
            what: "even/odd DFT image",
            expected: EO_WORDS * 64,
            actual: image.len(),
        });
    }
    let a = |word: u32, lane: u32, e: u32| image[((word * 32 + lane) * 2 + e) as usize];
    let mut y = vec![[(0.0, 0.0); 48]; 8];
    for tile in 0..3u32 {
        // c[par][i][g]
        let mut c = [[[0.0f64; 8]; 16]; 2];
        for par in 0..2u32 {
            for (k8, ks) in [(false, 16u32), (true, 8)] {
                for i in 0..16 {
                    for g in 0..8u32 {
                        for k in 0..ks {
                            let at =
                                if k8 { M16N8K8_F16_A.location(i, k) } else { M16N8K16_F16_A.location(i, k) };
                            let b =
                                if k8 { M16N8K8_F16_B.location(k, g) } else { M16N8K16_F16_B.location(k, g) };
                            // What the lane holds there: pair word (a, ReIm) of its column, half e.
                            let (pair, reim) = eo_b_pair(k8, b.lane, b.register);
                            let n = 4 * pair + 2 * b.element + par;
                            let v = x[(b.lane / 4) as usize][n as usize];
                            let bv = if reim == 0 { v.0 } else { v.1 };
                            c[par as usize][i as usize][g as usize] +=
                                a(eo_word(par, tile, k8, at.register), at.lane, at.element) * bv;
                        }
                    }
                }
            }
        }
        for g in 0..8 {
            for r in 0..8u32 {
                let q = (8 * tile + r) as usize;
                let e = (c[0][r as usize][g], c[0][r as usize + 8][g]);
                let o = (c[1][r as usize][g], c[1][r as usize + 8][g]);
                y[g][q] = (e.0 + o.0, e.1 + o.1);
                y[g][q + 24] = (e.0 - o.0, e.1 - o.1);
            }
        }
    }
    Ok(y)
}

/// The direct DFT on the CPU through the image and the m16n8k16 / m16n8k8 tables, in f64:
/// `x` holds 8 arrays of N values (`[s][n]`), placed by [`direct_x_location`]; the result
/// `[s][2N]` is read through [`direct_y_location`].
pub fn emulate_direct_dft(n: u32, image: &[f64], x: &[C64]) -> Result<Vec<C64>> {
    check_fft_size(n)?;
    if !has_direct_dft(n) {
        return Err(Error::InvalidConfig(format!("no direct DFT for N = {n} (only 20)")));
    }
    let spectators = DIRECT_FFTS_PER_WARP as usize;
    if x.len() != spectators * n as usize {
        return Err(Error::ShapeMismatch {
            what: "emulated direct DFT input",
            expected: spectators * n as usize,
            actual: x.len(),
        });
    }
    if image.len() != direct_words(n) as usize * 64 {
        return Err(Error::ShapeMismatch {
            what: "direct DFT image",
            expected: direct_words(n) as usize * 64,
            actual: image.len(),
        });
    }
    // regs[lane][register][element] of the B operand (N / 4 registers) and the result.
    let mut b = vec![[[0.0f64; 2]; 6]; 32];
    for s in 0..8 {
        for nn in 0..n {
            for reim in 0..2 {
                let at = direct_x_location(nn, s, reim);
                let v = x[s as usize * n as usize + nn as usize];
                b[at.lane as usize][at.register as usize][at.element as usize] =
                    if reim == 0 { v.0 } else { v.1 };
            }
        }
    }
    let word = |w: u32, lane: u32, e: u32| image[((w * 32 + lane) * 2 + e) as usize];
    let k16 = direct_k16_tiles(n);
    let mut out = vec![(0.0, 0.0); spectators * 2 * n as usize];
    for tile in 0..n / 4 {
        // C[i][col] = sum_j A[i][j] B[j][col] over the k tiles, each read through its table.
        let mut c = [[0.0f64; 8]; 16];
        for i in 0..16 {
            for col in 0..8 {
                for j in 0..2 * n {
                    let (a_at, base, b_at, breg) = if j < 16 * k16 {
                        let kt = j / 16;
                        (
                            M16N8K16_F16_A.location(i, j % 16),
                            4 * kt,
                            M16N8K16_F16_B.location(j % 16, col),
                            2 * kt,
                        )
                    } else {
                        (
                            M16N8K8_F16_A.location(i, j % 16),
                            4 * k16,
                            M16N8K8_F16_B.location(j % 16, col),
                            2 * k16,
                        )
                    };
                    let a = word(tile * direct_tile_words(n) + base + a_at.register, a_at.lane, a_at.element);
                    let bv = b[b_at.lane as usize][(breg + b_at.register) as usize][b_at.element as usize];
                    c[i as usize][col as usize] += a * bv;
                }
            }
        }
        for i in 0..16u32 {
            for col in 0..8u32 {
                let at = M16N8_F16_C.location(i, col);
                // Read back through the Y map: the C slot is (lane, tile register, element).
                for s in 0..8 {
                    for q in 8 * tile..8 * tile + 8 {
                        for reim in 0..2 {
                            let y = direct_y_location(q, s, reim);
                            if (y.lane, y.register, y.element)
                                == (at.lane, 2 * tile + at.register, at.element)
                            {
                                let slot = &mut out[s as usize * 2 * n as usize + q as usize];
                                if reim == 0 {
                                    slot.0 = c[i as usize][col as usize];
                                } else {
                                    slot.1 = c[i as usize][col as usize];
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Eq. 18 directly: `Y_q = sum_{n<N} X_n exp(2 pi i n q / 2N)`, 0 <= q < 2N.
pub fn padded_dft(x: &[C64]) -> Vec<C64> {
    let n = x.len();
    (0..2 * n)
        .map(|q| {
            x.iter().enumerate().fold((0.0, 0.0), |acc, (m, &xm)| {
                let t = cmul(xm, cis(PI * ((m * q) % (2 * n)) as f64 / n as f64));
                (acc.0 + t.0, acc.1 + t.1)
            })
        })
        .collect()
}

/// Eqs. 28-30 over the zero-padded 3-d arrays of eqs. 23-24, for one spectator.
pub fn three_factor_fft(x: &[C64]) -> Result<Vec<C64>> {
    let n = x.len() as u32;
    check_fft_size(n)?;
    let q = padded_quarter(n);
    let x3 = |c: u32, d: u32| if d < n / 4 { x[((n / 4) * c + d) as usize] } else { (0.0, 0.0) };
    let mut y = vec![(0.0, 0.0); 2 * n as usize];
    for v in 0..8 {
        // W_dv = G2_dv sum_c G1_cv X_cd.
        let w: Vec<C64> = (0..q)
            .map(|d| {
                let z = (0..4).fold((0.0, 0.0), |acc, c| {
                    let t = cmul(gamma1(c, v), x3(c, d));
                    (acc.0 + t.0, acc.1 + t.1)
                });
                cmul(gamma2(n, d, v), z)
            })
            .collect();
        for u in 0..q {
            let yu = w.iter().enumerate().fold((0.0, 0.0), |acc, (d, &wd)| {
                let t = cmul(gamma3(n, d as u32, u), wd);
                (acc.0 + t.0, acc.1 + t.1)
            });
            if u < n / 4 {
                y[(8 * u + v) as usize] = yu;
            } else {
                assert!(yu == (0.0, 0.0), "padded output u = {u} must be zero");
            }
        }
    }
    Ok(y)
}

/// `rows x inner` times `inner x cols`, row-major.
fn matmul(a: &[f64], b: &[f64], (rows, inner, cols): (usize, usize, usize)) -> Vec<f64> {
    (0..rows * cols)
        .map(|rc| (0..inner).map(|j| a[(rc / cols) * inner + j] * b[j * cols + rc % cols]).sum())
        .collect()
}

fn round_f16(x: f64) -> f64 {
    f16::from_f64(x).to_f64()
}

/// The warp algorithm on the CPU, through the same register images and fragment tables the
/// kernel uses: `x` holds `ffts_per_warp(N)` arrays of N values (`[s][n]`), the result
/// `[s][2N]`. With `gammas` from [`gamma_image_f64`] and `f16_stages = false` this is exact
/// f64 arithmetic; with the f16 image (as f64) and `f16_stages = true` every stage rounds to
/// f16 where the kernel does (MMA outputs, the HMUL2 and HFMA2 of eq. 29), which models the
/// kernel's error except for the MMA's internal accumulation order. A Gamma image of other
/// than `32 GAMMA_WORDS 2` values or an input of other than `ffts_per_warp(N) N` values is
/// `ShapeMismatch`.
pub fn emulate_warp_fft(n: u32, gammas: &[f64], x: &[C64], f16_stages: bool) -> Result<Vec<C64>> {
    check_fft_size(n)?;
    if gammas.len() != 32 * GAMMA_WORDS * 2 {
        return Err(Error::ShapeMismatch {
            what: "Gamma image (f64, [lane][GAMMA_WORDS][2])",
            expected: 32 * GAMMA_WORDS * 2,
            actual: gammas.len(),
        });
    }
    let spectators = ffts_per_warp(n) as usize;
    if x.len() != spectators * n as usize {
        return Err(Error::ShapeMismatch {
            what: "emulated FFT input",
            expected: spectators * n as usize,
            actual: x.len(),
        });
    }
    let round = |v: f64| if f16_stages { round_f16(v) } else { v };
    let word = |lane: usize, w: usize, e: usize| gammas[(lane * GAMMA_WORDS + w) * 2 + e];
    // X slots (eq. 25): one register, element = ReIm.
    let mut xs = vec![0.0; 64];
    for lane in 0..32 {
        let (c, d, s) = x_coordinates(n, lane);
        if d < n / 4 {
            let value = x[s as usize * n as usize + ((n / 4) * c + d) as usize];
            xs[2 * lane as usize] = value.0;
            xs[2 * lane as usize + 1] = value.1;
        }
    }
    // Step 1: m16n8k8.
    let g1: Vec<f64> = (0..128).map(|k| word(k / 4, G1_WORD + (k / 2) % 2, k % 2)).collect();
    let z = matmul(&from_slots(&M16N8K8_F16_A, &g1), &from_slots(&M16N8K8_F16_B, &xs), (16, 8, 8));
    let z: Vec<f64> = to_slots(&M16N8_F16_C, &z).into_iter().map(round).collect();
    // Step 2: per lane and element, Re W = fma(-Im G, Im Z, Re G Re Z), Im W = fma(Im G,
    // Re Z, Re G Im Z); registers 0 and 1 are Re and Im (eq. 40).
    let mut w = vec![0.0; 128];
    for lane in 0..32 {
        for e in 0..2 {
            let (gre, gim) = (word(lane, G2_WORD, e), word(lane, G2_WORD + 1, e));
            let (zre, zim) = (z[lane * 4 + e], z[lane * 4 + 2 + e]);
            w[lane * 4 + e] = round(-gim * zim + round(gre * zre));
            w[lane * 4 + 2 + e] = round(gim * zre + round(gre * zim));
        }
    }
    // Step 3: m16n8k16, dense or sparse with the universal metadata.
    let a3 = match sparse_selector(n) {
        Some(f) => {
            let asp: Vec<f64> = (0..128).map(|k| word(k / 4, G3_WORD + (k / 2) % 2, k % 2)).collect();
            decompress_universal(&from_slots(&M16N8K16_SPARSE_F16_A, &asp), f)?
        }
        None => {
            let g3: Vec<f64> = (0..256).map(|k| word(k / 8, G3_WORD + (k / 2) % 4, k % 2)).collect();
            from_slots(&M16N8K16_F16_A, &g3)
        }
    };
    let y = matmul(&a3, &from_slots(&M16N8K16_F16_B, &w), (16, 16, 8));
    let y: Vec<f64> = to_slots(&M16N8_F16_C, &y).into_iter().map(round).collect();
    // Read Y (eq. 26).
    let mut out = vec![(0.0, 0.0); spectators * 2 * n as usize];
    for lane in 0..32 {
        for element in 0..2 {
            let (u, v, s, _) = y_coordinates(n, Location { lane, register: 0, element });
            let value = (
                y[(lane * 2) as usize * 2 + element as usize],
                y[(lane * 2 + 1) as usize * 2 + element as usize],
            );
            if u < n / 4 {
                out[s as usize * 2 * n as usize + (8 * u + v) as usize] = value;
            } else if value != (0.0, 0.0) {
                return Err(Error::InvalidConfig(format!("N={n}: padded output slot u={u} is not zero")));
            }
        }
    }
    Ok(out)
}

/// Relative L2 distance `|got - want| / |want|`.
pub fn relative_l2(got: &[C64], want: &[C64]) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (g, w) in got.iter().zip(want) {
        num += (g.0 - w.0).powi(2) + (g.1 - w.1).powi(2);
        den += w.0 * w.0 + w.1 * w.1;
    }
    (num / den).sqrt()
}

/// Complex f16 words (re in bits 0..16) as f64 pairs.
pub fn unpack_c16(words: &[u32]) -> Vec<C64> {
    words
        .iter()
        .map(|&w| {
            let (re, im) = unpack_f16x2(w);
            (f16::from_bits(re).to_f64(), f16::from_bits(im).to_f64())
        })
        .collect()
}

/// Relative L2 bound of the f16 FFT against the f64 DFT of its (f16) input, `2^-8`. Each
/// of the five roundings where the kernel rounds (the Gammas to f16, Z, the HMUL2 and HFMA2 of
/// eq. 29, Y) perturbs its stage's values by a relative L2 of at most `u = 2^-11` (the complex
/// multiply's real part, with cancellation, by at most `2u`); every stage is a scaled
/// isometry (a padded 8-point DFT, a phase, an N/4-point DFT), so relative errors carry to
/// the output undamped and add: `(1 + 1 + 2 + 1 + 1 + 1) u` plus the MMAs' internal
/// accumulation, which we budget at `u` each: `8u = 2^-8`, a worst case. Random inputs land
/// near `4e-4`, a tenth of it (the roundings are independent and mostly below their bounds,
/// so they add in quadrature): `f16_model_is_within_the_bound` and the GPU tests print it.
/// The direct DFT ([`FftMethod::Direct`]) stays inside the same bound: F rounded to f16
/// (`u`), each of its three k tiles' f16 partial sums (`3u`) and the MMAs' internal
/// accumulation (`3u`) give `7u`; random inputs land near `3.3e-4`.
pub const FFT_REL_L2_BOUND: f64 = 1.0 / 256.0;

/// Checks the buffers of a batched FFT: `x` holds `batch * N` complex values and `y`
/// `batch * 2N`.
pub fn check_fft_buffers(n: u32, batch: usize, x_len: usize, y_len: usize) -> Result<()> {
    check_fft_size(n)?;
    if batch == 0 || batch > MAX_FFT_BATCH {
        return Err(Error::InvalidConfig(format!("FFT batch must be in 1..={MAX_FFT_BATCH}, got {batch}")));
    }
    let n = n as usize;
    if x_len != batch * n {
        return Err(Error::ShapeMismatch {
            what: "short FFT input (complex f16)",
            expected: batch * n,
            actual: x_len,
        });
    }
    if y_len != batch * 2 * n {
        return Err(Error::ShapeMismatch {
            what: "short FFT output (complex f16)",
            expected: batch * 2 * n,
            actual: y_len,
        });
    }
    Ok(())
}

/// Largest batch of one [`ShortFft::run`] launch: 2^26 arrays, the most the batch kernels'
/// 32-bit word offsets address (at N = 32 the output's last word is `2^26 64 - 1 = 2^32 - 1`);
/// the grid stays far below its limits.
pub const MAX_FFT_BATCH: usize = 1 << 26;
/// Threads per block of the FFT kernels.
pub const FFT_THREADS: u32 = 256;

/// The tensor-core short FFT of length N on one GPU, holding its Gamma image on the device.
pub struct ShortFft<'g> {
    gpu: &'g Gpu,
    n: u32,
    method: FftMethod,
    batch_kernel: CudaFunction,
    loop_kernel: CudaFunction,
    gammas: DeviceBuffer<u32>,
    /// The stream `run` and `run_loop` launch on.
    stream: Stream,
}

impl<'g> ShortFft<'g> {
    /// Validates N and uploads the Gamma image, with N's [`default_fft_method`].
    pub fn new(gpu: &'g Gpu, n: u32) -> Result<ShortFft<'g>> {
        ShortFft::with_method(gpu, n, default_fft_method(n))
    }

    /// As [`ShortFft::new`] with a given method (an error where N does not have it).
    pub fn with_method(gpu: &'g Gpu, n: u32, method: FftMethod) -> Result<ShortFft<'g>> {
        check_fft_size(n)?;
        let ((batch, looped), image) = match method {
            FftMethod::ThreeFactor => {
                (fft_kernel_names(n).ok_or(Error::MissingKernel("frb_short_fft_n*"))?, gamma_image(n)?)
            }
            FftMethod::Direct => {
                let image = direct_image(n)?;
                (direct_kernel_names(n).ok_or(Error::MissingKernel("frb_short_fft_direct_n*"))?, image)
            }
        };
        Ok(ShortFft {
            gpu,
            n,
            method,
            batch_kernel: gpu.function(batch)?,
            loop_kernel: gpu.function(looped)?,
            gammas: gpu.upload(&image)?,
            stream: gpu.stream().clone(),
        })
    }

    /// Launches `run` and `run_loop` on `stream` (the GPU's default stream until set);
    /// [`Error::WrongDevice`] for a stream of another GPU.
    pub fn set_stream(&mut self, stream: &Stream) -> Result<()> {
        self.gpu.switch_stream(&mut self.stream, stream, "short FFT stream")
    }

    /// The stream `run` and `run_loop` launch on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    pub fn n(&self) -> u32 {
        self.n
    }

    pub fn method(&self) -> FftMethod {
        self.method
    }

    /// FFTs per warp group: [`ffts_per_group`] of this FFT's (valid) N and method.
    pub fn ffts_per_group(&self) -> u32 {
        match self.method {
            FftMethod::ThreeFactor => ffts_per_warp(self.n),
            FftMethod::Direct => DIRECT_FFTS_PER_WARP,
        }
    }

    /// FFTs `batch` arrays: `x` complex f16 `[batch][N]` to `y` `[batch][2N]` (eq. 18).
    pub fn run(&self, x: &DeviceBuffer<u32>, y: &mut DeviceBuffer<u32>, batch: usize) -> Result<()> {
        check_fft_buffers(self.n, batch, x.len(), y.len())?;
        self.gpu.check_owner(x, "short FFT input")?;
        self.gpu.check_owner(y, "short FFT output")?;
        let per_block = (FFT_THREADS / 32 * self.ffts_per_group()) as usize;
        let blocks = batch.div_ceil(per_block) as u32;
        let batch = batch as u32;
        let mut launch = self.stream.launch_builder(&self.batch_kernel);
        launch.arg(self.gammas.raw()).arg(x.raw()).arg(y.arg_mut()).arg(&batch);
        // SAFETY: matches `frb_short_fft_n*(gammas, x, y, batch)`; the lengths were checked and
        // the kernel touches only the first `batch` arrays.
        unsafe { launch.launch(launch_1d(blocks, FFT_THREADS, 0)) }
            .map_err(|source| Error::Driver { during: "launching the short FFT", source })?;
        Ok(())
    }

    /// The benchmark kernel: `blocks` blocks of [`FFT_THREADS`] threads each run
    /// `4 * iterations` FFT groups per warp from registers (`4 * iterations * ffts_per_group`
    /// FFTs). `x` holds 4 words per thread, `y` one.
    pub fn run_loop(
        &self,
        x: &DeviceBuffer<u32>,
        y: &mut DeviceBuffer<u32>,
        blocks: u32,
        iterations: u32,
        salt: u32,
    ) -> Result<()> {
        if blocks == 0 || blocks > 1 << 20 || iterations == 0 {
            return Err(Error::InvalidConfig(format!(
                "loop FFT needs 1..=2^20 blocks and iterations > 0, got {blocks} and {iterations}"
            )));
        }
        let threads = blocks as usize * FFT_THREADS as usize;
        if x.len() != 4 * threads {
            return Err(Error::ShapeMismatch {
                what: "loop FFT input",
                expected: 4 * threads,
                actual: x.len(),
            });
        }
        if y.len() != threads {
            return Err(Error::ShapeMismatch { what: "loop FFT output", expected: threads, actual: y.len() });
        }
        self.gpu.check_owner(x, "loop FFT input")?;
        self.gpu.check_owner(y, "loop FFT output")?;
        let mut launch = self.stream.launch_builder(&self.loop_kernel);
        launch.arg(self.gammas.raw()).arg(x.raw()).arg(y.arg_mut()).arg(&iterations).arg(&salt);
        // SAFETY: matches `frb_short_fft_loop_n*(gammas, x, y, iterations, salt)`; x holds 4
        // words and y one per thread.
        unsafe { launch.launch(launch_1d(blocks, FFT_THREADS, 0)) }
            .map_err(|source| Error::Driver { during: "launching the loop FFT", source })?;
        Ok(())
    }

    /// FFTs run by one [`ShortFft::run_loop`] launch (exact for the arguments `run_loop`
    /// accepts, `blocks <= 2^20`; saturates at `u64::MAX` past 2^64).
    pub fn loop_ffts(&self, blocks: u32, iterations: u32) -> u64 {
        let ffts = blocks as u128
            * (FFT_THREADS / 32) as u128
            * 4
            * iterations as u128
            * self.ffts_per_group() as u128;
        u64::try_from(ffts).unwrap_or(u64::MAX)
    }
}

// --- Part B (seed sec. 4): configuration, validation and the CPU reference --------------
//
// `I[f][tbar][p][q] = sum_{tau in tbar's T_ds block} sum_pol |Et[tau][f][pol][p][q]|^2`,
// `Et = sum_{m,n} W[f][pol][m][n] E[tau][f][pol][m][n] exp(2 pi i (m p / 2M + n q / 2N))`
// (eqs. 50-51), 0 <= p < 2M, 0 <= q < 2N. E complex int4+4 `[tau][f][pol][d]`, gridded by
// `d -> (m, n)` (no dish: zero); W complex f16 `[f][pol][m][n]`; I `[f][tbar][p][q]`, so the
// second kernel (sec. 5), a matrix product over the (p, q) pixels for every (f, tbar), reads
// row-major `(F Tbar) x (2M 2N)` rows.
//
// The kernel behind [`FrbBeamformer`] is the straightforward version
// (`radio_kernels_gpu::frb_beamformer::frb_beamform`): blocks of (channel, chunk of whole
// output samples, [`frb_output_samples_per_block`]), T_inner samples per phase, gridding
// through shared memory with W E formed in f16x2, both 1-d FFTs with the tensor-core short
// FFT, |Et|^2 summed in f16x2: over the whole output sample for T_ds <= 96
// (`FRB_F16_SUM_MAX_T_DS`), else per phase and the phases in f32. Full CHORD with
// T_ds <= 96 (the production case) takes `frb_beamform_eo` instead: both FFTs as the
// padded 48-point DFT split by the parity of the input index (no twiddles, no padding; the
// A image [`eo_image`]), blocks of 6 warps, planar `X` and `G`, the two polarisations of a
// pixel in the two halves of one f16x2 sum.
// The seed's two-pass gridding and register-resident pipeline (secs. 4.6-4.11, whose
// layouts and bank-conflict checks are in place) are not written yet.
//
// Sizes. E (`T F 2D` bytes) and I (`F Tbar 4MN` values) pass 2^32 in ordinary launches (full
// CHORD with F = 16: T = 262176 gives 4.3 GB of E; T = 120000 at T_ds = 1 gives 4.4 G values
// of I), so the kernels form E's and I's element offsets in 64 bits from 32-bit row indices
// (`(tau, f)` and `(f, tbar)` rows); `FrbConfig::validate` keeps those indices below 2^32
// (`T F < 2^32`, [`FRB_MAX_ROWS`]: an E of at least 512 GB) and T at most 2^31
// ([`FRB_MAX_TIMES`]: the kernels' sample counters), and the split keeps the grid within its
// 2^31 - 1 blocks ([`FRB_MAX_BLOCKS`]).
//
// f16 range (sec. 4.14). W E is rounded to f16, the FFT stages hold f16 (`|G| <= N max|W E|`,
// `|Et| <= D max|W E|`), and I is summed (for T_ds <= 96 entirely, else per phase) and stored
// as f16 (at most 65504; partial sums are at most the total). So I is
// finite for every input when `2 T_ds (D w_max 8 sqrt 2)^2 <= 65504`, i.e.
// `w_max <= 256 / (sqrt(2 T_ds) 8 sqrt(2) D)`: for full CHORD (D = 512, T_ds = 40) that is
// `|W| <= 4.9e-3`. For noise-like E (rms sigma per component, about 2-3 for 4-bit data) the
// expected `I = 4 T_ds D |W|^2 sigma^2` (plus bright sources), so `|W|` near
// `6 / sqrt(T_ds D)` puts noise near 1000, with headroom for sources 60 times brighter; the
// GPU tests run at such magnitudes (uniform int4 E, sigma about 4.6, |W| up to
// `sqrt(1000 / (4 T_ds D 21.5))`).

/// Polarisations of the FRB beamformer.
pub const FRB_POLS: u32 = 2;

/// Largest T per launch of the first FRB kernel, 2^31: the kernels count time samples in
/// 32 bits and step a phase of up to 8 samples past the last one. E and I may exceed 2^32
/// bytes and values (the kernels' row offsets are 64-bit), but their rows are counted in 32
/// bits: `validate` also requires `T F < 2^32` ([`FRB_MAX_ROWS`]), which only an E of at
/// least 512 GB would break.
pub const FRB_MAX_TIMES: u32 = 1 << 31;

/// Largest number of `(tau, f)` rows of E, `T F` (`2^32 - 1`: the kernels' 32-bit row
/// indices; I has fewer rows, `F T / T_ds`).
pub const FRB_MAX_ROWS: u64 = u32::MAX as u64;

/// Largest number of blocks of one first-kernel launch (the grid's x dimension, `2^31 - 1`).
pub const FRB_MAX_BLOCKS: u64 = (1 << 31) - 1;

/// The first f16 word whose real or imaginary half is not finite (all exponent bits set).
fn first_non_finite_c16(words: &[u32]) -> Option<usize> {
    words.iter().position(|&w| w & 0x7c00 == 0x7c00 || (w >> 16) & 0x7c00 == 0x7c00)
}

/// One launch of the first FRB kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrbConfig {
    /// Dishes D and grid (M, N): one of the cases of seed Table 2 ([`FRB_CASES`]).
    pub dishes: u32,
    pub m: u32,
    pub n: u32,
    /// Frequency channels F (one thread block each), 1..=65535.
    pub freqs: u32,
    /// Time samples T per launch: a positive multiple of the case's outer block and of T_ds,
    /// at most [`FRB_MAX_TIMES`].
    pub times: u32,
    /// Time downsampling factor T_ds (any positive integer).
    pub t_ds: u32,
}

impl FrbConfig {
    /// The Table 2 case, or `InvalidConfig` naming the supported ones.
    pub fn case(&self) -> Result<FrbCase> {
        frb_case(self.dishes, self.m, self.n).ok_or_else(|| {
            let cases: Vec<String> =
                FRB_CASES.iter().map(|c| format!("({}, {}, {})", c.dishes, c.m, c.n)).collect();
            Error::InvalidConfig(format!(
                "(D, M, N) = ({}, {}, {}) is not one of the compiled cases {}",
                self.dishes,
                self.m,
                self.n,
                cases.join(", ")
            ))
        })
    }

    /// Checks every parameter; the first violation is returned as `InvalidConfig`.
    pub fn validate(&self) -> Result<()> {
        let case = self.case()?;
        let bad = |message: String| Err(Error::InvalidConfig(message));
        if self.freqs == 0 || self.freqs > 65535 {
            return bad(format!("freqs must be 1..=65535, got {}", self.freqs));
        }
        if self.t_ds == 0 {
            return bad("the time downsampling factor T_ds must be positive".into());
        }
        if self.times == 0 || !self.times.is_multiple_of(case.t_outer) {
            return bad(format!(
                "times per launch must be a positive multiple of the outer block {} of (D, M, N) = ({}, {}, {}), got {}",
                case.t_outer, self.dishes, self.m, self.n, self.times
            ));
        }
        if !self.times.is_multiple_of(self.t_ds) {
            return bad(format!(
                "times per launch ({}) must be a multiple of T_ds ({}): no partial sums are kept between launches",
                self.times, self.t_ds
            ));
        }
        if self.times > FRB_MAX_TIMES {
            return bad(format!(
                "times per launch ({}) must be at most 2^31: the kernels count time samples in 32 bits",
                self.times
            ));
        }
        let rows = self.times as u64 * self.freqs as u64;
        if rows > FRB_MAX_ROWS {
            return bad(format!(
                "T F = {rows} rows of E exceed 2^32 - 1, the kernels' 32-bit row indices (E would hold {:.3e} bytes)",
                self.e_len_exact() as f64
            ));
        }
        let per_channel = self.out_times() as u64 * 4 * self.m as u64 * self.n as u64;
        if per_channel > u32::MAX as u64 {
            return bad(format!(
                "one channel of I would hold {per_channel} values (T / T_ds x 4MN), past 2^32 - 1: the \
                 first kernel addresses a channel's I with 32-bit offsets (split the launch in time)"
            ));
        }
        // E and I address 64-bit rows on the device; on the host they must fit `usize`.
        for (what, unit, len) in
            [("E", "bytes", self.e_len_exact()), ("I", "values", self.output_len_exact())]
        {
            if len > usize::MAX as u128 {
                return bad(format!("{what} would hold {len} {unit}, past this platform's address space"));
            }
        }
        Ok(())
    }

    fn e_len_exact(&self) -> u128 {
        self.times as u128 * self.freqs as u128 * FRB_POLS as u128 * self.dishes as u128
    }
    /// At most 2^32 2^32 2^34 2^32: no u128 overflow.
    fn output_len_exact(&self) -> u128 {
        self.freqs as u128 * self.out_times() as u128 * 4 * self.m as u128 * self.n as u128
    }

    // The size and index helpers below are exact for every configuration [`validate`]
    // accepts (and indices inside it); for others they neither panic nor wrap: sizes and
    // indices past `usize` saturate at `usize::MAX`, and `out_times` is 0 when T_ds = 0.

    /// Downsampled samples per launch, `T / T_ds` (0 when T_ds = 0, which `validate` rejects).
    ///
    /// [`validate`]: FrbConfig::validate
    pub fn out_times(&self) -> u32 {
        self.times.checked_div(self.t_ds).unwrap_or(0)
    }
    /// E size in bytes (ci4 `[tau][f][pol][d]`; saturates at `usize::MAX`).
    pub fn e_len(&self) -> usize {
        size::saturate(self.e_len_exact())
    }
    /// W size in complex values (`[f][pol][m][n]`; saturates at `usize::MAX`).
    pub fn weights_len(&self) -> usize {
        size::saturate(self.freqs as u128 * FRB_POLS as u128 * self.m as u128 * self.n as u128)
    }
    /// I size (`[f][tbar][p][q]`; saturates at `usize::MAX`).
    pub fn output_len(&self) -> usize {
        size::saturate(self.output_len_exact())
    }
    /// Byte of E holding `(tau, f, pol, d)` (saturates at `usize::MAX`).
    pub fn e_index(&self, tau: u32, f: u32, pol: u32, d: u32) -> usize {
        size::row_major(&[(tau, 1), (f, self.freqs), (pol, FRB_POLS), (d, self.dishes)])
    }
    /// Entry of W holding `(f, pol, m, n)` (saturates at `usize::MAX`).
    pub fn weight_index(&self, f: u32, pol: u32, m: u32, n: u32) -> usize {
        size::row_major(&[(f, 1), (pol, FRB_POLS), (m, self.m), (n, self.n)])
    }
    /// Entry of I holding `(f, tbar, p, q)` (saturates at `usize::MAX`).
    pub fn output_index(&self, f: u32, tbar: u32, p: u32, q: u32) -> usize {
        size::row_major(&[
            (f, 1),
            (tbar, self.out_times()),
            (p, self.m.saturating_mul(2)),
            (q, self.n.saturating_mul(2)),
        ])
    }

    /// Checks a dish-to-grid map: D entries `(m, n)`, each inside the M x N grid, no two
    /// dishes on one grid point.
    pub fn check_grid(&self, grid: &[(u32, u32)]) -> Result<()> {
        self.case()?;
        if grid.len() != self.dishes as usize {
            return Err(Error::ShapeMismatch {
                what: "dish grid map",
                expected: self.dishes as usize,
                actual: grid.len(),
            });
        }
        let mut owner = vec![None; (self.m * self.n) as usize];
        for (d, &(m, n)) in grid.iter().enumerate() {
            if m >= self.m || n >= self.n {
                return Err(Error::InvalidConfig(format!(
                    "dish {d} is mapped to ({m}, {n}), outside the {} x {} grid",
                    self.m, self.n
                )));
            }
            let slot = &mut owner[(m * self.n + n) as usize];
            if let Some(other) = *slot {
                return Err(Error::InvalidConfig(format!(
                    "dishes {other} and {d} are both mapped to ({m}, {n})"
                )));
            }
            *slot = Some(d);
        }
        Ok(())
    }
}

/// Relative L2 bound of the first FRB kernel's I against [`frb_intensity_reference`]:
/// `2^-6`. Et passes the f16 product `W E` (two roundings, `2u`, `u = 2^-11`) and two short
/// FFTs (each within [`FFT_REL_L2_BOUND`] = `8u`), so its relative L2 error is at most
/// about `18u`; `|Et|^2` doubles relative errors (`36u`), and the f16 squares and sums add
/// rounding that grows with the number of terms (`2 T_ds` up to T_ds = 96, `2 T_inner`
/// above). Measured (H200): 6e-4 to 7e-4 at T_ds <= 3, 4.0e-3 at T_ds = 96 (the largest
/// f16 sum, 192 terms), 3e-4 to 4e-4 for the per-phase kernel at T_ds = 120-192; an f16 sum
/// of 384 terms (T_ds = 192, which takes the per-phase kernel) measured 9.4e-3. Full
/// CHORD's even/odd kernel (T_ds terms per f16 half): 5.4e-4 to 6.8e-4 at T_ds <= 3, 8.8e-4
/// at 40, 1.3e-3 at 72 (the three-factor kernel: 1.7e-3 and 2.7e-3).
pub const FRB_REL_L2_BOUND: f64 = 1.0 / 64.0;

/// The first FRB kernel for one configuration and dish map on one GPU, holding the map,
/// weights and Gamma images on the device.
pub struct FrbBeamformer<'g> {
    gpu: &'g Gpu,
    config: FrbConfig,
    kernel: CudaFunction,
    grid: DeviceBuffer<u32>,
    weights: DeviceBuffer<u32>,
    gammas_m: DeviceBuffer<u32>,
    gammas_n: DeviceBuffer<u32>,
    /// Output samples per block (the blocks are `F` channels times time chunks of that
    /// many) and the dynamic shared memory of each.
    tbar_per_block: u32,
    shared_bytes: u32,
    threads: u32,
    /// The stream `beamform` launches on.
    stream: Stream,
}

impl<'g> FrbBeamformer<'g> {
    /// Validates `config`, the dish map (`grid[d] = (m, n)`) and the weights (complex f16
    /// `[f][pol][m][n]`, re in bits 0..16; a NaN or infinite half is `NonFinite` with the
    /// word's index), uploads them, and runs [`warm_up`](Self::warm_up) so that the kernel's
    /// one-time costs are paid here and not by the first [`beamform`](Self::beamform).
    pub fn new(
        gpu: &'g Gpu,
        config: FrbConfig,
        grid: &[(u32, u32)],
        weights: &[u32],
    ) -> Result<FrbBeamformer<'g>> {
        let beamformer = FrbBeamformer::without_warm_up(gpu, config, grid, weights)?;
        beamformer.warm_up()?;
        Ok(beamformer)
    }

    /// As [`new`](Self::new) without the warm-up launch (for measuring the first launch's
    /// cost).
    #[doc(hidden)]
    pub fn without_warm_up(
        gpu: &'g Gpu,
        config: FrbConfig,
        grid: &[(u32, u32)],
        weights: &[u32],
    ) -> Result<FrbBeamformer<'g>> {
        config.validate()?;
        config.check_grid(grid)?;
        check_weights(&config, weights)?;
        let case = config.case()?;
        let name = frb_beamform_kernel(&case, config.t_ds).ok_or(Error::MissingKernel("frb_beamform_*"))?;
        // Full CHORD with f16 sums: the even/odd kernel (its own block size, shared memory
        // and A image in place of the Gamma image).
        let eo = eo_applies(&case, config.t_ds);
        let (threads, shared_bytes) = if eo {
            (EO_THREADS, eo_shared_bytes())
        } else {
            (FRB_THREADS, frb_beamform_shared_bytes(&case))
        };
        let kernel = gpu.function(name)?;
        allow_dynamic_shared(&kernel, shared_bytes, "raising the FRB kernel's shared-memory limit")?;
        let resident = kernel
            .occupancy_max_active_blocks_per_multiprocessor(threads, shared_bytes as usize, None)
            .map_err(|source| Error::Driver { during: "querying the FRB kernel's occupancy", source })?;
        let tbar_per_block = frb_output_samples_per_block(&config, resident.max(1) * gpu.sm_count())?;
        let points: Vec<u32> = grid.iter().map(|&(m, n)| m * config.n + n).collect();
        Ok(FrbBeamformer {
            gpu,
            config,
            kernel,
            tbar_per_block,
            shared_bytes,
            grid: gpu.upload(&points)?,
            weights: gpu.upload(weights)?,
            threads,
            gammas_m: gpu.upload(&if eo { eo_image() } else { gamma_image(config.m)? })?,
            gammas_n: gpu.upload(&gamma_image(config.n)?)?,
            stream: gpu.stream().clone(),
        })
    }

    /// One small launch of this beamformer's kernel (one channel, one outer block of zero E,
    /// into scratch memory) on its stream, and a wait for it. The driver may finish setting a
    /// kernel up only at its first launch (under lazy module loading, the default since CUDA
    /// 12.2, a function can be loaded then; a launch can also grow the context's per-thread
    /// local memory), and a first `beamform` timed with events would count that as kernel
    /// time. [`new`](Self::new) calls it; later calls cost one tiny launch and a wait.
    pub fn warm_up(&self) -> Result<()> {
        let c = &self.config;
        let case = c.case()?;
        // The same entry point: T_ds up to FRB_F16_SUM_MAX_T_DS, or the first multiple of
        // the outer block above it.
        let t_ds = if c.t_ds <= FRB_F16_SUM_MAX_T_DS {
            1
        } else {
            (FRB_F16_SUM_MAX_T_DS / case.t_outer + 1) * case.t_outer
        };
        let small = FrbConfig { freqs: 1, times: t_ds.max(case.t_outer), t_ds, ..*c };
        small.validate()?;
        if frb_beamform_kernel(&case, small.t_ds) != frb_beamform_kernel(&case, c.t_ds) {
            return Err(Error::InvalidConfig(
                "the FRB warm-up launch would run another kernel (internal error)".into(),
            ));
        }
        let e = self.gpu.alloc::<u8>(small.e_len(), 0)?;
        let mut i = self.gpu.alloc::<u16>(small.output_len(), 0)?;
        self.launch_config(&small, 1, &e, &mut i, &self.stream)?;
        self.stream.synchronize().during("waiting for the FRB kernel's warm-up launch")
    }

    /// Output samples per block: [`frb_output_samples_per_block`]'s choice unless set.
    pub fn output_samples_per_block(&self) -> u32 {
        self.tbar_per_block
    }

    /// Sets the output samples per block (at least 1; more than the launch has means one
    /// chunk per channel): for tests of blocks that write several samples, and for sweeps.
    /// `InvalidConfig` where the launch would need more than [`FRB_MAX_BLOCKS`] blocks.
    pub fn set_output_samples_per_block(&mut self, samples: u32) -> Result<()> {
        if samples == 0 {
            return Err(Error::InvalidConfig("output samples per block must be positive".into()));
        }
        let samples = samples.min(self.config.out_times());
        let blocks = frb_blocks(&self.config, samples);
        if blocks > FRB_MAX_BLOCKS {
            return Err(Error::InvalidConfig(format!(
                "{samples} output samples per block would launch {blocks} blocks, past the grid's 2^31 - 1"
            )));
        }
        self.tbar_per_block = samples;
        Ok(())
    }

    pub fn config(&self) -> &FrbConfig {
        &self.config
    }

    /// The GPU this beamformer runs on.
    pub(crate) fn gpu(&self) -> &'g Gpu {
        self.gpu
    }

    /// Launches `beamform` on `stream` (the GPU's default stream until set), so that callers
    /// can order their own work with ours; [`Error::WrongDevice`] for a stream of another
    /// GPU. Streaming engines ([`FrbStream`]) use their own lanes.
    pub fn set_stream(&mut self, stream: &Stream) -> Result<()> {
        self.gpu.switch_stream(&mut self.stream, stream, "FRB beamformer stream")
    }

    /// The stream `beamform` launches on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// `I[f][tbar][p][q]` (f16 bits) from E (ci4 `[tau][f][pol][d]`). E and I may exceed
    /// 2^32 bytes and values: the kernels address their rows in 64 bits.
    pub fn beamform(&self, e: &DeviceBuffer<u8>, i: &mut DeviceBuffer<u16>) -> Result<()> {
        self.launch(e, i, &self.stream)
    }

    /// [`beamform`](Self::beamform) on `stream`.
    pub(crate) fn launch(
        &self,
        e: &DeviceBuffer<u8>,
        i: &mut DeviceBuffer<u16>,
        stream: &Stream,
    ) -> Result<()> {
        self.launch_config(&self.config, self.tbar_per_block, e, i, stream)
    }

    /// One launch of the kernel for `c`, this beamformer's configuration or one of the same
    /// case and entry point with no more channels (the warm-up).
    fn launch_config(
        &self,
        c: &FrbConfig,
        tbar_per_block: u32,
        e: &DeviceBuffer<u8>,
        i: &mut DeviceBuffer<u16>,
        stream: &Stream,
    ) -> Result<()> {
        self.gpu.check_owner(e, "FRB E")?;
        self.gpu.check_owner(i, "FRB intensity I")?;
        if e.len() != c.e_len() {
            return Err(Error::ShapeMismatch { what: "FRB E (bytes)", expected: c.e_len(), actual: e.len() });
        }
        if i.len() != c.output_len() {
            return Err(Error::ShapeMismatch {
                what: "FRB intensity I",
                expected: c.output_len(),
                actual: i.len(),
            });
        }
        let mut launch = stream.launch_builder(&self.kernel);
        launch
            .arg(e.raw())
            .arg(self.weights.raw())
            .arg(self.grid.raw())
            .arg(self.gammas_m.raw())
            .arg(self.gammas_n.raw())
            .arg(i.arg_mut())
            .arg(&c.freqs)
            .arg(&c.times)
            .arg(&c.t_ds)
            .arg(&tbar_per_block);
        // At most FRB_MAX_BLOCKS (the split's choice and `set_output_samples_per_block`
        // ensure it).
        let blocks = frb_blocks(c, tbar_per_block);
        let blocks = u32::try_from(blocks).ok().filter(|&b| b as u64 <= FRB_MAX_BLOCKS).ok_or_else(|| {
            Error::InvalidConfig(format!(
                "the FRB launch would need {blocks} blocks, past the grid's 2^31 - 1"
            ))
        })?;
        // SAFETY: matches `frb_beamform_d*_m*_n*(e, weights, grid, gammas_m, gammas_n, out,
        // freqs, times, t_ds, tbar_per_block)`; every length was checked against a validated
        // config of this beamformer's case and entry point with at most its channels (the
        // weights hold at least `freqs` channels) (T <= 2^31, so the kernels' 32-bit sample
        // counters do not wrap; E and I rows are addressed in 64 bits), the map is inside
        // the grid, `times` is a multiple of `t_ds`, `tbar_per_block >= 1` and
        // `blocks = F * ceil(out_times / tbar_per_block)`.
        unsafe { launch.launch(launch_1d(blocks, self.threads, self.shared_bytes)) }
            .map_err(|source| Error::Driver { during: "launching the FRB beamformer", source })?;
        Ok(())
    }
}

/// Enqueues the copy of `data` (exactly `buffer.len()` elements, pageable host memory) into
/// `buffer` on `stream`. The driver stages pageable memory, so the call may wait for the
/// stream's earlier work; set-up only, never the hot path.
pub(crate) fn upload_on<T: bytemuck::Pod>(
    stream: &Stream,
    buffer: &mut DeviceBuffer<T>,
    data: &[T],
) -> Result<()> {
    if data.len() != buffer.len() {
        return Err(Error::ShapeMismatch {
            what: "upload source",
            expected: buffer.len(),
            actual: data.len(),
        });
    }
    if data.is_empty() {
        return Ok(());
    }
    let bytes: &[u8] = bytemuck::cast_slice(data);
    let mut view = buffer.arg_mut().slice_mut(0..bytes.len());
    stream.memcpy_htod(bytes, &mut view).during("copying to the device")
}

/// Copies `buffer` to a new host vector on `stream` and waits for it (set-up and error paths
/// only).
pub(crate) fn download_on<T: bytemuck::Pod>(stream: &Stream, buffer: &DeviceBuffer<T>) -> Result<Vec<T>> {
    let mut out = vec![T::zeroed(); buffer.len()];
    if !out.is_empty() {
        let host: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
        let view = buffer.raw().slice(0..host.len());
        stream.memcpy_dtoh(&view, host).during("copying from the device")?;
        stream.synchronize().during("waiting for a download")?;
    }
    Ok(out)
}

/// Output samples per block of the first FRB kernel (blocks are channels times equal chunks
/// of whole output samples), for `slots` resident blocks on the GPU: chunks of at most 480
/// input samples, and at least five waves of blocks. Measured on the H200 (BENCHMARKS.md):
/// shorter blocks were faster down to 160 samples at full CHORD (4 output samples, 3072
/// blocks, 5.8 waves; 2.04 ms against 2.18 ms with 24 output samples, one wave), and flat
/// between 300 and 600 samples at HIRAX; 1920 samples per block lost 4% at the pathfinder.
/// Never more than [`FRB_MAX_BLOCKS`] blocks (F times the chunks). Errors: an invalid
/// `config`, or `slots == 0`.
pub fn frb_output_samples_per_block(config: &FrbConfig, slots: u32) -> Result<u32> {
    config.validate()?;
    if slots == 0 {
        return Err(Error::InvalidConfig("resident block slots must be positive".into()));
    }
    // Valid: T_ds >= 1, 1 <= out_times, 1 <= F <= 65535.
    let out_times = config.out_times();
    let freqs = config.freqs as u64;
    let waves = |per_block: u32| freqs * out_times.div_ceil(per_block) as u64 >= 5 * slots as u64;
    let by_samples = (480 / config.t_ds).clamp(1, out_times);
    // The grid holds at most FRB_MAX_BLOCKS / F chunks per channel (at least 32768).
    let shortest = out_times.div_ceil((FRB_MAX_BLOCKS / freqs) as u32);
    let longest = (1..=by_samples).rev().find(|&k| waves(k)).unwrap_or(1).max(shortest);
    // Equal chunks: the same number of chunks, as short as they can be.
    Ok(out_times.div_ceil(out_times.div_ceil(longest)))
}

/// Blocks of a first-kernel launch of `config` with `tbar_per_block` output samples per
/// block, `F ceil(out_times / tbar_per_block)` (exact in 64 bits).
fn frb_blocks(config: &FrbConfig, tbar_per_block: u32) -> u64 {
    config.freqs as u64 * config.out_times().div_ceil(tbar_per_block.max(1)) as u64
}

/// Checks the FRB weights: one complex f16 word per `(f, pol, m, n)`, each half finite.
fn check_weights(config: &FrbConfig, weights: &[u32]) -> Result<()> {
    if weights.len() != config.weights_len() {
        return Err(Error::ShapeMismatch {
            what: "FRB weights",
            expected: config.weights_len(),
            actual: weights.len(),
        });
    }
    match first_non_finite_c16(weights) {
        Some(index) => Err(Error::NonFinite { what: "FRB weights", index }),
        None => Ok(()),
    }
}

/// The CPU reference of eqs. 50-51 in f64 (a direct, separable DFT of the gridded, weighted
/// field: [`padded_dft`] along n, then along m), `I[f][tbar][p][q]`. Weights with a NaN or
/// infinite half are `NonFinite` (as in [`FrbBeamformer::new`]); for every other input the
/// result is finite.
pub fn frb_intensity_reference(
    config: &FrbConfig,
    e: &[u8],
    grid: &[(u32, u32)],
    weights: &[u32],
) -> Result<Vec<f64>> {
    check_reference_args(config, e, grid, weights)?;
    let c = config;
    let w = unpack_c16(weights);
    let k = 4 * (c.m * c.n) as usize;
    let mut out = vec![0.0; c.output_len()];
    for (row, sample) in out.chunks_mut(k).enumerate() {
        let (f, tbar) = ((row / c.out_times() as usize) as u32, (row % c.out_times() as usize) as u32);
        accumulate_sample(c, e, grid, &w, f, tbar, sample);
    }
    Ok(out)
}

/// One output sample of [`frb_intensity_reference`], `I[f][tbar][p][q]` for every `(p, q)`
/// (`2M x 2N` values, the same sums in the same order): for checking chosen samples of a
/// launch whose whole reference would take too long (E of gigabytes). `f` and `tbar` outside
/// the launch are `InvalidConfig`.
pub fn frb_intensity_reference_sample(
    config: &FrbConfig,
    e: &[u8],
    grid: &[(u32, u32)],
    weights: &[u32],
    f: u32,
    tbar: u32,
) -> Result<Vec<f64>> {
    check_reference_args(config, e, grid, weights)?;
    if f >= config.freqs || tbar >= config.out_times() {
        return Err(Error::InvalidConfig(format!(
            "output sample (f, tbar) = ({f}, {tbar}) is outside the launch's {} x {}",
            config.freqs,
            config.out_times()
        )));
    }
    let mut out = vec![0.0; 4 * (config.m * config.n) as usize];
    accumulate_sample(config, e, grid, &unpack_c16(weights), f, tbar, &mut out);
    Ok(out)
}

/// The checks of the CPU references: a valid configuration and map, E and finite W of its
/// sizes.
fn check_reference_args(config: &FrbConfig, e: &[u8], grid: &[(u32, u32)], weights: &[u32]) -> Result<()> {
    config.validate()?;
    config.check_grid(grid)?;
    if e.len() != config.e_len() {
        return Err(Error::ShapeMismatch {
            what: "FRB E (bytes)",
            expected: config.e_len(),
            actual: e.len(),
        });
    }
    check_weights(config, weights)
}

/// Adds output sample `(f, tbar)` (`[p][q]`, `2M x 2N`) of a checked configuration to `out`:
/// its T_ds time samples in order, each polarisation's `|Et|^2`.
fn accumulate_sample(
    c: &FrbConfig,
    e: &[u8],
    grid: &[(u32, u32)],
    w: &[C64],
    f: u32,
    tbar: u32,
    out: &mut [f64],
) {
    let (m_len, n_len) = (c.m as usize, c.n as usize);
    let mut field = vec![(0.0, 0.0); m_len * n_len];
    for tau in tbar * c.t_ds..(tbar + 1) * c.t_ds {
        for pol in 0..FRB_POLS {
            field.iter_mut().for_each(|x| *x = (0.0, 0.0));
            for (d, &(m, n)) in grid.iter().enumerate() {
                let (re, im) = radio_kernels_gpu::packing::unpack_ci4(e[c.e_index(tau, f, pol, d as u32)]);
                field[m as usize * n_len + n as usize] =
                    cmul(w[c.weight_index(f, pol, m, n)], (re as f64, im as f64));
            }
            // Eq. 56 along n, then eq. 57 along m.
            let g: Vec<Vec<C64>> = field.chunks(n_len).map(padded_dft).collect();
            for q in 0..2 * n_len {
                let column: Vec<C64> = g.iter().map(|row| row[q]).collect();
                for (p, value) in padded_dft(&column).into_iter().enumerate() {
                    out[p * 2 * n_len + q] += value.0 * value.0 + value.1 * value.1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use radio_kernels_gpu::packing::pack_f16x2;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn random_input(rng: &mut StdRng, len: usize) -> Vec<C64> {
        (0..len).map(|_| (rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0))).collect()
    }

    /// Eqs. 28-30 with the zero padding of eqs. 23-24 reproduce the padded DFT (eq. 18).
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

    fn unit_weights(config: &FrbConfig) -> Vec<u32> {
        vec![pack_f16x2(f16::ONE.to_bits(), 0); config.weights_len()]
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
            let mut e = vec![0u8; config.e_len()];
            for tau in 0..config.times {
                for pol in 0..FRB_POLS {
                    for (d, &(m, n)) in grid.iter().enumerate() {
                        let phase =
                            -PI * (m * p0) as f64 / config.m as f64 - PI * (n * q0) as f64 / config.n as f64;
                        let (re, im) = ((7.0 * phase.cos()).round() as i8, (7.0 * phase.sin()).round() as i8);
                        e[config.e_index(tau, 0, pol, d as u32)] =
                            radio_kernels_gpu::packing::pack_ci4(re, im);
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
        let e: Vec<u8> = (0..config.e_len()).map(|_| rng.random()).collect();
        let weights: Vec<u32> = (0..config.weights_len())
            .map(|_| {
                let mut h = || f16::from_f64(rng.random_range(-1.0..1.0)).to_bits();
                pack_f16x2(h(), h())
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
                        radio_kernels_gpu::packing::unpack_ci4(e[config.e_index(tau, f, pol, d as u32)]);
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

    /// The split at seed Table 3's configurations on 132 SMs: 4 output samples per block at
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
            let config =
                FrbConfig { dishes: c.dishes, m: c.m, n: c.n, freqs: 1, times: c.t_outer * 7, t_ds: 7 };
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
        let e = vec![0u8; ok.e_len()];
        assert!(frb_intensity_reference(&ok, &e[1..], &grid, &unit_weights(&ok)).is_err());
        assert!(frb_intensity_reference(&ok, &e, &grid, &unit_weights(&ok)[1..]).is_err());
    }
}

pub mod factorized;
pub mod nufft;
pub mod quantize;
pub mod resample;
pub mod streaming;

pub use streaming::{FrbOutput, FrbResampling, FrbStream};
