//! The FRB beamformer (K. Smith, "CHORD FRB beamformer" design note, 2022): the first kernel
//! (`FrbConfig`, `FrbBeamformer`: E to intensities on the half-integer grid, sec. 4), the
//! tensor-core `ShortFft` (sec. 3), the resamplers to beams (`ResampleConfig` with
//! `Resampler` and `FusedResampler`, sec. 5.2; `FactorizedConfig` with `FactorizedResampler`,
//! sec. 5.3), the `Quantizer` (footnote 10), the chained `FrbStream`, and the CPU reference
//! of each.
//!
//! Layouts (the Rust module `radio_kernels::frb_beamformer`; complex f16 is float16 with a
//! trailing (re, im) axis, f16 is float16):
//!
//! - E: uint8 ci4 ``[times][freqs][2][dishes]``; dish map int32 ``[dishes][2]`` (grid
//!   ``(m, n)`` of each dish); weights float16 ``[freqs][2][M][N][2]``.
//! - I: float16 ``[freqs][times / t_ds][2M][2N]`` (first kernel), float64 from the reference.
//! - Short FFT: float16 ``[batch][N][2]`` to ``[batch][2N][2]`` (eq. 18, zero-padded DFT).
//! - Resampling: I float16 ``[channels][times][2M][2N]``, beam positions float32
//!   ``[channels][beams]`` (grid units of eq. 1), J float16 ``[channels][times][beams]``;
//!   factorized: positions float32 ``[channels][g]`` and ``[channels][g_prime]``, beam
//!   ``gamma g_prime + gamma'``.
//! - Quantiser: J float16 ``[channels][times][beams]``, scale and offset float32
//!   ``[channels][beams]``, codes uint8 ``[channels][beams][row_bytes]`` (``clamp(rne(fma(J,
//!   scale, offset)), 0, 255 or 15)``, 4-bit codes two per byte, earlier sample in the low
//!   nibble, rows padded to 16 bytes), clip counts uint32 ``[channels][beams]``.
//!
//! Float outputs are checked against the references by relative L2 (``FRB_REL_L2_BOUND``
//! for the first kernel, ``FFT_REL_L2_BOUND`` for the FFT); the quantiser is exact.
use crate::arrays::{array_in, count_copy, host_from, host_in, new_host, one_shot, shape_of, slot_view};
use crate::delay::{dst, np_from_vec, on_device, output, src};
use crate::errors::{invalid, shape_error, PyResultExt};
use crate::gpu::PyGpu;
use crate::tied::{locked, Tied};
use half::f16;
use num_complex::Complex;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use radio_kernels::frb_beamformer::factorized::{
    factorized_reference as factorized_ref, FactorizedConfig, FactorizedResampler,
};
use radio_kernels::frb_beamformer::quantize::{
    quantize_reference as quantize_ref, Format, QuantizeConfig, Quantizer,
};
use radio_kernels::frb_beamformer::resample::{
    resample_reference as resample_ref, u_function as u_fn, FusedResampler, ResampleConfig, Resampler,
};
use radio_kernels::frb_beamformer::{
    frb_intensity_reference as intensity_ref, padded_dft, unpack_c16, FrbBeamformer, FrbConfig,
    FrbResampling, FrbStream, ShortFft, FFT_REL_L2_BOUND, FRB_CASES, FRB_REL_L2_BOUND,
};
use radio_kernels::{Ci4, DeviceBuffer, DriverContext, Error, Gpu};
use std::sync::{Arc, Mutex};

/// The shape of a numpy array or of a device array's ``__cuda_array_interface__`` (empty
/// when neither; the dtype check that follows rejects it).
fn any_shape(object: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    if let Ok(interface) = object.getattr("__cuda_array_interface__") {
        if let Ok(dict) = interface.cast::<PyDict>() {
            if let Some(shape) = dict.get_item("shape")? {
                return shape.extract();
            }
        }
    }
    Ok(shape_of(object))
}

// ---------------------------------------------------------------------------------------
// First kernel.
// ---------------------------------------------------------------------------------------

/// One launch of the first FRB kernel (validated on construction; raises
/// :class:`InvalidConfigError`): ``(dishes, m, n)`` one of :func:`frb_cases`, ``freqs``
/// 1..=65535, ``times`` a positive multiple of the case's outer block and of ``t_ds``.
#[pyclass(name = "FrbConfig", module = "radio_kernels", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PyFrbConfig {
    config: FrbConfig,
}

fn e_shape(c: &FrbConfig) -> Vec<usize> {
    vec![c.times as usize, c.freqs as usize, 2, c.dishes as usize]
}
fn frb_weights_shape(c: &FrbConfig) -> Vec<usize> {
    vec![c.freqs as usize, 2, c.m as usize, c.n as usize, 2]
}
fn i_shape(c: &FrbConfig) -> Vec<usize> {
    vec![c.freqs as usize, c.out_times() as usize, 2 * c.m as usize, 2 * c.n as usize]
}

#[pymethods]
impl PyFrbConfig {
    #[new]
    #[pyo3(signature = (dishes, m, n, freqs, times, t_ds = 1))]
    fn new(py: Python<'_>, dishes: u32, m: u32, n: u32, freqs: u32, times: u32, t_ds: u32) -> PyResult<Self> {
        let config = FrbConfig { dishes, m, n, freqs, times, t_ds };
        config.validate().py(py)?;
        Ok(PyFrbConfig { config })
    }
    #[getter]
    fn dishes(&self) -> u32 {
        self.config.dishes
    }
    #[getter]
    fn m(&self) -> u32 {
        self.config.m
    }
    #[getter]
    fn n(&self) -> u32 {
        self.config.n
    }
    #[getter]
    fn freqs(&self) -> u32 {
        self.config.freqs
    }
    #[getter]
    fn times(&self) -> u32 {
        self.config.times
    }
    #[getter]
    fn t_ds(&self) -> u32 {
        self.config.t_ds
    }
    /// Downsampled samples per launch, ``times / t_ds``.
    #[getter]
    fn out_times(&self) -> u32 {
        self.config.out_times()
    }
    /// Shape of E, uint8 ci4: ``(times, freqs, 2, dishes)``.
    #[getter]
    fn e_shape(&self) -> Vec<usize> {
        e_shape(&self.config)
    }
    /// Shape of the weights, float16: ``(freqs, 2, m, n, 2)``.
    #[getter]
    fn weights_shape(&self) -> Vec<usize> {
        frb_weights_shape(&self.config)
    }
    /// Shape of I, float16: ``(freqs, out_times, 2m, 2n)``.
    #[getter]
    fn output_shape(&self) -> Vec<usize> {
        i_shape(&self.config)
    }
    fn __repr__(&self) -> String {
        let c = &self.config;
        format!(
            "FrbConfig(dishes={}, m={}, n={}, freqs={}, times={}, t_ds={})",
            c.dishes, c.m, c.n, c.freqs, c.times, c.t_ds
        )
    }
}

