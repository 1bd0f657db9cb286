"""What does a placement's split op structure cost without any transfer? Its step with every part on one worker.

Run (from the repository root)::

    python benchmarks/split_on_one_worker.py --batch-size 64 --micro 2 PLACEMENT.json [...] [--reps 15] [--cores 1]

Why: the simulator charges each part the profiled layers' work in proportion to the vertices it holds
(``hgpart/simulate/mpgraph.py``), as if a layer split over parts cost what the whole layer costs. The runtime runs
a split layer as several smaller ops plus channel selections, concatenations and partial sums
(``runtime/partitioned.py``). This times each placement's training step with all its parts on ONE pinned local
worker against the unsplit model's at the same batch and micro-batches, interleaved, in one process, with
:func:`hgpart.runtime.splitbench.measure_split_costs` (what ``hgpart calibrate-split`` records in a cluster file):
the median per step and the ratio. A placement with more than one part runs ``--micro`` micro-batches, as sync
model parallelism does, and 1 (async), each against the unsplit step at the same micro-batches.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("placements", nargs="+", help="placement files")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--micro", type=int, default=2, help="sync micro-batches of the placements")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--cores", type=int, default=1, help="cores of the one worker")
    args = ap.parse_args()
    from hgpart.runtime.cluster import open_local
    from hgpart.runtime.splitbench import SplitRequest, measure_split_costs

    from hgpart.placement import load_placement

    print(f"$ python benchmarks/split_on_one_worker.py --batch-size {args.batch_size} --micro {args.micro} "
          f"--reps {args.reps} --cores {args.cores} {' '.join(args.placements)}   # "
          f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load average at start "
          f"{[round(v, 2) for v in os.getloadavg()]}", flush=True)
    reqs, names = [], []
    for path in args.placements:
        pl = load_placement(path)
        for micro in sorted({1, args.micro if pl.k > 1 else 1}):
            reqs.append(SplitRequest(pl, micro))
            names.append(f"{path} (K={pl.k}, {micro} micro-batch{'es' if micro > 1 else ''})")
    cores = sorted(os.sched_getaffinity(0))[: args.cores]
    with open_local(1, inter_op=4, cores=cores, start_timeout=180) as ds:
        costs = measure_split_costs(reqs, ds, batch_size=args.batch_size, reps=args.reps)
    for name, c in zip(names, costs, strict=True):
        print(f"{name}: {c.split_ms:.2f} ms per step at B={c.batch_size}, unsplit {c.whole_ms:.2f} ms, "
              f"x{c.factor:.3f}", flush=True)
    print(f"load average at end {[round(v, 2) for v in os.getloadavg()]}")


if __name__ == "__main__":
    main()
