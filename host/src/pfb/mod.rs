//! PFB channelizer (F-engine; Merry, "Efficient channelization on a graphics processing
//! unit"): configuration and validation, sample packing, PFB weights, the delay model,
//! lost-data flags, the f64 CPU reference, the [`Channelizer`] that runs the GPU path on a
//! stream of chunks, and its streaming engine [`ChannelizerStream`] (pinned rings, copies
//! overlapped with the kernels). The GPU path ([`PfbPath::for_config`]) is the fused path
//! ([`PfbPath::Fused`]: FIR, FFT and post-processing in one launch of the cluster kernel,
//! `radio_kernels_gpu::pfb::cluster`) where that applies (sm_90a, n = 1024, at most 16 taps
//! and 12-bit input, heaps of whole batches of 8 spectra), else the three-kernel path (FIR,
//! cuFFT C2C, post-processing; every configuration on Ampere). The kernels come from the
//! device crate's descriptors (`radio_kernels_gpu::pfb::PfbKernel`, each with its
//! [`KernelSpec`]); [`Channelizer::with_kernel`] names them for tests and benchmarks. Device
//! side, formulas and layouts: `radio_kernels_gpu::pfb`.
//!
//! Time: stream sample 0 is the first sample of the first chunk; spectrum m's window nominally
//! starts at sample `2 n m` (critically sampled). The delay model of each
//! polarisation is evaluated at the window's nominal centre `2 n m + n T`; the delay `d` (in
//! samples, the delay to apply: output(t) = input(t - d)) is split into `coarse = round(d)`
//! (ties to even), applied as an index offset (the window starts at `2 n m - coarse`), and
//! `fine = d - coarse` in [-1/2, 1/2], applied with the fringe phase as
//! `exp(j (phase - pi k fine / n))` on channel k.
//!
//! Streaming (Fig. 2): the channelizer keeps, per polarisation, a device buffer holding the
//! samples from shortly before the next output chunk's earliest window to the newest input.
//! Each output chunk (`heaps_per_chunk` heaps of `spectra_per_heap` spectra) is computed by
//! the same launches from that buffer as soon as its last window has arrived, so a
//! stream cut into any chunk size gives the same bytes as one long buffer. A push is checked
//! whole (lengths, room, every schedule it needs) before anything changes, so an invalid push
//! (e.g. a delay past `max_delay`) leaves the stream as it was; only a device error part-way
//! breaks it, and then it refuses further pushes until `reset` ([`Channelizer::push`]).
//! One push completes at most [`ChannelizerConfig::max_outputs_per_push`] output chunks.
//!
//! Sizes: [`ChannelizerConfig::validate`] computes every size in 128-bit arithmetic and
//! rejects an output chunk past 2^31 complex values ([`MAX_OUTPUT_VALUES`]: int8 output up to
//! 2^32 bytes, f32 intermediates up to 16 GiB each) and a kept input past 2^32 - 32 samples
//! per polarisation ([`MAX_CAPACITY_SAMPLES`]: the kernels take window offsets as u32
//! samples). Past those, every device index (output bytes, intermediate values, input bits and
//! words) is 64-bit. The size helpers never panic: on a configuration `validate` rejects they
//! saturate (each says how).
//!
//! Non-finite values: weights, gains and delay models must be finite ([`Error::NonFinite`],
//! naming the argument and the first bad index) and weights and gains at most
//! [`MAX_COEFFICIENT`] = 2^32 in magnitude, which keeps every f32 product of the GPU path
//! finite; a delay model whose delay or phase becomes non-finite at some spectrum is rejected
//! by [`Schedule::new`]. So the quantiser never sees NaN or an infinity from accepted inputs.
//! Were it to, the kernels' quantiser and [`quantise_reference`] agree: an infinity saturates
//! to `+-max` and NaN gives 0, and both count as clipped.
//!
//! Files: `config` (sizes and validation), `packing` (samples in, values out), `weights`,
//! `schedule` (delay model, per-spectrum schedule, lost flags), `reference` (f64 CPU
//! reference), `fft` (the cuFFT plan), `kernels` (path and kernel selection, the launches),
//! `channelizer` (construction, the kept input and `push`), `streaming` (the streaming
//! engine).
use crate::error::{DriverContext, Error, Result};
use crate::runtime::{
    allow_dynamic_shared, launch_1d, DeviceBuffer, DeviceBufferMut, Gpu, LaunchConfig, PushKernelArg, Stream,
};
use crate::size;
use cudarc::cufft::{result as cufft, sys as cufft_sys};
use cudarc::driver::{CudaFunction, DevicePtrMut};
pub use num_complex::Complex;
use radio_kernels_gpu::modules::KernelSpec;
use radio_kernels_gpu::pfb as layout;
use radio_kernels_gpu::pfb::cluster as cluster_layout;
pub use radio_kernels_gpu::pfb::{PfbKernel, PfbStage, PFB_KERNELS};
pub use radio_kernels_gpu::pfb::{
    BITS, FIR_VARIANTS, MAX_CHANNELS, MAX_TAPS, MIN_CHANNELS, SAMPLE_GRANULE, SPECTRA_PER_POST_THREAD,
    THREADS, UNZIP,
};
use rustfft::FftPlanner;

mod streaming;
pub use streaming::{ChannelizerStream, PfbInput, PfbOutput, MAX_OUTPUT_SLOTS};
mod config;
pub use config::*;
mod packing;
pub use packing::*;
mod weights;
pub use weights::*;
mod schedule;
pub use schedule::*;
mod reference;
pub use reference::*;
mod fft;
use fft::*;
mod kernels;
pub use kernels::*;
mod channelizer;
pub use channelizer::*;

#[cfg(test)]
mod tests;
