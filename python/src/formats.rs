//! The file writers: SIGPROC filterbank files for beam intensities (`write_filterbank`,
//! `write_frb_beams`, `write_delay_beams`) and UVH5 files for integrated visibilities
//! (`write_uvh5`, cargo feature `uvh5`), the Rust module `radio_kernels::formats`.
//!
//! # Filterbank (SIGPROC)
//!
//! A header is a Python mapping of SIGPROC keys, checked here key by key: `source_name`,
//! `fch1`, `foff` (MHz), `tsamp` (s) and `tstart` (MJD) are required; `rawdatafile`,
//! `telescope_id`, `machine_id`, `src_raj`, `src_dej` (packed `hhmmss.s`, `ddmmss.s`),
//! `az_start`, `za_start`, `nbeams` and `ibeam` are optional; `nchans` and `nbits` are
//! optional and, when given, must agree with the data. An unknown key is an
//! `InvalidConfigError` (a typo must not vanish), a value of the wrong Python type a
//! `TypeError`. Samples are `(time, channel)` C-contiguous `uint8` (`nbits` 8) or `float32`
//! (`nbits` 32); channel `k` is at `fch1 + k foff` MHz. Everything is checked before a file
//! is created.
//!
//! # UVH5
//!
//! `write_uvh5(path, vis, *, ...)`: `vis` is `[times][channels][baselines][pols][pols]` of
//! `complex128` or `complex64`, or the correlator's integer sums `[...][2]` (re, im) of
//! `int64` or `int32`, with baselines `b(i, j) = i (i + 1) / 2 + j`, `i >= j`, of the
//! stations of `antenna_positions_enu` (the correlator's output layout, one integration per
//! `times_jd`). The conjugation and baseline sign conventions are the Rust module's
//! (`formats::uvh5`): baseline `(i, j)` is pyuvdata's `(ant1 = j, ant2 = i)`, unconjugated,
//! `uvw = x_ant2 - x_ant1`, so pyuvdata's `phase` flattens a point source simulated as
//! `x_d = exp(+2 pi i f r_d . s / c)`. Metadata arrays (frequencies, times, positions, LSTs)
//! are array-likes converted to float64; `flags` must be `bool` and `nsamples` is converted to
//! float32, both `(times, channels)`.
use crate::arrays::{host_in, shape_text, Elem};
use crate::errors::{dtype_error, invalid, shape_error, PyResultExt};
use num_complex::Complex;
use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyMapping, PyMappingMethods};
use radio_kernels::delay_beamformer::{Beam, DelayBeamformerConfig};
use radio_kernels::formats::filterbank::{self, FilterbankHeader};
use radio_kernels::frb_beamformer::quantize::{Format, QuantizeConfig};
use std::path::PathBuf;

// complex128: the UVH5 writer's float input (pyuvdata's own dtype). Local to this file; if
// `arrays.rs` gains it, this goes.
impl Elem for Complex<f64> {
    const NAME: &'static str = "complex128";
    const TYPESTR: &'static [&'static str] = &["<c16"];
}

/// The numpy dtype name of `object` if it is a numpy array, else a `DtypeError` naming what
/// it had to be.
fn dtype_of(object: &Bound<'_, PyAny>, what: &str, wanted: &str) -> PyResult<String> {
    let py = object.py();
    match object.cast::<PyUntypedArray>() {
        Ok(array) => Ok(array.dtype().str()?.to_string()),
        Err(_) => Err(dtype_error(
            py,
            format!("{what} must be a numpy array of dtype {wanted}, got {}", object.get_type().name()?),
        )),
    }
}

/// The shape of numpy array `object`, which must have `ndim` axes.
fn shape_ndim(object: &Bound<'_, PyAny>, what: &str, ndim: usize, axes: &str) -> PyResult<Vec<usize>> {
    let shape = crate::arrays::shape_of(object);
    if shape.len() != ndim {
        return Err(shape_error(
            object.py(),
            what,
            format!("{what} has shape {}, expected {ndim} axes {axes}", shape_text(&shape)),
        ));
    }
    Ok(shape)
}

