//! The baseband beamformer: `BeamformerConfig`, the one-shot `BasebandBeamformer`, the
//! streaming `BasebandStream` and the CPU reference `beamform_reference`.
//!
//! Formula and layouts (the Rust module `radio_kernels::baseband_beamformer`):
//! `J[beta][f][p][tau] = Q4(round(sum_d A[f][p][beta][d] E[tau][f][p][d] / 2^s[f][p][beta]))`,
//! two polarisations.
//!
//! - ``e``: uint8 ``[times][freqs][2][dishes]``, packed ci4 samples (:func:`pack_ci4`).
//! - ``weights`` (A): int8 ``[freqs][2][beams][dishes][2]`` (complex int8, trailing re, im).
//! - ``shifts`` (s): int32 ``[freqs][2][beams]``, each in 0..=31.
//! - Output J: uint8 ``[beams][freqs][2][times]``, packed ci4.
use crate::arrays::{count_copy, host_from, host_in, new_host, one_shot, slot_view};
use crate::errors::PyResultExt;
use crate::gpu::PyGpu;
use crate::tied::{locked, Tied};
use num_complex::Complex;
use pyo3::prelude::*;
use radio_kernels::baseband_beamformer::{
    beamform_reference as reference, BasebandBeamformer, BasebandStream, BeamformerConfig, POLS,
};
use radio_kernels::{Ci4, DeviceBuffer, Error, Gpu, Shift};
use std::sync::{Arc, Mutex};

fn config(py: Python<'_>, dishes: u32, beams: u32, freqs: u32, times: u32) -> PyResult<BeamformerConfig> {
    let config = BeamformerConfig { dishes, beams, freqs, times };
    config.validate().py(py)?;
    Ok(config)
}

fn e_shape(c: &BeamformerConfig) -> Vec<usize> {
    vec![c.times as usize, c.freqs as usize, POLS as usize, c.dishes as usize]
}
fn weights_shape(c: &BeamformerConfig) -> Vec<usize> {
    vec![c.freqs as usize, POLS as usize, c.beams as usize, c.dishes as usize, 2]
}
fn shifts_shape(c: &BeamformerConfig) -> Vec<usize> {
    vec![c.freqs as usize, POLS as usize, c.beams as usize]
}
fn output_shape(c: &BeamformerConfig) -> Vec<usize> {
    vec![c.beams as usize, c.freqs as usize, POLS as usize, c.times as usize]
}

/// Weights and shifts from numpy, checked (shifts in 0..=31).
fn weights_and_shifts(
    py: Python<'_>,
    c: &BeamformerConfig,
    weights: &Bound<'_, PyAny>,
    shifts: &Bound<'_, PyAny>,
) -> PyResult<(Vec<Complex<i8>>, Vec<Shift>)> {
    let w = host_in::<i8>(weights, "weights", &weights_shape(c))?;
    let s = host_in::<i32>(shifts, "shifts", &shifts_shape(c))?;
    let weights: Vec<Complex<i8>> = bytemuck::cast_slice(w.as_slice()?).to_vec();
    let shifts = s.as_slice()?.iter().map(|&s| Shift::new(s)).collect::<Result<Vec<_>, Error>>().py(py)?;
    Ok((weights, shifts))
}

/// What one baseband beamformer launch computes (validated on construction; raises
/// :class:`InvalidConfigError`): ``dishes`` a multiple of 64 in 64..=1024, ``beams`` a
/// multiple of 8 in 8..=128 with ``beams * dishes <= 65536``, ``freqs`` 1..=65535, ``times``
/// a positive multiple of 128.
#[pyclass(name = "BeamformerConfig", module = "radio_kernels", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PyBeamformerConfig {
    pub config: BeamformerConfig,
}

