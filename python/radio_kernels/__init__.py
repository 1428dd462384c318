"""radio-kernels: GPU kernels for radio-telescope correlators and beamformers.

The Python binding of the Rust crate ``radio-kernels`` (PyO3, one abi3 wheel for CPython
3.9+). Every engine runs the same Rust code as the Rust API, so results are bit for bit the
Rust results.

Arrays (numpy conventions: C order, explicit dtypes, nothing converted):

- Complex integers are a trailing axis of 2, ``[..., 2]`` = (re, im): ``int8`` samples and
  weights, ``int32`` visibilities per launch, ``int64`` integrated visibilities.
- Packed complex int4+4 samples (ci4: real part in the low nibble, imaginary in the high,
  each two's complement in [-8, 7]) are ``uint8``, one sample per byte (:func:`pack_ci4`).
- Complex float32 is ``complex64``; float16 is ``float16`` (complex float16 ``[..., 2]``).
- Arrays must be C-contiguous, aligned and of exactly the documented dtype: a wrong dtype
  raises :class:`DtypeError` (a ``TypeError``), a wrong shape :class:`ShapeMismatchError`,
  a non-contiguous or read-only array :class:`LayoutError` (both ``ValueError``).

GPU arrays: every GPU call takes numpy arrays (copied to and from the device) or device
arrays with ``__cuda_array_interface__`` (CuPy, Numba, PyTorch), used in place without a copy.
The array's stream (interface version 3) is synchronised before the launch and the
launcher's stream after it, so results are complete when the call returns. With
``out=None`` a CuPy input gives a CuPy output. ``_native.host_copy_count()`` counts the
binding's host<->device copies.

Errors: every failure raises a subclass of :class:`Error` whose message is the Rust error's
text; :class:`NoGpuError` (a ``RuntimeError``) when there is no CUDA driver or device. The CPU
references (:func:`correlate_reference`, :func:`beamform_reference`) and the packing helpers
need no GPU.

Across processes and machines: :mod:`radio_kernels.cluster` (digitiser source, F-engines and
X-engines joined by SPEAD streams over UDP; needs ``spead2``, ``pip install radio-kernels[cluster]``).

Files: :func:`write_filterbank` (SIGPROC filterbank, ``(time, channel)`` uint8 or float32
with a header mapping), :func:`write_frb_beams` and :func:`write_delay_beams` (one file per
beam), and :func:`write_uvh5` (pyuvdata's UVH5, integrated visibilities with their metadata;
in wheels built with the ``uvh5`` feature, ``HAS_UVH5``). They need no GPU; a failed write
raises :class:`IoError` (an ``OSError``).

Example::

    import numpy as np, radio_kernels as rk
    cfg = rk.CorrelatorConfig(stations=8, pols=2, channels=4, times=64)
    x = np.random.default_rng(0).integers(-8, 8, cfg.input_shape, dtype=np.int8)
    v = rk.correlate_reference(x, 8, 2, 4, 64)          # int64 [c][b][pi][pj][2]
    gpu = rk.open()                                     # NoGpuError without a GPU
    assert (rk.Correlator(gpu, 8, 2, 4, 64).correlate(x) == v).all()
"""

from ._native import (
    BacklogError,
    BasebandBeamformer,
    BasebandStream,
    BeamformerConfig,
    Correlator,
    CorrelatorConfig,
    DriverError,
    DtypeError,
    Error,
    Gpu,
    Integration,
    InvalidConfigError,
    LayoutError,
    LibraryError,
    MissingKernelError,
    MissingLibraryError,
    ModuleLoadError,
    NoGpuError,
    NonFiniteError,
    ShapeMismatchError,
    StreamBrokenError,
    UnsupportedDeviceError,
    WrongDeviceError,
    __version__,
    baseline_index,
    beamform_reference,
    ci4_from_offset_binary,
    ci4_from_real_high,
    ci4_to_offset_binary,
    ci4_to_real_high,
    corner_turn,
    correlate_reference,
    device_count,
    open,
    pack_ci4,
    unpack_ci4,
)

