"""When do the async data-parallel workers wait? A device trace of each strategy on 2 local workers, cut into the
stretches where each worker computes and the stretches where both are idle at once.

Run (from the repository root)::

    python benchmarks/async_dp_trace.py [--model minires] [--input 32] [--batch-size 32] [--steps 60] [--rounds 2]
        [--placement P --cluster C]

Why: the simulator let an async data-parallel worker's call start while the client was still doing that call's
work on another core. If that were how the runtime runs, one worker would compute while the client prepares the
other's call, and the two workers would seldom be idle together. For each strategy (``single`` for comparison),
in its own process, the measured comparison (:func:`hgpart.compare.measured.run_measured`, as ``hgpart compare-run
--devices local`` runs it) trains ``steps`` steps with the device trace on. From the trace's ops (every op on a
worker, merged where less than 1 ms apart) it prints images/s, each worker's busy share, the median length of a
worker's busy stretch, and the stretches of 1 ms or more in which both workers are idle: their share of the traced
time and their median length. With ``--placement`` (any placement of the model: the data-parallel strategies read
only its layers) and ``--cluster`` (a calibrated cluster file), each strategy is also simulated at the same batch
(``hgpart simulate --trace``) and its simulated trace cut the same way, counting its compute, updates and transfers
as busy (the runtime's trace holds only the workers' ops, not the client's), once with this simulator and once
with its rule before 2026-11-30 pm for the async workers' client work (the call does not wait for it, and two
threads' work may run at once). With ``--call-cpu``, each strategy's step functions
(:func:`hgpart.runtime.dataparallel.make_strategy`, Adam) are also called 30 times each from one thread, in a
process of their own, after two warm calls, and the medians printed: a call's wall time, the client process's CPU
time over it (every thread, as ``hgpart calibrate`` times ``client_cpu``) and the calling thread's own CPU time,
an upper bound on the time the call holds the interpreter. The load average is printed at the start and end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

#: ops closer than this (microseconds) are one busy stretch
MERGE_US = 1000.0


def stretches(events: list[dict], pid: int) -> list[tuple[float, float]]:
    """The busy stretches of one traced device: its ops' intervals merged where less than MERGE_US apart."""
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e["pid"] == pid)
    out: list[list[float]] = []
    for a, b in spans:
        if out and a - out[-1][1] < MERGE_US:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def both_idle(busy: list[list[tuple[float, float]]], start: float, end: float) -> list[float]:
    """Lengths (us) of the stretches of at least MERGE_US in [start, end] where no device is busy, on a 0.1 ms grid
    (an idle run still open at ``end`` is not counted: the trace cut it)."""
    grid = np.arange(start, end, 100.0)
    cover = np.zeros(grid.size + 1, dtype=np.int64)  # +1 where a busy stretch starts, -1 where it ends
    spans = np.array([s for dev in busy for s in dev], dtype=float).reshape(-1, 2)
    np.add.at(cover, np.searchsorted(grid, spans[:, 0]), 1)
    np.add.at(cover, np.searchsorted(grid, spans[:, 1]), -1)
    idle = np.concatenate(([0], (np.cumsum(cover[:-1]) == 0).astype(np.int8), [0]))
    edges = np.flatnonzero(np.diff(idle))  # idle runs: [edges[0], edges[1]), [edges[2], edges[3]), ...
    runs = (edges[1::2] - edges[::2]) * 100.0
    closed = edges[1::2] < grid.size  # drop a run that reaches the end of the grid
    return [float(r) for r in runs[closed] if r >= MERGE_US]


def summary(label: str, ips: float, events: list[dict]) -> str:
    """One line: images/s, each device's busy share and median busy stretch, and the stretches where both idle."""
    pids = sorted({e["pid"] for e in events})
    busy = [stretches(events, p) for p in pids]
    start = min(e["ts"] for e in events)
    end = max(e["ts"] + e["dur"] for e in events)
    idle = both_idle(busy, start, end)
    share = [sum(b - a for a, b in dev) / (end - start) for dev in busy]
    burst = [statistics.median(b - a for a, b in dev) / 1e3 for dev in busy if dev]
    return (f"{label} {ips:8.1f} img/s; traced {(end - start) / 1e3:.0f} ms; busy "
            + ", ".join(f"{s:.0%}" for s in share) + "; median busy stretch "
            + ", ".join(f"{b:.1f}" for b in burst) + " ms; both idle "
            f"{sum(idle) / (end - start):.0%} of the time in {len(idle)} stretches of median "
            f"{statistics.median(idle) / 1e3 if idle else 0.0:.1f} ms")


def simulate_child(placement: str, cluster: str, method: str, batch: int, before: bool, tmp: str) -> None:
    """``hgpart simulate`` of one strategy into ``tmp`` (with ``before``: the client rule before 2026-11-30 pm)."""
    from unittest import mock

    from hgpart.cli import main as cli
    from hgpart.simulate import workloads

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from simulator_ablation import client_rule_before  # the benchmark next to this one: one patch for both

    sys.argv = ["hgpart", "simulate", "-p", placement, "-c", cluster, "-s", method, "-b", str(batch), "--trace",
                tmp, "--json", f"{tmp}/sim.json"]
    with mock.patch.object(workloads.ClientWork, "add", client_rule_before) if before else contextlib.nullcontext():
        try:
            cli()
        except SystemExit as e:
            if e.code:
                raise


