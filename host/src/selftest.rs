//! Self-checks of the foundation: every tensor-core wrapper against a CPU product through
//! the register-assignment tables, and the intrinsics (shuffles, prmt, lop3, shared memory,
//! 16-byte accesses, f16 conversion, the device bank-conflict check).
//!
//! The GPU tests (`tests/gpu_foundation.rs`) and the CLI (`radio-kernels selftest`) run the
//! same checks. Every check draws fresh random inputs (including the edge values -128, 127,
//! i32 extremes), poisons its outputs, and compares everything the kernel wrote.
//!
//! Tolerances: int8 products are exact. f16 results must lie within
//! `2^-10 * (sum_j |a_ij b_jk| + |c_ik|)` of the f64 product (one f16 rounding of the output
//! is at most 2^-11 relative; the rest covers the tensor core's internal rounding), f32
//! accumulation within `2^-16` of the same scale (Hopper truncates products' alignment in
//! fp32 accumulate, so a few bits below f32 epsilon are lost).
use crate::error::{DriverContext, Result};
use crate::fragment::{pack, unpack};
use crate::runtime::{allow_dynamic_shared, launch_1d, DeviceBuffer, Gpu, PushKernelArg};
use half::f16;
use radio_kernels_gpu::bank;
use radio_kernels_gpu::layout::{self, Fragment};
use radio_kernels_gpu::modules::{tools, KernelSpec};
use radio_kernels_gpu::packing;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The outcome of one check.
#[derive(Debug, Clone)]
pub struct Check {
    /// What was checked, e.g. "m16n8k32 s8 satfinite".
    pub name: String,
    /// True when something was compared and every compared value matched (within the
    /// module's tolerances).
    pub passed: bool,
    /// What was compared, and the first mismatch or the error measure.
    pub detail: String,
}

impl Check {
    fn new(name: impl Into<String>, failures: Vec<String>, compared: usize, measure: String) -> Check {
        let passed = failures.is_empty() && compared > 0;
        let detail = match failures.first() {
            Some(first) => format!("{} of {compared} values wrong; first: {first}", failures.len()),
            None if compared == 0 => "nothing compared".into(),
            None => format!("{compared} values match{measure}"),
        };
        Check { name: name.into(), passed, detail }
    }
}

const POISON: u8 = 0xA5;

/// Runs one warp per case of `kernel` on `[case][lane][reg]` images and returns the images
/// of D (`d_regs` registers per lane).
fn run_mma(
    gpu: &Gpu,
    kernel: &'static KernelSpec,
    inputs: &[&[u32]],
    extra: Option<u32>,
    cases: usize,
    d_regs: usize,
) -> Result<Vec<u32>> {
    let function = gpu.kernel(kernel)?;
    let buffers = inputs.iter().map(|i| gpu.upload(i)).collect::<Result<Vec<DeviceBuffer<u32>>>>()?;
    let mut d = gpu.alloc::<u32>(cases * 32 * d_regs, POISON)?;
    let mut launch = gpu.stream().launch_builder(&function);
    for buffer in &buffers {
        launch.arg(buffer.raw());
    }
    if let Some(value) = &extra {
        launch.arg(value);
    }
    launch.arg(d.arg_mut());
    // SAFETY: the argument list matches the kernel's signature (selftest.rs in kernels-gpu),
    // and every buffer holds `cases` images of the sizes the kernel reads and writes.
    unsafe { launch.launch(launch_1d(cases as u32, 32, 0)) }.during("launching a self-test kernel")?;
    gpu.synchronize()?;
    d.download()
}

/// Concatenated images of one fragment over all cases.
fn images(fragment: &Fragment, matrices: &[Vec<u32>]) -> Vec<u32> {
    matrices.iter().flat_map(|m| pack(fragment, m)).collect()
}

fn split(image: &[u32], fragment: &Fragment) -> Vec<Vec<u32>> {
    image.chunks(32 * fragment.registers() as usize).map(|chunk| unpack(fragment, chunk)).collect()
}

/// int8 values with the edges (-128, -127, 127, 0) drawn often.
fn random_i8(rng: &mut StdRng) -> i8 {
    match rng.random_range(0..8) {
        0 => -128,
        1 => 127,
        2 => -127,
        _ => rng.random(),
    }
}

/// An int8 MMA shape with its tables and kernels.
#[derive(Clone, Copy, Debug)]
pub struct Int8Shape {
    /// The shape as PTX names it, e.g. "m16n8k32 s8".
    pub name: &'static str,
    /// Register assignment of A (`m x k`, int8, four per register).
    pub a: &'static Fragment,
    /// Register assignment of B (`k x n`, int8, four per register).
    pub b: &'static Fragment,
    /// Register assignment of C and D (`m x n`, i32, one per register).
    pub c: &'static Fragment,
    /// The self-test kernel of the wrapping MMA (i32 sums wrap).
    pub kernel: &'static KernelSpec,
    /// The self-test kernel of the `.satfinite` MMA (i32 sums clamp to the i32 range).
    pub kernel_satfinite: &'static KernelSpec,
}

