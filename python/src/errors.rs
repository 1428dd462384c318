//! The exception hierarchy: `radio_kernels.Error` and one subclass per family of the Rust
//! `Error`, each message exactly the Rust error's `Display` text, plus the binding's own
//! checks of numpy and device arrays (`DtypeError`, `LayoutError`).
//!
//! The classes derive from the builtin exception a Python caller expects as well
//! (`InvalidConfigError(Error, ValueError)`, `NoGpuError(Error, RuntimeError)`, ...), which
//! needs multiple inheritance, so they are made at import with `type(name, bases, dict)`
//! rather than with `create_exception!` (one base only).
use pyo3::exceptions::{PyException, PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use pyo3::BoundObject;
use radio_kernels::Error;

/// One exception class: its name, its parents and its docstring.
struct Class {
    name: &'static str,
    /// Parents in this table (by index, earlier rows) and builtin parents.
    parents: &'static [Parent],
    doc: &'static str,
}

#[derive(Clone, Copy)]
enum Parent {
    Ours(Kind),
    Exception,
    Value,
    Runtime,
    Type,
    Os,
}

/// The classes, in the order of [`CLASSES`] (a parent comes before its children).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Error = 0,
    NoGpu,
    UnsupportedDevice,
    Driver,
    ModuleLoad,
    MissingKernel,
    InvalidConfig,
    ShapeMismatch,
    NonFinite,
    WrongDevice,
    StreamBroken,
    Backlog,
    MissingLibrary,
    Library,
    Dtype,
    Layout,
    Io,
}

use Parent::{Exception, Os, Ours, Runtime, Type, Value};

const CLASSES: &[Class] = &[
    Class {
        name: "Error",
        parents: &[Exception],
        doc: "Base class of every radio_kernels exception; its message is the Rust error's text.",
    },
    Class {
        name: "NoGpuError",
        parents: &[Ours(Kind::Error), Runtime],
        doc: "No usable GPU: no CUDA driver (libcuda) on this machine, or no device of that \
              ordinal (attributes `ordinal` and `count` then).",
    },
    Class {
        name: "UnsupportedDeviceError",
        parents: &[Ours(Kind::NoGpu)],
        doc: "The device is older than compute capability 8.0 (Ampere).",
    },
    Class {
        name: "DriverError",
        parents: &[Ours(Kind::Error), Runtime],
        doc: "A CUDA driver call failed; `during` names the step.",
    },
    Class {
        name: "ModuleLoadError",
        parents: &[Ours(Kind::Driver)],
        doc: "A kernel family's module failed to load (the driver's JIT compilation).",
    },
    Class {
        name: "MissingKernelError",
        parents: &[Ours(Kind::Error), Runtime],
        doc: "A kernel the embedded module should hold is missing (a build mismatch).",
    },
    Class {
        name: "InvalidConfigError",
        parents: &[Ours(Kind::Error), Value],
        doc: "A parameter is out of its documented range.",
    },
    Class {
        name: "ShapeMismatchError",
        parents: &[Ours(Kind::Error), Value],
        doc: "An array has the wrong shape or number of elements (attributes `what`, and \
              `expected` and `actual` when the Rust side reports element counts).",
    },
    Class {
        name: "NonFiniteError",
        parents: &[Ours(Kind::Error), Value],
        doc: "A float input holds NaN or an infinity (attributes `what`, `index`: flat index).",
    },
    Class {
        name: "WrongDeviceError",
        parents: &[Ours(Kind::Error), Value],
        doc: "A device array or stream belongs to another GPU than the one it is used with.",
    },
    Class {
        name: "StreamBrokenError",
        parents: &[Ours(Kind::Error), Runtime],
        doc: "A streaming engine refuses further use after a device error part-way through a step.",
    },
    Class {
        name: "BacklogError",
        parents: &[Ours(Kind::Error), Runtime],
        doc: "Every output slot of a streaming engine holds an output not yet taken: take one \
              (`output()`) before submitting more.",
    },
    Class {
        name: "MissingLibraryError",
        parents: &[Ours(Kind::Error), Runtime],
        doc: "A CUDA library the call needs (e.g. cuFFT) cannot be loaded.",
    },
    Class {
        name: "LibraryError",
        parents: &[Ours(Kind::Error), Runtime],
        doc: "A CUDA library call failed (attribute `code`: the library's status).",
    },
    Class {
        name: "DtypeError",
        parents: &[Ours(Kind::Error), Type],
        doc: "An argument is not an array of the documented dtype (checked by the binding).",
    },
    Class {
        name: "LayoutError",
        parents: &[Ours(Kind::Error), Value],
        doc: "An array is not C-contiguous, not aligned, or read-only where it is written \
              (checked by the binding).",
    },
    Class {
        name: "IoError",
        parents: &[Ours(Kind::Error), Os],
        doc: "Reading or writing a file failed (the file writers); `during` names the step and \
              the file, and the message ends with the operating system's or HDF5's error.",
    },
];

static TYPES: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

