//! numpy and device arrays in and out: dtype, shape and layout checks, the zero-copy path
//! for `__cuda_array_interface__` objects (CuPy, Numba, PyTorch), and the host-copy counter.
//!
//! # Conventions
//!
//! - Every array is C-contiguous (row-major) and of exactly the documented dtype, in native
//!   (little-endian) byte order. Nothing is converted: a wrong dtype raises `DtypeError` (a
//!   `TypeError`), a wrong shape `ShapeMismatchError` and a non-contiguous, unaligned or
//!   read-only output array `LayoutError` (both `ValueError`s).
//! - Complex integers are a trailing axis of 2 (`[..., 2]` = re, im) of `int8`, `int32` or
//!   `int64`; packed int4+4 samples (`Ci4`, real part in the low nibble) are `uint8`;
//!   complex float32 is `complex64`; float16 is `float16`.
//!
//! # Device arrays (CUDA Array Interface, versions 2 and 3)
//!
//! An argument with `__cuda_array_interface__` is used in place: its pointer is wrapped with
//! `Gpu::wrap_device`, which checks that it is device memory of the GPU's context (else
//! `WrongDeviceError`) and that the extent lies in one allocation. The interface's `typestr`,
//! `shape` and `strides` (None, or the C-contiguous strides) are checked as for numpy, and an
//! output must not be `readonly`. Stream ordering, per version 3 of the interface: the
//! array's `stream` (when given and not None) is synchronised before the launch, and the
//! launcher's stream after it, so the result is complete, for any stream, when the call
//! returns. The Python object is kept alive for the call.
//!
//! # The host-copy counter
//!
//! [`count_copy`] is called once for every host-to-device or device-to-host copy the binding
//! makes (one per array moved, whatever its size); `radio_kernels._native.host_copy_count()`
//! reads it, so tests can prove that a device-array call copies nothing.
use crate::errors::{dtype_error, layout_error, shape_error, PyResultExt};
use bytemuck::Pod;
use num_complex::Complex;
use numpy::{
    Element, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyReadwriteArrayDyn,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use radio_kernels::{DeviceBuffer, DriverContext, Error, Gpu, Stream};
use std::sync::atomic::{AtomicU64, Ordering};

static HOST_COPIES: AtomicU64 = AtomicU64::new(0);

/// Counts one host<->device copy made by the binding.
pub fn count_copy() {
    HOST_COPIES.fetch_add(1, Ordering::Relaxed);
}

/// Host<->device copies the binding has made since the module was loaded (a debugging and
/// test aid: a call on device arrays must not change it).
#[pyfunction]
pub fn host_copy_count() -> u64 {
    HOST_COPIES.load(Ordering::Relaxed)
}

/// An element type an array may have: its numpy name and its CUDA Array Interface typestrs.
pub trait Elem: Element + Pod + Send + Sync {
    /// The numpy dtype name.
    const NAME: &'static str;
    /// The interface typestrs accepted (little-endian or byte-order-free).
    const TYPESTR: &'static [&'static str];
}

macro_rules! elem {
    ($t:ty, $name:literal, [$($typestr:literal),+]) => {
        impl Elem for $t {
            const NAME: &'static str = $name;
            const TYPESTR: &'static [&'static str] = &[$($typestr),+];
        }
    };
}
elem!(i8, "int8", ["|i1", "<i1"]);
elem!(u8, "uint8", ["|u1", "<u1"]);
elem!(i32, "int32", ["<i4"]);
elem!(i64, "int64", ["<i8"]);
elem!(f32, "float32", ["<f4"]);
elem!(half::f16, "float16", ["<f2"]);
elem!(Complex<f32>, "complex64", ["<c8"]);

#[cfg(target_endian = "big")]
compile_error!("the dtype checks assume a little-endian host");

/// A shape as Python prints a tuple.
pub fn shape_text(shape: &[usize]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => format!("({})", shape.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    }
}

/// A device array described by its `__cuda_array_interface__`, checked.
pub struct DeviceArray<'py> {
    /// The object, kept alive (and returned) by the caller.
    pub object: Bound<'py, PyAny>,
    pub address: u64,
    pub bytes: usize,
    /// The interface's `stream` (version 3), to synchronise before use.
    pub stream: Option<usize>,
}

