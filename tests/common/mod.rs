//! Shared pieces of the GPU integration tests: the device and fresh, printed random seeds.
#![allow(dead_code)] // each test binary uses a subset

use half::f16;
use radio_kernels::Gpu;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Device 0; these tests are `#[ignore]`d on machines without one. With
/// `RADIO_KERNELS_TEST_PTX_ONLY=1` the embedded cubins are left out ([`radio_kernels::open_ptx`]),
/// so that a run tests the driver's compilation of the PTX (what devices without a cubin use).
pub fn gpu() -> Gpu {
    let opened = if std::env::var("RADIO_KERNELS_TEST_PTX_ONLY").is_ok_and(|v| v == "1") {
        radio_kernels::open_ptx(0)
    } else {
        radio_kernels::open(0)
    };
    opened.expect("a CUDA GPU (these tests are #[ignore]d without one)")
}

/// A fresh seed from the clock, printed so a failure can be replayed.
pub fn fresh_seed() -> u64 {
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    println!("seed {seed}");
    seed
}

/// A generator seeded with [`fresh_seed`].
pub fn rng() -> StdRng {
    StdRng::seed_from_u64(fresh_seed())
}

/// Relative L2 distance of f16 results (bits) from f64 expectations; infinite if any is NaN.
pub fn relative_l2(got: &[u16], want: &[f64]) -> f64 {
    let (mut err, mut norm) = (0.0, 0.0);
    for (&g, &w) in got.iter().zip(want) {
        let g = f16::from_bits(g).to_f64();
        err += (g - w) * (g - w);
        norm += w * w;
    }
    if err.is_nan() {
        return f64::INFINITY;
    }
    (err / norm).sqrt()
}

/// Random FRB intensities in [0, 100) as f16 bits, like |E|^2 sums.
pub fn random_intensity(rng: &mut impl Rng, len: usize) -> Vec<u16> {
    (0..len).map(|_| f16::from_f64(rng.random_range(0.0..100.0)).to_bits()).collect()
}

/// GPU property-test runner: `cases` cases (override with `RADIO_KERNELS_PROPTEST_CASES`),
/// seeded from `RADIO_KERNELS_PROPTEST_SEED` or the clock, and the seed printed, so a failure
/// (shrunk by proptest to its smallest failing shape) replays with
/// `RADIO_KERNELS_PROPTEST_SEED=<seed>`. No failure persistence files.
pub fn gpu_proptest_runner(cases: u32) -> proptest::test_runner::TestRunner {
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let seed = std::env::var("RADIO_KERNELS_PROPTEST_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(fresh_seed);
    let cases = std::env::var("RADIO_KERNELS_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(cases);
    println!("proptest seed {seed} ({cases} cases; replay with RADIO_KERNELS_PROPTEST_SEED={seed})");
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config { cases, failure_persistence: None, max_shrink_iters: 64, ..Config::default() };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}

/// Runs `test` on `cases` values drawn from `strategy` through [`gpu_proptest_runner`], and
/// panics with the smallest failing value proptest finds.
pub fn gpu_proptest<S: proptest::strategy::Strategy>(
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), proptest::test_runner::TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let mut runner = gpu_proptest_runner(cases);
    if let Err(failure) = runner.run(&strategy, test) {
        panic!("{failure}");
    }
}

/// Held by each test that needs tens of GB of device memory, so that the tests of one binary
/// (which libtest runs in parallel) do not ask for them at once; take it before checking
/// [`radio_kernels::Gpu::memory_info`].
pub fn large_memory_guard() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether `bytes` of device memory, plus 1 GB of headroom, are free; if not, says that the
/// test is skipped.
pub fn enough_memory(gpu: &Gpu, bytes: u64) -> bool {
    let (free, _) = gpu.memory_info().unwrap();
    if (free as u64) < bytes + (1 << 30) {
        println!("skipped: needs {:.1} GB, {:.1} GB free", bytes as f64 / 1e9, free as f64 / 1e9);
        return false;
    }
    true
}

/// Fills the bytes of `buffer` with `block` repeated (byte `x` is `block[x % block.len()]`),
/// uploaded in pieces: inputs of several GB without generating them byte by byte.
pub fn fill_repeating<T: bytemuck::Pod>(
    gpu: &Gpu,
    buffer: &mut radio_kernels::DeviceBuffer<T>,
    block: &[u8],
) {
    const PIECE: usize = 256 << 20;
    let bytes = buffer.len() * std::mem::size_of::<T>();
    let mut host = Vec::with_capacity(PIECE);
    let mut start = 0;
    while start < bytes {
        let end = (start + PIECE).min(bytes);
        host.clear();
        while host.len() < end - start {
            let at = (start + host.len()) % block.len();
            let take = (block.len() - at).min(end - start - host.len());
            host.extend_from_slice(&block[at..at + take]);
        }
        // SAFETY: the allocation is only viewed, never replaced.
        let raw = unsafe { buffer.raw_mut() };
        gpu.stream().memcpy_htod(&host, &mut raw.slice_mut(start..end)).unwrap();
        start = end;
    }
    gpu.synchronize().unwrap();
}

/// Device 1, for the tests of buffers and objects of another GPU; `None`, with a line saying
/// the test is skipped, on a machine with one GPU.
pub fn second_gpu() -> Option<Gpu> {
    let count = Gpu::device_count().unwrap();
    if count < 2 {
        println!("skipped: needs 2 GPUs, this machine has {count}");
        return None;
    }
    Some(radio_kernels::open(1).unwrap())
}