fn types(py: Python<'_>) -> PyResult<&Vec<Py<PyType>>> {
    TYPES.get_or_try_init(py, || {
        let make_type = py.get_type::<PyType>();
        let mut made: Vec<Py<PyType>> = Vec::with_capacity(CLASSES.len());
        for class in CLASSES {
            let parents = class
                .parents
                .iter()
                .map(|parent| match *parent {
                    Ours(kind) => made[kind as usize].bind(py).clone(),
                    Exception => py.get_type::<PyException>(),
                    Value => py.get_type::<PyValueError>(),
                    Runtime => py.get_type::<PyRuntimeError>(),
                    Type => py.get_type::<PyTypeError>(),
                    Os => py.get_type::<PyOSError>(),
                })
                .collect::<Vec<_>>();
            let namespace = PyDict::new(py);
            namespace.set_item("__module__", "radio_kernels")?;
            namespace.set_item("__doc__", class.doc)?;
            let class = make_type.call1((class.name, PyTuple::new(py, parents)?, namespace))?;
            made.push(class.cast_into::<PyType>()?.unbind());
        }
        Ok(made)
    })
}

/// Adds every exception class to the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    for (class, ty) in CLASSES.iter().zip(types(py)?) {
        module.add(class.name, ty.bind(py))?;
    }
    Ok(())
}

/// An exception of class `kind` with `message`, and `attributes` set on it.
pub fn raise(py: Python<'_>, kind: Kind, message: String, attributes: &[(&str, Py<PyAny>)]) -> PyErr {
    let make = || -> PyResult<PyErr> {
        let ty = types(py)?[kind as usize].bind(py);
        let value = ty.call1((message.clone(),))?;
        for (name, attribute) in attributes {
            value.setattr(*name, attribute)?;
        }
        Ok(PyErr::from_value(value))
    };
    make().unwrap_or_else(|e| e)
}

/// A `DtypeError` (a `TypeError`).
pub fn dtype_error(py: Python<'_>, message: String) -> PyErr {
    raise(py, Kind::Dtype, message, &[])
}

/// A `LayoutError` (a `ValueError`).
pub fn layout_error(py: Python<'_>, message: String) -> PyErr {
    raise(py, Kind::Layout, message, &[])
}

/// A `ShapeMismatchError` (a `ValueError`) raised by the binding's shape checks.
pub fn shape_error(py: Python<'_>, what: &str, message: String) -> PyErr {
    raise(py, Kind::ShapeMismatch, message, &[("what", object(py, what))])
}

/// An `InvalidConfigError` (a `ValueError`) raised by the binding's own checks, with the
/// message the Rust `Error::InvalidConfig` would have.
pub fn invalid(py: Python<'_>, message: String) -> PyErr {
    to_py(py, Error::InvalidConfig(message))
}

fn object<'py>(py: Python<'py>, value: impl IntoPyObject<'py>) -> Py<PyAny> {
    value.into_pyobject(py).map(|v| v.into_bound().into_any().unbind()).unwrap_or_else(|_| py.None())
}

/// The Python exception of a Rust error: the class of its family, the Rust `Display` text as
/// its message, and its fields as attributes.
pub fn to_py(py: Python<'_>, error: Error) -> PyErr {
    let message = error.to_string();
    let (kind, attributes): (Kind, Vec<(&str, Py<PyAny>)>) = match &error {
        Error::NoDriver => (Kind::NoGpu, vec![]),
        Error::NoDevice { ordinal, count } => {
            (Kind::NoGpu, vec![("ordinal", object(py, *ordinal)), ("count", object(py, *count))])
        }
        Error::UnsupportedDevice { name, major, minor } => (
            Kind::UnsupportedDevice,
            vec![("name", object(py, name.as_str())), ("compute_capability", object(py, (*major, *minor)))],
        ),
        Error::Driver { during, .. } => (Kind::Driver, vec![("during", object(py, *during))]),
        Error::ModuleLoad { family, arch, .. } => {
            (Kind::ModuleLoad, vec![("family", object(py, *family)), ("arch", object(py, *arch))])
        }
        Error::MissingKernel(name) => (Kind::MissingKernel, vec![("kernel", object(py, *name))]),
        Error::InvalidConfig(_) => (Kind::InvalidConfig, vec![]),
        Error::ShapeMismatch { what, expected, actual } => (
            Kind::ShapeMismatch,
            vec![
                ("what", object(py, *what)),
                ("expected", object(py, *expected)),
                ("actual", object(py, *actual)),
            ],
        ),
        Error::NonFinite { what, index } => {
            (Kind::NonFinite, vec![("what", object(py, *what)), ("index", object(py, *index))])
        }
        Error::WrongDevice { what } => (Kind::WrongDevice, vec![("what", object(py, *what))]),
        Error::StreamBroken { engine, .. } => (Kind::StreamBroken, vec![("engine", object(py, *engine))]),
        Error::Backlog { what, slots } => {
            (Kind::Backlog, vec![("what", object(py, *what)), ("slots", object(py, *slots))])
        }
        Error::MissingLibrary(library) => (Kind::MissingLibrary, vec![("library", object(py, *library))]),
        Error::Library { library, during, code } => (
            Kind::Library,
            vec![
                ("library", object(py, *library)),
                ("during", object(py, *during)),
                ("code", object(py, *code)),
            ],
        ),
        Error::Io { during, .. } => (Kind::Io, vec![("during", object(py, during.as_str()))]),
        // `Error` is non-exhaustive: a family added later is still an `Error`.
        _ => (Kind::Error, vec![]),
    };
    raise(py, kind, message, &attributes)
}

/// Converts a Rust result to a Python one (the GIL held).
pub trait PyResultExt<T> {
    /// `Err` becomes the Python exception of [`to_py`].
    fn py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> PyResultExt<T> for Result<T, Error> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}
