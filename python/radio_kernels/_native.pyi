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

def corner_turn(heaps: npt.NDArray[np.int8], out: npt.NDArray[np.int8], threads: int = 1) -> None:
    """The X-engine's corner turn: F-engine heaps int8 ``[heap time][dish][channel][spectrum]
    [pol][2]`` into the correlator input ``out`` int8 ``[heap time x spectrum][channel][dish]
    [pol][2]`` (e.g. :meth:`Integration.input`), ``out[h S + s][c][d] = heaps[h][d][c][s]``;
    cache-blocked, on ``threads`` threads, the GIL released."""

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
    def input(self) -> npt.NDArray[Any]: ...
    def submit(self, chunk: Optional[npt.NDArray[Any]] = None) -> None: ...
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
    def input(self) -> npt.NDArray[np.uint8]: ...
    def submit(self, e: Optional[npt.NDArray[np.uint8]] = None) -> None: ...
    def output(self) -> Optional[npt.NDArray[np.uint8]]: ...
    def output_view(self) -> Optional[npt.NDArray[np.uint8]]: ...
    def set_weights(self, weights: npt.NDArray[np.int8], shifts: npt.NDArray[np.int32]) -> None: ...
    @property
    def pending(self) -> int: ...
    @property
    def submitted(self) -> int: ...
    def synchronize(self) -> None: ...

# --- PFB channelizer, delay beamformer, FRB beamformer (helper pyf) ---

# PFB channelizer (F-engine). Input chunk uint8 [2][chunk_bytes] (MSB-first packed samples),
# flags bool [2][chunk_packets]; output [heap][channel][spectrum][pol]: ci8 int8 [..., 2],
# ci4 uint8.
class ChannelizerConfig:
    """What one channelizer computes; MeerKAT-like defaults; InvalidConfigError when invalid."""
    def __init__(
        self,
        channels: int,
        taps: Optional[int] = None,
        bits: Optional[int] = None,
        spectra_per_heap: Optional[int] = None,
        heaps_per_chunk: Optional[int] = None,
        chunk_samples: Optional[int] = None,
        packet_samples: Optional[int] = None,
        max_delay: Optional[int] = None,
        output: str = "ci8",
    ) -> None: ...
    channels: int
    taps: int
    bits: int
    spectra_per_heap: int
    heaps_per_chunk: int
    chunk_samples: int
    packet_samples: int
    max_delay: int
    output: str
    spectra_per_chunk: int
    window: int
    chunk_bytes: int
    chunk_packets: int
    max_outputs_per_push: int
    @property
    def input_shape(self) -> List[int]:
        """uint8 ``(2, chunk_bytes)``."""
    @property
    def flags_shape(self) -> List[int]:
        """bool ``(2, chunk_packets)``."""
    @property
    def output_shape(self) -> List[int]:
        """ci8: int8 ``(heaps, channels, spectra_per_heap, 2, 2)``; ci4: uint8 ``(heaps, channels, spectra_per_heap, 2)``."""
    @property
    def output_dtype(self) -> str: ...

class DelayModel:
    """Linear delay (samples) and fringe phase (radians) of one polarisation."""
    def __init__(
        self,
        delay: float = 0.0,
        delay_rate: float = 0.0,
        phase: float = 0.0,
        phase_rate: float = 0.0,
        reference_sample: float = 0.0,
    ) -> None: ...
    delay: float
    delay_rate: float
    phase: float
    phase_rate: float
    reference_sample: float

class PfbOutputChunk:
    """One output chunk: data, saturated uint32 [heaps][2], lost_spectra bool [spectra], lost_heaps bool [heaps];
    values complex128 [heaps][channels][spectra_per_heap][2] from the reference only."""
    first_spectrum: int
    data: npt.NDArray[Any]
    saturated: npt.NDArray[np.uint32]
    lost_spectra: npt.NDArray[np.bool_]
    lost_heaps: npt.NDArray[np.bool_]
    values: Optional[npt.NDArray[np.complex128]]

def channelize_reference(
    config: ChannelizerConfig,
    samples: npt.NDArray[np.int32],
    present: Optional[npt.NDArray[np.bool_]] = None,
    first_spectrum: int = 0,
    weights: Optional[npt.NDArray[np.float32]] = None,
    gains: Optional[npt.NDArray[np.complex64]] = None,
    models: Optional[Tuple[DelayModel, DelayModel]] = None,
    first_sample: int = 0,
) -> PfbOutputChunk:
    """The f64 reference of the output chunk from ``first_spectrum``; samples int32 [2][len]
    from stream sample ``first_sample`` (a multiple of packet_samples; 0: the whole stream),
    present bool [2][packets] from packet ``first_sample / packet_samples``."""
