//! The delay beamformer (MeerKAT-style B-engine): `Beam`, `DelayBeamformerConfig`,
//! `DelayPlan`, the one-shot `DelayBeamformer` (with `upload_steering`/`beamform_steered` and
//! its curand-compatible `DitherState`), the streaming `DelayStream`, and the CPU references
//! (`delay_beamform_reference`, `coefficient_reference`, `delay_reference_states`).
//!
//! Formula (the Rust module `radio_kernels::delay_beamformer`):
//! `y[b][c][t] = Q( sum_a w[a][b] exp(j pi (first_channel + c) d[a][b]) x[a][c][t][pol(b)] + dither )`,
//! Q = round half to even and saturate to [-127, 127], with per-beam counts of saturated
//! samples.
//!
//! - ``x``: int8 ``[antennas][channels][times][pols][2]`` (complex int8, trailing re, im).
//! - ``weights`` (w): complex64 ``[antennas][beams]``; ``delays`` (d): float32
//!   ``[antennas][beams]`` (half turns per channel).
//! - Output y: int8 ``[beams][channels][times][2]``; saturation counts uint32 ``[beams]``.
//! - Dither states: uint32 ``[count][6]`` (XORWOW ``v0..v4, d``, curand's
//!   ``curandStateXORWOW_t`` order), state i = ``curand_init(seed, first_subsequence + i,
//!   offset)``.
//!
//! The file also holds the argument plumbing the PFB and FRB bindings share for calls with
//! several arrays ([`Src`], [`Dst`], [`host_array`], [`np_from_vec`]), following the
//! conventions of `arrays.rs` (one host copy counted per array moved; device arrays used in
//! place, their `__cuda_array_interface__` stream synchronised first).
use crate::arrays::{
    array_in, array_out, count_copy, cupy_empty, host_in, new_host, shape_text, slot_view, ArrayIn, ArrayOut,
    Elem,
};
use crate::errors::{dtype_error, invalid, layout_error, shape_error, PyResultExt};
use crate::gpu::PyGpu;
use crate::tied::{locked, Tied};
use bytemuck::Pod;
use num_complex::Complex;
use numpy::{
    PyArray1, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::PyComplex;
use radio_kernels::delay_beamformer::{
    beamform_reference as reference, coefficient_reference as coefficient, curand_init as init, dither,
    engine_subsequence as engine_first, reference_states, Beam, DelayBeamformer, DelayBeamformerConfig,
    DelayStream, DeviceSteering, DitherState, Plan, Xorwow,
};
use radio_kernels::{DeviceBuffer, DriverContext, Error, Gpu, Stream};
use std::sync::{Arc, Mutex};

// ---------------------------------------------------------------------------------------
// Shared plumbing (also used by pfb.rs and frb.rs).
// ---------------------------------------------------------------------------------------

impl Elem for u32 {
    const NAME: &'static str = "uint32";
    const TYPESTR: &'static [&'static str] = &["<u4"];
}

/// A read-only numpy array of element `T` (any numpy element, e.g. bool, uint32, float64)
/// and `shape`, checked as `arrays.rs` checks (dtype, shape, C order, alignment); a device
/// array is `WrongDeviceError`.
pub fn host_array<'py, T: numpy::Element>(
    object: &Bound<'py, PyAny>,
    what: &str,
    name: &str,
    shape: &[usize],
) -> PyResult<PyReadonlyArrayDyn<'py, T>> {
    Ok(writable_or_not::<T>(object, what, name, shape, false)?.readonly())
}

fn writable_or_not<'py, T: numpy::Element>(
    object: &Bound<'py, PyAny>,
    what: &str,
    name: &str,
    shape: &[usize],
    writable: bool,
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    let py = object.py();
    let Ok(array) = object.cast::<PyUntypedArray>() else {
        if object.hasattr("__cuda_array_interface__")? {
            return Err(crate::errors::raise(
                py,
                crate::errors::Kind::WrongDevice,
                format!("{what} is device memory; this call reads host (numpy) arrays"),
                &[],
            ));
        }
        return Err(dtype_error(
            py,
            format!("{what} must be a numpy array of dtype {name}, got {}", object.get_type().name()?),
        ));
    };
    if !array.dtype().is_equiv_to(&numpy::dtype::<T>(py)) {
        return Err(dtype_error(
            py,
            format!("{what} must have dtype {name}, got {}", array.getattr("dtype")?.str()?),
        ));
    }
    if array.shape() != shape {
        return Err(shape_error(
            py,
            what,
            format!("{what} has shape {}, expected {}", shape_text(array.shape()), shape_text(shape)),
        ));
    }
    if !array.is_c_contiguous() {
        return Err(layout_error(py, format!("{what} must be C-contiguous (numpy.ascontiguousarray)")));
    }
    let flags = array.getattr("flags")?;
    if !flags.getattr("aligned")?.extract::<bool>()? {
        return Err(layout_error(py, format!("{what} must be aligned to its dtype")));
    }
    if writable && !flags.getattr("writeable")?.extract::<bool>()? {
        return Err(layout_error(py, format!("{what} is read-only")));
    }
    Ok(array.clone().cast_into::<PyArrayDyn<T>>()?)
}

/// A new numpy array of `shape` holding `values` (any numpy element).
pub fn np_from_vec<'py, T: numpy::Element>(
    py: Python<'py>,
    values: Vec<T>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyArray1::from_vec(py, values).reshape(shape.to_vec())?.into_any())
}

