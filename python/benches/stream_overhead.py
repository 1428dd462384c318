"""The Python path's cost over the Rust streaming engines, at their headline configurations.

Runs the baseband beamformer (full CHORD) and the correlator's integration (N=512 P=2 C=16
T=8192 int8, 64 chunks per integration) from Python with the zero-copy slot views
(``input()`` / ``submit()`` / ``output_view()``), the way a pipeline would, and prints the
sustained time per chunk; compare with ``radio-kernels stream --engine baseband`` and
``--engine correlator`` run in the same session (BENCHMARKS.md, "Python"). Medians of
``--rounds`` rounds of ``--chunks`` chunks each, after ``--warmup`` chunks.

    python python/benches/stream_overhead.py [--chunks 32] [--rounds 5]
"""

import argparse
import statistics
import time

import numpy as np

import radio_kernels as rk


def run(stream, chunks, take):
    start = time.perf_counter()
    for _ in range(chunks):
        stream.input()  # the pinned slot; a pipeline would fill it in place here
        stream.submit()
        while stream.pending >= 2:
            take(stream)
    while stream.pending:
        take(stream)
    return (time.perf_counter() - start) / chunks


def baseband(gpu, args):
    dims = (512, 96, 16, 32768)
    config = rk.BeamformerConfig(*dims)
    rng = np.random.default_rng(1)
    weights = rng.integers(-128, 128, config.weights_shape, dtype=np.int8)
    shifts = np.full(config.shifts_shape, 10, dtype=np.int32)
    stream = rk.BasebandBeamformer(gpu, *dims, weights, shifts).streaming(depth=3)
    for _ in range(3):
        stream.input()[...] = rng.integers(0, 256, config.e_shape, dtype=np.uint8)
        stream.submit()
    while stream.pending:
        stream.output_view()
    run(stream, args.warmup, lambda s: s.output_view())
    times = [run(stream, args.chunks, lambda s: s.output_view()) for _ in range(args.rounds)]
    return "baseband full CHORD D=512 B=96 F=16 T=32768", times, 32768 * 1.70667e-6


def correlator(gpu, args):
    shape = (512, 2, 16, 8192, "ci8", "station_pol")
    config = rk.CorrelatorConfig(*shape)
    rng = np.random.default_rng(2)
    engine = rk.Correlator(gpu, *shape).integration(chunks_per_integration=64, depth=3)
    for _ in range(3):
        engine.input()[...] = rng.integers(-128, 128, config.input_shape, dtype=np.int8)
        engine.submit()
    take = lambda e: e.output()  # one int64 integration per 64 chunks
    run(engine, args.warmup, take)
    times = [run(engine, args.chunks, take) for _ in range(args.rounds)]
    return "correlator N=512 P=2 C=16 T=8192 int8, 64 chunks/integration", times, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=8)
    args = parser.parse_args()
    gpu = rk.open()
    print(f"Python streaming on {gpu.name}, radio_kernels {rk.__version__ if hasattr(rk, '__version__') else ''}")
    for bench in (baseband, correlator):
        name, times, real = bench(gpu, args)
        ms = [1e3 * t for t in times]
        line = f"  {name}: {statistics.median(ms):.3f} ms per chunk (rounds {min(ms):.3f}-{max(ms):.3f})"
        if real:
            line += f", {real / statistics.median(times):.2f}x real time"
        print(line)


if __name__ == "__main__":
    main()