# --- file writers (SIGPROC filterbank, UVH5) ---
from ._native import (  # noqa: E402
    HAS_UVH5,
    IoError,
    write_delay_beams,
    write_filterbank,
    write_frb_beams,
)

if HAS_UVH5:
    from ._native import write_uvh5  # noqa: E402
# --- end file writers ---

__all__ = [
    "BacklogError",
    "BasebandBeamformer",
    "BasebandStream",
    "BeamformerConfig",
    "Correlator",
    "CorrelatorConfig",
    "DriverError",
    "DtypeError",
    "Error",
    "Gpu",
    "Integration",
    "InvalidConfigError",
    "LayoutError",
    "LibraryError",
    "MissingKernelError",
    "MissingLibraryError",
    "ModuleLoadError",
    "NoGpuError",
    "NonFiniteError",
    "ShapeMismatchError",
    "StreamBrokenError",
    "UnsupportedDeviceError",
    "WrongDeviceError",
    "__version__",
    "baseline_index",
    "beamform_reference",
    "ci4_from_offset_binary",
    "ci4_from_real_high",
    "ci4_to_offset_binary",
    "ci4_to_real_high",
    "corner_turn",
    "correlate_reference",
    "device_count",
    "open",
    "pack_ci4",
    "unpack_ci4",
    # --- file writers (SIGPROC filterbank, UVH5) ---
    "HAS_UVH5",
    "IoError",
    "write_delay_beams",
    "write_filterbank",
    "write_frb_beams",
    # --- end file writers ---
]

# --- PFB channelizer, delay beamformer, FRB beamformer (helper pyf) ---
from ._native import (
    ChannelizerConfig,
    DelayModel,
    PfbOutputChunk,
    Channelizer,
    ChannelizerStream,
    channelize_reference,
    hann_sinc_weights,
    pack_samples,
    unpack_samples,
    Beam,
    DelayBeamformerConfig,
    DelayPlan,
    DitherState,
    DeviceSteering,
    DelayBeamformer,
    DelayStream,
    delay_beamform_reference,
    coefficient_reference,
    curand_init,
    delay_reference_states,
    dither_value,
    engine_subsequence,
    FrbConfig,
    FrbBeamformer,
    ShortFft,
    ResampleConfig,
    Resampler,
    FusedResampler,
    FactorizedConfig,
    FactorizedResampler,
    QuantizeConfig,
    Quantizer,
    FrbStream,
    frb_cases,
    frb_intensity_reference,
    short_fft_reference,
    u_function,
    resample_reference,
    factorized_reference,
    quantize_reference,
    FRB_REL_L2_BOUND,
    FFT_REL_L2_BOUND,
)
# --- end PFB, delay, FRB ---

# --- PFB channelizer, delay beamformer, FRB beamformer (helper pyf) ---
__all__ += [
    "ChannelizerConfig",
    "DelayModel",
    "PfbOutputChunk",
    "Channelizer",
    "ChannelizerStream",
    "channelize_reference",
    "hann_sinc_weights",
    "pack_samples",
    "unpack_samples",
    "Beam",
    "DelayBeamformerConfig",
    "DelayPlan",
    "DitherState",
    "DeviceSteering",
    "DelayBeamformer",
    "DelayStream",
    "delay_beamform_reference",
    "coefficient_reference",
    "curand_init",
    "delay_reference_states",
    "dither_value",
    "engine_subsequence",
    "FrbConfig",
    "FrbBeamformer",
    "ShortFft",
    "ResampleConfig",
    "Resampler",
    "FusedResampler",
    "FactorizedConfig",
    "FactorizedResampler",
    "QuantizeConfig",
    "Quantizer",
    "FrbStream",
    "frb_cases",
    "frb_intensity_reference",
    "short_fft_reference",
    "u_function",
    "resample_reference",
    "factorized_reference",
    "quantize_reference",
    "FRB_REL_L2_BOUND",
    "FFT_REL_L2_BOUND",
]
# --- end PFB, delay, FRB ---
# --- file writers (SIGPROC filterbank, UVH5) ---
if HAS_UVH5:
    __all__.append("write_uvh5")
# --- end file writers ---
