"""The X-engine fed from memory, at the configuration of a cluster run: the ceiling the
network-fed X-engine is compared against (BENCHMARKS.md, "Cluster").

Reports (medians of ``--rounds``), in GB/s of F-engine heap payload:
- ``corner turn``: :func:`radio_kernels._native.corner_turn` from a staging buffer into a
  numpy array, per thread count;
- ``engine``: the streaming correlator (``Correlator.integration``) fed its pinned input slots
  with nothing written (the GPU engine alone: upload, correlation, integration);
- ``engine + corner turn``: each slot written by the corner turn first (what the X-engine does
  per chunk once the heaps have arrived).

    python benches/xengine_memory.py --dishes 64 --channels 1024 --heaps-per-chunk 4
"""

import argparse
import statistics
import time

import numpy as np

import radio_kernels as rk
from radio_kernels import _native


def rate(fn, nbytes, seconds):
    fn()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        n += 1
    return n * nbytes / (time.perf_counter() - t0) / 1e9


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dishes", type=int, default=64)
    p.add_argument("--channels", type=int, default=1024, help="channels of this X-engine")
    p.add_argument("--spectra-per-heap", type=int, default=256)
    p.add_argument("--heaps-per-chunk", type=int, default=4)
    p.add_argument("--chunks-per-integration", type=int, default=4)
    p.add_argument("--threads", default="1,2,4,8")
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-gpu", action="store_true")
    a = p.parse_args()
    H, D, C, S = a.heaps_per_chunk, a.dishes, a.channels, a.spectra_per_heap
    staging = np.random.default_rng(0).integers(-127, 128, (H, D, C, S, 2, 2), dtype=np.int8)
    out = np.empty((H * S, C, D, 2, 2), np.int8)
    nbytes = staging.nbytes
    print(f"X-engine: {D} dishes, {C} channels, {H} x {S} spectra per chunk ({nbytes / 2**20:.0f} MiB)")
    threads = [int(t) for t in a.threads.split(",")]
    for t in threads:
        r = [rate(lambda: _native.corner_turn(staging, out, t), nbytes, a.seconds) for _ in range(a.rounds)]
        print(f"corner turn, {t} threads: {statistics.median(r):.2f} GB/s (rounds {', '.join(f'{x:.2f}' for x in r)})")
    if a.no_gpu:
        return
    gpu = rk.open(0)
    corr = rk.Correlator(gpu, D, 2, C, H * S)
    print(f"GPU {gpu.name}, kernel {corr.kernel}")
    integ = corr.integration(a.chunks_per_integration, 3)

    def engine(turn_threads):
        def step():
            slot = integ.input()
            if turn_threads:
                _native.corner_turn(staging, slot, turn_threads)
            integ.submit()
            while integ.pending > 1:
                integ.output()
        return step

    for t in [0] + threads[-2:]:
        r = [rate(engine(t), nbytes, a.seconds) for _ in range(a.rounds)]
        what = "engine" if t == 0 else f"engine + corner turn ({t} threads)"
        print(f"{what}: {statistics.median(r):.2f} GB/s (rounds {', '.join(f'{x:.2f}' for x in r)})")
    integ.finish()


if __name__ == "__main__":
    main()