/// An input: host memory (numpy) or a device array.
pub enum ArrayIn<'py, T: Elem> {
    Host(PyReadonlyArrayDyn<'py, T>),
    Device(DeviceArray<'py>),
}

/// An output: a writable numpy array or a device array.
pub enum ArrayOut<'py, T: Elem> {
    Host(PyReadwriteArrayDyn<'py, T>),
    Device(DeviceArray<'py>),
}

impl<'py, T: Elem> ArrayOut<'py, T> {
    /// The Python object to return.
    pub fn object(&self) -> Bound<'py, PyAny> {
        match self {
            ArrayOut::Host(array) => array.as_any().clone(),
            ArrayOut::Device(device) => device.object.clone(),
        }
    }
}

fn interface<'py>(object: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyDict>>> {
    if object.is_instance_of::<PyUntypedArray>() || !object.hasattr("__cuda_array_interface__")? {
        return Ok(None);
    }
    Ok(Some(object.getattr("__cuda_array_interface__")?.cast_into::<PyDict>()?))
}

/// Checks a numpy array's dtype, shape and layout.
fn numpy_array<'py, T: Elem>(
    object: &Bound<'py, PyAny>,
    what: &str,
    shape: &[usize],
    writable: bool,
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    let py = object.py();
    let Ok(array) = object.cast::<PyUntypedArray>() else {
        return Err(dtype_error(
            py,
            format!(
                "{what} must be a numpy array of dtype {} (or a device array with \
                 __cuda_array_interface__), got {}",
                T::NAME,
                object.get_type().name()?
            ),
        ));
    };
    if !array.dtype().is_equiv_to(&numpy::dtype::<T>(py)) {
        return Err(dtype_error(
            py,
            format!("{what} must have dtype {}, got {}", T::NAME, array.getattr("dtype")?.str()?),
        ));
    }
    if array.shape() != shape {
        return Err(shape_error(
            py,
            what,
            format!("{what} has shape {}, expected {}", shape_text(array.shape()), shape_text(shape)),
        ));
    }
    let flags = array.getattr("flags")?;
    if !array.is_c_contiguous() {
        return Err(layout_error(py, format!("{what} must be C-contiguous (numpy.ascontiguousarray)")));
    }
    if !flags.getattr("aligned")?.extract::<bool>()? {
        return Err(layout_error(py, format!("{what} must be aligned to its dtype")));
    }
    if writable && !flags.getattr("writeable")?.extract::<bool>()? {
        return Err(layout_error(py, format!("{what} is read-only")));
    }
    Ok(array.clone().cast_into::<PyArrayDyn<T>>()?)
}

/// Checks a `__cuda_array_interface__` dictionary against dtype `T` and `shape`.
fn device_array<'py, T: Elem>(
    object: &Bound<'py, PyAny>,
    interface: &Bound<'py, PyDict>,
    what: &str,
    shape: &[usize],
    writable: bool,
) -> PyResult<DeviceArray<'py>> {
    let py = object.py();
    let item = |key: &str| -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(interface.get_item(key)?.filter(|v| !v.is_none()))
    };
    let missing = |key: &str| layout_error(py, format!("{what}'s __cuda_array_interface__ has no `{key}`"));
    let typestr: String = item("typestr")?.ok_or_else(|| missing("typestr"))?.extract()?;
    if !T::TYPESTR.contains(&typestr.as_str()) {
        return Err(dtype_error(
            py,
            format!("{what} must have dtype {} (typestr {}), got typestr {typestr}", T::NAME, T::TYPESTR[0]),
        ));
    }
    let actual: Vec<usize> = item("shape")?.ok_or_else(|| missing("shape"))?.extract()?;
    if actual != shape {
        return Err(shape_error(
            py,
            what,
            format!("{what} has shape {}, expected {}", shape_text(&actual), shape_text(shape)),
        ));
    }
    if let Some(strides) = item("strides")? {
        let strides: Vec<isize> = strides.extract()?;
        let mut expected = std::mem::size_of::<T>() as isize;
        for (axis, &extent) in shape.iter().enumerate().rev() {
            if extent > 1 && strides.get(axis) != Some(&expected) {
                return Err(layout_error(py, format!("{what} must be C-contiguous (strides {strides:?})")));
            }
            expected *= extent as isize;
        }
    }
    if item("mask")?.is_some() {
        return Err(layout_error(py, format!("{what} is a masked device array; masks are not supported")));
    }
    let (address, readonly): (u64, bool) = item("data")?.ok_or_else(|| missing("data"))?.extract()?;
    if writable && readonly {
        return Err(layout_error(py, format!("{what} is read-only")));
    }
    let stream: Option<usize> = item("stream")?.map(|s| s.extract()).transpose()?;
    if stream == Some(0) {
        return Err(layout_error(
            py,
            format!("{what}'s __cuda_array_interface__ gives stream 0, which the interface disallows"),
        ));
    }
    let bytes = shape.iter().product::<usize>() * std::mem::size_of::<T>();
    Ok(DeviceArray { object: object.clone(), address, bytes, stream })
}