#[pymethods]
impl PyBeamformerConfig {
    #[new]
    fn new(py: Python<'_>, dishes: u32, beams: u32, freqs: u32, times: u32) -> PyResult<Self> {
        Ok(PyBeamformerConfig { config: config(py, dishes, beams, freqs, times)? })
    }
    /// Dishes D.
    #[getter]
    fn dishes(&self) -> u32 {
        self.config.dishes
    }
    /// Beams B.
    #[getter]
    fn beams(&self) -> u32 {
        self.config.beams
    }
    /// Frequency channels F.
    #[getter]
    fn freqs(&self) -> u32 {
        self.config.freqs
    }
    /// Time samples T per launch.
    #[getter]
    fn times(&self) -> u32 {
        self.config.times
    }
    /// Shape of E, uint8 ci4: ``(times, freqs, 2, dishes)``.
    #[getter]
    fn e_shape(&self) -> Vec<usize> {
        e_shape(&self.config)
    }
    /// Shape of the weights, int8: ``(freqs, 2, beams, dishes, 2)``.
    #[getter]
    fn weights_shape(&self) -> Vec<usize> {
        weights_shape(&self.config)
    }
    /// Shape of the shifts, int32: ``(freqs, 2, beams)``.
    #[getter]
    fn shifts_shape(&self) -> Vec<usize> {
        shifts_shape(&self.config)
    }
    /// Shape of J, uint8 ci4: ``(beams, freqs, 2, times)``.
    #[getter]
    fn output_shape(&self) -> Vec<usize> {
        output_shape(&self.config)
    }
    fn __repr__(&self) -> String {
        let c = &self.config;
        format!(
            "BeamformerConfig(dishes={}, beams={}, freqs={}, times={})",
            c.dishes, c.beams, c.freqs, c.times
        )
    }
}

/// The exact CPU reference: J (uint8 ci4 ``[beams][freqs][2][times]``) from ``e``,
/// ``weights`` and ``shifts`` (numpy, layouts in the module docs). Needs no GPU.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn beamform_reference<'py>(
    py: Python<'py>,
    e: &Bound<'py, PyAny>,
    weights: &Bound<'py, PyAny>,
    shifts: &Bound<'py, PyAny>,
    dishes: u32,
    beams: u32,
    freqs: u32,
    times: u32,
) -> PyResult<Bound<'py, PyAny>> {
    let c = config(py, dishes, beams, freqs, times)?;
    let (w, s) = weights_and_shifts(py, &c, weights, shifts)?;
    let e = host_in::<u8>(e, "e", &e_shape(&c))?;
    let samples: &[Ci4] = Ci4::from_bytes(e.as_slice()?);
    let j = py.detach(|| reference(&c, samples, &w, &s)).py(py)?;
    host_from::<u8, Ci4>(py, &j, &output_shape(&c))
}

type Launcher = Tied<Gpu, BasebandBeamformer<'static>>;

fn launcher(
    py: Python<'_>,
    gpu: Arc<Gpu>,
    c: BeamformerConfig,
    w: &[Complex<i8>],
    s: &[Shift],
) -> PyResult<Arc<Launcher>> {
    // SAFETY: the launcher keeps the GPU reference to itself.
    let tied = py.detach(|| unsafe { Tied::new(gpu, |gpu| BasebandBeamformer::new(gpu, c, w, s)) }).py(py)?;
    Ok(Arc::new(tied))
}

/// A baseband beamformer of one configuration on one GPU, with its weights and shifts on
/// the device (the arguments of :class:`BeamformerConfig`, then ``weights`` and ``shifts``).
#[pyclass(name = "BasebandBeamformer", module = "radio_kernels", frozen)]
pub struct PyBasebandBeamformer {
    /// Replaced whole by `set_weights`, so a stream made earlier keeps the launcher it
    /// borrows (it has its own copy of the weights, as in Rust).
    inner: Mutex<Arc<Launcher>>,
    gpu: Py<PyGpu>,
}

impl PyBasebandBeamformer {
    fn current(&self) -> Arc<Launcher> {
        locked(&self.inner).clone()
    }
}