// --- Filterbank ------------------------------------------------------------------------------

/// The keys a header mapping may hold.
const KEYS: &[&str] = &[
    "source_name",
    "rawdatafile",
    "telescope_id",
    "machine_id",
    "src_raj",
    "src_dej",
    "az_start",
    "za_start",
    "tstart",
    "tsamp",
    "fch1",
    "foff",
    "nchans",
    "nbits",
    "nbeams",
    "ibeam",
];
const REQUIRED: &[&str] = &["source_name", "fch1", "foff", "tsamp", "tstart"];

fn type_error(key: &str, wanted: &str, value: &Bound<'_, PyAny>) -> PyErr {
    let got = value.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    PyTypeError::new_err(format!("filterbank header key {key:?} must be {wanted}, got {got}"))
}

fn float(key: &str, value: &Bound<'_, PyAny>) -> PyResult<f64> {
    if value.is_instance_of::<pyo3::types::PyBool>() {
        return Err(type_error(key, "a number", value));
    }
    value.extract::<f64>().map_err(|_| type_error(key, "a number", value))
}

fn uint(py: Python<'_>, key: &str, value: &Bound<'_, PyAny>) -> PyResult<u32> {
    if value.is_instance_of::<pyo3::types::PyBool>() {
        return Err(type_error(key, "an integer", value));
    }
    let v: i128 = value.extract().map_err(|_| type_error(key, "an integer", value))?;
    u32::try_from(v)
        .map_err(|_| invalid(py, format!("filterbank header: {key} {v} is out of range 0..=2^32-1")))
}

fn string(key: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    value.extract::<String>().map_err(|_| type_error(key, "a str", value))
}

