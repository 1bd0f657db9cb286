"""Simulator vs measurement: every `hgpart compare-run` strategy on 2 local workers, predicted vs measured images/s.

Run (from the repository root)::

    python benchmarks/simulator_validation.py        # minivgg 32, minires 32 (BS 16/32/64), vgg16 64 (BS 8/16/32)
    python benchmarks/simulator_validation.py --models minivgg:32:24 --batch-sizes 16,32   # model:input:steps
    python benchmarks/simulator_validation.py --models minivgg:32:112 --steps-per-batch 16:64  # steps at B=16: 64
    python benchmarks/simulator_validation.py --cluster my_cluster.json --skip-measure     # re-simulate only
    python benchmarks/simulator_validation.py --measure-only --out OUT   # the runs only; calibrate later, then
                                                                         # --skip-measure --cluster OUT/...json

What it does, in this order, each step in its own process:

1. ``hgpart calibrate`` into ``OUT/cluster_this-machine.json`` (unless ``--cluster`` names a calibrated file): the
   compute rate, the link between two pinned local workers and the memory bandwidth, and (``--profile``) this
   machine's one-core profiles of every model measured below at every batch size measured and at half of it (the
   batch of each of data parallelism's two replicas), into ``OUT/profiles/``.
   Nothing else calibrates the simulator; it is never fitted to the runs below. The runs depend on no
   calibration, so ``--measure-only`` makes them first and stops; a later invocation with ``--skip-measure`` and a
   cluster file calibrated after them (steps 2b and 3) completes the validation.
2. For every model and batch size, a child process opens 2 local workers (one pinned core each) and runs the
   measured comparison (:func:`hgpart.compare.measured.run_measured`, as ``hgpart compare-run --devices local``
   does) for ``steps`` global steps of every strategy that runs on worker processes, keeping each model-parallel
   run's placement. Images/s = images trained / training wall time (the pipeline fill included, evaluation not).
3. Every measured run is simulated on the calibrated cluster with the same placement, batch size, mode and batches in
   flight / micro-batches (K); a comparison that kept no placement (only the single device and data parallelism ran,
   as for vgg16) gets a layer-wise one from ``hgpart partition --analytic``, of which those strategies read only the
   model's layers (:func:`replica_placement`). compare-run trains model parallelism as ``hgpart train`` does
   (``--pipeline auto``: as pipeline stages, or one whole-step function per step; each run records which), and each
   run is simulated with the pipeline it ran: ``stages`` (batches in flight overlap on the devices, sync
   micro-batches form a pipeline) or ``graph`` (calls do not overlap; sync micro-batches advance together). The async
   data-parallel workers' calls, multi-device functions, are simulated with ``graph`` (they take turns). Runs
   recorded before compare-run chose a pipeline ran ``graph``. The cluster's ``call_overhead_us`` (measured by
   ``hgpart calibrate``) starts every call (the single device's and data parallelism's calls, which feed their batch
   from the client, cost the measured ``step_calls`` for their bytes and devices instead), sync data parallelism's
   all-reduce costs the measured ``allreduce`` of the link, and the link holds both workers for every transfer
   (``holds_devices``: the workers' cores do the copies).

2b. ``hgpart calibrate-split`` (unless ``--no-split-cost``) of every placement a model-parallel run used, at its
   batch size and micro-batches, into the cluster file: each placement's training step with every part on one
   pinned worker against the unsplit model's, timed side by side (no run is timed again: this is the cost of the
   split layers' smaller ops, selections and concatenations on one core, which the profiles of whole layers do not
   hold). The simulator scales that placement's layer times by it. The unsplit step it times beside them is also
   timed at every batch the single device and data parallelism call (B and a replica's B / K), with the model's
   replica placement where no model-parallel run kept one: the step-call cost of those calls
   (:func:`hgpart.simulate.costs.worker_call_cost`).

Writes ``OUT/validation.csv`` (``model,strategy,batch_size,measured_ips,predicted_ips,error``...), ``OUT/report.md``
(median and worst absolute error, per model and per strategy, the load average at the start and end of every
child), ``OUT/measured/*.json`` (the comparisons), ``OUT/placements/`` and ``OUT/output.txt`` is the printed run.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

DEFAULT_MODELS = "minivgg:32:30,minires:32:30,vgg16:64:8"
DEFAULT_BATCHES = {"vgg16": "8,16,32"}
#: compare-run's strategies that run on local worker processes (MirroredStrategy does not: docs/comparison.md)
#: the strategies that run the whole model on every device (no placement of its own)
BASELINES = ("single", "sync-dp", "async-dp-1ps", "async-dp-dps")
METHODS = ("single", "layerwise-async", "layerwise-sync", "coarse-async", "coarse-sync", "fine-async", "fine-sync",
           "sync-dp", "async-dp-1ps", "async-dp-dps")


def loadavg() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def child(model: str, size: int, batch: int, steps: int, out: Path, methods: list[str], rep: int) -> None:
    """One model at one batch size on 2 local workers: the measured comparison, placements kept."""
    from hgpart import quiet

    quiet.quiet_python()  # TensorFlow's retracing warnings (one predict function per strategy) are expected here
    from hgpart.runtime.devices import open_devices

    ds = open_devices("local", 2, inter_op=4)
    from hgpart.compare.measured import run_measured

    start = loadavg()
    cmp = run_measured(model, device_set=ds, input_shape=(size, size, 3), batch_sizes=[batch], steps=steps,
                       methods=methods, eval_n=64, evals_per_epoch=1, devices_label="local", progress=False,
                       trace_dir=None, placement_dir=out / "placements" / f"{model}_{size}")
    d = cmp.to_dict()
    d["loadavg_start"], d["loadavg_end"] = start, loadavg()
    path = out / "measured" / (f"{model}_{size}_bs{batch}" + ("" if rep == 0 else f"_r{rep}") + ".json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(d, indent=1))


def _hgpart() -> str:
    """The ``hgpart`` command of this interpreter's environment."""
    return str(Path(sys.executable).parent / "hgpart")


