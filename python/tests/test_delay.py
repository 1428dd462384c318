"""Delay beamformer: the CPU reference through Python against numpy (coefficients, beam sums,
quantisation, saturation counts), curand's XORWOW and the dither formula in numpy, bad
input; on the GPU, launches against the reference (exact away from rounding boundaries,
one LSB near them: the documented bound), the dither stream bit for bit, the streaming
engine equal to consecutive one-shot calls, and a zero-copy CuPy round trip."""

import numpy as np
import pytest

import radio_kernels as rk
from radio_kernels import _native

U32 = np.uint64(0xFFFFFFFF)


def make(rng, antennas=3, pols=2, channels=2, times=8, beams=None, first_channel=5):
    beams = beams or [rk.Beam(0), rk.Beam(1), rk.Beam(0)]
    config = rk.DelayBeamformerConfig(antennas, pols, channels, times, beams, first_channel)
    x = rng.integers(-128, 128, config.input_shape, dtype=np.int8)
    scale = 0.68 / np.sqrt(antennas)
    phase = rng.uniform(0, 2 * np.pi, config.steering_shape)
    w = (scale * rng.uniform(0.5, 1.5, config.steering_shape) * np.exp(1j * phase)).astype(np.complex64)
    d = rng.uniform(-3, 3, config.steering_shape).astype(np.float32)
    return config, x, w, d


def numpy_beams(config, x, w, d):
    """``sum_a w exp(j pi c d) x`` in f64: complex128 ``[beam][channel][time]``."""
    c = config.first_channel + np.arange(config.channels)
    turns = np.mod(c[None, None, :] * d.astype(np.float64)[:, :, None], 2.0)  # [a][b][c]
    coeff = w.astype(np.complex128)[:, :, None] * np.exp(1j * np.pi * turns)
    xc = x[..., 0].astype(np.float64) + 1j * x[..., 1].astype(np.float64)  # [a][c][t][p]
    pols = np.array([b.pol for b in config.beams])
    xb = xc[:, :, :, pols]  # [a][c][t][b]
    return np.einsum("abc,actb->bct", coeff, xb)


def quantise(values):
    q = np.stack([np.rint(values.real), np.rint(values.imag)], axis=-1)
    saturated = (np.abs(q) > 127).any(axis=-1).sum(axis=(1, 2))
    return np.clip(q, -127, 127).astype(np.int8), saturated.astype(np.uint32)


def away_from_boundaries(values, tol):
    parts = np.stack([values.real, values.imag], axis=-1)
    return (np.abs(parts - np.floor(parts) - 0.5) > tol) & (np.abs(np.abs(parts) - 127.5) > tol)


def test_reference_matches_numpy(rng):
    config, x, w, d = make(rng)
    y, saturated, values, magnitude = rk.delay_beamform_reference(config, x, w, d)
    assert y.dtype == np.int8 and list(y.shape) == config.output_shape
    assert saturated.dtype == np.uint32 and saturated.shape == (3,)
    want = numpy_beams(config, x, w, d)
    np.testing.assert_allclose(values, want, rtol=0, atol=1e-9 * np.abs(want).max())
    assert magnitude.shape == values.shape and (magnitude >= np.abs(values) - 1e-9).all()
    qy, qs = quantise(want)
    ok = away_from_boundaries(want, 1e-6)
    np.testing.assert_array_equal(y[ok], qy[ok])
    np.testing.assert_array_equal(saturated, qs)


def test_saturation_is_counted(rng):
    config, x, w, d = make(rng, beams=[rk.Beam(0), rk.Beam(1)])
    w = (w * np.float32(40)).astype(np.complex64)
    y, saturated, values, _ = rk.delay_beamform_reference(config, x, w, d)
    assert saturated.sum() > 0 and np.abs(y.astype(np.int64)).max() == 127 and (y != -128).all()
    np.testing.assert_array_equal(saturated, quantise(values)[1])


def test_coefficient_reference():
    for w, d, c in [(1 + 0j, 0.5, 1), (0.3 - 2j, -1.25, 7), (2j, 1e-3, 16777215)]:
        got = rk.coefficient_reference(w, d, c)
        turns = np.mod(float(c) * float(np.float32(d)), 2.0)
        want = complex(np.complex64(w)) * np.exp(1j * np.pi * turns)
        assert abs(got - want) < 1e-12 * max(1.0, abs(want))


def xorwow_numpy(state, draws):
    """curand's XORWOW (Marsaglia, 2003) in numpy uint64 arithmetic: raw 32-bit draws and the
    state after them."""
    v = [np.uint64(s) for s in state[:5]]
    d = np.uint64(state[5])
    out = []
    for _ in range(draws):
        t = v[0] ^ (v[0] >> np.uint64(2))
        v = v[1:] + [(v[4] ^ ((v[4] << np.uint64(4)) & U32)) ^ (t ^ ((t << np.uint64(1)) & U32))]
        d = (d + np.uint64(362437)) & U32
        out.append(int((v[4] + d) & U32))
    return out, [int(a) for a in v] + [int(d)]


