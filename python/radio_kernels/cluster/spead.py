"""SPEAD items and heaps of the correlator's streams (spead2, flavour SPEAD-64-48).

Item IDs are katgpucbf's, so its tools read these streams:

==========  =================  ==========================================================
ID          name               value
==========  =================  ==========================================================
0x1600      timestamp          ADC sample index of the heap's first sample (immediate)
0x3101      digitiser_id       ``2 dish + pol`` (immediate)
0x3102      digitiser_status   0 (immediate)
0x3300      raw_data           ``packet_samples`` 10-bit samples, packed MSB first
0x4101      feng_id            the dish (immediate)
0x4103      frequency          the heap's first channel (immediate)
0x4300      feng_raw           int8 ``[channel][spectrum][pol][re, im]``
==========  =================  ==========================================================

Heap counters are unique within each receiving stream however many senders share it:
``cnt = (timestamp / step) * senders + sender + 1`` (``step`` the stream's timestamp step,
``sender`` the digitiser id or the dish).
"""

from __future__ import annotations

import numpy as np
import spead2
import spead2.send

FLAVOUR = spead2.Flavour(4, 64, 48, 0)
IMMEDIATE = [("u", 48)]

TIMESTAMP_ID = 0x1600
DIGITISER_ID_ID = 0x3101
DIGITISER_STATUS_ID = 0x3102
RAW_DATA_ID = 0x3300
FENG_ID_ID = 0x4101
FREQUENCY_ID = 0x4103
FENG_RAW_ID = 0x4300

#: Bytes of SPEAD header and item pointers per packet of these heaps (8-byte header, up to
#: eight 8-byte item pointers, as katgpucbf budgets).
PREAMBLE_SIZE = 72


def heap_cnt(index: int, senders: int, sender: int) -> int:
    """The heap counter of heap ``index`` (timestamp / step) from ``sender``."""
    return index * senders + sender + 1


def digitiser_items(packet_bytes: int) -> spead2.send.ItemGroup:
    ig = spead2.send.ItemGroup(flavour=FLAVOUR)
    ig.add_item(TIMESTAMP_ID, "timestamp", "ADC sample index of the first sample", (), format=IMMEDIATE)
    ig.add_item(DIGITISER_ID_ID, "digitiser_id", "2 dish + pol", (), format=IMMEDIATE)
    ig.add_item(DIGITISER_STATUS_ID, "digitiser_status", "0: no problems", (), format=IMMEDIATE)
    ig.add_item(RAW_DATA_ID, "raw_data", "10-bit samples, packed MSB first", (packet_bytes,), dtype=np.uint8)
    ig["digitiser_status"].value = 0
    return ig


def feng_items(channels: int, spectra: int) -> spead2.send.ItemGroup:
    ig = spead2.send.ItemGroup(flavour=FLAVOUR)
    ig.add_item(TIMESTAMP_ID, "timestamp", "ADC sample index of the first spectrum", (), format=IMMEDIATE)
    ig.add_item(FENG_ID_ID, "feng_id", "the dish", (), format=IMMEDIATE)
    ig.add_item(FREQUENCY_ID, "frequency", "the heap's first channel", (), format=IMMEDIATE)
    ig.add_item(FENG_RAW_ID, "feng_raw", "channelised voltages [channel][spectrum][pol][re, im]",
                (channels, spectra, 2, 2), dtype=np.int8)
    return ig


def heap_values(heap: spead2.recv.Heap) -> dict:
    """A received heap's items by ID: immediates as ints, others as uint8 numpy views."""
    out = {}
    for item in heap.get_items():
        if item.is_immediate:
            out[item.id] = item.immediate_value
        else:
            out[item.id] = np.frombuffer(item, dtype=np.uint8)
    return out


def send_config(layout, gbit_s: float, heap_bytes: int, max_heaps: int) -> spead2.send.StreamConfig:
    """Send stream settings for heaps of ``heap_bytes`` payload: ``gbit_s`` of payload (0: as
    fast as possible), spead2's rate being on the packets, so each packet's preamble is added."""
    per_packet = min(heap_bytes, layout.packet_size - PREAMBLE_SIZE)
    rate = gbit_s * 1e9 / 8 * (1 + PREAMBLE_SIZE / per_packet) if gbit_s > 0 else 0.0
    return spead2.send.StreamConfig(max_packet_size=layout.packet_size, rate=rate, max_heaps=max_heaps)


def recv_stream(threads: int, max_heaps: int, ring_heaps: int, heap_bytes: int):
    """A receive stream that counts stop heaps itself (several senders share it), its heaps'
    payloads (``heap_bytes`` each) from a memory pool of reused buffers."""
    pool = spead2.MemoryPool(heap_bytes, heap_bytes + 4096, ring_heaps + max_heaps, min(ring_heaps, 64))
    config = spead2.recv.StreamConfig(max_heaps=max_heaps, stop_on_stop_item=False, memory_allocator=pool)
    ring = spead2.recv.RingStreamConfig(heaps=ring_heaps, contiguous_only=False)
    return spead2.recv.Stream(spead2.ThreadPool(threads), config, ring)
