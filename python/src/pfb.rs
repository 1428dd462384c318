//! The PFB channelizer (F-engine; Merry, "Efficient channelization on a graphics processing
//! unit"): `ChannelizerConfig`, `DelayModel`, the `Channelizer` (`push` of digitiser chunks,
//! gains, delay models), the streaming `ChannelizerStream`, the f64 CPU reference
//! `channelize_reference`, and the sample packing helpers.
//!
//! Formula (the Rust module `radio_kernels::pfb`): spectrum m of polarisation p is the
//! 2n-point FFT of the FIR output `g[t] = sum_j x[s + t + 2n j] w[t + 2n j]` (window start
//! `s = 2 n m - coarse`), channels k < n kept, times `exp(j (phase - pi k fine / n))` and the
//! gain `G[p][k]`, then rounded half to even and saturated to +-127 (ci8) or +-7 (ci4).
//!
//! - Input chunk: uint8 ``[2][chunk_bytes]`` (per polarisation, ``chunk_samples`` samples of
//!   ``bits`` bits packed MSB first, as the digitiser sends them: :func:`pack_samples`), with
//!   packet arrival flags bool ``[2][chunk_packets]``.
//! - Output chunk (``[heap][channel][spectrum][pol]``): ci8 int8 ``[heaps_per_chunk]
//!   [channels][spectra_per_heap][2][2]`` (trailing re, im); ci4 uint8 ``[heaps_per_chunk]
//!   [channels][spectra_per_heap][2]``. Saturation counts uint32 ``[heaps_per_chunk][2]``,
//!   lost flags bool ``[spectra_per_chunk]`` and ``[heaps_per_chunk]``.
//! - Weights float32 ``[2 n taps]`` (``w[t + 2n j]``); gains complex64 ``[2][channels]``.
use crate::arrays::{array_in, count_copy, host_in, new_host, slot_view, synchronize_foreign, ArrayIn, Elem};
use crate::delay::{host_array, np_from_vec};
use crate::errors::{invalid, PyResultExt};
use crate::gpu::PyGpu;
use crate::tied::{locked, Tied};
use num_complex::Complex;
use pyo3::prelude::*;
use radio_kernels::pfb::{
    hann_sinc_weights as hann_sinc, pack_samples as pack, reference_chunk_from, unpack_sample, Channelizer,
    ChannelizerConfig, ChannelizerStream, DelayModel, OutputChunk, OutputFormat, PfbPath,
};
use radio_kernels::{Error, Gpu};
use std::sync::Mutex;

fn format_name(format: OutputFormat) -> &'static str {
    match format {
        OutputFormat::Ci4 => "ci4",
        _ => "ci8",
    }
}

fn output_shape(c: &ChannelizerConfig) -> Vec<usize> {
    let mut shape = vec![c.heaps_per_chunk as usize, c.channels as usize, c.spectra_per_heap as usize, 2];
    if c.output == OutputFormat::Ci8 {
        shape.push(2);
    }
    shape
}

/// What one channelizer (one antenna, two polarisations) computes; validated on
/// construction (:class:`InvalidConfigError`). Defaults are MeerKAT-like
/// (``ChannelizerConfig::new`` in Rust): 16 taps, 10 bits, 256 spectra per heap, one heap per
/// output chunk, 4096-sample packets, input chunks of one heap's samples (clamped to
/// 2**16..=2**24), int8 output, coarse delays up to 65536 samples.
///
/// ``channels`` a power of two in 64..=65536, ``taps`` 1..=32, ``bits`` 4, 8, 10, 12 or 16,
/// ``spectra_per_heap`` a positive multiple of 4, ``chunk_samples`` a positive multiple of
/// ``packet_samples`` and of 32, ``output`` ``"ci8"`` or ``"ci4"``.
#[pyclass(name = "ChannelizerConfig", module = "radio_kernels", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PyChannelizerConfig {
    pub config: ChannelizerConfig,
}

