//! The correlator (X-engine): `CorrelatorConfig`, the one-shot `Correlator`, the streaming
//! `Integration`, the CPU reference `correlate_reference` and the baseline helpers.
//!
//! Formula and layouts (the Rust module `radio_kernels::correlator`):
//! `V[c][b(i,j)][pi][pj] = sum_t x[t][c][i][pi] * conj(x[t][c][j][pj])` for `i >= j` (the lower
//! triangle, autos included), `b(i,j) = i(i+1)/2 + j`.
//!
//! - Input, ``format="ci8"``: int8 ``[times][channels][stations][pols][2]`` (``order=
//!   "station_pol"``, xGPU/MWA) or ``[times][channels][pols][stations][2]`` (``"pol_station"``,
//!   CHORD), the trailing axis (re, im). ``format="ci4"``: uint8 without the trailing axis, one
//!   packed int4+4 sample per byte (:func:`pack_ci4`).
//! - Output: int32 ``[channels][baselines][pols][pols][2]`` per launch, int64 for integrations
//!   and the CPU reference.
use crate::arrays::{count_copy, host_in, host_out, new_host, one_shot, slot_view, Elem};
use crate::errors::{invalid, layout_error, shape_error, PyResultExt};
use crate::gpu::PyGpu;
use crate::tied::{locked, Tied};
use num_complex::Complex;
use pyo3::prelude::*;
use radio_kernels::correlator::{
    correlate_reference as reference, Correlator, CorrelatorConfig, Format, Integration, Order,
};
use radio_kernels::{Error, Gpu};
use std::sync::{Arc, Mutex};

fn parse_format(py: Python<'_>, format: &str) -> PyResult<Format> {
    match format {
        "ci8" => Ok(Format::Ci8),
        "ci4" => Ok(Format::Ci4),
        _ => Err(invalid(py, format!("format must be \"ci8\" or \"ci4\", got {format:?}"))),
    }
}

fn parse_order(py: Python<'_>, order: &str) -> PyResult<Order> {
    match order {
        "station_pol" => Ok(Order::StationPol),
        "pol_station" => Ok(Order::PolStation),
        _ => Err(invalid(py, format!("order must be \"station_pol\" or \"pol_station\", got {order:?}"))),
    }
}

/// A validated configuration from the Python arguments.
fn config(
    py: Python<'_>,
    stations: u32,
    pols: u32,
    channels: u32,
    times: u32,
    format: &str,
    order: &str,
) -> PyResult<CorrelatorConfig> {
    let config = CorrelatorConfig {
        stations,
        pols,
        channels,
        times,
        format: parse_format(py, format)?,
        order: parse_order(py, order)?,
    };
    config.validate().py(py)?;
    Ok(config)
}

fn input_shape(c: &CorrelatorConfig) -> Vec<usize> {
    let (t, ch, s, p) = (c.times as usize, c.channels as usize, c.stations as usize, c.pols as usize);
    let mut shape = match c.order {
        Order::StationPol => vec![t, ch, s, p],
        Order::PolStation => vec![t, ch, p, s],
    };
    if c.format == Format::Ci8 {
        shape.push(2);
    }
    shape
}

fn output_shape(c: &CorrelatorConfig) -> Vec<usize> {
    let p = c.pols as usize;
    vec![c.channels as usize, c.baselines() as usize, p, p, 2]
}

/// Reads the input of `c` from `object` (numpy only) as the bytes the kernels read.
fn host_input<'py>(c: &CorrelatorConfig, object: &Bound<'py, PyAny>) -> PyResult<HostInput<'py>> {
    Ok(match c.format {
        Format::Ci8 => HostInput::Ci8(host_in::<i8>(object, "input", &input_shape(c))?),
        Format::Ci4 => HostInput::Ci4(host_in::<u8>(object, "input", &input_shape(c))?),
    })
}

enum HostInput<'py> {
    Ci8(numpy::PyReadonlyArrayDyn<'py, i8>),
    Ci4(numpy::PyReadonlyArrayDyn<'py, u8>),
}

impl HostInput<'_> {
    fn bytes(&self) -> PyResult<&[u8]> {
        Ok(match self {
            HostInput::Ci8(a) => bytemuck::cast_slice(a.as_slice()?),
            HostInput::Ci4(a) => a.as_slice()?,
        })
    }
}

