"""Type stubs of the extension module ``radio_kernels._native`` (re-exported by
``radio_kernels``). Array arguments are numpy arrays or device arrays with
``__cuda_array_interface__``; dtypes and shapes are in each docstring."""

from os import PathLike
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str

# An array argument: a numpy array, or any object with ``__cuda_array_interface__`` (CuPy, ...).
ArrayLike = Any

# Exceptions: each message is the Rust error's Display text.
class Error(Exception): ...
class NoGpuError(Error, RuntimeError):
    ordinal: int
    count: int
class UnsupportedDeviceError(NoGpuError):
    name: str
    compute_capability: Tuple[int, int]
class DriverError(Error, RuntimeError):
    during: str
class ModuleLoadError(DriverError):
    family: str
    arch: str
class MissingKernelError(Error, RuntimeError):
    kernel: str
class InvalidConfigError(Error, ValueError): ...
class ShapeMismatchError(Error, ValueError):
    what: str
    expected: int
    actual: int
class NonFiniteError(Error, ValueError):
    what: str
    index: int
class WrongDeviceError(Error, ValueError):
    what: str
class StreamBrokenError(Error, RuntimeError):
    engine: str
class BacklogError(Error, RuntimeError):
    what: str
    slots: int
class MissingLibraryError(Error, RuntimeError):
    library: str
class LibraryError(Error, RuntimeError):
    library: str
    during: str
    code: int
class DtypeError(Error, TypeError): ...
class LayoutError(Error, ValueError): ...

def host_copy_count() -> int:
    """Host<->device copies the binding has made since import (one per array moved)."""