#[pymethods]
impl PyBasebandBeamformer {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        gpu: Bound<'_, PyGpu>,
        dishes: u32,
        beams: u32,
        freqs: u32,
        times: u32,
        weights: &Bound<'_, PyAny>,
        shifts: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let c = config(py, dishes, beams, freqs, times)?;
        let (w, s) = weights_and_shifts(py, &c, weights, shifts)?;
        let inner = launcher(py, gpu.get().gpu.clone(), c, &w, &s)?;
        count_copy();
        Ok(PyBasebandBeamformer { inner: Mutex::new(inner), gpu: gpu.unbind() })
    }
    /// The configuration.
    #[getter]
    fn config(&self) -> PyBeamformerConfig {
        PyBeamformerConfig { config: *self.current().get().config() }
    }
    /// The GPU this beamformer runs on.
    #[getter]
    fn gpu(&self, py: Python<'_>) -> Py<PyGpu> {
        self.gpu.clone_ref(py)
    }
    /// Names of the kernels one beamform launches.
    #[getter]
    fn kernels(&self) -> Vec<&'static str> {
        self.current().get().kernels().iter().map(|k| k.name).collect()
    }
    /// Replaces the weights and shifts (checked as in the constructor) for later calls;
    /// streams made earlier keep theirs (:meth:`BasebandStream.set_weights`).
    fn set_weights(
        &self,
        py: Python<'_>,
        weights: &Bound<'_, PyAny>,
        shifts: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let current = self.current();
        let c = *current.get().config();
        let (w, s) = weights_and_shifts(py, &c, weights, shifts)?;
        let new = launcher(py, current.owner().clone(), c, &w, &s)?;
        count_copy();
        *locked(&self.inner) = new;
        Ok(())
    }
    /// One launch: J (uint8 ci4 ``[beams][freqs][2][times]``) from ``e`` (uint8 ci4
    /// ``[times][freqs][2][dishes]``). Arrays as in :meth:`Correlator.correlate`: numpy
    /// (copied) or device arrays (in place, no copy; out=None gives CuPy for a device input).
    #[pyo3(signature = (e, out = None))]
    fn beamform<'py>(
        &self,
        py: Python<'py>,
        e: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.current();
        let beamformer = inner.get();
        let c = *beamformer.config();
        one_shot::<u8, Ci4, u8, Ci4>(
            py,
            inner.owner(),
            beamformer.stream(),
            (e, "e", &e_shape(&c)),
            (out, "out", &output_shape(&c)),
            |e: &DeviceBuffer<Ci4>, j: &mut DeviceBuffer<Ci4>| beamformer.beamform(e, j),
        )
    }
    /// The streaming engine: E chunks (numpy) in, J out, with ``depth`` input and output
    /// slots; it starts with a copy of this beamformer's weights.
    #[pyo3(signature = (depth = 3))]
    fn streaming(&self, py: Python<'_>, depth: usize) -> PyResult<PyBasebandStream> {
        let owner = self.current();
        let config = *owner.get().config();
        // SAFETY: the engine keeps the launcher reference to itself.
        let engine = py.detach(|| unsafe { Tied::new(owner, |b| b.get().streaming(depth)) }).py(py)?;
        Ok(PyBasebandStream { config, engine: Mutex::new(engine) })
    }
}

type Engine = Tied<Launcher, BasebandStream<'static, 'static>>;

/// The streaming baseband beamformer (``beamformer.streaming(depth)``): the upload of chunk
/// k + 1, the beamforming of chunk k and the download of chunk k - 1 overlap. Used from one
/// thread at a time; the GIL is released while it works.
#[pyclass(name = "BasebandStream", module = "radio_kernels", frozen)]
pub struct PyBasebandStream {
    config: BeamformerConfig,
    engine: Mutex<Engine>,
}

impl PyBasebandStream {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut BasebandStream<'static, 'static>) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        let engine = &self.engine;
        py.detach(|| f(locked(engine).get_mut())).py(py)
    }
}

