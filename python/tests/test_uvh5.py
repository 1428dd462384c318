"""UVH5 round trip through pyuvdata, and the point-source phase test.

Our correlator computes V_ij = sum x_i conj(x_j) (i >= j) with the voltage of a source in
direction s at dish d being S(f) exp(+2 pi i f r_d . s / c). The UVH5 writer stores V_ij as
pyuvdata's baseline (ant1 = j, ant2 = i), unconjugated, with uvw = x_ant2 - x_ant1; pyuvdata's
``phase`` then removes exp(+2 pi i f w / c), so the phases of a point source flatten when we
phase to it, and do not when we phase elsewhere or when the data are conjugated.

Two sources of files:
- ``radio_kernels.write_uvh5`` (the Python package; skipped when it is not importable);
- files written by the Rust test ``cargo test --features uvh5 --test uvh5`` into
  ``$RADIO_KERNELS_UVH5_DIR`` (skipped when the variable is unset).
"""

import os
from pathlib import Path

import numpy as np
import pytest

pyuvdata = pytest.importorskip("pyuvdata")
astropy_units = pytest.importorskip("astropy.units")
from astropy.coordinates import AltAz, EarthLocation, SkyCoord  # noqa: E402
from astropy.time import Time  # noqa: E402

C = 299_792_458.0
# The Rust test's source (tests/uvh5.rs, SOURCE_AZ_EL_DEG): azimuth from north through east.
RUST_SOURCE_AZ_EL_DEG = (30.0, 70.0)
# Pols in the file: XX, YY, XY, YX; pyuvdata's first letter is ant1's feed, i.e. our pj.
POL_TO_PI_PJ = {-5: (0, 0), -6: (1, 1), -7: (1, 0), -8: (0, 1)}
# rad: phase scatter allowed after phasing to the source's ICRS position (astropy's AltAz ->
# ICRS and pyuvdata's ICRS -> apparent agree: 1e-10 rad seen with pyuvdata 3.2.8).
FLAT = 1e-6


def _enu_direction(az_deg, el_deg):
    az, el = np.radians(az_deg), np.radians(el_deg)
    return np.array([np.sin(az) * np.cos(el), np.cos(az) * np.cos(el), np.sin(el)])


def _phase_scatter(uv, pol_weighted=True):
    """Max over pols of the std of arg(V) over unflagged cross-correlations, after
    removing nothing: flat phases mean every visibility is real-positive."""
    cross = uv.ant_1_array != uv.ant_2_array
    data = uv.data_array[cross]
    keep = ~uv.flag_array[cross]
    phases = np.angle(data[keep])
    # Wrap around 0 so that a flat phase near +-pi is not mistaken for scatter.
    return float(np.sqrt(np.mean(np.angle(np.exp(1j * phases)) ** 2)))


def _phase_each_time_to_azel(uv, az_deg, el_deg):
    """Phases each integration to the ICRS position that is at (az, el) at its time; returns
    the phase scatter over all of them. (Not `phase(cat_type="driftscan")`: pyuvdata 3.2.8
    forms that phase centre's apparent RA as LST + HA instead of LST - HA, which mirrors the
    azimuth about the meridian.)"""
    worst = 0.0
    for t in np.unique(uv.time_array):
        one = uv.select(times=[t], inplace=False)
        ra, dec = _icrs_of_azel(one, az_deg, el_deg, t)
        one.phase(lon=ra, lat=dec, epoch="J2000", cat_name="source")
        worst = max(worst, _phase_scatter(one))
    return worst


def _icrs_of_azel(uv, az_deg, el_deg, jd):
    loc = EarthLocation.from_geodetic(
        lon=uv.telescope.location_lat_lon_alt_degrees[1] * astropy_units.deg,
        lat=uv.telescope.location_lat_lon_alt_degrees[0] * astropy_units.deg,
        height=uv.telescope.location_lat_lon_alt_degrees[2] * astropy_units.m,
    )
    frame = AltAz(obstime=Time(jd, format="jd", scale="utc"), location=loc)
    src = SkyCoord(az=az_deg * astropy_units.deg, alt=el_deg * astropy_units.deg, frame=frame)
    icrs = src.icrs
    return icrs.ra.rad, icrs.dec.rad


# --- files written by the Rust writer (cargo test --features uvh5 --test uvh5) ---------------


def _rust_file(name):
    d = os.environ.get("RADIO_KERNELS_UVH5_DIR")
    if not d:
        pytest.skip("RADIO_KERNELS_UVH5_DIR is unset (run the Rust uvh5 test with it first)")
    path = Path(d) / name
    if not path.exists():
        pytest.skip(f"{path} missing: run `cargo test --features uvh5 --test uvh5` first")
    return path


