//! Delay beamformer (MeerKAT-style B-engine): configuration, plan, validation,
//! steering helpers, curand-compatible dither states, the launcher, and the CPU reference.
//! Device side, formulas and layouts: `radio_kernels_gpu::delay_beamformer`.
//!
//! `y[b][c][t] = Q( sum_a w[a][b] exp(j pi (first_channel + c) d[a][b]) x[a][c][t][pol(b)] + dither )`
//! with x complex int8 `[antenna][channel][time][pol]`, w complex f32 and d f32
//! `[antenna][beam]`, y complex int8 `[beam][channel][time]`, Q = round half to even and
//! saturate to [-127, 127], and per-beam counts of saturated samples.
//!
//! Sizes: [`DelayBeamformerConfig::validate`] bounds every field (antennas, channels and
//! beams at most 65535, channels x times at most `u32::MAX` for the u32 saturation counters),
//! so the input holds at most 2^50 bytes and the output 2^49; the kernel forms those offsets
//! in 64 bits, and the size helpers are exact for every accepted configuration (and saturate,
//! never wrap or panic, for the others). [`Plan`] adds the launch's limits: at most
//! [`MAX_GROUPS`] time groups (grid y), and below 2^32 dither states when a beam is dithered.
//!
//! Non-finite values: `w` and `d` are checked before every launch ([`check_steering`]), as
//! are the inputs and results of [`steering`]: NaN or infinity is
//! [`Error::NonFinite`] (naming the argument and the first bad index), and so is a weight
//! whose `|Re w| + |Im w|` (the kernel's beam scale) or a delay whose `c d` at the last
//! channel (the kernel's phase) overflows f32. The beam sums are then finite, or +-inf after
//! the kernel's final scaling for weights near `f32::MAX`; the quantiser counts non-finite
//! values as clipped (+-inf to +-127, NaN to 0), in the kernel and in [`beamform_reference`].
//!
//! Ownership: every buffer given to a launch, and the [`DitherState`] and [`DeviceSteering`]
//! buffers, must belong to the beamformer's GPU ([`Gpu::check_owner`]), else
//! [`Error::WrongDevice`]. Device buffers need no alignment check: they are driver
//! allocations (see [`DeviceBuffer`]).
//!
//! Streams: the launcher's calls ([`DelayBeamformer::beamform`],
//! [`DelayBeamformer::beamform_steered`], [`DelayBeamformer::upload_steering`],
//! [`DelayBeamformer::dither_state`]) work on its stream ([`DelayBeamformer::set_stream`]);
//! the streaming engine ([`DelayBeamformer::streaming`], module [`streaming`]) runs chunks of
//! x from host memory to beams and saturation counts in host memory on its own lanes.
//!
//! Files: `config` (configuration and launch plan), `steering` (weights and delays to
//! coefficients), `dither` (curand-compatible XORWOW states), `launcher`
//! ([`DelayBeamformer`]), `reference` (the CPU reference) and [`streaming`] ([`DelayStream`]).
use crate::error::{DriverContext, Error, Result};
use crate::runtime::{allow_dynamic_shared, launch_1d, DeviceBuffer, Gpu, PushKernelArg, Stream};
use crate::size;
use bytemuck::Pod;
use cudarc::driver::CudaFunction;
pub(crate) use num_complex::Complex;
use radio_kernels_gpu::delay_beamformer as layout;
pub use radio_kernels_gpu::delay_beamformer::{Variant, DITHER_THREADS, THREADS, TIME_GRANULE, VARIANTS};
use radio_kernels_gpu::xorwow::{self, Jump, STATE_WORDS};
pub use radio_kernels_gpu::xorwow::{dither, Xorwow};
use std::sync::OnceLock;

pub mod streaming;
pub use streaming::{DelayOutput, DelayStream};
mod config;
pub use config::*;
mod steering;
pub use steering::*;
mod dither;
pub use dither::*;
mod launcher;
pub use launcher::*;
mod reference;
pub use reference::*;

#[cfg(test)]
mod tests;