/// An input array of dtype `T` and `shape`: numpy, or a device array (used in place).
pub fn array_in<'py, T: Elem>(
    object: &Bound<'py, PyAny>,
    what: &str,
    shape: &[usize],
) -> PyResult<ArrayIn<'py, T>> {
    match interface(object)? {
        Some(interface) => Ok(ArrayIn::Device(device_array::<T>(object, &interface, what, shape, false)?)),
        None => Ok(ArrayIn::Host(
            numpy_array::<T>(object, what, shape, false)?
                .try_readonly()
                .map_err(|e| layout_error(object.py(), format!("{what} cannot be read: {e}")))?,
        )),
    }
}

/// An input the CPU (numpy) only: a device array is `WrongDeviceError`.
pub fn host_in<'py, T: Elem>(
    object: &Bound<'py, PyAny>,
    what: &str,
    shape: &[usize],
) -> PyResult<PyReadonlyArrayDyn<'py, T>> {
    match array_in::<T>(object, what, shape)? {
        ArrayIn::Host(array) => Ok(array),
        ArrayIn::Device(_) => Err(wrong_device(object.py(), what, "reads")),
    }
}

/// An output the CPU (numpy) only writes: a device array is `WrongDeviceError`.
pub fn host_out<'py, T: Elem>(
    object: &Bound<'py, PyAny>,
    what: &str,
    shape: &[usize],
) -> PyResult<PyReadwriteArrayDyn<'py, T>> {
    match array_out::<T>(object, what, shape)? {
        ArrayOut::Host(array) => Ok(array),
        ArrayOut::Device(_) => Err(wrong_device(object.py(), what, "writes")),
    }
}

fn wrong_device(py: Python<'_>, what: &str, verb: &str) -> PyErr {
    crate::errors::raise(
        py,
        crate::errors::Kind::WrongDevice,
        format!("{what} is device memory; this call {verb} host (numpy) arrays"),
        &[],
    )
}

/// An output array of dtype `T` and `shape`: a writable numpy array, or a device array
/// (written in place).
pub fn array_out<'py, T: Elem>(
    object: &Bound<'py, PyAny>,
    what: &str,
    shape: &[usize],
) -> PyResult<ArrayOut<'py, T>> {
    match interface(object)? {
        Some(interface) => Ok(ArrayOut::Device(device_array::<T>(object, &interface, what, shape, true)?)),
        None => Ok(ArrayOut::Host(
            numpy_array::<T>(object, what, shape, true)?
                .try_readwrite()
                .map_err(|e| layout_error(object.py(), format!("{what} cannot be written: {e}")))?,
        )),
    }
}

/// A new numpy array of `shape`, every element written by the caller before it is returned.
pub fn new_host<'py, T: Elem>(py: Python<'py>, shape: &[usize]) -> PyResult<PyReadwriteArrayDyn<'py, T>> {
    // SAFETY: callers return the array only after writing every element (a failed call drops
    // it unseen); every bit pattern of the dtypes of `Elem` is a valid value.
    let array = unsafe { PyArrayDyn::<T>::new(py, shape, false) };
    Ok(array.readwrite())
}