def test_rust_file_round_trip():
    uv = pyuvdata.UVData.from_file(_rust_file("point_source.uvh5"))
    uv.check()
    assert uv.telescope.name == "CHORD"
    assert uv.Nants_data == 7 and uv.Nbls == 28 and uv.Ntimes == 2 and uv.Nfreqs == 4
    assert list(uv.polarization_array) == [-5, -6, -7, -8]
    assert uv.phase_center_catalog[0]["cat_type"] == "unprojected"
    assert list(uv.telescope.antenna_names) == [f"A{k:03}" for k in range(7)]
    enu = uv.telescope.get_enu_antpos()
    want_enu = np.array([[8.5 * (k % 4), 6.3 * (k // 4), 0.1 * k] for k in range(7)])
    np.testing.assert_allclose(enu, want_enu, atol=1e-6)
    np.testing.assert_allclose(uv.integration_time, 8.0)
    np.testing.assert_allclose(uv.channel_width, 0.390625e6)
    # uvw as written == pyuvdata's own uvw from the antenna positions (unprojected).
    written = uv.uvw_array.copy()
    uv.set_uvws_from_antenna_positions()
    np.testing.assert_allclose(written, uv.uvw_array, atol=1e-6)
    # Values: V(ant1 = j, ant2 = i, pol) = a_pi a_pj exp(2 pi i f (r_i - r_j) . s / c).
    s = _enu_direction(*RUST_SOURCE_AZ_EL_DEG)
    amp = np.array([1000.0, 700.0])
    for blt in range(uv.Nblts):
        j, i = uv.ant_1_array[blt], uv.ant_2_array[blt]
        geo = np.exp(2j * np.pi * uv.freq_array * ((want_enu[i] - want_enu[j]) @ s) / C)
        for k, pol in enumerate(uv.polarization_array):
            pi, pj = POL_TO_PI_PJ[pol]
            np.testing.assert_allclose(uv.data_array[blt, :, k], amp[pi] * amp[pj] * geo, rtol=1e-12)
    # Flags and nsamples: integration 1, channel 1 was lost.
    lost = np.zeros((uv.Nblts, uv.Nfreqs, uv.Npols), bool)
    lost[uv.time_array == np.unique(uv.time_array)[1], 1, :] = True
    np.testing.assert_array_equal(uv.flag_array, lost)
    np.testing.assert_array_equal(uv.nsample_array, np.where(lost, 0.0, 1.0))


def test_rust_file_phases_flatten_on_the_source():
    uv = pyuvdata.UVData.from_file(_rust_file("point_source.uvh5"))
    before = _phase_scatter(uv)
    assert before > 0.5, f"raw phases already flat ({before}): the test could not fail"
    assert _phase_each_time_to_azel(uv, *RUST_SOURCE_AZ_EL_DEG) < FLAT


def test_rust_file_phases_do_not_flatten_elsewhere_or_conjugated():
    uv = pyuvdata.UVData.from_file(_rust_file("point_source.uvh5"))
    az, el = RUST_SOURCE_AZ_EL_DEG
    assert _phase_each_time_to_azel(uv, az + 2.0, el - 2.0) > 0.3
    # The azimuth mirrored about the meridian: what a sign error in uvw or RA would fit.
    assert _phase_each_time_to_azel(uv, -az, el) > 0.3
    conj = pyuvdata.UVData.from_file(_rust_file("point_source_conj.uvh5"))
    assert _phase_each_time_to_azel(conj, az, el) > 0.3


# --- the Python package ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def rk():
    module = pytest.importorskip("radio_kernels")
    if not module.HAS_UVH5:
        pytest.skip("this build of radio_kernels has no write_uvh5 (the uvh5 feature)")
    return module


def _grid(n):
    return np.array([[8.5 * (k % 4), 6.3 * (k // 4), 0.05 * k] for k in range(n)])


def _simulate(enu, freqs, directions, pol_amp=(1.0, 0.8)):
    """Our convention: x_d[p] = a_p exp(+2 pi i f r_d . s / c), V_ij = x_i conj(x_j),
    layout [t][c][b(i,j)][pi][pj], b(i,j) = i (i + 1) / 2 + j, i >= j."""
    n = len(enu)
    out = []
    for s in directions:
        x = np.exp(2j * np.pi * freqs[:, None] * (enu @ s)[None, :] / C)  # (c, d)
        x = x[:, :, None] * np.asarray(pol_amp)[None, None, :]  # (c, d, p)
        rows = []
        for i in range(n):
            for j in range(i + 1):
                rows.append(x[:, i, :, None] * np.conj(x[:, j, None, :]))  # (c, pi, pj)
        out.append(np.stack(rows, axis=1))  # (c, b, pi, pj)
    return np.ascontiguousarray(np.stack(out))  # (t, c, b, pi, pj)


def _write(rk, path, vis, enu, freqs, times, **kw):
    rk.write_uvh5(
        str(path),
        vis,
        freq_hz=freqs,
        channel_width_hz=float(freqs[1] - freqs[0]),
        times_jd=times,
        integration_time_s=10.0,
        antenna_positions_enu=enu,
        **kw,
    )


def test_package_round_trip_and_sidereal_phase(rk, tmp_path):
    enu = _grid(8)
    freqs = 600e6 + 1.5e6 * np.arange(5)
    times = 2460600.5 + np.array([0.0, 30.0, 60.0]) / 86400.0
    uv0 = None
    # The source: an ICRS position, at its apparent az/el at each integration.
    lat, lon, alt = 49.3207, -119.6237, 545.0
    loc = EarthLocation.from_geodetic(lon=lon * astropy_units.deg, lat=lat * astropy_units.deg,
                                      height=alt * astropy_units.m)
    t_mid = Time(times[1], format="jd", scale="utc")
    src = SkyCoord(alt=75 * astropy_units.deg, az=200 * astropy_units.deg,
                   frame=AltAz(obstime=t_mid, location=loc)).icrs
    dirs = []
    for t in times:
        aa = src.transform_to(AltAz(obstime=Time(t, format="jd", scale="utc"), location=loc))
        dirs.append(_enu_direction(aa.az.deg, aa.alt.deg))
    vis = _simulate(enu, freqs, dirs)
    flags = np.zeros((3, 5), bool)
    flags[2, 3] = True
    nsamples = np.where(flags, 0.5, 1.0).astype(np.float32)
    path = tmp_path / "pkg.uvh5"
    _write(rk, path, vis, enu, freqs, times, flags=flags, nsamples=nsamples,
           latitude_deg=lat, longitude_deg=lon, altitude_m=alt)
    uv0 = pyuvdata.UVData.from_file(path)
    uv0.check()
    assert (uv0.Nants_data, uv0.Nbls, uv0.Ntimes, uv0.Nfreqs, uv0.Npols) == (8, 36, 3, 5, 4)
    np.testing.assert_allclose(uv0.freq_array, freqs)
    np.testing.assert_allclose(np.unique(uv0.time_array), times, rtol=0, atol=1e-9)
    np.testing.assert_allclose(uv0.telescope.get_enu_antpos(), enu, atol=1e-6)
    # Baseline (i=5, j=2), pol XY: our V[t][c][b(5,2)][pi=1][pj=0], unconjugated.
    b52 = 5 * 6 // 2 + 2
    np.testing.assert_allclose(uv0.get_data(2, 5, "xy"), vis[:, :, b52, 1, 0], rtol=1e-12)
    np.testing.assert_allclose(uv0.get_data(2, 5, "yx"), vis[:, :, b52, 0, 1], rtol=1e-12)
    assert uv0.get_flags(2, 5, "xx")[2, 3] and uv0.get_flags(2, 5, "xx").sum() == 1
    assert uv0.get_nsamples(2, 5, "yy")[2, 3] == 0.5
    written = uv0.uvw_array.copy()
    uv0.set_uvws_from_antenna_positions()
    np.testing.assert_allclose(written, uv0.uvw_array, atol=1e-6)

    uv = uv0.copy()
    assert _phase_scatter(uv) > 0.5
    uv.phase(lon=src.ra.rad, lat=src.dec.rad, epoch="J2000", cat_name="source")
    assert _phase_scatter(uv) < FLAT
    away = uv0.copy()
    away.phase(lon=src.ra.rad + np.radians(2.0), lat=src.dec.rad, epoch="J2000", cat_name="away")
    assert _phase_scatter(away) > 0.3


def test_package_int64_exact_and_rejects_large(rk, tmp_path):
    enu = _grid(3)
    freqs = np.array([700e6, 700.5e6])
    times = np.array([2460600.5])
    vis = np.zeros((1, 2, 6, 2, 2, 2), np.int64)  # (..., 2): re, im of Complex<i64>
    vis[..., 0] = 2**53
    vis[..., 1] = -(2**53) + 7
    # Autos b(i, i) = 0, 2, 5 are real (pyuvdata refuses, or "fixes" to |V|, complex autos).
    autos = [0, 2, 5]
    vis[:, :, autos, :, :, 1] = 0
    _write(rk, tmp_path / "i64.uvh5", vis, enu, freqs, times)
    uv = pyuvdata.UVData.from_file(tmp_path / "i64.uvh5", fix_autos=False)
    cross = uv.ant_1_array != uv.ant_2_array
    assert np.all(uv.data_array.real == 2.0**53)
    assert np.all(uv.data_array[cross].imag == -(2.0**53) + 7)
    assert np.all(uv.data_array[~cross].imag == 0)
    vis[0, 1, 4, 1, 0, 0] = 2**53 + 1
    with pytest.raises(Exception, match="2\\^53"):
        _write(rk, tmp_path / "big.uvh5", vis, enu, freqs, times)


def test_package_correlate_reference_to_uvh5(rk, tmp_path):
    """int8 voltages of a point source -> CPU reference correlator -> UVH5 -> phase flattens."""
    enu = _grid(6)
    freqs = 650e6 + 2e6 * np.arange(3)
    times = np.array([2460600.5])
    s = _enu_direction(120.0, 60.0)
    rng = np.random.default_rng(1)
    nt = 256
    sig = (rng.normal(size=(nt, 3)) + 1j * rng.normal(size=(nt, 3))) * 20
    geo = np.exp(2j * np.pi * freqs[:, None] * (enu @ s)[None, :] / C)  # (c, d)
    x = sig[:, :, None, None] * geo[None, :, :, None] * np.ones(2)[None, None, None, :]
    # int8 voltages [t][c][d][p] as (..., 2) int8: the reference's documented input.
    volt = np.stack([np.round(x.real), np.round(x.imag)], axis=-1).clip(-127, 127).astype(np.int8)
    # The package's reference takes its configuration explicitly (stations, pols, channels,
    # times), as the Correlator does, and checks the input's shape against it.
    vis = rk.correlate_reference(volt, 6, 2, 3, nt)  # (c, b, pi, pj, 2) int64
    vis = np.ascontiguousarray(vis[None])
    _write(rk, tmp_path / "ref.uvh5", vis, enu, freqs, times)
    uv = pyuvdata.UVData.from_file(tmp_path / "ref.uvh5")
    # Quantisation leaves a little scatter; a wrong sign leaves radians.
    assert _phase_each_time_to_azel(uv, 120.0, 60.0) < 0.05


# --- the example ----------------------------------------------------------------------------


def test_example_correlate_and_image_finds_the_source(rk):
    """python/examples/correlate_and_image.py: simulate, correlate (GPU or CPU reference),
    write UVH5, read it with pyuvdata, phase off the source and image: the peak is on it."""
    import subprocess
    import sys

    example = Path(__file__).resolve().parents[1] / "examples" / "correlate_and_image.py"
    run = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    assert "the peak is on the source" in run.stdout, run.stdout
    assert "correlating" in run.stdout, run.stdout


def test_package_flags_per_baseline_and_their_shape(rk, tmp_path):
    """flags and nsamples ``(times, channels, baselines)`` reach exactly their baseline; the
    ``(times, channels)`` form is every baseline; any other shape is refused."""
    enu = _grid(3)
    freqs = np.array([700e6, 700.5e6])
    times = np.array([2460600.5])
    vis = np.ones((1, 2, 6, 2, 2, 2), np.int64)
    vis[..., 1] = 0
    b21 = 2 * 3 // 2 + 1
    flags = np.zeros((1, 2, 6), bool)
    flags[0, 1, b21] = True
    nsamples = np.where(flags, 0.25, 1.0).astype(np.float32)
    _write(rk, tmp_path / "per_baseline.uvh5", vis, enu, freqs, times, flags=flags, nsamples=nsamples)
    uv = pyuvdata.UVData.from_file(tmp_path / "per_baseline.uvh5", fix_autos=False)
    assert uv.get_flags(1, 2, "xx").tolist() == [[False, True]] and uv.flag_array.sum() == 4
    assert uv.get_nsamples(1, 2, "yy").tolist() == [[1.0, 0.25]] and (uv.nsample_array < 1).sum() == 4
    _write(rk, tmp_path / "per_channel.uvh5", vis, enu, freqs, times, flags=flags.any(axis=2))
    assert pyuvdata.UVData.from_file(tmp_path / "per_channel.uvh5", fix_autos=False).flag_array.sum() == 6 * 4
    for bad in (np.zeros((1, 2, 5), bool), np.zeros((2, 6), bool)):
        with pytest.raises(rk.ShapeMismatchError):
            _write(rk, tmp_path / "bad.uvh5", vis, enu, freqs, times, flags=bad)
    with pytest.raises(rk.ShapeMismatchError):
        _write(rk, tmp_path / "bad.uvh5", vis, enu, freqs, times, nsamples=np.ones((1, 2, 7)))