/// The compiled ``(dishes, m, n, outer_block)`` cases (Table 2 of Smith's FRB note).
#[pyfunction]
pub fn frb_cases() -> Vec<(u32, u32, u32, u32)> {
    FRB_CASES.iter().map(|c| (c.dishes, c.m, c.n, c.t_outer)).collect()
}

fn grid_in(py: Python<'_>, c: &FrbConfig, grid: &Bound<'_, PyAny>) -> PyResult<Vec<(u32, u32)>> {
    let g = host_in::<i32>(grid, "grid", &[c.dishes as usize, 2])?;
    g.as_slice()?
        .chunks_exact(2)
        .enumerate()
        .map(|(d, p)| match (u32::try_from(p[0]), u32::try_from(p[1])) {
            (Ok(m), Ok(n)) => Ok((m, n)),
            _ => {
                Err(invalid(py, format!("dish {d} is mapped to ({}, {}), a negative grid point", p[0], p[1])))
            }
        })
        .collect()
}

fn frb_weights_in(c: &FrbConfig, weights: &Bound<'_, PyAny>) -> PyResult<Vec<Complex<f16>>> {
    let w = host_in::<f16>(weights, "weights", &frb_weights_shape(c))?;
    Ok(bytemuck::cast_slice(w.as_slice()?).to_vec())
}

/// The f64 CPU reference of the first kernel (eqs. 50-51): I float64 ``[freqs][out_times]
/// [2m][2n]`` from E (uint8 ci4), the dish map (int32 ``[dishes][2]``) and the weights
/// (float16 ``[freqs][2][m][n][2]``). Needs no GPU.
#[pyfunction]
pub fn frb_intensity_reference<'py>(
    py: Python<'py>,
    config: &PyFrbConfig,
    e: &Bound<'py, PyAny>,
    grid: &Bound<'py, PyAny>,
    weights: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let c = &config.config;
    let map = grid_in(py, c, grid)?;
    let w = frb_weights_in(c, weights)?;
    let e = host_in::<u8>(e, "e", &e_shape(c))?;
    let e: &[Ci4] = Ci4::from_bytes(e.as_slice()?);
    let i = py.detach(|| intensity_ref(c, e, &map, &w)).py(py)?;
    np_from_vec(py, i, &i_shape(c))
}

type First = Tied<Gpu, FrbBeamformer<'static>>;

/// The first FRB kernel of one configuration on one GPU, with the dish map and weights on
/// the device (``FrbBeamformer(gpu, config, grid, weights)``).
#[pyclass(name = "FrbBeamformer", module = "radio_kernels", frozen)]
pub struct PyFrbBeamformer {
    inner: Arc<First>,
    gpu: Py<PyGpu>,
}

#[pymethods]
impl PyFrbBeamformer {
    #[new]
    fn new(
        py: Python<'_>,
        gpu: Bound<'_, PyGpu>,
        config: &PyFrbConfig,
        grid: &Bound<'_, PyAny>,
        weights: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let c = config.config;
        let map = grid_in(py, &c, grid)?;
        let w = frb_weights_in(&c, weights)?;
        let owner = gpu.get().gpu.clone();
        // SAFETY: the beamformer keeps the GPU reference to itself.
        let tied =
            py.detach(|| unsafe { Tied::new(owner, |gpu| FrbBeamformer::new(gpu, c, &map, &w)) }).py(py)?;
        count_copy();
        Ok(PyFrbBeamformer { inner: Arc::new(tied), gpu: gpu.unbind() })
    }
    /// The configuration.
    #[getter]
    fn config(&self) -> PyFrbConfig {
        PyFrbConfig { config: *self.inner.get().config() }
    }
    /// The GPU this beamformer runs on.
    #[getter]
    fn gpu(&self, py: Python<'_>) -> Py<PyGpu> {
        self.gpu.clone_ref(py)
    }
    /// One launch: I (float16 ``[freqs][out_times][2m][2n]``) from E (uint8 ci4
    /// ``[times][freqs][2][dishes]``); numpy in, numpy out; a device array in, CuPy out
    /// (no copy). Within ``FRB_REL_L2_BOUND`` of :func:`frb_intensity_reference`.
    #[pyo3(signature = (e, out = None))]
    fn beamform<'py>(
        &self,
        py: Python<'py>,
        e: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let b = self.inner.get();
        let c = *b.config();
        one_shot::<u8, Ci4, f16, f16>(
            py,
            self.inner.owner(),
            b.stream(),
            (e, "e", &e_shape(&c)),
            (out, "out", &i_shape(&c)),
            |e: &DeviceBuffer<Ci4>, i: &mut DeviceBuffer<f16>| b.beamform(e, i),
        )
    }
    /// The streaming FRB beamformer: this first kernel, ``resampler`` (a
    /// :class:`Resampler`, :class:`FusedResampler` or :class:`FactorizedResampler` with its
    /// beams set) and ``quantizer`` chained on the device, with the quantiser's ``scale``
    /// and ``offset`` (float32 ``[channels][beams]``) and ``depth`` slots. While the stream
    /// lives, the resampler's beams cannot be changed.
    #[pyo3(signature = (resampler, quantizer, scale, offset, depth = 3))]
    fn streaming(
        &self,
        py: Python<'_>,
        resampler: &Bound<'_, PyAny>,
        quantizer: PyRef<'_, PyQuantizer>,
        scale: &Bound<'_, PyAny>,
        offset: &Bound<'_, PyAny>,
        depth: usize,
    ) -> PyResult<PyFrbStream> {
        let stage = if let Ok(r) = resampler.cast::<PyResampler>() {
            Stage::Weights(locked(&r.get().cell).clone())
        } else if let Ok(r) = resampler.cast::<PyFusedResampler>() {
            Stage::Fused(locked(&r.get().cell).clone())
        } else if let Ok(r) = resampler.cast::<PyFactorizedResampler>() {
            Stage::Factorized(locked(&r.get().cell).clone())
        } else {
            return Err(crate::errors::dtype_error(
                py,
                format!(
                    "resampler must be a Resampler, FusedResampler or FactorizedResampler, got {}",
                    resampler.get_type().name()?
                ),
            ));
        };
        let q = *quantizer.inner.get().config();
        let (scale, offset) = levels_in(&q, scale, offset)?;
        let chain = Arc::new(Chain { first: self.inner.clone(), stage, quantizer: quantizer.inner.clone() });
        // SAFETY: the engine keeps the chain reference (three launchers, each an Arc in the
        // chain) to itself.
        let engine = py
            .detach(|| unsafe {
                Tied::new(chain, |chain| {
                    let resampling: FrbResampling<'static, 'static> = match &chain.stage {
                        Stage::Weights(r) => r.get().into(),
                        Stage::Fused(r) => r.get().into(),
                        Stage::Factorized(r) => r.get().into(),
                    };
                    FrbStream::new(
                        chain.first.get(),
                        resampling,
                        chain.quantizer.get(),
                        &scale,
                        &offset,
                        depth,
                    )
                })
            })
            .py(py)?;
        count_copy();
        Ok(PyFrbStream { first: *self.inner.get().config(), output: q, engine: Mutex::new(engine) })
    }
}