class Gpu:
    """One CUDA device with the project's kernels, from :func:`open`."""
    @property
    def ordinal(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def compute_capability(self) -> Tuple[int, int]: ...
    @property
    def sm_count(self) -> int: ...
    def memory_info(self) -> Tuple[int, int]:
        """(free, total) device memory in bytes."""
    def synchronize(self) -> None:
        """Waits for all work on the device's default stream."""

def open(ordinal: int = 0) -> Gpu:
    """Opens CUDA device ``ordinal``; NoGpuError without a driver or device."""

def device_count() -> int:
    """Number of CUDA devices; NoGpuError without a CUDA driver."""

# Packing (ci4: real part in the low nibble, imaginary in the high, two's complement).
def pack_ci4(x: npt.NDArray[np.int8]) -> npt.NDArray[np.uint8]:
    """int8 ``[..., 2]`` (re, im in [-8, 7]) to uint8 ``[...]``; InvalidConfigError outside [-8, 7]."""
def unpack_ci4(packed: npt.NDArray[np.uint8]) -> npt.NDArray[np.int8]:
    """uint8 ``[...]`` to int8 ``[..., 2]`` (re, im)."""
def ci4_from_offset_binary(packed: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """Offset-binary nibbles to ci4 (``byte ^ 0x88``)."""
def ci4_to_offset_binary(packed: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """ci4 to offset-binary nibbles (``byte ^ 0x88``)."""
def ci4_from_real_high(packed: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """Real-in-high-nibble samples to ci4 (a nibble swap)."""
def ci4_to_real_high(packed: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """ci4 to the real-in-high-nibble convention (a nibble swap)."""

# Correlator.
class CorrelatorConfig:
    """What one correlator launch correlates; InvalidConfigError when invalid."""
    def __init__(
        self,
        stations: int,
        pols: int,
        channels: int,
        times: int,
        format: str = "ci8",
        order: str = "station_pol",
    ) -> None: ...
    @property
    def stations(self) -> int: ...
    @property
    def pols(self) -> int: ...
    @property
    def channels(self) -> int: ...
    @property
    def times(self) -> int: ...
    @property
    def format(self) -> str: ...
    @property
    def order(self) -> str: ...
    @property
    def baselines(self) -> int: ...
    @property
    def input_shape(self) -> List[int]:
        """ci8: ``[times][channels][stations][pols][2]`` (station_pol) or
        ``[times][channels][pols][stations][2]`` (pol_station); ci4 without the trailing 2."""
    @property
    def input_dtype(self) -> str:
        """``"int8"`` (ci8) or ``"uint8"`` (ci4)."""
    @property
    def output_shape(self) -> List[int]:
        """``[channels][baselines][pols][pols][2]``."""
    def output_index(self, channel: int, i: int, j: int, pi: int, pj: int) -> int:
        """Flat complex index of ``V[channel][b(i, j)][pi][pj]``, ``i >= j``."""

def baseline_index(i: int, j: int) -> int:
    """``b(i, j) = i (i + 1) / 2 + j`` for ``i >= j``."""

def correlate_reference(
    input: npt.NDArray[Any],
    stations: int,
    pols: int,
    channels: int,
    times: int,
    format: str = "ci8",
    order: str = "station_pol",
) -> npt.NDArray[np.int64]:
    """The exact CPU reference: int64 ``[channels][baselines][pols][pols][2]``."""

class Correlator:
    """A correlator of one configuration on one GPU."""
    def __init__(
        self,
        gpu: Gpu,
        stations: int,
        pols: int,
        channels: int,
        times: int,
        format: str = "ci8",
        order: str = "station_pol",
    ) -> None: ...
    @property
    def config(self) -> CorrelatorConfig: ...
    @property
    def gpu(self) -> Gpu: ...
    @property
    def kernel(self) -> str: ...
    def correlate(self, input: ArrayLike, out: Optional[ArrayLike] = None) -> Any:
        """int32 ``[channels][baselines][pols][pols][2]``; numpy in, numpy out; CuPy in, CuPy out."""
    def integration(self, chunks_per_integration: int = 0, depth: int = 3) -> Integration:
        """The streaming X-engine (int64 integrations)."""

class Integration:
    """The streaming X-engine of a Correlator."""
    def submit(self, chunk: npt.NDArray[Any]) -> None: ...
    def output(self) -> Optional[npt.NDArray[np.int64]]: ...
    def end_integration(self) -> None: ...
    def finish(self) -> npt.NDArray[np.int64]: ...
    @property
    def pending(self) -> int: ...
    @property
    def submitted(self) -> int: ...

# Baseband beamformer.
class BeamformerConfig:
    """What one baseband beamformer launch computes; InvalidConfigError when invalid."""
    def __init__(self, dishes: int, beams: int, freqs: int, times: int) -> None: ...
    @property
    def dishes(self) -> int: ...
    @property
    def beams(self) -> int: ...
    @property
    def freqs(self) -> int: ...
    @property
    def times(self) -> int: ...
    @property
    def e_shape(self) -> List[int]:
        """uint8 ci4 ``[times][freqs][2][dishes]``."""
    @property
    def weights_shape(self) -> List[int]:
        """int8 ``[freqs][2][beams][dishes][2]``."""
    @property
    def shifts_shape(self) -> List[int]:
        """int32 ``[freqs][2][beams]``, each in 0..=31."""
    @property
    def output_shape(self) -> List[int]:
        """uint8 ci4 ``[beams][freqs][2][times]``."""

def beamform_reference(
    e: npt.NDArray[np.uint8],
    weights: npt.NDArray[np.int8],
    shifts: npt.NDArray[np.int32],
    dishes: int,
    beams: int,
    freqs: int,
    times: int,
) -> npt.NDArray[np.uint8]:
    """The exact CPU reference: J, uint8 ci4 ``[beams][freqs][2][times]``."""

class BasebandBeamformer:
    """A baseband beamformer with its weights and shifts on the device."""
    def __init__(
        self,
        gpu: Gpu,
        dishes: int,
        beams: int,
        freqs: int,
        times: int,
        weights: npt.NDArray[np.int8],
        shifts: npt.NDArray[np.int32],
    ) -> None: ...
    @property
    def config(self) -> BeamformerConfig: ...
    @property
    def gpu(self) -> Gpu: ...
    @property
    def kernels(self) -> List[str]: ...
    def set_weights(self, weights: npt.NDArray[np.int8], shifts: npt.NDArray[np.int32]) -> None: ...
    def beamform(self, e: ArrayLike, out: Optional[ArrayLike] = None) -> Any:
        """J (uint8 ci4) from E; numpy in, numpy out; CuPy in, CuPy out."""
    def streaming(self, depth: int = 3) -> BasebandStream: ...

class BasebandStream:
    """The streaming baseband beamformer."""
    def submit(self, e: npt.NDArray[np.uint8]) -> None: ...
    def output(self) -> Optional[npt.NDArray[np.uint8]]: ...
    def set_weights(self, weights: npt.NDArray[np.int8], shifts: npt.NDArray[np.int32]) -> None: ...
    @property
    def pending(self) -> int: ...
    @property
    def submitted(self) -> int: ...
    def synchronize(self) -> None: ...

# --- file writers (SIGPROC filterbank, UVH5) ---
class IoError(Error, OSError):
    """Reading or writing a file failed; ``during`` names the step and the file."""
    during: str

HAS_UVH5: bool
"""Whether this build has :func:`write_uvh5` (the ``uvh5`` feature)."""

StrPath = Union[str, "PathLike[str]"]

def write_filterbank(
    path: StrPath,
    header: Mapping[str, Any],
    data: npt.NDArray[Any],
) -> None:
    """Writes a SIGPROC filterbank file: ``data`` C-contiguous ``(time, channel)`` uint8
    (nbits 8) or float32 (nbits 32); ``header`` the SIGPROC keys (``source_name``, ``fch1``,
    ``foff`` MHz, ``tsamp`` s, ``tstart`` MJD required; ``rawdatafile``, ``telescope_id``,
    ``machine_id``, ``src_raj``, ``src_dej``, ``az_start``, ``za_start``, ``nbeams``,
    ``ibeam``, ``nchans``, ``nbits`` optional). Channel ``k`` is at ``fch1 + k * foff``."""

def write_frb_beams(
    directory: StrPath,
    header: Mapping[str, Any],
    codes: npt.NDArray[np.uint8],
    *,
    times: int,
    format: str = "u8",
) -> List[str]:
    """One nbits-8 filterbank file per FRB beam (``beam_0000.fil``, ...) from the quantiser's
    codes, uint8 ``[channels][beams][row_bytes]``; returns the paths."""

def write_delay_beams(
    directory: StrPath,
    header: Mapping[str, Any],
    y: npt.NDArray[np.int8],
) -> List[str]:
    """One nbits-32 filterbank file of ``|y|^2`` per delay beam (``beam_0000.fil``, ...)
    from int8 ``[beams][channels][times][2]``; returns the paths."""

def write_uvh5(
    path: StrPath,
    vis: npt.NDArray[Any],
    *,
    freq_hz: npt.ArrayLike,
    channel_width_hz: float,
    times_jd: npt.ArrayLike,
    integration_time_s: float,
    antenna_positions_enu: npt.ArrayLike,
    flags: Optional[npt.NDArray[np.bool_]] = None,
    nsamples: Optional[npt.ArrayLike] = None,
    latitude_deg: float = 49.3207,
    longitude_deg: float = -119.6237,
    altitude_m: float = 545.0,
    telescope_name: str = "CHORD",
    instrument: str = "radio-kernels",
    antenna_names: Optional[Sequence[str]] = None,
    antenna_numbers: Optional[Sequence[int]] = None,
    lst_rad: Optional[npt.ArrayLike] = None,
    feed_basis: str = "linear",
    x_orientation: str = "east",
    history: str = "",
) -> None:
    """Writes a UVH5 file (pyuvdata's HDF5 format). ``vis``: ``[times][channels]
    [baselines][pols][pols]`` complex128/complex64, or ``[...][2]`` int64/int32 (the
    correlator's output per integration, stacked), baselines ``b(i, j) = i (i + 1) / 2 + j``,
    ``i >= j``. Baseline (i, j) is pyuvdata's (ant1 = j, ant2 = i), unconjugated,
    ``uvw = x_ant2 - x_ant1``. Only in builds with ``HAS_UVH5``."""
# --- end file writers ---
