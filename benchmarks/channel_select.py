"""Channel selection in the runtime: a gather along the last axis against a slice and a one-hot product, and what
the choice does to whole training steps.

Run (from the repository root)::

    python benchmarks/channel_select.py                          # the op timings only (one pinned core)
    python benchmarks/channel_select.py --ab 9096bca --rounds 3  # plus compare-run at 9096bca vs this tree

Why: the fine grain selects channels at every layer (a part's partial maps for each reduction part, placed among
that part's filters; the views' columns), and the runtime did it with ``tf.gather(x, idx, axis=-1)``. A device
trace of minires fine-sync showed those gathers and their gradients (segment sums and transposes) taking longer
than the layer's convolutions. ``hgpart.kinds.tfops.take_channels`` picks the cheapest of a slice, a one-hot
matrix product and a gather; this measures the choice.

1. Op timings: for feature maps of the zoo's shapes, ms per forward + backward of each way to select ``m`` of
   ``c`` channels, in this process pinned to one core with one intra- and one inter-op thread, median of
   ``--reps`` timings of ``--iters`` calls.
2. ``--ab REF``: ``hgpart compare-run --devices local`` of ``--methods`` for ``--models`` at ``--batch-size``,
   ``--steps`` steps, from a git worktree of ``REF`` and from this tree, alternating within each round, each run
   its own process (two pinned local workers). Printed: images/s per run, the median per side and the median
   of the per-round ratios (this tree / REF).

The load average is printed at the start and end of the run and of every compare-run process.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

#: (maps shape without the channel axis, channels c, selected m): minires 32 / minivgg 32 at micro-batch 16,
#: vgg16 64 blocks 3-5 at batch 32
SHAPES = [((16, 32, 32), 16, 10), ((16, 16, 16), 64, 40), ((32, 16, 16), 128, 70), ((32, 8, 8), 256, 150),
          ((32, 8, 8), 512, 300)]
ROOT = Path(__file__).resolve().parent.parent


def loadavg() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def op_timings(iters: int, reps: int) -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import numpy as np
    import tensorflow as tf

    from hgpart.kinds import tfops

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    rng = np.random.default_rng(0)
    print("ms per forward + backward, one core; product / slice / gather columns, then the runtime's choice",
          flush=True)
    for lead, c, m in SHAPES:
        x = tf.constant(rng.standard_normal((*lead, c)).astype(np.float32))
        idx = np.sort(rng.choice(c, m, replace=False))
        sel = np.zeros((c, m), np.float32)
        sel[idx, np.arange(m)] = 1.0
        ways = {
            "gather": lambda v, idx=idx: tf.gather(v, idx, axis=-1),
            "product": lambda v, sel=sel, c=c, m=m, lead=lead: tf.reshape(tf.reshape(v, [-1, c]) @ sel, [*lead, m]),
            "slice": lambda v, m=m: v[..., :m],
            "runtime": lambda v, idx=idx: tfops.take_channels(v, idx),
        }
        row = []
        for name, way in ways.items():
            def step(v: tf.Tensor, way=way) -> tf.Tensor:
                with tf.GradientTape() as tape:
                    tape.watch(v)
                    y = way(v)
                    loss = tf.reduce_sum(y * y)
                return tape.gradient(loss, v)

            fn = tf.function(step)
            fn(x).numpy()
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                for _ in range(iters):
                    r = fn(x)
                r.numpy()
                times.append((time.perf_counter() - t0) / iters * 1e3)
            row.append(f"{name} {statistics.median(times):7.3f}")
        picked = "product" if c * m <= tfops.SELECT_BY_MATMUL_MAX else "gather"
        print(f"  maps {lead} x {c:3d} channels, select {m:3d}: " + "  ".join(row) + f"   (runtime: {picked})",
              flush=True)


#: run the CLI of the source tree in argv[1]: its ``hgpart`` and its ``runtime/`` folder as ``hgpart.runtime``
#: (the package-dir mapping of pyproject.toml), not the installed checkout's
_FROM_TREE = """
import importlib.util, sys
tree = sys.argv.pop(1)
sys.path.insert(0, tree)
import hgpart
spec = importlib.util.spec_from_file_location("hgpart.runtime", tree + "/runtime/__init__.py",
                                              submodule_search_locations=[tree + "/runtime"])
mod = importlib.util.module_from_spec(spec)
sys.modules["hgpart.runtime"] = mod
spec.loader.exec_module(mod)
assert hgpart.__file__.startswith(tree), hgpart.__file__
from hgpart.cli import main
main(sys.argv[1:])
"""


def compare_run(tree: Path, python: str, model: str, size: int, batch: int, steps: int, methods: str,
                out: Path) -> dict[str, float]:
    start = loadavg()
    argv = ["compare-run", "-m", model, "-i", str(size), "--devices", "local", "--batch-sizes", str(batch),
            "--steps", str(steps), "--methods", methods, "--no-trace", "--no-plots", "--eval-n", "64",
            "--evals-per-epoch", "1", "-o", str(out)]
    subprocess.run([python, "-c", _FROM_TREE, str(tree), *argv], cwd=tree, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    with open(out / "runs.csv") as f:
        got = {r["method"]: float(r["images_per_s"]) for r in csv.DictReader(f) if r["status"] == "ok"}
    print(f"    load {start} -> {loadavg()}", flush=True)
    return got


def ab(ref: str, models: list[str], batch: int, steps: int, methods: str, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        wt = Path(tmp) / "ref"
        subprocess.run(["git", "worktree", "add", "--detach", str(wt), ref], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for spec in models:
                model, size = spec.split(":")
                got: dict[str, dict[str, list[float]]] = {"ref": {}, "this": {}}
                for r in range(rounds):
                    for side, tree in (("ref", wt), ("this", ROOT)) if r % 2 == 0 else (("this", ROOT), ("ref", wt)):
                        ips = compare_run(tree, sys.executable, model, int(size), batch, steps, methods,
                                          Path(tmp) / f"{side}_{model}_{r}")
                        for meth, v in ips.items():
                            got[side].setdefault(meth, []).append(v)
                        print(f"  {model} {size} round {r + 1} {side:4s} ({ref if side == 'ref' else 'this tree'}): "
                              + ", ".join(f"{k} {v:.0f}" for k, v in ips.items()), flush=True)
                for meth in got["this"]:
                    a, b = got["ref"].get(meth, []), got["this"][meth]
                    ratios = [y / x for x, y in zip(a, b, strict=False)]
                    print(f"{model} {size} {meth}: images/s median {statistics.median(a):.0f} at {ref} -> "
                          f"{statistics.median(b):.0f} here; per-round ratio median {statistics.median(ratios):.2f} "
                          f"({', '.join(f'{x:.2f}' for x in ratios)})", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(wt)], cwd=ROOT, check=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--ab", default="", help="a git ref to compare whole training steps against")
    ap.add_argument("--models", default="minires:32,minivgg:32")
    ap.add_argument("--methods", default="single,coarse-sync,fine-sync,fine-async")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"$ python benchmarks/channel_select.py {' '.join(sys.argv[1:])}   # load average {loadavg()}", flush=True)
    if args.ab:
        print(f"compare-run {args.methods}, batch {args.batch_size}, {args.steps} steps, {args.rounds} rounds "
              f"alternating {args.ab} and this tree, each run its own process:", flush=True)
        ab(args.ab, args.models.split(","), args.batch_size, args.steps, args.methods, args.rounds)
    else:
        op_timings(args.iters, args.reps)
    print(f"load average at end {loadavg()}", flush=True)


if __name__ == "__main__":
    main()
