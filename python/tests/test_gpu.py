"""GPU tests: results bit for bit the Rust CPU references, the streaming engines, bad
device arrays, and the zero-copy CuPy round trip proved with the host-copy counter. Every
test takes the `gpu` fixture, so all skip cleanly where `radio_kernels.open()` raises
NoGpuError."""

import numpy as np
import pytest

import radio_kernels as rk
from radio_kernels import _native
from conftest import HostPointer

CONFIGS = [
    # stations, pols, channels, times, format, order
    (5, 2, 3, 128, "ci8", "station_pol"),
    (7, 1, 2, 64, "ci8", "pol_station"),
    (64, 2, 2, 256, "ci8", "station_pol"),  # aligned rows: the wgmma kernels on Hopper
    (12, 2, 2, 128, "ci4", "pol_station"),
]


def random_input(rng, config):
    if config.format == "ci8":
        return rng.integers(-128, 128, config.input_shape, dtype=np.int8)
    return rng.integers(0, 256, config.input_shape, dtype=np.uint8)


@pytest.mark.parametrize("args", CONFIGS)
def test_correlate_is_the_reference(gpu, rng, args):
    config = rk.CorrelatorConfig(*args)
    x = random_input(rng, config)
    correlator = rk.Correlator(gpu, *args)
    before = _native.host_copy_count()
    v = correlator.correlate(x)
    assert _native.host_copy_count() - before == 2  # one upload, one download
    assert v.dtype == np.int32 and list(v.shape) == config.output_shape
    np.testing.assert_array_equal(v, rk.correlate_reference(x, *args))


def test_correlate_into_out(gpu, rng):
    args = CONFIGS[0]
    config = rk.CorrelatorConfig(*args)
    x = random_input(rng, config)
    correlator = rk.Correlator(gpu, *args)
    out = np.full(config.output_shape, 7, dtype=np.int32)
    assert correlator.correlate(x, out=out) is out
    np.testing.assert_array_equal(out, rk.correlate_reference(x, *args))
    out.setflags(write=False)
    with pytest.raises(rk.LayoutError, match="read-only"):
        correlator.correlate(x, out=out)
    with pytest.raises(rk.DtypeError):
        correlator.correlate(x, out=np.zeros(config.output_shape, dtype=np.int64))
    with pytest.raises(rk.ShapeMismatchError):
        correlator.correlate(x[:, :1])


def test_integration_sums_chunks(gpu, rng):
    args = CONFIGS[1]
    config = rk.CorrelatorConfig(*args)
    correlator = rk.Correlator(gpu, *args)
    chunks = [random_input(rng, config) for _ in range(5)]
    engine = correlator.integration(chunks_per_integration=2, depth=3)
    outputs = []
    for chunk in chunks:
        engine.submit(chunk)
        if engine.pending:
            outputs.append(engine.output())
    last = engine.finish()
    refs = [rk.correlate_reference(c, *args) for c in chunks]
    np.testing.assert_array_equal(outputs[0], refs[0] + refs[1])
    np.testing.assert_array_equal(outputs[1], refs[2] + refs[3])
    np.testing.assert_array_equal(last, refs[4])
    assert engine.output() is None


def test_integration_backlog(gpu, rng):
    args = CONFIGS[1]
    config = rk.CorrelatorConfig(*args)
    engine = rk.Correlator(gpu, *args).integration(chunks_per_integration=1, depth=3)
    chunk = random_input(rng, config)
    for _ in range(3):
        engine.submit(chunk)
    with pytest.raises(rk.BacklogError) as caught:
        engine.submit(chunk)
    assert isinstance(caught.value, RuntimeError) and caught.value.slots == 3
    assert engine.output() is not None
    engine.submit(chunk)


def baseband(rng, config):
    e = rng.integers(0, 256, config.e_shape, dtype=np.uint8)
    weights = rng.integers(-128, 128, config.weights_shape, dtype=np.int8)
    shifts = rng.integers(8, 14, config.shifts_shape, dtype=np.int32)
    return e, weights, shifts


@pytest.mark.parametrize("dims", [(64, 16, 2, 256), (512, 96, 1, 128)])
def test_beamform_is_the_reference(gpu, rng, dims):
    config = rk.BeamformerConfig(*dims)
    e, weights, shifts = baseband(rng, config)
    beamformer = rk.BasebandBeamformer(gpu, *dims, weights, shifts)
    j = beamformer.beamform(e)
    np.testing.assert_array_equal(j, rk.beamform_reference(e, weights, shifts, *dims))
    _, weights2, shifts2 = baseband(rng, config)
    beamformer.set_weights(weights2, shifts2)
    np.testing.assert_array_equal(beamformer.beamform(e), rk.beamform_reference(e, weights2, shifts2, *dims))


def test_baseband_stream(gpu, rng):
    dims = (64, 8, 2, 128)
    config = rk.BeamformerConfig(*dims)
    e0, weights, shifts = baseband(rng, config)
    stream = rk.BasebandBeamformer(gpu, *dims, weights, shifts).streaming(depth=3)
    chunks = [e0] + [baseband(rng, config)[0] for _ in range(4)]
    got = []
    for chunk in chunks:
        if stream.pending == 3:
            got.append(stream.output())
        stream.submit(chunk)
    while stream.pending:
        got.append(stream.output())
    assert stream.submitted == 5
    for chunk, j in zip(chunks, got):
        np.testing.assert_array_equal(j, rk.beamform_reference(chunk, weights, shifts, *dims))