/// An input's bytes for use with the GIL released: host bytes (uploaded) or a device array
/// (used in place).
pub enum Src<'a> {
    Host(&'a [u8]),
    Device { address: u64, bytes: usize, stream: Option<usize> },
}

/// An output's bytes for use with the GIL released: host bytes (downloaded into) or a
/// device array (written in place).
pub enum Dst<'a> {
    Host(&'a mut [u8]),
    Device { address: u64, bytes: usize, stream: Option<usize> },
}

/// The bytes of a checked input.
pub fn src<'a, T: Elem>(array: &'a ArrayIn<'_, T>) -> PyResult<Src<'a>> {
    Ok(match array {
        ArrayIn::Host(host) => Src::Host(bytemuck::cast_slice(host.as_slice()?)),
        ArrayIn::Device(d) => Src::Device { address: d.address, bytes: d.bytes, stream: d.stream },
    })
}

/// The bytes of a checked output.
pub fn dst<'a, T: Elem>(array: &'a mut ArrayOut<'_, T>) -> PyResult<Dst<'a>> {
    Ok(match array {
        ArrayOut::Host(host) => Dst::Host(bytemuck::cast_slice_mut(host.as_slice_mut()?)),
        ArrayOut::Device(d) => Dst::Device { address: d.address, bytes: d.bytes, stream: d.stream },
    })
}

/// Whether a checked input is a device array (then `out=None` outputs are CuPy arrays).
pub fn on_device<T: Elem>(array: &ArrayIn<'_, T>) -> bool {
    matches!(array, ArrayIn::Device(_))
}

/// An output: `out` checked, or a new array (CuPy on the GPU when `device`, else numpy).
pub fn output<'py, T: Elem>(
    py: Python<'py>,
    gpu: &Gpu,
    out: Option<&Bound<'py, PyAny>>,
    device: bool,
    what: &str,
    shape: &[usize],
) -> PyResult<ArrayOut<'py, T>> {
    Ok(match out {
        Some(object) => array_out::<T>(object, what, shape)?,
        None if device => ArrayOut::Device(cupy_empty::<T>(py, gpu.ordinal(), what, shape)?),
        None => ArrayOut::Host(new_host::<T>(py, shape)?),
    })
}

/// Waits for a `__cuda_array_interface__` stream (as `arrays.rs` does).
fn synchronize_foreign(gpu: &Gpu, stream: usize) -> Result<(), Error> {
    gpu.context().bind_to_thread().during("binding the CUDA context")?;
    // SAFETY: the handle comes from the array's owner, which keeps its stream alive while it
    // exports the array; 1 and 2 are CU_STREAM_LEGACY and CU_STREAM_PER_THREAD.
    unsafe { cudarc::driver::sys::cuStreamSynchronize(stream as cudarc::driver::sys::CUstream) }
        .result()
        .during("synchronising the device array's stream")
}

impl Src<'_> {
    /// The device buffer of this input: uploaded (one counted copy) or wrapped in place.
    pub fn buffer<D: Pod>(&self, gpu: &Gpu) -> Result<DeviceBuffer<D>, Error> {
        match *self {
            Src::Host(bytes) => {
                count_copy();
                gpu.upload::<D>(bytemuck::cast_slice(bytes))
            }
            Src::Device { address, bytes, stream } => {
                if let Some(s) = stream {
                    synchronize_foreign(gpu, s)?;
                }
                // SAFETY: the Python object owning the memory is alive for the whole call
                // (the caller holds it); its stream was synchronised just above and the
                // launcher's is synchronised before the call returns.
                unsafe { gpu.wrap_device(address, bytes / std::mem::size_of::<D>()) }
            }
        }
    }
}

