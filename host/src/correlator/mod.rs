//! X-engine correlator: configuration and validation ([`CorrelatorConfig`]), the exact CPU
//! reference ([`correlate_reference`]), the launcher ([`Correlator`]), the streaming
//! integration ([`Integration`]) and the host corner turn from F-engine heaps
//! ([`corner_turn`]). Device side, formulas and the kernel legend:
//! `radio_kernels_gpu::correlator`.
//!
//! Output layout: complex `[channel][b(i,j)][pi][pj]` with `b(i,j) = i(i+1)/2 + j`, i >= j,
//! each value `sum_t x_i,pi conj(x_j,pj)`: `Complex<i32>` per launch, `Complex<i64>` when
//! accumulated. The input is raw bytes (`input_bytes()`), one [`Ci4`](crate::Ci4) or two
//! `i8` per sample as [`Format`] says.
//!
//! Kernels: on Hopper (`Gpu::wgmma_enabled()`), int8 with 16-byte aligned rows (stations x
//! pols, or stations for `[t][c][p][s]`, a multiple of 8) runs an sm_90a `wgmma` kernel (block
//! kind by size: `Pair` for one 64-receiver tile, `ChannelSplit` for two, `Split` above);
//! everything else, and every configuration on Ampere, runs the sm_80 `mma.sync` kernels
//! (`cp.async` copies for aligned int8, register staging for int4 and unaligned rows).
//! [`Correlator::with_kernel`] runs another kernel that fits the configuration.
//!
//! Sizes: the largest valid configuration (65535 stations, 65535 channels) has about 5.6e14
//! output values and 1.4e17 input bytes, so the kernels index input and output with 64-bit
//! offsets throughout; the size helpers here are exact (u128 arithmetic) for every valid
//! configuration and saturate, never wrap or panic, on invalid ones.

mod config;
mod corner_turn;
mod integration;
mod launcher;
mod reference;

pub use config::CorrelatorConfig;
pub use corner_turn::corner_turn;
pub use integration::Integration;
pub use launcher::{time_slices, Correlator};
pub use radio_kernels_gpu::correlator::hopper::Kind;
pub use radio_kernels_gpu::correlator::{Format, Kernel, Order, Schedule, INSTANCES, TIME_TILE};
pub use reference::correlate_reference;