// ---------------------------------------------------------------------------------------
// Short FFT.
// ---------------------------------------------------------------------------------------

/// The tensor-core short FFT of length ``n`` (8, 12, 16, 20, 24, 28 or 32) on one GPU.
#[pyclass(name = "ShortFft", module = "radio_kernels", frozen)]
pub struct PyShortFft {
    inner: Tied<Gpu, ShortFft<'static>>,
}

#[pymethods]
impl PyShortFft {
    #[new]
    fn new(py: Python<'_>, gpu: Bound<'_, PyGpu>, n: u32) -> PyResult<Self> {
        let owner = gpu.get().gpu.clone();
        // SAFETY: the FFT keeps the GPU reference to itself.
        let inner = py.detach(|| unsafe { Tied::new(owner, |gpu| ShortFft::new(gpu, n)) }).py(py)?;
        Ok(PyShortFft { inner })
    }
    /// The FFT length N.
    #[getter]
    fn n(&self) -> u32 {
        self.inner.get().n()
    }
    /// FFTs ``x`` (float16 ``[batch][N][2]``) to ``y`` (float16 ``[batch][2N][2]``, eq. 18);
    /// numpy in, numpy out; a device array in, CuPy out. Within ``FFT_REL_L2_BOUND`` of
    /// :func:`short_fft_reference`.
    #[pyo3(signature = (x, out = None))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let fft = self.inner.get();
        let n = fft.n() as usize;
        let shape = any_shape(x)?;
        let batch = shape.first().copied().unwrap_or(0);
        if shape.len() != 3 || batch == 0 {
            return Err(shape_error(
                py,
                "x",
                format!(
                    "x has shape {}, expected (batch, {n}, 2) with batch >= 1",
                    crate::arrays::shape_text(&shape)
                ),
            ));
        }
        one_shot::<f16, Complex<f16>, f16, Complex<f16>>(
            py,
            self.inner.owner(),
            fft.stream(),
            (x, "x", &[batch, n, 2]),
            (out, "out", &[batch, 2 * n, 2]),
            |x: &DeviceBuffer<Complex<f16>>, y: &mut DeviceBuffer<Complex<f16>>| fft.run(x, y, batch),
        )
    }
}

/// The f64 zero-padded DFT of eq. 18 of each row of ``x`` (float16 ``[batch][N][2]``):
/// complex128 ``[batch][2N]``, ``y[q] = sum_m x[m] exp(j pi m q / N)``.
#[pyfunction]
pub fn short_fft_reference<'py>(py: Python<'py>, x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let shape = shape_of(x);
    if shape.len() != 3 || shape[2] != 2 || shape[1] == 0 {
        return Err(shape_error(
            py,
            "x",
            format!("x has shape {}, expected (batch, N, 2)", crate::arrays::shape_text(&shape)),
        ));
    }
    let a = host_in::<f16>(x, "x", &shape)?;
    let values: &[Complex<f16>] = bytemuck::cast_slice(a.as_slice()?);
    let n = shape[1];
    let y: Vec<Complex<f64>> = values
        .chunks_exact(n)
        .flat_map(|row| padded_dft(&unpack_c16(row)).into_iter().map(|(re, im)| Complex::new(re, im)))
        .collect();
    np_from_vec(py, y, &[shape[0], 2 * n])
}

// ---------------------------------------------------------------------------------------
// Resampling.
// ---------------------------------------------------------------------------------------

/// One resampling job (validated; :class:`InvalidConfigError`): ``channels`` 1..=65535,
/// ``times`` and ``beams`` positive, ``(m, n)`` one of the compiled grids.
#[pyclass(name = "ResampleConfig", module = "radio_kernels", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PyResampleConfig {
    config: ResampleConfig,
}

