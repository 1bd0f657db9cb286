"""Would several training steps per call lift minivgg's K = 2 efficiency? One compiled function running N steps.

Run (from the repository root)::

    python benchmarks/steps_per_call_probe.py --placements DIR [--k2 coarse] [--mode seq|pipe] [--n 1,4,16]
        [--steps 192] [--rounds 3]

``DIR`` holds ``minivgg_single_k1.json`` and ``minivgg_<name>_k2.json`` placements (as ``runtime_throughput.py``
writes them). Why: minivgg's whole step computes for about 15 ms on one core, and each call from the client costs
it a few milliseconds of CPU on the cores the workers need (``benchmarks/results/client_call_costs/``). A function
whose body is N training steps one after the other (each step's forward reads the weights the previous step's
update wrote, so the N steps are exact sequential SGD, as one batch in flight) makes one call, one feed of N
batches and one fetch of N losses per N steps. If the client's per-call cost is what holds E down, E grows with N;
if it stays, the time goes to the workers' own execution of the placed graph.

``--ahead`` calls the next call before fetching the previous one's losses (a call returns only once it has run, so
this does not overlap calls: ``results/runtime_throughput_vgg16/xeon_minivgg_call_boundary/``).

``--mode pipe`` traces step i's forward before step i - 1's update. TensorFlow runs the reads and writes of one
variable in the order they were traced, so step i reads weights that miss step i - 1's update (at most one
update missing: the runtime's bound for 2 batches in flight) and nothing else orders step i's forward after step
i - 1's backward: on a layer-wise placement the first part can run the next batch's forward while the second
runs this batch's backward, a compiled asynchronous pipeline with no client call between steps. ``--order 1f1b``
makes each part read across parts only after computing the gradients it sends back for the previous step.
The steps are built by the runtime's compiled pipeline, :class:`hgpart.runtime.multistep.MultiStep` (the results
committed before it existed came from this probe's own copy of the same construction, without the accuracy).

Each (K, N) runs in its own process, the configurations in turn for ``--rounds`` rounds: K = 1 is one worker pinned
to one core, K = 2 two workers pinned one core each, the client unpinned. Prints images/s per round, E per round
and N (E = K2 / (2 K1), K1 at the same N in the same round), and the load average at start and end.
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


def child(placement: str, k: int, n: int, steps: int, batch: int, mode: str, trace: str = "", lag: int = 1,
          inter: int = 4, order: str = "free", feed: str = "host", ahead: bool = False) -> None:
    """Time ``steps`` steps of ``n`` steps per call on K local workers; prints one RESULT line."""
    import numpy as np
    from hgpart.runtime.cluster import open_local
    from hgpart.runtime.evaluation import MeteredStep
    from hgpart.runtime.modelsource import build_for_placement
    from hgpart.runtime.multistep import MultiStep
    from hgpart.runtime.partitioned import PlacedModel
    from hgpart.runtime.step import OptimizerSpec

    from hgpart.placement import load_placement

    pl = load_placement(placement)
    cores = sorted(os.sched_getaffinity(0))[:1] if k == 1 else None
    with open_local(k, inter_op=inter, cores=cores, start_timeout=180) as ds:
        import tensorflow as tf

        tf.config.set_soft_device_placement(False)
        pm = PlacedModel(pl, build_for_placement(pl, seed=0), ds.devices, host=ds.host)
        step = MeteredStep(pm, OptimizerSpec("adam"), batch_size=batch)
        # seq: the N steps one after the other; pipe: step i's forward traced before step i - lag's update, in the
        # executor's own order or (--order 1f1b) each part's cross-part reads after its previous gradients
        ms = MultiStep(step, steps_per_call=n, inflight=lag + 1 if mode == "pipe" else 1, gated=order == "1f1b")
        if feed == "resident":
            ms.feed_device = pm.devices[0]
        fn = ms.function(n)
        rng = np.random.default_rng(0)
        x = rng.random((n * batch, *pm.graph.input_shape), dtype=np.float32)
        y = rng.integers(0, pm.graph.num_classes or 10, n * batch).astype(np.int32)
        with tf.device(pm.devices[0]):  # --feed resident: one copy on the first worker, read by every call
            xr, yr = tf.identity(tf.constant(x)), tf.identity(tf.constant(y))

        def launch() -> Any:
            if feed == "resident":
                return fn(xr, yr)[0]
            with tf.device(pm.host):
                xt, yt = tf.constant(x), tf.constant(y)
            return fn(xt, yt)[0]

        def calls(c: int) -> Any:
            """``c`` calls, each fetched at once or (``--ahead``) after the next one is made; the last one's losses."""
            prev = launch()
            for _ in range(c - 1):
                nxt = launch() if ahead else None
                prev.numpy()
                prev = nxt if ahead else launch()
            return prev.numpy()

        calls(2)  # set-up: graph partitioning, registration on the workers
        n_calls = max(2, steps // n)
        t0, c0 = time.perf_counter(), time.process_time()
        losses = calls(n_calls)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        assert np.all(np.isfinite(losses))
        busy: list[float] = []
        if trace:  # the workers' profiler over a few more calls: each device's busy fraction (union of its ops)
            from hgpart.runtime.devtrace import capture_device_trace

            nodes = {op.name: op.device for op in fn.graph.get_operations() if op.device}
            dt = capture_device_trace(None, ds, lambda c: calls(max(1, c)), Path(trace),
                                      steps=2, inflight=1, devices=pm.devices, node_devices=nodes,
                                      meta={"k": k, "n": n, "mode": mode})
            busy = [round(b, 3) for b in dt.busy]
            by = device_ops(dt.path)
            waits(by)
            layer_times(by)
        print("RESULT " + json.dumps({"k": k, "n": n, "ips": n_calls * n * batch / wall,
                                      "client_cores": cpu / wall, "calls": n_calls, "busy": busy}), flush=True)


def device_ops(path: Path) -> dict[int, list[dict[str, Any]]]:
    """The op events of a written trace, per device, in start order."""
    from collections import defaultdict

    by: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in json.loads(Path(path).read_text())["traceEvents"]:
        if e.get("ph") == "X":
            by[e["pid"]].append(e)
    return {pid: sorted(ops, key=lambda e: e["ts"]) for pid, ops in sorted(by.items())}


def idle_gaps(ops: list[dict[str, Any]], min_us: float) -> tuple[list[tuple[float, float, dict[str, Any]]], float]:
    """A device's idle gaps longer than ``min_us`` as (when it began, its length, the op after it), and the end of
    its last op (microseconds)."""
    end, gaps = ops[0]["ts"], []
    for e in ops:
        if e["ts"] > end + min_us:
            gaps.append((end, e["ts"] - end, e))
        end = max(end, e["ts"] + e["dur"])
    return gaps, end


def waits(by: dict[int, list[dict[str, Any]]], gap_us: float = 300.0) -> None:
    """Print, per device, its idle gaps longer than ``gap_us`` and which ops they came before."""
    from collections import Counter

    for pid, ops in by.items():
        gaps, end = idle_gaps(ops, gap_us)
        before = Counter(e["cat"] for _, _, e in gaps).most_common(3)
        print(f"WAITS device {pid}: {len(gaps)} gaps > {gap_us / 1e3:.1f} ms, {sum(g for _, g, _ in gaps) / 1e3:.1f} "
              f"ms of {(end - ops[0]['ts']) / 1e3:.1f} ms; before {before}", flush=True)


def layer_times(by: dict[int, list[dict[str, Any]]], long_us: float = 5000.0) -> None:
    """Print, per device, its ops' time per step by layer (the step count is the traced loss ops), and its idle
    gaps longer than ``long_us`` with when they began: where a call's fill and drain show."""
    import re
    from collections import defaultdict

    steps = max(1, sum(1 for ops in by.values() for e in ops if "SoftmaxCrossEntropy" in e["cat"]))
    for pid, ops in by.items():
        mine: dict[str, float] = defaultdict(float)
        for e in ops:
            layer = next((re.sub(r"_\d+$", "", t) for t in e["name"].split("/")
                          if re.match(r"(block|fc|pred|loss|conv|dense|res)", t)), "other")
            mine[layer] += e["dur"] / steps / 1e3
        top = ", ".join(f"{layer} {ms:.2f}" for layer, ms in sorted(mine.items(), key=lambda kv: -kv[1]))
        print(f"LAYERS device {pid}: {sum(mine.values()):.2f} ms of ops a step ({steps} steps): {top}", flush=True)
        gaps = [f"{g / 1e3:.1f} ms at {t / 1e3:.0f} ms before {e['name'][:40]}"
                for t, g, e in idle_gaps(ops, long_us)[0]]
        print(f"LONG device {pid}: {'; '.join(gaps) or 'none'}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--placements", required=True)
    ap.add_argument("--model", default="minivgg")
    ap.add_argument("--k2", default="coarse", help="the K = 2 placement's name (<model>_<name>_k2.json)")
    ap.add_argument("--n", default="1,4,16")
    ap.add_argument("--steps", type=int, default=192)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mode", choices=("seq", "pipe"), default="seq",
                    help="seq: the N steps one after the other; pipe: step i's forward before step i-1's update")
    ap.add_argument("--inter", type=int, default=4, help="inter-op threads of each worker")
    ap.add_argument("--order", choices=("free", "1f1b"), default="free",
                    help="pipe: free (the executor's order) or 1f1b (a part's next forward after the gradients it "
                         "sends back)")
    ap.add_argument("--lag", type=int, default=1, help="pipe: updates a step's forward may miss (batches in "
                    "flight - 1)")
    ap.add_argument("--trace", default="", help="also trace the workers after the timing (a folder per K and N "
                    "under it) and print each device's busy fraction")
    ap.add_argument("--feed", choices=("host", "resident"), default="host",
                    help="host: each call's batches copied from the client, as the runtime feeds them; resident: "
                         "one copy kept on the first worker (what the feed's transfer costs)")
    ap.add_argument("--ahead", action="store_true",
                    help="make each call before fetching the previous one's losses")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]), args.steps, args.batch_size, args.mode,
              args.trace, args.lag, args.inter, args.order, args.feed, args.ahead)
        return
    folder = Path(args.placements)
    files = {1: folder / f"{args.model}_single_k1.json", 2: folder / f"{args.model}_{args.k2}_k2.json"}
    ns = [int(v) for v in args.n.split(",")]
    l0 = [round(v, 2) for v in os.getloadavg()]
    print(f"$ python benchmarks/steps_per_call_probe.py {' '.join(sys.argv[1:])}   # "
          f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load average at start {l0}", flush=True)
    ips: dict[tuple[int, int, int], float] = {}  # (K, N, round)
    for r in range(args.rounds):
        for n in ns:
            for k in (1, 2):
                cmd = [sys.executable, __file__, "--placements", args.placements, "--steps", str(args.steps),
                       "--batch-size", str(args.batch_size), "--mode", args.mode, "--lag", str(args.lag),
                       "--inter", str(args.inter), "--order", args.order, "--feed", args.feed,
                       *(["--ahead"] if args.ahead else []),
                       "--trace", f"{args.trace}/k{k}_n{n}_r{r}" if args.trace else "",
                       "--child", str(files[k]), str(k), str(n)]
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
                for line in proc.stdout.splitlines():
                    if line.startswith(("WAITS ", "LAYERS ", "LONG ")):
                        print(f"round {r} K={k} N={n:>2}: {line.split(' ', 1)[1]}", flush=True)
                rows = [json.loads(ln[7:]) for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
                if proc.returncode or not rows:
                    print(f"round {r} K={k} N={n}: failed\n{proc.stderr[-1500:]}", flush=True)
                    continue
                ips[(k, n, r)] = rows[0]["ips"]
                busy = f", busy {rows[0]['busy']}" if rows[0].get("busy") else ""
                print(f"round {r} K={k} N={n:>2}: {rows[0]['ips']:8.1f} images/s, client "
                      f"{rows[0]['client_cores']:.2f} cores{busy}, load {os.getloadavg()[0]:.2f}", flush=True)
    print(f"\n{args.model} {args.k2} K=2 ({args.mode}) against one pinned worker, images/s (median of rounds) "
          "and E per round")
    for n in ns:
        both = [r for r in range(args.rounds) if (1, n, r) in ips and (2, n, r) in ips]  # same N, same round
        es = [ips[(2, n, r)] / (2 * ips[(1, n, r)]) for r in both]
        if es:
            k1 = statistics.median(ips[(1, n, r)] for r in both)
            k2 = statistics.median(ips[(2, n, r)] for r in both)
            print(f"N={n:>2}: K=1 {k1:8.1f}  K=2 {k2:8.1f}  E {statistics.median(es):.2f} "
                  f"({' '.join(f'{e:.2f}' for e in es)})")
    print(f"load average at end {[round(v, 2) for v in os.getloadavg()]}")


if __name__ == "__main__":
    main()