#[pymethods]
impl PyChannelizerConfig {
    #[new]
    #[pyo3(signature = (channels, taps = None, bits = None, spectra_per_heap = None, heaps_per_chunk = None,
        chunk_samples = None, packet_samples = None, max_delay = None, output = "ci8"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        channels: u32,
        taps: Option<u32>,
        bits: Option<u32>,
        spectra_per_heap: Option<u32>,
        heaps_per_chunk: Option<u32>,
        chunk_samples: Option<u32>,
        packet_samples: Option<u32>,
        max_delay: Option<u32>,
        output: &str,
    ) -> PyResult<Self> {
        let mut c = ChannelizerConfig::new(channels);
        c.taps = taps.unwrap_or(c.taps);
        c.bits = bits.unwrap_or(c.bits);
        c.spectra_per_heap = spectra_per_heap.unwrap_or(c.spectra_per_heap);
        c.heaps_per_chunk = heaps_per_chunk.unwrap_or(c.heaps_per_chunk);
        c.chunk_samples = chunk_samples.unwrap_or(c.chunk_samples);
        c.packet_samples = packet_samples.unwrap_or(c.packet_samples);
        c.max_delay = max_delay.unwrap_or(c.max_delay);
        c.output = match output {
            "ci8" => OutputFormat::Ci8,
            "ci4" => OutputFormat::Ci4,
            _ => return Err(invalid(py, format!("output must be \"ci8\" or \"ci4\", got {output:?}"))),
        };
        c.validate().py(py)?;
        Ok(PyChannelizerConfig { config: c })
    }
    /// Output channels n.
    #[getter]
    fn channels(&self) -> u32 {
        self.config.channels
    }
    /// PFB taps T.
    #[getter]
    fn taps(&self) -> u32 {
        self.config.taps
    }
    /// Input sample width in bits.
    #[getter]
    fn bits(&self) -> u32 {
        self.config.bits
    }
    /// Spectra per output heap S.
    #[getter]
    fn spectra_per_heap(&self) -> u32 {
        self.config.spectra_per_heap
    }
    /// Heaps per output chunk.
    #[getter]
    fn heaps_per_chunk(&self) -> u32 {
        self.config.heaps_per_chunk
    }
    /// Input samples per polarisation of one pushed chunk.
    #[getter]
    fn chunk_samples(&self) -> u32 {
        self.config.chunk_samples
    }
    /// Samples per input packet (the unit of lost-data flags).
    #[getter]
    fn packet_samples(&self) -> u32 {
        self.config.packet_samples
    }
    /// Largest |coarse delay| in samples.
    #[getter]
    fn max_delay(&self) -> u32 {
        self.config.max_delay
    }
    /// ``"ci8"`` or ``"ci4"``.
    #[getter]
    fn output(&self) -> &'static str {
        format_name(self.config.output)
    }
    /// Spectra of one output chunk.
    #[getter]
    fn spectra_per_chunk(&self) -> u64 {
        self.config.spectra_per_chunk()
    }
    /// Samples of one PFB window, ``2 n T`` (the weights' length).
    #[getter]
    fn window(&self) -> u64 {
        self.config.window()
    }
    /// Bytes of one pushed chunk per polarisation.
    #[getter]
    fn chunk_bytes(&self) -> usize {
        self.config.chunk_bytes()
    }
    /// Packets of one pushed chunk per polarisation.
    #[getter]
    fn chunk_packets(&self) -> usize {
        self.config.chunk_packets()
    }
    /// The most output chunks one push can complete.
    #[getter]
    fn max_outputs_per_push(&self) -> usize {
        self.config.max_outputs_per_push()
    }
    /// Shape of a pushed chunk, uint8: ``(2, chunk_bytes)``.
    #[getter]
    fn input_shape(&self) -> Vec<usize> {
        vec![2, self.config.chunk_bytes()]
    }
    /// Shape of the packet flags, bool: ``(2, chunk_packets)``.
    #[getter]
    fn flags_shape(&self) -> Vec<usize> {
        vec![2, self.config.chunk_packets()]
    }
    /// Shape of an output chunk's data: ``(heaps, channels, spectra_per_heap, 2, 2)`` int8
    /// (ci8) or ``(heaps, channels, spectra_per_heap, 2)`` uint8 (ci4).
    #[getter]
    fn output_shape(&self) -> Vec<usize> {
        output_shape(&self.config)
    }
    /// ``"int8"`` (ci8) or ``"uint8"`` (ci4).
    #[getter]
    fn output_dtype(&self) -> &'static str {
        match self.config.output {
            OutputFormat::Ci4 => <u8 as Elem>::NAME,
            _ => <i8 as Elem>::NAME,
        }
    }
    fn __repr__(&self) -> String {
        let c = &self.config;
        format!(
            "ChannelizerConfig(channels={}, taps={}, bits={}, spectra_per_heap={}, heaps_per_chunk={}, \
             chunk_samples={}, packet_samples={}, max_delay={}, output={:?})",
            c.channels,
            c.taps,
            c.bits,
            c.spectra_per_heap,
            c.heaps_per_chunk,
            c.chunk_samples,
            c.packet_samples,
            c.max_delay,
            self.output()
        )
    }
}