def test_baseband_stream_slot_views_copy_nothing(gpu, rng):
    dims = (64, 8, 2, 128)
    config = rk.BeamformerConfig(*dims)
    e0, weights, shifts = baseband(rng, config)
    stream = rk.BasebandBeamformer(gpu, *dims, weights, shifts).streaming(depth=3)
    chunks = [e0] + [baseband(rng, config)[0] for _ in range(4)]
    before = rk._native.host_copy_count()
    got = []
    for chunk in chunks:
        if stream.pending == 3:
            got.append(np.array(stream.output_view()))
        slot = stream.input()
        assert slot.shape == tuple(config.e_shape) and slot.dtype == np.uint8 and slot.flags.writeable
        slot[...] = chunk
        stream.submit()
    while stream.pending:
        view = stream.output_view()
        assert not view.flags.writeable
        got.append(np.array(view))
    assert rk._native.host_copy_count() == before
    assert stream.output_view() is None
    for chunk, j in zip(chunks, got):
        np.testing.assert_array_equal(j, rk.beamform_reference(chunk, weights, shifts, *dims))


def test_integration_input_slot_copies_nothing(gpu, rng):
    args = CONFIGS[0]
    config = rk.CorrelatorConfig(*args)
    engine = rk.Correlator(gpu, *args).integration(chunks_per_integration=2, depth=3)
    chunks = [random_input(rng, config) for _ in range(2)]
    before = rk._native.host_copy_count()
    for chunk in chunks:
        slot = engine.input()
        assert slot.shape == chunk.shape and slot.dtype == chunk.dtype
        slot[...] = chunk
        engine.submit()
    assert rk._native.host_copy_count() == before
    refs = [rk.correlate_reference(c, *args) for c in chunks]
    np.testing.assert_array_equal(engine.output(), refs[0] + refs[1])


def test_host_pointer_is_refused(gpu):
    args = CONFIGS[0]
    config = rk.CorrelatorConfig(*args)
    correlator = rk.Correlator(gpu, *args)
    x = np.zeros(config.input_shape, dtype=np.int8)
    with pytest.raises(rk.InvalidConfigError, match="is not device memory"):
        correlator.correlate(HostPointer(x), out=np.zeros(config.output_shape, dtype=np.int32))


def test_cupy_zero_copy_round_trip(gpu, rng):
    cupy = pytest.importorskip("cupy")
    args = CONFIGS[2]
    config = rk.CorrelatorConfig(*args)
    x = random_input(rng, config)
    with cupy.cuda.Device(gpu.ordinal):
        xd = cupy.asarray(x)
        correlator = rk.Correlator(gpu, *args)
        before = _native.host_copy_count()
        vd = correlator.correlate(xd)
        assert _native.host_copy_count() == before, "a CuPy call made a host copy"
        assert isinstance(vd, cupy.ndarray) and vd.dtype == cupy.int32
        assert list(vd.shape) == config.output_shape
        out = cupy.full(config.output_shape, 3, dtype=cupy.int32)
        assert correlator.correlate(xd, out=out) is out
        assert _native.host_copy_count() == before
        reference = rk.correlate_reference(x, *args)
        np.testing.assert_array_equal(cupy.asnumpy(vd), reference)
        np.testing.assert_array_equal(cupy.asnumpy(out), reference)
        # On a non-default stream: its pending writes are ordered before the launch.
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            xs = cupy.asarray(x)
            vs = correlator.correlate(xs)
        np.testing.assert_array_equal(cupy.asnumpy(vs), reference)
        # Bad device arrays.
        with pytest.raises(rk.DtypeError):
            correlator.correlate(xd.astype(cupy.int16))
        with pytest.raises(rk.ShapeMismatchError):
            correlator.correlate(xd[:64])
        strided = cupy.zeros([2 * config.times] + config.input_shape[1:], dtype=cupy.int8)[::2]
        with pytest.raises(rk.LayoutError):
            correlator.correlate(strided)
        with pytest.raises(rk.DtypeError):
            correlator.correlate(xd, out=cupy.zeros(config.output_shape, dtype=cupy.int64))


def test_cupy_beamform_zero_copy(gpu, rng):
    cupy = pytest.importorskip("cupy")
    dims = (64, 16, 2, 256)
    config = rk.BeamformerConfig(*dims)
    e, weights, shifts = baseband(rng, config)
    beamformer = rk.BasebandBeamformer(gpu, *dims, weights, shifts)
    with cupy.cuda.Device(gpu.ordinal):
        ed = cupy.asarray(e)
        before = _native.host_copy_count()
        jd = beamformer.beamform(ed)
        assert _native.host_copy_count() == before
        assert isinstance(jd, cupy.ndarray)
        np.testing.assert_array_equal(cupy.asnumpy(jd), rk.beamform_reference(e, weights, shifts, *dims))
