"""F-engine: receives the digitiser streams of a group of dishes, channelizes each dish with the
streaming PFB (GPU) or its f64 CPU reference (``--cpu``), with delay models and gains, and
sends each X-engine its channel range as katgpucbf F-engine heaps.

    python -m radio_kernels.cluster.fengine --index 0 --dishes 8 --xengines 2 --channels 64

Input: heaps of ``packet_samples`` 10-bit samples per (dish, polarisation) are placed into PFB
input chunks (``2 n spectra_per_heap pfb_heaps_per_chunk`` samples); a chunk is handed to the
channelizer once a heap of a chunk ``--window`` chunks later arrives (or at the end), with
every packet that never came marked missing. The channelizer flags every spectrum whose
window touched a missing packet; an output heap holding a flagged spectrum is not sent
(Merry, "Efficient channelization on a graphics processing unit"), so the loss reaches the
X-engines as a missing heap, which they flag. Output heap: timestamp ``2 n m`` (m its first
spectrum), feng_id the dish, frequency the X-engine's first channel, feng_raw int8
``[channel][spectrum][pol][re, im]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Dict, Optional

import numpy as np
import spead2
import spead2.recv
import spead2.send

from .. import _native
from . import engine, spead
from .dsim import parse_drops
from .layout import BITS, Layout
from .monitor import Monitor


def channelizer_config(layout: Layout) -> "_native.ChannelizerConfig":
    return _native.ChannelizerConfig(
        layout.channels, taps=layout.taps, bits=BITS, spectra_per_heap=layout.spectra_per_heap,
        heaps_per_chunk=layout.pfb_heaps_per_chunk, chunk_samples=layout.chunk_samples,
        packet_samples=layout.packet_samples, max_delay=layout.max_delay, output="ci8")


def default_gain(layout: Layout) -> float:
    """A gain that puts the demo sky (rms about 40 ADC units; a channel's rms before the gain
    is about 1.3 times the samples' with the default weights) near rms 13 in int8."""
    return 0.25


def pfb_setup(layout: Layout, gain: Optional[float]):
    """(config, weights, gains) of every dish's channelizer: the default Hann-sinc weights and
    one real gain for every channel (``gain``, or :func:`default_gain`)."""
    weights = np.asarray(_native.hann_sinc_weights(layout.channels, layout.taps))
    g = default_gain(layout) if gain is None else gain
    return channelizer_config(layout), weights, np.full((2, layout.channels), g, np.complex64)


def chunks_ready(config, samples: int) -> int:
    """How many output chunks the first ``samples`` stream samples complete: chunk k's windows
    reach sample ``2 n ((k + 1) S - 1) + window + max_delay`` at the latest (S spectra per
    chunk, delays within ``max_delay``)."""
    two_n, spectra = 2 * config.channels, config.spectra_per_chunk
    return max(0, samples - config.window - config.max_delay + two_n) // (two_n * spectra)


class CpuChannelizer:
    """The f64 CPU reference run as a stream: the same chunks in, the same output chunks out
    as the GPU's streaming channelizer, keeping only the samples the next windows read."""

    def __init__(self, config, weights, gains, models) -> None:
        self.config, self.weights, self.gains, self.models = config, weights, gains, models
        self.samples = np.zeros((2, 0), np.int32)
        self.present = np.zeros((2, 0), bool)
        self.first_sample = 0
        self.next_chunk = 0

    def push(self, packed: np.ndarray, present: np.ndarray) -> list:
        c = self.config
        count = c.chunk_samples
        new = np.stack([np.asarray(_native.unpack_samples(np.ascontiguousarray(packed[p]), BITS, count))
                        for p in range(2)])
        self.samples = np.concatenate([self.samples, new], axis=1)
        self.present = np.concatenate([self.present, present], axis=1)
        end = self.first_sample + self.samples.shape[1]
        two_n, spectra = 2 * c.channels, c.spectra_per_chunk
        out = []
        while self.next_chunk < chunks_ready(c, end):
            k = self.next_chunk
            out.append(_native.channelize_reference(
                c, np.ascontiguousarray(self.samples), np.ascontiguousarray(self.present), k * spectra,
                self.weights, self.gains, self.models, first_sample=self.first_sample))
            self.next_chunk += 1
            keep = max(0, (two_n * (k + 1) * spectra - c.max_delay) // c.packet_samples * c.packet_samples)
            if keep > self.first_sample:
                cut = keep - self.first_sample
                self.samples = self.samples[:, cut:]
                self.present = self.present[:, cut // c.packet_samples:]
                self.first_sample = keep
        return out


def load_models(path: Optional[str], dishes: range):
    """Delay models per dish and polarisation from a JSON file ``{"<dish>": [[delay,
    delay_rate, phase, phase_rate], [...]]}`` (samples, samples/sample, radians,
    radians/sample); zero for dishes it leaves out."""
    zero = (_native.DelayModel(), _native.DelayModel())
    models = {d: zero for d in dishes}
    if path:
        with open(path, encoding="utf-8") as f:
            table = json.load(f)
        for key, pols in table.items():
            d = int(key)
            if d in models:
                if len(pols) != 2 or any(len(p) != 4 for p in pols):
                    raise ValueError(f"--delays: dish {d} needs two [delay, delay_rate, phase, phase_rate]")
                models[d] = tuple(_native.DelayModel(*map(float, p)) for p in pols)
    return models


class FEngine:
    def __init__(self, args: argparse.Namespace, layout: Layout) -> None:
        self.layout = layout
        self.index = args.index
        self.dishes = layout.fengine_dishes(args.index)
        self.window = args.window
        self.drops = parse_drops(args.drop)
        self.mon = Monitor(f"feng{args.index}", layout.adc_sample_rate, args.json, args.quiet)
        config, weights, gains = pfb_setup(layout, args.gain)
        models = load_models(args.delays, self.dishes)
        if args.cpu:
            self.pfb = {d: CpuChannelizer(config, weights, gains, models[d]) for d in self.dishes}
        else:
            gpu = _native.open(0)
            self.pfb = {d: _native.Channelizer(gpu, config, weights) for d in self.dishes}
            for d, ch in self.pfb.items():
                ch.set_gains(gains)
                for pol in range(2):
                    ch.set_delay_model(pol, models[d][pol])
            self.pfb = {d: ch.streaming(args.depth) for d, ch in self.pfb.items()}
        self.open: Dict[int, Dict[int, tuple]] = {d: {} for d in self.dishes}
        self.next_chunk = {d: 0 for d in self.dishes}
        self.newest = {d: -1 for d in self.dishes}
        self.last_packet = {d: -1 for d in self.dishes}
        # Receive: one UDP reader per dish; heap counters are unique per (dish, pol, packet).
        ring = max(256, min(16384, (256 << 20) // layout.packet_bytes))
        self.rx = spead.recv_stream(min(len(self.dishes), args.threads), max_heaps=8 * len(self.dishes),
                                    ring_heaps=ring, heap_bytes=layout.packet_bytes)
        for d in self.dishes:
            host, port = layout.dish_endpoint(d)
            self.rx.add_udp_reader(port, max_size=layout.packet_size + 128, buffer_size=args.buffer << 20,
                                   bind_hostname=host)
        # Send: one stream, a substream per X-engine.
        per_x = layout.channels_per_xengine
        heap_bytes = per_x * layout.spectra_per_heap * 4
        self.tx = spead2.send.UdpStream(spead2.ThreadPool(1), [layout.xengine_endpoint(x) for x in range(layout.xengines)],
                                        spead.send_config(layout, args.send_rate, heap_bytes, 4 * layout.xengines))
        self.ig = spead.feng_items(per_x, layout.spectra_per_heap)

    # --- input ---
    def empty_chunk(self):
        """A PFB input chunk (packed samples ``[2][chunk_bytes]``) and its packet flags, none
        arrived."""
        L = self.layout
        return np.zeros((2, L.chunk_packets * L.packet_bytes), np.uint8), np.zeros((2, L.chunk_packets), bool)

    def place(self, heap) -> None:
        L = self.layout
        v = spead.heap_values(heap)
        ts, did, raw = v.get(spead.TIMESTAMP_ID), v.get(spead.DIGITISER_ID_ID), v.get(spead.RAW_DATA_ID)
        if ts is None or did is None or raw is None or raw.size != L.packet_bytes or ts % L.packet_samples:
            self.mon.add(lost=1)
            return
        d, p = did // 2, did % 2
        if d not in self.open:
            self.mon.add(lost=1)
            return
        k = ts // L.packet_samples
        c, off = divmod(k, L.chunk_packets)
        if c < self.next_chunk[d]:
            self.mon.add(late=1)
            return
        self.mon.begin()
        buf = self.open[d].get(c)
        if buf is None:
            buf = self.open[d][c] = self.empty_chunk()
        buf[0][p, off * L.packet_bytes:(off + 1) * L.packet_bytes] = raw
        buf[1][p, off] = True
        self.last_packet[d] = max(self.last_packet[d], k)
        self.mon.add(heaps=1, bytes_in=L.packet_bytes)
        self.newest[d] = max(self.newest[d], c)
        while self.newest[d] - self.next_chunk[d] >= self.window:
            self.flush(d)

    def flush(self, d: int) -> None:
        """Hands dish d's oldest open chunk to its channelizer and sends what comes out."""
        L = self.layout
        c = self.next_chunk[d]
        self.next_chunk[d] += 1
        buf = self.open[d].pop(c, None) or self.empty_chunk()
        # Lost: packets that never came, up to the newest one received (those after it, in the
        # last chunk at the end of the stream, were never sent).
        sent = min(L.chunk_packets, self.last_packet[d] + 1 - c * L.chunk_packets)
        self.mon.add(lost=int((~buf[1][:, :max(0, sent)]).sum()), adc_samples=L.chunk_samples // len(self.dishes))
        t0 = time.perf_counter()
        pfb = self.pfb[d]
        if isinstance(pfb, CpuChannelizer):
            for out in pfb.push(buf[0], buf[1]):
                self.send(d, out)
        else:
            # Keep one chunk in flight per dish: the GPU works on it while the other dishes'
            # chunks are received and submitted; its output is sent at this dish's next flush.
            self.drain(d, keep=1)
            pfb.submit(buf[0], buf[1])
        self.mon.add(compute_s=time.perf_counter() - t0, compute_heaps=L.pfb_heaps_per_chunk)

    def drain(self, d: int, keep: int) -> None:
        """Sends dish d's finished GPU output chunks, leaving ``keep`` in flight."""
        pfb = self.pfb[d]
        while pfb.pending > keep:
            out = pfb.output_view()
            if out is None:
                break
            self.send(d, out)

    # --- output ---
    def send(self, d: int, out) -> None:
        L = self.layout
        per_x, S = L.channels_per_xengine, L.spectra_per_heap
        data = np.asarray(out.data)
        refs = []
        for h in range(data.shape[0]):
            first = out.first_spectrum + h * S
            ts = first * L.samples_per_spectrum
            index = ts // L.samples_per_heap
            if out.lost_heaps[h]:
                self.mon.add(withheld=L.xengines)
                continue
            for x in range(L.xengines):
                if (d, index, x) in self.drops:
                    self.mon.add(withheld=1)
                    continue
                self.ig["timestamp"].value = ts
                self.ig["feng_id"].value = d
                self.ig["frequency"].value = x * per_x
                self.ig["feng_raw"].value = data[h, x * per_x:(x + 1) * per_x]
                heap = self.ig.get_heap(descriptors="none", data="all")
                refs.append(spead2.send.HeapReference(heap, cnt=spead.heap_cnt(index, L.dishes, d), substream_index=x))
        if refs:
            self.tx.send_heaps(refs, spead2.send.GroupMode.SERIAL)
            self.mon.add(sent=len(refs), bytes_out=len(refs) * per_x * S * 4)
        self.mon.tick()

    def run(self) -> None:
        engine.receive(self.rx, len(self.dishes), self.place, self.mon)
        # The end: every chunk up to the newest heap of each dish, the dishes in step so
        # that the X-engines get each heap time from every dish before the next one.
        while any(self.next_chunk[d] <= self.newest[d] for d in self.dishes):
            for d in self.dishes:
                if self.next_chunk[d] <= self.newest[d]:
                    self.flush(d)
        for d in self.dishes:
            if not isinstance(self.pfb[d], CpuChannelizer):
                self.drain(d, keep=0)
        L = self.layout
        for x in range(L.xengines):
            self.tx.send_heap(self.ig.get_end(), cnt=(1 << 46) + self.index * L.xengines + x, substream_index=x)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m radio_kernels.cluster.fengine", description=__doc__.split("\n\n")[0])
    engine.add_arguments(parser, threads=4, buffer_mib=32)
    parser.add_argument("--gain", type=float, default=None, help="gain (real) for every channel")
    parser.add_argument("--delays", help="JSON delay models per dish (see load_models)")
    parser.add_argument("--send-rate", type=float, default=0.0, help="Gbit/s output limit (0: none)")
    parser.add_argument("--drop", action="append", default=[], metavar="DISH:HEAP:XENG",
                        help="do not send this output heap (repeatable; for tests)")
    return engine.main("feng", lambda layout: layout.fengines, FEngine, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
