"""PFB channelizer: the f64 CPU reference through Python against numpy's FFT of the FIR
output, the sample packing against numpy's bit packing, bad input, and (GPU) the
channelizer against the reference (within one LSB, the documented bound), the streaming
engine equal to push bit for bit. The GPU tests take the `gpu` fixture and skip without one."""

import numpy as np
import pytest

import radio_kernels as rk
from radio_kernels import _native

# n = 64 channels, T = 4 taps, 8-bit samples, 4 spectra per output chunk, 512-sample chunks.
TINY = dict(taps=4, bits=8, spectra_per_heap=4, heaps_per_chunk=1, chunk_samples=512, packet_samples=256, max_delay=4)


def tiny(**changes):
    return rk.ChannelizerConfig(64, **{**TINY, **changes})


def numpy_pfb(samples, weights, n, taps, spectra, first, gains, models):
    """The channelizer's formula in numpy, f64: ``values[0][k][m][pol]``."""
    out = np.zeros((1, n, spectra, 2), dtype=np.complex128)
    w = weights.astype(np.float64)
    for pol in range(2):
        model = models[pol]
        for i in range(spectra):
            m = first + i
            t = 2.0 * n * m + n * taps - model.reference_sample
            d = model.delay + model.delay_rate * t
            coarse = np.round(d)  # ties to even, as Rust's round_ties_even
            fine = d - coarse
            phase = model.phase + model.phase_rate * t
            start = 2 * n * m - int(coarse)
            x = np.array([samples[pol, s] if s >= 0 else 0 for s in range(start, start + 2 * n * taps)], dtype=np.float64)
            fir = (x * w).reshape(taps, 2 * n).sum(axis=0)
            spectrum = np.fft.fft(fir)[:n]
            k = np.arange(n)
            rotation = np.exp(1j * (phase - np.pi * k * fine / n))
            out[0, :, i, pol] = spectrum * rotation * gains[pol].astype(np.complex128)
    return out


def quantise(values, limit):
    re = np.clip(np.rint(values.real), -limit, limit)
    im = np.clip(np.rint(values.imag), -limit, limit)
    clipped = (np.abs(np.rint(values.real)) > limit) | (np.abs(np.rint(values.imag)) > limit)
    return re.astype(np.int64), im.astype(np.int64), clipped


@pytest.mark.parametrize(
    "models,first",
    [
        ((rk.DelayModel(), rk.DelayModel()), 0),
        ((rk.DelayModel(delay=0.3, phase=0.5), rk.DelayModel(delay=-0.2, phase_rate=1e-3)), 1),
        ((rk.DelayModel(delay=2.0), rk.DelayModel(delay=-3.4, phase=-1.0)), 0),
    ],
)
def test_reference_is_numpy_fft_of_fir(rng, models, first):
    config = tiny()
    samples = rng.integers(-128, 128, (2, 2048), dtype=np.int32)
    gains = (rng.normal(size=(2, 64)) + 1j * rng.normal(size=(2, 64))).astype(np.complex64) * np.float32(0.2)
    weights = rk.hann_sinc_weights(64, 4)
    assert weights.dtype == np.float32 and weights.shape == (512,)
    r = rk.channelize_reference(config, samples, first_spectrum=first, gains=gains, models=models)
    want = numpy_pfb(samples, weights, 64, 4, 4, first, gains, models)
    assert r.values.dtype == np.complex128 and r.values.shape == want.shape
    scale = np.abs(want).max()
    np.testing.assert_allclose(r.values, want, rtol=0, atol=1e-9 * scale)
    # Quantisation: round half to even, saturate to +-127, away from rounding boundaries.
    re, im, clipped = quantise(r.values, 127)
    assert r.data.dtype == np.int8 and list(r.data.shape) == config.output_shape
    np.testing.assert_array_equal(r.data[..., 0], re)
    np.testing.assert_array_equal(r.data[..., 1], im)
    np.testing.assert_array_equal(r.saturated, clipped.sum(axis=(1, 2)).astype(np.uint32))
    # Spectra whose windows start before sample 0 are lost.
    starts = [2 * 64 * (first + i) - int(np.round(m.delay)) for m in models for i in range(4)]
    lost = np.array(starts).reshape(2, 4).min(axis=0) < 0
    np.testing.assert_array_equal(r.lost_spectra, lost)
    assert r.lost_heaps.tolist() == [bool(lost.any())]


def test_reference_ci4_and_lost_packets(rng):
    config = tiny(output="ci4")
    samples = rng.integers(-128, 128, (2, 1024), dtype=np.int32)
    present = np.ones((2, 4), dtype=bool)
    present[1, 2] = False  # samples 512..767 of polarisation 1
    gains = np.full((2, 64), 0.05, dtype=np.complex64)
    r = rk.channelize_reference(config, samples, present=present, gains=gains)
    assert r.data.dtype == np.uint8 and list(r.data.shape) == config.output_shape
    re, im, _ = quantise(r.values, 7)
    np.testing.assert_array_equal(r.data, ((re & 0xF) | ((im & 0xF) << 4)).astype(np.uint8))
    # Spectrum m reads samples 128 m .. 128 m + 511: spectra 1..3 touch packet 2.
    assert r.lost_spectra.tolist() == [False, True, True, True]
    assert r.lost_heaps.tolist() == [True]