impl Dst<'_> {
    /// The device buffer of this output: a new allocation (host output) or the device array.
    pub fn buffer<D: Pod>(&self, gpu: &Gpu) -> Result<DeviceBuffer<D>, Error> {
        match self {
            Dst::Host(bytes) => gpu.alloc(bytes.len() / std::mem::size_of::<D>(), 0),
            Dst::Device { address, bytes, stream } => {
                if let Some(s) = stream {
                    synchronize_foreign(gpu, *s)?;
                }
                // SAFETY: as for `Src::buffer`.
                unsafe { gpu.wrap_device(*address, *bytes / std::mem::size_of::<D>()) }
            }
        }
    }
    /// After the launch (its stream synchronised): a host output is downloaded (one counted
    /// copy) on `stream`.
    pub fn finish<D: Pod>(self, stream: &Stream, buffer: &DeviceBuffer<D>) -> Result<(), Error> {
        if let Dst::Host(host) = self {
            count_copy();
            let bytes = host.len();
            if bytes > 0 {
                stream.memcpy_dtoh(&buffer.raw().slice(0..bytes), host).during("copying from the device")?;
                stream.synchronize().during("waiting for the download")?;
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Configuration.
// ---------------------------------------------------------------------------------------

/// One single-polarisation beam: the input polarisation ``pol`` it forms from, and whether
/// the symmetric XORWOW dither is added before quantisation.
#[pyclass(name = "Beam", module = "radio_kernels", frozen, eq)]
#[derive(Clone, Copy, PartialEq)]
pub struct PyBeam {
    beam: Beam,
}

#[pymethods]
impl PyBeam {
    #[new]
    #[pyo3(signature = (pol, dither = false))]
    fn new(pol: u32, dither: bool) -> Self {
        PyBeam { beam: Beam { pol, dither } }
    }
    /// The input polarisation (``< pols``).
    #[getter]
    fn pol(&self) -> u32 {
        self.beam.pol
    }
    /// Whether the beam is dithered.
    #[getter]
    fn dither(&self) -> bool {
        self.beam.dither
    }
    fn __repr__(&self) -> String {
        format!("Beam(pol={}, dither={})", self.beam.pol, if self.beam.dither { "True" } else { "False" })
    }
}

/// What one delay-beamformer launch computes (validated on construction; raises
/// :class:`InvalidConfigError`): ``antennas`` 1..=65535, ``pols`` 1 or 2, ``channels``
/// 1..=65535 with ``first_channel + channels <= 2**24``, ``times`` a positive multiple of 8
/// with ``channels * times < 2**32``, ``beams`` 1..=65535 :class:`Beam` values, each reading
/// a polarisation ``< pols``.
#[pyclass(name = "DelayBeamformerConfig", module = "radio_kernels", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PyDelayConfig {
    pub config: DelayBeamformerConfig,
}

fn x_shape(c: &DelayBeamformerConfig) -> Vec<usize> {
    vec![c.antennas as usize, c.channels as usize, c.times as usize, c.pols as usize, 2]
}
fn steering_shape(c: &DelayBeamformerConfig) -> Vec<usize> {
    vec![c.antennas as usize, c.beams.len()]
}
fn y_shape(c: &DelayBeamformerConfig) -> Vec<usize> {
    vec![c.beams.len(), c.channels as usize, c.times as usize, 2]
}
fn beam_values(c: &DelayBeamformerConfig) -> Vec<usize> {
    vec![c.beams.len(), c.channels as usize, c.times as usize]
}

#[pymethods]
impl PyDelayConfig {
    #[new]
    #[pyo3(signature = (antennas, pols, channels, times, beams, first_channel = 0))]
    fn new(
        py: Python<'_>,
        antennas: u32,
        pols: u32,
        channels: u32,
        times: u32,
        beams: Vec<Bound<'_, PyBeam>>,
        first_channel: u32,
    ) -> PyResult<Self> {
        let config = DelayBeamformerConfig {
            antennas,
            pols,
            channels,
            first_channel,
            times,
            beams: beams.iter().map(|b| b.get().beam).collect(),
        };
        config.validate().py(py)?;
        Ok(PyDelayConfig { config })
    }
    /// Antennas A.
    #[getter]
    fn antennas(&self) -> u32 {
        self.config.antennas
    }
    /// Input polarisations.
    #[getter]
    fn pols(&self) -> u32 {
        self.config.pols
    }
    /// Channels of one launch.
    #[getter]
    fn channels(&self) -> u32 {
        self.config.channels
    }
    /// Absolute index of local channel 0 (the phase slope's channel origin).
    #[getter]
    fn first_channel(&self) -> u32 {
        self.config.first_channel
    }
    /// Time samples per channel.
    #[getter]
    fn times(&self) -> u32 {
        self.config.times
    }
    /// The beams.
    #[getter]
    fn beams(&self) -> Vec<PyBeam> {
        self.config.beams.iter().map(|&beam| PyBeam { beam }).collect()
    }
    /// Whether any beam is dithered (launches then need a :class:`DitherState`).
    #[getter]
    fn dithered(&self) -> bool {
        self.config.dithered()
    }
    /// Shape of x, int8: ``(antennas, channels, times, pols, 2)``.
    #[getter]
    fn input_shape(&self) -> Vec<usize> {
        x_shape(&self.config)
    }
    /// Shape of the weights (complex64) and delays (float32): ``(antennas, beams)``.
    #[getter]
    fn steering_shape(&self) -> Vec<usize> {
        steering_shape(&self.config)
    }
    /// Shape of y, int8: ``(beams, channels, times, 2)``.
    #[getter]
    fn output_shape(&self) -> Vec<usize> {
        y_shape(&self.config)
    }
    fn __repr__(&self) -> String {
        let c = &self.config;
        format!(
            "DelayBeamformerConfig(antennas={}, pols={}, channels={}, times={}, beams=[{} beams], first_channel={})",
            c.antennas,
            c.pols,
            c.channels,
            c.times,
            c.beams.len(),
            c.first_channel
        )
    }
}

/// How a configuration maps onto thread blocks, which fixes the number and order of dither
/// states. ``DelayPlan(config, tiles_per_group)`` makes a plan with that many time tiles per
/// block; :attr:`DelayBeamformer.plan` is the plan a GPU chose.
#[pyclass(name = "DelayPlan", module = "radio_kernels", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PyPlan {
    plan: Plan,
}

#[pymethods]
impl PyPlan {
    #[new]
    fn new(py: Python<'_>, config: &PyDelayConfig, tiles_per_group: u32) -> PyResult<Self> {
        Ok(PyPlan { plan: Plan::with_tiles_per_group(&config.config, tiles_per_group).py(py)? })
    }
    /// The plan :class:`DelayBeamformer` chooses for a GPU running ``concurrent_blocks``
    /// blocks at once.
    #[staticmethod]
    fn for_blocks(py: Python<'_>, config: &PyDelayConfig, concurrent_blocks: u32) -> PyResult<Self> {
        Ok(PyPlan { plan: Plan::new(&config.config, concurrent_blocks).py(py)? })
    }
    /// Beam batches (grid x).
    #[getter]
    fn batches(&self) -> u32 {
        self.plan.batches()
    }
    /// Time tiles covering the launch.
    #[getter]
    fn tiles(&self) -> u32 {
        self.plan.tiles()
    }
    /// Consecutive time tiles per block.
    #[getter]
    fn tiles_per_group(&self) -> u32 {
        self.plan.tiles_per_group()
    }
    /// Time groups (grid y).
    #[getter]
    fn groups(&self) -> u32 {
        self.plan.groups()
    }
    /// Dither states of a launch (one per thread of every block).
    #[getter]
    fn state_count(&self) -> u64 {
        self.plan.state_count()
    }
    fn __repr__(&self) -> String {
        format!(
            "<radio_kernels.DelayPlan {} batches x {} groups of {} tiles, {} dither states>",
            self.plan.batches(),
            self.plan.groups(),
            self.plan.tiles_per_group(),
            self.plan.state_count()
        )
    }
}

/// Weights (complex64) and delays (float32) `[antenna][beam]` from numpy.
fn steering_host(
    c: &DelayBeamformerConfig,
    weights: &Bound<'_, PyAny>,
    delays: &Bound<'_, PyAny>,
) -> PyResult<(Vec<Complex<f32>>, Vec<f32>)> {
    let shape = steering_shape(c);
    let w = host_in::<Complex<f32>>(weights, "weights", &shape)?;
    let d = host_in::<f32>(delays, "delays", &shape)?;
    Ok((w.as_slice()?.to_vec(), d.as_slice()?.to_vec()))
}

fn words_to_states(words: &[u32]) -> Vec<Xorwow> {
    words.chunks_exact(6).map(|w| Xorwow::from_words([w[0], w[1], w[2], w[3], w[4], w[5]])).collect()
}

fn states_to_words(states: &[Xorwow]) -> Vec<u32> {
    states.iter().flat_map(|s| s.to_words()).collect()
}

// ---------------------------------------------------------------------------------------
// CPU references.
// ---------------------------------------------------------------------------------------

/// The f64 CPU reference of one launch: ``(y, saturated, values, magnitude)`` with y int8
/// ``[beams][channels][times][2]``, saturated uint32 ``[beams]``, values complex128
/// ``[beams][channels][times]`` (the beam sum plus dither before quantisation) and magnitude
/// float64 of the same shape (``sum_a |W| (|Re x| + |Im x|)``, the scale of the GPU's f32
/// rounding). ``plan`` (default: the plan for one concurrent block) fixes the dither order;
/// ``states`` (uint32 ``[plan.state_count][6]``, required when a beam is dithered) is
/// advanced in place as a launch advances the GPU's states. Needs no GPU.
#[pyfunction]
#[pyo3(signature = (config, input, weights, delays, plan = None, states = None))]
#[allow(clippy::type_complexity)]
pub fn delay_beamform_reference<'py>(
    py: Python<'py>,
    config: &PyDelayConfig,
    input: &Bound<'py, PyAny>,
    weights: &Bound<'py, PyAny>,
    delays: &Bound<'py, PyAny>,
    plan: Option<&PyPlan>,
    states: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let c = &config.config;
    let plan = match plan {
        Some(p) => p.plan.clone(),
        None => Plan::new(c, 1).py(py)?,
    };
    let x = host_in::<i8>(input, "input", &x_shape(c))?;
    let x: &[Complex<i8>] = bytemuck::cast_slice(x.as_slice()?);
    let (w, d) = steering_host(c, weights, delays)?;
    let mut held = match states {
        Some(s) => {
            let shape = shape_of_any(s);
            if shape.len() != 2 || shape[1] != 6 {
                return Err(shape_error(
                    py,
                    "states",
                    format!("states has shape {}, expected (count, 6)", shape_text(&shape)),
                ));
            }
            Some(writable_or_not::<u32>(s, "states", "uint32", &shape, true)?.readwrite())
        }
        None => None,
    };
    let mut replay = match &held {
        Some(words) => Some(words_to_states(words.as_slice()?)),
        None => None,
    };
    let r = py.detach(|| reference(c, &plan, x, &w, &d, replay.as_deref_mut())).py(py)?;
    if let (Some(words), Some(advanced)) = (held.as_mut(), replay) {
        words.as_slice_mut()?.copy_from_slice(&states_to_words(&advanced));
    }
    let y: Vec<i8> = bytemuck::cast_slice(&r.output).to_vec();
    Ok((
        np_from_vec(py, y, &y_shape(c))?,
        np_from_vec(py, r.saturated, &[c.beams.len()])?,
        np_from_vec(py, r.values, &beam_values(c))?,
        np_from_vec(py, r.magnitude, &beam_values(c))?,
    ))
}