/// A numpy array of `shape` holding `values` (a host copy; for CPU results).
pub fn host_from<'py, T: Elem, V: Pod>(
    py: Python<'py>,
    values: &[V],
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let mut array = new_host::<T>(py, shape)?;
    array.as_slice_mut()?.copy_from_slice(bytemuck::cast_slice(values));
    Ok(array.as_any().clone())
}

/// A new CuPy array of `shape` and dtype `T` on device `ordinal` (CuPy imported on first use).
pub fn cupy_empty<'py, T: Elem>(
    py: Python<'py>,
    ordinal: usize,
    what: &str,
    shape: &[usize],
) -> PyResult<DeviceArray<'py>> {
    let cupy = py.import("cupy").map_err(|e| {
        pyo3::exceptions::PyImportError::new_err(format!(
            "a device-array input with out=None returns a CuPy array, and CuPy cannot be imported ({e}); \
             pass out= (a device array with __cuda_array_interface__)"
        ))
    })?;
    let device = cupy.getattr("cuda")?.getattr("Device")?.call1((ordinal,))?;
    device.call_method0("__enter__")?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("dtype", T::NAME)?;
    let array = cupy.call_method("empty", (PyTuple::new(py, shape)?,), Some(&kwargs));
    device.call_method1("__exit__", (py.None(), py.None(), py.None()))?;
    let array = array?;
    let interface =
        interface(&array)?.ok_or_else(|| layout_error(py, "cupy.empty gave no device array".into()))?;
    device_array::<T>(&array, &interface, what, shape, true)
}

/// Waits for the work on a stream given by a `__cuda_array_interface__` (a `CUstream`
/// handle, or 1 and 2 for the legacy and per-thread default streams, which the driver API
/// takes as the same values).
pub fn synchronize_foreign(gpu: &Gpu, stream: usize) -> Result<(), Error> {
    gpu.context().bind_to_thread().during("binding the CUDA context")?;
    // SAFETY: the handle comes from the array's owner, which keeps its stream alive while it
    // exports the array; 1 and 2 are CU_STREAM_LEGACY and CU_STREAM_PER_THREAD.
    unsafe { cudarc::driver::sys::cuStreamSynchronize(stream as cudarc::driver::sys::CUstream) }
        .result()
        .during("synchronising the device array's stream")
}

/// Where an input's bytes are, for the launch (no Python objects: it crosses `detach`).
enum Source<'a> {
    Host(&'a [u8]),
    Device { address: u64, bytes: usize, stream: Option<usize> },
}

enum Destination<'a> {
    Host(&'a mut [u8]),
    Device { address: u64, bytes: usize, stream: Option<usize> },
}

fn len_of<D>(bytes: usize) -> usize {
    bytes / std::mem::size_of::<D>()
}

