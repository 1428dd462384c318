//! radio-kernels: GPU kernels for radio-telescope F-, X- and B-engines, written in Rust.
//!
//! This facade re-exports the host API ([`radio_kernels_host`]) and the shared pure
//! functions of the device crate ([`gpu_shared`]), and embeds the PTX module that the
//! top-level `build.rs` compiles from `kernels-gpu`.
//!
//! ```no_run
//! let gpu = radio_kernels::open(0)?; // device 0, PTX module loaded once
//! println!("{} (sm_{}{})", gpu.name(), gpu.compute_capability().0, gpu.compute_capability().1);
//! # Ok::<(), radio_kernels::Error>(())
//! ```
pub use radio_kernels_gpu as gpu_shared;
pub use radio_kernels_host::*;

pub mod demo;
pub mod stream;
pub mod summary;

/// The PTX module of every kernel (target sm_80, PTX ISA 8.5), built from `kernels-gpu`.
pub const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/radio_kernels.ptx"));

/// The PTX module of Hopper's `wgmma` kernels (target sm_90a), loaded on compute capability
/// 9.0 only.
pub const PTX_SM90A: &str = include_str!(concat!(env!("OUT_DIR"), "/radio_kernels_sm90a.ptx"));

/// Opens CUDA device `ordinal` and loads the embedded PTX modules on it.
///
/// Returns [`Error::NoDriver`] on a machine without libcuda and [`Error::NoDevice`] when
/// there is no such device; it never panics.
pub fn open(ordinal: usize) -> Result<Gpu, Error> {
    // SAFETY: PTX and PTX_SM90A are the modules build.rs compiled from this version's
    // kernels-gpu, whose kernels the host's launchers are written against.
    unsafe { Gpu::new(ordinal, PTX, PTX_SM90A) }
}
