"""Which timing estimator makes a profile repeat on a shared machine: wall or CPU time, median, minimum or low half.

Run::

    python benchmarks/profile_estimators.py --model resnet18 --input 32 --cores 1 --rounds 10 --runs 3
    python benchmarks/profile_estimators.py --model resnet18 --input 32 --cores 0   # unpinned, all cores

Each run is its own process that samples every layer and one whole training step in ``--rounds`` interleaved
rounds (no early stop), reading every sample on both clocks. All estimators are then computed from the same
samples, so they are compared on identical load. Printed per estimator, for layers of at least
2 % of the sum of layers: the per-layer max/min across runs (median, worst), the same after dividing each run by
its sum of layers (scale-free: the relative weights a partitioner balances), the worst max/min between layers of
identical shape within a run, the sum of layers over the whole step (the run farthest from 1) and the whole
step's max/min across runs. The load average is printed at the start and at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

from hgpart.profile import Profile  # noqa: E402
from hgpart.profile_compare import ratios_across, shape_twin_ratio  # noqa: E402
from hgpart.timing import Clock, SampleSet, Statistic  # noqa: E402

MIN_SHARE = 0.02


def child(args: argparse.Namespace) -> None:
    from hgpart.models import parse_input
    from hgpart.profiler import MeasureOptions, pin_cores, profile_model

    if args.cores:
        pin_cores(args.cores)
    samples: dict[str, Any] = {}
    opts = MeasureOptions(min_rounds=args.rounds, max_rounds=args.rounds, target=1e-9)
    prof = profile_model(args.model, input_shape=parse_input(args.input), batch_size=args.batch_size,
                         options=opts, progress=False, samples_out=samples)
    prof.save(Path(args.out) / "profile.json")
    Path(args.out, "samples.json").write_text(json.dumps(samples))


def _with_estimator(prof: Profile, samples: dict[str, Any], clock: Clock, stat: Statistic) -> tuple[Profile, float]:
    """A copy of ``prof`` whose layer work is ``stat`` of the ``clock`` samples; and the whole step in ms."""
    from dataclasses import replace

    def est(kind: str, name: str) -> float:
        return SampleSet(list(samples[name][kind][clock.value])).estimate(stat) * 1e3

    layers = [replace(c, forward_ms=0.0, backward_ms=est("fb", c.name)) if c.name in samples else c
              for c in prof.layers]
    return replace(prof, layers=layers), est("fb", "<whole step>")


def _across_runs(profs: list[Profile], *, scale_free: bool = False) -> tuple[float, float]:
    ratios = ratios_across(profs, min_share=MIN_SHARE, scale_free=scale_free)
    return statistics.median(ratios.values()), max(ratios.values())


def analyse(runs: list[tuple[Profile, dict[str, Any]]]) -> None:
    print(f"{'clock':<12} {'statistic':<9} {'runs med':>9} {'runs worst':>10} {'scale-free med':>14} "
          f"{'scale-free worst':>16} {'twins':>6} {'sum/step':>9} {'step max/min':>12}")
    for clock in Clock:
        for stat in Statistic:
            profs = [_with_estimator(p, s, clock, stat) for p, s in runs]
            med, worst = _across_runs([p for p, _ in profs])
            free_med, free_worst = _across_runs([p for p, _ in profs], scale_free=True)
            twins = max(shape_twin_ratio(p, min_share=MIN_SHARE)[0] for p, _ in profs)
            sums = [p.layer_sum_ms / step for p, step in profs]
            worst_sum = max(sums, key=lambda r: abs(r - 1.0))
            steps = [step for _, step in profs]
            print(f"{clock.value:<12} {stat.value:<9} {med:>9.3f} {worst:>10.3f} {free_med:>14.3f} {free_worst:>16.3f} "
                  f"{twins:>6.3f} {worst_sum:>9.3f} {max(steps) / min(steps):>12.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--input", default="32")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--cores", type=int, default=1, help="pin each run to this many cores (0: unpinned)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", default="", help="folder to make the runs' folder in (default: the system's temp)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    print(f"{args.model} {args.input} batch {args.batch_size} cores {args.cores or 'all (unpinned)'} "
          f"rounds {args.rounds} runs {args.runs}; load average at start {os.getloadavg()}", flush=True)
    runs = []
    with tempfile.TemporaryDirectory(dir=args.keep or None) as tmp:
        for r in range(args.runs):
            out = Path(tmp) / str(r)
            out.mkdir()
            cmd = [sys.executable, __file__, "--child", "--out", str(out), "--model", args.model, "--input",
                   args.input, "--batch-size", str(args.batch_size), "--cores", str(args.cores),
                   "--rounds", str(args.rounds)]
            subprocess.run(cmd, check=True)
            prof = Profile.load(out / "profile.json")
            runs.append((prof, json.loads((out / "samples.json").read_text())))
            print(f"run {r + 1}: {prof.quality.seconds if prof.quality else 0:.0f} s, load {os.getloadavg()[0]:.2f}",
                  flush=True)
    analyse(runs)
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