/// One launch from Python: the input `(object, name, shape)` of numpy element `TI` (the
/// launcher reads it as `DI`), the output `(object or None, name, shape)` of numpy element
/// `TO` (the launcher writes `DO`). Host arrays are uploaded (and the output downloaded into
/// numpy); device arrays are used in place. With `out=None` the output is a CuPy array when
/// the input is a device array, else a new numpy array. `launch` runs with the GIL
/// released; `stream` (the launcher's) is synchronised after it.
#[allow(clippy::too_many_arguments)]
pub fn one_shot<'py, TI: Elem, DI: Pod, TO: Elem, DO: Pod>(
    py: Python<'py>,
    gpu: &Gpu,
    stream: &Stream,
    input: (&Bound<'py, PyAny>, &str, &[usize]),
    out: (Option<&Bound<'py, PyAny>>, &str, &[usize]),
    launch: impl FnOnce(&DeviceBuffer<DI>, &mut DeviceBuffer<DO>) -> Result<(), Error> + Send,
) -> PyResult<Bound<'py, PyAny>> {
    let array = array_in::<TI>(input.0, input.1, input.2)?;
    let mut output = match (out.0, &array) {
        (Some(object), _) => array_out::<TO>(object, out.1, out.2)?,
        (None, ArrayIn::Device(_)) => ArrayOut::Device(cupy_empty::<TO>(py, gpu.ordinal(), out.1, out.2)?),
        (None, ArrayIn::Host(_)) => ArrayOut::Host(new_host::<TO>(py, out.2)?),
    };
    let returned = output.object();
    let source = match &array {
        ArrayIn::Host(host) => Source::Host(bytemuck::cast_slice(host.as_slice()?)),
        ArrayIn::Device(d) => Source::Device { address: d.address, bytes: d.bytes, stream: d.stream },
    };
    let destination = match &mut output {
        ArrayOut::Host(host) => Destination::Host(bytemuck::cast_slice_mut(host.as_slice_mut()?)),
        ArrayOut::Device(d) => Destination::Device { address: d.address, bytes: d.bytes, stream: d.stream },
    };
    let result = py.detach(move || -> Result<(), Error> {
        if let Source::Device { stream: Some(s), .. } = &source {
            synchronize_foreign(gpu, *s)?;
        }
        if let Destination::Device { stream: Some(s), .. } = &destination {
            synchronize_foreign(gpu, *s)?;
        }
        let input: DeviceBuffer<DI> = match source {
            Source::Host(bytes) => {
                count_copy();
                gpu.upload(bytemuck::cast_slice(bytes))?
            }
            // SAFETY: the Python object that owns the memory is alive for the whole call (the
            // caller holds it); its stream was synchronised above and ours is below.
            Source::Device { address, bytes, .. } => unsafe {
                gpu.wrap_device(address, len_of::<DI>(bytes))?
            },
        };
        let (mut output, host): (DeviceBuffer<DO>, Option<&mut [u8]>) = match destination {
            Destination::Host(bytes) => (gpu.alloc(len_of::<DO>(bytes.len()), 0)?, Some(bytes)),
            // SAFETY: as for the input.
            Destination::Device { address, bytes, .. } => {
                (unsafe { gpu.wrap_device(address, len_of::<DO>(bytes))? }, None)
            }
        };
        launch(&input, &mut output)?;
        stream.synchronize().during("waiting for the launch")?;
        if let Some(host) = host {
            count_copy();
            let bytes = host.len();
            stream.memcpy_dtoh(&output.raw().slice(0..bytes), host).during("copying from the device")?;
            stream.synchronize().during("waiting for the download")?;
        }
        Ok(())
    });
    result.py(py)?;
    drop(array);
    drop(output);
    Ok(returned)
}

/// The shape of `object` if it is a numpy array (else an empty shape, which the dtype check
/// that follows rejects): for functions that take any shape.
pub fn shape_of(object: &Bound<'_, PyAny>) -> Vec<usize> {
    object.cast::<PyUntypedArray>().map(|a| a.shape().to_vec()).unwrap_or_default()
}

/// A numpy view of `len` elements of type `T` at `ptr` (a streaming engine's pinned slot),
/// shaped `shape` and owned by `owner`: the array's base object is `owner`, so the memory
/// stays valid for as long as the array lives. Writeable for an input slot, read-only for an
/// output slot. No copy: this is how a pipeline fills an engine's input (e.g.
/// `socket.recv_into(stream.input())`) and reads its output at the PCIe rate.
///
/// # Safety
///
/// `ptr` must point to `len` initialised `T`s that `owner` keeps allocated, unmoved, for its
/// whole life (the engines' pinned slots are allocated once, when the engine is made).
pub unsafe fn slot_view<'py, T: Elem>(
    owner: Bound<'py, PyAny>,
    ptr: *mut T,
    len: usize,
    shape: &[usize],
    writeable: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let py = owner.py();
    if shape.iter().product::<usize>() != len {
        return Err(Error::ShapeMismatch {
            what: "stream slot",
            expected: shape.iter().product(),
            actual: len,
        })
        .py(py);
    }
    // SAFETY: the caller guarantees `len` valid elements at `ptr` for the owner's life.
    let view = unsafe { numpy::ndarray::ArrayViewD::from_shape_ptr(shape, ptr as *const T) };
    // SAFETY: `owner` keeps the memory allocated and unmoved while the array (its base) lives.
    let array = unsafe { PyArrayDyn::borrow_from_array(&view, owner) };
    if !writeable {
        array.readwrite().make_nonwriteable();
    }
    Ok(array.into_any())
}
