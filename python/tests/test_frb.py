"""FRB beamformer: the CPU references through Python against numpy (the first kernel's
gridded DFT intensities, the zero-padded short FFT, the resampling formula of eq. 137 with
U of eq. 7, the factorized resampling, the quantiser bit for bit), bad input; on the GPU,
each kernel against its reference (relative L2 within the documented bounds, the quantiser
bit for bit), the streaming chain equal to the one-shot chain, and CuPy zero-copy round
trips."""

import numpy as np
import pytest

import radio_kernels as rk
from radio_kernels import _native
from conftest import unpack_ci4_numpy


def rel_l2(got, want):
    return float(np.linalg.norm(np.asarray(got, dtype=np.complex128) - want) / np.linalg.norm(want))


def first_inputs(rng, config):
    e = rng.integers(0, 256, config.e_shape, dtype=np.uint8)
    points = rng.permutation(config.m * config.n)[: config.dishes]
    grid = np.stack([points // config.n, points % config.n], axis=-1).astype(np.int32)
    # |W| <= 1/4 keeps the intensities (sums of up to t_ds x 2 squared beams of 64+ dishes)
    # well inside float16's range (65504); |W| <= 1 overflowed some to inf.
    weights = rng.uniform(-0.25, 0.25, config.weights_shape).astype(np.float16)
    return e, grid, weights


def intensity_numpy(config, e, grid, weights):
    """Eqs. 50-51: the weighted field on the M x N grid, its zero-padded DFT (exp(+j pi x q /
    N)) along both axes, |.|^2 summed over t_ds samples and both polarisations."""
    x = unpack_ci4_numpy(e).astype(np.float64)
    x = x[..., 0] + 1j * x[..., 1]  # [tau][f][pol][d]
    w = weights[..., 0].astype(np.float64) + 1j * weights[..., 1].astype(np.float64)  # [f][pol][m][n]
    m, n = config.m, config.n
    field = np.zeros((config.times, config.freqs, 2, 2 * m, 2 * n), dtype=np.complex128)
    field[:, :, :, grid[:, 0], grid[:, 1]] = x * w[None, :, :, grid[:, 0], grid[:, 1]]
    g = np.fft.ifft2(field) * (4 * m * n)
    power = (np.abs(g) ** 2).sum(axis=2)  # [tau][f][p][q]
    power = power.reshape(config.out_times, config.t_ds, config.freqs, 2 * m, 2 * n).sum(axis=1)
    return np.transpose(power, (1, 0, 2, 3))


def test_intensity_reference_matches_numpy(rng):
    config = rk.FrbConfig(64, 8, 8, freqs=2, times=64, t_ds=32)
    e, grid, weights = first_inputs(rng, config)
    i = rk.frb_intensity_reference(config, e, grid, weights)
    assert i.dtype == np.float64 and list(i.shape) == config.output_shape
    want = intensity_numpy(config, e, grid, weights)
    np.testing.assert_allclose(i, want, rtol=1e-9, atol=1e-9 * want.max())


def test_short_fft_reference_matches_numpy(rng):
    x = rng.uniform(-1, 1, (3, 12, 2)).astype(np.float16)
    y = rk.short_fft_reference(x)
    xc = x[..., 0].astype(np.float64) + 1j * x[..., 1].astype(np.float64)
    want = np.fft.ifft(xc, n=24) * 24  # y[q] = sum_m x[m] exp(j pi m q / N)
    assert y.dtype == np.complex128 and y.shape == (3, 24)
    np.testing.assert_allclose(y, want, atol=1e-12)


def u_numpy(n, q, theta):
    """Eq. 7: (1/N) sum_{s=0}^{N} A_s cos(pi (2 theta - q) s / N), A_0 = A_N = 1/2."""
    s = np.arange(n + 1)
    a = np.where((s == 0) | (s == n), 0.5, 1.0)
    x = 2.0 * np.asarray(theta, dtype=np.float64)[..., None] - q
    return (a * np.cos(np.pi * x * s / n)).sum(axis=-1) / n


def test_resample_reference_matches_numpy(rng):
    config = rk.ResampleConfig(channels=2, times=3, m=8, n=8, beams=5)
    i = rng.uniform(0, 4, config.intensity_shape).astype(np.float16)
    theta = rng.uniform(-8, 8, config.positions_shape).astype(np.float32)
    theta_prime = rng.uniform(-8, 8, config.positions_shape).astype(np.float32)
    j = rk.resample_reference(config, i, theta, theta_prime)
    assert j.dtype == np.float64 and list(j.shape) == config.output_shape
    up = np.stack([u_numpy(8, p, theta) for p in range(16)], axis=-1)  # [f][b][p]
    uq = np.stack([u_numpy(8, q, theta_prime) for q in range(16)], axis=-1)  # [f][b][q]
    want = np.einsum("ftpq,fbp,fbq->ftb", i.astype(np.float64), up, uq)
    np.testing.assert_allclose(j, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())
    assert abs(rk.u_function(8, 3, 1.5) - u_numpy(8, 3, 1.5)) < 1e-15
    # The factorized form gives the same beams as the list of its grid points.
    fconfig = rk.FactorizedConfig(channels=2, times=3, m=8, n=8, g=2, g_prime=3)
    t = rng.uniform(-4, 4, (2, 2)).astype(np.float32)
    tp = rng.uniform(-4, 4, (2, 3)).astype(np.float32)
    jf = rk.factorized_reference(fconfig, i, t, tp)
    listed = rk.ResampleConfig(channels=2, times=3, m=8, n=8, beams=6)
    expand = (np.repeat(t, 3, axis=1).copy(), np.tile(tp, (1, 2)).copy())
    np.testing.assert_allclose(jf, rk.resample_reference(listed, i, *expand), rtol=1e-9, atol=1e-12)


def quantize_numpy(config, j, scale, offset):
    x = j.astype(np.float64)[:, :, :] * scale[:, None, :] + offset[:, None, :]  # exact in f64
    x = x.astype(np.float32)
    r = np.rint(x)
    top = 255 if config.format == "u8" else 15
    clipped = np.isnan(x) | (r < 0) | (r > top)
    code = np.where(np.isnan(x), 0, np.clip(r, 0, top)).astype(np.uint8)  # [f][t][b]
    code = np.transpose(code, (0, 2, 1))  # [f][b][t]
    out = np.zeros(config.output_shape, dtype=np.uint8)
    if config.format == "u8":
        out[:, :, : config.times] = code
    else:
        for t in range(config.times):
            out[:, :, t // 2] |= code[:, :, t] << (4 * (t % 2))
    return out, clipped.sum(axis=1).astype(np.uint32)


@pytest.mark.parametrize("format", ["u8", "u4"])
def test_quantize_reference_matches_numpy(rng, format):
    config = rk.QuantizeConfig(channels=2, times=37, beams=5, format=format)
    j = (rng.integers(-64, 2048, config.input_shape) / 8).astype(np.float16)
    j[0, 0, 0], j[1, 2, 3], j[0, 5, 1] = np.inf, -np.inf, np.nan
    top = 255 if format == "u8" else 15
    scale = (rng.integers(1, 16, config.params_shape) / (16 * 64 / top)).astype(np.float32)
    offset = (rng.integers(-8, 8, config.params_shape) / 4).astype(np.float32)
    codes, saturated = rk.quantize_reference(config, j, scale, offset)
    assert codes.dtype == np.uint8 and list(codes.shape) == config.output_shape
    assert saturated.dtype == np.uint32 and list(saturated.shape) == config.params_shape
    want_codes, want_saturated = quantize_numpy(config, j, scale, offset)
    np.testing.assert_array_equal(codes, want_codes)
    np.testing.assert_array_equal(saturated, want_saturated)
    assert saturated.sum() >= 3


def test_bad_input(rng):
    with pytest.raises(rk.InvalidConfigError, match="is not one of the compiled cases"):
        rk.FrbConfig(64, 8, 9, 1, 64)
    with pytest.raises(rk.InvalidConfigError, match="format must be"):
        rk.QuantizeConfig(1, 1, 1, format="u2")
    config = rk.FrbConfig(64, 8, 8, freqs=1, times=64, t_ds=64)
    e, grid, weights = first_inputs(rng, config)
    with pytest.raises(rk.DtypeError, match="weights must have dtype float16"):
        rk.frb_intensity_reference(config, e, grid, weights.astype(np.float32))
    clash = grid.copy()
    clash[1] = clash[0]
    with pytest.raises(rk.InvalidConfigError, match="are both mapped to"):
        rk.frb_intensity_reference(config, e, clash, weights)
    with pytest.raises(rk.InvalidConfigError, match="negative grid point"):
        rk.frb_intensity_reference(config, e, -grid, weights)
    with pytest.raises(rk.ShapeMismatchError):
        rk.frb_intensity_reference(config, e[:, :, :1].copy(), grid, weights)
    bad = weights.copy()
    bad[0, 1, 2, 3, 1] = np.nan
    with pytest.raises(rk.NonFiniteError):
        rk.frb_intensity_reference(config, e, grid, bad)
    rconfig = rk.ResampleConfig(1, 2, 8, 8, 3)
    i = np.zeros(rconfig.intensity_shape, dtype=np.float16)
    theta = np.zeros(rconfig.positions_shape, dtype=np.float32)
    theta[0, 1] = np.nan
    with pytest.raises(rk.NonFiniteError):
        rk.resample_reference(rconfig, i, theta, np.zeros_like(theta))
    with pytest.raises(rk.LayoutError):
        rk.resample_reference(rconfig, np.zeros((1, 2, 16, 32), dtype=np.float16)[..., ::2], np.zeros_like(theta), np.zeros_like(theta))


# --- GPU -------------------------------------------------------------------------------


def test_first_kernel_within_bound(gpu, rng):
    config = rk.FrbConfig(64, 8, 8, freqs=3, times=128, t_ds=8)
    e, grid, weights = first_inputs(rng, config)
    first = rk.FrbBeamformer(gpu, config, grid, weights)
    before = _native.host_copy_count()
    i = first.beamform(e)
    assert _native.host_copy_count() - before == 2
    assert i.dtype == np.float16 and list(i.shape) == config.output_shape
    want = rk.frb_intensity_reference(config, e, grid, weights)
    assert rel_l2(i.astype(np.float64), want) < rk.FRB_REL_L2_BOUND


@pytest.mark.parametrize("n", [8, 12, 16, 20, 24, 28, 32])
def test_short_fft_within_bound(gpu, rng, n):
    fft = rk.ShortFft(gpu, n)
    x = rng.uniform(-1, 1, (100, n, 2)).astype(np.float16)
    y = fft.run(x)
    assert y.dtype == np.float16 and y.shape == (100, 2 * n, 2)
    got = y[..., 0].astype(np.float64) + 1j * y[..., 1].astype(np.float64)
    assert rel_l2(got, rk.short_fft_reference(x)) < rk.FFT_REL_L2_BOUND


@pytest.mark.parametrize("kind", ["Resampler", "FusedResampler"])
def test_resamplers_within_bound(gpu, rng, kind):
    config = rk.ResampleConfig(channels=2, times=40, m=8, n=12, beams=70)
    i = rng.uniform(0, 4, config.intensity_shape).astype(np.float16)
    theta = rng.uniform(-8, 8, config.positions_shape).astype(np.float32)
    theta_prime = rng.uniform(-12, 12, config.positions_shape).astype(np.float32)
    resampler = getattr(rk, kind)(gpu, config)
    resampler.set_beams(theta, theta_prime)
    j = resampler.resample(i)
    assert j.dtype == np.float16 and list(j.shape) == config.output_shape
    want = rk.resample_reference(config, i, theta, theta_prime)
    assert rel_l2(j.astype(np.float64), want) < 2.0**-8
    other = (rk.FusedResampler if kind == "Resampler" else rk.Resampler)(gpu, config)
    other.set_beams(theta, theta_prime)
    np.testing.assert_array_equal(other.resample(i), j)  # the same J bit for bit
    bad = theta.copy()
    bad[1, 3] = np.inf
    with pytest.raises(rk.NonFiniteError):
        resampler.set_beams(bad, theta_prime)


def test_factorized_within_bound(gpu, rng):
    config = rk.FactorizedConfig(channels=2, times=40, m=8, n=8, g=4, g_prime=5)
    i = rng.uniform(0, 4, config.intensity_shape).astype(np.float16)
    t = rng.uniform(-8, 8, (2, 4)).astype(np.float32)
    tp = rng.uniform(-8, 8, (2, 5)).astype(np.float32)
    resampler = rk.FactorizedResampler(gpu, config)
    resampler.set_grid(t, tp)
    j = resampler.resample(i)
    assert rel_l2(j.astype(np.float64), rk.factorized_reference(config, i, t, tp)) < 2.0**-8


@pytest.mark.parametrize("format", ["u8", "u4"])
def test_quantizer_is_the_reference(gpu, rng, format):
    config = rk.QuantizeConfig(channels=3, times=70, beams=33, format=format)
    j = rng.uniform(-10, 300, config.input_shape).astype(np.float16)
    j[0, 0, 0] = np.nan
    scale = rng.uniform(0.01, 1.5, config.params_shape).astype(np.float32)
    offset = rng.uniform(-5, 5, config.params_shape).astype(np.float32)
    codes, saturated = rk.Quantizer(gpu, config).quantize(j, scale, offset)
    want = rk.quantize_reference(config, j, scale, offset)
    np.testing.assert_array_equal(codes, want[0])
    np.testing.assert_array_equal(saturated, want[1])


def chain(gpu, rng, resampler_kind):
    first_config = rk.FrbConfig(64, 8, 8, freqs=2, times=128, t_ds=16)
    e, grid, weights = first_inputs(rng, first_config)
    first = rk.FrbBeamformer(gpu, first_config, grid, weights)
    rconfig = rk.ResampleConfig(channels=2, times=first_config.out_times, m=8, n=8, beams=24)
    resampler = getattr(rk, resampler_kind)(gpu, rconfig)
    resampler.set_beams(*(rng.uniform(-8, 8, (2, 2, 24)).astype(np.float32)))
    qconfig = rk.QuantizeConfig(channels=2, times=first_config.out_times, beams=24)
    quantizer = rk.Quantizer(gpu, qconfig)
    scale = np.full(qconfig.params_shape, 1e-3, dtype=np.float32)
    offset = np.full(qconfig.params_shape, 8.0, dtype=np.float32)
    return first_config, first, resampler, quantizer, scale, offset


@pytest.mark.parametrize("kind", ["Resampler", "FusedResampler"])
def test_stream_equals_one_shot_chain(gpu, rng, kind):
    config, first, resampler, quantizer, scale, offset = chain(gpu, rng, kind)
    stream = first.streaming(resampler, quantizer, scale, offset, depth=3)
    with pytest.raises(rk.InvalidConfigError, match="in use by an FrbStream"):
        resampler.set_beams(np.zeros((2, 24), np.float32), np.zeros((2, 24), np.float32))
    chunks = [rng.integers(0, 256, config.e_shape, dtype=np.uint8) for _ in range(4)]
    got = []
    for e in chunks:
        if stream.pending == stream.depth:
            got.append(stream.output())
        stream.submit(e)
    while stream.pending:
        got.append(stream.output())
    for k, (e, (chunk, codes, saturated)) in enumerate(zip(chunks, got)):
        assert chunk == k
        want = quantizer.quantize(resampler.resample(first.beamform(e)), scale, offset)
        np.testing.assert_array_equal(codes, want[0])
        np.testing.assert_array_equal(saturated, want[1])
    del stream
    resampler.set_beams(np.zeros((2, 24), np.float32), np.zeros((2, 24), np.float32))


def test_stream_slot_views_copy_nothing(gpu, rng):
    config, first, resampler, quantizer, scale, offset = chain(gpu, rng, "FusedResampler")
    chunks = [rng.integers(0, 256, config.e_shape, dtype=np.uint8) for _ in range(4)]
    want = [quantizer.quantize(resampler.resample(first.beamform(e)), scale, offset) for e in chunks]
    stream = first.streaming(resampler, quantizer, scale, offset, depth=3)
    before = _native.host_copy_count()
    got = []
    for e in chunks:
        if stream.pending == stream.depth:
            chunk, codes, saturated = stream.output_view()
            got.append((chunk, np.array(codes), np.array(saturated)))
        slot = stream.input()
        assert slot.shape == e.shape and slot.dtype == np.uint8
        slot[...] = e
        stream.submit()
    while stream.pending:
        chunk, codes, saturated = stream.output_view()
        assert not codes.flags.writeable
        got.append((chunk, np.array(codes), np.array(saturated)))
    assert _native.host_copy_count() == before
    for k, ((chunk, codes, saturated), (w_codes, w_saturated)) in enumerate(zip(got, want)):
        assert chunk == k
        np.testing.assert_array_equal(codes, w_codes)
        np.testing.assert_array_equal(saturated, w_saturated)


def test_stream_reset_keeps_slot_views_valid(gpu, rng):
    config, first, resampler, quantizer, scale, offset = chain(gpu, rng, "FusedResampler")
    e = rng.integers(0, 256, config.e_shape, dtype=np.uint8)
    want = quantizer.quantize(resampler.resample(first.beamform(e)), scale, offset)
    stream = first.streaming(resampler, quantizer, scale, offset, depth=2)
    view = stream.input()  # slot 0
    view[...] = 0
    stream.submit()
    stream.reset()  # keeps the engine's pinned slots: `view` is still slot 0's memory
    assert stream.pending == 0
    view[...] = e
    stream.submit()  # chunk 0 again, from slot 0
    chunk, codes, saturated = stream.output()
    assert chunk == 0
    np.testing.assert_array_equal(codes, want[0])
    np.testing.assert_array_equal(saturated, want[1])


def test_cupy_zero_copy(gpu, rng):
    cupy = pytest.importorskip("cupy")
    config, first, resampler, quantizer, scale, offset = chain(gpu, rng, "FusedResampler")
    e = rng.integers(0, 256, config.e_shape, dtype=np.uint8)
    i_host = first.beamform(e)
    j_host = resampler.resample(i_host)
    q_host = quantizer.quantize(j_host, scale, offset)
    with cupy.cuda.Device(gpu.ordinal):
        ed, sd, od = cupy.asarray(e), cupy.asarray(scale), cupy.asarray(offset)
        before = _native.host_copy_count()
        idev = first.beamform(ed)
        jdev = resampler.resample(idev)
        codes, saturated = quantizer.quantize(jdev, sd, od)
        assert _native.host_copy_count() == before, "a CuPy chain made a host copy"
        assert isinstance(codes, cupy.ndarray) and isinstance(saturated, cupy.ndarray)
        np.testing.assert_array_equal(cupy.asnumpy(idev), i_host)
        np.testing.assert_array_equal(cupy.asnumpy(jdev), j_host)
        np.testing.assert_array_equal(cupy.asnumpy(codes), q_host[0])
        np.testing.assert_array_equal(cupy.asnumpy(saturated), q_host[1])
        fft = rk.ShortFft(gpu, 16)
        x = cupy.asarray(rng.uniform(-1, 1, (64, 16, 2)).astype(np.float16))
        y = fft.run(x)
        assert isinstance(y, cupy.ndarray) and _native.host_copy_count() == before
        np.testing.assert_array_equal(cupy.asnumpy(y), fft.run(cupy.asnumpy(x)))
