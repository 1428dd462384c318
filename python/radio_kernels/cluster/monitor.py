"""Monitoring: counters an engine updates, a progress line once a second (stderr) and, with
``--json FILE``, the same as JSON lines; the final report is the last line."""

from __future__ import annotations

import json
import sys
import time
from typing import Optional, TextIO


def counts_line(s: dict) -> str:
    """One engine's counters (a :meth:`Monitor.snapshot` or report) on one line."""
    return (f"heaps {s['heaps']} lost {s['lost']} late {s['late']} withheld {s['withheld']} "
            f"sent {s['sent']} | in {s['gbit_s_in']:.3f} Gb/s out {s['gbit_s_out']:.3f} Gb/s | "
            f"realtime {s['realtime']:.4f}x | compute {s['compute_ms_per_heap']:.4f} ms/heap | "
            f"integrations {s['integrations']}")


class Monitor:
    """Counters of one engine. ``adc_samples`` counts ADC time processed (per dish), so the
    real-time factor is ``adc_samples / adc_sample_rate / wall seconds``."""

    def __init__(self, name: str, adc_sample_rate: float, json_path: Optional[str] = None,
                 quiet: bool = False) -> None:
        self.name = name
        self.rate = adc_sample_rate
        self.quiet = quiet
        self.json: Optional[TextIO] = None
        if json_path == "-":
            self.json = sys.stdout
        elif json_path:
            self.json = open(json_path, "a", encoding="utf-8")
        self.counts = {"heaps": 0, "lost": 0, "late": 0, "withheld": 0, "sent": 0, "bytes_in": 0,
                       "bytes_out": 0, "adc_samples": 0, "compute_s": 0.0, "compute_heaps": 0,
                       "integrations": 0, "incomplete": 0}
        self.start: Optional[float] = None
        self.last = time.monotonic()

    def begin(self) -> None:
        """Starts the clock (at the first data)."""
        if self.start is None:
            self.start = time.monotonic()

    def add(self, **counts) -> None:
        for k, v in counts.items():
            self.counts[k] += v

    def snapshot(self) -> dict:
        wall = time.monotonic() - self.start if self.start is not None else 0.0
        c = dict(self.counts)
        c["engine"] = self.name
        c["wall_s"] = round(wall, 3)
        c["gbit_s_in"] = round(8 * c["bytes_in"] / wall / 1e9, 4) if wall > 0 else 0.0
        c["gbit_s_out"] = round(8 * c["bytes_out"] / wall / 1e9, 4) if wall > 0 else 0.0
        c["realtime"] = round(c["adc_samples"] / self.rate / wall, 6) if wall > 0 else 0.0
        c["compute_ms_per_heap"] = (round(1e3 * c["compute_s"] / c["compute_heaps"], 4)
                                    if c["compute_heaps"] else 0.0)
        c["compute_s"] = round(c["compute_s"], 4)
        return c

    def line(self, s: dict) -> str:
        return f"{self.name}: {counts_line(s)}"

    def tick(self, force: bool = False) -> None:
        """The progress line (and JSON line) if a second has passed."""
        now = time.monotonic()
        if not force and now - self.last < 1.0:
            return
        self.last = now
        s = self.snapshot()
        if not self.quiet:
            print(self.line(s), file=sys.stderr, flush=True)
        if self.json is not None:
            print(json.dumps(s), file=self.json, flush=True)

    def report(self, **extra) -> dict:
        """The final report: printed as one JSON line (``report`` key) on stdout."""
        s = self.snapshot()
        s.update(extra)
        if not self.quiet:
            print(self.line(s) + " (final)", file=sys.stderr, flush=True)
        if self.json is not None and self.json is not sys.stdout:
            print(json.dumps(s), file=self.json, flush=True)
            self.json.close()
        print(json.dumps({"report": s}), flush=True)
        return s
