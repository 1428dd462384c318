"""The shape of one small correlator, shared by every process: dishes, engines, channels,
heap sizes, the integration, the clock and the UDP ports (see :mod:`radio_kernels.cluster`)."""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import List, Tuple

#: Bits per digitiser sample (MeerKAT's and CHORD's 10-bit digitisers).
BITS = 10
#: Polarisations per dish.
POLS = 2
#: Default digitiser sample rate (Hz): 3.2 GS/s, a band of 1.6 GHz.
ADC_SAMPLE_RATE = 3.2e9
#: Default sky frequency of channel 0 (Hz): the digitised band is the sky from here up
#: (a receiver that mixes the band down without inverting it), CHORD's 300 MHz lower edge.
BAND_START = 300e6


@dataclasses.dataclass(frozen=True)
class Layout:
    """What every engine of one correlator agrees on. :meth:`check` raises ``ValueError``
    naming the first inconsistency."""

    dishes: int = 8
    fengines: int = 1
    xengines: int = 2
    channels: int = 64
    taps: int = 16
    packet_samples: int = 4096
    spectra_per_heap: int = 256
    pfb_heaps_per_chunk: int = 1
    heaps_per_chunk: int = 1
    heaps_per_integration: int = 8
    max_delay: int = 1024
    adc_sample_rate: float = ADC_SAMPLE_RATE
    band_start: float = BAND_START
    sync_time: float = 0.0
    address: str = "127.0.0.1"
    fengine_hosts: Tuple[str, ...] = ()
    xengine_hosts: Tuple[str, ...] = ()
    port: int = 7148
    packet_size: int = 8872

    def check(self) -> "Layout":
        def need(ok: bool, what: str) -> None:
            if not ok:
                raise ValueError(what)

        for name in ("dishes", "fengines", "xengines", "channels", "taps", "packet_samples",
                     "spectra_per_heap", "pfb_heaps_per_chunk", "heaps_per_chunk",
                     "heaps_per_integration", "packet_size"):
            need(int(getattr(self, name)) > 0, f"{name} must be above 0, got {getattr(self, name)}")
        need(self.dishes % self.fengines == 0,
             f"dishes ({self.dishes}) must divide evenly over the F-engines ({self.fengines})")
        need(self.channels % self.xengines == 0,
             f"channels ({self.channels}) must divide evenly over the X-engines ({self.xengines})")
        need(self.heaps_per_integration % self.heaps_per_chunk == 0,
             f"heaps_per_integration ({self.heaps_per_integration}) must be a multiple of "
             f"heaps_per_chunk ({self.heaps_per_chunk})")
        need(self.packet_samples * BITS % 8 == 0, "packet_samples x 10 bits must be whole bytes")
        need(self.chunk_samples % self.packet_samples == 0 and self.chunk_samples % 32 == 0,
             f"a PFB chunk ({self.chunk_samples} samples: 2 x channels x spectra_per_heap x "
             f"pfb_heaps_per_chunk) must hold whole packets of {self.packet_samples} samples")
        need(self.max_delay >= 0, f"max_delay must be at least 0, got {self.max_delay}")
        need(self.adc_sample_rate > 0 and self.adc_sample_rate < float("inf"),
             f"adc_sample_rate must be finite and above 0, got {self.adc_sample_rate}")
        need(self.band_start > 0 and self.band_start < float("inf"),
             f"band_start must be finite and above 0, got {self.band_start}")
        need(0 < self.port and self.port + self.dishes + self.xengines < 65536,
             f"ports {self.port} .. {self.port + self.dishes + self.xengines} must be valid UDP ports")
        need(self.packet_size >= 1024, f"packet_size must be at least 1024, got {self.packet_size}")
        need(len(self.fengine_hosts) in (0, self.fengines),
             f"fengine_hosts names {len(self.fengine_hosts)} addresses for {self.fengines} F-engines")
        need(len(self.xengine_hosts) in (0, self.xengines),
             f"xengine_hosts names {len(self.xengine_hosts)} addresses for {self.xengines} X-engines")
        for host in (self.address,) + tuple(self.fengine_hosts) + tuple(self.xengine_hosts):
            parts = host.split(".")
            need(len(parts) == 4 and all(p.isdigit() and int(p) < 256 for p in parts),
                 f"{host!r} is not an IPv4 address")
        return self

    # --- derived sizes ---
    @property
    def dishes_per_fengine(self) -> int:
        return self.dishes // self.fengines

    def fengine_dishes(self, f: int) -> range:
        """The dishes F-engine ``f`` owns."""
        per = self.dishes_per_fengine
        return range(f * per, (f + 1) * per)

    @property
    def channels_per_xengine(self) -> int:
        return self.channels // self.xengines

    def xengine_channels(self, x: int) -> range:
        """The channels X-engine ``x`` correlates."""
        per = self.channels_per_xengine
        return range(x * per, (x + 1) * per)

    @property
    def samples_per_spectrum(self) -> int:
        """ADC samples per spectrum, ``2 n`` (critically sampled)."""
        return 2 * self.channels

    @property
    def samples_per_heap(self) -> int:
        """ADC samples per F-engine output heap (its timestamp step)."""
        return self.samples_per_spectrum * self.spectra_per_heap

    @property
    def packet_bytes(self) -> int:
        return self.packet_samples * BITS // 8

    @property
    def chunk_samples(self) -> int:
        """Digitiser samples per PFB input chunk: exactly the PFB output chunk's spectra, so
        that input and output chunks stay aligned (:meth:`check` asks for whole packets)."""
        return self.samples_per_heap * self.pfb_heaps_per_chunk

    @property
    def chunk_packets(self) -> int:
        return self.chunk_samples // self.packet_samples

    @property
    def times_per_chunk(self) -> int:
        """Spectra per correlator chunk of an X-engine."""
        return self.spectra_per_heap * self.heaps_per_chunk

    @property
    def chunks_per_integration(self) -> int:
        return self.heaps_per_integration // self.heaps_per_chunk

    @property
    def integration_seconds(self) -> float:
        return self.heaps_per_integration * self.samples_per_heap / self.adc_sample_rate

    def channel_frequency(self, k: int) -> float:
        """Sky frequency (Hz) of channel ``k``'s centre: ``band_start + k f_s / (2 n)``."""
        return self.band_start + k * self.adc_sample_rate / (2 * self.channels)

    # --- network ---
    def dish_endpoint(self, d: int) -> Tuple[str, int]:
        """Where dish ``d``'s digitiser stream goes: its F-engine's host (``fengine_hosts``,
        else ``address``), port ``port + d``."""
        f = d // self.dishes_per_fengine
        return (self.fengine_hosts[f] if self.fengine_hosts else self.address, self.port + d)

    def xengine_endpoint(self, x: int) -> Tuple[str, int]:
        """Where X-engine ``x``'s channel range goes: its host (``xengine_hosts``, else
        ``address``), port ``port + dishes + x`` (on a real array, one multicast group per
        X-engine: docs/deployment.md)."""
        return (self.xengine_hosts[x] if self.xengine_hosts else self.address, self.port + self.dishes + x)

    # --- command line: one option per field, ``--field-name`` ---
    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """The layout's options, the same for every process."""
        g = parser.add_argument_group("correlator layout (the same for every engine)")
        d = Layout()
        for f in dataclasses.fields(Layout):
            default = getattr(d, f.name)
            if f.name == "sync_time":
                kind, default = float, None
            elif isinstance(default, tuple):
                kind, default = str, ""
            else:
                kind = type(default)
            g.add_argument("--" + f.name.replace("_", "-"), type=kind, default=default, help=HELP[f.name])

    @staticmethod
    def from_arguments(args: argparse.Namespace) -> "Layout":
        values = {f.name: getattr(args, f.name) for f in dataclasses.fields(Layout)}
        if values["sync_time"] is None:
            values["sync_time"] = time.time()
        for name in ("fengine_hosts", "xengine_hosts"):
            values[name] = tuple(h.strip() for h in values[name].split(",") if h.strip())
        return Layout(**values).check()

    def arguments(self) -> List[str]:
        """The command-line options that give this layout (for the launcher)."""
        out: List[str] = []
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out += ["--" + f.name.replace("_", "-"), ",".join(v) if isinstance(v, tuple) else repr(v) if isinstance(v, float) else str(v)]
        return out


