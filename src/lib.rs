#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub use radio_kernels_gpu as gpu_shared;
pub use radio_kernels_host::*;

#[cfg(feature = "cli")]
pub mod demo;
pub mod formats;
#[cfg(feature = "cli")]
pub mod stream;
#[cfg(feature = "cli")]
pub mod summary;

/// The embedded PTX modules (PTX ISA 8.5), built from `kernels-gpu` by `build.rs`: one per
/// kernel family for sm_80 (every kernel, every supported GPU), and one per family that has
/// Hopper `wgmma` kernels for sm_90a (loaded on compute capability 9.0 only). [`Gpu`] loads a
/// family's module the first time one of its kernels is used.
pub const MODULES: &[ModuleSource] = include!(concat!(env!("OUT_DIR"), "/modules.rs"));

/// Opens CUDA device `ordinal` and loads the embedded PTX modules on it.
///
/// Returns [`Error::NoDriver`] on a machine without libcuda and [`Error::NoDevice`] when
/// there is no such device; it never panics.
pub fn open(ordinal: usize) -> Result<Gpu, Error> {
    // SAFETY: MODULES are the modules build.rs compiled from this version's
    // kernels-gpu, whose kernels the host's launchers are written against.
    unsafe { Gpu::new(ordinal, MODULES) }
}

/// Opens CUDA device `ordinal` as [`open`] does, but loads every module from its PTX (the
/// driver's JIT compiler, or its cache) and never from the embedded cubins: for comparing the
/// two, or for a driver whose compiler is newer than the `ptxas` the cubins came from.
pub fn open_ptx(ordinal: usize) -> Result<Gpu, Error> {
    let ptx_only: Vec<ModuleSource> = MODULES.iter().map(|m| ModuleSource { cubins: &[], ..*m }).collect();
    // SAFETY: the modules of `open`, without their cubins.
    unsafe { Gpu::new(ordinal, &ptx_only) }
}
