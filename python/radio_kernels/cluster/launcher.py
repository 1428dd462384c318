"""``radio-kernels-cluster``: starts a small correlator on one host and reports.

    radio-kernels-cluster --dishes 8 --xengines 2 --channels 64 --samples 1048576 --cpu --out vis/

Starts the X-engines, then the F-engines (each waits until it prints ``ready``), then the
digitiser source; binds each engine to one GPU with ``CUDA_VISIBLE_DEVICES`` (X-engines first,
round robin over ``--gpus``) or runs the CPU references (``--cpu``). When the source has sent
``--samples`` (or ``--seconds`` have passed) it sends stop heaps, which end the F-engines and
then the X-engines; an engine still running ``--grace`` seconds after that gets SIGTERM (it
finishes what it holds and reports), then SIGKILL. Every engine runs in its own process group,
and none is left behind. Prints each engine's final report and a JSON summary (``--report``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional

from .dsim import parse_drop
from .layout import Layout
from .monitor import counts_line


class Engine:
    """One engine process: its output lines are read by a thread."""

    def __init__(self, name: str, argv: List[str], env: Dict[str, str], log) -> None:
        self.name = name
        self.log = log
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, env=env, text=True,
                                     start_new_session=True)
        self.ready = threading.Event()
        self.report: Optional[dict] = None
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self) -> None:
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and "ready" in msg:
                self.ready.set()
            elif isinstance(msg, dict) and "report" in msg:
                self.report = msg["report"]
        self.ready.set()

    def signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def wait(self, seconds: float) -> bool:
        try:
            self.proc.wait(timeout=max(0.0, seconds))
            return True
        except subprocess.TimeoutExpired:
            return False


def stop_all(engines: List[Engine], grace: float) -> None:
    """SIGTERM to whatever still runs, then SIGKILL after ``grace`` seconds; reaps all."""
    for e in engines:
        if e.proc.poll() is None:
            e.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for e in engines:
        if not e.wait(deadline - time.monotonic()):
            e.signal(signal.SIGKILL)
            e.proc.wait()
    for e in engines:
        e.signal(signal.SIGKILL)  # any child left in the group
        e.thread.join(1.0)
        if e.log is not None:
            e.log.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="radio-kernels-cluster", description=__doc__.split("\n\n")[0])
    Layout.add_arguments(parser)
    parser.add_argument("--samples", type=int, default=0, help="samples per polarisation the source sends")
    parser.add_argument("--seconds", type=float, default=0.0, help="or: how long the source sends")
    parser.add_argument("--rate", type=float, default=0.5, help="source rate, Gbit/s over all dishes (0: unlimited)")
    parser.add_argument("--cpu", nargs="?", const="all", choices=["all", "feng", "xeng"], default=None,
                        help="run the CPU references: every engine (--cpu), or only the F-engines "
                             "(--cpu feng) or the X-engines (--cpu xeng)")
    parser.add_argument("--gpus", default=None, help="GPU ordinals to use, e.g. 0,1,2,3 (default: all)")
    parser.add_argument("--out", default="", help="folder for the X-engines' UVH5 files")
    parser.add_argument("--logs", default="", help="folder for each engine's stderr and JSON lines")
    parser.add_argument("--report", default="", help="write the summary JSON here")
    parser.add_argument("--grace", type=float, default=30.0, help="seconds to wait for engines to stop")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before everything is stopped")
    parser.add_argument("--drop-digitiser", action="append", default=[], metavar="DISH:POL:HEAP",
                        help="the source leaves this heap out (for tests)")
    parser.add_argument("--drop-feng", action="append", default=[], metavar="DISH:HEAP:XENG",
                        help="the F-engine of DISH does not send this heap (for tests)")
    parser.add_argument("--engine-arg", action="append", default=[], metavar="ROLE=ARG",
                        help="an extra option for every engine of ROLE (dsim, feng or xeng), e.g. xeng=--window=8")
    parser.add_argument("--quiet", action="store_true", help="no progress lines from the engines")
    args = parser.parse_args(argv)
    try:
        layout = Layout.from_arguments(args)
        if args.samples <= 0 and args.seconds <= 0:
            raise ValueError("give --samples or --seconds")
        extra: Dict[str, List[str]] = {"dsim": [], "feng": [], "xeng": []}
        for item in args.engine_arg:
            role, _, value = item.partition("=")
            if role not in extra or not value:
                raise ValueError(f"--engine-arg {item!r}: expected dsim=..., feng=... or xeng=...")
            extra[role].append(value)
        gpus: List[str] = []
        if args.cpu != "all":
            if args.gpus is None:
                from .. import _native

                gpus = [str(i) for i in range(_native.device_count())]
            else:
                gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
            if not gpus:
                raise ValueError("no GPU: give --cpu to run the CPU references")
        feng_drops: Dict[int, List[str]] = {}
        for option, items in (("--drop-digitiser", args.drop_digitiser), ("--drop-feng", args.drop_feng)):
            for item, (dish, *_) in zip(items, (parse_drop(item) for item in items)):
                if not 0 <= dish < layout.dishes:
                    raise ValueError(f"{option} {item}: no dish {dish}")
                if option == "--drop-feng":
                    feng_drops.setdefault(dish // layout.dishes_per_fengine, []).append(item)
    except ValueError as e:
        print(f"radio-kernels-cluster: {e}", file=sys.stderr)
        return 2

    base = [sys.executable, "-m"]
    common = layout.arguments()
    if args.logs:
        os.makedirs(args.logs, exist_ok=True)
    engines: List[Engine] = []
    slot = [0]

    def start(role: str, index: Optional[int], module: str, more: List[str]) -> Engine:
        name = role if index is None else f"{role}{index}"
        env = dict(os.environ)
        flags: List[str] = []
        if role != "dsim":
            if args.cpu in ("all", role):
                flags.append("--cpu")
            else:
                env["CUDA_VISIBLE_DEVICES"] = gpus[slot[0] % len(gpus)]
                slot[0] += 1
            flags += ["--index", str(index)]
        if args.logs:
            flags += ["--json", os.path.join(args.logs, f"{name}.jsonl")]
            log = open(os.path.join(args.logs, f"{name}.log"), "w", encoding="utf-8")
        else:
            log = None
        if args.quiet:
            flags.append("--quiet")
        e = Engine(name, base + [f"radio_kernels.cluster.{module}"] + common + flags + more + extra[role], env, log)
        engines.append(e)
        return e

    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    t0 = time.monotonic()
    deadline = t0 + args.timeout
    status = 0
    try:
        for x in range(layout.xengines):
            start("xeng", x, "xengine", ["--out", args.out] if args.out else [])
        for f in range(layout.fengines):
            more: List[str] = []
            for item in feng_drops.get(f, []):
                more += ["--drop", item]
            start("feng", f, "fengine", more)
        for e in engines:
            while not e.ready.wait(0.2):
                if stopping.is_set() or time.monotonic() > deadline:
                    raise RuntimeError("engines did not start")
            if e.proc.poll() is not None:
                raise RuntimeError(f"{e.name} exited with status {e.proc.returncode} before it was ready")
        src = ["--rate", repr(args.rate)]
        src += ["--samples", str(args.samples)] if args.samples > 0 else ["--seconds", repr(args.seconds)]
        for item in args.drop_digitiser:
            src += ["--drop", item]
        dsim = start("dsim", None, "dsim", src)
        # The source, then the F-engines, then the X-engines end on their stop heaps.
        groups = ([dsim], [e for e in engines if e.name.startswith("feng")],
                  [e for e in engines if e.name.startswith("xeng")])
        for i, group in enumerate(groups):
            for e in group:
                while not e.wait(0.2):
                    if stopping.is_set() or time.monotonic() > deadline:
                        raise RuntimeError(f"stopped while waiting for {e.name}")
            if i == 0:
                deadline = min(deadline, time.monotonic() + args.grace)
    except RuntimeError as e:
        print(f"radio-kernels-cluster: {e}", file=sys.stderr)
        status = 1
    finally:
        stop_all(engines, args.grace)
    wall = time.monotonic() - t0
    reports = {e.name: e.report for e in engines}
    codes = {e.name: e.proc.returncode for e in engines}
    if any(c != 0 for c in codes.values()) or any(r is None for r in reports.values()):
        status = status or 1
    x = [r for n, r in reports.items() if n.startswith("xeng") and r]
    summary = {
        "status": status, "wall_s": round(wall, 3), "exit_codes": codes, "engines": reports,
        "xengine_gbit_s": sum(r["gbit_s_in"] for r in x),
        "heaps": sum(r["heaps"] for r in x), "lost": sum(r["lost"] for r in x),
        "late": sum(r["late"] for r in x), "integrations": sum(r["integrations"] for r in x),
    }
    for name, r in reports.items():
        print(f"{name:>6} (exit {codes[name]}): {'no report' if r is None else counts_line(r)}", file=sys.stderr)
    print(f"cluster: {len(x)} X-engines, {summary['xengine_gbit_s']:.3f} Gb/s in aggregate, "
          f"{summary['heaps']} heaps, {summary['lost']} lost, {summary['late']} late, "
          f"{summary['integrations']} integrations, {wall:.1f} s", file=sys.stderr)
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
    print(json.dumps(summary))
    return status


if __name__ == "__main__":
    sys.exit(main())