fn grid_intensity_shape(channels: u32, times: u32, m: u32, n: u32) -> Vec<usize> {
    vec![channels as usize, times as usize, 2 * m as usize, 2 * n as usize]
}
fn r_intensity_shape(c: &ResampleConfig) -> Vec<usize> {
    grid_intensity_shape(c.channels, c.times, c.m, c.n)
}
fn r_positions_shape(c: &ResampleConfig) -> Vec<usize> {
    vec![c.channels as usize, c.beams as usize]
}
fn r_output_shape(c: &ResampleConfig) -> Vec<usize> {
    vec![c.channels as usize, c.times as usize, c.beams as usize]
}

#[pymethods]
impl PyResampleConfig {
    #[new]
    fn new(py: Python<'_>, channels: u32, times: u32, m: u32, n: u32, beams: u32) -> PyResult<Self> {
        let config = ResampleConfig { channels, times, m, n, beams };
        config.validate().py(py)?;
        Ok(PyResampleConfig { config })
    }
    #[getter]
    fn channels(&self) -> u32 {
        self.config.channels
    }
    #[getter]
    fn times(&self) -> u32 {
        self.config.times
    }
    #[getter]
    fn m(&self) -> u32 {
        self.config.m
    }
    #[getter]
    fn n(&self) -> u32 {
        self.config.n
    }
    #[getter]
    fn beams(&self) -> u32 {
        self.config.beams
    }
    /// Shape of I, float16: ``(channels, times, 2m, 2n)``.
    #[getter]
    fn intensity_shape(&self) -> Vec<usize> {
        r_intensity_shape(&self.config)
    }
    /// Shape of theta and theta', float32: ``(channels, beams)``.
    #[getter]
    fn positions_shape(&self) -> Vec<usize> {
        r_positions_shape(&self.config)
    }
    /// Shape of J, float16: ``(channels, times, beams)``.
    #[getter]
    fn output_shape(&self) -> Vec<usize> {
        r_output_shape(&self.config)
    }
    fn __repr__(&self) -> String {
        let c = &self.config;
        format!(
            "ResampleConfig(channels={}, times={}, m={}, n={}, beams={})",
            c.channels, c.times, c.m, c.n, c.beams
        )
    }
}

/// ``U^n_q(theta)`` of eqs. 7-8 in f64.
#[pyfunction]
pub fn u_function(n: u32, q: u32, theta: f64) -> f64 {
    u_fn(n, q, theta)
}

/// J of eq. 137 in f64: float64 ``[channels][times][beams]`` from I (float16
/// ``[channels][times][2m][2n]``) and the beam positions (float32 ``[channels][beams]``
/// each). Needs no GPU.
#[pyfunction]
pub fn resample_reference<'py>(
    py: Python<'py>,
    config: &PyResampleConfig,
    intensity: &Bound<'py, PyAny>,
    theta: &Bound<'py, PyAny>,
    theta_prime: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let c = &config.config;
    let i = host_in::<f16>(intensity, "intensity", &r_intensity_shape(c))?;
    let t = host_in::<f32>(theta, "theta", &r_positions_shape(c))?;
    let tp = host_in::<f32>(theta_prime, "theta_prime", &r_positions_shape(c))?;
    let (i, t, tp) = (i.as_slice()?, t.as_slice()?, tp.as_slice()?);
    let j = py.detach(|| resample_ref(c, i, t, tp)).py(py)?;
    np_from_vec(py, j, &r_output_shape(c))
}

/// What the W-path and fused resamplers have in common.
trait Resample: Send + Sync {
    fn set_beams(&mut self, theta: &DeviceBuffer<f32>, theta_prime: &DeviceBuffer<f32>) -> Result<(), Error>;
    fn resample(&self, intensity: &DeviceBuffer<f16>, out: &mut DeviceBuffer<f16>) -> Result<(), Error>;
    fn stream(&self) -> &radio_kernels::Stream;
    fn kernel_name(&self) -> &'static str;
    fn config(&self) -> &ResampleConfig;
}

macro_rules! resample_impl {
    ($t:ident) => {
        impl Resample for $t<'static> {
            fn set_beams(
                &mut self,
                theta: &DeviceBuffer<f32>,
                theta_prime: &DeviceBuffer<f32>,
            ) -> Result<(), Error> {
                $t::set_beams(self, theta, theta_prime)
            }
            fn resample(
                &self,
                intensity: &DeviceBuffer<f16>,
                out: &mut DeviceBuffer<f16>,
            ) -> Result<(), Error> {
                $t::resample(self, intensity, out)
            }
            fn stream(&self) -> &radio_kernels::Stream {
                $t::stream(self)
            }
            fn kernel_name(&self) -> &'static str {
                $t::kernel(self).name
            }
            fn config(&self) -> &ResampleConfig {
                $t::config(self)
            }
        }
    };
}
resample_impl!(Resampler);
resample_impl!(FusedResampler);

type Cell<R> = Mutex<Arc<Tied<Gpu, R>>>;

fn in_use(py: Python<'_>) -> PyErr {
    invalid(py, "the resampler is in use by an FrbStream: drop the stream before changing its beams".into())
}

fn set_beams<R: Resample>(
    py: Python<'_>,
    cell: &Cell<R>,
    theta: &Bound<'_, PyAny>,
    theta_prime: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let mut guard = locked(cell);
    let c = *guard.get().config();
    let shape = r_positions_shape(&c);
    let (t, tp) =
        (array_in::<f32>(theta, "theta", &shape)?, array_in::<f32>(theta_prime, "theta_prime", &shape)?);
    let (st, stp) = (src(&t)?, src(&tp)?);
    let tied = Arc::get_mut(&mut guard).ok_or_else(|| in_use(py))?;
    let gpu: &Gpu = &tied.owner().clone();
    let r = tied.get_mut();
    py.detach(|| {
        let (tb, tpb) = (st.buffer::<f32>(gpu)?, stp.buffer::<f32>(gpu)?);
        r.set_beams(&tb, &tpb)?;
        r.stream().synchronize().during("waiting for the beams")
    })
    .py(py)
}

