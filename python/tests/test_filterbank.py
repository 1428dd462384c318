"""SIGPROC filterbank files written by ``radio_kernels.write_filterbank``, read back by
sigpyproc: header values, channel order and samples (u8 and f32), and bad input raised as
typed exceptions before any file is created.

``write_filterbank(path, header, data)``: ``header`` a mapping of SIGPROC keys
(``source_name``, ``fch1``, ``foff``, ``tsamp``, ``tstart`` required; ``rawdatafile``,
``telescope_id``, ``machine_id``, ``src_raj``, ``src_dej``, ``az_start``, ``za_start``,
``nbeams``, ``ibeam`` optional; ``nchans`` and ``nbits`` optional and, if given, must agree
with ``data``), ``data`` a C-contiguous ``(time, channel)`` array of ``uint8`` (``nbits`` 8)
or ``float32`` (``nbits`` 32). Channel ``k`` of each spectrum is at ``fch1 + k * foff`` MHz.
"""

import numpy as np
import pytest

rk = pytest.importorskip("radio_kernels")
# sigpyproc is a test requirement: a missing one fails the suite rather than skipping it.
from sigpyproc.readers import FilReader  # noqa: E402

# The Crab: 05h34m31.97s +22d00m52.1s, packed as SIGPROC's hhmmss.s and ddmmss.s.
CRAB = {"src_raj": 53431.97, "src_dej": 220052.1}
ERRORS = (ValueError, TypeError, KeyError)


def full_header(**changes):
    header = {
        "source_name": "B0531+21",
        "rawdatafile": "chord_beams.dat",
        "telescope_id": 0,
        "machine_id": 0,
        "az_start": 123.5,
        "za_start": 12.25,
        "tstart": 60000.123456789,
        "tsamp": 983.04e-6,
        "fch1": 800.0,
        "foff": -0.390625,
        "nbeams": 4,
        "ibeam": 2,
        **CRAB,
    }
    header.update(changes)
    return header


def read_back(path):
    """The header and the samples as ``(time, channel)`` (sigpyproc's blocks are
    ``(channel, time)``)."""
    reader = FilReader(str(path))
    block = reader.read_block(0, reader.header.nsamples)
    return reader.header, np.asarray(block.data).T


def test_u8_round_trip_keeps_every_header_value(tmp_path):
    times, nchans = 40, 16
    t, k = np.meshgrid(np.arange(times), np.arange(nchans), indexing="ij")
    data = ((7 * t + 3 * k) % 256).astype(np.uint8)
    path = tmp_path / "u8.fil"
    rk.write_filterbank(path, full_header(), data)
    header, samples = read_back(path)
    assert header.nbits == 8
    assert header.nchans == nchans
    assert header.nifs == 1
    assert header.nsamples == times
    assert header.data_type == "filterbank"
    assert header.fch1 == 800.0
    assert header.foff == -0.390625
    assert header.tsamp == 983.04e-6
    assert header.tstart == 60000.123456789
    assert header.source == "B0531+21"
    assert header.rawdatafile == "chord_beams.dat"
    assert header.telescope == "Fake"
    assert header.backend == "FAKE"
    assert (header.ibeam, header.nbeams) == (2, 4)
    assert header.azimuth.deg == pytest.approx(123.5)
    assert header.zenith.deg == pytest.approx(12.25)
    assert header.coord.ra.hourangle == pytest.approx(5 + 34 / 60 + 31.97 / 3600, abs=1e-9)
    assert header.coord.dec.deg == pytest.approx(22 + 52.1 / 3600, abs=1e-9)
    np.testing.assert_array_equal(header.chan_freqs, 800.0 - 0.390625 * np.arange(nchans))
    np.testing.assert_array_equal(samples, data)


def test_f32_round_trip_rising_frequency(tmp_path):
    times, nchans = 30, 8
    data = (1000 * np.arange(times)[:, None] + np.arange(nchans)[None, :] + 0.25).astype(np.float32)
    header = {"source_name": "J1234-5678", "fch1": 400.0, "foff": 0.5, "tsamp": 1e-3, "tstart": 59000.5}
    path = tmp_path / "f32.fil"
    rk.write_filterbank(path, header, data)
    read, samples = read_back(path)
    assert (read.nbits, read.nchans, read.nsamples) == (32, nchans, times)
    assert (read.fch1, read.foff, read.tsamp, read.tstart) == (400.0, 0.5, 1e-3, 59000.5)
    assert read.source == "J1234-5678"
    assert samples.dtype == np.float32
    np.testing.assert_array_equal(samples, data)
    # The optional keys were left out, so sigpyproc falls back to its defaults.
    assert (read.ibeam, read.nbeams) == (0, 1)


@pytest.mark.parametrize("foff", [-2.0, 2.0])
def test_channel_order_follows_fch1_and_foff(tmp_path, foff):
    """A tone in channel 5 is found by sigpyproc at ``fch1 + 5 foff``."""
    data = np.zeros((12, 10), dtype=np.float32)
    data[:, 5] = 100.0
    path = tmp_path / "tone.fil"
    rk.write_filterbank(path, full_header(fch1=1400.0, foff=foff), data)
    header, samples = read_back(path)
    peak = int(np.argmax(samples.sum(axis=0)))
    assert peak == 5
    assert header.chan_freqs[peak] == 1400.0 + 5 * foff


