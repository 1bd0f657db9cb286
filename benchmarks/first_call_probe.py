"""Why is the first timed call of a fresh K = 2 process slower? Per-call times of a compiled minivgg run.

Run::

    python benchmarks/first_call_probe.py --placements benchmarks/results/runtime_throughput_vgg16/epyc_minivgg_feed

Why: in ``runtime_throughput.py`` the first of a K = 2 child's repeats was the slower one in every round
(``runtime_throughput_vgg16/epyc_minivgg_feed/``), which drags a short run's E down. This probe trains the layer-wise
placement (``<model>_layerwise_k2.json`` in ``--placements``) as ``hgpart train`` does (``pipeline="compiled"``,
64 steps a call) for ``--steps`` steps, twice in one process, and prints every call's wall time (the calls of one
run, from ``FitRow`` start and end times). ``--pause S`` sleeps S seconds after the compiled pipeline's untimed
warm-up (``MultiStep.warm``, patched here), and prints the CPU the client and each worker used in that pause and
the client's busiest threads: if the first call is slow because of work that follows the warm-up, the pause takes
it off the first call. Each variant runs in its own process, alternately, ``--rounds`` times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _cpu(pid: int | str, tid: str | None = None) -> float:
    path = f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat"
    f = Path(path).read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def _threads(pid: int) -> dict[str, float]:
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out[tid] = _cpu(pid, tid)
        except OSError:
            continue
    return out


def child(args: argparse.Namespace) -> None:
    import numpy as np
    from hgpart.runtime import multistep
    from hgpart.runtime.cluster import open_local, worker_info
    from hgpart.runtime.train import train

    warm = multistep.MultiStep.warm
    pids: list[int] = []

    def warm_then_pause(self: Any, runs: list[int]) -> None:
        warm(self, runs)
        if args.pause <= 0:
            return
        before = [_cpu(p) for p in pids]
        threads = _threads(pids[0])
        time.sleep(args.pause)
        used = [round(_cpu(p) - b, 2) for p, b in zip(pids, before, strict=True)]
        after = _threads(pids[0])
        top = sorted((round(after[t] - threads.get(t, 0.0), 2) for t in after), reverse=True)[:3]
        print(f"  pause of {args.pause:.0f} s after the warm-up: CPU s used by client, workers {used}; "
              f"client's busiest threads {top}", flush=True)

    multistep.MultiStep.warm = warm_then_pause  # type: ignore[method-assign]
    placement = Path(args.placements) / f"{args.model}_layerwise_k2.json"
    with open_local(2, inter_op=4, start_timeout=180) as ds, tempfile.TemporaryDirectory() as tmp:
        pids[:] = [os.getpid()] + [w.pid for w in worker_info(ds)]
        data = Path(tmp) / "data.npz"
        rng = np.random.default_rng(0)
        np.savez(data, x=rng.normal(size=(32 * args.steps, 32, 32, 3)).astype(np.float32),
                 y=rng.integers(0, 10, 32 * args.steps).astype(np.int32))
        for rep in range(2):
            res = train(str(placement), device_set=ds, batch_size=32, steps=args.steps, mode="async",
                        data=str(data), seed=0, pipeline="compiled")
            calls = sorted({(round(r.start_s, 6), round(r.end_s, 6)) for r in res.rows})
            ms = [round((b - a) * 1e3) for a, b in calls]
            print("RESULT " + json.dumps({"pause": args.pause, "run": rep, "ips": res.images_per_s,
                                          "call_ms": ms}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--placements", required=True)
    ap.add_argument("--model", default="minivgg")
    ap.add_argument("--steps", type=int, default=640)
    ap.add_argument("--pause", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--pauses", default="0,3", help="seconds after the warm-up, one process each")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    print(f"$ python {' '.join(sys.argv)}   # {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, load "
          f"average at start {[round(v, 2) for v in os.getloadavg()]}", flush=True)
    for r in range(args.rounds):
        for pause in [float(p) for p in args.pauses.split(",")]:
            cmd = [sys.executable, __file__, "--child", "--placements", args.placements, "--model", args.model,
                   "--steps", str(args.steps), "--pause", str(pause)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                if line.startswith("RESULT "):
                    d = json.loads(line[7:])
                    print(f"round {r} pause {pause:.0f} s, run {d['run']}: {d['ips']:.0f} images/s; call ms "
                          + " ".join(str(m) for m in d["call_ms"]), flush=True)
                elif line.startswith("  pause"):
                    print(f"round {r}{line}", flush=True)
    print(f"load average at end {[round(v, 2) for v in os.getloadavg()]}", flush=True)


if __name__ == "__main__":
    main()
