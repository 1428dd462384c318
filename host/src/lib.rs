//! Host side of radio-kernels: the CUDA runtime (over cudarc), typed launchers with input
//! validation, streaming engines, and the CPU references every kernel is tested against.
//!
//! # Streams and composition
//!
//! Every launcher runs on one CUDA stream, the GPU's default stream until `set_stream` gives
//! it another (of the same GPU), so callers can order their own kernels with ours. Streaming
//! engines ([`streaming`]) run on three lanes of their own. Device buffers carry cudarc's
//! read and write events, so a buffer used on two streams is ordered without explicit waits.
//! Device memory another library owns joins through [`Gpu::wrap_device`], host memory
//! through [`Gpu::register_host`].
//!
//! # Threads
//!
//! - [`Gpu`] is `Send + Sync`: open a device once and share it (`&Gpu`, `Arc<Gpu>`) between
//!   threads.
//! - Launchers (`Correlator`, `BasebandBeamformer`, ...) are `Send + Sync`; their `&self`
//!   calls may be made from several threads at once. Calls that change them (`set_stream`,
//!   `set_weights`, ...) take `&mut self`.
//! - Buffers, rings and streaming engines are `Send` and used from one thread at a time: move
//!   an engine to the thread that feeds it. Engines of one GPU on several threads run
//!   concurrently (each has its own lanes).
#![warn(missing_docs)]

pub mod baseband_beamformer;
pub mod correlator;
pub mod delay_beamformer;
pub mod error;
pub(crate) mod fragment;
pub mod frb_beamformer;
pub mod pfb;
pub mod runtime;
pub mod selftest;
mod shift;
mod size;
pub mod streaming;

pub use error::{DriverContext, Error, Result};
pub use runtime::{
    launch_1d, Arch, Cubin, CudaFunction, DeviceBuffer, DeviceBufferMut, Family, Gpu, KernelSpec,
    LaunchConfig, Loaded, ModuleSource, PushKernelArg, Stream, Timer,
};
pub use shift::Shift;
pub use streaming::{InputRing, Lanes, OutputRing, PinnedBuffer, RegisteredHost};

/// IEEE binary16, the element of the FRB beamformer's intensities and resampling weights.
pub use half::f16;
/// Complex values of every host API: `Complex<i8>` weights, `Complex<f32>` gains and
/// coefficients, `Complex<i32>`/`Complex<i64>` visibilities, `Complex<f16>` beams. `Pod` for a
/// `Pod` part type, so complex arrays fill device buffers as they are.
pub use num_complex::Complex;
/// The packed sample formats and their converters (ci4 and ci8 layouts, offset-binary and
/// nibble-order conversions, the kernels' rounding rules).
pub use radio_kernels_gpu::packing;
pub use radio_kernels_gpu::packing::{
    ci4_from_offset_binary, ci4_from_real_high, ci4_to_offset_binary, ci4_to_real_high, pack_ci4, pack_ci8,
    unpack_ci4, unpack_ci8, Ci4,
};
