"""A placement's measured device timeline beside the simulated one: where the simulator's step is shorter.

Run (from the repository root)::

    python benchmarks/trace_vs_simulated.py --cluster CLUSTER.json \\
        PLACEMENT.json:async:32 [PLACEMENT.json:sync:16 ...] [--steps-per-call 30] [--inflight 3]

Why: the simulator predicts minires's fine-grain placements 20-44 % too fast
(``benchmarks/results/simulator_validation/2026-11-29-night/``). Each ``placement:mode:batch`` trains in its own
process on 2 local pinned workers with the compiled pipeline, as the validation ran it (``hgpart train --devices
local --pipeline compiled --data synthetic --trace``; async with ``--inflight`` batches in flight, sync with K
micro-batches), and is simulated with the same settings on the calibrated cluster (``hgpart simulate --trace``).
Both traces are read back. Per device this prints:

* **busy**: the union of its op intervals over the traced window (measured: TensorFlow's profiler over about one
  and a half compiled calls; simulated: the middle half of the simulated run, compute, updates and the transfers
  that hold the device);
* **busy ms/step**: busy time per training step, the CPU the device spends on a step;
* **overlap**: the summed op time over the union, the ops running at once on the device's one core (the simulator
  runs one task at a time: 1.00);
* **idle in gaps >= 1 ms**: the share of the wall time the device waits in gaps of at least 1 ms, and how many such
  gaps a step has.

Prints the load average at the start and end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hgpart.runtime.devtrace import union_ns

#: the simulated trace's task kinds that occupy a device
SIM_BUSY = ("compute", "update", "send")
GAP_US = 1000.0
#: the line of ``hgpart train`` with the timed run's rate
RATE = re.compile(r"\d+ steps, \d+ images in [\d.]+ s: ([\d.,]+) img/s")


@dataclass(frozen=True)
class DeviceLine:
    """What one device did in one trace."""

    busy: float  # union of its intervals / window
    busy_ms_per_step: float
    overlap: float  # summed interval length / union
    idle_gaps: float  # share of the window in idle gaps >= GAP_US
    gaps_per_step: float


def intervals(trace: dict, *, simulated: bool) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per device (``pid``): the starts and ends of its ops (measured) or busy tasks (simulated), microseconds."""
    out: dict[int, list[tuple[float, float]]] = {}
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or (simulated and e.get("cat") not in SIM_BUSY):
            continue
        out.setdefault(int(e["pid"]), []).append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
    return {p: (np.array([a for a, _ in v]), np.array([b for _, b in v])) for p, v in out.items()}


def device_line(iv: tuple[np.ndarray, np.ndarray], lo: float, hi: float, steps: float) -> DeviceLine:
    """The :class:`DeviceLine` of intervals ``iv`` in the window ``[lo, hi]`` that holds ``steps`` steps."""
    starts, ends = iv
    keep = (ends > lo) & (starts < hi)
    order = np.argsort(starts[keep], kind="stable")
    a, b = np.maximum(starts[keep][order], lo), np.minimum(ends[keep][order], hi)
    union = union_ns(a, b)  # any time unit: the union of the intervals
    reach = np.maximum.accumulate(b) if b.size else np.array([lo])
    idle = np.r_[a - np.r_[lo, reach[:-1]], hi - reach[-1]]  # before each interval, and after the last
    long = idle[idle >= GAP_US]
    wall = hi - lo
    return DeviceLine(union / wall, union / 1000 / steps, float(np.sum(b - a)) / max(union, 1e-9),
                      float(long.sum()) / wall, long.size / steps)


def measured(folder: Path, images_per_s: float) -> tuple[dict[int, DeviceLine], float]:
    """The device lines of ``hgpart train --trace``'s ``devices_trace.json`` and the traced steps it holds, for a
    run that trained at ``images_per_s``."""
    trace = json.loads((folder / "devices_trace.json").read_text())
    iv = intervals(trace, simulated=False)
    lo = max(float(a.min()) for a, _ in iv.values())
    hi = min(float(b.max()) for _, b in iv.values())
    # the traced window's steps: its wall time over the run's step time (the trace runs whole compiled calls)
    steps = (hi - lo) / 1e6 * images_per_s / float(trace["otherData"]["batch_size"])
    return {p: device_line(v, lo, hi, steps) for p, v in iv.items()}, steps


