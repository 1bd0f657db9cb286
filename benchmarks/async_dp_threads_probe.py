"""Which of the client's threads burn CPU during asynchronous data parallelism, after compare-run's other
strategies ran in the same process (where its slow passes were seen, issue 16).

Run (from the repository root)::

    python benchmarks/async_dp_threads_probe.py PRE POST B REPS

``PRE``: comma-separated compare-run strategies run first, once (``-`` for none); ``POST``: strategies then run
``REPS`` times each, one ``run_measured`` call per strategy and repetition, on minivgg 32 at batch ``B``, 30 steps,
2 local workers (as ``benchmarks/simulator_validation.py``'s child). For each POST run: images/s, the client's CPU
cores over the timed steps (``cpu_cores``), and the CPU cores each client thread used over the whole call
(compile, warm-up, training, evaluation), by name (``py:`` a Python thread, else the native thread's name),
threads under 0.5 % of the wall time left out. A background thread samples ``/proc/self/task`` every 0.2 s, so
threads that ended are counted to their last sample.
"""
from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

#: native thread id -> "py:<name>" of the Python threads seen
PYNAMES: dict[int, str] = {}
#: native thread id -> (name, CPU seconds) at its last sample
SEEN: dict[int, tuple[str, float]] = {}


def threads() -> dict[int, tuple[str, float]]:
    """Every thread of this process: its name and its CPU seconds so far (user + system)."""
    out = {}
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/stat") as fh:
                stat = fh.read()
            with open(f"/proc/self/task/{t}/comm") as fh:
                name = fh.read().strip()
        except OSError:
            continue
        name = PYNAMES.get(int(t), name)
        f = stat[stat.rfind(")") + 2:].split()
        out[int(t)] = (name, (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK"))
    return out


def _sample() -> None:
    while True:
        for th in threading.enumerate():
            if th.native_id is not None:
                PYNAMES[th.native_id] = "py:" + th.name[:24]
        SEEN.update(threads())
        time.sleep(0.2)


def snap() -> dict[int, tuple[str, float]]:
    """The threads' CPU seconds now, with the last sample of those that ended."""
    d = dict(SEEN)
    d.update(threads())
    return d


def delta(a: dict[int, tuple[str, float]], b: dict[int, tuple[str, float]], wall: float) -> tuple[int, dict]:
    """Threads now, and by name: how many threads used over 0.5 % of ``wall`` between the snapshots, and their
    CPU seconds over ``wall``."""
    byname: dict[str, list[Any]] = {}
    for c, n in sorted(((c - a.get(t, (n, 0.0))[1], n) for t, (n, c) in b.items()), reverse=True):
        if c > 0.005 * wall:
            entry = byname.setdefault(n, [0, 0.0])
            entry[0] += 1
            entry[1] += c
    return len(b), {n: (k, round(c / wall, 3)) for n, (k, c) in sorted(byname.items(), key=lambda kv: -kv[1][1])}


def main() -> None:
    pre = sys.argv[1].split(",") if sys.argv[1] != "-" else []
    post = sys.argv[2].split(",")
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    reps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    threading.Thread(target=_sample, daemon=True, name="sampler").start()
    from hgpart import quiet

    quiet.quiet_python()
    from hgpart.runtime.devices import open_devices

    from hgpart.compare.measured import run_measured

    ds = open_devices("local", 2, inter_op=4)
    kw = dict(device_set=ds, input_shape=(32, 32, 3), batch_sizes=[batch], steps=30, eval_n=64, evals_per_epoch=1,
              devices_label="local", progress=False, trace_dir=None, placement_dir=Path(tempfile.mkdtemp()))
    if pre:
        cmp = run_measured("minivgg", methods=pre, **kw)
        print("pre", [(r.method, round(r.images_per_s or 0), round(r.cpu_cores or 0, 2)) for r in cmp.runs],
              flush=True)
    for rep in range(reps):
        for m in post:
            a, w = snap(), time.time()
            cmp = run_measured("minivgg", methods=[m], **kw)
            w = time.time() - w
            r = cmp.runs[0]
            print("post", rep, m, round(r.images_per_s or 0), round(r.cpu_cores or 0, 2), "threads",
                  delta(a, snap(), w), flush=True)


if __name__ == "__main__":
    main()
