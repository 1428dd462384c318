"""The Python path's cost over the Rust streaming engines, at their headline configurations.

Runs the baseband beamformer (full CHORD), the correlator's integration (N=512 P=2 C=16
T=8192 int8, 64 chunks per integration), the delay beamformer (64 antennas, 512 channels,
8 dithered beams), the FRB engine (full CHORD to 5760 beams) and the F-engine (n = 1024 and
32768, 2^24 samples per polarisation per chunk) from Python with the zero-copy slot views
(``input()`` / ``submit()`` / ``output_view()``), the way a pipeline would, and prints the
sustained time per chunk; compare with ``radio-kernels stream --engine E`` run in the same session (BENCHMARKS.md, "Python"). Medians of
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


def delay(gpu, args):
    beams = [rk.Beam(b % 2, True) for b in range(8)]
    config = rk.DelayBeamformerConfig(64, 2, 512, 4096, beams, 0)
    rng = np.random.default_rng(3)
    w = np.full(config.steering_shape, 0.08, dtype=np.complex64)
    d = rng.uniform(-3, 3, config.steering_shape).astype(np.float32)
    bf = rk.DelayBeamformer(gpu, config)
    stream = bf.streaming(bf.upload_steering(w, d), dither=bf.dither_state(7), depth=3)
    for _ in range(3):
        stream.input()[...] = rng.integers(-128, 128, config.input_shape, dtype=np.int8)
        stream.submit()
    while stream.pending:
        stream.output_view()
    take = lambda s: s.output_view()
    run(stream, args.warmup, take)
    times = [run(stream, args.chunks, take) for _ in range(args.rounds)]
    return "delay A=64 P=2 C=512 T=4096 B=8 dithered", times, None


def frb(gpu, args):
    first_config = rk.FrbConfig(512, 24, 24, freqs=256, times=1920, t_ds=40)
    rng = np.random.default_rng(4)
    points = rng.permutation(24 * 24)[:512]
    grid = np.stack([points // 24, points % 24], axis=-1).astype(np.int32)
    weights = rng.uniform(-0.05, 0.05, first_config.weights_shape).astype(np.float16)
    first = rk.FrbBeamformer(gpu, first_config, grid, weights)
    out_times = first_config.out_times
    resampler = rk.FusedResampler(gpu, rk.ResampleConfig(256, out_times, 24, 24, 5760))
    resampler.set_beams(*(rng.uniform(-8, 8, (2, 256, 5760)).astype(np.float32)))
    qconfig = rk.QuantizeConfig(channels=256, times=out_times, beams=5760)
    quantizer = rk.Quantizer(gpu, qconfig)
    scale = np.full(qconfig.params_shape, 1e-3, dtype=np.float32)
    offset = np.full(qconfig.params_shape, 8.0, dtype=np.float32)
    stream = first.streaming(resampler, quantizer, scale, offset, depth=3)
    for _ in range(3):
        stream.input()[...] = rng.integers(0, 256, first_config.e_shape, dtype=np.uint8)
        stream.submit()
    while stream.pending:
        stream.output_view()
    take = lambda s: s.output_view()
    run(stream, args.warmup, take)
    times = [run(stream, args.chunks, take) for _ in range(args.rounds)]
    return "frb full CHORD D=512 24x24 F=256 T=1920 T_ds=40 -> 5760 beams u8", times, 1920 * 27.30667e-6


def pfb(channels):
    def bench(gpu, args):
        heap = 2 * channels * 256
        config = rk.ChannelizerConfig(
            channels, taps=16, bits=10, spectra_per_heap=256, heaps_per_chunk=(1 << 24) // heap,
            chunk_samples=1 << 24, output="ci8",
        )
        rng = np.random.default_rng(5)
        stream = rk.Channelizer(gpu, config).streaming(depth=3)
        for pol in stream.input():
            pol[...] = rng.integers(0, 256, pol.shape, dtype=np.uint8)

        def take(s):
            s.output_view()

        def run_pfb(chunks):
            start = time.perf_counter()
            for _ in range(chunks):
                while stream.free_outputs < stream.max_outputs_per_submit:
                    take(stream)
                stream.input()  # the pinned slots; a pipeline would fill them in place here
                stream.submit()
            while stream.pending:
                take(stream)
            return (time.perf_counter() - start) / chunks

        run_pfb(args.warmup)
        times = [run_pfb(args.chunks) for _ in range(args.rounds)]
        return f"pfb n={channels} T=16 10-bit int8, 2^24 samples/pol per chunk", times, (1 << 24) / 1.712e9

    return bench


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=8)
    args = parser.parse_args()
    gpu = rk.open()
    print(f"Python streaming on {gpu.name}, radio_kernels {rk.__version__ if hasattr(rk, '__version__') else ''}")
    for bench in (baseband, correlator, delay, frb, pfb(1024), pfb(32768)):
        name, times, real = bench(gpu, args)
        ms = [1e3 * t for t in times]
        line = f"  {name}: {statistics.median(ms):.3f} ms per chunk (rounds {min(ms):.3f}-{max(ms):.3f})"
        if real:
            line += f", {real / statistics.median(times):.2f}x real time"
        print(line)


if __name__ == "__main__":
    main()
