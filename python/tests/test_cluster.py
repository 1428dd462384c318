"""The multi-process correlator on loopback UDP with the CPU references: one digitiser source,
one F-engine of 8 dishes, two X-engines of 32 channels. The X-engines' UVH5 files, joined,
equal the single-process correlation of the same samples bit for bit; heaps dropped at the
senders flag exactly the visibilities they touch; every process exits and none is left.
Each run is bounded: 819200 samples per polarisation (16 MB of digitiser data) at 0.1 Gbit/s,
and a timeout."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

spead2 = pytest.importorskip("spead2", reason="the cluster needs spead2 (pip install radio-kernels[cluster])")
h5py = pytest.importorskip("h5py")

import radio_kernels as rk  # noqa: E402

if not rk.HAS_UVH5:
    pytest.skip("this build has no UVH5 writer", allow_module_level=True)

from radio_kernels.cluster import reference, sky  # noqa: E402
from radio_kernels.cluster.layout import Layout  # noqa: E402
from radio_kernels.cluster.xengine import baseline_pairs  # noqa: E402

SAMPLES = 819200  # 25 PFB chunks of 32768 samples: 3 integrations of 8 heaps, and the tail
INTEGRATIONS = 3
POLS = [(0, 0), (1, 1), (1, 0), (0, 1)]  # UVH5 XX, YY, XY, YX


def run_cluster(tmp, port, *extra, cpu="all"):
    out = tmp / "vis"
    cpu_flag = ["--cpu", cpu] if cpu else []
    cmd = [sys.executable, "-m", "radio_kernels.cluster.launcher", *cpu_flag, "--quiet",
           "--dishes", "8", "--fengines", "1", "--xengines", "2", "--channels", "64",
           "--samples", str(SAMPLES), "--rate", "0.1", "--sync-time", "1.8e9", "--port", str(port),
           "--out", str(out), "--logs", str(tmp / "logs"), "--grace", "60", "--timeout", "240", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    # No stray process: nothing still runs with this run's output folder on its command line.
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    assert str(out).encode() not in f.read(), f"process {pid} is still running"
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                pass
    return out, summary


def read(out, integration):
    """(vis int64 [channel][b][pi][pj][2], flags [channel][b], nsamples [channel][b]) over both
    X-engines' files."""
    vis, flags, ns = [], [], []
    for x in range(2):
        with h5py.File(out / f"x{x:02d}_{integration:06d}.uvh5", "r") as f:
            v, fl, n = f["Data/visdata"][()], f["Data/flags"][()], f["Data/nsamples"][()]
        got = np.zeros((v.shape[1], v.shape[0], 2, 2, 2), np.int64)
        for k, (pi, pj) in enumerate(POLS):
            got[:, :, pi, pj, 0] = v[:, :, k].real.T
            got[:, :, pi, pj, 1] = v[:, :, k].imag.T
            assert (fl[:, :, k] == fl[:, :, 0]).all() and (n[:, :, k] == n[:, :, 0]).all()
        vis.append(got)
        flags.append(fl[:, :, 0].T)
        ns.append(n[:, :, 0].T)
    return np.concatenate(vis), np.concatenate(flags), np.concatenate(ns)


@pytest.fixture(scope="module")
def expected():
    layout = Layout(sync_time=1.8e9).check()
    x = sky.observe(8, 1 << 20, layout.adc_sample_rate, layout.band_start, 3, 1)[:, :, :SAMPLES]
    spectra = [reference.channelize(layout, x[d])[0] for d in range(8)]
    return layout, x, reference.correlate(layout, spectra, INTEGRATIONS)


def test_joined_uvh5_equals_the_single_process_correlation(tmp_path, expected):
    _, _, want = expected
    out, summary = run_cluster(tmp_path, 17300)
    assert summary["lost"] == 0 and summary["late"] == 0 and summary["integrations"] == 2 * INTEGRATIONS
    assert sorted(os.listdir(out)) == [f"x{x:02d}_{i:06d}.uvh5" for x in range(2) for i in range(INTEGRATIONS)]
    for i in range(INTEGRATIONS):
        vis, flags, ns = read(out, i)
        assert not flags.any() and (ns == 1).all()
        np.testing.assert_array_equal(vis, want[i])
        assert np.abs(want[i]).max() > 1000  # real signal, not zeros


