"""X-engine scaling over loopback UDP (BENCHMARKS.md, "Cluster"): 1, 2 and 4 X-engines, each
on its own GPU (``CUDA_VISIBLE_DEVICES``) and fed by its own F-engine simulator
(:mod:`radio_kernels.cluster.fsim`), every X-engine correlating the same shape (``--dishes``,
``--per-xengine`` channels). Three measurements per X-engine count:

- ``ceiling``: the X-engine in ``--discard`` mode (spead2 receive and count only) fed without a
  rate limit: the loopback network stack plus spead2;
- ``capacity``: the real X-engine (corner turn, GPU correlator) fed without a rate limit; what
  it receives while the senders outrun it;
- ``sustained``: fed at ``--fraction`` of the one-X-engine capacity for ``--seconds``: heaps
  lost must be 0.

Prints one JSON line per run and a summary table; medians are over the engines of a run.

    python benches/cluster_scaling.py --counts 1,2,4 --seconds 30
"""

import argparse
import json
import os
import signal
import subprocess
import sys


def start(args, env=None):
    return subprocess.Popen([sys.executable, "-m"] + args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=env, start_new_session=True)


def report(proc, timeout):
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
    for line in reversed(out.splitlines()):
        if line.startswith('{"report"'):
            return json.loads(line)["report"]
    return None


def run(count, mode, seconds, rate, a):
    layout = ["--dishes", str(a.dishes), "--channels", str(a.per_xengine * count), "--xengines", str(count),
              "--heaps-per-chunk", str(a.heaps_per_chunk), "--heaps-per-integration", str(a.heaps_per_integration),
              "--packet-size", str(a.packet_size), "--port", str(a.port), "--sync-time", "1.8e9"]
    xs = []
    for x in range(count):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(x % a.gpus))
        extra = ["--discard"] if mode == "ceiling" else ["--turn-threads", str(a.turn_threads)] + (["--cpu"] if a.cpu else [])
        p = start(["radio_kernels.cluster.xengine", "--index", str(x), "--quiet", "--buffer", "256"] + layout + extra, env)
        assert p.stdout.readline().startswith('{"ready"')
        xs.append(p)
    fs = [start(["radio_kernels.cluster.fsim", "--xengine", str(x), "--seconds", str(seconds), "--rate", str(rate),
                 "--quiet"] + layout) for x in range(count)]
    senders = [report(f, seconds + 60) for f in fs]
    receivers = [report(p, 15) for p in xs]
    return {"count": count, "mode": mode, "rate_gbit_s": rate, "senders": senders, "receivers": receivers}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--counts", default="1,2,4")
    p.add_argument("--dishes", type=int, default=64)
    p.add_argument("--per-xengine", type=int, default=1024, help="channels per X-engine")
    p.add_argument("--heaps-per-chunk", type=int, default=4)
    p.add_argument("--heaps-per-integration", type=int, default=16)
    p.add_argument("--packet-size", type=int, default=8872)
    p.add_argument("--turn-threads", type=int, default=4)
    p.add_argument("--gpus", type=int, default=4)
    p.add_argument("--port", type=int, default=19000)
    p.add_argument("--probe-seconds", type=float, default=10.0)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--fraction", type=float, default=0.85)
    p.add_argument("--cpu", action="store_true", help="X-engines on the CPU reference (a smoke test without a GPU)")
    a = p.parse_args()
    rows = []
    counts = [int(c) for c in a.counts.split(",")]
    for c in counts:
        for mode in ("ceiling", "capacity"):
            r = run(c, mode, a.probe_seconds, 0.0, a)
            print(json.dumps(r), flush=True)
            rows.append(r)
    one = [r for r in rows if r["count"] == counts[0] and r["mode"] == "capacity"][0]
    base = min(x["gbit_s_in"] for x in one["receivers"] if x) / counts[0]
    rate = round(a.fraction * base, 3)
    for c in counts:
        r = run(c, "sustained", a.seconds, rate, a)
        print(json.dumps(r), flush=True)
        rows.append(r)
    print(f"{'X':>2} {'mode':>9} {'Gb/s per X (median)':>20} {'aggregate':>10} {'lost':>6} {'late':>5}")
    for r in rows:
        rec = [x for x in r["receivers"] if x]
        per = sorted(x["gbit_s_in"] for x in rec)
        med = per[len(per) // 2] if per else 0.0
        print(f"{r['count']:>2} {r['mode']:>9} {med:>20.3f} {sum(per):>10.3f} "
              f"{sum(x['lost'] for x in rec):>6} {sum(x['late'] for x in rec):>5}"
              + ("" if len(rec) == r["count"] else "  (missing reports)"))


if __name__ == "__main__":
    main()