/// `mma.sync.m8n8k16` with int8 A and B and i32 accumulators: an 8x16 by 16x8 product.
pub const M8N8K16_S8: Int8Shape = Int8Shape {
    name: "m8n8k16 s8",
    a: &layout::M8N8K16_S8_A,
    b: &layout::M8N8K16_S8_B,
    c: &layout::M8N8K16_S32_C,
    kernel: &tools::SELFTEST_MMA_M8N8K16_S8,
    kernel_satfinite: &tools::SELFTEST_MMA_M8N8K16_S8_SATFINITE,
};

/// `mma.sync.m16n8k32` with int8 A and B and i32 accumulators: a 16x32 by 32x8 product.
pub const M16N8K32_S8: Int8Shape = Int8Shape {
    name: "m16n8k32 s8",
    a: &layout::M16N8K32_S8_A,
    b: &layout::M16N8K32_S8_B,
    c: &layout::M16N8K32_S32_C,
    kernel: &tools::SELFTEST_MMA_M16N8K32_S8,
    kernel_satfinite: &tools::SELFTEST_MMA_M16N8K32_S8_SATFINITE,
};

/// `D = A B + C` on int8 tensor cores, bit-exact. Plain: C keeps the sum inside i32.
/// Satfinite: C near the i32 limits so that results saturate, compared with the clamped
/// exact sum.
pub fn check_int8_mma(
    gpu: &Gpu,
    shape: Int8Shape,
    satfinite: bool,
    cases: usize,
    seed: u64,
) -> Result<Check> {
    let mut rng = StdRng::seed_from_u64(seed);
    let (m, k, n) = (shape.a.rows() as usize, shape.a.cols() as usize, shape.b.cols() as usize);
    let mut a_all = Vec::new();
    let mut b_all = Vec::new();
    let mut c_all = Vec::new();
    for _ in 0..cases {
        a_all.push((0..m * k).map(|_| random_i8(&mut rng) as u8 as u32).collect::<Vec<_>>());
        b_all.push((0..k * n).map(|_| random_i8(&mut rng) as u8 as u32).collect::<Vec<_>>());
        c_all.push(
            (0..m * n)
                .map(|_| {
                    let c: i32 = if satfinite {
                        match rng.random_range(0..3) {
                            0 => i32::MAX - rng.random_range(0..1 << 20),
                            1 => i32::MIN + rng.random_range(0..1 << 20),
                            _ => rng.random(),
                        }
                    } else {
                        rng.random_range(-(1 << 30)..(1 << 30))
                    };
                    c as u32
                })
                .collect::<Vec<_>>(),
        );
    }
    let kernel = if satfinite { shape.kernel_satfinite } else { shape.kernel };
    let d_image = run_mma(
        gpu,
        kernel,
        &[&images(shape.a, &a_all), &images(shape.b, &b_all), &images(shape.c, &c_all)],
        None,
        cases,
        shape.c.registers() as usize,
    )?;
    let mut failures = Vec::new();
    let mut compared = 0;
    let mut saturated = 0;
    for (case, d) in split(&d_image, shape.c).iter().enumerate() {
        for i in 0..m {
            for j in 0..n {
                let mut exact = c_all[case][i * n + j] as i32 as i64;
                for l in 0..k {
                    exact += (a_all[case][i * k + l] as u8 as i8 as i64)
                        * (b_all[case][l * n + j] as u8 as i8 as i64);
                }
                let expected = exact.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
                saturated += (expected as i64 != exact) as usize;
                let got = d[i * n + j] as i32;
                compared += 1;
                if got != expected {
                    failures.push(format!("case {case} D[{i}][{j}] = {got}, expected {expected}"));
                }
            }
        }
    }
    let name = format!("{} {}", shape.name, if satfinite { "satfinite" } else { "wrapping" });
    let measure = if satfinite { format!(" exactly ({saturated} saturated)") } else { " exactly".into() };
    Ok(Check::new(name, failures, compared, measure))
}

/// An f16 MMA shape with its tables and kernel.
#[derive(Clone, Copy, Debug)]
pub struct F16Shape {
    /// The shape and accumulator type, e.g. "m16n8k16 f16 (f32 accumulate)".
    pub name: &'static str,
    /// Register assignment of A (`m x k`, f16, two per register).
    pub a: &'static Fragment,
    /// Register assignment of B (`k x n`, f16, two per register).
    pub b: &'static Fragment,
    /// Register assignment of C and D (`m x n`: f16 two per register, or f32 one per
    /// register).
    pub c: &'static Fragment,
    /// The self-test kernel that runs the MMA.
    pub kernel: &'static KernelSpec,
}

/// `mma.sync.m16n8k8` with f16 A, B and accumulators: a 16x8 by 8x8 product.
pub const M16N8K8_F16: F16Shape = F16Shape {
    name: "m16n8k8 f16",
    a: &layout::M16N8K8_F16_A,
    b: &layout::M16N8K8_F16_B,
    c: &layout::M16N8_F16_C,
    kernel: &tools::SELFTEST_MMA_M16N8K8_F16,
};

/// `mma.sync.m16n8k16` with f16 A, B and accumulators: a 16x16 by 16x8 product.
pub const M16N8K16_F16: F16Shape = F16Shape {
    name: "m16n8k16 f16 (f16 accumulate)",
    a: &layout::M16N8K16_F16_A,
    b: &layout::M16N8K16_F16_B,
    c: &layout::M16N8_F16_C,
    kernel: &tools::SELFTEST_MMA_M16N8K16_F16,
};

