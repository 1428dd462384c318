//! Baseband beamformer: configuration, validation, the launcher (which owns the beam weights
//! and shifts on the device, like a planner owns its precomputed state) and the exact CPU
//! reference. Device side and formulas: `radio_kernels_gpu::baseband_beamformer`.
//!
//! `J[beta][f][p][tau] = Q4(round(sum_d A[f][p][beta][d] E[tau][f][p][d] / 2^s[f][p][beta]))`,
//! bit-exact for every input (E = -8 and A = -128 included). Formats: E and J complex int4+4
//! (one byte, re in the low nibble, `packing::pack_ci4`), A complex int8+8 (`Complex<i8>`), s a
//! [`Shift`](crate::Shift) (0..=31). E and J are [`Ci4`](crate::Ci4) values, one byte each.
//!
//! Sizes: E and J pass 2^32 bytes within the valid range (e.g. F = 65535, T = 2^22), so the
//! kernels index them with 64-bit offsets; the work-item index is 32-bit, which `validate()`
//! enforces (`F * 2 * T / 128 < 2^32`). The size and index helpers are exact (u128
//! arithmetic) for every valid configuration and saturate, never wrap or panic, on invalid
//! ones.
//!
//! Streams: [`BasebandBeamformer::beamform`] and [`BasebandBeamformer::set_weights`] work on
//! the launcher's stream ([`BasebandBeamformer::set_stream`]); the streaming engine
//! ([`BasebandBeamformer::streaming`], module [`streaming`]) runs E chunks from host memory
//! to J in host memory on its own lanes.
//!
//! Files: `config` ([`BeamformerConfig`]: validation, sizes, indices), `reference` (the CPU
//! reference), `launcher` ([`BasebandBeamformer`]: instance choice, launches), [`streaming`]
//! ([`BasebandStream`]).
pub use radio_kernels_gpu::baseband_beamformer::{CHUNK, POLS};

mod config;
pub use config::*;
mod launcher;
pub use launcher::*;
mod reference;
pub use reference::*;
pub mod streaming;
pub use streaming::BasebandStream;

#[cfg(test)]
mod tests;
