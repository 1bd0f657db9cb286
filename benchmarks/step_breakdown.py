"""Where one K=2 training step's time goes: per device, by cause, from the device trace and the client's clocks.

Run::

    python benchmarks/step_breakdown.py                                  # minivgg 32x32 and vgg16 64x64, batch 32
    python benchmarks/step_breakdown.py --models vgg16 --steps 8

For every model: a coarse K=2 placement (Mt-KaHyPar, analytic profile) trained on 2 local pinned workers (one core
each), each model in its own child process. Measured, in this order, after a warm-up that makes no update:

* ``sequential``: ``--steps`` steps one after the other (1 in flight): wall and client CPU seconds per step;
* ``async``: ``--steps`` steps with 2 in flight: wall and client CPU per step (throughput);
* ``feed``: copying one batch from the client to worker 0 (``tf.identity`` on the worker of a client tensor);
* ``trace``: the workers' profiler over a few async steps (:func:`hgpart.runtime.devtrace.capture_device_trace`);
  every kernel is put in one cause: convolution / matmul compute (forward and backward), channel plumbing (gather,
  concat, slice, split of the placed tensors), elementwise and pooling, send/recv between workers, optimizer update,
  other. Traced steps = executions of the loss kernel.

Printed and written (``--out``/``breakdown.json``, ``report.md``): per model, the per-step wall time, each device's
busy fraction and its kernel time per step by cause, kernels per step, client CPU per step, feed time, and the load
average at the start and end of every measurement (the machine is shared).
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

MODELS = {"minivgg": (32, 32, 3), "vgg16": (64, 64, 3), "minires": (32, 32, 3)}
CAUSES = ("conv/matmul", "channel plumbing", "elementwise/pool/bn", "send/recv", "optimizer", "other")
_COMPUTE = ("Conv2D", "MatMul", "DepthwiseConv", "_FusedConv2D", "_FusedMatMul", "BiasAddGrad")
_PLUMBING = ("GatherV2", "ConcatV2", "Slice", "StridedSlice", "Split", "SplitV", "Identity", "Pack", "Unpack",
             "Transpose", "Reshape", "ScatterNd", "TensorScatterUpdate")
_COMM = ("_Send", "_Recv", "_HostSend", "_HostRecv", "Send", "Recv")
_OPT = ("ResourceApplyAdam", "ResourceApplyKerasMomentum", "AssignVariableOp", "AssignAddVariableOp",
        "AssignSubVariableOp", "ReadVariableOp")
_ELEM = ("Relu", "ReluGrad", "MaxPool", "MaxPoolGrad", "AvgPool", "AvgPoolGrad", "FusedBatchNorm", "Mul", "AddV2",
         "Sub", "RealDiv", "Mean", "Sum", "Square", "Rsqrt", "BiasAdd", "Softmax",
         "SparseSoftmaxCrossEntropyWithLogits",
         "AddN", "Tile", "BroadcastTo", "Neg", "SquaredDifference", "Maximum", "Select", "ZerosLike", "OnesLike")


def cause(op_type: str) -> str:
    """The cause a kernel's time is charged to (see the module docstring).

    oneDNN builds of TensorFlow name their kernels ``_MklNativeConv2DBackpropInput``, ``_MklNativeFusedConv2D``,
    ``_MklMatMul``: the prefix is dropped (a fused kernel keeps its ``_Fused``) before the type is classified.
    """
    for prefix in ("_MklNative", "_Mkl"):
        if op_type.startswith(prefix):
            op_type = op_type[len(prefix):]
            op_type = "_" + op_type if op_type.startswith("Fused") else op_type
            break
    if op_type.startswith(_COMPUTE):
        return "conv/matmul"
    if op_type in _COMM:
        return "send/recv"
    if op_type in _OPT:
        return "optimizer"
    if op_type in _PLUMBING:
        return "channel plumbing"
    if op_type.startswith(_ELEM):
        return "elementwise/pool/bn"
    return "other"


def load() -> float:
    return round(os.getloadavg()[0], 2)


def make_placement(model: str, folder: Path, batch_size: int, seed: int) -> str:
    """The coarse K=2 placement, weighted by the model's one-core profile (``profiles/..._c1.json``) when it exists,
    else by FLOP counts (as ``benchmarks/runtime_throughput.py`` does)."""
    from hgpart.hypergraph import build_hypergraph
    from hgpart.models import load_graph
    from hgpart.partitioners import partition
    from hgpart.placement import Placement
    from hgpart.profile import Profile, analytic_profile, default_profile_path

    graph = load_graph(model, MODELS[model], 10)
    measured = default_profile_path(graph, batch_size, "profiles", cores=1)
    work = Profile.load(measured).work() if measured.exists() else analytic_profile(graph, batch_size).work()
    hg = build_hypergraph(graph, work, batch_size=batch_size, grain="coarse")
    res = partition(hg, k=2, backend="mtkahypar", epsilon=0.05, seed=seed)
    pl = Placement.from_vertex_parts(graph, hg, res.parts, k=2, method="hypergraph", work=work)
    return str(pl.save(folder / f"{model}_coarse_k2_b{batch_size}.json"))


def _timed(fn: Any, *args: Any, **kwargs: Any) -> dict[str, float]:
    l0, c0, w0 = load(), os.times(), time.perf_counter()
    fn(*args, **kwargs)
    w, c1 = time.perf_counter() - w0, os.times()
    return {"wall_s": w, "client_cpu_s": (c1.user + c1.system) - (c0.user + c0.system), "load_start": l0,
            "load_end": load()}


def _feed_s(ds: Any, x: Any) -> float:
    import tensorflow as tf

    times = []
    for _ in range(5):
        t = time.perf_counter()
        with tf.device(ds.host):
            xt = tf.constant(x)
        with tf.device(ds.devices[0]):
            tf.identity(xt).numpy()  # round trip: the client waits for the worker to hold the batch
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _by_cause(trace_path: str) -> dict[str, Any]:
    trace = json.loads(Path(trace_path).read_text())
    ev = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    steps = max(1, sum(e["cat"] == "SparseSoftmaxCrossEntropyWithLogits" for e in ev))
    out: dict[str, Any] = {"traced_steps": steps, "traced_wall_s": trace["otherData"]["traced_wall_s"],
                           "busy": trace["otherData"]["device_busy"], "parts": {}}
    for p in sorted({e["pid"] for e in ev}):
        mine = [e for e in ev if e["pid"] == p]
        ms = dict.fromkeys(CAUSES, 0.0)
        top: dict[str, float] = {}
        for e in mine:
            ms[cause(e["cat"])] += e["dur"] / 1000.0 / steps
            top[e["cat"]] = top.get(e["cat"], 0.0) + e["dur"] / 1000.0 / steps
        out["parts"][p] = {"ms_per_step": ms, "kernels_per_step": len(mine) / steps,
                           "top_ops_ms": dict(sorted(top.items(), key=lambda kv: -kv[1])[:8])}
    return out


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (from /proc)."""
    f = Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def _busy(pids: list[int], fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``_timed`` plus each worker's CPU seconds over the wall time (its core's busy fraction)."""
    c0 = [_cpu_s(p) for p in pids]
    r = _timed(fn, *args, **kwargs)
    r["worker_busy"] = [round((_cpu_s(p) - c) / r["wall_s"], 3) for p, c in zip(pids, c0, strict=True)]
    return r


def child(model: str, path: str, args: argparse.Namespace) -> dict[str, Any]:
    from hgpart.runtime.api import PartitionedModel
    from hgpart.runtime.cluster import guarded, open_local, worker_info
    from hgpart.runtime.devtrace import capture_device_trace
    from hgpart.runtime.pipeline import shuffled_batches
    from hgpart.runtime.stagepipe import run_staged
    from hgpart.runtime.step import restoring
    from hgpart.runtime.train import load_dataset, run_pipeline

    B = args.batch_size
    row: dict[str, Any] = {"model": model, "shape": list(MODELS[model]), "batch_size": B, "load_open": load()}
    with open_local(2, inter_op=4, start_timeout=180) as ds:
        pids = [w.pid for w in worker_info(ds) if w.pid is not None]
        pm = PartitionedModel.from_placement(path, device_set=ds, inflight=2, pipeline="stages")
        x, y = load_dataset("synthetic", tuple(pm.placement.graph.input_shape), 10, n=4 * B, device=ds.host)
        step = pm.train_step(B, "async", 2)
        staged = pm.staged_step(step)
        row["stages"] = [{"part": st.part, "layers": len(st.layers)} for st in staged.stages] if staged else None
        m = pm.placement.recompute_metrics()
        row["predicted_work"] = [float(w) for w in m.part_work]  # the profile's ms per step, by part
        with restoring(step.state):  # measurement only: no update is kept
            for name, inflight in (("sequential", 1), ("async", 2)):
                r = _busy(pids, guarded, ds, run_pipeline, step, x, y, steps=args.steps, batch_size=B,
                          inflight=inflight)
                row[name] = {k: (v / args.steps if k.endswith("_s") else v) for k, v in r.items()}
                row[name]["images_per_s"] = B / row[name]["wall_s"]
            if staged is not None:
                task = shuffled_batches(x, y, batch_size=B, seed=0)
                for name, window in ((f"stages_{w}", w) for w in args.windows):
                    r = _busy(pids, guarded, ds, run_staged, staged, args.steps, task, images_per_task=B,
                              window=window)
                    row[name] = {k: (v / args.steps if k.endswith("_s") else v) for k, v in r.items()}
                    row[name]["images_per_s"] = B / row[name]["wall_s"]
            row["feed_s"] = _feed_s(ds, x[:B])
            folder = Path(args.out) / f"trace_{model}"
            l0 = load()

            def run_traced(n: int) -> None:
                guarded(ds, run_pipeline, step, x, y, steps=n, batch_size=B, inflight=2, seed=1)

            dt = capture_device_trace(step, ds, run_traced, folder, steps=4, inflight=2, meta={"model": model})
            row["trace"] = {**_by_cause(str(dt.path)), "load_start": l0, "load_end": load(),
                            "file": str(dt.path)}
    return row


def _max_avg(v: list[float]) -> float:
    return max(v) / (sum(v) / len(v)) if v and sum(v) > 0 else float("nan")


def _max_avg_line(r: dict[str, Any]) -> str:
    """Predicted Max/Avg of per-part work beside the measured Max/Avg of per-worker busy time."""
    pred = _max_avg(r["predicted_work"])
    parts = [f"- Max/Avg: predicted {pred:.3f} (work by part " + ", ".join(f"{w:.0f}" for w in r["predicted_work"])
             + " ms)"]
    for n in ("sequential", "stages_1", "stages_2"):
        if n in r:
            meas = _max_avg(r[n]["worker_busy"])
            parts.append(f"{n} measured {meas:.3f} ({100 * (meas / pred - 1):+.1f} %)")
    return "; ".join(parts)


def report(rows: list[dict[str, Any]]) -> str:
    lines = ["# One K=2 step by cause (coarse placement, 2 local workers pinned one core each, batch 32)", "",
             "Worker busy = the worker process's CPU seconds / wall seconds (one pinned core each), read from /proc.",
             "Max/Avg: predicted = the placement's per-part work (its profile); measured = per-worker CPU seconds.", ""]
    for r in rows:
        s, a, t = r["sequential"], r["async"], r["trace"]
        lines += [f"## {r['model']} {'x'.join(map(str, r['shape']))}", "",
                  f"- whole-step function, sequential (1 in flight): {1000 * s['wall_s']:.1f} ms/step, client CPU "
                  f"{1000 * s['client_cpu_s']:.1f} ms/step, worker busy "
                  + ", ".join(f"{100 * b:.0f}%" for b in s["worker_busy"])
                  + f" (load {s['load_start']} -> {s['load_end']})",
                  f"- whole-step function, 2 in flight: {1000 * a['wall_s']:.1f} ms/step = {a['images_per_s']:.1f} "
                  f"images/s, client CPU {1000 * a['client_cpu_s']:.1f} ms/step, worker busy "
                  + ", ".join(f"{100 * b:.0f}%" for b in a["worker_busy"])
                  + f" (load {a['load_start']} -> {a['load_end']})",
                  f"- host feed of one batch to worker 0 (round trip): {1000 * r['feed_s']:.1f} ms",
                  _max_avg_line(r),
                  *(["- stages (part: layers): " + ", ".join(f"{st['part']}: {st['layers']}" for st in r["stages"])]
                    if r.get("stages") else []),
                  *[f"- stages, {n[7:]} in flight (1F1B, one function per stage; "
                    f"{len(r['stages'] or [])} stages): {1000 * r[n]['wall_s']:.1f} ms/step = "
                    f"{r[n]['images_per_s']:.1f} images/s, worker busy "
                    + ", ".join(f"{100 * b:.0f}%" for b in r[n]["worker_busy"])
                    + f" (load {r[n]['load_start']} -> {r[n]['load_end']})"
                    for n in sorted((n for n in r if n.startswith("stages_")), key=lambda n: int(n[7:]))],
                  f"- trace: {t['traced_steps']} async steps in {t['traced_wall_s']:.2f} s = "
                  f"{1000 * t['traced_wall_s'] / t['traced_steps']:.1f} ms/step; busy "
                  + ", ".join(f"part {p} {100 * b:.0f}%" for p, b in enumerate(t["busy"]))
                  + f" (load {t['load_start']} -> {t['load_end']})", "",
                  "| part | " + " | ".join(CAUSES) + " | sum | kernels/step |",
                  "|---" * (len(CAUSES) + 3) + "|"]
        for p, d in t["parts"].items():
            ms = d["ms_per_step"]
            lines.append(f"| {p} | " + " | ".join(f"{ms[c]:.1f}" for c in CAUSES)
                         + f" | {sum(ms.values()):.1f} | {d['kernels_per_step']:.0f} |")
        lines += ["", "Top kernels (ms/step): " + "; ".join(
            f"part {p}: " + ", ".join(f"{k} {v:.1f}" for k, v in d["top_ops_ms"].items())
            for p, d in t["parts"].items()), ""]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="minivgg,vgg16")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--out", default="benchmarks/results/step_breakdown")
    ap.add_argument("--windows", type=lambda v: [int(w) for w in v.split(",")], default=[1, 2, 3],
                    help="batches in flight through the stage pipeline, one measurement each (comma-separated)")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    ap.add_argument("--path", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("ROW " + json.dumps(child(args.child, args.path, args)), flush=True)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for model in args.models.split(","):
        path = make_placement(model, out, args.batch_size, seed=1)
        cmd = [sys.executable, __file__, "--child", model, "--path", path, "--steps", str(args.steps),
               "--batch-size", str(args.batch_size), "--out", str(out),
               "--windows", ",".join(map(str, args.windows))]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        got = [json.loads(ln[4:]) for ln in proc.stdout.splitlines() if ln.startswith("ROW ")]
        if not got:
            print(f"{model}: child exited {proc.returncode}\n" + "\n".join(proc.stderr.splitlines()[-8:]))
            continue
        rows += got
        print(report(got), flush=True)
    from hgpart.fileio import atomic_write_text, write_json

    write_json(out / "breakdown.json", {"command": "python " + " ".join(sys.argv), "rows": rows})
    atomic_write_text(out / "report.md", report(rows))


if __name__ == "__main__":
    main()