/// `mma.sync.m16n8k16` with f16 A and B and f32 accumulators: a 16x16 by 16x8 product.
pub const M16N8K16_F16_F32: F16Shape = F16Shape {
    name: "m16n8k16 f16 (f32 accumulate)",
    a: &layout::M16N8K16_F16_A,
    b: &layout::M16N8K16_F16_B,
    c: &layout::M16N8_F32_C,
    kernel: &tools::SELFTEST_MMA_M16N8K16_F16_F32,
};

fn random_f16_bits(rng: &mut StdRng) -> u32 {
    f16::from_f32(rng.random_range(-1.0f32..1.0)).to_bits() as u32
}

/// Reads an element of an f16 or f32 fragment as f64.
fn element_value(fragment: &Fragment, bits: u32) -> f64 {
    if fragment.element_bits == 16 {
        f16::from_bits(bits as u16).to_f64()
    } else {
        f32::from_bits(bits) as f64
    }
}

/// Every case's matrix of raw element bits as f64 values.
fn values(all: &[Vec<u32>], fragment: &Fragment) -> Vec<Vec<f64>> {
    all.iter().map(|v| v.iter().map(|&x| element_value(fragment, x)).collect()).collect()
}

fn random_accumulator(fragment: &Fragment, rng: &mut StdRng) -> u32 {
    if fragment.element_bits == 16 {
        random_f16_bits(rng)
    } else {
        rng.random_range(-1.0f32..1.0).to_bits()
    }
}

/// Compares D with the f64 product element by element (bounds in the module comment) and
/// reports the relative L2 error.
fn compare_float(
    d_all: &[Vec<u32>],
    a_all: &[Vec<f64>],
    b_all: &[Vec<f64>],
    c_all: &[Vec<f64>],
    (m, k, n): (usize, usize, usize),
    c_fragment: &Fragment,
) -> (Vec<String>, usize, String) {
    let relative = if c_fragment.element_bits == 16 { 2f64.powi(-10) } else { 2f64.powi(-16) };
    let mut failures = Vec::new();
    let (mut err2, mut ref2, mut compared) = (0.0, 0.0, 0);
    for (case, d) in d_all.iter().enumerate() {
        for i in 0..m {
            for j in 0..n {
                let mut exact = c_all[case][i * n + j];
                let mut scale = exact.abs();
                for l in 0..k {
                    let p = a_all[case][i * k + l] * b_all[case][l * n + j];
                    exact += p;
                    scale += p.abs();
                }
                let got = element_value(c_fragment, d[i * n + j]);
                let error = (got - exact).abs();
                err2 += error * error;
                ref2 += exact * exact;
                compared += 1;
                if error.is_nan() || error > relative * scale + 1e-30 {
                    failures.push(format!(
                        "case {case} D[{i}][{j}] = {got}, expected {exact} (bound {:.2e})",
                        relative * scale
                    ));
                }
            }
        }
    }
    let measure = format!(" (relative L2 error {:.2e})", (err2 / ref2).sqrt());
    (failures, compared, measure)
}

/// `D = A B + C` on f16 tensor cores against the f64 product.
pub fn check_f16_mma(gpu: &Gpu, shape: F16Shape, cases: usize, seed: u64) -> Result<Check> {
    let mut rng = StdRng::seed_from_u64(seed);
    let (m, k, n) = (shape.a.rows() as usize, shape.a.cols() as usize, shape.b.cols() as usize);
    let draw = |rng: &mut StdRng, len: usize| (0..len).map(|_| random_f16_bits(rng)).collect::<Vec<_>>();
    let a_bits: Vec<_> = (0..cases).map(|_| draw(&mut rng, m * k)).collect();
    let b_bits: Vec<_> = (0..cases).map(|_| draw(&mut rng, k * n)).collect();
    let c_bits: Vec<Vec<u32>> =
        (0..cases).map(|_| (0..m * n).map(|_| random_accumulator(shape.c, &mut rng)).collect()).collect();
    let d_image = run_mma(
        gpu,
        shape.kernel,
        &[&images(shape.a, &a_bits), &images(shape.b, &b_bits), &images(shape.c, &c_bits)],
        None,
        cases,
        shape.c.registers() as usize,
    )?;
    let (failures, compared, measure) = compare_float(
        &split(&d_image, shape.c),
        &values(&a_bits, shape.a),
        &values(&b_bits, shape.b),
        &values(&c_bits, shape.c),
        (m, k, n),
        shape.c,
    );
    Ok(Check::new(shape.name, failures, compared, measure))
}

/// Which PTX spelling of the sparse MMA to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SparseForm {
    /// `mma.sp::ordered_metadata` (PTX ISA 8.5).
    OrderedMetadata,
    /// `mma.sp` (PTX ISA 7.1).
    Unordered,
}

