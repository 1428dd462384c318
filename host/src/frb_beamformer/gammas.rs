//! The short FFT's matrices (the Gamma matrices of eqs. 28-30 of Smith, CHORD FRB beamformer design
//! note (2022) in f64, their f16 register images, the direct DFT's image) and its CPU references:
//! the padded DFT, the three-factor form and the emulation of the warp algorithm.
use super::*;

/// A complex number (re, im) in f64.
pub type C64 = (f64, f64);

pub(super) fn cmul(a: C64, b: C64) -> C64 {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

pub(super) fn cis(angle: f64) -> C64 {
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

pub(super) fn real_entry(z: C64, entry: RealEntry) -> f64 {
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
pub(super) fn check_sparse_args(what: &'static str, values: &[f64], expected: usize, f: u32) -> Result<()> {
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

pub use radio_kernels_gpu::frb_beamformer::{fft_kernel, FftKernel, FftMethod};

/// The methods that exist for N, the default ([`ShortFft::new`]) first.
pub fn fft_methods(n: u32) -> Vec<FftMethod> {
    let mut methods = vec![default_fft_method(n)];
    let other = if methods[0] == FftMethod::Direct { FftMethod::ThreeFactor } else { FftMethod::Direct };
    if other == FftMethod::ThreeFactor || has_direct_dft(n) {
        methods.push(other);
    }
    methods
}

/// The faster method for N: the direct DFT where N has one (N = 20: no twiddle step), the
/// three-factor FFT elsewhere.
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
pub(super) fn matmul(a: &[f64], b: &[f64], (rows, inner, cols): (usize, usize, usize)) -> Vec<f64> {
    (0..rows * cols)
        .map(|rc| (0..inner).map(|j| a[(rc / cols) * inner + j] * b[j * cols + rc % cols]).sum())
        .collect()
}

pub(super) fn round_f16(x: f64) -> f64 {
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

/// Complex f16 values as f64 pairs.
pub fn unpack_c16(values: &[Complex<f16>]) -> Vec<C64> {
    values.iter().map(|w| (w.re.to_f64(), w.im.to_f64())).collect()
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
