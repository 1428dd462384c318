"""The demo's simulated sky for the digitiser source: dishes on CHORD's grid (6.3 m north-south,
8.5 m east-west), point sources of Gaussian noise near zenith plus receiver noise of rms 30 ADC
units, digitised to 10 bits. Each source's voltage reaches dish ``d`` at position ``r_d`` earlier
by ``r_d . s / c``: per frequency bin, ``S(f) exp(+2 pi i f r_d . s / c)``; the record is made in
the frequency domain (exact fractional delays) and inverse-transformed to real samples, as the
Rust demo's ``sky`` module does (the same model; numpy's generator, so not the same numbers)."""

from __future__ import annotations

import math

import numpy as np

LIGHT = 299_792_458.0
SPACING = (6.3, 8.5)
NOISE_RMS = 30.0
#: Source places in grid units and their rms (ADC units), as the demo's.
PLACES = [(1.5, 2.0), (-2.5, 0.5), (3.0, -3.0), (-1.0, -2.5), (0.5, 3.5), (2.5, -1.0), (-3.5, 2.5), (0.0, -1.5)]
RMS = [30.0, 18.0, 14.0, 12.0, 11.0, 10.0, 9.0, 8.0]


def grid_side(dishes: int) -> int:
    return max(1, math.isqrt(dishes - 1) + 1) if dishes > 1 else 1


def dish_position(d: int, dishes: int) -> tuple:
    """(north, east) metres of dish ``d`` on the smallest square grid that holds them all."""
    side = grid_side(dishes)
    return (SPACING[0] * (d // side), SPACING[1] * (d % side))


def antenna_positions_enu(dishes: int) -> np.ndarray:
    """float64 ``[dish][east, north, up]`` metres (for UVH5)."""
    return np.array([[dish_position(d, dishes)[1], dish_position(d, dishes)[0], 0.0] for d in range(dishes)])


def observe(dishes: int, samples: int, sample_rate: float, band_start: float, sources: int = 3,
            seed: int = 1) -> np.ndarray:
    """int32 ``[dish][pol][sample]`` 10-bit samples of ``samples`` (even) per polarisation; the
    sampled band is the sky from ``band_start`` Hz up (delays phase at sky frequency)."""
    if samples <= 0 or samples % 2:
        raise ValueError(f"samples must be even and above 0, got {samples}")
    if not 0 <= sources <= len(PLACES):
        raise ValueError(f"sources must be 0 ..= {len(PLACES)}, got {sources}")
    side = grid_side(dishes)
    reference = band_start + sample_rate / 4
    lam = LIGHT / reference
    dirs = [(-t * lam / (side * SPACING[0]), -tp * lam / (side * SPACING[1])) for t, tp in PLACES[:sources]]
    rng = np.random.default_rng(seed)
    bins = samples // 2 + 1
    f = band_start + np.arange(bins) * sample_rate / samples

    def gaussian(shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) / math.sqrt(2.0)

    spectra = [gaussian((2, bins)) for _ in dirs]
    out = np.empty((dishes, 2, samples), np.int32)
    unit = 1.0 / math.sqrt(samples)
    for d in range(dishes):
        x, y = dish_position(d, dishes)
        v = gaussian((2, bins)) * NOISE_RMS
        for (l, m), s, rms in zip(dirs, spectra, RMS):
            lead = (x * l + y * m) / LIGHT
            v = v + s * rms * np.exp(2j * math.pi * f * lead)
        v[:, 0] = v[:, 0].real
        v[:, -1] = v[:, -1].real
        # Bins of unit-power complex Gaussians times 1/sqrt(samples), summed unnormalised
        # (irfft times samples): a real record of the requested rms.
        real = np.fft.irfft(v * unit, n=samples, axis=-1) * samples
        out[d] = np.clip(np.rint(real), -511, 511).astype(np.int32)
    return out
