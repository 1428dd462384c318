//! Standard file formats for the kernels' outputs, read by the field's own tools.
//!
//! - [`filterbank`]: SIGPROC filterbank files (a keyed binary header, then the samples
//!   `[time][channel]`), for beam intensities: the FRB beamformer's quantised beams and the
//!   power of the delay beamformer's beams, one file per beam. Read by SIGPROC, PRESTO,
//!   sigpyproc and FRB search pipelines such as Heimdall. Hand-written on `std` (no dependency):
//!   the format is a few dozen lines and no Rust crate is the field's reference for it.
//! - `uvh5` (cargo feature `uvh5`): integrated visibilities as pyuvdata's UVH5 files (HDF5),
//!   which pyuvdata reads and converts to UVFITS and Measurement Sets. Written with
//!   `hdf5-metno`, HDF5 built from source and linked statically.
pub mod filterbank;
#[cfg(feature = "uvh5")]
pub mod uvh5;