def _batches(model: str, given: str) -> list[int]:
    """The batch sizes measured for ``model``: ``--batch-sizes``, else its default."""
    return [int(b) for b in (given or DEFAULT_BATCHES.get(model, "16,32,64")).split(",")]


def calibrate(out: Path, models: list[tuple[str, str]], batches: list[int]) -> Path:
    """``hgpart calibrate`` into ``OUT/cluster_this-machine.json``, with this machine's one-core profiles of every
    (model, input) at every batch size the runs use (``--profile``, into ``OUT/profiles/``), made before the runs."""
    path = out / "cluster_this-machine.json"
    prof = [a for m, size in models for a in ("--profile", f"{m}:{size}")]
    cmd = [_hgpart(), "calibrate", "--out", str(path), *prof,
           "--batch-sizes", ",".join(map(str, batches))]
    print("$", " ".join(cmd[1:]), f"# load {loadavg()}", flush=True)
    subprocess.run(cmd, check=True)
    return path


@functools.cache
def _placement(path: str) -> Any:
    from hgpart.placement import load_placement

    return load_placement(path)


@functools.cache
def _hypergraph(path: str) -> Any:
    """The placement's hypergraph, built once: every data-parallel row of a model and batch size reads a whole
    replica's memory from the same one."""
    return _placement(path).hypergraph()


def ran_as(run: dict[str, Any]) -> str:
    """How a measured model-parallel run ran its steps, ``stages``, ``compiled`` or ``graph`` (runs recorded before
    compare-run chose ran ``graph``); ``""`` for the other strategies."""
    if not run.get("placement_path"):
        return ""
    ran = run.get("pipeline", "")
    return "stages" if ran.startswith("stages") else "compiled" if ran.startswith("compiled") else "graph"


