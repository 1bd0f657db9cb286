"""Measured comparison benchmark: every training strategy on the same K devices, time and convergence on digits.

Run (from the repository root)::

    python benchmarks/compare_runtime.py                 # full: minivgg 32x32, K=2, BS 16,32,64, 4 epochs
    python benchmarks/compare_runtime.py --quick         # CI size: minivgg 16x16, K=2, BS 16, 8 steps
    python benchmarks/compare_runtime.py --devices local # worker processes instead of logical devices

Prints the tables it measured in this run (per-epoch time, time to 90% training accuracy, images/s, bytes per
step, CPU use, device busy % from a profiler trace of a few extra steps per run (``--no-trace``: skip), ratios to
coarse-grain hypergraph model parallelism) and writes the report folder
(default benchmarks/results/compare_runtime_<devices>[_quick]; traces in its traces/ subfolder).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI size (a few steps at one batch size)")
    ap.add_argument("--devices", default="logical", help="logical or local")
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--model", default="minivgg")
    ap.add_argument("--epochs", type=float, default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--trace", action=argparse.BooleanOptionalAction, default=True,
                    help="device busy %% from a profiler trace of a few extra steps per run (default on)")
    args = ap.parse_args(argv)

    from hgpart.runtime.devices import open_devices

    ds = open_devices(args.devices, args.k, inter_op=max(4, args.k + 1))  # before TensorFlow initialises
    try:
        from rich.console import Console

        from hgpart.compare.measured import run_measured
        from hgpart.compare.measured_report import print_measured, write_measured

        console = Console(width=140)
        if args.quick:
            kw = dict(input_shape=(16, 16, 3), batch_sizes=[16], steps=8, eval_n=128, evals_per_epoch=2)
        else:
            kw = dict(input_shape=(32, 32, 3), batch_sizes=[16, 32, 64], epochs=args.epochs or 4.0, eval_n=512,
                      evals_per_epoch=4)
        t0 = time.perf_counter()
        out = args.out or Path("benchmarks/results") / (f"compare_runtime_{args.devices}" + ("_quick" if args.quick
                                                                                           else ""))
        cmp = run_measured(args.model, device_set=ds, target=0.9, devices_label=args.devices, console=console,
                           progress=sys.stderr.isatty(), trace_dir=out / "traces" if args.trace else None, **kw)
        print_measured(cmp, console=console)
        paths = write_measured(cmp, out)
        console.print(f"wrote {len(paths)} files to {out}; benchmark took {time.perf_counter() - t0:.0f} s",
                      highlight=False)
    finally:
        ds.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