def test_dropped_heaps_flag_exactly_the_visibilities_they_touch(tmp_path, expected):
    layout, x, want = expected
    # The F-engine withholds dish 3's heap 10 to X-engine 1 (integration 1); the source leaves
    # out packet 100 of dish 6, polarisation 0, whose lost spectra the F-engine must withhold
    # from both X-engines.
    # The X-engines listen on their own loopback addresses, as on hosts of their own.
    out, summary = run_cluster(tmp_path, 17400, "--drop-feng", "3:10:1", "--drop-digitiser", "6:0:100",
                               "--xengine-hosts", "127.0.0.2,127.0.0.3", "--fengine-hosts", "127.0.0.4")
    present = np.ones((2, SAMPLES // layout.packet_samples), bool)
    present[0, 100] = False
    _, lost6 = reference.channelize(layout, x[6], present)
    assert 0 < lost6.sum() < 3 and not lost6[:8].any() and not lost6[16:].any()
    per = layout.heaps_per_integration
    i_idx, j_idx = baseline_pairs(8)
    for i in range(INTEGRATIONS):
        vis, flags, ns = read(out, i)
        # Heap times present per (X-engine, heap time of the integration, dish).
        present = np.ones((2, per, 8), bool)
        present[:, :, 6] = ~lost6[i * per:(i + 1) * per]
        if i == 1:
            present[1, 10 - per, 3] = False
        both = (present[:, :, i_idx] & present[:, :, j_idx]).mean(axis=1)  # [X-engine][b]
        want_ns = np.repeat(both, 32, axis=0)  # [channel][b]
        np.testing.assert_array_equal(ns, want_ns.astype(np.float32))
        np.testing.assert_array_equal(flags, want_ns < 1)
        keep = want_ns == 1
        assert keep.all() != (i == 1)  # both drops fall in integration 1
        np.testing.assert_array_equal(vis[keep], want[i][keep])
    assert summary["lost"] > 0


def test_gpu_xengines_equal_the_single_process_correlation(tmp_path, expected, gpu):
    """The X-engines on the GPU (streaming correlator), the F-engine on the CPU reference: the
    integer path end to end, so bit for bit."""
    _, _, want = expected
    out, summary = run_cluster(tmp_path, 17500, cpu="feng")
    assert summary["lost"] == 0 and summary["late"] == 0 and summary["integrations"] == 2 * INTEGRATIONS
    for i in range(INTEGRATIONS):
        vis, flags, ns = read(out, i)
        assert not flags.any()
        np.testing.assert_array_equal(vis, want[i])


def test_gpu_cluster_is_within_the_pfb_tolerance(tmp_path, expected, gpu):
    """Every engine on the GPU: the channelizer is float, so the visibilities are compared in
    relative L2 (bound 1e-3) against the CPU-reference correlator, with nothing lost."""
    _, _, want = expected
    out, summary = run_cluster(tmp_path, 17600, cpu=None)
    assert summary["lost"] == 0 and summary["late"] == 0 and summary["integrations"] == 2 * INTEGRATIONS
    for i in range(INTEGRATIONS):
        vis, flags, ns = read(out, i)
        assert not flags.any()
        w = want[i].astype(np.float64)
        err = np.linalg.norm(vis - w) / np.linalg.norm(w)
        assert err < 1e-3, f"integration {i}: relative L2 {err:.2e}"


@pytest.mark.parametrize("module, args, message", [
    ("launcher", ["--cpu", "--samples", "0"], "give --samples or --seconds"),
    ("launcher", ["--cpu", "--samples", "8", "--dishes", "9", "--fengines", "2"], "divide evenly over the F-engines"),
    ("launcher", ["--cpu", "--samples", "8", "--xengine-hosts", "127.0.0.2"], "addresses for 2 X-engines"),
    ("launcher", ["--cpu", "--samples", "8", "--drop-feng", "99:1:0"], "no dish 99"),
    ("xengine", ["--cpu", "--index", "2"], "--index must be 0 ..= 1"),
    ("xengine", ["--cpu", "--index", "0", "--window", "0"], "--window must be at least 1"),
    ("fengine", ["--cpu", "--index", "0", "--heaps-per-integration", "3", "--heaps-per-chunk", "2"],
     "a multiple of heaps_per_chunk"),
    ("fengine", ["--cpu", "--index", "0", "--address", "localhost"], "not an IPv4 address"),
    ("dsim", ["--samples", "8", "--drop", "1:2"], "expected 3 integers"),
])
def test_bad_options_exit_2_with_a_message(module, args, message):
    done = subprocess.run([sys.executable, "-m", f"radio_kernels.cluster.{module}", *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