def test_curand_states_and_dither():
    states = rk.delay_reference_states(42, 7, 3, 4)
    assert states.dtype == np.uint32 and states.shape == (4, 6)
    for i in range(4):
        np.testing.assert_array_equal(states[i], rk.curand_init(42, 7 + i, 3))
    # Skipping `offset` steps is stepping the generator `offset` times.
    _, stepped = xorwow_numpy(rk.curand_init(42, 7, 0), 3)
    np.testing.assert_array_equal(rk.curand_init(42, 7, 3), np.array(stepped, dtype=np.uint32))
    assert rk.engine_subsequence(3) == 3 << 32
    # Symmetric dither: r as i32, negatives moved up by one, to f32 toward zero, times 2^-32.
    for r, want in [(0, 0.0), (0xFFFFFFFF, 0.0), (0x7FFFFFFF, 2147483520 / 2**32), (0x80000000, -2147483520 / 2**32), (5, 5 / 2**32)]:
        assert rk.dither_value(r) == np.float32(want)


def test_dithered_reference_advances_states(rng):
    config, x, w, d = make(rng, beams=[rk.Beam(0, dither=True), rk.Beam(1)])
    plan = rk.DelayPlan(config, 1)
    states = rk.delay_reference_states(9, 0, 0, plan.state_count)
    start = states.copy()
    y, _, values, _ = rk.delay_beamform_reference(config, x, w, d, plan=plan, states=states)
    assert not (states == start).all(), "the states advance"
    undithered = numpy_beams(config, x, w, d)
    dither = values - undithered
    assert (np.abs(dither[0].real) < 0.5).all() and (np.abs(dither[0].imag) < 0.5).all()
    assert np.abs(dither[0]).max() > 0
    np.testing.assert_allclose(dither[1], 0, atol=1e-9 * np.abs(undithered).max())
    # Replaying from the same states gives the same bytes.
    again = start.copy()
    y2, _, _, _ = rk.delay_beamform_reference(config, x, w, d, plan=plan, states=again)
    np.testing.assert_array_equal(y, y2)
    np.testing.assert_array_equal(again, states)
    with pytest.raises(rk.InvalidConfigError, match="dithered beams need"):
        rk.delay_beamform_reference(config, x, w, d, plan=plan)
    with pytest.raises(rk.ShapeMismatchError):
        rk.delay_beamform_reference(config, x, w, d, plan=plan, states=start[:-1].copy())
    with pytest.raises(rk.LayoutError, match="read-only"):
        start.setflags(write=False)
        rk.delay_beamform_reference(config, x, w, d, plan=plan, states=start)


def test_bad_input(rng):
    config, x, w, d = make(rng)
    with pytest.raises(rk.InvalidConfigError) as caught:
        rk.DelayBeamformerConfig(3, 2, 2, 12, [rk.Beam(0)])
    assert str(caught.value) == "invalid configuration: times must be a positive multiple of 8, got 12"
    with pytest.raises(rk.InvalidConfigError, match="reads polarisation 1 of 1"):
        rk.DelayBeamformerConfig(3, 1, 2, 8, [rk.Beam(1)])
    with pytest.raises(rk.DtypeError, match="weights must have dtype complex64"):
        rk.delay_beamform_reference(config, x, w.astype(np.complex128), d)
    with pytest.raises(rk.DtypeError):
        rk.delay_beamform_reference(config, x.astype(np.int16), w, d)
    with pytest.raises(rk.ShapeMismatchError):
        rk.delay_beamform_reference(config, x, w, d[:, :2].copy())
    with pytest.raises(rk.LayoutError):
        rk.delay_beamform_reference(config, x, np.asfortranarray(np.tile(w, (1, 2)))[:, ::2], d)
    bad = d.copy()
    bad[2, 1] = np.inf
    with pytest.raises(rk.NonFiniteError) as caught:
        rk.delay_beamform_reference(config, x, w, bad)
    assert caught.value.index == 2 * 3 + 1


# --- GPU -------------------------------------------------------------------------------


def tolerance(antennas, magnitude, value):
    """The f32 error bound of one output (as the Rust GPU tests)."""
    u = 2.0**-24
    return magnitude * (1e-6 + 3.0 * (antennas + 2.0) * u) + 8.0 * u * (np.abs(value) + 1.0)


def assert_matches(config, y, reference):
    ry, _, values, magnitude = reference
    parts = np.stack([values.real, values.imag], axis=-1)
    tol = tolerance(config.antennas, magnitude[..., None], parts)
    diff = np.abs(y.astype(np.int64) - ry.astype(np.int64))
    assert diff.max() <= 1
    near = (np.abs(parts - np.floor(parts) - 0.5) <= tol) | (np.abs(np.abs(parts) - 127.5) <= tol)
    assert (diff[~near] == 0).all()


