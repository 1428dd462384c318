//! `radio_kernels.open(ordinal)` and the `Gpu` handle.
use crate::errors::PyResultExt;
use pyo3::prelude::*;
use radio_kernels::Gpu;
use std::sync::Arc;

/// One CUDA device with the project's kernels, from :func:`open`. Share it between
/// launchers; it stays open while any launcher made on it lives.
#[pyclass(name = "Gpu", module = "radio_kernels", frozen)]
pub struct PyGpu {
    pub gpu: Arc<Gpu>,
}

#[pymethods]
impl PyGpu {
    /// The CUDA device number (``0 .. device_count()``).
    #[getter]
    fn ordinal(&self) -> usize {
        self.gpu.ordinal()
    }
    /// The device's name as the driver reports it, e.g. ``"NVIDIA H200"``.
    #[getter]
    fn name(&self) -> &str {
        self.gpu.name()
    }
    /// ``(major, minor)``, e.g. ``(9, 0)`` for an H100 or H200.
    #[getter]
    fn compute_capability(&self) -> (u32, u32) {
        self.gpu.compute_capability()
    }
    /// Number of streaming multiprocessors.
    #[getter]
    fn sm_count(&self) -> u32 {
        self.gpu.sm_count()
    }
    /// ``(free, total)`` device memory in bytes.
    fn memory_info(&self, py: Python<'_>) -> PyResult<(usize, usize)> {
        self.gpu.memory_info().py(py)
    }
    /// Waits for all work on the device's default stream.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let gpu = &self.gpu;
        py.detach(|| gpu.synchronize()).py(py)
    }
    fn __repr__(&self) -> String {
        let (major, minor) = self.gpu.compute_capability();
        format!(
            "<radio_kernels.Gpu {} ({}, sm_{major}{minor}, {} SMs)>",
            self.gpu.ordinal(),
            self.gpu.name(),
            self.gpu.sm_count()
        )
    }
}

/// Opens CUDA device ``ordinal`` with the embedded kernels.
///
/// Raises :class:`NoGpuError` (a ``RuntimeError``) without a CUDA driver or without that
/// device, and :class:`UnsupportedDeviceError` (a subclass) for a device older than compute
/// capability 8.0. The CPU references work without a GPU.
#[pyfunction]
#[pyo3(signature = (ordinal = 0))]
pub fn open(py: Python<'_>, ordinal: usize) -> PyResult<PyGpu> {
    let gpu = py.detach(|| radio_kernels::open(ordinal)).py(py)?;
    Ok(PyGpu { gpu: Arc::new(gpu) })
}

/// Number of CUDA devices; raises :class:`NoGpuError` without a CUDA driver.
#[pyfunction]
pub fn device_count(py: Python<'_>) -> PyResult<usize> {
    Gpu::device_count().py(py)
}