fn resample<'py, R: Resample>(
    py: Python<'py>,
    cell: &Cell<R>,
    intensity: &Bound<'py, PyAny>,
    out: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let tied = locked(cell).clone();
    let r = tied.get();
    let c = *r.config();
    one_shot::<f16, f16, f16, f16>(
        py,
        tied.owner(),
        r.stream(),
        (intensity, "intensity", &r_intensity_shape(&c)),
        (out, "out", &r_output_shape(&c)),
        |i: &DeviceBuffer<f16>, j: &mut DeviceBuffer<f16>| r.resample(i, j),
    )
}

macro_rules! resampler_class {
    ($py:ident, $rust:ident, $name:literal, $doc:literal) => {
        #[doc = $doc]
        #[pyclass(name = $name, module = "radio_kernels", frozen)]
        pub struct $py {
            cell: Cell<$rust<'static>>,
        }

        #[pymethods]
        impl $py {
            #[new]
            fn new(py: Python<'_>, gpu: Bound<'_, PyGpu>, config: &PyResampleConfig) -> PyResult<Self> {
                let c = config.config;
                let owner = gpu.get().gpu.clone();
                // SAFETY: the resampler keeps the GPU reference to itself.
                let tied = py.detach(|| unsafe { Tied::new(owner, |gpu| $rust::new(gpu, c)) }).py(py)?;
                Ok($py { cell: Mutex::new(Arc::new(tied)) })
            }
            /// The configuration.
            #[getter]
            fn config(&self) -> PyResampleConfig {
                PyResampleConfig { config: *locked(&self.cell).get().config() }
            }
            /// The GEMM kernel this resampler launches.
            #[getter]
            fn kernel(&self) -> &'static str {
                locked(&self.cell).get().kernel_name()
            }
            /// Sets the beam positions ``theta`` and ``theta_prime`` (float32
            /// ``[channels][beams]``, numpy or device arrays; grid units of eq. 1):
            /// :class:`NonFiniteError` for NaN or infinity, :class:`InvalidConfigError` past
            /// the largest position. Call before :meth:`resample` and whenever the beams move.
            fn set_beams(
                &self,
                py: Python<'_>,
                theta: &Bound<'_, PyAny>,
                theta_prime: &Bound<'_, PyAny>,
            ) -> PyResult<()> {
                set_beams(py, &self.cell, theta, theta_prime)
            }
            /// J (float16 ``[channels][times][beams]``) from I (float16
            /// ``[channels][times][2m][2n]``); numpy in, numpy out; a device array in, CuPy out.
            #[pyo3(signature = (intensity, out = None))]
            fn resample<'py>(
                &self,
                py: Python<'py>,
                intensity: &Bound<'py, PyAny>,
                out: Option<&Bound<'py, PyAny>>,
            ) -> PyResult<Bound<'py, PyAny>> {
                resample(py, &self.cell, intensity, out)
            }
        }
    };
}

resampler_class!(
    PyResampler,
    Resampler,
    "Resampler",
    "The non-factorizable resampler with W (``[channels][beams][4mn]`` f16) in device memory \
     (``Resampler(gpu, config)``; sec. 5.2 of Smith's FRB note). Same J, bit for bit, as \
     :class:`FusedResampler`."
);
resampler_class!(
    PyFusedResampler,
    FusedResampler,
    "FusedResampler",
    "The fused non-factorizable resampler: W formed on the fly from U, never stored \
     (``FusedResampler(gpu, config)``). Same J, bit for bit, as :class:`Resampler`."
);

/// One factorized job (validated): ``channels`` 1..=65535, ``times`` positive, ``(m, n)`` a
/// compiled grid, a ``g x g_prime`` beam grid per channel.
#[pyclass(name = "FactorizedConfig", module = "radio_kernels", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PyFactorizedConfig {
    config: FactorizedConfig,
}

fn f_output_shape(c: &FactorizedConfig) -> Vec<usize> {
    vec![c.channels as usize, c.times as usize, c.beams() as usize]
}

#[pymethods]
impl PyFactorizedConfig {
    #[new]
    fn new(
        py: Python<'_>,
        channels: u32,
        times: u32,
        m: u32,
        n: u32,
        g: u32,
        g_prime: u32,
    ) -> PyResult<Self> {
        let config = FactorizedConfig { channels, times, m, n, g, g_prime };
        config.validate().py(py)?;
        Ok(PyFactorizedConfig { config })
    }
    #[getter]
    fn channels(&self) -> u32 {
        self.config.channels
    }
    #[getter]
    fn times(&self) -> u32 {
        self.config.times
    }
    #[getter]
    fn m(&self) -> u32 {
        self.config.m
    }
    #[getter]
    fn n(&self) -> u32 {
        self.config.n
    }
    #[getter]
    fn g(&self) -> u32 {
        self.config.g
    }
    #[getter]
    fn g_prime(&self) -> u32 {
        self.config.g_prime
    }
    /// Beams per channel, ``g * g_prime``.
    #[getter]
    fn beams(&self) -> u32 {
        self.config.beams()
    }
    /// Shape of I, float16: ``(channels, times, 2m, 2n)``.
    #[getter]
    fn intensity_shape(&self) -> Vec<usize> {
        let c = &self.config;
        grid_intensity_shape(c.channels, c.times, c.m, c.n)
    }
    /// Shape of J, float16: ``(channels, times, g * g_prime)``.
    #[getter]
    fn output_shape(&self) -> Vec<usize> {
        f_output_shape(&self.config)
    }
}

fn grid_positions<'py>(
    c: &FactorizedConfig,
    theta: &Bound<'py, PyAny>,
    theta_prime: &Bound<'py, PyAny>,
) -> PyResult<(Vec<f32>, Vec<f32>)> {
    let t = host_in::<f32>(theta, "theta", &[c.channels as usize, c.g as usize])?;
    let tp = host_in::<f32>(theta_prime, "theta_prime", &[c.channels as usize, c.g_prime as usize])?;
    Ok((t.as_slice()?.to_vec(), tp.as_slice()?.to_vec()))
}