def simulated(placement: str, cluster: str, method: str, batch: int, before: bool) -> str:
    """The same strategy simulated at ``batch``, in a process of its own: its summary line from the simulated
    trace."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, __file__, "--simulate", f"{method}:{int(before)}:{tmp}", "--placement",
                        placement, "--cluster", cluster, "--batch-size", str(batch)], check=True,
                       capture_output=True, text=True)
        ips = json.loads(Path(f"{tmp}/sim.json").read_text())["images_per_s"]
        events = [e for e in json.loads(Path(f"{tmp}/devices_trace.simulated.json").read_text())["traceEvents"]
                  if e.get("ph") == "X" and e.get("cat") in ("compute", "update", "send")]
    return summary(f"{'simulated, rule before' if before else 'simulated':>34s}", ips, events)


def call_cpu(model_name: str, size: int, batch: int, methods: list[str]) -> None:
    """Per strategy and worker: medians of a call's wall time, the client's CPU and the calling thread's CPU."""
    from hgpart import quiet

    quiet.quiet_python()
    import time

    import keras
    from hgpart.runtime.dataparallel import make_strategy
    from hgpart.runtime.devices import open_devices
    from hgpart.runtime.step import OptimizerSpec

    from hgpart.models import load_keras_model

    ds = open_devices("local", 2, inter_op=4)
    for method in methods:
        keras.utils.set_random_seed(0)
        model = load_keras_model(model_name, input_shape=(size, size, 3), num_classes=10)
        fns = make_strategy(method, model, ds, OptimizerSpec("adam", 1e-3), batch_size=batch).slot_fns
        rng = np.random.default_rng(0)
        x = rng.random((batch // len(fns), size, size, 3), dtype=np.float32)
        y = rng.integers(0, 10, batch // len(fns)).astype(np.int32)
        for w, f in enumerate(fns):
            f(x, y)
            f(x, y)
            got = []
            for _ in range(30):
                t0, p0, w0 = time.thread_time(), time.process_time(), time.perf_counter()
                f(x, y)
                got.append((time.perf_counter() - w0, time.process_time() - p0, time.thread_time() - t0))
            wall, proc, thread = (statistics.median(g[i] for g in got) * 1e3 for i in range(3))
            print(f"{model_name} {size}x{size} B={batch} {method:13s} worker {w} call: wall {wall:.2f} ms, client "
                  f"process CPU {proc:.2f} ms, calling thread CPU {thread:.2f} ms", flush=True)


def traced_run(model: str, size: int, batch: int, steps: int, method: str) -> tuple[Any, list[dict]]:
    """One strategy of the measured comparison on 2 local workers (as ``hgpart compare-run --devices local``), with
    the device trace on: its :class:`~hgpart.compare.measured.MeasuredRun` and the trace's complete events."""
    from hgpart import quiet

    quiet.quiet_python()
    from hgpart.runtime.devices import open_devices

    ds = open_devices("local", 2, inter_op=4)
    from hgpart.compare.measured import run_measured

    with tempfile.TemporaryDirectory() as tmp:
        cmp = run_measured(model, device_set=ds, input_shape=(size, size, 3), batch_sizes=[batch], steps=steps,
                           methods=[method], eval_n=64, evals_per_epoch=1, devices_label="local", progress=False,
                           trace_dir=tmp)
        run = cmp.runs[0]
        events = [e for e in json.loads(Path(run.trace_path).read_text())["traceEvents"] if e.get("ph") == "X"]
    return run, events


def child(model: str, size: int, batch: int, steps: int, method: str) -> None:
    run, events = traced_run(model, size, batch, steps, method)
    print(summary(f"{model} {size}x{size} B={batch} {method:13s}", run.images_per_s or 0.0, events), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minires")
    ap.add_argument("--input", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--methods", default="single,async-dp-1ps,async-dp-dps")
    ap.add_argument("--placement", default="", help="a placement of the model, to simulate each strategy too")
    ap.add_argument("--cluster", default="", help="the calibrated cluster file to simulate on")
    ap.add_argument("--call-cpu", action="store_true", help="also time the client's CPU per step call")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    ap.add_argument("--simulate", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.simulate:
        method, before, tmp = args.simulate.split(":", 2)
        simulate_child(args.placement, args.cluster, method, args.batch_size, before == "1", tmp)
        return 0
    if args.child == "call-cpu":
        call_cpu(args.model, args.input, args.batch_size, args.methods.split(","))
        return 0
    if args.child:
        child(args.model, args.input, args.batch_size, args.steps, args.child)
        return 0
    print(f"load average at start: {os.getloadavg()}", flush=True)
    for _ in range(args.rounds):
        for method in args.methods.split(","):
            subprocess.run([sys.executable, __file__, "--child", method, "--model", args.model, "--input",
                            str(args.input), "--batch-size", str(args.batch_size), "--steps", str(args.steps)],
                           check=True)
    if args.call_cpu:
        subprocess.run([sys.executable, __file__, "--child", "call-cpu", "--model", args.model, "--input",
                        str(args.input), "--batch-size", str(args.batch_size), "--methods", args.methods], check=True)
    if args.placement and args.cluster:  # deterministic: once per strategy
        for method in args.methods.split(","):
            for before in (False, True) if method.startswith("async-dp") else (False,):
                print(f"{method:13s} " + simulated(args.placement, args.cluster, method, args.batch_size, before),
                      flush=True)
    print(f"load average at end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