#: Help text of each layout option.
HELP = {
    "dishes": "dual-polarisation dishes",
    "fengines": "F-engines (dishes split evenly)",
    "xengines": "X-engines (channels split evenly)",
    "channels": "PFB channels (power of two, >= 64)",
    "taps": "PFB taps",
    "packet_samples": "digitiser samples per heap and polarisation",
    "spectra_per_heap": "spectra per F-engine output heap",
    "pfb_heaps_per_chunk": "output heaps per PFB chunk",
    "heaps_per_chunk": "heap times per correlator chunk",
    "heaps_per_integration": "heap times per integration (a multiple of --heaps-per-chunk)",
    "max_delay": "largest delay (samples)",
    "adc_sample_rate": "digitiser samples per second and polarisation (Hz)",
    "band_start": "sky frequency of channel 0 (Hz)",
    "sync_time": "UNIX time of ADC sample 0 (default: now)",
    "address": "IPv4 address of every engine (one host)",
    "fengine_hosts": "IPv4 address of each F-engine, comma-separated (default: --address)",
    "xengine_hosts": "IPv4 address of each X-engine, comma-separated (default: --address)",
    "port": "first UDP port: dish d on port+d, X-engine x on port+dishes+x",
    "packet_size": "largest SPEAD packet (bytes)",
}