fn shape_of_any(object: &Bound<'_, PyAny>) -> Vec<usize> {
    object.cast::<PyUntypedArray>().map(|a| a.shape().to_vec()).unwrap_or_default()
}

/// The coefficient the kernel approximates, in f64: ``w exp(j pi channel d)`` with the
/// product ``channel * d`` exact and reduced modulo 2.
#[pyfunction]
pub fn coefficient_reference<'py>(
    py: Python<'py>,
    w: &Bound<'py, PyComplex>,
    d: f32,
    channel: u32,
) -> Bound<'py, PyComplex> {
    let w = Complex::new(w.real() as f32, w.imag() as f32);
    let c = coefficient(w, d, channel);
    PyComplex::from_doubles(py, c.re, c.im)
}

/// ``curand_init(seed, subsequence, offset)`` of ``curandStateXORWOW_t``: uint32 ``[6]``
/// (``v0..v4, d``).
#[pyfunction]
pub fn curand_init(py: Python<'_>, seed: u64, subsequence: u64, offset: u64) -> PyResult<Bound<'_, PyAny>> {
    np_from_vec(py, init(seed, subsequence, offset).to_words().to_vec(), &[6])
}

/// The dither states ``curand_init(seed, first_subsequence + i, offset)`` for ``i <
/// count``: uint32 ``[count][6]`` (what :meth:`DelayBeamformer.dither_state` puts on the
/// GPU for ``count = plan.state_count``).
#[pyfunction]
pub fn delay_reference_states(
    py: Python<'_>,
    seed: u64,
    first_subsequence: u64,
    offset: u64,
    count: usize,
) -> PyResult<Bound<'_, PyAny>> {
    let states = py.detach(|| reference_states(seed, first_subsequence, offset, count)).py(py)?;
    np_from_vec(py, states_to_words(&states), &[count, 6])
}

