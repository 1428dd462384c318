"""F-engine simulator (as katgpucbf's ``fsim``): sends one X-engine's F-engine heaps for every
dish, random int8 payloads made once, as fast as ``--rate`` allows, for ``--seconds``; then
one stop heap per F-engine. It measures an X-engine (or the network path) without the
digitiser source and F-engines in front.

    python -m radio_kernels.cluster.fsim --xengine 0 --dishes 64 --channels 4096 --seconds 20
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import spead2
import spead2.send

from . import engine, spead
from .layout import Layout
from .monitor import Monitor


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m radio_kernels.cluster.fsim", description=__doc__.split("\n\n")[0])
    Layout.add_arguments(parser)
    parser.add_argument("--xengine", type=int, required=True, help="the X-engine to feed")
    parser.add_argument("--seconds", type=float, required=True, help="how long to send")
    parser.add_argument("--rate", type=float, default=0.0, help="Gbit/s of payload (0: unlimited)")
    engine.add_monitor_arguments(parser)
    args = parser.parse_args(argv)
    try:
        layout = Layout.from_arguments(args)
        if not 0 <= args.xengine < layout.xengines:
            raise ValueError(f"--xengine must be 0 ..= {layout.xengines - 1}, got {args.xengine}")
        if args.seconds <= 0 or args.rate < 0:
            raise ValueError("--seconds must be above 0 and --rate at least 0")
    except ValueError as e:
        print(f"fsim: {e}", file=sys.stderr)
        return 2
    stop = engine.stop_on_signal()
    L, x = layout, args.xengine
    per_x, S, D = L.channels_per_xengine, L.spectra_per_heap, L.dishes
    heap_bytes = per_x * S * 4
    tx = spead2.send.UdpStream(spead2.ThreadPool(1), [L.xengine_endpoint(x)],
                               spead.send_config(L, args.rate, heap_bytes, 2 * D + 8), buffer_size=8 << 20)
    rng = np.random.default_rng(x)
    payloads = rng.integers(-127, 128, (D, per_x, S, 2, 2), dtype=np.int8)
    ig = spead.feng_items(per_x, S)
    mon = Monitor(f"fsim{x}", L.adc_sample_rate, args.json, args.quiet)
    mon.begin()
    deadline = time.monotonic() + args.seconds
    h = 0
    while not stop.is_set() and time.monotonic() < deadline:
        refs = []
        for d in range(D):
            ig["timestamp"].value = h * L.samples_per_heap
            ig["feng_id"].value = d
            ig["frequency"].value = x * per_x
            ig["feng_raw"].value = payloads[d]
            refs.append(spead2.send.HeapReference(ig.get_heap(descriptors="none", data="all"),
                                                  cnt=spead.heap_cnt(h, D, d)))
        tx.send_heaps(refs, spead2.send.GroupMode.SERIAL)
        mon.add(sent=D, bytes_out=D * heap_bytes, adc_samples=L.samples_per_heap)
        h += 1
        mon.tick()
    for f in range(L.fengines):
        tx.send_heap(ig.get_end(), cnt=(1 << 46) + f)
    mon.report(heap_times=h)
    return 0


if __name__ == "__main__":
    sys.exit(main())
