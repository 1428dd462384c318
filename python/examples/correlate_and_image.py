"""Simulate, correlate, write UVH5, read it with pyuvdata and image it.

A small array at the CHORD site (DRAO) observes one point source. The voltages follow the
package's convention, x_d = S exp(+2 pi i f r_d . s / c) + noise, quantised to complex int8;
the correlator (on the GPU, or its CPU reference without one) forms V_ij = sum x_i conj(x_j);
``radio_kernels.write_uvh5`` writes them with their metadata; pyuvdata reads the file and
phases it to a centre 1.5 degrees from the source; a numpy DFT over (u, v) makes a dirty image
whose peak must land on the source. A conjugation or baseline-sign error would put the peak
at the mirror position, 3 degrees away.

Run: ``python python/examples/correlate_and_image.py`` (needs pyuvdata; exits 1 if the peak
misses the source).
"""

import sys
import tempfile
from pathlib import Path

import numpy as np
from astropy import units
from astropy.coordinates import AltAz, EarthLocation, SkyCoord
from astropy.time import Time
from pyuvdata import UVData

import radio_kernels as rk

C = 299_792_458.0
LAT, LON, ALT = 49.3207, -119.6237, 545.0  # the writer's default site: CHORD at DRAO
STATIONS, POLS, CHANNELS, TIMES = 16, 2, 8, 256


def simulate(rng, enu, freqs, s):
    """int8 voltages [t][c][station][pol][2] of one noise-like point source in ENU direction
    ``s`` plus receiver noise, scaled to an rms of about 20 and rounded."""
    signal = rng.normal(size=(TIMES, CHANNELS, 1, POLS)) + 1j * rng.normal(size=(TIMES, CHANNELS, 1, POLS))
    geometry = np.exp(2j * np.pi * freqs[:, None] * (enu @ s)[None, :] / C)  # (c, station)
    noise = rng.normal(size=(TIMES, CHANNELS, STATIONS, POLS, 2)) * 0.5
    x = signal * geometry[None, :, :, None]
    volts = 14.0 * (np.stack([x.real, x.imag], axis=-1) + noise)
    return np.ascontiguousarray(np.clip(np.round(volts), -127, 127).astype(np.int8))


def correlate(volts):
    """int64 [c][b][pi][pj][2]: on the GPU if there is one, else the CPU reference."""
    try:
        gpu = rk.open()
    except rk.NoGpuError as error:
        print(f"no GPU ({error}): correlating with the CPU reference (correlate_reference)")
        return rk.correlate_reference(volts, STATIONS, POLS, CHANNELS, TIMES)
    print(f"correlating on the GPU: {gpu.name}")
    correlator = rk.Correlator(gpu, STATIONS, POLS, CHANNELS, TIMES)
    return correlator.correlate(volts).astype(np.int64)


def dirty_image(uv, half_width_deg=3.0, steps=121):
    """Stokes-I-like dirty image (XX + YY) of the phased data on an (l, m) grid: the peak (l, m)
    in radians, l toward east (increasing RA), m toward north."""
    cross = uv.ant_1_array != uv.ant_2_array
    uvw = uv.uvw_array[cross]  # metres, (u east, v north, w) in the phase centre's frame
    pols = list(uv.polarization_array)
    v = uv.data_array[cross][:, :, pols.index(-5)] + uv.data_array[cross][:, :, pols.index(-6)]
    grid = np.radians(np.linspace(-half_width_deg, half_width_deg, steps))
    image = np.zeros((steps, steps))
    for k, f in enumerate(uv.freq_array):
        u, w_north = uvw[:, 0] * f / C, uvw[:, 1] * f / C
        # I(l, m) = sum_b Re V_b exp(-2 pi i (u l + v m)); the phase centre is (0, 0).
        el = np.exp(-2j * np.pi * np.outer(grid, u))  # (l, b)
        em = np.exp(-2j * np.pi * np.outer(grid, w_north))  # (m, b)
        image += np.real((el * v[:, k][None, :]) @ em.T)  # (l, m)
    a, b = np.unravel_index(np.argmax(image), image.shape)
    return grid[a], grid[b]


def sky_position(ra0, dec0, l, m):
    """The (RA, Dec) of direction cosines (l, m) about (ra0, dec0), SIN projection (radians)."""
    n = np.sqrt(1.0 - l * l - m * m)
    dec = np.arcsin(m * np.cos(dec0) + n * np.sin(dec0))
    ra = ra0 + np.arctan2(l, n * np.cos(dec0) - m * np.sin(dec0))
    return ra % (2 * np.pi), dec


def main():
    rng = np.random.default_rng(7)
    enu = np.column_stack([rng.uniform(-30, 30, STATIONS), rng.uniform(-30, 30, STATIONS), np.zeros(STATIONS)])
    freqs = 700e6 + 2e6 * np.arange(CHANNELS)
    jd = 2460676.5  # 2025-01-01 00:00 UTC
    site = EarthLocation.from_geodetic(lon=LON * units.deg, lat=LAT * units.deg, height=ALT * units.m)
    frame = AltAz(obstime=Time(jd, format="jd", scale="utc"), location=site)
    source = SkyCoord(az=150 * units.deg, alt=70 * units.deg, frame=frame).icrs
    topo = source.transform_to(frame)
    az, alt = np.radians(topo.az.deg), np.radians(topo.alt.deg)
    s = np.array([np.sin(az) * np.cos(alt), np.cos(az) * np.cos(alt), np.sin(alt)])

    vis = correlate(simulate(rng, enu, freqs, s))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "point_source.uvh5"
        rk.write_uvh5(
            path,
            np.ascontiguousarray(vis[None]),  # one integration
            freq_hz=freqs,
            channel_width_hz=2e6,
            times_jd=[jd],
            integration_time_s=1.0,
            antenna_positions_enu=enu,
        )
        uv = UVData.from_file(path)
    print(f"read {path.name}: {uv.Nants_data} antennas, {uv.Nbls} baselines, {uv.Nfreqs} channels")

    # Phase 1.5 degrees north of the source, so that the source is off centre in the image.
    centre_ra, centre_dec = source.ra.rad, source.dec.rad + np.radians(1.5)
    uv.phase(lon=centre_ra, lat=centre_dec, epoch="J2000", cat_name="field")
    l, m = dirty_image(uv)
    ra, dec = sky_position(centre_ra, centre_dec, l, m)
    miss = SkyCoord(ra=ra * units.rad, dec=dec * units.rad).separation(source).deg
    print(f"dirty image peak: l = {np.degrees(l):+.2f} deg, m = {np.degrees(m):+.2f} deg from the centre")
    print(f"  = RA {np.degrees(ra):.3f} deg, Dec {np.degrees(dec):.3f} deg")
    print(f"source: RA {source.ra.deg:.3f} deg, Dec {source.dec.deg:.3f} deg; the peak is {miss:.3f} deg away")
    # The image's pixels are 0.05 deg; the beam is about 0.4 deg.
    if miss > 0.1:
        print("the peak misses the source")
        return 1
    print("the peak is on the source")
    return 0


if __name__ == "__main__":
    sys.exit(main())