/// The symmetric dither value in (-0.5, 0.5) of one raw 32-bit draw ``r``.
#[pyfunction]
pub fn dither_value(r: u32) -> f32 {
    dither(r)
}

/// First curand subsequence of engine ``engine`` (``engine * 2**32``): engines started
/// there never share a subsequence.
#[pyfunction]
pub fn engine_subsequence(engine: u32) -> u64 {
    engine_first(engine)
}

// ---------------------------------------------------------------------------------------
// GPU: launcher, dither states, device steering.
// ---------------------------------------------------------------------------------------

type Launcher = Tied<Gpu, DelayBeamformer<'static>>;

/// The dither generators of one :class:`DelayBeamformer`, on the GPU, advanced by every
/// dithered launch (from :meth:`DelayBeamformer.dither_state`). While a
/// :class:`DelayStream` uses it (until the stream is dropped) it cannot be used elsewhere.
#[pyclass(name = "DitherState", module = "radio_kernels", frozen)]
pub struct PyDitherState {
    state: Arc<Mutex<Option<DitherState>>>,
    count: u32,
    seed: u64,
    first_subsequence: u64,
}

impl PyDitherState {
    fn lent(&self, py: Python<'_>) -> PyErr {
        invalid(py, "the dither state is in use by a DelayStream (drop the stream to get it back)".into())
    }
}

#[pymethods]
impl PyDitherState {
    /// Number of XORWOW states (the plan's ``state_count``).
    #[getter]
    fn count(&self) -> u32 {
        self.count
    }
    /// The curand seed.
    #[getter]
    fn seed(&self) -> u64 {
        self.seed
    }
    /// The curand subsequence of state 0.
    #[getter]
    fn first_subsequence(&self) -> u64 {
        self.first_subsequence
    }
    /// Downloads the current states: uint32 ``[count][6]``.
    fn states<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let cell = &self.state;
        let states =
            py.detach(|| locked(cell).as_ref().map(|s| s.states())).ok_or_else(|| self.lent(py))?.py(py)?;
        count_copy();
        np_from_vec(py, states_to_words(&states), &[self.count as usize, 6])
    }
}

/// Weights and delays on the GPU, checked once (:meth:`DelayBeamformer.upload_steering`),
/// for :meth:`DelayBeamformer.beamform_steered` and streams.
#[pyclass(name = "DeviceSteering", module = "radio_kernels", frozen)]
pub struct PyDeviceSteering {
    steering: DeviceSteering,
}

/// A delay beamformer of one configuration on one GPU (``DelayBeamformer(gpu, config)``);
/// raises :class:`InvalidConfigError` for a configuration the GPU cannot run.
#[pyclass(name = "DelayBeamformer", module = "radio_kernels", frozen)]
pub struct PyDelayBeamformer {
    inner: Arc<Launcher>,
    gpu: Py<PyGpu>,
}

impl PyDelayBeamformer {
    /// The dither buffer of `dither`, locked, and the run of `f` with it (GIL released).
    #[allow(clippy::too_many_arguments)]
    fn launch<'py>(
        &self,
        py: Python<'py>,
        input: &Bound<'py, PyAny>,
        steering: Steering<'_, 'py>,
        dither: Option<&PyDitherState>,
        out: Option<&Bound<'py, PyAny>>,
        saturated: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let launcher = self.inner.get();
        let gpu: &Gpu = self.inner.owner();
        let c = launcher.config();
        let x = array_in::<i8>(input, "input", &x_shape(c))?;
        let device = on_device(&x);
        let mut y = output::<i8>(py, gpu, out, device, "out", &y_shape(c))?;
        let mut s = output::<u32>(py, gpu, saturated, device, "saturated", &[c.beams.len()])?;
        let returned = (y.object(), s.object());
        let (sx, dy, ds) = (src(&x)?, dst(&mut y)?, dst(&mut s)?);
        let dither = dither.map(|d| &*d.state);
        let steer = match &steering {
            Steering::Arrays(w, d) => {
                let shape = steering_shape(c);
                Some((array_in::<Complex<f32>>(w, "weights", &shape)?, array_in::<f32>(d, "delays", &shape)?))
            }
            Steering::Device(_) => None,
        };
        let steer_src = match &steer {
            Some((w, d)) => Some((src(w)?, src(d)?)),
            None => None,
        };
        let device_steering = match &steering {
            Steering::Device(s) => Some(&s.steering),
            Steering::Arrays(..) => None,
        };
        let lent = std::sync::atomic::AtomicBool::new(false);
        let result = py.detach(|| -> Result<(), Error> {
            let xb = sx.buffer::<Complex<i8>>(gpu)?;
            let mut yb = dy.buffer::<Complex<i8>>(gpu)?;
            let mut sb = ds.buffer::<u32>(gpu)?;
            let mut guard = dither.map(|d| locked(d));
            let state = match guard.as_mut() {
                Some(g) => match g.as_mut() {
                    Some(state) => Some(state),
                    None => {
                        lent.store(true, std::sync::atomic::Ordering::Relaxed);
                        return Ok(());
                    }
                },
                None => None,
            };
            match (&steer_src, device_steering) {
                (Some((w, d)), _) => {
                    let (wb, db) = (w.buffer::<Complex<f32>>(gpu)?, d.buffer::<f32>(gpu)?);
                    launcher.beamform(&xb, &wb, &db, state, &mut yb, &mut sb)?;
                }
                (None, Some(steering)) => {
                    launcher.beamform_steered(&xb, steering, state, &mut yb, &mut sb)?
                }
                (None, None) => unreachable!("steering is given"),
            }
            launcher.stream().synchronize().during("waiting for the launch")?;
            dy.finish(launcher.stream(), &yb)?;
            ds.finish(launcher.stream(), &sb)
        });
        if lent.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(invalid(
                py,
                "the dither state is in use by a DelayStream (drop the stream to get it back)".into(),
            ));
        }
        result.py(py)?;
        drop((x, y, s, steer));
        Ok(returned)
    }
}

