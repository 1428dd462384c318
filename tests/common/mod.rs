//! Shared pieces of the GPU integration tests: the device and fresh, printed random seeds.
#![allow(dead_code)] // each test binary uses a subset

use radio_kernels::Gpu;
use rand::rngs::StdRng;
use rand::SeedableRng;

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
