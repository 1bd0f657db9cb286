"""Async convergence: many seeded short runs of the asynchronous pipeline, each judged by its last steps' loss.

Run::

    python benchmarks/async_stability.py                          # 20 seeds x 60 steps, minivgg, digits, Adam
    python benchmarks/async_stability.py --window 0 --runs 45     # without the staleness bound, for comparison
    python benchmarks/async_stability.py --pipeline stages --placement thirds --inflight 0   # the stage pipeline,
                                                                  # the runtime's default batches in flight

Each run trains ``minivgg`` (32x32x3) on scikit-learn's digits with Adam (lr 1e-3), batch 32, a coarse K=2
placement (Mt-KaHyPar, analytic profile) on K logical devices, ``--inflight`` batches in flight, for ``--steps``
steps after a warm-up that makes no update. Seed ``s`` fixes the initial weights and the batch order. A run passes
when the mean loss of its last 5 steps is at most ``--limit``. Logical devices are enough here: the question is
convergence, not speed. ``--window`` is the driver's staleness bound (task ``i`` starts only after task
``i - window`` finished; 0 = no bound, the driver before the bound existed; by default the batches in flight, as
the runtime). ``--pipeline stages`` runs the stage pipeline (weight stashing, 1F1B) instead of one function per step
on ``--inflight`` threads; ``--placement thirds`` is a three-stage placement.

Printed: one line per run (last-5 mean loss, worst single loss of the last 5, seconds) and the pass count. Written
(``--out``): the rows, the command, and the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def make_placement(folder: Path, batch_size: int, seed: int, kind: str = "coarse") -> Path:
    """``coarse``: a Mt-KaHyPar coarse K=2 placement (split layers: many pipeline stages); ``thirds``: the first and
    last thirds of the layers on part 0, the middle on part 1 (three stages, as vgg16's coarse placements here);
    ``layerwise``: whole layers, the exact min-max cut (two stages)."""
    import numpy as np

    from hgpart.hypergraph import build_hypergraph
    from hgpart.models import load_graph
    from hgpart.partitioners import partition
    from hgpart.placement import Placement
    from hgpart.profile import analytic_profile

    target = folder / f"minivgg_{kind}_k2.json"
    if target.exists():  # the committed placement, so that reruns train the same one
        return target
    graph = load_graph("minivgg", (32, 32, 3), 10)
    work = analytic_profile(graph, batch_size).work()
    hg = build_hypergraph(graph, work, batch_size=batch_size, grain="coarse")
    if kind == "thirds":
        order = {layer.name: i for i, layer in enumerate(graph.layers)}
        n = len(graph.layers)
        parts = np.zeros(hg.num_vertices, dtype=np.int64)
        for b in hg.blocks:
            parts[b.start:b.stop] = 1 if n // 3 <= order[b.layer] < 2 * n // 3 else 0
        pl = Placement.from_vertex_parts(graph, hg, parts, k=2, method="manual", work=work)
        return Path(pl.save(target))
    backend = "layerwise" if kind == "layerwise" else "mtkahypar"
    res = partition(hg, k=2, backend=backend, epsilon=0.05, seed=seed)
    pl = Placement.from_vertex_parts(graph, hg, res.parts, k=2, method="layerwise" if kind == "layerwise" else
                                     "hypergraph", work=work)
    return Path(pl.save(target))


def one_run(path: Path, ds: Any, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """One seeded async run, built and driven as :func:`hgpart.runtime.train.train` does, with ``--window``."""
    import numpy as np
    from hgpart.runtime.api import PartitionedModel
    from hgpart.runtime.multistep import MultiStep, run_calls
    from hgpart.runtime.pipeline import run_slots, shuffled_batches
    from hgpart.runtime.stagepipe import run_staged
    from hgpart.runtime.train import check_settings, load_dataset

    from hgpart.placement import load_placement

    pl = load_placement(path)
    check_settings(pl, batch_size=args.batch_size, steps=args.steps, epochs=None, mode="async", optimizer="adam",
                   lr=args.lr, dataset="digits", inflight=args.inflight or None, seed=seed)
    x, y = load_dataset("digits", tuple(pl.graph.input_shape), 10, seed=seed, device=ds.host)
    B = args.batch_size
    asked = args.inflight or None  # 0: the runtime's default for the way the steps run
    pm = PartitionedModel.from_placement(pl, device_set=ds, optimizer="adam", lr=args.lr, seed=seed,
                                         inflight=asked, pipeline=args.pipeline)
    step = pm.train_step(B, "async", asked)  # compiled and warmed up without an update
    staged = pm.staged_step(step, asked, longest=min(args.steps, len(x) // B))  # compiled: calls end at epochs
    assert pm.pipeline_choice is not None
    n = pm.pipeline_choice.inflight
    window = n if args.window < 0 else args.window  # stages: the window is the batches in flight (main checks)
    batches = shuffled_batches(x, y, batch_size=B, seed=seed)
    t0 = time.perf_counter()
    if isinstance(staged, MultiStep):  # calls of several steps, as PartitionedModel.fit makes them
        rows = run_calls(staged, args.steps, batches, images_per_task=B)
    elif staged is None:
        rows = run_slots([lambda bx, by: step.run(bx, by)[0]] * n, args.steps, batches, images_per_task=B,
                         window=window)
    else:
        rows = run_staged(staged, args.steps, batches, images_per_task=B, window=window)
    losses = [r.loss for r in rows]
    last = losses[-5:]
    out = {"seed": seed, "inflight": n, "pipeline": pm.pipeline_choice.describe(),
           "last5_mean": float(np.mean(last)), "last5_max": float(np.max(last)),
           "first5_mean": float(np.mean(losses[:5])), "seconds": time.perf_counter() - t0,
           "counters": sorted({float(c.numpy()) for c in step.counters.values()})}
    pm.close()  # frees the run's compiled functions; the devices stay open for the next run
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--inflight", type=int, default=2, help="batches in flight (0: the runtime's default)")
    ap.add_argument("--window", type=int, default=-1,
                    help="staleness bound of the driver (0 = none; -1 = the batches in flight, the runtime's)")
    ap.add_argument("--pipeline", choices=("graph", "stages", "compiled"), default="graph",
                    help="graph: one function per step on --inflight threads; stages: the stage pipeline; "
                         "compiled: the runtime's steps per compiled call, at most the run's length")
    ap.add_argument("--placement", choices=("coarse", "thirds", "layerwise"), default="coarse")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--limit", type=float, default=1.0)
    ap.add_argument("--out", default="benchmarks/results/async_stability/results.json")
    args = ap.parse_args()
    if args.pipeline != "graph" and args.window >= 0:
        ap.error(f"--window is the batches in flight with --pipeline {args.pipeline}: use --inflight")
    load_start = os.getloadavg()
    from hgpart.runtime.devices import open_devices

    ds = open_devices("logical", 2, inter_op=max(5, args.inflight + 1))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    path = make_placement(out.parent, args.batch_size, seed=1, kind=args.placement)
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.runs):
        r = one_run(path, ds, seed, args)
        r["pass"] = r["last5_mean"] <= args.limit
        rows.append(r)
        print(f"seed {seed:3d}  {r['inflight']} in flight  last-5 mean {r['last5_mean']:.3f}  "
              f"max {r['last5_max']:.3f}  first-5 "
              f"{r['first5_mean']:.3f}  {r['seconds']:.1f} s  {'ok' if r['pass'] else 'FAIL'}", flush=True)
    load_end = os.getloadavg()
    passed = sum(r["pass"] for r in rows)
    worst = max(r["last5_mean"] for r in rows)
    print(f"{passed} of {len(rows)} runs end with last-5 mean loss <= {args.limit}; worst {worst:.3f}; "
          f"load average start {load_start[0]:.2f} end {load_end[0]:.2f}")
    from hgpart.fileio import write_json

    write_json(out, {"command": "python " + " ".join(shlex.quote(a) for a in sys.argv), "args": vars(args),
                     "loadavg_start": [round(v, 2) for v in load_start], "loadavg_end": [round(v, 2) for v in load_end],
                     "passed": passed, "runs": len(rows), "worst_last5_mean": worst, "rows": rows})
    print(json.dumps({"passed": passed, "runs": len(rows), "worst": worst}))


if __name__ == "__main__":
    main()
