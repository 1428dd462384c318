"""The whole correlator in one process, on the CPU references: what the engines, joined, must
give bit for bit (the tests compare the X-engines' UVH5 files against it)."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .. import _native
from .fengine import chunks_ready, pfb_setup
from .layout import Layout


def channelize(layout: Layout, samples: np.ndarray, present: Optional[np.ndarray] = None,
               gain: Optional[float] = None, models=None, heaps: Optional[int] = None):
    """One dish: (int8 ``[heap][channel][spectrum][pol][2]``, lost bool ``[heap]``) of the
    first ``heaps`` output heaps (default: every heap the samples complete) of int32 samples
    ``[2][N]`` from ADC sample 0, with packet flags ``present`` ``[2][N / packet_samples]``."""
    cfg, weights, gains = pfb_setup(layout, gain)
    models = models or (_native.DelayModel(), _native.DelayModel())
    per_chunk, n_samples = cfg.spectra_per_chunk, samples.shape[1]
    chunks = chunks_ready(cfg, n_samples)
    if present is None:
        present = np.ones((2, n_samples // layout.packet_samples), bool)
    data, lost = [], []
    s = np.ascontiguousarray(samples, np.int32)
    for k in range(chunks):
        out = _native.channelize_reference(cfg, s, present, k * per_chunk, weights, gains, models)
        data.append(np.asarray(out.data))
        lost.append(np.asarray(out.lost_heaps))
    data, lost = np.concatenate(data), np.concatenate(lost)
    if heaps is not None:
        data, lost = data[:heaps], lost[:heaps]
    return data, lost


def correlate(layout: Layout, spectra: Sequence[np.ndarray], integrations: int) -> np.ndarray:
    """int64 ``[integration][channel][b(i,j)][pi][pj][2]`` over all channels from each dish's
    channelized heaps ``[heap][channel][spectrum][pol][2]`` (:func:`channelize`)."""
    D, n, S = layout.dishes, layout.channels, layout.spectra_per_heap
    per = layout.heaps_per_integration
    out = []
    for i in range(integrations):
        # [heap][channel][spectrum][pol][2] per dish -> [time][channel][dish][pol][2]
        x = np.stack([np.asarray(spectra[d][i * per:(i + 1) * per]) for d in range(D)])  # [d][h][c][s][p][2]
        x = np.ascontiguousarray(x.transpose(1, 3, 2, 0, 4, 5).reshape(per * S, n, D, 2, 2))
        out.append(np.asarray(_native.correlate_reference(x, D, 2, n, per * S)))
    return np.stack(out)