def steps_per_call(run: dict[str, Any]) -> int:
    """The mean steps per call of a compiled run: ``hgpart compare-run`` cuts its steps into timed stretches at
    epoch ends (``images // B`` steps an epoch, ``images`` recorded with the run by :func:`measured_runs`; the
    validation evaluates once an epoch), runs each stretch as calls of the steps per call it recorded
    (``compiled (28 steps per call): ...``) and cuts the rest into powers of two
    (:func:`hgpart.runtime.multistep.call_sizes`). Every call drains the pipeline and costs a call, so the simulated
    calls are as long as the run's were on average; :data:`hgpart.placement.STEPS_PER_CALL` for a run that
    recorded none."""
    from hgpart.runtime.multistep import call_sizes

    from hgpart.placement import STEPS_PER_CALL

    m = re.match(r"compiled \((\d+) steps per call\)", run.get("pipeline") or "")
    if not m:
        return STEPS_PER_CALL
    per, steps = int(m.group(1)), int(run["steps"])
    spe = max(1, int(run.get("images") or 0) // int(run["batch_size"])) if run.get("images") else steps
    calls, done = 0, 0
    while done < steps:
        n = min(steps - done, spe - done % spe)
        calls += len(call_sizes(n, per))
        done += n
    return max(1, round(steps / max(1, calls)))


def simulate_run(run: dict[str, Any], placement: str, cluster: Any, k: int) -> float:
    """Predicted images/s of one measured run (see the module docstring, step 3)."""
    from hgpart.simulate import Mode, SimOptions, SimPipeline, SimStrategy, simulate

    method, B = run["method"], run["batch_size"]
    if method in BASELINES:
        opts = SimOptions(batch_size=B, strategy=SimStrategy(method), devices=k, pipeline=SimPipeline.GRAPH)
        return simulate(_placement(placement), cluster, opts, hypergraph=_hypergraph(placement)).images_per_s
    mode = Mode.ASYNC if method.endswith("-async") else Mode.SYNC
    pipe = SimPipeline(ran_as(run))
    # async: the batches in flight the run recorded (runs before it was recorded ran K); sync: K micro-batches
    n = (run.get("inflight") or k) if mode is Mode.ASYNC else k
    opts = SimOptions(batch_size=B, mode=mode, inflight=n, pipeline=pipe, steps_per_call=steps_per_call(run))
    return simulate(_placement(placement), cluster, opts).images_per_s


def _kept(out: Path, model: str, recorded: str) -> str:
    """The placement a run recorded, or, when the results were moved (as the committed ones were, from the scratch
    folder they ran in), the file of that name under ``OUT/placements/<model>/``."""
    if Path(recorded).exists():
        return recorded
    return str(out / "placements" / model / Path(recorded).name)


def replica_placement(out: Path, d: dict[str, Any]) -> str:
    """A placement of the model of a comparison in which no model-parallel run kept one (only the single device and
    data parallelism ran): ``hgpart partition --backend layerwise --analytic`` at the comparison's K, written once to
    ``OUT/placements/<model>/replica_k<K>.json``. The data-parallel simulation reads only the model's layers and a
    replica's memory from it (the ``single`` placement ``hgpart plan`` gives those strategies), not its parts."""
    shape = "x".join(str(v) for v in d["input_shape"])
    path = out / "placements" / f"{d['model']}_{d['input_shape'][0]}" / f"replica_k{d['k']}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [_hgpart(), "partition", "--model", d["spec"], "--input", shape,
               "--classes", str(d["num_classes"]), "--k", str(d["k"]), "--backend", "layerwise", "--analytic",
               "--out", str(path)]
        print("$", " ".join(cmd[1:]), flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return str(path)


def _repeat(path: Path) -> tuple[str, int]:
    """A measured file's configuration and repeat: ``<model>_<input>_bs<B>.json`` is repeat 0, ``..._r<n>.json``
    repeat n."""
    m = re.fullmatch(r"(.*)_r(\d+)", path.stem)
    return (m.group(1), int(m.group(2))) if m else (path.stem, 0)


def measured_runs(out: Path) -> dict[tuple[str, str, int, str], list[dict[str, Any]]]:
    """Every measured run in ``OUT/measured/*.json``, by (model, strategy, batch size, way its steps ran), in
    repeat order, each with the placement to simulate it with, its K and the load average at its comparison's start
    and end. Model parallelism's repeats that ``--pipeline auto`` ran different ways (it times a short step both
    ways) are kept apart."""
    runs: dict[tuple[str, str, int, str], list[dict[str, Any]]] = {}
    for path in sorted((out / "measured").glob("*.json"), key=_repeat):
        d = json.loads(path.read_text())
        mp = [r for r in d["runs"] if r.get("placement_path")]
        replica = "" if mp else replica_placement(out, d)
        for r in d["runs"]:
            if r["status"] != "ok":
                print(f"{path.name} {r['method']}: {r['status']} ({r['reason'][:120]})", flush=True)
                continue
            key = (f"{d['model']}_{d['input_shape'][0]}", r["method"], r["batch_size"], ran_as(r))
            placement = replica or _kept(out, key[0], r.get("placement_path") or mp[0]["placement_path"])
            runs.setdefault(key, []).append({**r, "placement": placement, "images": d.get("images"),
                                             "k": d["k"], "load": (d["loadavg_start"][0], d["loadavg_end"][0])})
    return runs


def calibrate_splits(out: Path, cluster_path: Path) -> None:
    """``hgpart calibrate-split`` of every placement a measured model-parallel run used, at its batch size and
    micro-batches (async: 1; sync: K), into the cluster file; those already in it are not measured again. One
    process per model, batch size and mode (one local worker each).

    The single device's and data parallelism's calls cost their device more than their layers too
    (:func:`hgpart.simulate.costs.worker_call_cost`, from the unsplit step that ``calibrate-split`` times beside
    every placement at one micro-batch). So every batch those strategies ran a call of, the whole batch and a
    replica's ``B / K``, is measured as well where no async placement of the model was: with the model's first
    placement (for a model that ran only those strategies, vgg16 here, its :func:`replica_placement`)."""
    from hgpart.cluster import load_cluster

    have = {(c.placement, c.batch_size, c.micro_batches) for c in load_cluster(str(cluster_path)).device.split_costs}
    groups: dict[tuple[str, int, str], dict[str, str]] = {}  # (model, batch, mode) -> content hash -> file
    calls: dict[str, set[int]] = {}  # model -> batch sizes of the single device's and data parallelism's calls
    first: dict[str, str] = {}  # model -> a placement of it
    unsplit: set[tuple[str, int]] = set()  # (model, batch) whose unsplit step is measured or will be
    for (model, method, batch, _), rs in sorted(measured_runs(out).items()):
        first.setdefault(model, rs[0]["placement"])
        pl = _placement(rs[0]["placement"])
        unsplit |= {(model, b) for h, b, micro in have if h == pl.content_hash() and micro == 1}
        if method in BASELINES:
            calls.setdefault(model, set()).update({batch, batch // rs[0]["k"]})
            continue
        mode = "async" if method.endswith("-async") else "sync"
        if (pl.content_hash(), batch, 1 if mode == "async" else pl.k) not in have:
            groups.setdefault((model, batch, mode), {})[pl.content_hash()] = rs[0]["placement"]
    unsplit |= {(m, b) for m, b, mode in groups if mode == "async"}
    for model, batches in calls.items():
        for b in sorted(batches):
            if (model, b) not in unsplit:
                groups.setdefault((model, b, "async"), {})[_placement(first[model]).content_hash()] = first[model]
    for (model, batch, mode), files in sorted(groups.items()):
        cmd = [_hgpart(), "calibrate-split", *sorted(files.values()), "--cluster", str(cluster_path),
               "--batch-sizes", str(batch), "--mode", mode]
        print("$", " ".join(cmd[1:]), f"# {model}, load {loadavg()}", flush=True)
        subprocess.run(cmd, check=True)


def predict(out: Path, cluster_path: Path) -> list[dict[str, Any]]:
    """One row per (model, strategy, batch size, way its steps ran): the median measured images/s over the
    repeats beside the prediction, simulated from the placement the repeats saved (every repeat compiles
    with the same seed). Model parallelism's repeats that ``--pipeline auto`` ran different ways (it times a
    short step both ways) are separate rows, each simulated with its own pipeline."""
    from hgpart.cluster import load_cluster

    cluster = load_cluster(str(cluster_path))
    rows = []
    for (model, method, batch, kind), rs in sorted(measured_runs(out).items()):
        pred = simulate_run(rs[0], rs[0]["placement"], cluster, rs[0]["k"])
        meas = statistics.median(r["images_per_s"] for r in rs)
        split = split_factor(rs[0], cluster)
        rows.append({"model": model, "strategy": method, "batch_size": batch, "pipeline": kind,
                     "measured_ips": round(meas, 3),
                     "predicted_ips": round(pred, 3), "error": round(pred / meas - 1.0, 4), "repeats": len(rs),
                     "measured_min": round(min(r["images_per_s"] for r in rs), 3),
                     "measured_max": round(max(r["images_per_s"] for r in rs), 3), "steps": rs[0]["steps"],
                     "load_min": min(r["load"][0] for r in rs), "load_max": max(max(r["load"]) for r in rs),
                     "split_factor": "" if split is None else round(split, 4)})
    return rows


def split_factor(run: dict[str, Any], cluster: Any) -> float | None:
    """The measured split cost the simulation of a model-parallel run charged (None: none, or not such a run)."""
    if run["method"] in BASELINES or not cluster.device.split_costs:
        return None
    pl = _placement(run["placement"])
    micro = 1 if run["method"].endswith("-async") else pl.k
    cost = cluster.device.split_cost(pl.content_hash(), run["batch_size"], micro)
    return None if cost is None else cost.factor


def single_vs_profile(rows: list[dict[str, Any]], cluster: Any) -> list[str]:
    """Where the error starts: the measured single-device step beside the cluster's profile's own whole-step
    measurement (``quality.step_ms``, process CPU time, scaled linearly to the batch) and the simulated step."""
    from hgpart.errors import HgpartError
    from hgpart.profile import Profile

    steps = {}
    dev = cluster.device
    for path in sorted(Path(dev.profiles).glob("*.json")) if dev.profiles is not None else []:
        try:
            prof = Profile.load(path)
        except HgpartError:
            continue
        if prof.quality is not None and prof.quality.step_ms and (dev.profile_cores is None
                                                                  or prof.setup.cores == dev.profile_cores):
            steps[f"{prof.model}_{prof.input_shape[0]}"] = (prof.quality.step_ms, prof.batch_size)
    out = ["The single device, step by step: measured (wall) against the profile's whole training step (one core, "
           "CPU time, scaled to the batch) and the simulated step (the sum of the profile's layers plus the update).",
           "", "| model | B | measured ms/step | profile whole step ms | simulated ms/step | measured / profile |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        if r["strategy"] != "single" or r["model"] not in steps:
            continue
        ms, pb = steps[r["model"]]
        prof = ms * r["batch_size"] / pb
        meas = 1000 * r["batch_size"] / r["measured_ips"]
        out.append(f"| {r['model']} | {r['batch_size']} | {meas:.1f} | {prof:.1f} | "
                   f"{1000 * r['batch_size'] / r['predicted_ips']:.1f} | {meas / prof:.2f} |")
    return out + [""]


def report(rows: list[dict[str, Any]], out: Path, argv: list[str], cluster_path: Path, loads: list[list[float]],
           calibrated_now: bool) -> str:
    from hgpart.cluster import load_cluster

    errs = [abs(r["error"]) for r in rows]
    lines = ["# Simulator vs measured images/s, 2 local workers (one pinned core each)", "",
             f"Command: `python benchmarks/simulator_validation.py {' '.join(argv)}`".replace("  ", " "),
             f"Cluster: `{cluster_path.name}` (`hgpart calibrate`, {'in this run' if calibrated_now else 'given'}); "
             f"load average at start {loads[0]}, at end {loads[-1]}.", ""]
    if errs:
        worst = max(rows, key=lambda r: abs(r["error"]))
        runs = sum(r["repeats"] for r in rows)
        lines += [f"**{len(rows)} rows ({runs} runs): median absolute error {100 * statistics.median(errs):.1f} %, "
                  f"worst "
                  f"{100 * max(errs):.1f} %** ({worst['model']} {worst['strategy']} B={worst['batch_size']}). "
                  "Target (issue 16): median <= 15 %, worst <= 30 %.", ""]
        for key in ("model", "strategy"):
            lines += [f"| {key} | runs | median abs error | worst | mean signed error |", "|---|---|---|---|---|"]
            for v in sorted({r[key] for r in rows}):
                e = [r["error"] for r in rows if r[key] == v]
                lines.append(f"| {v} | {len(e)} | {100 * statistics.median(map(abs, e)):.1f} % | "
                             f"{100 * max(map(abs, e)):.1f} % | {100 * statistics.mean(e):+.1f} % |")
            lines.append("")
    lines += single_vs_profile(rows, load_cluster(str(cluster_path)))
    lines += ["| model | strategy | B | steps as | measured img/s (median) | min..max | repeats | predicted img/s | "
              "error | load | split cost |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['model']} | {r['strategy']} | {r['batch_size']} | {r['pipeline'] or '-'} | "
              f"{r['measured_ips']:.1f} | "
              f"{r['measured_min']:.1f}..{r['measured_max']:.1f} | {r['repeats']} | {r['predicted_ips']:.1f} | "
              f"{100 * r['error']:+.1f} % | {r['load_min']}..{r['load_max']} | "
              f"{'-' if r['split_factor'] == '' else 'x' + format(r['split_factor'], '.3f')} |" for r in rows]
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    if rows:
        with open(out / "validation.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return text


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS, help="model:input:steps, comma-separated")
    ap.add_argument("--batch-sizes", default="", help="comma-separated (default 16,32,64; vgg16 8,16,32)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--cluster", type=Path, default=None, help="a calibrated cluster file (default: calibrate now)")
    ap.add_argument("--skip-measure", action="store_true", help="simulate the measured/*.json already in --out")
    ap.add_argument("--measure-only", action="store_true", help="measure into --out and stop: no calibration, no "
                    "simulation (calibrate afterwards and run again with --skip-measure; the runs do not depend on "
                    "the calibration)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/simulator_validation"))
    ap.add_argument("--repeats", default="0", help="repeat indices to measure, e.g. 0,1,2 (each a pass over every "
                    "model and batch size; the report takes the median per row)")
    ap.add_argument("--no-split-cost", dest="split_cost", action="store_false",
                    help="do not run `hgpart calibrate-split` on the placements measured (the simulator then charges "
                    "a split layer what the whole layer costs, unless the cluster file has its cost already)")
    ap.add_argument("--steps-per-batch", default="", help="B:steps,.. overriding the model's steps at those batch "
                    "sizes, e.g. 16:64,32:112,64:112: whole compiled calls of one size (the runtime's calls are at "
                    "most 64 steps and end at every epoch of the 1,797 digits, so other counts compile several "
                    "call sizes)")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        model, size, batch, steps, rep = args.child.split(":")
        child(model, int(size), int(batch), int(steps), args.out, args.methods.split(","), int(rep))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    loads = [loadavg()]
    t0 = time.perf_counter()
    specs = [spec.split(":") for spec in args.models.split(",")]
    per_batch = {int(b): s for b, s in (p.split(":") for p in args.steps_per_batch.split(",") if p)}
    # the replicas of data parallelism run B / 2 each: profiled too, so that no layer time is scaled from another batch
    every_batch = sorted({c for model, _, _ in specs for b in _batches(model, args.batch_sizes) for c in (b, b // 2)})
    if args.measure_only and args.skip_measure:
        ap.error("--measure-only and --skip-measure exclude each other")
    cluster_path = None if args.measure_only else (
        args.cluster or calibrate(args.out, [(m, size) for m, size, _ in specs], every_batch))
    if not args.skip_measure:
        for rep in args.repeats.split(","):
            for model, size, model_steps in specs:
                for b in _batches(model, args.batch_sizes):
                    steps = per_batch.get(b, model_steps)
                    print(f"measure {model} {size}x{size} B={b}, {steps} steps per strategy, repeat {rep}, load "
                          f"{loadavg()}", flush=True)
                    subprocess.run([sys.executable, __file__, "--child", f"{model}:{size}:{b}:{steps}:{rep}",
                                    "--out", str(args.out), "--methods", args.methods], check=True)
    if cluster_path is None:
        print(f"measured; total {time.perf_counter() - t0:.0f} s; load {loads[0]} -> {loadavg()}")
        return 0
    if args.split_cost:
        calibrate_splits(args.out, cluster_path)
    loads.append(loadavg())
    rows = predict(args.out, cluster_path)
    print(report(rows, args.out, argv, cluster_path, loads, args.cluster is None))
    print(f"total {time.perf_counter() - t0:.0f} s; load {loads[0]} -> {loads[-1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
