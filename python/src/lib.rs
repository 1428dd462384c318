//! The `radio_kernels._native` extension module: the Python binding of radio-kernels (PyO3,
//! abi3 for CPython 3.9+), re-exported by the `radio_kernels` package.
//!
//! One file per kernel family (`correlator.rs`, `baseband.rs`, ...), each with a `register`
//! function that adds its classes and functions; `arrays.rs` holds the numpy and device-array
//! conventions every family follows, `errors.rs` the exception classes, `tied.rs` how a
//! Python object keeps the GPU (or launcher) its Rust value borrows alive. Adding a family
//! or a file writer: a new file here with a `register`, one line below, and its stubs in
//! `radio_kernels/_native.pyi`.
use pyo3::prelude::*;

mod arrays;
mod baseband;
mod correlator;
mod errors;
// --- file writers (SIGPROC filterbank, UVH5) ---
mod formats;
// --- end file writers ---
mod gpu;
mod packing;
mod tied;
// --- pfb, delay, frb families (helper pyf) ---
mod delay;
mod frb;
mod pfb;
// --- end pfb, delay, frb ---

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(module)?;
    module.add_class::<gpu::PyGpu>()?;
    module.add_function(wrap_pyfunction!(gpu::open, module)?)?;
    module.add_function(wrap_pyfunction!(gpu::device_count, module)?)?;
    module.add_function(wrap_pyfunction!(arrays::host_copy_count, module)?)?;
    packing::register(module)?;
    correlator::register(module)?;
    baseband::register(module)?;
    // --- pfb, delay, frb families (helper pyf) ---
    pfb::register(module)?;
    delay::register(module)?;
    frb::register(module)?;
    // --- end pfb, delay, frb ---
    // --- file writers (SIGPROC filterbank, UVH5) ---
    formats::register(module)?;
    // --- end file writers ---
    Ok(())
}