/// Linear delay and fringe-phase model of one polarisation: at stream sample
/// ``reference_sample`` the delay to apply is ``delay`` samples (changing by ``delay_rate``
/// samples per sample) and the fringe phase ``phase`` radians (``phase_rate`` radians per
/// sample). Evaluated at each window's nominal centre ``2 n m + n T``.
#[pyclass(name = "DelayModel", module = "radio_kernels", frozen, eq, from_py_object)]
#[derive(Clone, Copy, PartialEq)]
pub struct PyDelayModel {
    model: DelayModel,
}

#[pymethods]
impl PyDelayModel {
    #[new]
    #[pyo3(signature = (delay = 0.0, delay_rate = 0.0, phase = 0.0, phase_rate = 0.0, reference_sample = 0.0))]
    fn new(delay: f64, delay_rate: f64, phase: f64, phase_rate: f64, reference_sample: f64) -> Self {
        PyDelayModel { model: DelayModel { reference_sample, delay, delay_rate, phase, phase_rate } }
    }
    #[getter]
    fn delay(&self) -> f64 {
        self.model.delay
    }
    #[getter]
    fn delay_rate(&self) -> f64 {
        self.model.delay_rate
    }
    #[getter]
    fn phase(&self) -> f64 {
        self.model.phase
    }
    #[getter]
    fn phase_rate(&self) -> f64 {
        self.model.phase_rate
    }
    #[getter]
    fn reference_sample(&self) -> f64 {
        self.model.reference_sample
    }
    fn __repr__(&self) -> String {
        let m = &self.model;
        format!(
            "DelayModel(delay={}, delay_rate={}, phase={}, phase_rate={}, reference_sample={})",
            m.delay, m.delay_rate, m.phase, m.phase_rate, m.reference_sample
        )
    }
}

/// One output chunk of a channelizer: ``first_spectrum`` (stream index of its first
/// spectrum), ``data`` (see :attr:`ChannelizerConfig.output_shape`), ``saturated`` (uint32
/// ``[heaps][2]``), ``lost_spectra`` (bool ``[spectra_per_chunk]``), ``lost_heaps`` (bool
/// ``[heaps]``) and, from :func:`channelize_reference` only, ``values`` (complex128
/// ``[heaps][channels][spectra_per_heap][2]``, before quantisation; None otherwise).
#[pyclass(name = "PfbOutputChunk", module = "radio_kernels", frozen, get_all)]
pub struct PyOutputChunk {
    first_spectrum: i64,
    data: Py<PyAny>,
    saturated: Py<PyAny>,
    lost_spectra: Py<PyAny>,
    lost_heaps: Py<PyAny>,
    values: Option<Py<PyAny>>,
}

#[pymethods]
impl PyOutputChunk {
    fn __repr__(&self) -> String {
        format!("<radio_kernels.PfbOutputChunk first_spectrum={}>", self.first_spectrum)
    }
}

fn chunk_to_py(
    py: Python<'_>,
    c: &ChannelizerConfig,
    first_spectrum: i64,
    data: &[u8],
    saturated: Vec<u32>,
    lost_spectra: Vec<bool>,
    lost_heaps: Vec<bool>,
) -> PyResult<PyOutputChunk> {
    let shape = output_shape(c);
    let data = match c.output {
        OutputFormat::Ci4 => crate::arrays::host_from::<u8, u8>(py, data, &shape)?,
        _ => crate::arrays::host_from::<i8, u8>(py, data, &shape)?,
    };
    chunk_with_data(py, c, first_spectrum, data, saturated, lost_spectra, lost_heaps)
}

/// An output chunk whose `data` array (the configured dtype and `output_shape`) is already
/// made: a copy, or a view of a stream's pinned slot.
fn chunk_with_data(
    py: Python<'_>,
    c: &ChannelizerConfig,
    first_spectrum: i64,
    data: Bound<'_, PyAny>,
    saturated: Vec<u32>,
    lost_spectra: Vec<bool>,
    lost_heaps: Vec<bool>,
) -> PyResult<PyOutputChunk> {
    let heaps = c.heaps_per_chunk as usize;
    Ok(PyOutputChunk {
        first_spectrum,
        data: data.unbind(),
        saturated: np_from_vec(py, saturated, &[heaps, 2])?.unbind(),
        lost_spectra: np_from_vec(py, lost_spectra, &[c.spectra_per_chunk() as usize])?.unbind(),
        lost_heaps: np_from_vec(py, lost_heaps, &[heaps])?.unbind(),
        values: None,
    })
}

fn owned_chunk(py: Python<'_>, c: &ChannelizerConfig, o: OutputChunk) -> PyResult<PyOutputChunk> {
    chunk_to_py(py, c, o.first_spectrum, &o.data, o.saturated, o.lost_spectra, o.lost_heaps)
}