/// A random 2:4-sparse 16 x 16 A: returns (dense A bits, compressed Asp bits, E[i][j'][J]).
fn random_sparse_a(rng: &mut StdRng) -> (Vec<u32>, Vec<u32>, Vec<[u32; 2]>) {
    const PAIRS: [[u32; 2]; 6] = [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]];
    let mut dense = vec![0u32; 256];
    let mut compressed = vec![0u32; 128];
    let mut meta = vec![[0u32; 2]; 64];
    for i in 0..16 {
        for group in 0..4 {
            let pair = PAIRS[rng.random_range(0..6)];
            meta[i * 4 + group] = pair;
            for (half, &e) in pair.iter().enumerate() {
                let value = random_f16_bits(rng);
                dense[i * 16 + 4 * group + e as usize] = value;
                compressed[i * 8 + 2 * group + half] = value; // c = 2 j' + J
            }
        }
    }
    (dense, compressed, meta)
}

/// Sparse m16n8k16 f16 against the dense product of eq. 163 of Smith, CHORD FRB beamformer design
/// note (2022), with random 2:4 patterns, for every selector F = 0..4 (metadata replicated across
/// each quad).
pub fn check_sparse_mma(gpu: &Gpu, form: SparseForm, cases: usize, seed: u64) -> Result<Check> {
    let mut rng = StdRng::seed_from_u64(seed);
    let kernel = match form {
        SparseForm::OrderedMetadata => &tools::SELFTEST_MMA_SP_M16N8K16_F16,
        SparseForm::Unordered => &tools::SELFTEST_MMA_SP_UNORDERED_M16N8K16_F16,
    };
    let (asp_frag, b_frag, c_frag) =
        (&layout::M16N8K16_SPARSE_F16_A, &layout::M16N8K16_F16_B, &layout::M16N8_F16_C);
    let (mut dense, mut compressed, mut metadata, mut b, mut c) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..cases {
        let (a_dense, a_compressed, meta) = random_sparse_a(&mut rng);
        dense.push(a_dense);
        compressed.push(a_compressed);
        metadata.push(
            (0..32)
                .map(|lane| layout::sparse_metadata(lane, |i, g, h| meta[(i * 4 + g) as usize][h as usize]))
                .collect::<Vec<_>>(),
        );
        b.push((0..128).map(|_| random_f16_bits(&mut rng)).collect::<Vec<_>>());
        c.push((0..128).map(|_| random_f16_bits(&mut rng)).collect::<Vec<_>>());
    }
    let metadata: Vec<u32> = metadata.concat();
    let mut failures = Vec::new();
    let mut compared = 0;
    let mut measure = String::new();
    for selector in 0..4u32 {
        let d_image = run_mma(
            gpu,
            kernel,
            &[&images(asp_frag, &compressed), &images(b_frag, &b), &images(c_frag, &c), &metadata],
            Some(selector),
            cases,
            2,
        )?;
        let (fail, count, m) = compare_float(
            &split(&d_image, c_frag),
            &values(&dense, &layout::M16N8K16_F16_A),
            &values(&b, b_frag),
            &values(&c, c_frag),
            (16, 16, 8),
            c_frag,
        );
        failures.extend(fail.into_iter().map(|s| format!("F={selector}: {s}")));
        compared += count;
        measure = m;
    }
    let name = match form {
        SparseForm::OrderedMetadata => "sparse m16n8k16 f16 (mma.sp::ordered_metadata)",
        SparseForm::Unordered => "sparse m16n8k16 f16 (mma.sp)",
    };
    Ok(Check::new(name, failures, compared, measure))
}

/// The FRB note's App. C.3 special case: A = A' delta(i_n, j_1) with the universal metadata
/// generated on the device (eq. 173) and selector F = n, for n = 0..4.
pub fn check_sparse_universal(gpu: &Gpu, cases: usize, seed: u64) -> Result<Check> {
    let mut rng = StdRng::seed_from_u64(seed);
    let (asp_frag, b_frag, c_frag) =
        (&layout::M16N8K16_SPARSE_F16_A, &layout::M16N8K16_F16_B, &layout::M16N8_F16_C);
    let mut failures = Vec::new();
    let mut compared = 0;
    let mut measure = String::new();
    for n in 0..4u32 {
        let mut dense_all = Vec::new();
        let mut asp_all = Vec::new();
        let mut b_all = Vec::new();
        let mut c_all = Vec::new();
        for _ in 0..cases {
            // A'[i][j3 j2 j0] (8 columns), A[i][j] = A'[i][j3 j2 j0] if j1 == i_n.
            let reduced: Vec<u32> = (0..128).map(|_| random_f16_bits(&mut rng)).collect();
            let mut dense = vec![0u32; 256];
            let mut asp = vec![0u32; 128];
            for i in 0..16u32 {
                let i_n = (i >> n) & 1;
                for j in 0..16u32 {
                    if (j >> 1) & 1 == i_n {
                        let col = ((j >> 2) << 1) | (j & 1);
                        dense[(i * 16 + j) as usize] = reduced[(i * 8 + col) as usize];
                    }
                }
                // Eq. 169: Asp[i][j'][J] = A'[i][j'1 j'0 J].
                for c in 0..8u32 {
                    asp[(i * 8 + c) as usize] = reduced[(i * 8 + c) as usize];
                }
            }
            dense_all.push(dense);
            asp_all.push(asp);
            b_all.push((0..128).map(|_| random_f16_bits(&mut rng)).collect::<Vec<_>>());
            c_all.push((0..128).map(|_| random_f16_bits(&mut rng)).collect::<Vec<_>>());
        }
        let d_image = run_mma(
            gpu,
            &tools::SELFTEST_MMA_SP_UNIVERSAL_F16,
            &[&images(asp_frag, &asp_all), &images(b_frag, &b_all), &images(c_frag, &c_all)],
            Some(n),
            cases,
            2,
        )?;
        let (fail, count, m) = compare_float(
            &split(&d_image, c_frag),
            &values(&dense_all, &layout::M16N8K16_F16_A),
            &values(&b_all, b_frag),
            &values(&c_all, c_frag),
            (16, 16, 8),
            c_frag,
        );
        failures.extend(fail.into_iter().map(|s| format!("n={n}: {s}")));
        compared += count;
        measure = m;
    }
    Ok(Check::new("sparse m16n8k16 f16, universal metadata (eqs. 168-173)", failures, compared, measure))
}

