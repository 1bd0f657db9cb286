"""Is a compiled call on worker processes ordered after the eager writes made just before it? (issue 19)

Run::

    python benchmarks/eager_order_probe.py --rounds 3 --calls 12

Why: the compiled pipeline drifted from sequential training by about 1e-4 in the loss in some runs on local
workers and never on logical devices (``tests/test_multistep_local.py``). This probe isolates the suspect: on two
local pinned workers, with the layer-wise minivgg placement of ``runtime_throughput_vgg16/xeon_minivgg_settled/``,
it saves every variable a step writes (weights, Adam slots, step counters), then ``--calls`` times assigns the
saved values back eagerly and makes one compiled call of 2 training steps (:class:`MultiStep`, one batch in
flight) on the same batches. Every call should compute the same losses and leave the same step counters. Arm
``settle`` calls :func:`hgpart.runtime.settle.settle` between the assigns and the call, arm ``none`` does not.
Each arm runs in its own process (one eager cluster per process), alternately, ``--rounds`` times; each prints how
many calls differed from its first call, in their losses and in their step counters.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

PLACEMENT = Path(__file__).parent / "results/runtime_throughput_vgg16/xeon_minivgg_settled/minivgg_layerwise_k2.json"


def child(arm: str, calls: int) -> dict:
    """One arm's calls in this process: how many differ from the first."""
    import numpy as np
    from hgpart.runtime.api import PartitionedModel
    from hgpart.runtime.cluster import open_local
    from hgpart.runtime.multistep import MultiStep
    from hgpart.runtime.settle import settle

    from hgpart.placement import load_placement

    pl = load_placement(PLACEMENT)
    B = 32
    rng = np.random.default_rng(0)
    x = rng.random((2 * B, *pl.graph.input_shape), np.float32)
    y = rng.integers(0, 10, 2 * B).astype(np.int32)
    with open_local(2, inter_op=2, start_timeout=120) as ds:
        pm = PartitionedModel.from_placement(pl, device_set=ds, seed=3, inflight=1, pipeline="compiled")
        step = pm.train_step(B, "async", 1)
        ms = MultiStep(step, steps_per_call=2, inflight=1)
        ms.warm([2])
        for _ in range(3):  # a few updates first, so the Adam slots and counters are not zero
            step.run(x[:B], y[:B])
        settle()
        saved = [v.numpy() for v in step.state]
        first = None
        loss_diff = counter_diff = 0
        for _ in range(calls):
            for v, s in zip(step.state, saved, strict=True):
                v.assign(s)
            if arm == "settle":
                settle()
            losses, _ = ms.run(x, y)
            counters = [float(c.numpy()) for c in step.counters.values()]
            if first is None:
                first = (losses.tolist(), counters)
                continue
            loss_diff += losses.tolist() != first[0]
            counter_diff += counters != first[1]
    return {"arm": arm, "calls": calls, "loss_differs": loss_diff, "counters_differ": counter_diff,
            "first_losses": first[0] if first else []}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=12)
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.calls)), flush=True)
        return 0
    print(f"load average at start {os.getloadavg()[0]:.2f}", flush=True)
    print(f"{'round':>5} {'arm':>6}  calls  loss differs  counters differ  (against the arm's first call)")
    for r in range(args.rounds):
        for arm in ("none", "settle"):
            proc = subprocess.run([sys.executable, __file__, "--child", arm, "--calls", str(args.calls)],
                                  capture_output=True, text=True, timeout=900)
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                print(f"{r:>5} {arm:>6}  failed: {proc.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            res = json.loads(line[len("RESULT "):])
            print(f"{r:>5} {arm:>6}  {res['calls'] - 1:>5}  {res['loss_differs']:>12}  {res['counters_differ']:>15}",
                  flush=True)
    print(f"load average at end {os.getloadavg()[0]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