/// J of eqs. 143-144 in f64: float64 ``[channels][times][g * g_prime]`` from I and the grid
/// positions (float32 ``[channels][g]`` and ``[channels][g_prime]``). Needs no GPU.
#[pyfunction]
pub fn factorized_reference<'py>(
    py: Python<'py>,
    config: &PyFactorizedConfig,
    intensity: &Bound<'py, PyAny>,
    theta: &Bound<'py, PyAny>,
    theta_prime: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let c = &config.config;
    let i = host_in::<f16>(intensity, "intensity", &grid_intensity_shape(c.channels, c.times, c.m, c.n))?;
    let i = i.as_slice()?;
    let (t, tp) = grid_positions(c, theta, theta_prime)?;
    let j = py.detach(|| factorized_ref(c, i, &t, &tp)).py(py)?;
    np_from_vec(py, j, &f_output_shape(c))
}

/// The factorized resampler (``FactorizedResampler(gpu, config)``; sec. 5.3): U built per
/// channel on the host in f64 (:meth:`set_grid`), the fused kernel on the GPU.
#[pyclass(name = "FactorizedResampler", module = "radio_kernels", frozen)]
pub struct PyFactorizedResampler {
    cell: Cell<FactorizedResampler<'static>>,
}

#[pymethods]
impl PyFactorizedResampler {
    #[new]
    fn new(py: Python<'_>, gpu: Bound<'_, PyGpu>, config: &PyFactorizedConfig) -> PyResult<Self> {
        let c = config.config;
        let owner = gpu.get().gpu.clone();
        // SAFETY: the resampler keeps the GPU reference to itself.
        let tied =
            py.detach(|| unsafe { Tied::new(owner, |gpu| FactorizedResampler::new(gpu, c)) }).py(py)?;
        Ok(PyFactorizedResampler { cell: Mutex::new(Arc::new(tied)) })
    }
    /// The configuration.
    #[getter]
    fn config(&self) -> PyFactorizedConfig {
        PyFactorizedConfig { config: *locked(&self.cell).get().config() }
    }
    /// Sets the beam grid (numpy float32 ``[channels][g]`` and ``[channels][g_prime]``).
    fn set_grid(
        &self,
        py: Python<'_>,
        theta: &Bound<'_, PyAny>,
        theta_prime: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let mut guard = locked(&self.cell);
        let c = *guard.get().config();
        let (t, tp) = grid_positions(&c, theta, theta_prime)?;
        let tied = Arc::get_mut(&mut guard).ok_or_else(|| in_use(py))?;
        let r = tied.get_mut();
        py.detach(|| {
            r.set_grid(&t, &tp)?;
            r.stream().synchronize().during("waiting for the beam grid")
        })
        .py(py)?;
        count_copy();
        Ok(())
    }
    /// J (float16 ``[channels][times][g * g_prime]``) from I (float16
    /// ``[channels][times][2m][2n]``); numpy in, numpy out; a device array in, CuPy out.
    #[pyo3(signature = (intensity, out = None))]
    fn resample<'py>(
        &self,
        py: Python<'py>,
        intensity: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let tied = locked(&self.cell).clone();
        let r = tied.get();
        let c = *r.config();
        one_shot::<f16, f16, f16, f16>(
            py,
            tied.owner(),
            r.stream(),
            (intensity, "intensity", &grid_intensity_shape(c.channels, c.times, c.m, c.n)),
            (out, "out", &f_output_shape(&c)),
            |i: &DeviceBuffer<f16>, j: &mut DeviceBuffer<f16>| r.resample(i, j),
        )
    }
}

// ---------------------------------------------------------------------------------------
// Quantiser.
// ---------------------------------------------------------------------------------------

/// One quantisation job (validated): ``channels`` 1..=65535, ``times`` and ``beams``
/// positive, ``format`` ``"u8"`` (one byte per value) or ``"u4"`` (two per byte).
#[pyclass(name = "QuantizeConfig", module = "radio_kernels", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PyQuantizeConfig {
    config: QuantizeConfig,
}

fn q_input_shape(c: &QuantizeConfig) -> Vec<usize> {
    vec![c.channels as usize, c.times as usize, c.beams as usize]
}
fn q_params_shape(c: &QuantizeConfig) -> Vec<usize> {
    vec![c.channels as usize, c.beams as usize]
}
fn q_output_shape(c: &QuantizeConfig) -> Vec<usize> {
    vec![c.channels as usize, c.beams as usize, c.row_bytes() as usize]
}

#[pymethods]
impl PyQuantizeConfig {
    #[new]
    #[pyo3(signature = (channels, times, beams, format = "u8"))]
    fn new(py: Python<'_>, channels: u32, times: u32, beams: u32, format: &str) -> PyResult<Self> {
        let format = match format {
            "u8" => Format::U8,
            "u4" => Format::U4,
            _ => return Err(invalid(py, format!("format must be \"u8\" or \"u4\", got {format:?}"))),
        };
        let config = QuantizeConfig { channels, times, beams, format };
        config.validate().py(py)?;
        Ok(PyQuantizeConfig { config })
    }
    #[getter]
    fn channels(&self) -> u32 {
        self.config.channels
    }
    #[getter]
    fn times(&self) -> u32 {
        self.config.times
    }
    #[getter]
    fn beams(&self) -> u32 {
        self.config.beams
    }
    /// ``"u8"`` or ``"u4"``.
    #[getter]
    fn format(&self) -> &'static str {
        match self.config.format {
            Format::U4 => "u4",
            _ => "u8",
        }
    }
    /// Bytes of one output row (the packed samples padded to 16 bytes).
    #[getter]
    fn row_bytes(&self) -> u32 {
        self.config.row_bytes()
    }
    /// Shape of J, float16: ``(channels, times, beams)``.
    #[getter]
    fn input_shape(&self) -> Vec<usize> {
        q_input_shape(&self.config)
    }
    /// Shape of scale, offset (float32) and the clip counts (uint32): ``(channels, beams)``.
    #[getter]
    fn params_shape(&self) -> Vec<usize> {
        q_params_shape(&self.config)
    }
    /// Shape of the codes, uint8: ``(channels, beams, row_bytes)``.
    #[getter]
    fn output_shape(&self) -> Vec<usize> {
        q_output_shape(&self.config)
    }
}