/// A header from `mapping` for data of `nchans` channels and `nbits`; `per_beam`: the
/// writer sets `nbeams` and `ibeam` itself, so the mapping must not.
fn header_from(
    mapping: &Bound<'_, PyAny>,
    nchans: u32,
    nbits: u32,
    per_beam: bool,
) -> PyResult<FilterbankHeader> {
    let py = mapping.py();
    let mapping = mapping.cast::<PyMapping>().map_err(|_| {
        PyTypeError::new_err(format!(
            "header must be a mapping of SIGPROC keys (a dict), got {}",
            mapping.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ))
    })?;
    let mut header = FilterbankHeader::new(String::new(), 0.0, 0.0, nchans, 0.0, 0.0, nbits);
    let mut seen = Vec::new();
    for item in mapping.items()?.iter() {
        let (key, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let key: String = key
            .extract()
            .map_err(|_| PyTypeError::new_err("filterbank header keys must be str".to_string()))?;
        let Some(&key) = KEYS.iter().find(|k| **k == key) else {
            return Err(invalid(
                py,
                format!("filterbank header: unknown key {key:?} (SIGPROC keys: {})", KEYS.join(", ")),
            ));
        };
        if per_beam && (key == "nbeams" || key == "ibeam") {
            return Err(invalid(
                py,
                format!("filterbank header: {key} is set per beam file by the writer; leave it out"),
            ));
        }
        match key {
            "source_name" => header.source_name = string(key, &value)?,
            "rawdatafile" => header.rawdatafile = Some(string(key, &value)?),
            "telescope_id" => header.telescope_id = uint(py, key, &value)?,
            "machine_id" => header.machine_id = uint(py, key, &value)?,
            "src_raj" => header.src_raj = float(key, &value)?,
            "src_dej" => header.src_dej = float(key, &value)?,
            "az_start" => header.az_start = Some(float(key, &value)?),
            "za_start" => header.za_start = Some(float(key, &value)?),
            "tstart" => header.tstart = float(key, &value)?,
            "tsamp" => header.tsamp = float(key, &value)?,
            "fch1" => header.fch1 = float(key, &value)?,
            "foff" => header.foff = float(key, &value)?,
            "nbeams" => header.nbeams = uint(py, key, &value)?,
            "ibeam" => header.ibeam = uint(py, key, &value)?,
            "nchans" | "nbits" => {
                let (given, actual, from) = if key == "nchans" {
                    (uint(py, key, &value)?, nchans, "channels")
                } else {
                    (uint(py, key, &value)?, nbits, "dtype")
                };
                if given != actual {
                    return Err(invalid(
                        py,
                        format!(
                            "filterbank header: {key} {given} disagrees with the data's {from} ({actual})"
                        ),
                    ));
                }
            }
            _ => unreachable!("every key of KEYS is matched"),
        }
        seen.push(key);
    }
    if let Some(missing) = REQUIRED.iter().find(|k| !seen.contains(k)) {
        return Err(invalid(py, format!("filterbank header: the required key {missing:?} is missing")));
    }
    header.validate().py(py)?;
    Ok(header)
}

/// Writes one SIGPROC filterbank file.
///
/// ``header``: a mapping of SIGPROC keys (``source_name``, ``fch1``, ``foff`` in MHz,
/// ``tsamp`` in s and ``tstart`` as MJD required; ``rawdatafile``, ``telescope_id``,
/// ``machine_id``, ``src_raj``, ``src_dej`` (packed ``hhmmss.s``, ``ddmmss.s``),
/// ``az_start``, ``za_start``, ``nbeams``, ``ibeam`` optional; ``nchans`` and ``nbits``
/// optional and checked against ``data``). ``data``: C-contiguous ``(time, channel)``
/// ``uint8`` (``nbits`` 8) or ``float32`` (``nbits`` 32, finite); channel ``k`` is at
/// ``fch1 + k * foff`` MHz. Everything is checked before the file is created; raises
/// :class:`InvalidConfigError` for a bad header, :class:`DtypeError`,
/// :class:`ShapeMismatchError`, :class:`LayoutError`, :class:`NonFiniteError` for bad data,
/// :class:`IoError` when writing fails.
#[pyfunction]
pub fn write_filterbank(
    py: Python<'_>,
    path: PathBuf,
    header: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let dtype = dtype_of(data, "data", "uint8 or float32")?;
    let nbits = match dtype.as_str() {
        "uint8" => 8,
        "float32" => 32,
        other => {
            return Err(dtype_error(
                py,
                format!("data must have dtype uint8 (nbits 8) or float32 (nbits 32), got {other}"),
            ))
        }
    };
    let shape = shape_ndim(data, "data", 2, "(time, channel)")?;
    let nchans = u32::try_from(shape[1])
        .map_err(|_| invalid(py, format!("filterbank data: {} channels exceed 2^32 - 1", shape[1])))?;
    if nbits == 8 {
        let samples = host_in::<u8>(data, "data", &shape)?;
        let header = header_from(header, nchans, 8, false)?;
        let samples = samples.as_slice()?;
        py.detach(|| filterbank::write_file_u8(&path, &header, samples)).py(py)
    } else {
        let samples = host_in::<f32>(data, "data", &shape)?;
        let header = header_from(header, nchans, 32, false)?;
        let samples = samples.as_slice()?;
        py.detach(|| filterbank::write_file_f32(&path, &header, samples)).py(py)
    }
}

fn paths(py: Python<'_>, written: Vec<PathBuf>) -> PyResult<Bound<'_, PyList>> {
    PyList::new(py, written.iter().map(|p| p.to_string_lossy().into_owned()))
}

/// Writes each beam of the FRB quantiser's codes to its own filterbank file in ``directory``
/// (created if missing): ``beam_0000.fil``, ``beam_0001.fil``, ..., each ``nbits`` 8 with
/// ``nbeams`` the beam count and ``ibeam`` its beam; returns the paths in beam order.
///
/// ``codes``: uint8 ``[channels][beams][row_bytes]``, the quantiser's output (rows padded to
/// 16 bytes; ``format="u4"`` packs two codes per byte, earlier time in the low nibble, and
/// each is written as one byte 0..=15). ``times``: slow samples per row. ``header``: as
/// :func:`write_filterbank` without ``nbeams`` and ``ibeam``; ``tsamp`` is the slow sample
/// time and ``fch1`` channel 0's frequency.
#[pyfunction]
#[pyo3(signature = (directory, header, codes, *, times, format = "u8"))]
pub fn write_frb_beams<'py>(
    py: Python<'py>,
    directory: PathBuf,
    header: &Bound<'py, PyAny>,
    codes: &Bound<'py, PyAny>,
    times: u32,
    format: &str,
) -> PyResult<Bound<'py, PyList>> {
    let format = match format {
        "u8" => Format::U8,
        "u4" => Format::U4,
        other => return Err(invalid(py, format!("format must be \"u8\" or \"u4\", got {other:?}"))),
    };
    dtype_of(codes, "codes", "uint8")?;
    let shape = shape_ndim(codes, "codes", 3, "(channels, beams, row_bytes)")?;
    let count = |n: usize, what: &str| {
        u32::try_from(n).map_err(|_| invalid(py, format!("codes: {n} {what} exceed 2^32 - 1")))
    };
    let config = QuantizeConfig {
        channels: count(shape[0], "channels")?,
        times,
        beams: count(shape[1], "beams")?,
        format,
    };
    config.validate().py(py)?;
    let expected = [shape[0], shape[1], config.row_bytes() as usize];
    let q = host_in::<u8>(codes, "codes", &expected)?;
    let header = header_from(header, config.channels, 8, true)?;
    let q = q.as_slice()?;
    let written = py.detach(|| filterbank::write_frb_beams(&directory, &header, &config, q)).py(py)?;
    paths(py, written)
}