/// What one correlator launch correlates (validated on construction; raises
/// :class:`InvalidConfigError`).
///
/// ``stations`` 1..=65535, ``pols`` 1 or 2, ``channels`` 1..=65535, ``times`` a positive
/// multiple of 64 (at most 65472 for ci8, so int32 sums are exact), ``format`` ``"ci8"`` or
/// ``"ci4"``, ``order`` ``"station_pol"`` or ``"pol_station"``.
#[pyclass(name = "CorrelatorConfig", module = "radio_kernels", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PyCorrelatorConfig {
    pub config: CorrelatorConfig,
}

#[pymethods]
impl PyCorrelatorConfig {
    #[new]
    #[pyo3(signature = (stations, pols, channels, times, format = "ci8", order = "station_pol"))]
    fn new(
        py: Python<'_>,
        stations: u32,
        pols: u32,
        channels: u32,
        times: u32,
        format: &str,
        order: &str,
    ) -> PyResult<Self> {
        Ok(PyCorrelatorConfig { config: config(py, stations, pols, channels, times, format, order)? })
    }
    /// Stations (antennas).
    #[getter]
    fn stations(&self) -> u32 {
        self.config.stations
    }
    /// Polarisations per station.
    #[getter]
    fn pols(&self) -> u32 {
        self.config.pols
    }
    /// Frequency channels.
    #[getter]
    fn channels(&self) -> u32 {
        self.config.channels
    }
    /// Time samples per launch.
    #[getter]
    fn times(&self) -> u32 {
        self.config.times
    }
    /// ``"ci8"`` or ``"ci4"``.
    #[getter]
    fn format(&self) -> &'static str {
        match self.config.format {
            Format::Ci8 => "ci8",
            Format::Ci4 => "ci4",
        }
    }
    /// ``"station_pol"`` or ``"pol_station"``.
    #[getter]
    fn order(&self) -> &'static str {
        match self.config.order {
            Order::StationPol => "station_pol",
            Order::PolStation => "pol_station",
        }
    }
    /// Baselines ``N (N + 1) / 2``, autos included.
    #[getter]
    fn baselines(&self) -> u64 {
        self.config.baselines()
    }
    /// The input array's shape (see :attr:`input_dtype`).
    #[getter]
    fn input_shape(&self) -> Vec<usize> {
        input_shape(&self.config)
    }
    /// The input array's dtype: ``"int8"`` for ci8, ``"uint8"`` for ci4.
    #[getter]
    fn input_dtype(&self) -> &'static str {
        match self.config.format {
            Format::Ci8 => <i8 as Elem>::NAME,
            Format::Ci4 => <u8 as Elem>::NAME,
        }
    }
    /// The output's shape ``(channels, baselines, pols, pols, 2)`` (int32 per launch, int64
    /// integrated).
    #[getter]
    fn output_shape(&self) -> Vec<usize> {
        output_shape(&self.config)
    }
    /// Flat position of complex value ``V[channel][b(i, j)][pi][pj]`` (``i >= j``) in the
    /// output: ``output.reshape(-1, 2)[index]`` is (re, im). Raises
    /// :class:`InvalidConfigError` for an index out of range or ``i < j``.
    fn output_index(
        &self,
        py: Python<'_>,
        channel: u32,
        i: u32,
        j: u32,
        pi: u32,
        pj: u32,
    ) -> PyResult<usize> {
        let c = &self.config;
        for (what, value, limit) in [
            ("channel", channel, c.channels),
            ("i", i, c.stations),
            ("j", j, c.stations),
            ("pi", pi, c.pols),
            ("pj", pj, c.pols),
        ] {
            if value >= limit {
                return Err(invalid(py, format!("{what} = {value} is past the configuration's {limit}")));
            }
        }
        if i < j {
            return Err(invalid(
                py,
                format!("the output holds the lower triangle i >= j, got i = {i} < j = {j}"),
            ));
        }
        Ok(c.output_index(channel, i, j, pi, pj))
    }
    fn __repr__(&self) -> String {
        let c = &self.config;
        format!(
            "CorrelatorConfig(stations={}, pols={}, channels={}, times={}, format={:?}, order={:?})",
            c.stations,
            c.pols,
            c.channels,
            c.times,
            self.format(),
            self.order()
        )
    }
}