def hann_sinc_weights(channels: int, taps: int) -> npt.NDArray[np.float32]:
    """Default PFB weights ``w[t + 2n j]``, float32 [2 n taps]."""
def pack_samples(samples: npt.NDArray[np.int32], bits: int) -> npt.NDArray[np.uint8]:
    """Packs signed ``bits``-bit samples MSB first."""
def unpack_samples(packed: npt.NDArray[np.uint8], bits: int, count: int) -> npt.NDArray[np.int32]:
    """Unpacks ``count`` MSB-first samples."""

class Channelizer:
    """The F-engine of one antenna on one GPU."""
    def __init__(self, gpu: Gpu, config: ChannelizerConfig, weights: Optional[npt.NDArray[np.float32]] = None) -> None: ...
    @property
    def config(self) -> ChannelizerConfig: ...
    @property
    def gpu(self) -> Gpu: ...
    @property
    def path(self) -> str:
        """``"fused"`` or ``"three_kernel"``."""
    @property
    def kernels(self) -> List[str]: ...
    def set_gains(self, gains: npt.NDArray[np.complex64]) -> None:
        """complex64 [2][channels]."""
    def set_delay_model(self, pol: int, model: DelayModel) -> None: ...
    @property
    def delay_models(self) -> Tuple[DelayModel, DelayModel]: ...
    def push(self, samples: Union[npt.NDArray[np.uint8], Any], present: Optional[npt.NDArray[np.bool_]] = None) -> List[PfbOutputChunk]:
        """Appends one chunk per polarisation; returns the output chunks now complete."""
    def reset(self) -> None: ...
    @property
    def failure(self) -> Optional[str]: ...
    def streaming(self, depth: int = 3) -> ChannelizerStream:
        """A streaming engine starting at sample 0 with this channelizer's weights, gains and models."""

class ChannelizerStream:
    """The streaming F-engine: the same bytes as Channelizer.push."""
    def input(self) -> Tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]: ...
    def submit(self, samples: Optional[npt.NDArray[np.uint8]] = None, present: Optional[npt.NDArray[np.bool_]] = None) -> None: ...
    def output(self) -> Optional[PfbOutputChunk]: ...
    def output_view(self) -> Optional[PfbOutputChunk]: ...
    def set_gains(self, gains: npt.NDArray[np.complex64]) -> None: ...
    def set_delay_model(self, pol: int, model: DelayModel) -> None: ...
    @property
    def pending(self) -> int: ...
    @property
    def free_outputs(self) -> int: ...
    @property
    def depth(self) -> int: ...
    @property
    def output_slots(self) -> int: ...
    @property
    def max_outputs_per_submit(self) -> int: ...
    @property
    def failure(self) -> Optional[str]: ...
    def reset(self) -> None: ...

# Delay beamformer (B-engine). x int8 [antennas][channels][times][pols][2]; weights complex64
# and delays float32 [antennas][beams]; y int8 [beams][channels][times][2]; saturated uint32
# [beams]; dither states uint32 [count][6].
class Beam:
    """One beam: the input polarisation it forms from, and whether it is dithered."""
    def __init__(self, pol: int, dither: bool = False) -> None: ...
    pol: int
    dither: bool

class DelayBeamformerConfig:
    """What one delay-beamformer launch computes; InvalidConfigError when invalid."""
    def __init__(
        self, antennas: int, pols: int, channels: int, times: int, beams: List[Beam], first_channel: int = 0
    ) -> None: ...
    antennas: int
    pols: int
    channels: int
    first_channel: int
    times: int
    beams: List[Beam]
    dithered: bool
    input_shape: List[int]
    steering_shape: List[int]
    output_shape: List[int]

class DelayPlan:
    """The block mapping of a launch; fixes the dither states' number and order."""
    def __init__(self, config: DelayBeamformerConfig, tiles_per_group: int) -> None: ...
    @staticmethod
    def for_blocks(config: DelayBeamformerConfig, concurrent_blocks: int) -> DelayPlan: ...
    batches: int
    tiles: int
    tiles_per_group: int
    groups: int
    state_count: int

class DitherState:
    """Dither generators on the GPU, advanced by every dithered launch."""
    count: int
    seed: int
    first_subsequence: int
    def states(self) -> npt.NDArray[np.uint32]:
        """uint32 [count][6]."""

class DeviceSteering:
    """Weights and delays on the GPU, checked once."""

