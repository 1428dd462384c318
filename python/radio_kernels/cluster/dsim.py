"""Digitiser source: sends simulated (or replayed) 10-bit samples of every dish as SPEAD
streams, one send stream per dish, one heap per (dish, polarisation, packet) as MeerKAT's
digitisers do (see :mod:`radio_kernels.cluster.spead`).

    python -m radio_kernels.cluster.dsim --dishes 8 --samples 1048576 --rate 0.5

Samples: the demo's sky model (:mod:`radio_kernels.cluster.sky`) for a block of
``--block-samples`` per polarisation, sent again and again with increasing timestamps, or a
file (``--replay FILE.npy``, int16/int32 ``[dish][pol][samples]``). ``--drop D:P:K`` leaves out
heap K of dish D, polarisation P (for tests of lost data). At the end every dish's stream
sends a SPEAD stop heap.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import List, Set, Tuple

import numpy as np
import spead2
import spead2.send

from .. import _native
from . import engine, spead
from .layout import BITS, Layout
from .monitor import Monitor


def parse_drop(value: str) -> Tuple[int, int, int]:
    """``A:B:C``, three integers (a heap to leave out, for tests)."""
    parts = value.split(":")
    if len(parts) != 3 or not all(p.strip().lstrip("-").isdigit() for p in parts):
        raise ValueError(f"--drop {value!r}: expected 3 integers separated by ':'")
    a, b, c = (int(p) for p in parts)
    return a, b, c


def parse_drops(values: List[str]) -> Set[Tuple[int, int, int]]:
    return {parse_drop(v) for v in values}


def packed_block(samples: np.ndarray, layout: Layout) -> np.ndarray:
    """uint8 ``[dish][pol][packets][packet_bytes]`` of int samples ``[dish][pol][n]``."""
    dishes, pols, n = samples.shape
    if n % layout.packet_samples:
        raise ValueError(f"block of {n} samples is not a whole number of {layout.packet_samples}-sample packets")
    out = np.empty((dishes, pols, n // layout.packet_samples, layout.packet_bytes), np.uint8)
    for d in range(dishes):
        for p in range(pols):
            out[d, p] = np.asarray(_native.pack_samples(np.ascontiguousarray(samples[d, p], np.int32), BITS)).reshape(
                -1, layout.packet_bytes)
    return out


def block(args: argparse.Namespace, layout: Layout) -> np.ndarray:
    if args.replay:
        x = np.load(args.replay)
        if x.ndim != 3 or x.shape[:2] != (layout.dishes, 2) or x.dtype.kind != "i":
            raise ValueError(f"--replay {args.replay}: expected integers [dishes={layout.dishes}][2][samples], "
                             f"got {x.dtype} {x.shape}")
        if x.min() < -512 or x.max() > 511:
            raise ValueError(f"--replay {args.replay}: samples outside the 10-bit range -512 ..= 511")
        keep = x.shape[2] // layout.packet_samples * layout.packet_samples
        if keep == 0:
            raise ValueError(f"--replay {args.replay}: fewer samples than one packet")
        return packed_block(x[:, :, :keep], layout)
    from .sky import observe

    n = -(-args.block_samples // layout.packet_samples) * layout.packet_samples
    return packed_block(observe(layout.dishes, n, layout.adc_sample_rate, layout.band_start, args.sources, args.seed), layout)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m radio_kernels.cluster.dsim", description=__doc__.split("\n\n")[0])
    Layout.add_arguments(parser)
    parser.add_argument("--samples", type=int, default=0,
                        help="samples per polarisation to send (rounded up to whole packets; 0: until --seconds)")
    parser.add_argument("--seconds", type=float, default=0.0, help="wall time to send for (0: until --samples)")
    parser.add_argument("--rate", type=float, default=1.0, help="Gbit/s of payload over all dishes (0: unlimited)")
    parser.add_argument("--block-samples", type=int, default=1 << 20, help="simulated samples per polarisation, repeated")
    parser.add_argument("--sources", type=int, default=3, help="point sources (0 ..= 8)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--replay", help="a .npy file of samples [dish][pol][samples] to send instead")
    parser.add_argument("--drop", action="append", default=[], metavar="DISH:POL:HEAP",
                        help="leave out this heap (repeatable)")
    parser.add_argument("--threads", type=int, default=4, help="spead2 send threads")
    engine.add_monitor_arguments(parser)
    args = parser.parse_args(argv)
    try:
        layout = Layout.from_arguments(args)
        drops = parse_drops(args.drop)
        if args.samples <= 0 and args.seconds <= 0:
            raise ValueError("give --samples or --seconds")
        if args.rate < 0:
            raise ValueError(f"--rate must be at least 0, got {args.rate}")
        data = block(args, layout)
    except (ValueError, OSError) as e:
        print(f"dsim: {e}", file=sys.stderr)
        return 2
    stop = engine.stop_on_signal()

    dishes, block_packets = layout.dishes, data.shape[2]
    total = -(-args.samples // layout.packet_samples) if args.samples > 0 else None
    batch = max(1, 64 // dishes)  # packet times per send call
    # One send stream with a substream per dish (each its own UDP destination, so its own
    # SPEAD stream on the wire); the rate limit applies to the whole source.
    stream = spead2.send.UdpStream(spead2.ThreadPool(max(1, min(args.threads, dishes))),
                                   [layout.dish_endpoint(d) for d in range(dishes)],
                                   spead.send_config(layout, args.rate, layout.packet_bytes, 2 * dishes * batch + 8),
                                   buffer_size=8 << 20)
    ig = spead.digitiser_items(layout.packet_bytes)
    mon = Monitor("dsim", layout.adc_sample_rate, args.json, args.quiet)
    mon.begin()
    deadline = time.monotonic() + args.seconds if args.seconds > 0 else None
    k = 0
    while not stop.is_set() and (total is None or k < total) and (deadline is None or time.monotonic() < deadline):
        ks = range(k, k + batch if total is None else min(k + batch, total))
        refs = []
        for kk in ks:
            for d in range(dishes):
                for p in range(2):
                    if (d, p, kk) in drops:
                        mon.add(withheld=1)
                        continue
                    ig["timestamp"].value = kk * layout.packet_samples
                    ig["digitiser_id"].value = 2 * d + p
                    ig["raw_data"].value = data[d, p, kk % block_packets]
                    heap = ig.get_heap(descriptors="none", data="all")
                    refs.append(spead2.send.HeapReference(heap, cnt=spead.heap_cnt(kk, 2 * dishes, 2 * d + p),
                                                          substream_index=d))
        if refs:
            stream.send_heaps(refs, spead2.send.GroupMode.SERIAL)
            mon.add(sent=len(refs), bytes_out=len(refs) * layout.packet_bytes)
        mon.add(adc_samples=len(ks) * layout.packet_samples)
        k = ks[-1] + 1
        mon.tick()
    for d in range(dishes):
        stream.send_heap(ig.get_end(), substream_index=d)
    mon.report(packets_per_pol=k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