/// Index ``b(i, j) = i (i + 1) / 2 + j`` of baseline (i, j), ``i >= j`` (autos included);
/// raises :class:`InvalidConfigError` for ``i < j``.
#[pyfunction]
pub fn baseline_index(py: Python<'_>, i: u32, j: u32) -> PyResult<u64> {
    if i < j {
        return Err(invalid(py, format!("baselines are indexed with i >= j, got i = {i} < j = {j}")));
    }
    Ok(i as u64 * (i as u64 + 1) / 2 + j as u64)
}

/// The exact CPU reference: int64 ``[channels][baselines][pols][pols][2]`` from ``input``
/// (numpy, the layout of :class:`CorrelatorConfig`). Needs no GPU.
#[pyfunction]
#[pyo3(signature = (input, stations, pols, channels, times, format = "ci8", order = "station_pol"))]
#[allow(clippy::too_many_arguments)]
pub fn correlate_reference<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    stations: u32,
    pols: u32,
    channels: u32,
    times: u32,
    format: &str,
    order: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let c = config(py, stations, pols, channels, times, format, order)?;
    let input = host_input(&c, input)?;
    let bytes = input.bytes()?;
    let v = py.detach(|| reference(&c, bytes)).py(py)?;
    crate::arrays::host_from::<i64, Complex<i64>>(py, &v, &output_shape(&c))
}

/// The X-engine's corner turn (``radio_kernels.correlator.corner_turn`` of the Rust crate):
/// F-engine heaps ``heaps`` int8 ``[heap time][dish][channel][spectrum][pol][re, im]`` (a
/// chunk's heaps side by side, as received) into ``out``, the correlator input int8
/// ``[heap time x spectrum][channel][dish][pol][re, im]`` (ci8, station-major, 2 pols; e.g.
/// :meth:`Integration.input`): ``out[h S + s][c][d] = heaps[h][d][c][s]``. Cache-blocked, on
/// ``threads`` threads, with the GIL released. Both arrays C-contiguous and 4-byte aligned.
#[pyfunction]
#[pyo3(signature = (heaps, out, threads = 1))]
pub fn corner_turn(
    py: Python<'_>,
    heaps: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    threads: usize,
) -> PyResult<()> {
    let shape = crate::arrays::shape_of(heaps);
    if shape.len() != 6 || shape[4] != 2 || shape[5] != 2 {
        return Err(shape_error(
            py,
            "heaps",
            format!(
                "heaps has shape {}, expected (heap times, dishes, channels, spectra, 2, 2)",
                crate::arrays::shape_text(&shape)
            ),
        ));
    }
    let (h, d, c, s) = (shape[0], shape[1], shape[2], shape[3]);
    let heaps = host_in::<i8>(heaps, "heaps", &shape)?;
    let mut out = host_out::<i8>(out, "out", &[h * s, c, d, 2, 2])?;
    let aligned = |what: &str| layout_error(py, format!("{what} must be 4-byte aligned"));
    let src: &[u32] = bytemuck::try_cast_slice(heaps.as_slice()?).map_err(|_| aligned("heaps"))?;
    let dst: &mut [u32] = bytemuck::try_cast_slice_mut(out.as_slice_mut()?).map_err(|_| aligned("out"))?;
    py.detach(|| radio_kernels::correlator::corner_turn(src, dst, h, d, c, s, threads)).py(py)
}

/// A correlator of one configuration on one GPU (the arguments of
/// :class:`CorrelatorConfig`). Raises :class:`InvalidConfigError` for an invalid
/// configuration.
#[pyclass(name = "Correlator", module = "radio_kernels", frozen)]
pub struct PyCorrelator {
    inner: Arc<Tied<Gpu, Correlator<'static>>>,
    gpu: Py<PyGpu>,
}