/// Writes the power ``|y|^2`` of each delay-beamformer beam to its own filterbank file in
/// ``directory`` (created if missing): ``beam_0000.fil``, ..., each ``nbits`` 32
/// (``(time, channel)`` float32, exact) with ``nbeams`` the beam count and ``ibeam`` its
/// beam; returns the paths in beam order.
///
/// ``y``: int8 ``[beams][channels][times][2]`` (re, im), the delay beamformer's output.
/// ``header``: as :func:`write_filterbank` without ``nbeams`` and ``ibeam``; ``tsamp`` is the
/// channel sample time and ``fch1`` the frequency of ``y``'s channel 0.
#[pyfunction]
pub fn write_delay_beams<'py>(
    py: Python<'py>,
    directory: PathBuf,
    header: &Bound<'py, PyAny>,
    y: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    dtype_of(y, "y", "int8")?;
    let shape = shape_ndim(y, "y", 4, "(beams, channels, times, 2)")?;
    let count = |n: usize, what: &str| {
        u32::try_from(n).map_err(|_| invalid(py, format!("y: {n} {what} exceed 2^32 - 1")))
    };
    let beams = vec![Beam { pol: 0, dither: false }; shape[0]];
    // One antenna and polarisation: only the output's shape matters here.
    let config = DelayBeamformerConfig {
        antennas: 1,
        pols: 1,
        channels: count(shape[1], "channels")?,
        first_channel: 0,
        times: count(shape[2], "times")?,
        beams,
    };
    config.validate().py(py)?;
    let values = host_in::<i8>(y, "y", &[shape[0], shape[1], shape[2], 2])?;
    let header = header_from(header, config.channels, 32, true)?;
    let values: &[Complex<i8>] = bytemuck::cast_slice(values.as_slice()?);
    let written = py.detach(|| filterbank::write_delay_beams(&directory, &header, &config, values)).py(py)?;
    paths(py, written)
}

// --- UVH5 ------------------------------------------------------------------------------------

