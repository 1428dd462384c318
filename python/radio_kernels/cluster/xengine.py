"""X-engine: receives one channel range from every F-engine, assembles correlator chunks
``[time][channel][dish][pol][re, im]`` (int8) from the heaps (the corner turn), correlates and
integrates them on the GPU (the streaming correlator) or with the exact CPU reference
(``--cpu``), and writes one UVH5 file per integration.

    python -m radio_kernels.cluster.xengine --index 0 --dishes 8 --xengines 2 --out vis/

Placement: heap (timestamp ``t``, feng_id ``d``) is heap time ``h = t / (2 n S)`` (S spectra
per heap); its payload is copied whole into slot ``(h mod H, d)`` of chunk ``h / H``'s staging
buffer ``[H][D][channel][spectrum][pol][re, im]`` (H heap times per chunk). When the chunk is
due, the corner turn (:func:`radio_kernels._native.corner_turn`, cache-blocked, threaded)
writes ``chunk[(h mod H) S + s][c][d][p] = payload[c][s][p]`` straight into the correlator's
pinned input slot. A chunk is correlated once
a heap of a chunk ``--window`` chunks later arrives (or at the end); a heap that never came
leaves zeros there and its (heap time, dish) is marked missing; a heap for a chunk already
correlated is late (counted and dropped). Integrations are ``heaps_per_integration`` heap
times, aligned to heap time 0. Output per integration: the int64 sums ``[channel][b(i,j)]
[pi][pj]``, flags true for every baseline ``(i, j)`` whose dish i or j missed a heap in the
integration (all of this X-engine's channels and every polarisation product), and nsamples the
fraction of the integration's heap times where both dishes were present. At the end, an
integration not reached by any heap is discarded (counted as incomplete).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import os
import sys
import time
from typing import Optional

import numpy as np

from .. import _native
from . import engine, spead
from .layout import Layout
from .monitor import Monitor
from .sky import antenna_positions_enu


def baseline_pairs(dishes: int):
    """Index arrays (i, j) over ``b(i, j) = i (i + 1) / 2 + j``, ``i >= j``."""
    i, j = np.tril_indices(dishes)
    return i, j


def flags_and_nsamples(present: np.ndarray, channels: int):
    """(flags bool, nsamples float32), ``(1, channels, baselines)``, from ``present`` bool
    ``[heap time][dish]``."""
    i, j = baseline_pairs(present.shape[1])
    ns = (present[:, i] & present[:, j]).mean(axis=0).astype(np.float32)
    ns = np.broadcast_to(ns, (1, channels, ns.size)).copy()
    return ns < 1.0, ns


class XEngine:
    def __init__(self, args: argparse.Namespace, layout: Layout) -> None:
        L = self.layout = layout
        self.index = x = args.index
        self.window = args.window
        self.out = args.out
        self.cx = L.channels_per_xengine
        self.first_channel = x * self.cx
        self.mon = Monitor(f"xeng{x}", L.adc_sample_rate, args.json, args.quiet)
        self.shape = (L.times_per_chunk, self.cx, L.dishes, 2, 2)
        self.staging = (L.heaps_per_chunk, L.dishes, self.cx, L.spectra_per_heap, 2, 2)
        self.threads = args.turn_threads
        self.heap_bytes = self.cx * L.spectra_per_heap * 4
        self.discard = args.discard
        if args.discard:
            self.integ = None
        elif args.cpu:
            self.integ = None
            self.acc = np.zeros((self.cx, L.dishes * (L.dishes + 1) // 2, 2, 2, 2), np.int64)
        else:
            gpu = _native.open(0)
            corr = _native.Correlator(gpu, L.dishes, 2, self.cx, L.times_per_chunk)
            self.integ = corr.integration(L.chunks_per_integration, args.depth)
        self.chunks = {}
        self.free = []
        self.next_chunk: Optional[int] = None
        self.newest = -1
        self.newest_heap = -1
        self.present = None
        self.pending = collections.deque()
        ring = max(128, min(8192, (512 << 20) // self.heap_bytes))
        self.rx = spead.recv_stream(args.threads, max_heaps=4 * L.dishes, ring_heaps=ring,
                                    heap_bytes=self.heap_bytes)
        host, port = L.xengine_endpoint(x)
        self.rx.add_udp_reader(port, max_size=L.packet_size + 128, buffer_size=args.buffer << 20, bind_hostname=host)
        if self.out:
            os.makedirs(self.out, exist_ok=True)
        # UVH5 files are written by one thread (the writer releases the GIL), at most two
        # integrations queued, so that a slow disk holds back the receiver only then.
        self.writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="uvh5")
        self.writes = collections.deque()
        self.positions = antenna_positions_enu(L.dishes)

    def buffer(self):
        """A staging buffer and its presence flags (the data is zeroed where heaps are missing
        when the chunk is due)."""
        if self.free:
            data, present = self.free.pop()
            present.fill(False)
            return data, present
        return np.empty(self.staging, np.int8), np.zeros((self.layout.heaps_per_chunk, self.layout.dishes), bool)

    def place(self, heap) -> None:
        L = self.layout
        v = spead.heap_values(heap)
        ts, d, freq, raw = (v.get(k) for k in (spead.TIMESTAMP_ID, spead.FENG_ID_ID, spead.FREQUENCY_ID, spead.FENG_RAW_ID))
        if (ts is None or d is None or raw is None or freq != self.first_channel or d >= L.dishes
                or raw.size != self.heap_bytes or ts % L.samples_per_heap):
            self.mon.add(lost=1)
            return
        h = ts // L.samples_per_heap
        if self.discard:
            self.mon.begin()
            self.mon.add(heaps=1, bytes_in=raw.size, adc_samples=L.samples_per_heap // L.dishes)
            return
        c, slot = divmod(h, L.heaps_per_chunk)
        if self.next_chunk is None:
            self.next_chunk = h // L.heaps_per_integration * L.chunks_per_integration
        if c < self.next_chunk:
            self.mon.add(late=1)
            return
        self.mon.begin()
        buf = self.chunks.get(c)
        if buf is None:
            buf = self.chunks[c] = self.buffer()
        if buf[1][slot, d]:
            self.mon.add(late=1)  # a duplicate
            return
        buf[0][slot, d] = raw.view(np.int8).reshape(self.staging[2:])
        buf[1][slot, d] = True
        self.mon.add(heaps=1, bytes_in=raw.size)
        self.newest = max(self.newest, c)
        self.newest_heap = max(self.newest_heap, h)
        while self.newest - self.next_chunk >= self.window:
            self.flush()

    def flush(self) -> None:
        L = self.layout
        c = self.next_chunk
        self.next_chunk += 1
        buf = self.chunks.pop(c, None) or self.buffer()
        k = c % L.chunks_per_integration
        if k == 0:
            self.present = np.zeros((L.heaps_per_integration, L.dishes), bool)
        self.present[k * L.heaps_per_chunk:(k + 1) * L.heaps_per_chunk] = buf[1]
        self.mon.add(lost=int((~buf[1]).sum()), adc_samples=L.heaps_per_chunk * L.samples_per_heap)
        t0 = time.perf_counter()
        buf[0][~buf[1]] = 0  # missing heaps correlate as zeros
        if self.integ is None:
            chunk = np.empty(self.shape, np.int8)
            _native.corner_turn(buf[0], chunk, self.threads)
            self.acc += np.asarray(_native.correlate_reference(chunk, L.dishes, 2, self.cx, L.times_per_chunk))
        else:
            _native.corner_turn(buf[0], self.integ.input(), self.threads)
            self.integ.submit()
        self.mon.add(compute_s=time.perf_counter() - t0, compute_heaps=L.heaps_per_chunk * L.dishes)
        self.free.append(buf)
        if k == L.chunks_per_integration - 1:
            self.pending.append((c // L.chunks_per_integration, self.present))
            if self.integ is None:
                self.write(self.pending.popleft(), self.acc)
                self.acc = np.zeros_like(self.acc)
        self.drain(keep=1)

    def drain(self, keep: int) -> None:
        """Writes finished GPU integrations, leaving ``keep`` in flight."""
        while self.integ is not None and len(self.pending) > keep:
            vis = self.integ.output()
            if vis is None:
                break
            self.write(self.pending.popleft(), vis)

    def write(self, meta, vis: np.ndarray) -> None:
        L = self.layout
        index, present = meta
        flags, nsamples = flags_and_nsamples(present, self.cx)
        self.mon.add(integrations=1)
        if not self.out:
            return
        mid = (index + 0.5) * L.heaps_per_integration * L.samples_per_heap
        jd = (L.sync_time + mid / L.adc_sample_rate) / 86400.0 + 2440587.5
        while len(self.writes) >= 2:
            self.writes.popleft().result()
        self.writes.append(self.writer.submit(
            _native.write_uvh5,
            os.path.join(self.out, f"x{self.index:02d}_{index:06d}.uvh5"), vis[None],
            freq_hz=[L.channel_frequency(k) for k in L.xengine_channels(self.index)],
            channel_width_hz=L.adc_sample_rate / (2 * L.channels), times_jd=[jd],
            integration_time_s=L.integration_seconds, antenna_positions_enu=self.positions,
            flags=flags, nsamples=nsamples,
            history=f"radio-kernels X-engine {self.index} of {L.xengines}, integration {index}"))

    def run(self) -> None:
        L = self.layout
        engine.receive(self.rx, L.fengines, self.place, self.mon)
        if self.next_chunk is not None:
            # Every integration some heap reached the end of; later ones are incomplete.
            end = (self.newest_heap + 1) // L.heaps_per_integration * L.chunks_per_integration
            while self.next_chunk < end:
                self.flush()
            if self.chunks:
                self.mon.add(incomplete=1)
        self.drain(keep=0)
        while self.writes:
            self.writes.popleft().result()
        self.writer.shutdown()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m radio_kernels.cluster.xengine", description=__doc__.split("\n\n")[0])
    engine.add_arguments(parser, threads=1, buffer_mib=64)
    parser.add_argument("--out", default="", help="folder for the UVH5 files (none: count integrations only)")
    parser.add_argument("--turn-threads", type=int, default=4, help="threads of the corner turn")
    parser.add_argument("--discard", action="store_true",
                        help="receive and count heaps only (measures the network path and spead2)")
    args = parser.parse_args(argv)
    if args.out and not _native.HAS_UVH5:
        print("xengine: --out needs a build with UVH5 output (radio_kernels.HAS_UVH5)", file=sys.stderr)
        return 2
    if args.turn_threads < 1:
        print(f"xengine: --turn-threads must be at least 1, got {args.turn_threads}", file=sys.stderr)
        return 2
    return engine.main("xeng", lambda layout: layout.xengines, XEngine, args)


if __name__ == "__main__":
    sys.exit(main())
