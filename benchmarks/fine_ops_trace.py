"""Where a placement's traced device time goes, by kind of op: what the simulator's layer profile holds, and what it
does not (the slices and concatenations that cut a layer into parts, partial sums, sends).

Run (from the repository root)::

    python benchmarks/fine_ops_trace.py PLACEMENT.json [PLACEMENT.json ...] [--batch-size 32] [--steps 90]

Why: the simulator predicts minires's fine-grain placements 20-44 % too fast
(``benchmarks/results/simulator_validation/2026-11-29-night/``), and giving every part a layer's fixed cost does
not explain it (its ``ablation.txt``). Each placement trains in its own process on 2 local pinned workers
(``hgpart train --devices local --mode async --inflight 3 --pipeline compiled --steps-per-call 30 --data
synthetic --trace``). Its ``devices_trace.json`` (TensorFlow's profiler, a few traced steps) is read back. For each
device this prints the union busy fraction that ``hgpart train`` reports, and the share of the summed op time in
each group of :data:`GROUPS`. The sums overlap (a worker runs ops on several inter-op threads), so only the shares
are compared, not the sums against the wall time. Prints the load average at the start and end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trace_vs_simulated import pipeline_args, train_args  # noqa: E402 - the benchmark next to this one

#: op types by group; the first group that names an op's type takes it, the rest is "other"
GROUPS: dict[str, tuple[str, ...]] = {
    "conv and matmul": ("Conv2D", "MatMul"),
    "slice and concat": ("Slice", "ConcatV2", "Split", "SplitV", "StridedSlice", "GatherV2"),
    "partial sums (AddN)": ("AddN",),
    "sends": ("_Send", "_Recv"),
    "optimizer": ("ApplyAdam", "Assign"),
}


def group_of(op_type: str) -> str:
    """The group of ``op_type``: the first whose names one is a part of it (``_MklNativeConv2D`` is a conv)."""
    for group, names in GROUPS.items():
        if any(n in op_type for n in names):
            return group
    return "other"


def shares(trace: dict) -> dict[int, dict[str, float]]:
    """Per device (``pid``): each group's share of its summed op time."""
    total: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for e in trace["traceEvents"]:
        if e.get("ph") == "X":
            total[e["pid"]][group_of(str(e.get("cat", "")))] += float(e["dur"])
    out = {}
    for pid, by in total.items():
        whole = sum(by.values())
        out[pid] = {g: by.get(g, 0.0) / whole for g in (*GROUPS, "other")}
    return out


def run_one(placement: Path, batch: int, steps: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-c", "from hgpart.cli import main; main()",
               *train_args(str(placement), pipeline_args("async", batch, 30, 3), steps, Path(tmp))]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            print(f"{placement}: hgpart train failed: {run.stderr.strip().splitlines()[-1:]}", flush=True)
            return
        rate = next((line for line in run.stdout.splitlines() if "img/s, loss" in line), "").strip()
        trace = json.loads((Path(tmp) / "devices_trace.json").read_text())
    busy = trace.get("otherData", {}).get("device_busy", [])
    print(f"{placement} B={batch}: {rate}", flush=True)
    for pid, by in sorted(shares(trace).items()):
        parts = ", ".join(f"{g} {100 * v:4.1f} %" for g, v in by.items())
        b = f"{100 * busy[pid]:.1f} %" if pid < len(busy) else "-"
        print(f"  device {pid}: busy {b}; share of op time: {parts}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("placements", nargs="+", type=Path)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=90)
    args = ap.parse_args(argv)
    print(f"$ python benchmarks/fine_ops_trace.py {' '.join(sys.argv[1:] if argv is None else argv)}   # "
          f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, load average at start "
          f"{[round(v, 2) for v in os.getloadavg()]}", flush=True)
    for placement in args.placements:  # each in its own process: one eager cluster per process
        run_one(placement, args.batch_size, args.steps)
    print(f"load average at end {[round(v, 2) for v in os.getloadavg()]}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