/// A chunk's packet flags (bool ``[2][chunk_packets]``; None: every packet arrived).
fn flags_in(c: &ChannelizerConfig, present: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<bool>> {
    Ok(match present {
        Some(p) => host_array::<bool>(p, "present", "bool", &[2, c.chunk_packets()])?.as_slice()?.to_vec(),
        None => vec![true; 2 * c.chunk_packets()],
    })
}

fn gains_in(c: &ChannelizerConfig, gains: &Bound<'_, PyAny>) -> PyResult<Vec<Complex<f32>>> {
    Ok(host_in::<Complex<f32>>(gains, "gains", &[2, c.channels as usize])?.as_slice()?.to_vec())
}

fn weights_in(c: &ChannelizerConfig, weights: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<f32>>> {
    weights
        .map(|w| Ok(host_in::<f32>(w, "weights", &[c.window() as usize])?.as_slice()?.to_vec()))
        .transpose()
}

fn check_pol(py: Python<'_>, pol: usize) -> PyResult<()> {
    if pol > 1 {
        return Err(invalid(py, format!("polarisation must be 0 or 1, got {pol}")));
    }
    Ok(())
}

/// The f64 CPU reference of the output chunk starting at spectrum ``first_spectrum``:
/// ``samples`` int32 ``[2][len]`` (per polarisation the stream from sample ``first_sample``,
/// a multiple of ``packet_samples``: 0 for the whole stream, whose samples before sample 0
/// are 0; later, only the samples the chunk's windows read), ``present`` bool
/// ``[2][packets]`` from packet ``first_sample / packet_samples`` (None: all arrived),
/// ``weights`` float32 ``[2 n T]`` (None: :func:`hann_sinc_weights`), ``gains`` complex64
/// ``[2][channels]`` (None: 1), ``models`` two :class:`DelayModel` (None: zero delay).
/// Returns a :class:`PfbOutputChunk` with ``values``. Needs no GPU.
#[pyfunction]
#[pyo3(signature = (config, samples, present = None, first_spectrum = 0, weights = None, gains = None, models = None, first_sample = 0))]
#[allow(clippy::too_many_arguments)]
pub fn channelize_reference(
    py: Python<'_>,
    config: &PyChannelizerConfig,
    samples: &Bound<'_, PyAny>,
    present: Option<&Bound<'_, PyAny>>,
    first_spectrum: i64,
    weights: Option<&Bound<'_, PyAny>>,
    gains: Option<&Bound<'_, PyAny>>,
    models: Option<(PyDelayModel, PyDelayModel)>,
    first_sample: i64,
) -> PyResult<PyOutputChunk> {
    let c = &config.config;
    let shape = crate::arrays::shape_of(samples);
    let len = if shape.len() == 2 { shape[1] } else { 0 };
    let s = host_in::<i32>(samples, "samples", &[2, len])?;
    let s = s.as_slice()?;
    let packets = len.div_ceil(c.packet_samples as usize);
    let flags = match present {
        Some(p) => {
            let shape = crate::arrays::shape_of(p);
            let n = if shape.len() == 2 { shape[1] } else { packets };
            host_array::<bool>(p, "present", "bool", &[2, n])?.as_slice()?.to_vec()
        }
        None => vec![true; 2 * packets],
    };
    let half = flags.len() / 2;
    let weights = weights_in(c, weights)?.unwrap_or_else(|| hann_sinc(c.channels, c.taps));
    let gains = match gains {
        Some(g) => gains_in(c, g)?,
        None => vec![Complex::new(1.0, 0.0); 2 * c.channels as usize],
    };
    let models = models.map_or([DelayModel::default(); 2], |(a, b)| [a.model, b.model]);
    let r = py
        .detach(|| {
            reference_chunk_from(
                c,
                &weights,
                &gains,
                &models,
                [&s[..len], &s[len..]],
                [&flags[..half], &flags[half..]],
                first_spectrum,
                first_sample,
            )
        })
        .py(py)?;
    let mut chunk = chunk_to_py(py, c, first_spectrum, &r.output, r.saturated, r.lost_spectra, r.lost_heaps)?;
    let mut values_shape = output_shape(c);
    values_shape.truncate(4);
    chunk.values = Some(np_from_vec(py, r.values, &values_shape)?.unbind());
    Ok(chunk)
}

/// The default PFB weights ``w[t + 2n j]`` (float32 ``[2 n taps]``): a Hann window times a
/// sinc whose main lobe spans one channel, normalised to unit sum of squares.
#[pyfunction]
pub fn hann_sinc_weights(py: Python<'_>, channels: u32, taps: u32) -> PyResult<Bound<'_, PyAny>> {
    let w = hann_sinc(channels, taps);
    if w.is_empty() {
        return Err(invalid(
            py,
            format!("hann_sinc_weights needs 1..=65536 channels and 1..=32 taps, got {channels} and {taps}"),
        ));
    }
    let n = w.len();
    np_from_vec(py, w, &[n])
}

/// Packs int32 samples (each in the signed ``bits``-bit range; any shape, flattened) MSB
/// first as the digitiser does: uint8 ``[ceil(len bits / 8)]``.
#[pyfunction]
pub fn pack_samples<'py>(
    py: Python<'py>,
    samples: &Bound<'py, PyAny>,
    bits: u32,
) -> PyResult<Bound<'py, PyAny>> {
    let shape = crate::arrays::shape_of(samples);
    let s = host_in::<i32>(samples, "samples", &shape)?;
    let s = s.as_slice()?;
    let bytes = py.detach(|| pack(s, bits)).py(py)?;
    let n = bytes.len();
    np_from_vec(py, bytes, &[n])
}

/// Unpacks ``count`` samples of ``bits`` bits (MSB first) from uint8 ``packed``: int32
/// ``[count]``.
#[pyfunction]
pub fn unpack_samples<'py>(
    py: Python<'py>,
    packed: &Bound<'py, PyAny>,
    bits: u32,
    count: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let shape = crate::arrays::shape_of(packed);
    let p = host_in::<u8>(packed, "packed", &shape)?;
    let p = p.as_slice()?;
    let values = (0..count).map(|i| unpack_sample(p, bits, i)).collect::<Result<Vec<i32>, Error>>().py(py)?;
    np_from_vec(py, values, &[count])
}

