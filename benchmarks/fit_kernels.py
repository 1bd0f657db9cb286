"""Why Keras ``fit`` and hgpart's K=1 runtime differ in speed on one core: kernel time by op type, side by side.

Run::

    python benchmarks/fit_kernels.py                      # vgg16 at 64x64, batch 32, 3 profiled steps
    python benchmarks/fit_kernels.py --model minivgg --steps 5

Two children, one after the other, each in its own process pinned to core 0 with one intra-op thread (as the
runtime's one-core worker and ``runtime_throughput.py``'s ``fit`` baseline are):

* ``fit``: the zoo's Keras model, Adam, ``model.fit`` on synthetic data;
* ``runtime``: hgpart's K=1 placement of the same model trained by the runtime on one logical device in the
  child's own process (the same step function the one-core local worker runs, without the worker's RPC).

Each warms up, then runs ``--steps`` steps under TensorFlow's profiler and sums the kernel events of the trace
by op type (oneDNN's ``_Mkl``/``_MklNative`` prefixes kept, so fused kernels show as such). Printed: wall ms per
step in and outside the profiler, and ms per step of every op type that takes at least 0.5 % of either side.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

MODELS = {"minivgg": (32, 32, 3), "minires": (32, 32, 3), "vgg16": (64, 64, 3)}


def kernel_ms(logdir: Path) -> dict[str, float]:
    """Summed duration (ms) of every kernel event in the profiler's XSpace files under ``logdir``, by op type."""
    from hgpart.runtime.devtrace import xspace_kernels

    out: dict[str, float] = defaultdict(float)
    for ev in xspace_kernels(sorted(logdir.rglob("*.xplane.pb"))):
        out[ev.op_type] += ev.dur_ns / 1e6
    return dict(out)


def child(which: str, model: str, steps: int, batch: int) -> dict[str, object]:
    os.sched_setaffinity(0, {0})
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(4)
    shape = MODELS[model]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch * steps, *shape)).astype(np.float32)
    y = rng.integers(0, 10, batch * steps).astype(np.int32)
    if which == "fit":
        import keras

        from hgpart.models import load_keras_model

        keras.utils.set_random_seed(0)
        m = load_keras_model(model, input_shape=shape, num_classes=10)
        m.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
        m.fit(x[:batch], y[:batch], batch_size=batch, epochs=1, verbose=0)

        def run() -> None:
            m.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False)
    else:
        from hgpart.runtime.api import PartitionedModel
        from hgpart.runtime.devices import open_devices
        from hgpart.runtime.train import run_pipeline

        from hgpart.hypergraph import build_hypergraph
        from hgpart.models import load_graph
        from hgpart.placement import Placement
        from hgpart.profile import analytic_profile

        graph = load_graph(model, shape, 10)
        work = analytic_profile(graph, batch).work()
        hg = build_hypergraph(graph, work, batch_size=batch, grain="coarse")
        one = Placement.from_vertex_parts(graph, hg, np.zeros(hg.num_vertices, dtype=np.int64), k=1,
                                          method="single", work=work)
        ds = open_devices("logical", 1)
        pm = PartitionedModel.from_placement(one, device_set=ds, inflight=1)
        step = pm.train_step(batch, "async", 1)

        def run() -> None:
            run_pipeline(step, x, y, steps=steps, batch_size=batch, inflight=1)

        run()  # trace, place and warm up
    t = time.perf_counter()
    run()
    plain = (time.perf_counter() - t) / steps
    logdir = Path(tempfile.mkdtemp())
    tf.profiler.experimental.start(str(logdir))
    t = time.perf_counter()
    run()
    traced = (time.perf_counter() - t) / steps
    tf.profiler.experimental.stop()
    ms = {k: v / steps for k, v in kernel_ms(logdir).items()}
    return {"which": which, "model": model, "step_ms": 1000 * plain, "traced_step_ms": 1000 * traced, "ops": ms,
            "load": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="vgg16", choices=sorted(MODELS))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("ROW " + json.dumps(child(args.child, args.model, args.steps, args.batch_size)), flush=True)
        return
    print(f"$ python {' '.join(sys.argv)}   # load {os.getloadavg()[0]:.2f} at start", flush=True)
    rows = {}
    for which in ("fit", "runtime"):
        proc = subprocess.run([sys.executable, __file__, "--child", which, "--model", args.model, "--steps",
                               str(args.steps), "--batch-size", str(args.batch_size)],
                              capture_output=True, text=True, timeout=1800)
        got = [json.loads(ln[4:]) for ln in proc.stdout.splitlines() if ln.startswith("ROW ")]
        if not got:
            print(f"{which}: child exited {proc.returncode}\n" + "\n".join(proc.stderr.splitlines()[-8:]))
            return
        rows[which] = got[0]
    f, r = rows["fit"], rows["runtime"]
    print(f"{args.model} {MODELS[args.model][0]}x{MODELS[args.model][1]}, batch {args.batch_size}, one core: "
          f"fit {f['step_ms']:.0f} ms/step ({f['traced_step_ms']:.0f} traced), runtime K=1 {r['step_ms']:.0f} "
          f"({r['traced_step_ms']:.0f} traced); fit / runtime = {f['step_ms'] / r['step_ms']:.2f}")
    total = {w: sum(rows[w]["ops"].values()) for w in rows}
    print(f"{'op type':<44} {'fit ms/step':>12} {'runtime':>10}")
    keys = sorted(set(f["ops"]) | set(r["ops"]), key=lambda k: -(f["ops"].get(k, 0) + r["ops"].get(k, 0)))
    for k in keys:
        a, b = f["ops"].get(k, 0.0), r["ops"].get(k, 0.0)
        if a >= 0.005 * total["fit"] or b >= 0.005 * total["runtime"]:
            print(f"{k:<44} {a:12.1f} {b:10.1f}")
    print(f"{'all kernels':<44} {total['fit']:12.1f} {total['runtime']:10.1f}")
    print(f"# load {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