fn levels_in(
    c: &QuantizeConfig,
    scale: &Bound<'_, PyAny>,
    offset: &Bound<'_, PyAny>,
) -> PyResult<(Vec<f32>, Vec<f32>)> {
    let shape = q_params_shape(c);
    let s = host_in::<f32>(scale, "scale", &shape)?;
    let o = host_in::<f32>(offset, "offset", &shape)?;
    Ok((s.as_slice()?.to_vec(), o.as_slice()?.to_vec()))
}

/// The quantiser's rule value by value: ``(codes, saturated)``, uint8 ``[channels][beams]
/// [row_bytes]`` and uint32 ``[channels][beams]``, from J (float16 ``[channels][times]
/// [beams]``), scale and offset (float32 ``[channels][beams]``). Needs no GPU.
#[pyfunction]
pub fn quantize_reference<'py>(
    py: Python<'py>,
    config: &PyQuantizeConfig,
    j: &Bound<'py, PyAny>,
    scale: &Bound<'py, PyAny>,
    offset: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let c = &config.config;
    let ja = host_in::<f16>(j, "j", &q_input_shape(c))?;
    let ja = ja.as_slice()?;
    let (s, o) = levels_in(c, scale, offset)?;
    let q = py.detach(|| quantize_ref(c, ja, &s, &o)).py(py)?;
    Ok((
        host_from::<u8, u8>(py, &q.output, &q_output_shape(c))?,
        np_from_vec(py, q.saturated, &q_params_shape(c))?,
    ))
}

/// The quantiser on one GPU (``Quantizer(gpu, config)``).
#[pyclass(name = "Quantizer", module = "radio_kernels", frozen)]
pub struct PyQuantizer {
    inner: Arc<Tied<Gpu, Quantizer<'static>>>,
}

#[pymethods]
impl PyQuantizer {
    #[new]
    fn new(py: Python<'_>, gpu: Bound<'_, PyGpu>, config: &PyQuantizeConfig) -> PyResult<Self> {
        let c = config.config;
        let owner = gpu.get().gpu.clone();
        // SAFETY: the quantiser keeps the GPU reference to itself.
        let tied = py.detach(|| unsafe { Tied::new(owner, |gpu| Quantizer::new(gpu, c)) }).py(py)?;
        Ok(PyQuantizer { inner: Arc::new(tied) })
    }
    /// The configuration.
    #[getter]
    fn config(&self) -> PyQuantizeConfig {
        PyQuantizeConfig { config: *self.inner.get().config() }
    }
    /// ``(codes, saturated)`` from ``j``, ``scale`` and ``offset`` (see
    /// :func:`quantize_reference`; bit for bit). Arrays are numpy (copied) or device arrays
    /// (in place; with a device ``j``, ``out=None`` / ``saturated=None`` give CuPy arrays).
    #[pyo3(signature = (j, scale, offset, out = None, saturated = None))]
    #[allow(clippy::type_complexity)]
    fn quantize<'py>(
        &self,
        py: Python<'py>,
        j: &Bound<'py, PyAny>,
        scale: &Bound<'py, PyAny>,
        offset: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
        saturated: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let q = self.inner.get();
        let gpu: &Gpu = self.inner.owner();
        let c = *q.config();
        let params = q_params_shape(&c);
        let ja = array_in::<f16>(j, "j", &q_input_shape(&c))?;
        let sa = array_in::<f32>(scale, "scale", &params)?;
        let oa = array_in::<f32>(offset, "offset", &params)?;
        let device = on_device(&ja);
        let mut codes = output::<u8>(py, gpu, out, device, "out", &q_output_shape(&c))?;
        let mut counts = output::<u32>(py, gpu, saturated, device, "saturated", &params)?;
        let returned = (codes.object(), counts.object());
        let (sj, ss, so) = (src(&ja)?, src(&sa)?, src(&oa)?);
        let (dc, dn) = (dst(&mut codes)?, dst(&mut counts)?);
        py.detach(|| -> Result<(), Error> {
            let (jb, sb, ob) = (sj.buffer::<f16>(gpu)?, ss.buffer::<f32>(gpu)?, so.buffer::<f32>(gpu)?);
            let (mut cb, mut nb) = (dc.buffer::<u8>(gpu)?, dn.buffer::<u32>(gpu)?);
            q.quantize(&jb, &sb, &ob, &mut cb, &mut nb)?;
            q.stream().synchronize().during("waiting for the launch")?;
            dc.finish(q.stream(), &cb)?;
            dn.finish(q.stream(), &nb)
        })
        .py(py)?;
        drop((ja, sa, oa, codes, counts));
        Ok(returned)
    }
}

// ---------------------------------------------------------------------------------------
// Streaming.
// ---------------------------------------------------------------------------------------