def bad_cases():
    good = np.zeros((4, 8), dtype=np.uint8)
    nan = np.zeros((4, 8), dtype=np.float32)
    nan[2, 3] = np.nan
    inf = np.zeros((4, 8), dtype=np.float32)
    inf[0, 0] = np.inf
    return [
        pytest.param(full_header(), nan, id="nan"),
        pytest.param(full_header(), inf, id="inf"),
        pytest.param(full_header(nbits=16), good, id="nbits-16"),
        pytest.param(full_header(nbits=32), good, id="nbits-disagrees-with-dtype"),
        pytest.param(full_header(nchans=7), good, id="nchans-disagrees-with-shape"),
        pytest.param(full_header(), good.astype(np.uint16), id="uint16"),
        pytest.param(full_header(), good.astype(np.float64), id="float64"),
        pytest.param(full_header(), good.ravel(), id="one-dimensional"),
        pytest.param(full_header(), good[None], id="three-dimensional"),
        pytest.param(full_header(), np.zeros((4, 16), dtype=np.uint8)[:, ::2], id="non-contiguous"),
        pytest.param(full_header(), np.zeros((8, 4), dtype=np.uint8).T, id="fortran-order"),
        pytest.param(full_header(tsamp=0.0), good, id="tsamp-zero"),
        pytest.param(full_header(tstart=float("nan")), good, id="tstart-nan"),
        pytest.param(full_header(foff=0.0), good, id="foff-zero"),
        pytest.param(full_header(fch1=-800.0), good, id="fch1-negative"),
        pytest.param(full_header(source_name=""), good, id="empty-source"),
        pytest.param(full_header(ibeam=4), good, id="ibeam-out-of-range"),
        pytest.param(full_header(src_raj=246000.0), good, id="ra-out-of-range"),
        pytest.param({k: v for k, v in full_header().items() if k != "fch1"}, good, id="no-fch1"),
    ]


@pytest.mark.parametrize("header, data", bad_cases())
def test_bad_input_raises_before_writing(tmp_path, header, data):
    path = tmp_path / "never.fil"
    with pytest.raises(ERRORS):
        rk.write_filterbank(path, header, data)
    assert not path.exists()


def test_non_finite_error_names_the_sample(tmp_path):
    data = np.zeros((4, 8), dtype=np.float32)
    data[2, 3] = np.nan
    with pytest.raises(ValueError, match="not finite"):
        rk.write_filterbank(tmp_path / "nan.fil", full_header(), data)


def test_delay_beams_one_file_per_beam_of_power(tmp_path, rng=np.random.default_rng(3)):
    beams, chans, times = 3, 6, 16
    y = rng.integers(-128, 128, size=(beams, chans, times, 2), dtype=np.int8)
    header = {"source_name": "delay", "fch1": 600.0, "foff": 0.4, "tsamp": 2.56e-6, "tstart": 60676.0}
    paths = rk.write_delay_beams(tmp_path / "delay", header, y)
    assert [p.split("/")[-1] for p in paths] == [f"beam_{b:04}.fil" for b in range(beams)]
    power = y[..., 0].astype(np.int64) ** 2 + y[..., 1].astype(np.int64) ** 2  # (b, c, t)
    for b, path in enumerate(paths):
        read, samples = read_back(path)
        assert (read.nbits, read.nchans, read.nsamples, read.ibeam, read.nbeams) == (32, chans, times, b, beams)
        np.testing.assert_array_equal(samples, power[b].T.astype(np.float32))
    with pytest.raises(rk.InvalidConfigError, match="ibeam"):
        rk.write_delay_beams(tmp_path / "bad", {**header, "ibeam": 1}, y)


def test_frb_beams_unpack_4_bit_codes(tmp_path):
    chans, beams, times = 4, 2, 20
    codes = np.arange(chans * beams * times).reshape(chans, beams, times) % 16  # (f, beta, t)
    row = 16  # 20 codes of 4 bits = 10 bytes, padded to 16
    packed = np.zeros((chans, beams, row), np.uint8)
    packed[:, :, : times // 2] = (codes[:, :, 0::2] | (codes[:, :, 1::2] << 4)).astype(np.uint8)
    header = {"source_name": "frb", "fch1": 400.0, "foff": 0.1, "tsamp": 1e-3, "tstart": 60676.0}
    paths = rk.write_frb_beams(tmp_path / "frb", header, packed, times=times, format="u4")
    for b, path in enumerate(paths):
        read, samples = read_back(path)
        assert (read.nbits, read.nchans, read.nsamples, read.ibeam) == (8, chans, times, b)
        np.testing.assert_array_equal(samples, codes[:, b, :].T)
    with pytest.raises(rk.ShapeMismatchError):
        rk.write_frb_beams(tmp_path / "short", header, packed[:, :, :8].copy(), times=times, format="u4")