enum Steering<'a, 'py> {
    Arrays(&'a Bound<'py, PyAny>, &'a Bound<'py, PyAny>),
    Device(&'a PyDeviceSteering),
}

#[pymethods]
impl PyDelayBeamformer {
    #[new]
    fn new(py: Python<'_>, gpu: Bound<'_, PyGpu>, config: &PyDelayConfig) -> PyResult<Self> {
        let config = config.config.clone();
        let owner = gpu.get().gpu.clone();
        // SAFETY: the launcher keeps the GPU reference to itself.
        let tied =
            py.detach(|| unsafe { Tied::new(owner, |gpu| DelayBeamformer::new(gpu, config)) }).py(py)?;
        Ok(PyDelayBeamformer { inner: Arc::new(tied), gpu: gpu.unbind() })
    }
    /// The configuration.
    #[getter]
    fn config(&self) -> PyDelayConfig {
        PyDelayConfig { config: self.inner.get().config().clone() }
    }
    /// The launch plan chosen for this GPU.
    #[getter]
    fn plan(&self) -> PyPlan {
        PyPlan { plan: self.inner.get().plan().clone() }
    }
    /// The GPU this beamformer runs on.
    #[getter]
    fn gpu(&self, py: Python<'_>) -> Py<PyGpu> {
        self.gpu.clone_ref(py)
    }
    /// New dither states for this beamformer's plan: state i starts as
    /// ``curand_init(seed, first_subsequence + i, offset)``.
    #[pyo3(signature = (seed, first_subsequence = 0, offset = 0))]
    fn dither_state(
        &self,
        py: Python<'_>,
        seed: u64,
        first_subsequence: u64,
        offset: u64,
    ) -> PyResult<PyDitherState> {
        let launcher = self.inner.get();
        let state = py.detach(|| launcher.dither_state(seed, first_subsequence, offset)).py(py)?;
        Ok(PyDitherState {
            count: state.count(),
            seed,
            first_subsequence,
            state: Arc::new(Mutex::new(Some(state))),
        })
    }
    /// Checks ``weights`` (complex64 ``[antennas][beams]``) and ``delays`` (float32, same
    /// shape) and uploads them (:class:`NonFiniteError` for NaN, infinity or f32 overflow in
    /// the kernel's steering).
    fn upload_steering(
        &self,
        py: Python<'_>,
        weights: &Bound<'_, PyAny>,
        delays: &Bound<'_, PyAny>,
    ) -> PyResult<PyDeviceSteering> {
        let launcher = self.inner.get();
        let (w, d) = steering_host(launcher.config(), weights, delays)?;
        let steering = py
            .detach(|| {
                let s = launcher.upload_steering(&w, &d)?;
                launcher.stream().synchronize().during("waiting for the steering upload")?;
                Ok(s)
            })
            .py(py)?;
        count_copy();
        count_copy();
        Ok(PyDeviceSteering { steering })
    }
    /// One launch: ``(y, saturated)``, y int8 ``[beams][channels][times][2]`` and the
    /// per-beam saturation counts (uint32 ``[beams]``) of ``input`` (int8
    /// ``[antennas][channels][times][pols][2]``) with ``weights`` and ``delays`` (checked on
    /// every call). ``dither`` (from :meth:`dither_state`) is required when a beam is
    /// dithered, and advances. Arrays are numpy (copied) or device arrays (used in place;
    /// with a device ``input``, ``out=None`` / ``saturated=None`` give CuPy arrays).
    #[pyo3(signature = (input, weights, delays, dither = None, out = None, saturated = None))]
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn beamform<'py>(
        &self,
        py: Python<'py>,
        input: &Bound<'py, PyAny>,
        weights: &Bound<'py, PyAny>,
        delays: &Bound<'py, PyAny>,
        dither: Option<PyRef<'py, PyDitherState>>,
        out: Option<&Bound<'py, PyAny>>,
        saturated: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        self.launch(py, input, Steering::Arrays(weights, delays), dither.as_deref(), out, saturated)
    }
    /// As :meth:`beamform` with steering from :meth:`upload_steering` (no check, no wait).
    #[pyo3(signature = (input, steering, dither = None, out = None, saturated = None))]
    #[allow(clippy::type_complexity)]
    fn beamform_steered<'py>(
        &self,
        py: Python<'py>,
        input: &Bound<'py, PyAny>,
        steering: PyRef<'py, PyDeviceSteering>,
        dither: Option<PyRef<'py, PyDitherState>>,
        out: Option<&Bound<'py, PyAny>>,
        saturated: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        self.launch(py, input, Steering::Device(&steering), dither.as_deref(), out, saturated)
    }
    /// The streaming engine: x chunks (numpy) in, ``(y, saturated)`` out, with ``depth``
    /// input and output slots, starting with a copy of ``steering``. It takes ``dither``
    /// (required when a beam is dithered) for its lifetime and advances it as consecutive
    /// :meth:`beamform_steered` calls would; the state is usable again once the stream is
    /// dropped.
    #[pyo3(signature = (steering, dither = None, depth = 3))]
    fn streaming(
        &self,
        py: Python<'_>,
        steering: PyRef<'_, PyDeviceSteering>,
        dither: Option<PyRef<'_, PyDitherState>>,
        depth: usize,
    ) -> PyResult<PyDelayStream> {
        let home = dither.as_ref().map(|d| d.state.clone());
        let taken = match &home {
            Some(cell) => Some(
                locked(cell)
                    .take()
                    .ok_or_else(|| dither.as_ref().map(|d| d.lent(py)).expect("dither given"))?,
            ),
            None => None,
        };
        let launcher = self.inner.clone();
        let steering = &steering.steering;
        // The state lives on the heap at a fixed address until `StreamCell::drop` takes it
        // back; the engine holds the only reference to it meanwhile.
        let state: Option<*mut DitherState> = taken.map(|s| Box::into_raw(Box::new(s)));
        let address = state.map(|p| p as usize);
        let made = py.detach(|| {
            // SAFETY: `launcher` (an Arc kept in the cell) outlives the engine, and the state
            // pointer is valid and unaliased until the cell drops the engine and reclaims it.
            let b: &'static DelayBeamformer<'static> = unsafe { &*(launcher.get() as *const _) };
            let dither = address.map(|p| unsafe { &mut *(p as *mut DitherState) });
            b.streaming(steering, dither, depth)
        });
        match made {
            Ok(engine) => Ok(PyDelayStream {
                config: self.inner.get().config().clone(),
                cell: Mutex::new(StreamCell {
                    engine: std::mem::ManuallyDrop::new(engine),
                    state: state.map(SendPtr),
                    home,
                    _launcher: launcher,
                }),
            }),
            Err(e) => {
                if let (Some(p), Some(cell)) = (state, &home) {
                    // SAFETY: the engine was not made, so nothing else holds the pointer.
                    let s = unsafe { Box::from_raw(p) };
                    *locked(cell) = Some(*s);
                }
                Err(crate::errors::to_py(py, e))
            }
        }
    }
    fn __repr__(&self) -> String {
        format!(
            "<radio_kernels.DelayBeamformer {} on {}>",
            PyDelayConfig { config: self.inner.get().config().clone() }.__repr__(),
            self.inner.owner().name()
        )
    }
}