enum Stage {
    Weights(Arc<Tied<Gpu, Resampler<'static>>>),
    Fused(Arc<Tied<Gpu, FusedResampler<'static>>>),
    Factorized(Arc<Tied<Gpu, FactorizedResampler<'static>>>),
}

/// The three launchers a stream borrows, kept alive with it.
struct Chain {
    first: Arc<First>,
    stage: Stage,
    quantizer: Arc<Tied<Gpu, Quantizer<'static>>>,
}

/// The streaming FRB beamformer (``first.streaming(resampler, quantizer, scale, offset,
/// depth)``): E chunks in, quantised beams out, the three kernels chained on the device; the
/// upload of chunk k + 1, the kernels of chunk k and the download of chunk k - 1 overlap.
/// Output k equals the one-shot chain (beamform, resample, quantize) on chunk k. Used from one
/// thread at a time; the GIL is released while it works.
#[pyclass(name = "FrbStream", module = "radio_kernels", frozen)]
pub struct PyFrbStream {
    first: FrbConfig,
    output: QuantizeConfig,
    engine: Mutex<Tied<Chain, FrbStream<'static, 'static>>>,
}

impl PyFrbStream {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut FrbStream<'static, 'static>) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        let engine = &self.engine;
        py.detach(|| f(locked(engine).get_mut())).py(py)
    }
}

#[pymethods]
impl PyFrbStream {
    /// The next input slot as a writeable numpy uint8 ci4 ``[times][freqs][2][dishes]`` view
    /// of the engine's pinned memory (waiting for that slot only): fill it in place, then
    /// :meth:`submit` with no argument. No copy.
    fn input<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let this = slf.get();
        let (ptr, len) = this.with(slf.py(), |s| {
            let slot = s.input()?;
            Ok((slot.as_mut_ptr() as usize, slot.len()))
        })?;
        // SAFETY: the pinned slot is allocated with the engine, which `slf` owns, and never
        // moves; `Ci4` is a transparent u8.
        unsafe { slot_view::<u8>(slf.clone().into_any(), ptr as *mut u8, len, &e_shape(&this.first), true) }
    }
    /// The oldest output not yet taken as read-only numpy views of the engine's pinned output
    /// slot, ``(chunk, codes, saturated)`` (as :meth:`output`), or None: no copy. Valid until
    /// the next :meth:`output` or :meth:`output_view`; copy what must be kept.
    #[allow(clippy::type_complexity)]
    fn output_view<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<Option<(u64, Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
        let this = slf.get();
        let taken = this.with(slf.py(), |s| {
            Ok(s.output()?.map(|o| {
                (
                    o.chunk,
                    o.beams.as_ptr() as usize,
                    o.beams.len(),
                    o.saturated.as_ptr() as usize,
                    o.saturated.len(),
                )
            }))
        })?;
        let Some((chunk, b, b_len, n, n_len)) = taken else { return Ok(None) };
        let (owner, q) = (slf.clone().into_any(), &this.output);
        // SAFETY: as for `input`: the pinned output slot lives, unmoved, with the engine.
        unsafe {
            Ok(Some((
                chunk,
                slot_view::<u8>(owner.clone(), b as *mut u8, b_len, &q_output_shape(q), false)?,
                slot_view::<u32>(owner, n as *mut u32, n_len, &q_params_shape(q), false)?,
            )))
        }
    }
    /// Submits one E chunk: with ``e`` (numpy uint8 ci4 ``[times][freqs][2][dishes]``) a copy
    /// of it; without, the slot :meth:`input` returned, filled in place (no copy). Raises
    /// :class:`BacklogError` (nothing changed) when every output slot holds an output not
    /// yet taken.
    #[pyo3(signature = (e = None))]
    fn submit(&self, py: Python<'_>, e: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let Some(e) = e else {
            return self.with(py, |s| s.submit());
        };
        let e = host_in::<u8>(e, "e", &e_shape(&self.first))?;
        let samples: &[Ci4] = Ci4::from_bytes(e.as_slice()?);
        self.with(py, |s| {
            s.input()?.copy_from_slice(samples);
            s.submit()
        })?;
        count_copy();
        Ok(())
    }
    /// The oldest output not yet taken, ``(chunk, codes, saturated)`` (the chunk's index,
    /// uint8 ``[channels][beams][row_bytes]``, uint32 ``[channels][beams]``), or None.
    #[allow(clippy::type_complexity)]
    fn output<'py>(&self, py: Python<'py>) -> PyResult<Option<(u64, Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
        let q = &self.output;
        if self.with(py, |s| Ok(s.pending()))? == 0 {
            return Ok(None);
        }
        let mut codes = new_host::<u8>(py, &q_output_shape(q))?;
        let mut counts = new_host::<u32>(py, &q_params_shape(q))?;
        let (ch, nh): (&mut [u8], &mut [u32]) = (codes.as_slice_mut()?, counts.as_slice_mut()?);
        let taken = self.with(py, move |s| {
            Ok(s.output()?.map(|o| {
                ch.copy_from_slice(o.beams);
                nh.copy_from_slice(o.saturated);
                o.chunk
            }))
        })?;
        let Some(chunk) = taken else { return Ok(None) };
        count_copy();
        Ok(Some((chunk, codes.as_any().clone(), counts.as_any().clone())))
    }
    /// Sets the quantiser's scale and offset (float32 ``[channels][beams]``) for the chunks
    /// submitted from now on.
    fn set_levels(
        &self,
        py: Python<'_>,
        scale: &Bound<'_, PyAny>,
        offset: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (s, o) = levels_in(&self.output, scale, offset)?;
        self.with(py, |e| e.set_levels(&s, &o))?;
        count_copy();
        Ok(())
    }
    /// Outputs enqueued and not yet taken.
    #[getter]
    fn pending(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |s| Ok(s.pending()))
    }
    /// Input (and output) slots.
    #[getter]
    fn depth(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |s| Ok(s.depth()))
    }
    /// Drops the outputs not taken and starts over at chunk 0.
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |s| s.reset())
    }
}

/// Adds the FRB beamformer's classes and functions to the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyFrbConfig>()?;
    module.add_class::<PyFrbBeamformer>()?;
    module.add_class::<PyShortFft>()?;
    module.add_class::<PyResampleConfig>()?;
    module.add_class::<PyResampler>()?;
    module.add_class::<PyFusedResampler>()?;
    module.add_class::<PyFactorizedConfig>()?;
    module.add_class::<PyFactorizedResampler>()?;
    module.add_class::<PyQuantizeConfig>()?;
    module.add_class::<PyQuantizer>()?;
    module.add_class::<PyFrbStream>()?;
    module.add_function(wrap_pyfunction!(frb_cases, module)?)?;
    module.add_function(wrap_pyfunction!(frb_intensity_reference, module)?)?;
    module.add_function(wrap_pyfunction!(short_fft_reference, module)?)?;
    module.add_function(wrap_pyfunction!(u_function, module)?)?;
    module.add_function(wrap_pyfunction!(resample_reference, module)?)?;
    module.add_function(wrap_pyfunction!(factorized_reference, module)?)?;
    module.add_function(wrap_pyfunction!(quantize_reference, module)?)?;
    module.add("FRB_REL_L2_BOUND", FRB_REL_L2_BOUND)?;
    module.add("FFT_REL_L2_BOUND", FFT_REL_L2_BOUND)?;
    Ok(())
}