/// Warp shuffles (xor for every lane bit, idx with arbitrary sources incl. >= 32, down),
/// the warp transpose of App. B.3, and match.any.
pub fn check_shuffles(gpu: &Gpu, seed: u64) -> Result<Check> {
    /// Output rows per warp of `selftest_shuffles` (`SHUFFLE_OUTPUTS` in kernels-gpu).
    const ROWS: usize = 10;
    let mut rng = StdRng::seed_from_u64(seed);
    let cases = 10usize;
    let values: Vec<u32> = (0..cases * 32).map(|_| rng.random()).collect();
    let sources: Vec<u32> = (0..cases * 32).map(|_| rng.random_range(0..64)).collect();
    let function = gpu.kernel(&tools::SELFTEST_SHUFFLES)?;
    let (v, s) = (gpu.upload(&values)?, gpu.upload(&sources)?);
    let mut out = gpu.alloc::<u32>(cases * ROWS * 32, POISON)?;
    let mut launch = gpu.stream().launch_builder(&function);
    launch.arg(v.raw()).arg(s.raw()).arg(out.arg_mut());
    // SAFETY: matches `selftest_shuffles(values, sources, out)` with `cases` warps.
    unsafe { launch.launch(launch_1d(cases as u32, 32, 0)) }.during("launching selftest_shuffles")?;
    let out = out.download()?;
    let mut failures = Vec::new();
    let mut compared = 0;
    for case in 0..cases {
        let val = |lane: usize| values[case * 32 + lane];
        let bit = 1usize << (case % 5);
        for lane in 0..32 {
            let mut expected = [0u32; ROWS];
            for (k, e) in expected.iter_mut().enumerate().take(5) {
                *e = val(lane ^ (1 << k));
            }
            expected[5] = val(sources[case * 32 + lane] as usize % 32);
            expected[6] = if lane + 3 < 32 { val(lane + 3) } else { val(lane) };
            // Warp transpose of (r0, r1) = (v, !v) over thread bit `bit`: the lower lane of
            // each pair receives the upper lane's r0 into r1, the upper lane the lower
            // lane's r1 into r0 (App. B.3).
            let upper = lane & bit != 0;
            let partner = lane ^ bit;
            expected[7] = if upper { !val(partner) } else { val(lane) };
            expected[8] = if upper { !val(lane) } else { val(partner) };
            expected[9] = (0..32).filter(|&l| val(l) & 3 == val(lane) & 3).fold(0, |m, l| m | 1 << l);
            for (row, e) in expected.iter().enumerate() {
                let got = out[(case * ROWS + row) * 32 + lane];
                compared += 1;
                if got != *e {
                    failures.push(format!("case {case} row {row} lane {lane}: {got:#x}, expected {e:#x}"));
                }
            }
        }
    }
    Ok(Check::new("warp shuffles, transpose, match.any", failures, compared, String::new()))
}

/// prmt and lop3 against the host models in `packing`.
pub fn check_prmt_lop3(gpu: &Gpu, seed: u64) -> Result<Check> {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = 4096usize;
    let a: Vec<u32> = (0..n).map(|_| rng.random()).collect();
    let b: Vec<u32> = (0..n).map(|_| rng.random()).collect();
    // Selectors: random nibbles (including sign-replicate mode) and random words for lop3.
    let s: Vec<u32> = (0..n).map(|_| rng.random::<u32>() & 0xffff).collect();
    let function = gpu.kernel(&tools::SELFTEST_PRMT_LOP3)?;
    let (da, db, ds) = (gpu.upload(&a)?, gpu.upload(&b)?, gpu.upload(&s)?);
    let mut out = gpu.alloc::<u32>(4 * n, POISON)?;
    let mut launch = gpu.stream().launch_builder(&function);
    let count = n as u32;
    launch.arg(da.raw()).arg(db.raw()).arg(ds.raw()).arg(out.arg_mut()).arg(&count);
    // SAFETY: matches `selftest_prmt_lop3(a, b, s, out, n)`.
    unsafe { launch.launch(launch_1d(count.div_ceil(256), 256, 0)) }
        .during("launching selftest_prmt_lop3")?;
    let out = out.download()?;
    let mut failures = Vec::new();
    for i in 0..n {
        let expected = [
            packing::byte_perm(a[i], b[i], s[i]),
            packing::lop3(a[i], b[i], s[i], 0x96),
            packing::lop3(a[i], b[i], s[i], 0xe8),
            packing::lop3(a[i], b[i], s[i], 0xea),
        ];
        for (k, e) in expected.iter().enumerate() {
            if out[4 * i + k] != *e {
                failures.push(format!("element {i} op {k}: {:#x}, expected {e:#x}", out[4 * i + k]));
            }
        }
    }
    Ok(Check::new("prmt (byte_perm) and lop3", failures, 4 * n, String::new()))
}

