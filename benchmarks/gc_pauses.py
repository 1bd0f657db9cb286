"""Full garbage collections inside timed training steps: the measured comparison's short runs with and without
:func:`hgpart.runtime.heap.quiet_heap`.

Run (from the repository root)::

    python benchmarks/gc_pauses.py [--model minires] [--batch-size 32] [--reps 12] [--steps 30]

Why: the asynchronous data-parallel baselines of ``hgpart compare-run`` had "slow passes" (a run at a third of its
usual speed, one client thread busy, the workers idle), and a native profile of one showed that thread in Python's
cyclic collector, deleting the graphs that earlier tracing left behind. This measures it the way the simulator
validation runs it: each configuration in its own process on 2 local pinned workers; first the other strategies
of a comparison once (``--pre``, 30 steps each; they leave their tracing's garbage), then async-dp-1ps and
async-dp-dps ``--reps`` times each, ``--steps`` steps (one ``run_measured`` call each, as the validation's child).

* ``quiet``: as the runtime is now (the timed stretches inside ``quiet_heap``: one collection before them, the
  survivors frozen);
* ``plain``: ``quiet_heap`` replaced by a no-op, in the comparison's timed runs and in ``auto``'s timing (as
  before).

For every run: images/s, and the full (generation 2) collections that Python started by itself inside its timed
stretches (not the one ``quiet_heap`` asks for), with their seconds and thread. Per configuration: the median and
the slowest run, how many runs fell under 0.6 of the median, and the automatic full collections inside timed
stretches. Prints the load average at the start and end of each configuration.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

PRE = "single,layerwise-async,layerwise-sync,coarse-async,coarse-sync,fine-async,fine-sync,sync-dp"
POST = ("async-dp-1ps", "async-dp-dps")


def loadavg() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


class _Collections:
    """Every full collection: when it ended, its seconds, its thread, and whether ``gc.collect`` asked for it."""

    def __init__(self) -> None:
        self.log: list[tuple[float, float, str, bool]] = []
        self._start: dict[int, float] = {}
        self._asked = threading.local()
        real = gc.collect

        def collect(*a: Any) -> int:
            self._asked.on = True
            try:
                return real(*a)
            finally:
                self._asked.on = False

        gc.collect = collect  # type: ignore[assignment]
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._start[threading.get_ident()] = now
            return
        t0 = self._start.pop(threading.get_ident(), None)
        if t0 is not None and info["generation"] == 2:
            self.log.append((now, now - t0, threading.current_thread().name, bool(getattr(self._asked, "on", False))))


def child(args: argparse.Namespace) -> None:
    from hgpart import quiet

    quiet.quiet_python()
    import hgpart.runtime.pipechoice as pipechoice
    from hgpart.runtime.devices import open_devices

    import hgpart.compare.measured as measured

    if args.config == "plain":
        measured.quiet_heap = contextlib.nullcontext  # type: ignore[assignment]
        pipechoice.quiet_heap = contextlib.nullcontext  # type: ignore[assignment]
    cols = _Collections()
    windows: list[tuple[float, float]] = []
    real_timed = measured._timed

    def timed(*a: Any) -> None:
        t0 = time.perf_counter()
        try:
            real_timed(*a)
        finally:
            windows.append((t0, time.perf_counter()))

    measured._timed = timed  # type: ignore[assignment]
    ds = open_devices("local", 2, inter_op=4)
    kw: dict[str, Any] = dict(device_set=ds, input_shape=(args.input, args.input, 3), batch_sizes=[args.batch_size],
                              eval_n=64, evals_per_epoch=1, devices_label="local", progress=False, trace_dir=None,
                              placement_dir=Path(tempfile.mkdtemp()))
    if args.pre:
        measured.run_measured(args.model, methods=args.pre.split(","), steps=30, **kw)
    runs = []
    for rep in range(args.reps):
        for m in POST:
            n0 = len(windows)
            r = measured.run_measured(args.model, methods=[m], steps=args.steps, **kw).runs[0]
            w0, w1 = windows[n0]
            inside = [(round(d, 3), th) for end, d, th, asked in cols.log if w0 <= end <= w1 and not asked]
            runs.append({"rep": rep, "method": m, "images_per_s": r.images_per_s, "status": r.status,
                         "auto_full_collections": inside})
    print(json.dumps(runs))


def summary(config: str, runs: list[dict[str, Any]]) -> str:
    ips = [r["images_per_s"] or 0.0 for r in runs]
    med = statistics.median(ips)
    slow = [r for r in runs if (r["images_per_s"] or 0.0) < 0.6 * med]
    cols = [c for r in runs for c in r["auto_full_collections"]]
    in_slow = sum(1 for r in slow if r["auto_full_collections"])
    return (f"{config}: {len(runs)} runs, median {med:.0f} images/s, slowest {min(ips):.0f}; "
            f"{len(slow)} under 0.6x the median ({in_slow} of them with an automatic full collection inside); "
            f"{len(cols)} automatic full collections inside timed stretches, "
            f"{sum(d for d, _ in cols):.2f} s in all"
            + (f", longest {max(d for d, _ in cols):.2f} s" if cols else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="minires")
    ap.add_argument("--input", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--reps", type=int, default=12)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--pre", default=PRE, help="strategies run once first ('' for none)")
    ap.add_argument("--configs", default="quiet,plain")
    ap.add_argument("--config", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.config:
        child(args)
        return
    print("$ python benchmarks/gc_pauses.py " + " ".join(sys.argv[1:]), flush=True)
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), flush=True)
    lines = []
    for config in args.configs.split(","):
        start = loadavg()
        cmd = [sys.executable, __file__, "--config", config, "--model", args.model, "--input", str(args.input),
               "--batch-size", str(args.batch_size), "--reps", str(args.reps), "--steps", str(args.steps),
               "--pre", args.pre]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        runs = json.loads(out.strip().splitlines()[-1])
        for r in runs:
            print(f"{config} rep {r['rep']} {r['method']}: {r['images_per_s']:.0f} images/s, automatic full "
                  f"collections inside: {r['auto_full_collections']}", flush=True)
        lines.append(summary(config, runs) + f"; load {start} at start, {loadavg()} at end")
        print(lines[-1], flush=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