@pytest.mark.parametrize("bits", [4, 8, 10, 12, 16])
def test_pack_samples_msb_first(rng, bits):
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    samples = rng.integers(lo, hi + 1, 64, dtype=np.int32)
    samples[:2] = [lo, hi]
    packed = rk.pack_samples(samples, bits)
    # numpy: each sample's two's-complement bits, MSB first, concatenated.
    bitmatrix = ((samples[:, None].astype(np.int64) >> np.arange(bits - 1, -1, -1)) & 1).astype(np.uint8)
    np.testing.assert_array_equal(packed, np.packbits(bitmatrix.reshape(-1)))
    np.testing.assert_array_equal(rk.unpack_samples(packed, bits, 64), samples)
    with pytest.raises(rk.InvalidConfigError, match=f"does not fit {bits} bits"):
        rk.pack_samples(np.array([hi + 1], dtype=np.int32), bits)


def test_config_errors_and_defaults():
    config = rk.ChannelizerConfig(1024)
    assert (config.taps, config.bits, config.spectra_per_heap, config.packet_samples) == (16, 10, 256, 4096)
    assert config.chunk_bytes == config.chunk_samples * 10 // 8
    assert config.input_shape == [2, config.chunk_bytes] and config.flags_shape == [2, config.chunk_packets]
    with pytest.raises(rk.InvalidConfigError) as caught:
        rk.ChannelizerConfig(100)
    assert str(caught.value) == "invalid configuration: channels must be a power of two in 64..=65536, got 100"
    with pytest.raises(rk.InvalidConfigError, match="bits must be one of"):
        tiny(bits=9)
    with pytest.raises(rk.InvalidConfigError, match="output must be"):
        tiny(output="ci16")


def test_reference_bad_input(rng):
    config = tiny()
    samples = rng.integers(-128, 128, (2, 1024), dtype=np.int32)
    with pytest.raises(rk.DtypeError, match="samples must have dtype int32"):
        rk.channelize_reference(config, samples.astype(np.int16))
    with pytest.raises(rk.ShapeMismatchError):
        rk.channelize_reference(config, samples[:1])
    with pytest.raises(rk.LayoutError, match="C-contiguous"):
        rk.channelize_reference(config, np.zeros((2, 2048), dtype=np.int32)[:, ::2])
    with pytest.raises(rk.DtypeError, match="present must have dtype bool"):
        rk.channelize_reference(config, samples, present=np.ones((2, 4), dtype=np.uint8))
    with pytest.raises(rk.InvalidConfigError, match="windows read up to sample"):
        rk.channelize_reference(config, samples[:, :256].copy())
    bad_gains = np.ones((2, 64), dtype=np.complex64)
    bad_gains[1, 3] = np.nan
    with pytest.raises(rk.NonFiniteError) as caught:
        rk.channelize_reference(config, samples, gains=bad_gains)
    assert caught.value.index == 2 * (64 + 3)
    with pytest.raises(rk.DtypeError):
        rk.channelize_reference(config, samples, gains=bad_gains.astype(np.complex128))
    with pytest.raises(rk.InvalidConfigError, match="beyond max_delay"):
        rk.channelize_reference(config, samples, models=(rk.DelayModel(delay=10.0), rk.DelayModel()))


# --- GPU -------------------------------------------------------------------------------