#[pymethods]
impl PyCorrelator {
    #[new]
    #[pyo3(signature = (gpu, stations, pols, channels, times, format = "ci8", order = "station_pol"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        gpu: Bound<'_, PyGpu>,
        stations: u32,
        pols: u32,
        channels: u32,
        times: u32,
        format: &str,
        order: &str,
    ) -> PyResult<Self> {
        let config = config(py, stations, pols, channels, times, format, order)?;
        let owner = gpu.get().gpu.clone();
        // SAFETY: the correlator keeps the GPU reference to itself.
        let tied = py.detach(|| unsafe { Tied::new(owner, |gpu| Correlator::new(gpu, config)) }).py(py)?;
        Ok(PyCorrelator { inner: Arc::new(tied), gpu: gpu.unbind() })
    }
    /// The configuration.
    #[getter]
    fn config(&self) -> PyCorrelatorConfig {
        PyCorrelatorConfig { config: *self.inner.get().config() }
    }
    /// The GPU this correlator runs on.
    #[getter]
    fn gpu(&self, py: Python<'_>) -> Py<PyGpu> {
        self.gpu.clone_ref(py)
    }
    /// The name of the kernel this configuration runs.
    #[getter]
    fn kernel(&self) -> &'static str {
        self.inner.get().kernel().spec.name
    }

    /// One launch: int32 ``[channels][baselines][pols][pols][2]`` from ``input`` (the layout
    /// of :class:`CorrelatorConfig`).
    ///
    /// ``input`` and ``out`` are numpy arrays (copied to and from the GPU) or device arrays
    /// with ``__cuda_array_interface__`` (CuPy, ...: used in place, no copy; their stream is
    /// synchronised before the launch and the launch is complete on return). With
    /// ``out=None`` the result is a new numpy array for a numpy input and a new CuPy array (on
    /// this GPU) for a device input. The GIL is released during the launch.
    #[pyo3(signature = (input, out = None))]
    fn correlate<'py>(
        &self,
        py: Python<'py>,
        input: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let correlator = self.inner.get();
        let c = *correlator.config();
        let (in_shape, out_shape) = (input_shape(&c), output_shape(&c));
        let gpu: &Gpu = self.inner.owner();
        let launch = |i: &radio_kernels::DeviceBuffer<u8>,
                      o: &mut radio_kernels::DeviceBuffer<Complex<i32>>| {
            correlator.correlate(i, o)
        };
        match c.format {
            Format::Ci8 => one_shot::<i8, u8, i32, Complex<i32>>(
                py,
                gpu,
                correlator.stream(),
                (input, "input", &in_shape),
                (out, "out", &out_shape),
                launch,
            ),
            Format::Ci4 => one_shot::<u8, u8, i32, Complex<i32>>(
                py,
                gpu,
                correlator.stream(),
                (input, "input", &in_shape),
                (out, "out", &out_shape),
                launch,
            ),
        }
    }

    /// The streaming X-engine: submit chunks (numpy arrays of the input layout), get int64
    /// integrations of ``chunks_per_integration`` chunks (0: one integration, until
    /// :meth:`Integration.finish`). ``depth`` input and output slots (3 overlap the upload,
    /// the kernel and the download).
    #[pyo3(signature = (chunks_per_integration = 0, depth = 3))]
    fn integration(
        &self,
        py: Python<'_>,
        chunks_per_integration: usize,
        depth: usize,
    ) -> PyResult<PyIntegration> {
        let owner = self.inner.clone();
        // SAFETY: the engine keeps the correlator reference to itself.
        let engine = py
            .detach(|| unsafe { Tied::new(owner, |c| c.get().streaming(chunks_per_integration, depth)) })
            .py(py)?;
        Ok(PyIntegration { config: *self.inner.get().config(), engine: Mutex::new(engine) })
    }

    fn __repr__(&self) -> String {
        format!(
            "<radio_kernels.Correlator {} on {}>",
            PyCorrelatorConfig { config: *self.inner.get().config() }.__repr__(),
            self.inner.owner().name()
        )
    }
}

type Engine = Tied<Tied<Gpu, Correlator<'static>>, Integration<'static, 'static>>;

/// The streaming X-engine of a :class:`Correlator` (``correlator.integration(...)``): the
/// upload of one chunk, the correlation of the one before and the download of a finished
/// integration overlap. Used from one thread at a time; the GIL is released while it works.
#[pyclass(name = "Integration", module = "radio_kernels", frozen)]
pub struct PyIntegration {
    config: CorrelatorConfig,
    engine: Mutex<Engine>,
}

