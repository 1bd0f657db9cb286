"""Runtime throughput on real parallel devices: one pinned worker vs K=2 pinned local workers.

Run::

    python benchmarks/runtime_throughput.py                       # minivgg (VGG-style, 32x32) and minires (branching)
    python benchmarks/runtime_throughput.py --models vgg16 --steps 6 --repeats 3   # vgg16 at 64x64 (vgg16_112: 112)
    python benchmarks/runtime_throughput.py --models minivgg --steps 12 --repeats 3 --batch-size 32

For every model it compiles, in this run, a K=1 placement (everything on part 0) and three K=2 placements -
layer-wise (whole layers, exact min-max DP), coarse and fine (Mt-KaHyPar on the analytic profile) - then trains
each on local worker processes (``open_local``: one ``tf.distribute.Server`` per worker, pinned with
``sched_setaffinity``), in async (threaded pipeline, K batches in flight) and sync (K micro-batches, one update)
mode. Each device configuration runs in its own child process, one after the other, because TensorFlow joins one
eager cluster per process and the two configurations must not compete for the cores. The baseline worker is
pinned to ONE core (``--baseline-cores``), so K=2 vs K=1 measures what a second core buys through model
parallelism on this machine.

A third child runs plain Keras ``model.fit`` (Adam, the same batch) in one process pinned to the same
``--baseline-cores`` with TensorFlow's pools sized to them: the K=1 runtime against it is the runtime's own
overhead. The fit child also times fit's own train-function calls (a callback from batch begin to batch end):
``its steps`` is the K=1 runtime against fit's compiled steps alone, without what fit does between them.

``fit`` runs Python, the input and the kernels on that core; the K=1 runtime's worker does too, but its client
(the Python process that feeds it and drives the steps) is free to run on the other core. So a second K=1 child
(``single+client``, with ``--k1-client both``, the default) pins its client to the worker's core as well: the whole
run on one core, as ``fit`` is, and as a K=2 run's client shares the two cores with its two workers. ``E1`` is E
against that baseline.

Printed: images/s medians over ``--repeats`` runs of ``--steps`` steps (after one warm-up step that makes no update),
the parallel efficiency ``E = ips(K=2) / (2 x ips(K=1 on one core))`` of every K=2 row against the K=1 row of the
same model and mode (with ``--baseline-cores 1``), the K=1 runtime against Keras ``fit``, and the bytes that
crossed devices in one executed step (forward + backward feature maps, read from the step's placed graph) beside
the placement's predicted volume x2 (forward, plus backward minus the input-channel nets that have no gradient).
``client CPU`` is the CPU time the client process (the one driving the workers: Python step threads, TensorFlow's
eager runtime and its RPC threads) spent over the timed steps, in cores: the workers are pinned to the same cores,
so on a 2-core machine this is compute taken from them. Everything is measured in this run. The machine is
shared: expect noise. Its speed also drifts by tens of percent within minutes, so ``--rounds R`` runs
the K=1, K=2 and ``fit`` children R times in turn and takes E within each round (K=2 against that round's K=1);
the table gives the median over rounds and each round's E. Every child records the load average at its start
and end (``load`` in each row of ``results.json``); the run prints the load average at its start and end.

``E steady`` is E on steady-state throughput: a run's images after its first ``w`` steps over the time from the
end of step ``w`` to the end of its last step, with ``w`` = the batches in flight in async mode and 1 in sync mode,
for K=1 and K=2 alike. Images/s over the whole run charge a K-stage pipeline's fill and drain (one batch's
latency through every stage, a one-off cost of a training run) to ``--steps`` steps; on vgg16 with 8 steps that is
about a tenth of the run, so the whole-run E of short runs understates what the pipeline sustains.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

MODELS = {"minivgg": (32, 32, 3), "minires": (32, 32, 3), "vgg16": (64, 64, 3), "vgg16_112": (112, 112, 3)}
PLACEMENTS_K2 = ("layerwise", "coarse", "fine")
#: the placement name of the K=1 rows whose client is pinned to the worker's core
PINNED = "+client"
MODES = ("async", "async-graph", "async-stages", "async-compiled", "sync", "sync-stages", "sync-compiled")


def zoo_name(model: str) -> str:
    """The zoo model of a benchmark model key (``vgg16_112`` is vgg16 at 112x112)."""
    return model.split("_")[0]


def load() -> float:
    return round(os.getloadavg()[0], 2)


def keras_child(args: argparse.Namespace) -> None:
    """Plain Keras ``fit`` on ``--baseline-cores`` cores: one ROW per model (images/s of ``--steps`` steps)."""
    cores = sorted(os.sched_getaffinity(0))[: args.baseline_cores]
    os.sched_setaffinity(0, set(cores))
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(len(cores))
    tf.config.threading.set_inter_op_parallelism_threads(4)
    import keras

    from hgpart.models import load_keras_model

    class StepTimer(keras.callbacks.Callback):
        """Wall seconds of each of fit's train-function calls (batch begin to batch end): fit's compiled steps."""

        def __init__(self) -> None:
            super().__init__()
            self.seconds: list[float] = []
            self._t = 0.0

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            self._t = time.perf_counter()

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.seconds.append(time.perf_counter() - self._t)

    B = args.batch_size
    for model in json.loads(args.jobs):
        keras.utils.set_random_seed(0)
        m = load_keras_model(zoo_name(model), input_shape=MODELS[model], num_classes=10)
        m.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
        rng = np.random.default_rng(0)
        x = rng.normal(size=(B * args.steps, *MODELS[model])).astype(np.float32)
        y = rng.integers(0, 10, B * args.steps).astype(np.int32)
        m.fit(x[:B], y[:B], batch_size=B, epochs=1, verbose=0)  # trace and allocate
        ips, in_steps = [], []
        l0 = load()
        for _ in range(args.repeats):
            timer = StepTimer()
            t = time.perf_counter()
            m.fit(x, y, batch_size=B, epochs=1, verbose=0, shuffle=False, callbacks=[timer])
            ips.append(B * args.steps / (time.perf_counter() - t))
            in_steps.append(B * args.steps / sum(timer.seconds))
        row = {"model": model, "placement": "keras-fit", "k": 1, "mode": "fit", "ips": ips,
               "median": statistics.median(ips), "steps_ips": in_steps, "steps_median": statistics.median(in_steps),
               "workers": [{"pid": os.getpid(), "cores": cores}], "load": [l0, load()]}
        print("ROW " + json.dumps(row), flush=True)


def make_placements(model: str, folder: Path, batch_size: int, seed: int, *, profiles: str = "",
                    placements: tuple[str, ...] = PLACEMENTS_K2) -> tuple[dict[str, str], str]:
    """K=1 and the K=2 placements of ``model``, written to ``folder``: (name -> path, the profile used).

    The vertex weights are the one-core profile ``<profiles>/<model>_<input>_b<B>_c1.json`` (measured as a pinned
    one-core worker runs, ``hgpart profile --cores 1``) when it exists, else FLOP counts."""
    import numpy as np

    from hgpart.hypergraph import build_hypergraph
    from hgpart.models import load_graph
    from hgpart.partitioners import partition
    from hgpart.placement import Placement
    from hgpart.profile import Profile, analytic_profile, default_profile_path

    graph = load_graph(zoo_name(model), MODELS[model], 10)
    measured = default_profile_path(graph, batch_size, profiles, cores=1) if profiles else None
    if measured is not None and measured.exists():
        work, used = Profile.load(measured).work(), str(measured)
    else:
        work, used = analytic_profile(graph, batch_size).work(), "analytic"
    out: dict[str, str] = {}
    hg = build_hypergraph(graph, work, batch_size=batch_size, grain="coarse")
    one = Placement.from_vertex_parts(graph, hg, np.zeros(hg.num_vertices, dtype=np.int64), k=1, method="single",
                                      work=work)
    out["single"] = str(one.save(folder / f"{model}_single_k1.json"))
    for name in placements:
        hg = build_hypergraph(graph, work, batch_size=batch_size, grain="fine" if name == "fine" else "coarse")
        backend = "layerwise" if name == "layerwise" else "mtkahypar"
        res = partition(hg, k=2, backend=backend, epsilon=0.05, seed=seed)
        method = "layerwise" if name == "layerwise" else "hypergraph"
        pl = Placement.from_vertex_parts(graph, hg, res.parts, k=2, method=method, work=work)
        out[name] = str(pl.save(folder / f"{model}_{name}_k2.json"))
    return out, used


def child(args: argparse.Namespace) -> None:
    """One device configuration: open the local workers once, train every placement x mode, print JSON rows."""
    import numpy as np
    from hgpart.runtime.cluster import open_local, worker_info
    from hgpart.runtime.train import train

    jobs = json.loads(args.jobs)
    k = args.child
    cores = sorted(os.sched_getaffinity(0))[: args.baseline_cores] if k == 1 else None
    if args.pin_client:  # before TensorFlow starts its thread pools: the whole K=1 run on the baseline cores
        os.sched_setaffinity(0, set(cores or []))
    with open_local(k, inter_op=max(4, 2 * k), cores=cores, start_timeout=180) as ds, \
            tempfile.TemporaryDirectory() as tmp:
        info = [{"pid": w.pid, "cores": w.cores} for w in worker_info(ds)]
        for job in jobs:
            # one epoch of --steps steps of seeded normal images (as --data synthetic, which has 512 images): the
            # compiled pipeline's calls end at epoch ends, so a 16-step epoch would cap them at 16 steps
            data = Path(tmp) / f"{job['model']}.npz"
            rng = np.random.default_rng(0)
            np.savez(data, x=rng.normal(size=(args.batch_size * args.steps, *MODELS[job["model"]])).astype(np.float32),
                     y=rng.integers(0, 10, args.batch_size * args.steps).astype(np.int32))
            for mode in args.modes.split(","):
                ips: list[float] = []
                steady: list[float] = []
                client: list[float] = []
                res = None
                l0 = load()
                asked = args.baseline_inflight if k == 1 else args.inflight
                sync = mode.startswith("sync")  # sync, sync-stages and sync-compiled
                inflight = args.sync_micro if sync else (asked or None)  # None: the runtime's default
                pipeline = mode.split("-")[1] if "-" in mode else "auto"
                for _ in range(args.repeats):
                    res = train(job["path"], device_set=ds, batch_size=args.batch_size, steps=args.steps,
                                mode=mode.split("-")[0], data=str(data), inflight=inflight, seed=0,
                                pipeline=pipeline)
                    ips.append(res.images_per_s)
                    steady.append(steady_ips([r.end_s for r in res.rows], args.batch_size,
                                             res.inflight if mode.startswith("async") else 1))
                    client.append(res.client_cpu_seconds / res.seconds)
                assert res is not None
                t = res.traffic.check(res.predicted_fwd_bytes) if res.traffic is not None else {}
                row = {"model": job["model"], "placement": job["name"] + (PINNED if args.pin_client else ""),
                       "k": k, "mode": mode, "ips": ips, "steady": steady,
                       "inflight": res.inflight, "pipeline": res.pipeline, "profile": job.get("profile", ""),
                       "median": statistics.median(ips), "workers": info,
                       "measured_bytes": t.get("model"),
                       "predicted_bytes": (t["predicted_forward"] + t["predicted_backward"]) if t else None,
                       "predicted_x2": t.get("predicted_x2"), "rel_err": t.get("rel_err"),
                       "final_loss": res.losses[-1] if res.losses else None, "load": [l0, load()],
                       "client_cores": statistics.median(client)}
                print("ROW " + json.dumps(row), flush=True)


def steady_ips(ends: list[float], batch: int, warm: int) -> float:
    """Images/s after the first ``warm`` steps to end (:func:`hgpart.runtime.pipeline.steady_rate`)."""
    from hgpart.runtime.pipeline import steady_rate

    return batch * steady_rate(ends, warm)


def run_child(k: int, jobs: Any, args: argparse.Namespace, *, pin_client: bool = False) -> list[dict[str, Any]]:
    """Child ``k`` (K workers; -1 = plain Keras fit) in its own process; its ROW lines. ``pin_client``: the child
    (the client driving the worker) is pinned to the K=1 worker's cores too."""
    cmd = [sys.executable, __file__, "--child", str(k), "--jobs", json.dumps(jobs), "--steps", str(args.steps),
           *(["--pin-client"] if pin_client else []),
           "--repeats", str(args.repeats), "--batch-size", str(args.batch_size),
           "--baseline-cores", str(args.baseline_cores), "--modes", args.modes, "--inflight", str(args.inflight),
           "--baseline-inflight", str(args.baseline_inflight),
           "--sync-micro", str(args.sync_micro)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    rows = [json.loads(ln[4:]) for ln in proc.stdout.splitlines() if ln.startswith("ROW ")]
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        print(f"[K={k} child exited {proc.returncode} after {time.perf_counter() - t0:.0f} s]\n{tail}", flush=True)
    return rows


def whole(row: dict[str, Any]) -> float | None:
    """A row's images/s over whole runs (median of its repeats)."""
    return row["median"]


def steady_median(row: dict[str, Any]) -> float | None:
    """A row's steady-state images/s (median of its repeats), None for rows measured before it was recorded."""
    return statistics.median(row["steady"]) if row.get("steady") else None


def collapse(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (model, placement, K, mode) over the rounds: every run's images/s, the median of the rounds'
    medians, the rounds' E (K=2 against the same round's K=1 of the same model and mode) and load ranges."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    # each E: the K=1 placement it is taken against, and the figure of a row it divides
    kinds = {"e": ("single", whole), "e1": ("single" + PINNED, whole), "es": ("single", steady_median)}
    baselines = {e: {(r["model"], r["mode"], r.get("round", 0)): value(r) for r in rows if r["placement"] == p}
                 for e, (p, value) in kinds.items()}
    for r in rows:
        key = (r["model"], r["placement"], r["k"], r["mode"])
        c = out.setdefault(key, {**r, "ips": [], "round_medians": [], "round_e": [], "round_e1": [], "round_es": [],
                                 "load": [], "client": [], "steps": [], "steady": []})
        if r.get("steps_median") is not None:
            c["steps"].append(r["steps_median"])
        if r.get("client_cores") is not None:
            c["client"].append(r["client_cores"])
        c["ips"] = c["ips"] + r["ips"]
        c["steady"] = c["steady"] + r.get("steady", [])
        c["round_medians"].append(r["median"])
        c["load"] = c["load"] + list(r.get("load", []))
        for e, (_, value) in kinds.items():
            b, v = baselines[e].get((r["model"], r["mode"], r.get("round", 0))), value(r)
            if r["k"] == 2 and b and v:
                c[f"round_{e}"].append(v / (2 * b))
    for c in out.values():
        c["median"] = statistics.median(c["round_medians"])
        for e in kinds:
            c[f"{e}_median"] = statistics.median(c[f"round_{e}"]) if c[f"round_{e}"] else None
    return list(out.values())


def e_cell(median: float | None, rounds: list[float]) -> str:
    """E's median, with every round's E in brackets when there are several."""
    if median is None:
        return "-"
    return f"{median:.2f}" + (f" ({' '.join(f'{e:.2f}' for e in rounds)})" if len(rounds) > 1 else "")


def report(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    from rich.console import Console
    from rich.table import Table

    rows = collapse(rows)
    base = {(r["model"], r["mode"]): r["median"] for r in rows if r["placement"] == "single"}
    fit = {r["model"]: r["median"] for r in rows if r["mode"] == "fit"}
    fit_steps = {r["model"]: statistics.median(r["steps"]) for r in rows if r["mode"] == "fit" and r.get("steps")}
    table = Table(title=f"images/s, median of {args.rounds} round(s) of {args.repeats} x {args.steps} steps, batch "
                        f"{args.batch_size}, local pinned workers (K=1 on {args.baseline_cores} core(s)); E per round")
    for col in ("model", "placement", "K", "mode", "images/s", "runs", "vs K=1", "E", "E1", "steady", "E steady",
                "client CPU", "bytes/step measured", "predicted", "pred. vol x2", "rel.err", "load"):
        table.add_column(col, justify="left" if col in ("model", "placement", "mode") else "right")
    for r in rows:
        b = base.get((r["model"], r["mode"])) if r["mode"] != "fit" else None
        ratio = f"{r['median'] / b:.2f}x" if b else "-"
        if r["k"] == 1 and r["mode"] != "fit" and fit.get(r["model"]):
            ratio = f"{r['median'] / fit[r['model']]:.2f}x fit"  # against fit's compiled steps: the lines below
        meas = f"{r['measured_bytes']:,}" if r["k"] > 1 and r["measured_bytes"] is not None else "-"
        pred = f"{r['predicted_bytes']:,.0f}" if r["k"] > 1 and r["predicted_bytes"] is not None else "-"
        x2 = f"{r['predicted_x2']:,.0f}" if r["k"] > 1 and r["predicted_x2"] is not None else "-"
        err = f"{100 * r['rel_err']:.2f}%" if r["k"] > 1 and r["rel_err"] is not None else "-"
        loads = r.get("load", [])
        ld = f"{min(loads)}-{max(loads)}" if len(loads) > 2 else "->".join(str(v) for v in loads)
        cpu = f"{statistics.median(r['client']):.2f}" if r.get("client") else "-"
        table.add_row(r["model"], r["placement"], str(r["k"]), r["mode"], f"{r['median']:.1f}",
                      " ".join(f"{v:.0f}" for v in r["ips"]), ratio, e_cell(r["e_median"], r["round_e"]),
                      e_cell(r["e1_median"], r["round_e1"]),
                      f"{statistics.median(r['steady']):.1f}" if r["steady"] else "-",
                      e_cell(r["es_median"], r["round_es"]), cpu, meas, pred, x2, err, ld)
    Console(width=180).print(table)
    for r in rows:
        if r["k"] == 1 and r["mode"] != "fit" and r["model"] in fit:
            print(f"{r['model']} {r['placement']} {r['mode']}: K=1 runtime {r['median']:.1f} images/s = "
                  f"{r['median'] / fit[r['model']]:.2f}x Keras fit ({fit[r['model']]:.1f})"
                  + (f", {r['median'] / fit_steps[r['model']]:.2f}x fit's compiled steps "
                     f"({fit_steps[r['model']]:.1f})" if r["model"] in fit_steps else ""))
    for model in sorted({r["model"] for r in rows}):
        for mode in args.modes.split(","):
            k2 = {r["placement"]: r["median"] for r in rows if r["model"] == model and r["mode"] == mode
                  and r["k"] == 2}
            if k2:
                print(f"{model} {mode}: " + ", ".join(f"{p} {v:.1f}" for p, v in k2.items())
                      + ("; async/sync per placement: " + ", ".join(
                          f"{p} {v / s:.2f}" for p, v in k2.items()
                          if (s := next((r['median'] for r in rows if r['model'] == model and r['mode'] == 'sync'
                                         and r['k'] == 2 and r['placement'] == p), None)))
                         if mode == "async" else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="minivgg,minires")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1,
                    help="run the K=1, K=2 and fit children this many times in turn; E is taken per round")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--baseline-cores", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--out", default="benchmarks/results/runtime_throughput")
    ap.add_argument("--modes", default=",".join(MODES),
                    help="async and sync (pipeline auto: stages where they apply and a step is long enough), "
                         "async-graph (one function per step), async-stages and sync-stages (stages whatever the "
                         "step's length), async-compiled and sync-compiled (the runtime's steps per compiled call)")
    ap.add_argument("--inflight", type=int, default=2, help="batches in flight in async modes (0: the runtime's "
                    "default, one per stage through stages, else K)")
    ap.add_argument("--baseline-inflight", type=int, default=2,
                    help="batches in flight of the K=1 baseline in async modes (0: the runtime's default, 1)")
    ap.add_argument("--sync-micro", type=int, default=2, help="micro-batches per step in sync mode")
    ap.add_argument("--profiles", default="profiles",
                    help="folder of one-core profiles (<model>_<input>_b<B>_c1.json); '' = FLOP counts")
    ap.add_argument("--placements", default=",".join(PLACEMENTS_K2))
    ap.add_argument("--k1-client", choices=("free", "pinned", "both"), default="both",
                    help="K=1 baselines: the client process free to run on any core (E), pinned to the worker's "
                         "core so that the whole run uses one core (E1, and the fit comparison on the same core)")
    ap.add_argument("--pin-client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--jobs", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == -1:
        keras_child(args)
        return
    if args.child:
        child(args)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise SystemExit(f"unknown model(s) {unknown}; choose from {sorted(MODELS)}")
    t0 = time.perf_counter()
    load_start = [round(v, 2) for v in os.getloadavg()]
    jobs1: list[dict[str, str]] = []
    jobs2: list[dict[str, str]] = []
    names = tuple(n for n in args.placements.split(",") if n)
    for m in models:
        paths, used = make_placements(m, out, args.batch_size, args.seed, profiles=args.profiles, placements=names)
        print(f"{m}: vertex weights from {used}", flush=True)
        jobs1.append({"model": m, "name": "single", "path": paths["single"], "profile": used})
        jobs2.extend({"model": m, "name": n, "path": paths[n], "profile": used} for n in names)
    print(f"placements written to {out} ({time.perf_counter() - t0:.0f} s)", flush=True)
    rows: list[dict[str, Any]] = []
    for rnd in range(args.rounds):
        # K=1, K=2 and fit side by side in every round: the machine's speed drifts by tens of percent within
        # minutes, so E is taken within a round and its median over rounds is reported
        got = run_child(1, jobs1, args) if args.k1_client != "pinned" else []
        if args.k1_client != "free":
            got += run_child(1, jobs1, args, pin_client=True)
        got += run_child(2, jobs2, args) + run_child(-1, models, args)
        rows += [{**r, "round": rnd} for r in got]
    if not rows:
        raise SystemExit("no measurements: both children failed (see above)")
    from hgpart.fileio import write_json

    load_end = [round(v, 2) for v in os.getloadavg()]
    write_json(out / "results.json", {"command": "python " + " ".join(sys.argv), "args": vars(args),
                                      "loadavg_start": load_start, "loadavg_end": load_end, "rows": rows})
    report(rows, args)
    print(f"total {time.perf_counter() - t0:.0f} s; rows in {out / 'results.json'}; load average at start "
          f"{load_start}, at end {load_end}")


if __name__ == "__main__":
    main()