def stream_chunks(config, samples):
    """The packed chunks (uint8 [2][chunk_bytes]) of an int32 [2][len] stream."""
    per = config.chunk_samples
    for k in range(samples.shape[1] // per):
        yield np.stack([rk.pack_samples(samples[p, k * per : (k + 1) * per], config.bits) for p in range(2)])


def test_channelizer_is_the_reference(gpu, rng):
    config = tiny()
    samples = rng.integers(-128, 128, (2, 4096), dtype=np.int32)
    gains = np.full((2, 64), 0.1 + 0.05j, dtype=np.complex64)
    models = (rk.DelayModel(delay=1.3, phase=0.2), rk.DelayModel(delay=-0.7))
    ch = rk.Channelizer(gpu, config)
    ch.set_gains(gains)
    for pol, m in enumerate(models):
        ch.set_delay_model(pol, m)
    assert ch.delay_models[0] == models[0]
    present = np.ones((2, config.chunk_packets), dtype=bool)
    outputs = []
    for chunk in stream_chunks(config, samples):
        before = _native.host_copy_count()
        got = ch.push(chunk, present)
        assert _native.host_copy_count() - before == 1 + len(got)
        outputs += got
    assert len(outputs) >= 2
    for out in outputs[:3]:
        r = rk.channelize_reference(config, samples, first_spectrum=out.first_spectrum, gains=gains, models=models)
        # Every component within one LSB of the f64 reference (the documented bound).
        assert np.abs(out.data.astype(np.int64) - r.data.astype(np.int64)).max() <= 1
        np.testing.assert_array_equal(out.lost_spectra, r.lost_spectra)
        np.testing.assert_array_equal(out.lost_heaps, r.lost_heaps)
    with pytest.raises(rk.ShapeMismatchError):
        ch.push(np.zeros((2, 3), dtype=np.uint8))
    with pytest.raises(rk.DtypeError):
        ch.push(np.zeros(config.input_shape, dtype=np.int8))
    with pytest.raises(rk.InvalidConfigError, match="polarisation must be 0 or 1"):
        ch.set_delay_model(2, rk.DelayModel())
    with pytest.raises(rk.NonFiniteError):
        ch.set_delay_model(0, rk.DelayModel(delay=float("nan")))


def test_stream_equals_push(gpu, rng):
    config = tiny(heaps_per_chunk=2)
    samples = rng.integers(-128, 128, (2, 8192), dtype=np.int32)
    gains = np.full((2, 64), 0.1, dtype=np.complex64)
    present = rng.random((16, 2, config.chunk_packets)) > 0.1
    ch = rk.Channelizer(gpu, config)
    ch.set_gains(gains)
    ch.set_delay_model(0, rk.DelayModel(delay=2.5, delay_rate=1e-4))
    stream = ch.streaming(depth=3)
    pushed, streamed = [], []
    for k, chunk in enumerate(stream_chunks(config, samples)):
        pushed += ch.push(chunk, present[k])
        while stream.free_outputs < stream.max_outputs_per_submit:
            streamed.append(stream.output())
        stream.submit(chunk, present[k])
    while stream.pending:
        streamed.append(stream.output())
    assert stream.output() is None
    assert len(pushed) == len(streamed) > 0
    for a, b in zip(pushed, streamed):
        assert a.first_spectrum == b.first_spectrum
        np.testing.assert_array_equal(a.data, b.data)
        np.testing.assert_array_equal(a.saturated, b.saturated)
        np.testing.assert_array_equal(a.lost_spectra, b.lost_spectra)
        np.testing.assert_array_equal(a.lost_heaps, b.lost_heaps)


def test_push_takes_device_arrays_without_a_host_copy(gpu, rng):
    cupy = pytest.importorskip("cupy")
    config = tiny()
    samples = rng.integers(-128, 128, (2, 4096), dtype=np.int32)
    present = rng.random((8, 2, config.chunk_packets)) > 0.1
    on_host, on_device = rk.Channelizer(gpu, config), rk.Channelizer(gpu, config)
    for ch in (on_host, on_device):
        ch.set_delay_model(0, rk.DelayModel(delay=1.5))
    want, got = [], []
    with cupy.cuda.Device(gpu.ordinal):
        for k, chunk in enumerate(stream_chunks(config, samples)):
            want += on_host.push(chunk, present[k])
            device_chunk = cupy.asarray(chunk)
            before = _native.host_copy_count()
            out = on_device.push(device_chunk, present[k])
            # Only the completed outputs come to the host; the samples never do.
            assert _native.host_copy_count() - before == len(out)
            got += out
    assert len(want) == len(got) >= 2
    for a, b in zip(want, got):
        assert a.first_spectrum == b.first_spectrum
        np.testing.assert_array_equal(a.data, b.data)
        np.testing.assert_array_equal(a.saturated, b.saturated)
        np.testing.assert_array_equal(a.lost_spectra, b.lost_spectra)


def test_stream_slot_views_copy_nothing(gpu, rng):
    config = tiny(heaps_per_chunk=2)
    samples = rng.integers(-128, 128, (2, 8192), dtype=np.int32)
    present = rng.random((16, 2, config.chunk_packets)) > 0.1
    ch = rk.Channelizer(gpu, config)
    ch.set_delay_model(0, rk.DelayModel(delay=2.5))
    stream = ch.streaming(depth=3)
    pushed, streamed = [], []
    before = _native.host_copy_count()
    for k, chunk in enumerate(stream_chunks(config, samples)):
        pushed += ch.push(chunk, present[k])
        while stream.free_outputs < stream.max_outputs_per_submit:
            out = stream.output_view()
            assert not out.data.flags.writeable
            streamed.append((out.first_spectrum, np.array(out.data), out.lost_spectra.copy()))
        views = stream.input()
        for pol in range(2):
            assert views[pol].shape == (config.chunk_bytes,) and views[pol].flags.writeable
            views[pol][...] = chunk[pol]
        stream.submit(present=present[k])
    while stream.pending:
        out = stream.output_view()
        streamed.append((out.first_spectrum, np.array(out.data), out.lost_spectra.copy()))
    # Only the one-shot pushes copied (their chunk in, their outputs out).
    assert _native.host_copy_count() - before == len(list(stream_chunks(config, samples))) + len(pushed)
    assert len(pushed) == len(streamed) > 0
    for a, (first, data, lost) in zip(pushed, streamed):
        assert a.first_spectrum == first
        np.testing.assert_array_equal(a.data, data)
        np.testing.assert_array_equal(a.lost_spectra, lost)
