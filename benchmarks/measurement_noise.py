"""How far can the median of a few passes of one unchanged configuration land from its long-run median here?

Run (from the repository root)::

    python benchmarks/measurement_noise.py --model minivgg:32:30 --batch-size 16 --rounds 12 \\
        [--methods single,sync-dp,async-dp-1ps,layerwise-sync] [--passes 3] [--cluster CLUSTER.json] [--out DIR]

Why: the simulator validation (``benchmarks/simulator_validation.py``, issue 16) judges each row by the median of
its passes (three, 20 minutes apart) against one prediction, and asks for every row within 30 %. This machine is
shared and its speed drifts (``results/runtime_throughput_rounds/``). This measures how much of a row's error the
measurement alone can make. It runs the validation's own measuring child
(``simulator_validation.py --child``: :func:`hgpart.compare.measured.run_measured` on 2 local pinned workers, every
strategy of one model at one batch size, each strategy compiled, warmed up and timed for ``steps`` steps) ``rounds``
times, back to back, each round its own process, and per strategy (and, for model parallelism, per way
``--pipeline auto`` ran it) prints:

* every round's images/s, their median over all rounds (the reference) and max / min;
* over every choice of ``passes`` rounds (all combinations), the median of those passes against the reference:
  the share of choices more than 15 % and more than 30 % away, and the farthest;
* with ``--cluster``: the simulator's prediction for that run (:func:`simulator_validation.simulate_run`, as the
  validation simulates it), its error against the reference, and the share of choices of ``passes`` rounds whose
  median it misses by more than 30 %. The prediction does not change between choices; only the measurement does.

Rounds run back to back, so they span less time than a validation's passes. The load average is printed at the
start and end, and before each round.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import simulator_validation as sv  # noqa: E402 - the benchmark next to this one

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

DEFAULT_METHODS = "single,sync-dp,async-dp-1ps,async-dp-dps,layerwise-sync,coarse-async"


def spread(values: list[float], passes: int) -> tuple[float, list[float]]:
    """The median of ``values`` and, for every combination of ``passes`` of them, its median's relative distance
    from that reference (signed)."""
    ref = statistics.median(values)
    return ref, [statistics.median(c) / ref - 1.0 for c in itertools.combinations(values, passes)]


def share_beyond(devs: list[float], bound: float) -> float:
    """The share of ``devs`` whose absolute value exceeds ``bound``."""
    return sum(abs(d) > bound for d in devs) / len(devs) if devs else 0.0


def load_runs(out: Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every measured run in ``out/measured`` (one model at one batch size), by (strategy, way its steps ran), in
    round order (:func:`simulator_validation.measured_runs`)."""
    return {(method, way): rs for (_, method, _, way), rs in sv.measured_runs(out).items()}


def report(runs: dict[tuple[str, str], list[dict[str, Any]]], passes: int, cluster_path: Path | None) -> list[str]:
    """The lines described in the module docstring."""
    cluster = None
    if cluster_path is not None:
        from hgpart.cluster import load_cluster

        cluster = load_cluster(str(cluster_path))
    lines = []
    for (method, way), rs in sorted(runs.items()):
        label = f"{method} ({way})" if way else method
        values = [float(r["images_per_s"]) for r in rs]
        rounds = ", ".join(f"{v:.4g}" for v in values)
        if len(values) <= passes:
            lines.append(f"{label:28s} {len(values)} rounds ({rounds}): too few for medians of {passes}")
            continue
        ref, devs = spread(values, passes)
        line = (f"{label:28s} {len(values)} rounds: median {ref:.1f} img/s, max/min {max(values) / min(values):.2f}; "
                f"median of {passes} vs it: >15 % in {share_beyond(devs, 0.15):.0%}, >30 % in "
                f"{share_beyond(devs, 0.30):.0%} of {len(devs)}, farthest {max(devs, key=abs):+.1%}")
        if cluster is not None:
            pred = sv.simulate_run(rs[0], rs[0]["placement"], cluster, rs[0]["k"])
            errs = [pred / (ref * (1.0 + d)) - 1.0 for d in devs]
            line += (f"; predicted {pred:.1f} ({pred / ref - 1.0:+.1%} of the median), misses a median of {passes} "
                     f"by >30 % in {share_beyond(errs, 0.30):.0%}")
        lines.append(line)
        lines.append(f"{'':28s} rounds: {rounds}")
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minivgg:32:30", help="model:input:steps, as the validation's --models")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--methods", default=DEFAULT_METHODS)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--passes", type=int, default=3, help="passes per row of the validation")
    ap.add_argument("--cluster", type=Path, default=None, help="a calibrated cluster file, to predict each run")
    ap.add_argument("--out", type=Path, default=None, help="keep the measured runs here (default: a temporary "
                    "folder); with measured/*.json already there, only report")
    args = ap.parse_args(argv)
    if args.rounds <= args.passes:
        ap.error(f"--rounds {args.rounds} must exceed --passes {args.passes}")
    model, size, steps = args.model.split(":")
    print(f"$ python benchmarks/measurement_noise.py {' '.join(argv)}")
    print(f"load average at start: {sv.loadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        if not list((out / "measured").glob("*.json")):
            t0 = time.perf_counter()
            for rnd in range(args.rounds):
                print(f"round {rnd}: load {sv.loadavg()}", flush=True)
                spec = f"{model}:{size}:{args.batch_size}:{steps}:{rnd}"
                subprocess.run([sys.executable, sv.__file__, "--child", spec, "--out", str(out), "--methods",
                                args.methods], check=True)
            print(f"measured in {time.perf_counter() - t0:.0f} s", flush=True)
        print(f"{model} {size}x{size} B={args.batch_size}, {steps} steps per strategy and round:")
        for line in report(load_runs(out), args.passes, args.cluster):
            print(line)
    print(f"load average at end: {sv.loadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