def test_beamform_is_the_reference(gpu, rng):
    config, x, w, d = make(rng, antennas=40, channels=3, times=64)
    bf = rk.DelayBeamformer(gpu, config)
    before = _native.host_copy_count()
    y, saturated = bf.beamform(x, w, d)
    assert _native.host_copy_count() - before == 5
    assert y.dtype == np.int8 and saturated.dtype == np.uint32
    assert_matches(config, y, rk.delay_beamform_reference(config, x, w, d))
    steering = bf.upload_steering(w, d)
    y2, s2 = bf.beamform_steered(x, steering)
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(s2, saturated)
    dconfig, dx, dw, dd = make(rng, beams=[rk.Beam(0, dither=True)])
    with pytest.raises(rk.InvalidConfigError, match="dithered beams need"):
        rk.DelayBeamformer(gpu, dconfig).beamform(dx, dw, dd)
    with pytest.raises(rk.ShapeMismatchError):
        bf.beamform(x[:, :1].copy(), w, d)


def test_dither_is_bit_exact(gpu, rng):
    config, x, w, d = make(rng, antennas=16, channels=2, times=128, beams=[rk.Beam(0, True), rk.Beam(1, True), rk.Beam(1)])
    bf = rk.DelayBeamformer(gpu, config)
    plan = bf.plan
    state = bf.dither_state(1234, first_subsequence=rk.engine_subsequence(2))
    assert state.count == plan.state_count
    states = rk.delay_reference_states(1234, rk.engine_subsequence(2), 0, plan.state_count)
    np.testing.assert_array_equal(state.states(), states)
    for _ in range(2):
        y, _ = bf.beamform(x, w, d, dither=state)
        reference = rk.delay_beamform_reference(config, x, w, d, plan=plan, states=states)
        assert_matches(config, y, reference)
        np.testing.assert_array_equal(state.states(), states)


def test_stream_equals_one_shot_calls(gpu, rng):
    config, _, w, d = make(rng, antennas=8, channels=2, times=64, beams=[rk.Beam(0, True), rk.Beam(1)])
    bf = rk.DelayBeamformer(gpu, config)
    steering = bf.upload_steering(w, d)
    chunks = [rng.integers(-128, 128, config.input_shape, dtype=np.int8) for _ in range(5)]
    one_shot_state = bf.dither_state(7)
    want = [bf.beamform_steered(x, steering, dither=one_shot_state) for x in chunks]
    stream_state = bf.dither_state(7)
    stream = bf.streaming(steering, dither=stream_state, depth=3)
    with pytest.raises(rk.InvalidConfigError, match="in use by a DelayStream"):
        stream_state.states()
    got = []
    for x in chunks:
        if stream.pending == 3:
            got.append(stream.output())
        stream.submit(x)
    while stream.pending:
        got.append(stream.output())
    assert stream.submitted == 5 and stream.output() is None
    for (y, s), (gy, gs) in zip(want, got):
        np.testing.assert_array_equal(gy, y)
        np.testing.assert_array_equal(gs, s)
    del stream
    np.testing.assert_array_equal(stream_state.states(), one_shot_state.states())


def test_stream_slot_views_copy_nothing(gpu, rng):
    config, _, w, d = make(rng, antennas=8, channels=2, times=64, beams=[rk.Beam(0), rk.Beam(1)])
    bf = rk.DelayBeamformer(gpu, config)
    steering = bf.upload_steering(w, d)
    chunks = [rng.integers(-128, 128, config.input_shape, dtype=np.int8) for _ in range(5)]
    want = [bf.beamform_steered(x, steering) for x in chunks]
    stream = bf.streaming(steering, depth=3)
    before = rk._native.host_copy_count()
    got = []
    for x in chunks:
        if stream.pending == 3:
            y, s = stream.output_view()
            got.append((np.array(y), np.array(s)))
        slot = stream.input()
        assert slot.shape == x.shape and slot.dtype == np.int8
        slot[...] = x
        stream.submit()
    while stream.pending:
        y, s = stream.output_view()
        assert not y.flags.writeable
        got.append((np.array(y), np.array(s)))
    assert rk._native.host_copy_count() == before
    for (y, s), (gy, gs) in zip(want, got):
        np.testing.assert_array_equal(gy, y)
        np.testing.assert_array_equal(gs, s)


def test_cupy_zero_copy(gpu, rng):
    cupy = pytest.importorskip("cupy")
    config, x, w, d = make(rng, antennas=16, channels=2, times=64)
    bf = rk.DelayBeamformer(gpu, config)
    reference = bf.beamform(x, w, d)
    with cupy.cuda.Device(gpu.ordinal):
        xd, wd, dd = cupy.asarray(x), cupy.asarray(w), cupy.asarray(d)
        before = _native.host_copy_count()
        yd, sd = bf.beamform(xd, wd, dd)
        assert _native.host_copy_count() == before, "a CuPy call made a host copy"
        assert isinstance(yd, cupy.ndarray) and isinstance(sd, cupy.ndarray) and sd.dtype == cupy.uint32
        np.testing.assert_array_equal(cupy.asnumpy(yd), reference[0])
        np.testing.assert_array_equal(cupy.asnumpy(sd), reference[1])
        with pytest.raises(rk.DtypeError):
            bf.beamform(xd, wd.astype(cupy.complex128), dd)