class DelayBeamformer:
    """A delay beamformer of one configuration on one GPU."""
    def __init__(self, gpu: Gpu, config: DelayBeamformerConfig) -> None: ...
    @property
    def config(self) -> DelayBeamformerConfig: ...
    @property
    def plan(self) -> DelayPlan: ...
    @property
    def gpu(self) -> Gpu: ...
    def dither_state(self, seed: int, first_subsequence: int = 0, offset: int = 0) -> DitherState: ...
    def upload_steering(self, weights: npt.NDArray[np.complex64], delays: npt.NDArray[np.float32]) -> DeviceSteering: ...
    def beamform(
        self,
        input: ArrayLike,
        weights: ArrayLike,
        delays: ArrayLike,
        dither: Optional[DitherState] = None,
        out: Optional[ArrayLike] = None,
        saturated: Optional[ArrayLike] = None,
    ) -> Tuple[Any, Any]:
        """(y int8, saturated uint32); numpy in, numpy out; CuPy in, CuPy out."""
    def beamform_steered(
        self,
        input: ArrayLike,
        steering: DeviceSteering,
        dither: Optional[DitherState] = None,
        out: Optional[ArrayLike] = None,
        saturated: Optional[ArrayLike] = None,
    ) -> Tuple[Any, Any]: ...
    def streaming(self, steering: DeviceSteering, dither: Optional[DitherState] = None, depth: int = 3) -> DelayStream: ...

class DelayStream:
    """The streaming delay beamformer; holds its DitherState until dropped."""
    def input(self) -> npt.NDArray[np.int8]: ...
    def submit(self, x: Optional[npt.NDArray[np.int8]] = None) -> None: ...
    def output_view(self) -> Optional[Tuple[npt.NDArray[np.int8], npt.NDArray[np.uint32]]]: ...
    def output(self) -> Optional[Tuple[npt.NDArray[np.int8], npt.NDArray[np.uint32]]]: ...
    def set_steering(self, weights: npt.NDArray[np.complex64], delays: npt.NDArray[np.float32]) -> None: ...
    def set_device_steering(self, steering: DeviceSteering) -> None: ...
    @property
    def pending(self) -> int: ...
    @property
    def submitted(self) -> int: ...
    @property
    def depth(self) -> int: ...
    def synchronize(self) -> None: ...

def delay_beamform_reference(
    config: DelayBeamformerConfig,
    input: npt.NDArray[np.int8],
    weights: npt.NDArray[np.complex64],
    delays: npt.NDArray[np.float32],
    plan: Optional[DelayPlan] = None,
    states: Optional[npt.NDArray[np.uint32]] = None,
) -> Tuple[npt.NDArray[np.int8], npt.NDArray[np.uint32], npt.NDArray[np.complex128], npt.NDArray[np.float64]]:
    """(y, saturated, values, magnitude); ``states`` advanced in place."""
def coefficient_reference(w: complex, d: float, channel: int) -> complex:
    """``w exp(j pi channel d)`` in f64."""
def curand_init(seed: int, subsequence: int, offset: int) -> npt.NDArray[np.uint32]:
    """curand's XORWOW state, uint32 [6]."""
def delay_reference_states(seed: int, first_subsequence: int, offset: int, count: int) -> npt.NDArray[np.uint32]:
    """uint32 [count][6]."""
def dither_value(r: int) -> float: ...
def engine_subsequence(engine: int) -> int: ...

# FRB beamformer. E uint8 ci4 [times][freqs][2][dishes]; weights float16 [freqs][2][m][n][2];
# I float16 [freqs][out_times][2m][2n]; J float16 [channels][times][beams]; codes uint8
# [channels][beams][row_bytes]; clip counts uint32 [channels][beams].
FRB_REL_L2_BOUND: float
FFT_REL_L2_BOUND: float

class FrbConfig:
    """One launch of the first FRB kernel; InvalidConfigError when invalid."""
    def __init__(self, dishes: int, m: int, n: int, freqs: int, times: int, t_ds: int = 1) -> None: ...
    dishes: int
    m: int
    n: int
    freqs: int
    times: int
    t_ds: int
    out_times: int
    e_shape: List[int]
    weights_shape: List[int]
    output_shape: List[int]

def frb_cases() -> List[Tuple[int, int, int, int]]:
    """(dishes, m, n, outer_block) of each compiled case."""
def frb_intensity_reference(
    config: FrbConfig, e: npt.NDArray[np.uint8], grid: npt.NDArray[np.int32], weights: npt.NDArray[np.float16]
) -> npt.NDArray[np.float64]: ...

class FrbBeamformer:
    """The first FRB kernel with its dish map (int32 [dishes][2]) and weights on the device."""
    def __init__(self, gpu: Gpu, config: FrbConfig, grid: npt.NDArray[np.int32], weights: npt.NDArray[np.float16]) -> None: ...
    @property
    def config(self) -> FrbConfig: ...
    @property
    def gpu(self) -> Gpu: ...
    def beamform(self, e: ArrayLike, out: Optional[ArrayLike] = None) -> Any:
        """I float16; numpy in, numpy out; CuPy in, CuPy out."""
    def streaming(
        self,
        resampler: Any,
        quantizer: Quantizer,
        scale: npt.NDArray[np.float32],
        offset: npt.NDArray[np.float32],
        depth: int = 3,
    ) -> FrbStream: ...

