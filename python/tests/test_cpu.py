"""CPU tests: the references through Python against numpy (bit for bit), the packing
helpers, the exception classes and bad input. No GPU needed."""

import numpy as np
import pytest

import radio_kernels as rk
from conftest import HostPointer, beamform_numpy, correlate_numpy, pack_ci4_numpy, unpack_ci4_numpy


def station_pol(x, order):
    """Input in `order` to [t][c][s][p][...] (station_pol)."""
    return x if order == "station_pol" else np.swapaxes(x, 2, 3)


@pytest.mark.parametrize("order", ["station_pol", "pol_station"])
@pytest.mark.parametrize("stations,pols", [(1, 1), (5, 2), (8, 1)])
def test_correlate_reference_ci8_matches_numpy(rng, order, stations, pols):
    config = rk.CorrelatorConfig(stations, pols, 3, 64, "ci8", order)
    x = rng.integers(-128, 128, config.input_shape, dtype=np.int8)
    v = rk.correlate_reference(x, stations, pols, 3, 64, "ci8", order)
    assert v.dtype == np.int64 and list(v.shape) == config.output_shape
    np.testing.assert_array_equal(v, correlate_numpy(station_pol(x, order)))


def test_correlate_reference_ci4_matches_numpy(rng):
    config = rk.CorrelatorConfig(6, 2, 2, 128, "ci4", "pol_station")
    packed = rng.integers(0, 256, config.input_shape, dtype=np.uint8)
    assert config.input_dtype == "uint8"
    v = rk.correlate_reference(packed, 6, 2, 2, 128, format="ci4", order="pol_station")
    np.testing.assert_array_equal(v, correlate_numpy(station_pol(unpack_ci4_numpy(packed), "pol_station")))


def test_extreme_values_are_exact():
    # -128 everywhere: every product is 2 * 128^2 per sample, summed over the times.
    x = np.full((64, 1, 2, 2, 2), -128, dtype=np.int8)
    v = rk.correlate_reference(x, 2, 2, 1, 64)
    assert v[..., 0].min() == v[..., 0].max() == 64 * 2 * 128 * 128
    assert (v[..., 1] == 0).all()


def test_output_index_and_baselines():
    config = rk.CorrelatorConfig(5, 2, 3, 64)
    assert config.baselines == 15
    assert rk.baseline_index(4, 2) == 4 * 5 // 2 + 2
    index = config.output_index(2, 4, 1, 1, 0)
    assert index == ((2 * 15 + rk.baseline_index(4, 1)) * 2 + 1) * 2 + 0
    x = np.random.default_rng(1).integers(-5, 5, config.input_shape, dtype=np.int8)
    v = rk.correlate_reference(x, 5, 2, 3, 64)
    xs = x.astype(np.int64)
    xi = xs[:, 2, 4, 1, 0] + 1j * xs[:, 2, 4, 1, 1]
    xj = xs[:, 2, 1, 0, 0] + 1j * xs[:, 2, 1, 0, 1]
    expected = np.sum(xi * np.conj(xj))
    assert tuple(v.reshape(-1, 2)[index]) == (expected.real, expected.imag)
    with pytest.raises(rk.InvalidConfigError):
        config.output_index(0, 1, 2, 0, 0)
    with pytest.raises(rk.InvalidConfigError):
        config.output_index(3, 0, 0, 0, 0)
    with pytest.raises(rk.InvalidConfigError):
        rk.baseline_index(0, 1)


def baseband_inputs(rng, config):
    e = rng.integers(0, 256, config.e_shape, dtype=np.uint8)
    weights = rng.integers(-128, 128, config.weights_shape, dtype=np.int8)
    shifts = rng.integers(0, 32, config.shifts_shape, dtype=np.int32)
    shifts[0, 0, :4] = [0, 1, 31, 12]
    return e, weights, shifts


def test_beamform_reference_matches_numpy(rng):
    config = rk.BeamformerConfig(64, 16, 2, 128)
    e, weights, shifts = baseband_inputs(rng, config)
    j = rk.beamform_reference(e, weights, shifts, 64, 16, 2, 128)
    assert j.dtype == np.uint8 and list(j.shape) == config.output_shape
    np.testing.assert_array_equal(j, beamform_numpy(e, weights, shifts))


