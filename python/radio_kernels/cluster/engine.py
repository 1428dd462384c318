"""What the F-engine and X-engine processes share: their common options, start-up checks and
the serve loop (the engine runs in a worker thread; SIGTERM or SIGINT stops its receive
stream, so it finishes what it holds, reports and exits)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Callable, List

import spead2.recv

from .. import _native
from .layout import Layout


def add_monitor_arguments(parser: argparse.ArgumentParser) -> None:
    """The monitoring options of every process."""
    parser.add_argument("--json", help="monitoring JSON lines to this file ('-': stdout)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")


def stop_on_signal() -> threading.Event:
    """An event SIGTERM and SIGINT set (for the senders, which poll it between batches)."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    return stop


def add_arguments(parser: argparse.ArgumentParser, threads: int, buffer_mib: int) -> None:
    """The options every engine takes, besides the layout's."""
    Layout.add_arguments(parser)
    parser.add_argument("--index", type=int, required=True, help="this engine (0-based)")
    parser.add_argument("--cpu", action="store_true", help="run the CPU reference instead of the GPU")
    parser.add_argument("--window", type=int, default=4, help="chunks held open for reordering")
    parser.add_argument("--depth", type=int, default=3, help="GPU streaming slots")
    parser.add_argument("--threads", type=int, default=threads, help="spead2 receive threads")
    parser.add_argument("--buffer", type=int, default=buffer_mib, help="UDP socket buffer per port (MiB)")
    add_monitor_arguments(parser)


def main(name: str, count: Callable[[Layout], int], build, args: argparse.Namespace) -> int:
    """Checks the options, builds the engine (``build(args, layout)``) and serves it; exit
    status 2 on a bad option or a failed start."""
    try:
        layout = Layout.from_arguments(args)
        if not 0 <= args.index < count(layout):
            raise ValueError(f"--index must be 0 ..= {count(layout) - 1}, got {args.index}")
        for option in ("window", "depth", "threads", "buffer"):
            if getattr(args, option) < 1:
                raise ValueError(f"--{option} must be at least 1, got {getattr(args, option)}")
        engine = build(args, layout)
    except (ValueError, OSError, _native.Error) as e:
        print(f"{name}{args.index}: {e}", file=sys.stderr)
        return 2
    return serve(engine, engine.rx)


def receive(rx, senders: int, place, mon) -> None:
    """Hands each heap of ``rx`` to ``place`` until every one of ``senders`` has sent its stop
    heap (or the stream is stopped); an incomplete heap counts as lost."""
    stops = 0
    for heap in rx:
        if heap.is_end_of_stream():
            stops += 1
            if stops == senders:
                break
            continue
        if isinstance(heap, spead2.recv.IncompleteHeap):
            mon.add(lost=1)
            continue
        place(heap)
        mon.tick()


def serve(engine, rx) -> int:
    """Runs ``engine.run`` in a worker thread and reports; prints ``ready`` first."""
    failure: List[BaseException] = []

    def work() -> None:
        try:
            engine.run()
        except BaseException as e:  # reported below
            failure.append(e)
            rx.stop()

    signal.signal(signal.SIGTERM, lambda *_: rx.stop())
    signal.signal(signal.SIGINT, lambda *_: rx.stop())
    print(json.dumps({"ready": engine.mon.name}), flush=True)
    worker = threading.Thread(target=work, name=engine.mon.name)
    worker.start()
    while worker.is_alive():
        worker.join(0.2)
    if failure:
        print(f"{engine.mon.name}: {failure[0]!r}", file=sys.stderr)
        engine.mon.report(error=repr(failure[0]))
        return 1
    engine.mon.report()
    return 0