/// Static and dynamic shared memory (4- and 16-byte, 32-bit addresses) and 16-byte global
/// loads and stores.
pub fn check_shared_and_global(gpu: &Gpu, seed: u64) -> Result<Check> {
    let mut rng = StdRng::seed_from_u64(seed);
    let input: Vec<u32> = (0..1024).map(|_| rng.random()).collect();
    let function = gpu.kernel(&tools::SELFTEST_SHARED)?;
    let din = gpu.upload(&input)?;
    let mut words = gpu.alloc::<u32>(1024, POISON)?;
    let mut vec4 = gpu.alloc::<u32>(1024, POISON)?;
    let mut info = gpu.alloc::<u32>(2, POISON)?;
    let dynamic_bytes = 4096u32;
    let mut launch = gpu.stream().launch_builder(&function);
    launch.arg(din.raw()).arg(words.arg_mut()).arg(vec4.arg_mut()).arg(info.arg_mut());
    // SAFETY: matches `selftest_shared(input, out_words, out_vec, out_info)`: one block of
    // 256 threads, 4 KiB of dynamic shared memory.
    unsafe { launch.launch(launch_1d(1, 256, dynamic_bytes)) }.during("launching selftest_shared")?;
    let (words, vec4, info) = (words.download()?, vec4.download()?, info.download()?);
    let mut failures = Vec::new();
    for w in 0..1024 {
        let expected = input[(w * 5 + 3) % 1024];
        if words[w] != expected {
            failures.push(format!("static smem word {w}: {:#x}, expected {expected:#x}", words[w]));
        }
        let expected = input[(w + 16) % 1024];
        if vec4[w] != expected {
            failures.push(format!("dynamic smem / v4 word {w}: {:#x}, expected {expected:#x}", vec4[w]));
        }
    }
    let total = 4096 + dynamic_bytes;
    if info[0] < total {
        failures.push(format!("%total_smem_size = {}, expected at least {total}", info[0]));
    }
    if info[1] != input[3] {
        failures.push(format!("ld.global.v4 word 3: {:#x}, expected {:#x}", info[1], input[3]));
    }
    Ok(Check::new("shared memory and 16-byte global access", failures, 2050, String::new()))
}

