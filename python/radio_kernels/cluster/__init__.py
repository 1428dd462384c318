"""A correlator across processes and machines: digitiser source, F-engines and X-engines joined
by SPEAD streams over UDP (spead2), one engine per GPU, as MeerKAT's GPU correlator
(katgpucbf) runs. Needs ``spead2`` (``pip install radio-kernels[cluster]``).

Processes (each ``python -m radio_kernels.cluster.<name> --help``):

- :mod:`~radio_kernels.cluster.dsim`: the digitiser source, one SPEAD stream per dish.
- :mod:`~radio_kernels.cluster.fengine`: channelizes a group of dishes (streaming PFB), sends
  each X-engine its channels.
- :mod:`~radio_kernels.cluster.xengine`: corner turn, correlation, integration, UVH5.
- :mod:`~radio_kernels.cluster.launcher` (``radio-kernels-cluster``): starts a small
  correlator on one host and reports.

Data flow and formats (the SPEAD items: :mod:`~radio_kernels.cluster.spead`), with ``n``
channels, ``D`` dishes, ``X`` X-engines, ``S`` spectra per heap:

- digitiser heap (dish d, pol p, packet k): ``packet_samples`` 10-bit samples from ADC sample
  ``k packet_samples``, packed MSB first;
- F-engine heap (dish d, X-engine x, heap time h): timestamp ``2 n S h``, frequency
  ``x n / X``, int8 ``[n/X channels][S spectra][2 pols][re, im]`` of the PFB output
  ``y_{d,p}[m][k] = Q(g_{p,k} e^{j(phi - pi k f/n)} sum_t w[t] x_{d,p}[2 n m - c + t] e^{-2 pi j k t / 2n})``
  (window ``w``, coarse delay ``c`` and fine delay ``f``, gain ``g``, quantiser ``Q`` to
  int8, Merry's channelizer);
- X-engine x: ``V_{ij}^{pq}[k] = sum_m y_{i,p}[m][k] conj(y_{j,q}[m][k])`` over the
  integration's spectra, ``i >= j``, for its channels ``k``; int64, written as UVH5.

Lost data: a digitiser heap that does not arrive flags the spectra whose window it touches; an
F-engine heap holding one is not sent; an F-engine heap that does not arrive (or arrives after
its chunk was correlated) leaves zeros and flags every baseline of its dish in that
integration (nsamples: the fraction present). Nothing lost goes unflagged.

Layout shared by every process: :class:`~radio_kernels.cluster.layout.Layout` (the same
command-line options for each).
"""

from .layout import Layout

__all__ = ["Layout"]
