"""How long the compiled pipeline takes to trace and place, for two source trees side by side.

Run (from the repository root)::

    python benchmarks/compile_time.py --trees OLD_TREE,. [--configs minires:coarse-sync:16,minires:fine-sync:16]
        [--steps 64] [--repeats 3]

Why: the simulator's validation (issue 16) spends most of its hours compiling: every model-parallel run of a
small model traces and places a call of 64 training steps, 20-130 s each, against about a second of training.
This measures, for each configuration (model:method:batch on 2 pinned local workers, ``--pipeline compiled``,
``--steps`` steps, as ``benchmarks/simulator_validation.py`` runs it through :func:`run_measured`), the seconds
spent tracing the call's function, its first call (placing it on the workers, which includes the trace), the
comparison's whole ``compile_seconds`` and the timed images/s, in a fresh process per (tree, configuration,
repeat), trees alternating, so the ratio of two trees is measured side by side. A tree is a checkout of this
repository (``git worktree add /tmp/old <commit>``); its ``hgpart/runtime`` must point at its ``runtime/``
(``ln -s ../runtime /tmp/old/hgpart/runtime``), since the installed package maps ``hgpart.runtime`` to this
checkout's folder. Prints each run, then the medians per tree and configuration and their ratio, and the load
average at start and end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from simulator_validation import loadavg  # noqa: E402 - the benchmark next to this one


def child(model: str, method: str, batch: int, steps: int) -> dict[str, Any]:
    """One configuration in this process: its trace, first call, compile seconds and images/s."""
    from hgpart import quiet

    quiet.quiet_python()
    import hgpart.runtime.multistep as msm
    from hgpart.runtime.devices import open_devices

    ds = open_devices("local", 2, inter_op=4)
    seen: dict[str, float] = {}
    function, run = msm.MultiStep.function, msm.MultiStep.run

    def timed_function(self: Any, n: int) -> Any:
        new = n not in self._fns
        t = time.perf_counter()
        out = function(self, n)
        if new:
            seen["trace_s"] = seen.get("trace_s", 0.0) + time.perf_counter() - t
        return out

    def timed_run(self: Any, x: Any, y: Any) -> Any:
        t = time.perf_counter()
        out = run(self, x, y)
        seen.setdefault("first_call_s", time.perf_counter() - t)
        return out

    msm.MultiStep.function, msm.MultiStep.run = timed_function, timed_run  # type: ignore[method-assign]
    from hgpart.compare.measured import run_measured

    cmp = run_measured(model, device_set=ds, batch_sizes=[batch], steps=steps, methods=[method], eval_n=64,
                       evals_per_epoch=1, devices_label="local", progress=False, pipeline="compiled",
                       input_shape=(32, 32, 3) if model in ("minivgg", "minires") else None)
    r = cmp.runs[0]
    return {**seen, "compile_s": r.compile_seconds, "images_per_s": r.images_per_s, "status": r.status}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", required=True, help="comma-separated checkouts, e.g. /tmp/old,.")
    ap.add_argument("--configs", default="minires:coarse-sync:16,minires:fine-sync:16")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        model, method, batch = args.child.split(":")
        print(json.dumps(child(model, method, int(batch), args.steps)))
        return
    trees = [str(Path(t).resolve()) for t in args.trees.split(",")]
    configs = args.configs.split(",")
    print(f"$ python benchmarks/compile_time.py --trees {args.trees} --configs {args.configs} --steps {args.steps} "
          f"--repeats {args.repeats}   # {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load average "
          f"at start {loadavg()}", flush=True)
    for tree in trees:
        head = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        print(f"tree {tree}: {head.stdout.strip()}")
    got: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rep in range(args.repeats):
        for cfg in configs:
            for tree in trees:
                env = {**os.environ, "PYTHONPATH": tree}
                out = subprocess.run([sys.executable, __file__, "--child", cfg, "--steps", str(args.steps),
                                      "--trees", tree], capture_output=True, text=True, env=env, cwd=tree)
                lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
                if out.returncode or not lines:
                    print(f"{cfg} {tree}: failed ({out.returncode}): {out.stderr.strip().splitlines()[-1:]}")
                    continue
                r = json.loads(lines[-1])
                got.setdefault((cfg, tree), []).append(r)
                print(f"repeat {rep} {cfg} {Path(tree).name}: trace {r.get('trace_s', 0):.1f} s, first call "
                      f"{r.get('first_call_s', 0):.1f} s, compile {r['compile_s']:.1f} s, "
                      f"{r['images_per_s']:.0f} images/s", flush=True)
    print("medians:")
    for cfg in configs:
        med = [(t, {k: statistics.median(r.get(k, 0.0) for r in got[(cfg, t)])
                    for k in ("trace_s", "first_call_s", "compile_s", "images_per_s")}) for t in trees
               if (cfg, t) in got]
        for t, m in med:
            print(f"  {cfg} {t}: trace {m['trace_s']:.1f} s, first call {m['first_call_s']:.1f} s, compile "
                  f"{m['compile_s']:.1f} s, {m['images_per_s']:.0f} images/s")
        for (a, ma), (b, mb) in ((med[0], other) for other in med[1:]):
            print(f"  {cfg} {Path(b).name} / {Path(a).name}: trace {mb['trace_s'] / ma['trace_s']:.2f}, compile "
                  f"{mb['compile_s'] / ma['compile_s']:.2f}, images/s {mb['images_per_s'] / ma['images_per_s']:.2f}")
    print(f"load average at end {loadavg()}")


if __name__ == "__main__":
    main()