struct SendPtr(*mut DitherState);
// SAFETY: the pointer is only dereferenced by the engine (used under the stream's mutex) and
// by `StreamCell::drop`; a `DitherState` is `Send`.
unsafe impl Send for SendPtr {}

/// The engine, the dither state it borrows (boxed) and the launcher it borrows (an `Arc`):
/// dropped in that order, the state returned to its `DitherState` object.
struct StreamCell {
    engine: std::mem::ManuallyDrop<DelayStream<'static, 'static>>,
    state: Option<SendPtr>,
    home: Option<Arc<Mutex<Option<DitherState>>>>,
    _launcher: Arc<Launcher>,
}

impl Drop for StreamCell {
    fn drop(&mut self) {
        // SAFETY: dropped once, here; nothing uses the engine afterwards.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.engine) };
        if let (Some(SendPtr(p)), Some(home)) = (self.state.take(), &self.home) {
            // SAFETY: the engine, the only user of the pointer, is gone.
            let state = unsafe { Box::from_raw(p) };
            *locked(home) = Some(*state);
        }
    }
}

/// The streaming delay beamformer (``beamformer.streaming(steering, dither, depth)``): the
/// upload of chunk k + 1, the beamforming of chunk k and the download of chunk k - 1
/// overlap. Chunk k equals the k-th of consecutive :meth:`DelayBeamformer.beamform_steered`
/// calls with the same steering and dither state. Used from one thread at a time; the GIL is
/// released while it works.
#[pyclass(name = "DelayStream", module = "radio_kernels", frozen)]
pub struct PyDelayStream {
    config: DelayBeamformerConfig,
    cell: Mutex<StreamCell>,
}

impl PyDelayStream {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut DelayStream<'static, 'static>) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        let cell = &self.cell;
        py.detach(|| f(&mut locked(cell).engine)).py(py)
    }
}

