"""Which rows of the simulator validation miss in every run, and which in one? Errors of each row across runs.

Run (from the repository root)::

    python benchmarks/validation_history.py benchmarks/results/simulator_validation/2026-11-29-night \\
        benchmarks/results/simulator_validation/2026-11-30 benchmarks/results/simulator_validation/2026-11-30-pm \\
        [--bound 0.2]

Why: a validation run's worst row (issue 16: every row within 30 %) can be a prediction that is wrong in every
run, or a measurement that was slow in one. Given the folders of several committed runs of
``benchmarks/simulator_validation.py`` (each with its ``validation.csv``), this prints every row (model, strategy,
batch size, the way model parallelism's steps ran) that misses by more than ``--bound`` in at least two of them,
with its error in each run (``.`` where the run has no such row) and whether the sign is the same in all: a
**systematic** miss, whose cause is in the simulator or its calibration, against one that comes and goes with the
runs. Then, per run, its worst row and how many rows miss by more than 30 %. Nothing is measured or simulated;
the runs may differ in simulator rules, calibration and machine (their READMEs say how).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

Row = tuple[str, str, int, str]


def read(folder: Path) -> dict[Row, float]:
    """The error (predicted / measured - 1) of every row of one run's ``validation.csv``."""
    with (folder / "validation.csv").open() as f:
        return {(r["model"], r["strategy"], int(r["batch_size"]), r.get("pipeline", "")): float(r["error"])
                for r in csv.DictReader(f)}


def recurring(runs: list[dict[Row, float]], bound: float) -> list[tuple[Row, list[float | None], bool]]:
    """The rows beyond ``bound`` in at least two runs: their errors per run (None: not in that run) and whether
    every run has them on the same side."""
    out = []
    for row in sorted({r for run in runs for r in run}):
        errs = [run.get(row) for run in runs]
        seen = [e for e in errs if e is not None]
        if sum(abs(e) > bound for e in seen) >= 2:
            out.append((row, errs, all(e > 0 for e in seen) or all(e < 0 for e in seen)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="validation folders, each with a validation.csv")
    ap.add_argument("--bound", type=float, default=0.2, help="a miss: |error| above this (default 0.2)")
    args = ap.parse_args(argv)
    runs = [read(f) for f in args.runs]
    names = [f.name for f in args.runs]
    print(f"$ python benchmarks/validation_history.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    print(f"rows beyond {args.bound:.0%} in at least two of: {', '.join(names)}")
    rows = recurring(runs, args.bound)
    for (model, strategy, batch, way), errs, same in rows:
        cells = "  ".join(f"{e:+7.1%}" if e is not None else f"{'.':>7s}" for e in errs)
        label = f"{model} {strategy} B={batch}" + (f" ({way})" if way else "")
        print(f"  {label:40s} {cells}  {'systematic' if same else 'changes sign'}")
    print(f"{len(rows)} rows, {sum(same for _, _, same in rows)} on the same side in every run")
    for name, run in zip(names, runs, strict=True):
        worst = max(run, key=lambda r: abs(run[r]))
        print(f"{name}: {len(run)} rows, {sum(abs(e) > 0.3 for e in run.values())} beyond 30 %, worst "
              f"{' '.join(str(v) for v in worst if v != '')} {run[worst]:+.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