def test_packing_round_trips():
    every = np.arange(256, dtype=np.uint8)
    x = rk.unpack_ci4(every)
    assert x.dtype == np.int8 and x.shape == (256, 2)
    np.testing.assert_array_equal(x, unpack_ci4_numpy(every))
    np.testing.assert_array_equal(rk.pack_ci4(x), every)
    np.testing.assert_array_equal(pack_ci4_numpy(x), every)
    grid = np.stack(np.meshgrid(np.arange(-8, 8), np.arange(-8, 8)), axis=-1).astype(np.int8)
    np.testing.assert_array_equal(rk.unpack_ci4(rk.pack_ci4(grid)), grid)
    np.testing.assert_array_equal(rk.ci4_from_offset_binary(every), every ^ 0x88)
    np.testing.assert_array_equal(rk.ci4_to_offset_binary(rk.ci4_from_offset_binary(every)), every)
    swapped = ((every & 0xF) << 4) | (every >> 4)
    np.testing.assert_array_equal(rk.ci4_from_real_high(every), swapped)
    np.testing.assert_array_equal(rk.ci4_to_real_high(rk.ci4_from_real_high(every)), every)


def test_pack_refuses_out_of_range():
    with pytest.raises(rk.InvalidConfigError, match=r"x.flat\[3\] = 8 is outside the int4 range"):
        rk.pack_ci4(np.array([[0, 0], [0, 8]], dtype=np.int8))
    with pytest.raises(ValueError):
        rk.pack_ci4(np.array([[-9, 0]], dtype=np.int8))


def test_exception_hierarchy():
    assert issubclass(rk.Error, Exception)
    for cls, builtin in [
        (rk.InvalidConfigError, ValueError),
        (rk.ShapeMismatchError, ValueError),
        (rk.NonFiniteError, ValueError),
        (rk.WrongDeviceError, ValueError),
        (rk.LayoutError, ValueError),
        (rk.DtypeError, TypeError),
        (rk.NoGpuError, RuntimeError),
        (rk.DriverError, RuntimeError),
        (rk.BacklogError, RuntimeError),
        (rk.StreamBrokenError, RuntimeError),
    ]:
        assert issubclass(cls, rk.Error) and issubclass(cls, builtin), cls
    assert issubclass(rk.UnsupportedDeviceError, rk.NoGpuError)
    assert issubclass(rk.ModuleLoadError, rk.DriverError)
    assert rk.InvalidConfigError.__module__ == "radio_kernels"


def test_invalid_config_has_the_rust_message():
    with pytest.raises(rk.InvalidConfigError) as caught:
        rk.CorrelatorConfig(4, 3, 1, 64)
    assert str(caught.value) == "invalid configuration: pols must be 1 or 2, got 3"
    with pytest.raises(rk.InvalidConfigError) as caught:
        rk.CorrelatorConfig(4, 2, 1, 100)
    assert str(caught.value) == (
        "invalid configuration: times per launch must be a positive multiple of the kernel's "
        "time tile (64), got 100"
    )
    with pytest.raises(rk.InvalidConfigError, match="format must be"):
        rk.CorrelatorConfig(4, 2, 1, 64, format="ci16")
    with pytest.raises(rk.InvalidConfigError, match="dishes must be a multiple of 64"):
        rk.BeamformerConfig(100, 16, 1, 128)


