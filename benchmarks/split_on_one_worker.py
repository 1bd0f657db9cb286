"""What does a placement's split op structure cost without any transfer? Its step with every part on one worker.

Run (from the repository root)::

    python benchmarks/split_on_one_worker.py --batch-size 64 --micro 2 SINGLE_K1.json PLACEMENT.json [...] \\
        [--reps 15]

Why: the simulator charges each part the profiled layers' work in proportion to the vertices it holds
(``hgpart/simulate/mpgraph.py``), as if a layer split over parts cost what the whole layer costs. The runtime runs
a split layer as several smaller ops plus channel selections, concatenations and partial sums
(``runtime/partitioned.py``). This builds each placement's training step exactly as the runtime does
(:class:`hgpart.runtime.step.TrainStep` over :class:`hgpart.runtime.partitioned.PlacedModel`, Adam) with all its
parts on ONE pinned local worker, so nothing crosses between workers, and times it against the first file (a
one-part placement of the same model: the single device), interleaved, in one process: ``--reps`` rounds of 5
calls each, the median per step, and its ratio to the first. A placement with more than one part runs
``--micro`` micro-batches, as sync model parallelism does.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("placements", nargs="+", help="placement files of one model; the first is the reference")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--micro", type=int, default=2, help="micro-batches of the placements with more than one part")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    from hgpart.runtime.cluster import open_local

    from hgpart.placement import load_placement
    from hgpart.zoo import build_model

    print(f"$ python benchmarks/split_on_one_worker.py --batch-size {args.batch_size} --micro {args.micro} "
          f"--reps {args.reps} {' '.join(args.placements)}   # {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}"
          f", load average at start {[round(v, 2) for v in os.getloadavg()]}", flush=True)
    B = args.batch_size
    with open_local(1, inter_op=4, start_timeout=180) as ds:
        import tensorflow as tf
        from hgpart.runtime.partitioned import PlacedModel
        from hgpart.runtime.step import OptimizerSpec, TrainStep

        dev = ds.devices[0]
        steps: dict[str, tuple[Any, Any, Any]] = {}
        for path in args.placements:
            pl = load_placement(path)
            g = pl.graph
            km = build_model(g.name, input_shape=tuple(g.input_shape), num_classes=g.num_classes)
            pm = PlacedModel(pl, km, [dev] * pl.k, host=dev)
            micro = args.micro if pl.k > 1 else 1
            st = TrainStep(pm, OptimizerSpec("adam", 1e-3), batch_size=B, micro_batches=micro)
            with tf.device(dev):
                x = tf.random.normal([B, *g.input_shape])
                y = tf.zeros([B], tf.int32)
            steps[f"{path} (K={pl.k}, {micro} micro-batch{'es' if micro > 1 else ''})"] = (st, x, y)
        for st, x, y in steps.values():
            for _ in range(3):
                st.concrete(x, y).numpy()
        times: dict[str, list[float]] = {k: [] for k in steps}
        for _ in range(args.reps):
            for k, (st, x, y) in steps.items():
                t0 = time.perf_counter()
                for _ in range(5):
                    loss = st.concrete(x, y)
                loss.numpy()
                times[k].append((time.perf_counter() - t0) / 5)
        ref = statistics.median(next(iter(times.values())))
        for k, v in times.items():
            med = statistics.median(v)
            print(f"{k}: {med * 1e3:.2f} ms per step at B={B}, x{med / ref:.2f} (min {min(v) * 1e3:.2f}, "
                  f"max {max(v) * 1e3:.2f})", flush=True)
    print(f"load average at end {[round(v, 2) for v in os.getloadavg()]}")


if __name__ == "__main__":
    main()
