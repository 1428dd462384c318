"""Shared fixtures: `gpu` opens device 0 once, and skips the GPU tests cleanly where
`radio_kernels.open()` raises NoGpuError (no CUDA driver, no device, or a device older than
compute capability 8.0)."""

import numpy as np
import pytest

import radio_kernels as rk


@pytest.fixture(scope="session")
def gpu():
    try:
        return rk.open(0)
    except rk.NoGpuError as error:
        pytest.skip(f"no usable GPU: {error}")


@pytest.fixture
def rng():
    return np.random.default_rng(20260)


def correlate_numpy(x):
    """The correlator's formula in numpy: ``x`` complex integers as int64 ``[t][c][s][p][2]``
    (station_pol); returns int64 ``[c][b(i,j)][pi][pj][2]``, ``i >= j``, exact in int64."""
    a, b = x[..., 0].astype(np.int64), x[..., 1].astype(np.int64)
    # sum_t x_i conj(x_j) = (a_i a_j + b_i b_j) + i (b_i a_j - a_i b_j)
    re = np.einsum("tcip,tcjq->cipjq", a, a) + np.einsum("tcip,tcjq->cipjq", b, b)
    im = np.einsum("tcip,tcjq->cipjq", b, a) - np.einsum("tcip,tcjq->cipjq", a, b)
    stations = x.shape[2]
    rows = [(i, j) for i in range(stations) for j in range(i + 1)]
    out = np.stack([np.stack([re[:, i, :, j, :], im[:, i, :, j, :]], axis=-1) for i, j in rows], axis=1)
    return out


def unpack_ci4_numpy(packed):
    """ci4 bytes to int64 ``[..., 2]`` (re low nibble, im high nibble), in numpy."""
    packed = packed.astype(np.int64)
    re = ((packed & 0xF) ^ 8) - 8
    im = ((packed >> 4) ^ 8) - 8
    return np.stack([re, im], axis=-1)


def pack_ci4_numpy(x):
    """int ``[..., 2]`` in [-8, 7] to ci4 bytes, in numpy."""
    x = np.asarray(x, dtype=np.int64)
    return ((x[..., 0] & 0xF) | ((x[..., 1] & 0xF) << 4)).astype(np.uint8)


def beamform_numpy(e, weights, shifts):
    """The baseband beamformer's formula in numpy: E ci4 ``[t][f][p][d]``, A int8
    ``[f][p][b][d][2]``, s ``[f][p][b]``; J ci4 ``[b][f][p][t]`` with the rounding shift
    (round half up) and saturation to [-7, 7]."""
    ex = unpack_ci4_numpy(e)
    er, ei = ex[..., 0], ex[..., 1]
    ar, ai = weights[..., 0].astype(np.int64), weights[..., 1].astype(np.int64)
    re = np.einsum("fpbd,tfpd->bfpt", ar, er) - np.einsum("fpbd,tfpd->bfpt", ai, ei)
    im = np.einsum("fpbd,tfpd->bfpt", ar, ei) + np.einsum("fpbd,tfpd->bfpt", ai, er)
    s = np.transpose(shifts.astype(np.int64), (2, 0, 1))[..., None]  # [b][f][p][1]

    def rule(v):
        half = np.where(s > 0, np.left_shift(1, np.maximum(s - 1, 0)), 0)
        return np.clip(np.right_shift(v + half, s), -7, 7)

    return pack_ci4_numpy(np.stack([rule(re), rule(im)], axis=-1))


class HostPointer:
    """Claims host memory is device memory through the CUDA Array Interface (version 3, C
    order, the given ``stream``): for the checks that refuse such an array."""

    def __init__(self, array, stream=None):
        self.array = array
        self.__cuda_array_interface__ = {
            "shape": array.shape,
            "typestr": array.dtype.str,
            "data": (array.ctypes.data, False),
            "strides": None,
            "version": 3,
            "stream": stream,
        }
