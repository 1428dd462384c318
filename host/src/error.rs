//! The one error type of the host API.
use cudarc::driver::DriverError;
use std::fmt;

/// Everything a host call can fail with. Launchers validate their inputs before touching the
/// GPU and report problems as `InvalidConfig`, `ShapeMismatch`, `NonFinite` or `WrongDevice`.
/// New variants may be added: match with a wildcard arm.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// No CUDA driver library (libcuda) on this machine.
    NoDriver,
    /// The driver is there but device `ordinal` is not (`count` devices exist).
    NoDevice {
        /// The device number asked for.
        ordinal: usize,
        /// How many devices the driver reports (valid ordinals are `0..count`).
        count: usize,
    },
    /// The device is older than the PTX target (sm_80).
    UnsupportedDevice {
        /// The device's name, as the driver reports it.
        name: String,
        /// Major compute capability (below 8).
        major: u32,
        /// Minor compute capability.
        minor: u32,
    },
    /// A CUDA driver call failed; `during` says which step.
    Driver {
        /// The step that failed, as a phrase ("creating the CUDA context").
        during: &'static str,
        /// The driver's error code.
        source: DriverError,
    },
    /// A kernel family's PTX module failed to load (the driver's JIT compilation).
    ModuleLoad {
        /// The kernel family's module name ([`Family::name`](crate::Family::name)).
        family: &'static str,
        /// The module's target architecture ([`Arch::name`](crate::Arch::name)).
        arch: &'static str,
        /// The driver's error code.
        source: DriverError,
    },
    /// A kernel the embedded module should hold is missing (a build mismatch).
    MissingKernel(&'static str),
    /// A parameter is out of its documented range.
    InvalidConfig(String),
    /// A buffer or array has the wrong number of elements.
    ShapeMismatch {
        /// The argument or buffer, by its parameter name.
        what: &'static str,
        /// The length its configuration requires, in its own elements.
        expected: usize,
        /// The length it has.
        actual: usize,
    },
    /// A float input holds NaN or an infinity: `what[index]` (the argument, and the index of
    /// its first non-finite value).
    NonFinite {
        /// The argument, by its parameter name.
        what: &'static str,
        /// Index of its first non-finite value, in its own elements (flat).
        index: usize,
    },
    /// A buffer or object belongs to another GPU (CUDA context) than the one it is used with.
    WrongDevice {
        /// The buffer, stream or object, by its parameter name.
        what: &'static str,
    },
    /// A streaming engine refuses further use: an earlier device error struck part-way
    /// through a step, so its kept state may be inconsistent. `reset()` starts a new stream.
    StreamBroken {
        /// The engine ("channelizer", ...).
        engine: &'static str,
        /// The error that broke the stream, as text.
        cause: String,
    },
    /// A streaming engine's output slots all hold outputs not yet taken: take one (the
    /// engine's `output()`) before submitting another chunk.
    Backlog {
        /// The engine or ring whose slots are full.
        what: &'static str,
        /// Its number of output slots.
        slots: usize,
    },
    /// A CUDA library the call needs (e.g. `cufft`) cannot be loaded on this machine.
    MissingLibrary(&'static str),
    /// A CUDA library call failed with status `code`; `during` says which step.
    Library {
        /// The library's name without `lib` (`cufft`).
        library: &'static str,
        /// The step that failed, as a phrase.
        during: &'static str,
        /// The library's status code (e.g. a `cufftResult`).
        code: i32,
    },
    /// Reading or writing a file failed (the file formats' writers and readers).
    Io {
        /// What was being done, as a phrase ("writing /data/beam_0000.fil").
        during: String,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// `std::result::Result` with [`Error`] as the default error: what every fallible host call
/// returns.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoDriver => {
                write!(f, "no CUDA driver found (libcuda is not installed or not on the library path)")
            }
            Error::NoDevice { ordinal, count } => {
                write!(f, "no CUDA device {ordinal}: the driver reports {count} device(s)")
            }
            Error::UnsupportedDevice { name, major, minor } => write!(
                f,
                "{name} has compute capability {major}.{minor}; radio-kernels needs 8.0 (Ampere) or newer"
            ),
            Error::Driver { during, source } => write!(f, "CUDA driver error while {during}: {source}"),
            Error::ModuleLoad { family, arch, source } => {
                write!(
                    f,
                    "loading the {family} kernels ({arch} PTX, JIT-compiled by the driver) failed: {source}"
                )
            }
            Error::MissingKernel(name) => write!(f, "kernel `{name}` is not in the loaded PTX module"),
            Error::InvalidConfig(message) => write!(f, "invalid configuration: {message}"),
            Error::ShapeMismatch { what, expected, actual } => {
                write!(f, "{what} has {actual} elements, expected {expected}")
            }
            Error::NonFinite { what, index } => {
                write!(f, "{what}[{index}] is not finite (NaN or infinite)")
            }
            Error::StreamBroken { engine, cause } => write!(
                f,
                "the {engine}'s stream broke on a device error ({cause}); reset() it to start a new stream"
            ),
            Error::WrongDevice { what } => {
                write!(f, "{what} belongs to another GPU (CUDA context) than the one it is used with")
            }
            Error::Backlog { what, slots } => write!(
                f,
                "all {slots} slots of the {what} hold outputs not yet taken; take one before submitting more"
            ),
            Error::MissingLibrary(library) => write!(
                f,
                "the CUDA library lib{library} cannot be loaded (not installed or not on the library path)"
            ),
            Error::Library { library, during, code } => write!(f, "{library} error {code} while {during}"),
            Error::Io { during, source } => write!(f, "I/O error while {during}: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Driver { source, .. } | Error::ModuleLoad { source, .. } => Some(source),
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Attaches the step that failed to a driver error.
pub trait DriverContext<T> {
    /// Turns a cudarc [`DriverError`] into [`Error::Driver`] with `during: step` (a phrase
    /// such as "copying the weights"); passes `Ok` values through.
    fn during(self, step: &'static str) -> Result<T>;
}

impl<T> DriverContext<T> for std::result::Result<T, DriverError> {
    fn during(self, step: &'static str) -> Result<T> {
        self.map_err(|source| Error::Driver { during: step, source })
    }
}
