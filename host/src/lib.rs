//! Host side of radio-kernels: the CUDA runtime (over cudarc), typed launchers with input
//! validation, and the CPU references every kernel is tested against.
pub mod baseband_beamformer;
pub mod correlator;
pub mod delay_beamformer;
pub mod error;
pub(crate) mod fragment;
pub mod frb_beamformer;
pub mod pfb;
pub mod runtime;
pub mod selftest;
mod size;

pub use error::{DriverContext, Error, Result};
pub use runtime::{
    launch_1d, CudaFunction, DeviceBuffer, DeviceBufferMut, Gpu, LaunchConfig, PushKernelArg, Stream, Timer,
};