/// Hopper's `wgmma` (sm_90a module) through the 128-byte-swizzled K-major shared-memory
/// layout and descriptors of `kernels-gpu/src/wgmma.rs`: `D[64][256] = A[64][K] B[256][K]^T`
/// with K = 128 f16 (tolerance as the f32-accumulate mma.sync check) or K = 256 s8 (exact),
/// each operand as two 128-byte K tiles, the first op with `scale-d` false over a poisoned
/// accumulator. `None` where the device has no sm_90a module.
pub fn check_wgmma(gpu: &Gpu, int8: bool, seed: u64) -> Result<Option<Check>> {
    if !gpu.wgmma_enabled() {
        return Ok(None);
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let (kernel, k) = if int8 {
        (&tools::SELFTEST_WGMMA_M64N256_S8, 256)
    } else {
        (&tools::SELFTEST_WGMMA_M64N256_F16, 128)
    };
    let function = gpu.kernel(kernel)?;
    let (a_bytes, b_bytes): (Vec<u8>, Vec<u8>);
    let (a_f64, b_f64): (Vec<f64>, Vec<f64>);
    if int8 {
        let a: Vec<i8> = (0..64 * k).map(|_| random_i8(&mut rng)).collect();
        let b: Vec<i8> = (0..256 * k).map(|_| random_i8(&mut rng)).collect();
        a_f64 = a.iter().map(|&v| v as f64).collect();
        b_f64 = b.iter().map(|&v| v as f64).collect();
        a_bytes = bytemuck::cast_slice(&a).to_vec();
        b_bytes = bytemuck::cast_slice(&b).to_vec();
    } else {
        let a: Vec<f16> = (0..64 * k).map(|_| f16::from_f64(rng.random_range(-2.0..2.0))).collect();
        let b: Vec<f16> = (0..256 * k).map(|_| f16::from_f64(rng.random_range(-2.0..2.0))).collect();
        a_f64 = a.iter().map(|v| v.to_f64()).collect();
        b_f64 = b.iter().map(|v| v.to_f64()).collect();
        a_bytes = a.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect();
        b_bytes = b.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect();
    }
    let (da, db) = (gpu.upload(&a_bytes)?, gpu.upload(&b_bytes)?);
    let mut dd = gpu.alloc::<u32>(64 * 256, POISON)?;
    let dynamic_bytes = 1024 + 2 * (64 + 256) * 128;
    allow_dynamic_shared(&function, dynamic_bytes, "allowing the wgmma self-test its shared memory")?;
    let mut launch = gpu.stream().launch_builder(&function);
    launch.arg(da.raw()).arg(db.raw()).arg(dd.arg_mut());
    // SAFETY: matches `selftest_wgmma_m64n256_*(a, b, d)`: one warpgroup, A 64 x 256 bytes,
    // B 256 x 256 bytes, D 64 x 256 words.
    unsafe { launch.launch(launch_1d(1, 128, dynamic_bytes)) }.during("launching the wgmma self-test")?;
    let d = dd.download()?;
    let mut failures = Vec::new();
    let mut worst = 0f64;
    for i in 0..64 {
        for j in 0..256 {
            let (mut exact, mut scale) = (0f64, 0f64);
            for kk in 0..k {
                let p = a_f64[i * k + kk] * b_f64[j * k + kk];
                exact += p;
                scale += p.abs();
            }
            let word = d[i * 256 + j];
            if int8 {
                if word as i32 as f64 != exact {
                    failures.push(format!("D[{i}][{j}] = {}, expected {exact}", word as i32));
                }
            } else {
                let got = f32::from_bits(word) as f64;
                let error = (got - exact).abs() / scale.max(f64::MIN_POSITIVE);
                worst = worst.max(error);
                if error.is_nan() || error > 2f64.powi(-16) {
                    failures.push(format!("D[{i}][{j}] = {got}, expected {exact}"));
                }
            }
        }
    }
    let (name, measure) = if int8 {
        ("wgmma m64n256k32 s8 (sm_90a, swizzled smem)", String::new())
    } else {
        (
            "wgmma m64n256k16 f16, f32 accumulate (sm_90a, swizzled smem)",
            format!("; worst error {worst:.2e} of sum |a b|"),
        )
    };
    Ok(Some(Check::new(name, failures, 64 * 256, measure)))
}

/// The device bank-conflict check agrees with the host model on random and crafted patterns.
pub fn check_bank_conflicts(gpu: &Gpu, seed: u64) -> Result<Check> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut addresses = Vec::new();
    let mut widths = Vec::new();
    for case in 0..384u32 {
        let width = [4u32, 8, 16][(case % 3) as usize];
        let stride = [1u32, 2, 33, 32, 9, 0][(case / 3 % 6) as usize];
        for lane in 0..32u32 {
            let word = if case % 2 == 0 { lane * stride } else { rng.random_range(0..64) };
            addresses.push(word * width);
        }
        widths.push(width);
    }
    let cases = widths.len();
    let function = gpu.kernel(&tools::SELFTEST_BANK_CHECK)?;
    let (da, dw) = (gpu.upload(&addresses)?, gpu.upload(&widths)?);
    let mut out = gpu.alloc::<u32>(cases * 32, POISON)?;
    let mut launch = gpu.stream().launch_builder(&function);
    launch.arg(da.raw()).arg(dw.raw()).arg(out.arg_mut());
    // SAFETY: matches `selftest_bank_check(addresses, widths, out)`, one warp per case.
    unsafe { launch.launch(launch_1d(cases as u32, 32, 0)) }.during("launching selftest_bank_check")?;
    let out = out.download()?;
    let mut failures = Vec::new();
    let mut conflicting = 0;
    for case in 0..cases {
        let pattern: [u32; 32] = addresses[case * 32..case * 32 + 32].try_into().unwrap();
        let expected = bank::is_conflict_free(&pattern, widths[case]) as u32;
        conflicting += (expected == 0) as usize;
        for lane in 0..32 {
            if out[case * 32 + lane] != expected {
                failures.push(format!(
                    "case {case} (width {}) lane {lane}: {}, expected {expected}",
                    widths[case],
                    out[case * 32 + lane]
                ));
            }
        }
    }
    let measure = format!(" ({conflicting} of {cases} patterns conflict)");
    Ok(Check::new("device bank-conflict check", failures, cases * 32, measure))
}