#[pymethods]
impl PyBasebandStream {
    /// The next input slot, as a writeable numpy uint8 ci4 ``[times][freqs][2][dishes]``
    /// view of the engine's pinned memory (waiting for that slot only): fill it in place
    /// (e.g. ``sock.recv_into(stream.input())``), then :meth:`submit` with no argument. No
    /// copy. The view stays valid memory while the stream lives; its contents belong to the
    /// next chunk submitted.
    fn input<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let this = slf.get();
        let (ptr, len) = this.with(slf.py(), |s| {
            let slot = s.input()?;
            Ok((slot.as_mut_ptr() as usize, slot.len()))
        })?;
        // SAFETY: the pinned slot is allocated with the engine, which `slf` owns, and never
        // moves; `Ci4` is a transparent u8.
        unsafe { slot_view::<u8>(slf.clone().into_any(), ptr as *mut u8, len, &e_shape(&this.config), true) }
    }
    /// Submits one E chunk: with ``e`` (numpy uint8 ci4 ``[times][freqs][2][dishes]``), a copy
    /// of it; without, the slot :meth:`input` returned, filled in place (no copy). The chunk is
    /// uploaded, beamformed, and its J downloaded. Raises :class:`BacklogError` (changing
    /// nothing) when every output slot holds a J not taken.
    #[pyo3(signature = (e = None))]
    fn submit(&self, py: Python<'_>, e: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let Some(e) = e else {
            return self.with(py, |s| s.submit());
        };
        let e = host_in::<u8>(e, "e", &e_shape(&self.config))?;
        let samples: &[Ci4] = Ci4::from_bytes(e.as_slice()?);
        self.with(py, |s| {
            s.input()?.copy_from_slice(samples);
            s.submit()
        })?;
        count_copy();
        Ok(())
    }
    /// The oldest J not yet taken as a read-only numpy view of the engine's pinned output
    /// slot (uint8 ci4 ``[beams][freqs][2][times]``), or None: no copy. The view's contents
    /// are valid until the next call of :meth:`output` or :meth:`output_view` (the slot is
    /// then reused); copy what must be kept. :meth:`output` returns a copy instead.
    fn output_view<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let this = slf.get();
        let taken = this.with(slf.py(), |s| Ok(s.output()?.map(|j| (j.as_ptr() as usize, j.len()))))?;
        let Some((ptr, len)) = taken else { return Ok(None) };
        // SAFETY: as for `input`: the pinned output slot lives, unmoved, with the engine.
        unsafe {
            slot_view::<u8>(slf.clone().into_any(), ptr as *mut u8, len, &output_shape(&this.config), false)
        }
        .map(Some)
    }
    /// The oldest J not yet taken (uint8 ci4 ``[beams][freqs][2][times]``), or None.
    fn output<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.with(py, |s| Ok(s.pending()))? == 0 {
            return Ok(None);
        }
        let mut array = new_host::<u8>(py, &output_shape(&self.config))?;
        let host: &mut [Ci4] = Ci4::from_bytes_mut(array.as_slice_mut()?);
        let taken = self.with(py, move |s| {
            Ok(match s.output()? {
                Some(j) => {
                    host.copy_from_slice(j);
                    true
                }
                None => false,
            })
        })?;
        if taken {
            count_copy();
        }
        Ok(taken.then(|| array.as_any().clone()))
    }
    /// Replaces the stream's weights and shifts: chunks submitted before use the old ones,
    /// chunks after the new ones.
    fn set_weights(
        &self,
        py: Python<'_>,
        weights: &Bound<'_, PyAny>,
        shifts: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (w, s) = weights_and_shifts(py, &self.config, weights, shifts)?;
        self.with(py, |stream| stream.set_weights(&w, &s))?;
        count_copy();
        Ok(())
    }
    /// Js enqueued and not yet taken.
    #[getter]
    fn pending(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |s| Ok(s.pending()))
    }
    /// Chunks submitted since the start.
    #[getter]
    fn submitted(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |s| Ok(s.submitted()))
    }
    /// Waits for everything enqueued so far.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |s| s.synchronize())
    }
}

/// Adds the baseband beamformer's classes and functions to the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyBeamformerConfig>()?;
    module.add_class::<PyBasebandBeamformer>()?;
    module.add_class::<PyBasebandStream>()?;
    module.add_function(wrap_pyfunction!(beamform_reference, module)?)?;
    Ok(())
}
