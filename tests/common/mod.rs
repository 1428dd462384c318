//! Shared pieces of the GPU integration tests: the device and fresh, printed random seeds.
#![allow(dead_code)] // each test binary uses a subset

use half::f16;
use radio_kernels::Gpu;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Device 0; these tests are `#[ignore]`d on machines without one.
pub fn gpu() -> Gpu {
    radio_kernels::open(0).expect("a CUDA GPU (these tests are #[ignore]d without one)")
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