class ShortFft:
    """The tensor-core short FFT of length n."""
    def __init__(self, gpu: Gpu, n: int) -> None: ...
    n: int
    def run(self, x: ArrayLike, out: Optional[ArrayLike] = None) -> Any:
        """float16 [batch][n][2] to [batch][2n][2]."""
def short_fft_reference(x: npt.NDArray[np.float16]) -> npt.NDArray[np.complex128]:
    """complex128 [batch][2n]."""

class ResampleConfig:
    def __init__(self, channels: int, times: int, m: int, n: int, beams: int) -> None: ...
    channels: int
    times: int
    m: int
    n: int
    beams: int
    intensity_shape: List[int]
    positions_shape: List[int]
    output_shape: List[int]

class Resampler:
    """Non-factorizable resampler with W in device memory."""
    def __init__(self, gpu: Gpu, config: ResampleConfig) -> None: ...
    config: ResampleConfig
    kernel: str
    def set_beams(self, theta: ArrayLike, theta_prime: ArrayLike) -> None: ...
    def resample(self, intensity: ArrayLike, out: Optional[ArrayLike] = None) -> Any: ...

class FusedResampler:
    """Non-factorizable resampler forming W on the fly."""
    def __init__(self, gpu: Gpu, config: ResampleConfig) -> None: ...
    config: ResampleConfig
    kernel: str
    def set_beams(self, theta: ArrayLike, theta_prime: ArrayLike) -> None: ...
    def resample(self, intensity: ArrayLike, out: Optional[ArrayLike] = None) -> Any: ...

def u_function(n: int, q: int, theta: float) -> float: ...
def resample_reference(
    config: ResampleConfig,
    intensity: npt.NDArray[np.float16],
    theta: npt.NDArray[np.float32],
    theta_prime: npt.NDArray[np.float32],
) -> npt.NDArray[np.float64]: ...

class FactorizedConfig:
    def __init__(self, channels: int, times: int, m: int, n: int, g: int, g_prime: int) -> None: ...
    channels: int
    times: int
    m: int
    n: int
    g: int
    g_prime: int
    beams: int
    intensity_shape: List[int]
    output_shape: List[int]

class FactorizedResampler:
    def __init__(self, gpu: Gpu, config: FactorizedConfig) -> None: ...
    config: FactorizedConfig
    def set_grid(self, theta: npt.NDArray[np.float32], theta_prime: npt.NDArray[np.float32]) -> None: ...
    def resample(self, intensity: ArrayLike, out: Optional[ArrayLike] = None) -> Any: ...

def factorized_reference(
    config: FactorizedConfig,
    intensity: npt.NDArray[np.float16],
    theta: npt.NDArray[np.float32],
    theta_prime: npt.NDArray[np.float32],
) -> npt.NDArray[np.float64]: ...

class QuantizeConfig:
    def __init__(self, channels: int, times: int, beams: int, format: str = "u8") -> None: ...
    channels: int
    times: int
    beams: int
    format: str
    row_bytes: int
    input_shape: List[int]
    params_shape: List[int]
    output_shape: List[int]

def quantize_reference(
    config: QuantizeConfig,
    j: npt.NDArray[np.float16],
    scale: npt.NDArray[np.float32],
    offset: npt.NDArray[np.float32],
) -> Tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint32]]: ...

class Quantizer:
    def __init__(self, gpu: Gpu, config: QuantizeConfig) -> None: ...
    config: QuantizeConfig
    def quantize(
        self,
        j: ArrayLike,
        scale: ArrayLike,
        offset: ArrayLike,
        out: Optional[ArrayLike] = None,
        saturated: Optional[ArrayLike] = None,
    ) -> Tuple[Any, Any]: ...

class FrbStream:
    """E chunks in, quantised beams out."""
    def input(self) -> npt.NDArray[np.uint8]: ...
    def submit(self, e: Optional[npt.NDArray[np.uint8]] = None) -> None: ...
    def output_view(self) -> Optional[Tuple[int, npt.NDArray[np.uint8], npt.NDArray[np.uint32]]]: ...
    def output(self) -> Optional[Tuple[int, npt.NDArray[np.uint8], npt.NDArray[np.uint32]]]: ...
    def set_levels(self, scale: npt.NDArray[np.float32], offset: npt.NDArray[np.float32]) -> None: ...
    @property
    def pending(self) -> int: ...
    @property
    def depth(self) -> int: ...
    def reset(self) -> None: ...

# --- end PFB, delay, FRB ---
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