#[cfg(feature = "uvh5")]
mod uvh5_writer {
    use super::*;
    use numpy::{PyArrayMethods, PyReadonlyArrayDyn};
    use radio_kernels::formats::uvh5::{self, FeedBasis, Uvh5Metadata};

    /// ``array`` of shape ``(times, channels, baselines)`` as it is, or ``(times, channels)``
    /// repeated for each of the ``nb`` baselines: ``[t][c][b]``.
    fn per_baseline<T: numpy::Element + Copy>(
        py: Python<'_>,
        array: &Bound<'_, numpy::PyArrayDyn<T>>,
        what: &str,
        tc: [usize; 2],
        nb: usize,
    ) -> PyResult<Vec<T>> {
        let tcb = [tc[0], tc[1], nb];
        let per_baseline = array.shape() == tcb;
        if array.shape() != tc && !per_baseline {
            return Err(shape_error(
                py,
                what,
                format!(
                    "{what} has shape {}, expected {} or {}",
                    shape_text(array.shape()),
                    shape_text(&tc),
                    shape_text(&tcb)
                ),
            ));
        }
        let values = array.readonly().as_slice()?.to_vec();
        Ok(if per_baseline {
            values
        } else {
            values.iter().flat_map(|&x| std::iter::repeat_n(x, nb)).collect()
        })
    }