def simulated(folder: Path) -> tuple[dict[int, DeviceLine], float]:
    """The device lines of the middle half of ``hgpart simulate --trace``'s run, and the steps in it."""
    trace = json.loads((folder / "devices_trace.simulated.json").read_text())
    iv = intervals(trace, simulated=True)
    end = max(float(b.max()) for _, b in iv.values())
    lo, hi = end / 4, end * 3 / 4
    steps = (hi - lo) / 1e6 / float(trace["otherData"]["step_s"])
    return {p: device_line(v, lo, hi, steps) for p, v in iv.items()}, steps


def pipeline_args(mode: str, batch: int, steps_per_call: int, inflight: int) -> list[str]:
    """The options of ``hgpart train`` and ``hgpart simulate`` for the compiled pipeline as the validation ran it:
    async with ``inflight`` batches in flight, or sync with its default K micro-batches."""
    pipe = ["--mode", mode, "--pipeline", "compiled", "--steps-per-call", str(steps_per_call), "-b", str(batch)]
    return pipe + ["--inflight", str(inflight)] if mode == "async" else pipe


def train_args(placement: str, pipe: list[str], steps: int, trace: Path) -> list[str]:
    """``hgpart train``'s arguments for ``steps`` steps of ``placement`` on 2 local pinned workers, synthetic data,
    traced into ``trace``."""
    return ["train", "-p", placement, "--devices", "local", *pipe, "--steps", str(steps), "--data", "synthetic",
            "--trace", str(trace)]


def run_one(spec: str, cluster: str, spc: int, inflight: int, steps: int, work: Path) -> list[str]:
    """Train and simulate ``placement:mode:batch``; the lines it prints."""
    path, mode, batch = spec.rsplit(":", 2)
    pipe = pipeline_args(mode, int(batch), spc, inflight)
    mdir, sdir = work / "measured", work / "simulated"
    env = dict(os.environ, COLUMNS="250")
    out = subprocess.run(["hgpart", *train_args(path, pipe, steps, mdir)], capture_output=True, text=True, env=env)
    got = RATE.search(out.stdout)
    if out.returncode or got is None:
        return [f"{spec}: hgpart train failed: {(out.stderr or out.stdout).strip().splitlines()[-1:]}"]
    rate = float(got.group(1).replace(",", ""))
    sim = subprocess.run(["hgpart", "simulate", "-p", path, "-c", cluster, *pipe, "--trace", str(sdir),
                          "--json", str(work / "sim.json")], capture_output=True, text=True, env=env)
    if sim.returncode:
        return [f"{spec}: hgpart simulate failed: {sim.stderr.strip().splitlines()[-1:]}"]
    pred = json.loads((work / "sim.json").read_text())["images_per_s"]
    m, m_steps = measured(mdir, rate)
    s, s_steps = simulated(sdir)
    lines = [f"{Path(path).parent.name}/{Path(path).stem} {mode} B={batch}: measured {rate:.0f} "
             f"images/s, simulated {pred:.0f} ({pred / rate - 1:+.1%}); traced steps {m_steps:.1f}, "
             f"simulated window {s_steps:.1f}",
             "  device | busy meas / sim | busy ms per step meas / sim | overlap meas / sim | idle in gaps >= 1 ms "
             "meas / sim | such gaps per step meas / sim"]
    for p in sorted(m):
        a, b = m[p], s.get(p)
        if b is None:
            continue
        lines.append(f"  {p} | {a.busy:.1%} / {b.busy:.1%} | {a.busy_ms_per_step:.2f} / {b.busy_ms_per_step:.2f} | "
                     f"{a.overlap:.2f} / {b.overlap:.2f} | {a.idle_gaps:.1%} / {b.idle_gaps:.1%} | "
                     f"{a.gaps_per_step:.1f} / {b.gaps_per_step:.1f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("specs", nargs="+", help="PLACEMENT.json:MODE:BATCH")
    ap.add_argument("--cluster", required=True, help="the calibrated cluster file the validation used")
    ap.add_argument("--steps-per-call", type=int, default=30)
    ap.add_argument("--inflight", type=int, default=3, help="async batches in flight")
    ap.add_argument("--steps", type=int, default=240, help="training steps of each timed run")
    args = ap.parse_args(argv)
    print(f"$ python benchmarks/trace_vs_simulated.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    print(f"load average at start {os.getloadavg()}", flush=True)
    for spec in args.specs:
        with tempfile.TemporaryDirectory() as tmp:
            for line in run_one(spec, args.cluster, args.steps_per_call, args.inflight, args.steps, Path(tmp)):
                print(line, flush=True)
    print(f"load average at end {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