type Launcher = Tied<Gpu, Channelizer<'static>>;

/// What a channelizer was made with, to make a stream that starts like it.
#[derive(Clone)]
struct Settings {
    weights: Option<Vec<f32>>,
    gains: Option<Vec<Complex<f32>>>,
}

/// The F-engine of one antenna on one GPU (``Channelizer(gpu, config, weights=None)``;
/// weights float32 ``[2 n taps]`` or None for :func:`hann_sinc_weights`). Gains start at 1
/// and delay models at 0. The GIL is released while it works.
#[pyclass(name = "Channelizer", module = "radio_kernels", frozen)]
pub struct PyChannelizer {
    config: ChannelizerConfig,
    inner: Mutex<(Launcher, Settings)>,
    gpu: Py<PyGpu>,
}

impl PyChannelizer {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Channelizer<'static>) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        let inner = &self.inner;
        py.detach(|| f(locked(inner).0.get_mut())).py(py)
    }
}

#[pymethods]
impl PyChannelizer {
    #[new]
    #[pyo3(signature = (gpu, config, weights = None))]
    fn new(
        py: Python<'_>,
        gpu: Bound<'_, PyGpu>,
        config: &PyChannelizerConfig,
        weights: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let c = config.config.clone();
        let weights = weights_in(&c, weights)?;
        let owner = gpu.get().gpu.clone();
        let (cc, w) = (c.clone(), weights.clone());
        // SAFETY: the channelizer keeps the GPU reference to itself.
        let tied = py
            .detach(|| unsafe { Tied::new(owner, |gpu| Channelizer::new(gpu, cc, w.as_deref())) })
            .py(py)?;
        count_copy();
        Ok(PyChannelizer {
            config: c,
            inner: Mutex::new((tied, Settings { weights, gains: None })),
            gpu: gpu.unbind(),
        })
    }
    /// The configuration.
    #[getter]
    fn config(&self) -> PyChannelizerConfig {
        PyChannelizerConfig { config: self.config.clone() }
    }
    /// The GPU this channelizer runs on.
    #[getter]
    fn gpu(&self, py: Python<'_>) -> Py<PyGpu> {
        self.gpu.clone_ref(py)
    }
    /// ``"fused"`` (the one-launch cluster kernel) or ``"three_kernel"`` (FIR, cuFFT,
    /// post-processing).
    #[getter]
    fn path(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.with(py, |c| {
            Ok(match c.path() {
                PfbPath::Fused => "fused",
                _ => "three_kernel",
            })
        })
    }
    /// Names of the kernels one output chunk launches.
    #[getter]
    fn kernels(&self, py: Python<'_>) -> PyResult<Vec<&'static str>> {
        self.with(py, |c| Ok(c.kernels().iter().map(|k| k.name).collect()))
    }
    /// Sets the complex bandpass gains (complex64 ``[2][channels]``, finite, at most 2**32 in
    /// magnitude) from the next output chunk on.
    fn set_gains(&self, py: Python<'_>, gains: &Bound<'_, PyAny>) -> PyResult<()> {
        let g = gains_in(&self.config, gains)?;
        let inner = &self.inner;
        py.detach(|| {
            let mut guard = locked(inner);
            guard.0.get_mut().set_gains(&g)?;
            guard.1.gains = Some(g);
            Ok(())
        })
        .py(py)?;
        count_copy();
        Ok(())
    }
    /// Sets the delay model of polarisation ``pol`` (0 or 1) from the next output chunk on;
    /// :class:`NonFiniteError` for a NaN or infinite field.
    fn set_delay_model(&self, py: Python<'_>, pol: usize, model: PyDelayModel) -> PyResult<()> {
        check_pol(py, pol)?;
        self.with(py, |c| c.set_delay_model(pol, model.model))
    }
    /// The delay models of polarisations 0 and 1 the next output chunk will use.
    #[getter]
    fn delay_models(&self, py: Python<'_>) -> PyResult<(PyDelayModel, PyDelayModel)> {
        let [a, b] = self.with(py, |c| Ok(*c.delay_models()))?;
        Ok((PyDelayModel { model: a }, PyDelayModel { model: b }))
    }
    /// Appends one chunk per polarisation (uint8 ``[2][chunk_bytes]``, numpy or a device array
    /// such as CuPy's, which is copied device to device without passing the host) with its
    /// packet flags (bool ``[2][chunk_packets]``, None: all arrived) and returns every output
    /// chunk now complete (a list of :class:`PfbOutputChunk`, downloaded to numpy). A push is checked whole first: an
    /// invalid one (e.g. a delay past ``max_delay``) raises and changes nothing.
    #[pyo3(signature = (samples, present = None))]
    fn push(
        &self,
        py: Python<'_>,
        samples: &Bound<'_, PyAny>,
        present: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<PyOutputChunk>> {
        let c = &self.config;
        let (b, f) = (c.chunk_bytes(), c.chunk_packets());
        let array = array_in::<u8>(samples, "samples", &[2, b])?;
        let flags = flags_in(c, present)?;
        let flags = [&flags[..f], &flags[f..]];
        let chunks = match &array {
            ArrayIn::Host(host) => {
                // Read in place: the push uploads straight from the numpy array.
                let bytes = host.as_slice()?;
                let chunks = self.with(py, |ch| ch.push([&bytes[..b], &bytes[b..]], flags))?;
                count_copy();
                chunks
            }
            ArrayIn::Device(device) => {
                let (address, foreign) = (device.address, device.stream);
                let inner = &self.inner;
                py.detach(|| -> Result<Vec<OutputChunk>, Error> {
                    let mut guard = locked(inner);
                    let gpu = guard.0.owner().clone();
                    if let Some(stream) = foreign {
                        synchronize_foreign(&gpu, stream)?;
                    }
                    // SAFETY: `device` (the Python object owning the memory) is alive for the
                    // whole call; its stream was synchronised above, and the push copies the
                    // samples on the channelizer's stream before it returns.
                    let halves = unsafe {
                        [gpu.wrap_device::<u8>(address, b)?, gpu.wrap_device::<u8>(address + b as u64, b)?]
                    };
                    guard.0.get_mut().push_device([&halves[0], &halves[1]], flags)
                })
                .py(py)?
            }
        };
        drop(array);
        chunks
            .into_iter()
            .map(|o| {
                count_copy();
                owned_chunk(py, c, o)
            })
            .collect()
    }
    /// Starts a new stream at sample 0 (gains and delay models kept); clears a failure.
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |c| c.reset())
    }
    /// Why the stream stopped after a device error part-way through a push, or None.
    #[getter]
    fn failure(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.with(py, |c| Ok(c.failure().map(str::to_string)))
    }
    /// The streaming F-engine (:class:`ChannelizerStream`) with ``depth`` input slots: a new
    /// channelizer on the same GPU with this one's configuration, weights, gains and delay
    /// models, starting at sample 0 (this channelizer is unchanged).
    #[pyo3(signature = (depth = 3))]
    fn streaming(&self, py: Python<'_>, depth: usize) -> PyResult<PyChannelizerStream> {
        let inner = &self.inner;
        let config = self.config.clone();
        let engine = py
            .detach(|| {
                let guard = locked(inner);
                let (launcher, settings) = (&guard.0, guard.1.clone());
                let models = *launcher.get().delay_models();
                let owner = launcher.owner().clone();
                // SAFETY: the engine owns the channelizer, which keeps the GPU reference.
                unsafe {
                    Tied::new(owner, |gpu| {
                        let mut ch = Channelizer::new(gpu, config.clone(), settings.weights.as_deref())?;
                        if let Some(g) = &settings.gains {
                            ch.set_gains(g)?;
                        }
                        for (pol, m) in models.into_iter().enumerate() {
                            ch.set_delay_model(pol, m)?;
                        }
                        ch.streaming(depth)
                    })
                }
            })
            .py(py)?;
        Ok(PyChannelizerStream { config: self.config.clone(), engine: Mutex::new(engine) })
    }
    fn __repr__(&self) -> String {
        format!(
            "<radio_kernels.Channelizer {}>",
            PyChannelizerConfig { config: self.config.clone() }.__repr__()
        )
    }
}

