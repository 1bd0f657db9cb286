"""Where does a sync data-parallel step spend its time, measured on 2 local workers and simulated?

Run (from the repository root)::

    python benchmarks/sync_dp_phases.py --cluster CLUSTER.json [--model vgg16] [--input 64] [--batch-size 16]
        [--steps 8] [--rounds 3]

Why: the simulator predicts vgg16 64's sync data parallelism at batch 16 about 25-33 % too fast in every
validation run (``benchmarks/results/simulator_validation/``), a model where compute dominates and the single
device fits within 10 %. This cuts the measured step into its phases to find which one the simulator gets wrong.
Each round, in its own process, runs the measured comparison's sync data parallelism
(:func:`hgpart.compare.measured.run_measured`, as ``hgpart compare-run --devices local`` runs it) for ``steps``
steps with the device trace on. Each worker's traced ops are cut into steps: a step's **compute** runs from its
first forward op to the first op of the all-reduce (``allreduce/`` ops, :func:`hgpart.runtime.dataparallel.
ring_allreduce`), the **all-reduce** from there to the last such op's end, the **update** over the ``update`` ops
(Adam), and the **gap** from the last update op to the next step's first op (the client's call). Printed per worker:
the median of each phase over the traced steps; and the ring's **wait**: how long the worker that finished its
compute first waited for the other's (the difference of their compute ends). With ``--cluster``, the simulated
step's critical path (``hgpart simulate --strategy sync-dp`` on a layer-wise placement of the model, which the
simulation reads only the layers of) is printed beside it. The load average is printed at the start and end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from async_dp_trace import traced_run  # noqa: E402 - the benchmark next to this one

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

PHASES = ("compute", "allreduce", "update", "gap")


def kind(name: str) -> str:
    """The phase an op of the sync data-parallel step belongs to, by its name scope."""
    if name.startswith("allreduce/"):
        return "allreduce"
    if name.startswith("update"):
        return "update"
    return "compute"


def steps(events: list[dict], pid: int) -> list[dict[str, float]]:
    """One traced worker's complete steps: the start and end (microseconds) of each phase, and the gap to the next
    step. A step starts at the first compute op after an update op, so the step the trace starts inside is not
    counted; nor is the last traced step, with no next."""
    ops = sorted((e["ts"], e["ts"] + e["dur"], kind(e["name"])) for e in events if e["pid"] == pid)
    out: list[dict[str, float]] = []
    cur: dict[str, float] | None = None
    last = ""
    for a, b, k in ops:
        if k == "compute" and last == "update":  # a new step
            if cur is not None and "update_end" in cur:
                cur["next"] = a
                out.append(cur)
            cur = {"start": a}
        if cur is not None:
            if k == "allreduce":
                cur.setdefault("allreduce_start", a)
                cur["allreduce_end"] = max(cur.get("allreduce_end", b), b)
            elif k == "update":
                cur.setdefault("update_start", a)
                cur["update_end"] = max(cur.get("update_end", b), b)
        last = k
    return [s for s in out if "allreduce_start" in s]


def phases(step: dict[str, float]) -> dict[str, float]:
    """The milliseconds of each phase of one cut step."""
    return {"compute": (step["allreduce_start"] - step["start"]) / 1e3,
            "allreduce": (step["allreduce_end"] - step["allreduce_start"]) / 1e3,
            "update": (step["update_end"] - step["update_start"]) / 1e3,
            "gap": (step["next"] - step["update_end"]) / 1e3}


def child(model: str, size: int, batch: int, n_steps: int) -> None:
    """One round: sync data parallelism traced, its steps cut and printed."""
    run, events = traced_run(model, size, batch, n_steps, "sync-dp")
    cut = {pid: steps(events, pid) for pid in (0, 1)}
    step_ms = 1e3 * batch / (run.images_per_s or float("nan"))
    print(f"{model} {size}x{size} B={batch} sync-dp: {run.images_per_s:.2f} img/s over {run.steps} steps "
          f"({step_ms:.0f} ms/step); traced steps cut: {len(cut[0])}, {len(cut[1])}")
    for pid, ss in cut.items():
        if not ss:
            print(f"  worker {pid}: no complete step traced")
            continue
        med = {p: statistics.median(phases(s)[p] for s in ss) for p in PHASES}
        step = statistics.median((s["next"] - s["start"]) / 1e3 for s in ss)
        print(f"  worker {pid}: step {step:.1f} ms = " + ", ".join(f"{p} {med[p]:.1f}" for p in PHASES))
    if cut[0] and cut[1]:  # each of worker 0's steps against worker 1's nearest (the cut steps may not pair up)
        waits = [min(abs(s0["allreduce_start"] - s1["allreduce_start"]) for s1 in cut[1]) / 1e3 for s0 in cut[0]]
        print(f"  compute ends apart (the ring waits for the later worker): median {statistics.median(waits):.1f} ms"
              f" over {len(waits)} steps")
    sys.stdout.flush()


def simulated(model: str, size: int, batch: int, cluster: str) -> str:
    """The simulated sync data-parallel step on ``cluster`` and its critical path, as ``hgpart simulate --strategy
    sync-dp`` prints them, on a layer-wise placement of the model (the simulation reads only its layers)."""
    from hgpart.cluster import load_cluster
    from hgpart.placement import load_placement
    from hgpart.simulate import SimOptions, SimStrategy, simulate

    with tempfile.TemporaryDirectory() as tmp:
        placement = str(Path(tmp) / "replica.json")
        hg = str(Path(sys.executable).parent / "hgpart")
        subprocess.run([hg, "partition", "--model", model, "--input", f"{size}x{size}x3", "--k", "2", "--backend",
                        "layerwise", "--analytic", "--out", placement], check=True, stdout=subprocess.DEVNULL)
        res = simulate(load_placement(placement), load_cluster(cluster),
                       SimOptions(batch_size=batch, strategy=SimStrategy.SYNC_DP, devices=2))
    parts = ", ".join(f"{kind} {1e3 * sec:.2f} ms" for kind, sec in sorted(res.path_seconds().items()))
    return (f"  {res.model} {res.strategy.value} ({res.mode.value}) on {res.cluster}, batch {res.batch_size}: "
            f"{res.step_s * 1e3:.1f} ms/step, {res.images_per_s:.1f} img/s, {res.epoch_s:.1f} s per epoch of "
            f"{res.images} images ({res.jobs} jobs simulated)\n"
            f"  critical path of the last job: {parts}; {len(res.path)} tasks from {res.path[0].name!r} to "
            f"{res.path[-1].name!r}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="vgg16")
    ap.add_argument("--input", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cluster", default="", help="a calibrated cluster file, to simulate the same step")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.model, args.input, args.batch_size, args.steps)
        return 0
    print(f"$ python benchmarks/sync_dp_phases.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    print(f"load average at start: {os.getloadavg()}", flush=True)
    for _ in range(args.rounds):
        subprocess.run([sys.executable, __file__, "--child", "--model", args.model, "--input", str(args.input),
                        "--batch-size", str(args.batch_size), "--steps", str(args.steps)], check=True)
    if args.cluster:
        print(f"simulated on {args.cluster}:\n" + simulated(args.model, args.input, args.batch_size, args.cluster))
    print(f"load average at end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