/// `cvt.rn.f16x2.f32` against `half` (round to nearest even, subnormals, overflow) and back.
pub fn check_f16_conversion(gpu: &Gpu, seed: u64) -> Result<Check> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut x: Vec<f32> = (0..8192)
        .map(|i| match i % 4 {
            0 => rng.random_range(-70000.0f32..70000.0),
            1 => rng.random_range(-1e-4f32..1e-4),
            2 => f32::from_bits(rng.random()),
            _ => rng.random_range(-2.0f32..2.0),
        })
        .collect();
    x.extend([0.0, -0.0, 65504.0, 65520.0, -65520.0, 5.96e-8, 2.98e-8, f32::INFINITY, 1.0 + 1.0 / 2048.0]);
    if x.len() % 2 == 1 {
        x.push(1.0);
    }
    let n = x.len() / 2;
    let function = gpu.kernel(&tools::SELFTEST_F16_CONVERT)?;
    let dx = gpu.upload(&x)?;
    let mut packed = gpu.alloc::<u32>(n, POISON)?;
    let mut back = gpu.alloc::<f32>(2 * n, POISON)?;
    let count = n as u32;
    let mut launch = gpu.stream().launch_builder(&function);
    launch.arg(dx.raw()).arg(packed.arg_mut()).arg(back.arg_mut()).arg(&count);
    // SAFETY: matches `selftest_f16_convert(x, out, back, n)`.
    unsafe { launch.launch(launch_1d(count.div_ceil(256), 256, 0)) }
        .during("launching selftest_f16_convert")?;
    let (packed, back) = (packed.download()?, back.download()?);
    let mut failures = Vec::new();
    for i in 0..n {
        let lo = f16::from_f32(x[2 * i]);
        let hi = f16::from_f32(x[2 * i + 1]);
        let nan = lo.is_nan() || hi.is_nan();
        let expected = packing::pack_f16x2(lo.to_bits(), hi.to_bits());
        if !nan && packed[i] != expected {
            failures.push(format!(
                "({}, {}) -> {:#010x}, expected {expected:#010x}",
                x[2 * i],
                x[2 * i + 1],
                packed[i]
            ));
        }
        if !nan && (back[2 * i] != lo.to_f32() || back[2 * i + 1] != hi.to_f32()) {
            failures.push(format!(
                "f16x2 {expected:#010x} -> ({}, {}), expected ({}, {})",
                back[2 * i],
                back[2 * i + 1],
                lo,
                hi
            ));
        }
    }
    Ok(Check::new("f32 <-> f16x2 conversion", failures, 2 * n, String::new()))
}

/// Every GPU self-check of what the project uses, in the order the CLI prints them (the
/// unused `mma.sp` spelling is checked separately, for information).
pub fn gpu_checks(gpu: &Gpu, seed: u64, cases: usize) -> Result<Vec<Check>> {
    let s = |k: u64| seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(k);
    Ok([
        check_f16_mma(gpu, M16N8K8_F16, cases, s(1))?,
        check_f16_mma(gpu, M16N8K16_F16, cases, s(2))?,
        check_f16_mma(gpu, M16N8K16_F16_F32, cases, s(3))?,
        check_sparse_mma(gpu, SparseForm::OrderedMetadata, cases, s(4))?,
        check_sparse_universal(gpu, cases, s(6))?,
        check_int8_mma(gpu, M8N8K16_S8, false, cases, s(7))?,
        check_int8_mma(gpu, M8N8K16_S8, true, cases, s(8))?,
        check_int8_mma(gpu, M16N8K32_S8, false, cases, s(9))?,
        check_int8_mma(gpu, M16N8K32_S8, true, cases, s(10))?,
        check_shuffles(gpu, s(11))?,
        check_prmt_lop3(gpu, s(12))?,
        check_shared_and_global(gpu, s(13))?,
        check_bank_conflicts(gpu, s(14))?,
        check_f16_conversion(gpu, s(15))?,
    ]
    .into_iter()
    .chain(check_wgmma(gpu, false, s(16))?)
    .chain(check_wgmma(gpu, true, s(17))?)
    .collect())
}

/// The CPU self-checks (no GPU needed): the layout tables, fragment packing, the sparse
/// metadata construction and the packing helpers.
pub fn cpu_checks(seed: u64) -> Vec<Check> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut checks = Vec::new();
    let mut failures = Vec::new();
    let mut compared = 0;
    for fragment in layout::ALL_FRAGMENTS {
        compared += 1;
        if !fragment.is_bijection() {
            failures.push(format!("{fragment} is not a bijection"));
        }
        let matrix: Vec<u32> = (0..fragment.rows() * fragment.cols())
            .map(|_| rng.random::<u32>() >> (32 - fragment.element_bits))
            .collect();
        compared += 1;
        if unpack(fragment, &pack(fragment, &matrix)) != matrix {
            failures.push(format!("{fragment}: pack/unpack is not the identity"));
        }
    }
    checks.push(Check::new("register-assignment tables", failures, compared, String::new()));

    let mut failures = Vec::new();
    for lane in 0..32 {
        let n = lane & 3;
        let general = layout::sparse_metadata(lane, |i, _, half| 2 * ((i >> n) & 1) + half);
        if general != layout::universal_sparse_metadata(lane) {
            failures.push(format!("lane {lane}"));
        }
    }
    checks.push(Check::new("universal sparse metadata (eq. 173)", failures, 32, String::new()));

    let mut failures = Vec::new();
    for byte in 0..=255u8 {
        let (re, im) = packing::unpack_ci4(byte);
        if packing::pack_ci4(re, im) != byte || !(-8..=7).contains(&re) || !(-8..=7).contains(&im) {
            failures.push(format!("ci4 {byte:#04x}"));
        }
    }
    for x in [i32::MIN, -129, -128, -1, 0, 1, 127, 128, i32::MAX] {
        for s in 0..=31 {
            let exact = ((x as i64) + if s == 0 { 0 } else { 1i64 << (s - 1) }) >> s;
            if packing::round_shift_i32(x, s) as i64 != exact {
                failures.push(format!("round_shift({x}, {s})"));
            }
        }
    }
    checks.push(Check::new("int4+4 packing and rounding shift", failures, 256 + 9 * 32, String::new()));
    checks
}