    /// `value` as a float64 numpy array (array-likes converted) of `ndim` axes.
    fn floats<'py>(
        value: &Bound<'py, PyAny>,
        what: &str,
        ndim: usize,
    ) -> PyResult<PyReadonlyArrayDyn<'py, f64>> {
        let py = value.py();
        let numpy = py.import("numpy")?;
        let array = numpy
            .call_method1("ascontiguousarray", (value, "float64"))
            .map_err(|e| PyTypeError::new_err(format!("{what} must be an array-like of numbers ({e})")))?;
        let array = array.cast_into::<numpy::PyArrayDyn<f64>>()?;
        if array.ndim() != ndim {
            return Err(shape_error(
                py,
                what,
                format!("{what} has shape {}, expected {ndim} axes", shape_text(array.shape())),
            ));
        }
        Ok(array.readonly())
    }

    fn vec1(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<f64>> {
        Ok(floats(value, what, 1)?.as_slice()?.to_vec())
    }

    /// Writes integrated visibilities as a UVH5 file (pyuvdata's HDF5 format), read by
    /// ``pyuvdata.UVData.from_file``.
    ///
    /// ``vis``: ``[times][channels][baselines][pols][pols]`` ``complex128``/``complex64``, or
    /// ``[...][2]`` (re, im) ``int64``/``int32`` (the correlator's output per integration,
    /// stacked; integers must be within 2^53), baselines ``b(i, j) = i (i + 1) / 2 + j``,
    /// ``i >= j``, pols 1 or 2. Keywords: ``freq_hz`` (channel centres), ``channel_width_hz``,
    /// ``times_jd`` (UTC Julian dates of the integration centres), ``integration_time_s``,
    /// ``antenna_positions_enu`` (``(stations, 3)`` east, north, up metres from the site);
    /// optional ``flags`` (bool ``(times, channels, baselines)``, true where data was lost,
    /// or ``(times, channels)`` for every baseline), ``nsamples`` (the same shapes, the
    /// fraction present, as float32), the site
    /// (``latitude_deg``, ``longitude_deg``, ``altitude_m``: CHORD at DRAO by default),
    /// ``telescope_name``, ``instrument``, ``antenna_names`` (default ``A000``, ...),
    /// ``antenna_numbers`` (default 0, 1, ...), ``lst_rad`` (exact LSTs; default: pyuvdata
    /// computes them), ``feed_basis`` (``"linear"`` or ``"circular"``), ``x_orientation``
    /// and ``history``.
    ///
    /// Baseline ``(i, j)`` is written as pyuvdata's ``(ant1 = j, ant2 = i)`` unconjugated,
    /// with ``uvw = x_ant2 - x_ant1``, so ``UVData.phase`` flattens a point source simulated
    /// as ``x_d = exp(+2 pi i f r_d . s / c)``. Everything is checked before the file is
    /// created: :class:`InvalidConfigError`, :class:`ShapeMismatchError`,
    /// :class:`DtypeError`, :class:`NonFiniteError`; :class:`IoError` when HDF5 fails.
    #[pyfunction]
    #[pyo3(signature = (
        path, vis, *, freq_hz, channel_width_hz, times_jd, integration_time_s,
        antenna_positions_enu, flags = None, nsamples = None,
        latitude_deg = uvh5::DRAO_LATITUDE_DEG, longitude_deg = uvh5::DRAO_LONGITUDE_DEG,
        altitude_m = uvh5::DRAO_ALTITUDE_M, telescope_name = "CHORD", instrument = "radio-kernels",
        antenna_names = None, antenna_numbers = None, lst_rad = None, feed_basis = "linear",
        x_orientation = "east", history = ""
    ))]
    #[allow(clippy::too_many_arguments)]
    pub fn write_uvh5(
        py: Python<'_>,
        path: PathBuf,
        vis: &Bound<'_, PyAny>,
        freq_hz: &Bound<'_, PyAny>,
        channel_width_hz: f64,
        times_jd: &Bound<'_, PyAny>,
        integration_time_s: f64,
        antenna_positions_enu: &Bound<'_, PyAny>,
        flags: Option<&Bound<'_, PyAny>>,
        nsamples: Option<&Bound<'_, PyAny>>,
        latitude_deg: f64,
        longitude_deg: f64,
        altitude_m: f64,
        telescope_name: &str,
        instrument: &str,
        antenna_names: Option<Vec<String>>,
        antenna_numbers: Option<Vec<i64>>,
        lst_rad: Option<&Bound<'_, PyAny>>,
        feed_basis: &str,
        x_orientation: &str,
        history: &str,
    ) -> PyResult<()> {
        let positions = floats(antenna_positions_enu, "antenna_positions_enu", 2)?;
        let stations = positions.shape()[0];
        if positions.shape()[1] != 3 {
            return Err(shape_error(
                py,
                "antenna_positions_enu",
                format!(
                    "antenna_positions_enu has shape {}, expected (stations, 3)",
                    shape_text(positions.shape())
                ),
            ));
        }
        let enu: Vec<[f64; 3]> = positions.as_slice()?.chunks_exact(3).map(|p| [p[0], p[1], p[2]]).collect();
        let mut meta = Uvh5Metadata::chord_drao(
            &enu,
            vec1(freq_hz, "freq_hz")?,
            channel_width_hz,
            vec1(times_jd, "times_jd")?,
            integration_time_s,
        );
        meta.latitude_deg = latitude_deg;
        meta.longitude_deg = longitude_deg;
        meta.altitude_m = altitude_m;
        // Positions relative to the site given (chord_drao rotated them at DRAO).
        meta.antenna_positions_ecef =
            enu.iter().map(|p| uvh5::enu_to_ecef(latitude_deg, longitude_deg, *p)).collect();
        meta.telescope_name = telescope_name.into();
        meta.instrument = instrument.into();
        if let Some(names) = antenna_names {
            meta.antenna_names = names;
        }
        if let Some(numbers) = antenna_numbers {
            meta.antenna_numbers = numbers
                .into_iter()
                .map(|n| {
                    u32::try_from(n).map_err(|_| {
                        invalid(py, format!("UVH5 metadata: antenna number {n} is negative or too large"))
                    })
                })
                .collect::<PyResult<_>>()?;
        }
        meta.lst_rad = lst_rad.map(|l| vec1(l, "lst_rad")).transpose()?;
        meta.feed_basis = match feed_basis {
            "linear" => FeedBasis::Linear,
            "circular" => FeedBasis::Circular,
            other => {
                return Err(invalid(
                    py,
                    format!("UVH5 metadata: feed_basis must be \"linear\" or \"circular\", got {other:?}"),
                ))
            }
        };
        meta.x_orientation = x_orientation.into();
        meta.history = history.into();

        let (nt, nf) = (meta.times_jd.len(), meta.freq_hz.len());
        let nb = stations * (stations + 1) / 2;
        let tc = [nt, nf];
        let flags = flags
            .map(|f| -> PyResult<Vec<bool>> {
                let array = py.import("numpy")?.call_method1("ascontiguousarray", (f,))?;
                let dtype = dtype_of(&array, "flags", "bool")?;
                if dtype != "bool" {
                    return Err(dtype_error(py, format!("flags must have dtype bool, got {dtype}")));
                }
                per_baseline(py, &array.cast_into::<numpy::PyArrayDyn<bool>>()?, "flags", tc, nb)
            })
            .transpose()?;
        let nsamples = nsamples
            .map(|s| -> PyResult<Vec<f32>> {
                let array = py
                    .import("numpy")?
                    .call_method1("ascontiguousarray", (s, "float32"))
                    .map_err(|e| {
                        PyTypeError::new_err(format!("nsamples must be an array-like of numbers ({e})"))
                    })?
                    .cast_into::<numpy::PyArrayDyn<f32>>()?;
                per_baseline(py, &array, "nsamples", tc, nb)
            })
            .transpose()?;

        let dtype = dtype_of(vis, "vis", "complex128, complex64, int64 or int32")?;
        if !matches!(dtype.as_str(), "complex128" | "complex64" | "int64" | "int32") {
            return Err(dtype_error(
                py,
                format!("vis must have dtype complex128, complex64, int64 or int32, got {dtype}"),
            ));
        }
        let shape = crate::arrays::shape_of(vis);
        let pols = shape.get(3).copied().unwrap_or(0);
        let pols_ok = pols == 1 || pols == 2;
        meta.pols = if pols_ok { pols as u32 } else { 0 };
        let mut expected = vec![nt, nf, nb, pols, pols];
        let integer = matches!(dtype.as_str(), "int64" | "int32");
        if integer {
            expected.push(2);
        }
        if !pols_ok || shape != expected {
            let layout = if integer {
                "(times, channels, baselines, pols, pols, 2)"
            } else {
                "(times, channels, baselines, pols, pols)"
            };
            return Err(shape_error(
                py,
                "vis",
                format!(
                    "vis has shape {}, expected {layout} = {} for {nt} times_jd, {nf} freq_hz, {stations} \
                     stations and pols 1 or 2",
                    shape_text(&shape),
                    shape_text(&expected)
                ),
            ));
        }
        let (flags, nsamples) = (flags.as_deref(), nsamples.as_deref());
        macro_rules! write_as {
            ($numpy:ty, $complex:ty) => {{
                let array = host_in::<$numpy>(vis, "vis", &expected)?;
                let values: &[$complex] = bytemuck::cast_slice(array.as_slice()?);
                py.detach(|| uvh5::write(&path, &meta, values, flags, nsamples)).py(py)
            }};
        }
        match dtype.as_str() {
            "complex128" => write_as!(Complex<f64>, Complex<f64>),
            "complex64" => write_as!(Complex<f32>, Complex<f32>),
            "int64" => write_as!(i64, Complex<i64>),
            _ => write_as!(i32, Complex<i32>),
        }
    }
}

/// Adds the file writers to the module (`write_uvh5` only with the `uvh5` feature).
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(write_filterbank, module)?)?;
    module.add_function(wrap_pyfunction!(write_frb_beams, module)?)?;
    module.add_function(wrap_pyfunction!(write_delay_beams, module)?)?;
    #[cfg(feature = "uvh5")]
    module.add_function(wrap_pyfunction!(uvh5_writer::write_uvh5, module)?)?;
    module.add("HAS_UVH5", cfg!(feature = "uvh5"))?;
    Ok(())
}
