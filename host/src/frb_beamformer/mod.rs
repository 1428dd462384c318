//! FRB beamformer, host side (K. Smith, "CHORD FRB beamformer"): the tensor-core short FFT
//! (sec. 3), the first kernel (sec. 4), the resampling to beams (sec. 5) and the quantiser,
//! with validation, launchers and CPU references. Index maps and kernels:
//! `radio_kernels_gpu::frb_beamformer`.
//!
//! Files:
//! - `gammas`: the Gamma matrices of eqs. 28-30 in f64, rounded to f16 into the register image
//!   of eqs. 39, 41 and 45-47, and at N = 20 the direct DFT's matrix image (no twiddle:
//!   [`FftMethod`]); the CPU references: the padded DFT of eq. 18, the
//!   three-factor form of eqs. 28-30, and an emulation of the warp algorithm through the
//!   register tables (optionally rounding each stage to f16 like the kernel);
//! - `short_fft`: the launcher [`ShortFft`] with validation;
//! - `config`: [`FrbConfig`] and its checks; `first_kernel`: [`FrbBeamformer`];
//!   `reference`: the first kernel's f64 reference;
//! - [`resample`], [`factorized`]: the resamplers; [`quantize`]: the quantiser;
//! - [`streaming`]: [`FrbStream`], which chains the first kernel, a resampler and the quantiser
//!   on the device and streams E chunks through them from host memory.
//!
//! Complex f16 data is `Complex<f16>` (real part at the lower address: one `u32` per value
//! on the device, real part in bits 0..16, as `packing::pack_f16x2` packs it); intensities
//! are `f16`, E is [`Ci4`].
//! Every launcher runs on one stream, the GPU's default until `set_stream`.
use crate::error::{DriverContext, Error, Result};
use crate::fragment::{from_slots, to_slots};
use crate::runtime::{allow_dynamic_shared, launch_1d, DeviceBuffer, Gpu, PushKernelArg, Stream};
use crate::size;
use cudarc::driver::CudaFunction;
use half::f16;
use num_complex::Complex;
use radio_kernels_gpu::frb_beamformer::*;
pub use radio_kernels_gpu::frb_beamformer::{FrbCase, FRB_CASES};
use radio_kernels_gpu::layout::{
    sparse_metadata_slot, universal_sparse_metadata, Location, M16N8K16_F16_A, M16N8K16_F16_B,
    M16N8K16_SPARSE_F16_A, M16N8K8_F16_A, M16N8K8_F16_B, M16N8_F16_C,
};
use radio_kernels_gpu::modules::KernelSpec;
use radio_kernels_gpu::packing::{pack_f16x2, Ci4};
use std::f64::consts::PI;

mod gammas;
pub use gammas::*;
mod short_fft;
pub use short_fft::*;
mod config;
pub use config::*;
mod first_kernel;
pub use first_kernel::*;
mod reference;
pub use reference::*;

pub mod factorized;
pub mod quantize;
pub mod resample;
pub mod streaming;

pub use streaming::{FrbOutput, FrbResampling, FrbStream};

#[cfg(test)]
mod tests;