type Engine = Tied<Gpu, ChannelizerStream<'static>>;

/// The streaming F-engine (``channelizer.streaming(depth)``): digitiser chunks in from
/// pinned slots, output chunks out, the copies overlapped with the kernels; the same bytes
/// as :meth:`Channelizer.push` on the same chunks. Used from one thread at a time; the GIL
/// is released while it works.
#[pyclass(name = "ChannelizerStream", module = "radio_kernels", frozen)]
pub struct PyChannelizerStream {
    config: ChannelizerConfig,
    engine: Mutex<Engine>,
}

impl PyChannelizerStream {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut ChannelizerStream<'static>) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        let engine = &self.engine;
        py.detach(|| f(locked(engine).get_mut())).py(py)
    }
}

#[pymethods]
impl PyChannelizerStream {
    /// Submits one chunk: with ``samples`` (uint8 ``[2][chunk_bytes]``) a copy of them into
    /// the next pinned slot; without, the slot :meth:`input` returned, filled in place (no
    /// copy). ``present``: its packet flags (bool ``[2][chunk_packets]``, None: all arrived).
    /// Checked whole first as :meth:`Channelizer.push`; :class:`BacklogError` (nothing
    /// changed) when the output slots it needs hold outputs not yet taken.
    #[pyo3(signature = (samples = None, present = None))]
    fn submit(
        &self,
        py: Python<'_>,
        samples: Option<&Bound<'_, PyAny>>,
        present: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let c = &self.config;
        let Some(samples) = samples else {
            // The samples are in the slot `input()` returned; only the flags are copied.
            let flags = flags_in(c, present)?;
            let f = c.chunk_packets();
            return self.with(py, |s| {
                let input = s.input()?;
                for (pol, slot) in input.present.into_iter().enumerate() {
                    slot.copy_from_slice(&flags[pol * f..(pol + 1) * f]);
                }
                s.submit()
            });
        };
        let bytes = host_in::<u8>(samples, "samples", &[2, c.chunk_bytes()])?;
        let bytes = bytes.as_slice()?;
        let flags = match present {
            Some(p) => Some(host_array::<bool>(p, "present", "bool", &[2, c.chunk_packets()])?),
            None => None,
        };
        let flags = match &flags {
            Some(f) => Some(f.as_slice()?),
            None => None,
        };
        let (b, f) = (c.chunk_bytes(), c.chunk_packets());
        self.with(py, |s| {
            let input = s.input()?;
            input.samples[0].copy_from_slice(&bytes[..b]);
            input.samples[1].copy_from_slice(&bytes[b..]);
            for (pol, slot) in input.present.into_iter().enumerate() {
                match flags {
                    Some(flags) => slot.copy_from_slice(&flags[pol * f..(pol + 1) * f]),
                    None => slot.fill(true),
                }
            }
            s.submit()
        })?;
        count_copy();
        Ok(())
    }
    /// The next input slot as two writeable numpy uint8 ``[chunk_bytes]`` views of the
    /// engine's pinned memory, one per polarisation (waiting for that slot only): fill them in
    /// place (e.g. ``sock.recv_into(views[0])``), then :meth:`submit` without samples. No copy.
    fn input<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let this = slf.get();
        let slots = this.with(slf.py(), |s| {
            let input = s.input()?;
            Ok(input.samples.map(|pol| (pol.as_mut_ptr() as usize, pol.len())))
        })?;
        let (owner, b) = (slf.clone().into_any(), this.config.chunk_bytes());
        // SAFETY: the pinned sample slots are allocated with the engine, which `slf` owns, and
        // never move.
        unsafe {
            Ok((
                slot_view::<u8>(owner.clone(), slots[0].0 as *mut u8, slots[0].1, &[b], true)?,
                slot_view::<u8>(owner, slots[1].0 as *mut u8, slots[1].1, &[b], true)?,
            ))
        }
    }
    /// The oldest output chunk not yet taken, its ``data`` a read-only numpy view of the
    /// engine's pinned output slot (no copy; the small flag and count arrays are copies), or
    /// None. The view is valid until the next :meth:`output` or :meth:`output_view`; copy
    /// what must be kept. :meth:`output` returns a copy instead.
    fn output_view<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<PyOutputChunk>> {
        let (this, py) = (slf.get(), slf.py());
        let c = &this.config;
        let taken = this.with(py, |s| {
            Ok(s.output()?.map(|o| {
                let data = (o.data.as_ptr() as usize, o.data.len());
                (o.first_spectrum, data, o.saturated.to_vec(), o.lost_spectra.to_vec(), o.lost_heaps.to_vec())
            }))
        })?;
        let Some((first, (ptr, len), saturated, lost_spectra, lost_heaps)) = taken else {
            return Ok(None);
        };
        let (owner, shape) = (slf.clone().into_any(), output_shape(c));
        // SAFETY: as for `input`: the pinned output slot lives, unmoved, with the engine.
        let data = unsafe {
            match c.output {
                OutputFormat::Ci4 => slot_view::<u8>(owner, ptr as *mut u8, len, &shape, false)?,
                _ => slot_view::<i8>(owner, ptr as *mut i8, len, &shape, false)?,
            }
        };
        chunk_with_data(py, c, first, data, saturated, lost_spectra, lost_heaps).map(Some)
    }
    /// The oldest output chunk not yet taken (:class:`PfbOutputChunk`), or None.
    fn output(&self, py: Python<'_>) -> PyResult<Option<PyOutputChunk>> {
        let c = &self.config;
        if self.with(py, |s| Ok(s.pending()))? == 0 {
            return Ok(None);
        }
        // One copy, from the pinned slot straight into the returned array.
        let shape = output_shape(c);
        let (mut ci4, mut ci8);
        let (data, host): (Bound<'_, PyAny>, &mut [u8]) = match c.output {
            OutputFormat::Ci4 => {
                ci4 = new_host::<u8>(py, &shape)?;
                (ci4.as_any().clone(), ci4.as_slice_mut()?)
            }
            _ => {
                ci8 = new_host::<i8>(py, &shape)?;
                (ci8.as_any().clone(), bytemuck::cast_slice_mut(ci8.as_slice_mut()?))
            }
        };
        let taken = self.with(py, move |s| {
            Ok(s.output()?.map(|o| {
                host.copy_from_slice(o.data);
                (o.first_spectrum, o.saturated.to_vec(), o.lost_spectra.to_vec(), o.lost_heaps.to_vec())
            }))
        })?;
        let Some((first, saturated, lost_spectra, lost_heaps)) = taken else {
            return Ok(None);
        };
        count_copy();
        chunk_with_data(py, c, first, data, saturated, lost_spectra, lost_heaps).map(Some)
    }
    /// Sets the gains (complex64 ``[2][channels]``) from the next output chunk computed.
    fn set_gains(&self, py: Python<'_>, gains: &Bound<'_, PyAny>) -> PyResult<()> {
        let g = gains_in(&self.config, gains)?;
        self.with(py, |s| s.set_gains(&g))?;
        count_copy();
        Ok(())
    }
    /// Sets the delay model of polarisation ``pol`` from the next output chunk computed.
    fn set_delay_model(&self, py: Python<'_>, pol: usize, model: PyDelayModel) -> PyResult<()> {
        check_pol(py, pol)?;
        self.with(py, |s| s.set_delay_model(pol, model.model))
    }
    /// Output chunks enqueued and not yet taken.
    #[getter]
    fn pending(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |s| Ok(s.pending()))
    }
    /// Output slots free now.
    #[getter]
    fn free_outputs(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |s| Ok(s.free_outputs()))
    }
    /// Input slots.
    #[getter]
    fn depth(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |s| Ok(s.depth()))
    }
    /// Output slots.
    #[getter]
    fn output_slots(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |s| Ok(s.output_slots()))
    }
    /// The most output chunks one submit can complete.
    #[getter]
    fn max_outputs_per_submit(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |s| Ok(s.max_outputs_per_submit()))
    }
    /// Why the stream stopped after a device error, or None.
    #[getter]
    fn failure(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.with(py, |s| Ok(s.failure().map(str::to_string)))
    }
    /// Drops the outputs not taken and starts a new stream at sample 0; clears a failure.
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |s| s.reset())
    }
}

/// Adds the channelizer's classes and functions to the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyChannelizerConfig>()?;
    module.add_class::<PyDelayModel>()?;
    module.add_class::<PyOutputChunk>()?;
    module.add_class::<PyChannelizer>()?;
    module.add_class::<PyChannelizerStream>()?;
    module.add_function(wrap_pyfunction!(channelize_reference, module)?)?;
    module.add_function(wrap_pyfunction!(hann_sinc_weights, module)?)?;
    module.add_function(wrap_pyfunction!(pack_samples, module)?)?;
    module.add_function(wrap_pyfunction!(unpack_samples, module)?)?;
    Ok(())
}
