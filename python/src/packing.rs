//! The packed sample formats as vectorised numpy functions. ci4 (complex int4+4): one byte
//! per sample, the real part in the low nibble and the imaginary part in the high nibble,
//! each 4-bit two's complement in [-8, 7] (CHORD's convention, the kernels' input format).
use crate::arrays::{host_from, host_in, shape_of};
use crate::errors::invalid;
use pyo3::prelude::*;
use radio_kernels::packing::{
    ci4_from_offset_binary, ci4_from_real_high, ci4_to_offset_binary, ci4_to_real_high,
};
use radio_kernels::{pack_ci4 as pack_one, unpack_ci4 as unpack_one};

/// Packs complex int4 samples: ``x`` int8 ``[..., 2]`` (re, im, each in [-8, 7]) to uint8
/// ``[...]``, the real part in the low nibble.
///
/// Raises :class:`InvalidConfigError` for a value outside [-8, 7] (nothing wraps).
#[pyfunction]
pub fn pack_ci4<'py>(py: Python<'py>, x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let shape = shape_of(x);
    let shape = if shape.last() == Some(&2) { shape } else { [shape, vec![2]].concat() };
    let array = host_in::<i8>(x, "x", &shape)?;
    let values = array.as_slice()?;
    if let Some(at) = values.iter().position(|v| !(-8..=7).contains(v)) {
        return Err(invalid(py, format!("x.flat[{at}] = {} is outside the int4 range [-8, 7]", values[at])));
    }
    let packed: Vec<u8> = values.chunks_exact(2).map(|p| pack_one(p[0], p[1])).collect();
    host_from::<u8, u8>(py, &packed, &shape[..shape.len() - 1])
}

/// Unpacks ci4 samples: uint8 ``[...]`` to int8 ``[..., 2]`` (re, im), sign-extended.
#[pyfunction]
pub fn unpack_ci4<'py>(py: Python<'py>, packed: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let shape = shape_of(packed);
    let array = host_in::<u8>(packed, "packed", &shape)?;
    let values: Vec<i8> = array
        .as_slice()?
        .iter()
        .flat_map(|&b| {
            let (re, im) = unpack_one(b);
            [re, im]
        })
        .collect();
    host_from::<i8, i8>(py, &values, &[shape, vec![2]].concat())
}

fn map_bytes<'py>(
    py: Python<'py>,
    packed: &Bound<'py, PyAny>,
    f: fn(u8) -> u8,
) -> PyResult<Bound<'py, PyAny>> {
    let shape = shape_of(packed);
    let array = host_in::<u8>(packed, "packed", &shape)?;
    let values: Vec<u8> = array.as_slice()?.iter().map(|&b| f(b)).collect();
    host_from::<u8, u8>(py, &values, &shape)
}

/// Converts uint8 samples whose nibbles are offset binary (stored ``v`` means ``v - 8``,
/// real low) to ci4 (``byte ^ 0x88``).
#[pyfunction]
#[pyo3(name = "ci4_from_offset_binary")]
pub fn ci4_from_offset_binary_array<'py>(
    py: Python<'py>,
    packed: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    map_bytes(py, packed, ci4_from_offset_binary)
}

/// Converts ci4 samples to offset-binary nibbles (``byte ^ 0x88``).
#[pyfunction]
#[pyo3(name = "ci4_to_offset_binary")]
pub fn ci4_to_offset_binary_array<'py>(
    py: Python<'py>,
    packed: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    map_bytes(py, packed, ci4_to_offset_binary)
}

/// Converts uint8 samples with the real part in the HIGH nibble to ci4 (a nibble swap).
#[pyfunction]
#[pyo3(name = "ci4_from_real_high")]
pub fn ci4_from_real_high_array<'py>(
    py: Python<'py>,
    packed: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    map_bytes(py, packed, ci4_from_real_high)
}

/// Converts ci4 samples to the real-in-high-nibble convention (a nibble swap).
#[pyfunction]
#[pyo3(name = "ci4_to_real_high")]
pub fn ci4_to_real_high_array<'py>(
    py: Python<'py>,
    packed: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    map_bytes(py, packed, ci4_to_real_high)
}

/// Adds the packing functions to the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(pack_ci4, module)?)?;
    module.add_function(wrap_pyfunction!(unpack_ci4, module)?)?;
    module.add_function(wrap_pyfunction!(ci4_from_offset_binary_array, module)?)?;
    module.add_function(wrap_pyfunction!(ci4_to_offset_binary_array, module)?)?;
    module.add_function(wrap_pyfunction!(ci4_from_real_high_array, module)?)?;
    module.add_function(wrap_pyfunction!(ci4_to_real_high_array, module)?)?;
    Ok(())
}
