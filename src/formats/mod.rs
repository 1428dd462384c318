//! Standard file formats for the outputs of the kernels: UVH5 (pyuvdata) for visibilities.
#[cfg(feature = "uvh5")]
pub mod uvh5;
