"""How much slower is one core's training step while the other cores compute too?

Run::

    python benchmarks/corun_slowdown.py                                   # minivgg 32 and vgg16 64, batch 32
    python benchmarks/corun_slowdown.py --models vgg16:64 --rounds 5 --steps 3

Why: parallel efficiency E = ips(K=2) / (2 x ips(K=1)) assumes that a pinned worker computes as fast beside a
busy neighbour as alone. Cores of one socket share the last-level cache and memory bandwidth, and the virtual
cores of a cloud machine may be hyperthreads of one physical core; then E < 1 even for perfectly balanced,
independent work with no communication at all. This measures that ceiling directly.

Each round runs, one after the other: the whole training step of the model (forward, loss, gradients, SGD
update; the step ``hgpart profile`` times) in one process pinned to core c with one intra-op and one inter-op
thread, alone, for every core c; then the same process on every core at once (independent processes, no
communication). A process warms up, waits at a barrier file so that the co-running ones start together, and
times ``--steps`` steps (wall and process CPU time). Printed per model: ms/step alone and co-running, per core
and round, and the slowdown ratio co-run / alone (median over rounds, per core and overall): the E a perfect
K-way split of this work could reach here is 1 / slowdown. The load average is printed at the start and end.
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

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def child(model: str, size: str, batch: int, core: int, steps: int, barrier: Path, n_ready: int) -> None:
    """Pinned to ``core``, one thread: warm up, wait until ``n_ready`` processes are ready, time ``steps``."""
    os.sched_setaffinity(0, {core})
    from hgpart.profiler import configure_threads

    configure_threads(1)
    from hgpart.models import load_keras_model, parse_input
    from hgpart.profiler import _step_timer

    step = _step_timer(load_keras_model(model, input_shape=parse_input(size)), batch)
    step()
    step()
    with open(barrier, "a") as f:
        f.write(f"{core}\n")
    while len(barrier.read_text().split()) < n_ready:
        time.sleep(0.005)
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    print(json.dumps({"core": core, "ms_wall": wall / steps * 1e3, "ms_cpu": cpu / steps * 1e3}))


def run_group(model: str, size: str, batch: int, cores: list[int], steps: int) -> list[dict[str, float]]:
    """The child on each of ``cores`` at once; their timings."""
    with tempfile.TemporaryDirectory() as tmp:
        barrier = Path(tmp) / "ready"
        barrier.write_text("")
        procs = [subprocess.Popen([sys.executable, __file__, "--child", model, size, str(batch), str(c), str(steps),
                                   str(barrier), str(len(cores))], stdout=subprocess.PIPE, text=True)
                 for c in cores]
        out = []
        for p in procs:
            stdout, _ = p.communicate()
            if p.returncode != 0:
                raise SystemExit(f"child failed with exit {p.returncode}")
            out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="minivgg:32,vgg16:64", help="model:input pairs, comma-separated")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=0, help="timed steps per process (0: 40 for small models, 3 else)")
    ap.add_argument("--child", nargs=7, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        m, s, b, c, n, barrier, ready = args.child
        child(m, s, int(b), int(c), int(n), Path(barrier), int(ready))
        return
    cores = sorted(os.sched_getaffinity(0))
    print(f"co-run slowdown: cores {cores}, batch {args.batch_size}, {args.rounds} rounds; "
          f"load average at start {os.getloadavg()}", flush=True)
    for spec in args.models.split(","):
        model, size = spec.split(":")
        steps = args.steps or (3 if model.startswith("vgg") or model.startswith("resnet") else 40)
        alone: dict[int, list[float]] = {c: [] for c in cores}
        corun: dict[int, list[float]] = {c: [] for c in cores}
        for r in range(args.rounds):
            for c in cores:
                (res,) = run_group(model, size, args.batch_size, [c], steps)
                alone[c].append(res["ms_wall"])
                print(f"  {model} {size} round {r + 1}: core {c} alone   {res['ms_wall']:9.1f} ms/step wall, "
                      f"{res['ms_cpu']:9.1f} cpu", flush=True)
            for res in run_group(model, size, args.batch_size, cores, steps):
                corun[int(res["core"])].append(res["ms_wall"])
                print(f"  {model} {size} round {r + 1}: core {int(res['core'])} co-run  {res['ms_wall']:9.1f} ms/step "
                      f"wall, {res['ms_cpu']:9.1f} cpu", flush=True)
        ratios = [b / a for c in cores for a, b in zip(alone[c], corun[c], strict=True)]
        per_core = ", ".join(f"core {c} {statistics.median(alone[c]):.1f} -> {statistics.median(corun[c]):.1f} ms"
                             for c in cores)
        print(f"{model} {size} b{args.batch_size}, {steps} steps per process: {per_core}; co-run / alone per round "
              f"and core: median {statistics.median(ratios):.3f}, range {min(ratios):.3f}..{max(ratios):.3f}; "
              f"E ceiling 1 / median = {1 / statistics.median(ratios):.3f}", flush=True)
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