def test_bad_arrays_raise_typed_exceptions():
    good = np.zeros((64, 2, 3, 2, 2), dtype=np.int8)
    args = (3, 2, 2, 64)
    rk.correlate_reference(good, *args)
    with pytest.raises(rk.DtypeError, match="input must have dtype int8, got float32") as caught:
        rk.correlate_reference(good.astype(np.float32), *args)
    assert isinstance(caught.value, TypeError)
    with pytest.raises(rk.DtypeError):
        rk.correlate_reference(good.astype(np.int16), *args)
    with pytest.raises(rk.DtypeError, match="numpy array"):
        rk.correlate_reference(good.tolist(), *args)
    with pytest.raises(rk.ShapeMismatchError, match=r"input has shape \(64, 2, 3, 2\), expected \(64, 2, 3, 2, 2\)") as caught:
        rk.correlate_reference(good[..., 0], *args)
    assert isinstance(caught.value, ValueError) and caught.value.what == "input"
    strided = np.zeros((128, 2, 3, 2, 2), dtype=np.int8)[::2]
    with pytest.raises(rk.LayoutError, match="C-contiguous"):
        rk.correlate_reference(strided, *args)
    fortran = np.asfortranarray(good)
    with pytest.raises(rk.LayoutError):
        rk.correlate_reference(fortran, *args)
    swapped = good.astype(np.dtype(">i2")).astype(np.dtype(">i4"))
    with pytest.raises(rk.DtypeError):
        rk.correlate_reference(swapped, *args)


def test_bad_weights_and_shifts():
    config = rk.BeamformerConfig(64, 8, 1, 128)
    e = np.zeros(config.e_shape, dtype=np.uint8)
    weights = np.zeros(config.weights_shape, dtype=np.int8)
    shifts = np.zeros(config.shifts_shape, dtype=np.int32)
    shifts[0, 1, 3] = 32
    with pytest.raises(rk.InvalidConfigError) as caught:
        rk.beamform_reference(e, weights, shifts, 64, 8, 1, 128)
    assert str(caught.value) == "invalid configuration: a shift must be in 0..=31, got 32"
    with pytest.raises(rk.DtypeError):
        rk.beamform_reference(e, weights, shifts.astype(np.int64), 64, 8, 1, 128)
    shifts[0, 1, 3] = 31
    rk.beamform_reference(e, weights, shifts, 64, 8, 1, 128)
    with pytest.raises(rk.DtypeError):
        rk.beamform_reference(e.astype(np.int8), weights, shifts, 64, 8, 1, 128)


def test_cpu_reference_refuses_device_arrays():
    x = np.zeros((64, 1, 2, 1, 2), dtype=np.int8)
    with pytest.raises(rk.WrongDeviceError, match="device memory"):
        rk.correlate_reference(HostPointer(x, stream=1), 2, 1, 1, 64)


def test_open_without_gpu_raises_no_gpu_error():
    try:
        gpu = rk.open(0)
    except rk.NoGpuError as error:
        assert isinstance(error, RuntimeError)
        text = str(error)
        assert text == "no CUDA driver found (libcuda is not installed or not on the library path)" or (
            text.startswith("no CUDA device 0: the driver reports") or "compute capability" in text
        )
    else:
        assert gpu.compute_capability >= (8, 0)
        with pytest.raises(rk.NoGpuError, match="no CUDA device 4096"):
            rk.open(4096)


def test_corner_turn_is_the_transpose_and_refuses_bad_arrays(rng):
    h, d, c, s = 2, 5, 3, 37
    heaps = rng.integers(-128, 128, (h, d, c, s, 2, 2), dtype=np.int8)
    out = np.full((h * s, c, d, 2, 2), 99, np.int8)
    rk.corner_turn(heaps, out, 3)
    want = heaps.transpose(0, 3, 2, 1, 4, 5).reshape(h * s, c, d, 2, 2)
    np.testing.assert_array_equal(out, want)
    with pytest.raises(rk.ShapeMismatchError):
        rk.corner_turn(heaps, out[:-1])
    with pytest.raises(rk.ShapeMismatchError):
        rk.corner_turn(heaps[..., 0], out)
    with pytest.raises(rk.DtypeError):
        rk.corner_turn(heaps.astype(np.int16), out)
    with pytest.raises(rk.LayoutError):  # not C-contiguous
        rk.corner_turn(heaps, np.zeros((c, h * s, d, 2, 2), np.int8).transpose(1, 0, 2, 3, 4))
    read_only = out.copy()
    read_only.setflags(write=False)
    with pytest.raises(rk.LayoutError):
        rk.corner_turn(heaps, read_only)
    shifted = np.zeros(out.nbytes + 1, np.int8)[1:].reshape(out.shape)  # 1 byte off 4-byte words
    with pytest.raises(rk.LayoutError):
        rk.corner_turn(heaps, shifted)