impl PyIntegration {
    /// Runs `f` on the engine with the GIL released (the lock is taken after releasing it,
    /// so a second Python thread waiting for the engine does not hold the GIL).
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Integration<'static, 'static>) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        let engine = &self.engine;
        py.detach(|| {
            let mut engine = locked(engine);
            f(engine.get_mut())
        })
        .py(py)
    }

    /// Takes the oldest integration into a new numpy array, if `ready` says one is pending.
    fn take<'py>(&self, py: Python<'py>, finish: bool) -> PyResult<Option<Bound<'py, PyAny>>> {
        if !finish && self.with(py, |e| Ok(e.pending()))? == 0 {
            return Ok(None);
        }
        let mut array = new_host::<i64>(py, &output_shape(&self.config))?;
        let host: &mut [Complex<i64>] = bytemuck::cast_slice_mut(array.as_slice_mut()?);
        let taken = self.with(py, move |e| {
            if finish {
                host.copy_from_slice(&e.finish()?);
                return Ok(true);
            }
            Ok(match e.output()? {
                Some(v) => {
                    host.copy_from_slice(v);
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
}

#[pymethods]
impl PyIntegration {
    /// The next input slot as a writeable numpy view of the engine's pinned memory, in the
    /// correlator's input layout (int8 ``[..., 2]`` for ci8, uint8 for ci4), waiting for that
    /// slot only: fill it in place, then :meth:`submit` with no argument. No copy.
    fn input<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let this = slf.get();
        let (ptr, len) = this.with(slf.py(), |e| {
            let slot = e.input()?;
            Ok((slot.as_mut_ptr() as usize, slot.len()))
        })?;
        let (owner, shape) = (slf.clone().into_any(), input_shape(&this.config));
        // SAFETY: the pinned slot is allocated with the engine, which `slf` owns, and never
        // moves; `len` bytes are `len` u8 or `len` i8 values.
        unsafe {
            match this.config.format {
                Format::Ci8 => slot_view::<i8>(owner, ptr as *mut i8, len, &shape, true),
                Format::Ci4 => slot_view::<u8>(owner, ptr as *mut u8, len, &shape, true),
            }
        }
    }
    /// Submits one chunk: with ``chunk`` (numpy, the correlator's input layout), a copy of it
    /// into the next pinned input slot; without, the slot :meth:`input` returned, filled in
    /// place (no copy). The chunk is uploaded and its correlation added to the integration. Raises
    /// :class:`BacklogError` (changing nothing) when it would start an integration while
    /// every output slot holds one not yet taken.
    #[pyo3(signature = (chunk = None))]
    fn submit(&self, py: Python<'_>, chunk: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let Some(chunk) = chunk else {
            return self.with(py, |e| e.submit());
        };
        let chunk = host_input(&self.config, chunk)?;
        let bytes = chunk.bytes()?;
        self.with(py, |e| {
            e.input()?.copy_from_slice(bytes);
            e.submit()
        })?;
        count_copy();
        Ok(())
    }
    /// The oldest finished integration not yet taken, int64
    /// ``[channels][baselines][pols][pols][2]``, or None.
    fn output<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.take(py, false)
    }
    /// Ends the current integration now (its download is enqueued), if it holds a chunk.
    fn end_integration(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |e| e.end_integration())
    }
    /// Ends the current integration and returns it (earlier ones not yet taken are
    /// dropped); an integration of no chunks is all zeros.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.take(py, true)?.expect("finish always returns an integration"))
    }
    /// Integrations enqueued and not yet taken.
    #[getter]
    fn pending(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |e| Ok(e.pending()))
    }
    /// Chunks in the current integration.
    #[getter]
    fn submitted(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |e| Ok(e.submitted()))
    }
}

/// Adds the correlator's classes and functions to the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyCorrelatorConfig>()?;
    module.add_class::<PyCorrelator>()?;
    module.add_class::<PyIntegration>()?;
    module.add_function(wrap_pyfunction!(baseline_index, module)?)?;
    module.add_function(wrap_pyfunction!(correlate_reference, module)?)?;
    module.add_function(wrap_pyfunction!(corner_turn, module)?)?;
    Ok(())
}