#[pymethods]
impl PyDelayStream {
    /// The next input slot as a writeable numpy int8 ``[antennas][channels][times][pols][2]``
    /// view of the engine's pinned memory (waiting for that slot only): fill it in place,
    /// then :meth:`submit` with no argument. No copy.
    fn input<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let this = slf.get();
        let (ptr, len) = this.with(slf.py(), |s| {
            let slot = s.input()?;
            Ok((slot.as_mut_ptr() as usize, 2 * slot.len()))
        })?;
        // SAFETY: the pinned slot is allocated with the engine, which `slf` owns, and never
        // moves; `len` int8 values are the slot's `len / 2` complex int8 values.
        unsafe { slot_view::<i8>(slf.clone().into_any(), ptr as *mut i8, len, &x_shape(&this.config), true) }
    }
    /// The oldest output not yet taken as read-only numpy views of the engine's pinned output
    /// slot, ``(y, saturated)`` (int8 ``[beams][channels][times][2]``, uint32 ``[beams]``), or
    /// None: no copy. Valid until the next :meth:`output` or :meth:`output_view`; copy what
    /// must be kept.
    #[allow(clippy::type_complexity)]
    fn output_view<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
        let this = slf.get();
        let taken = this.with(slf.py(), |s| {
            Ok(s.output()?.map(|o| {
                (
                    o.beams.as_ptr() as usize,
                    2 * o.beams.len(),
                    o.saturated.as_ptr() as usize,
                    o.saturated.len(),
                )
            }))
        })?;
        let Some((y, y_len, n, n_len)) = taken else { return Ok(None) };
        let owner = slf.clone().into_any();
        let c = &this.config;
        // SAFETY: as for `input`: the pinned output slot lives, unmoved, with the engine.
        unsafe {
            Ok(Some((
                slot_view::<i8>(owner.clone(), y as *mut i8, y_len, &y_shape(c), false)?,
                slot_view::<u32>(owner, n as *mut u32, n_len, &[c.beams.len()], false)?,
            )))
        }
    }
    /// Submits one chunk of x: with ``x`` (numpy int8 ``[antennas][channels][times][pols][2]``)
    /// a copy of it; without, the slot :meth:`input` returned, filled in place (no copy). The
    /// chunk is uploaded, beamformed and downloaded. Raises :class:`BacklogError` (changing
    /// nothing) when every output slot holds an output not taken.
    #[pyo3(signature = (x = None))]
    fn submit(&self, py: Python<'_>, x: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let Some(x) = x else {
            return self.with(py, |s| s.submit());
        };
        let x = host_in::<i8>(x, "x", &x_shape(&self.config))?;
        let samples: &[Complex<i8>] = bytemuck::cast_slice(x.as_slice()?);
        self.with(py, |s| {
            s.input()?.copy_from_slice(samples);
            s.submit()
        })?;
        count_copy();
        Ok(())
    }
    /// The oldest output not yet taken, ``(y, saturated)`` (int8 ``[beams][channels][times]
    /// [2]``, uint32 ``[beams]``), or None.
    #[allow(clippy::type_complexity)]
    fn output<'py>(&self, py: Python<'py>) -> PyResult<Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
        if self.with(py, |s| Ok(s.pending()))? == 0 {
            return Ok(None);
        }
        let c = &self.config;
        let mut y = new_host::<i8>(py, &y_shape(c))?;
        let mut counts = new_host::<u32>(py, &[c.beams.len()])?;
        let (yh, sh): (&mut [i8], &mut [u32]) = (y.as_slice_mut()?, counts.as_slice_mut()?);
        let taken = self.with(py, move |s| {
            Ok(match s.output()? {
                Some(o) => {
                    yh.copy_from_slice(bytemuck::cast_slice(o.beams));
                    sh.copy_from_slice(o.saturated);
                    true
                }
                None => false,
            })
        })?;
        if !taken {
            return Ok(None);
        }
        count_copy();
        Ok(Some((y.as_any().clone(), counts.as_any().clone())))
    }
    /// Replaces the steering from numpy ``weights`` and ``delays`` (checked first): chunks
    /// submitted before use the old steering, chunks after the new.
    fn set_steering(
        &self,
        py: Python<'_>,
        weights: &Bound<'_, PyAny>,
        delays: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (w, d) = steering_host(&self.config, weights, delays)?;
        self.with(py, |s| s.set_steering(&w, &d))?;
        count_copy();
        Ok(())
    }
    /// Replaces the steering with a copy of ``steering`` (device to device).
    fn set_device_steering(&self, py: Python<'_>, steering: PyRef<'_, PyDeviceSteering>) -> PyResult<()> {
        let steering = &steering.steering;
        self.with(py, |s| s.set_device_steering(steering))
    }
    /// Outputs enqueued and not yet taken.
    #[getter]
    fn pending(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |s| Ok(s.pending()))
    }
    /// Chunks submitted since the start.
    #[getter]
    fn submitted(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |s| Ok(s.submitted()))
    }
    /// Input (and output) slots.
    #[getter]
    fn depth(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |s| Ok(s.depth()))
    }
    /// Waits for everything enqueued so far.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |s| s.synchronize())
    }
}

/// Adds the delay beamformer's classes and functions to the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyBeam>()?;
    module.add_class::<PyDelayConfig>()?;
    module.add_class::<PyPlan>()?;
    module.add_class::<PyDitherState>()?;
    module.add_class::<PyDeviceSteering>()?;
    module.add_class::<PyDelayBeamformer>()?;
    module.add_class::<PyDelayStream>()?;
    module.add_function(wrap_pyfunction!(delay_beamform_reference, module)?)?;
    module.add_function(wrap_pyfunction!(coefficient_reference, module)?)?;
    module.add_function(wrap_pyfunction!(curand_init, module)?)?;
    module.add_function(wrap_pyfunction!(delay_reference_states, module)?)?;
    module.add_function(wrap_pyfunction!(dither_value, module)?)?;
    module.add_function(wrap_pyfunction!(engine_subsequence, module)?)?;
    Ok(())
}
