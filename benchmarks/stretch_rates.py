"""Images/s of each stretch of a long measured run: is a run's rate steady from its first steps, or does it ramp up?

Run (from the repository root)::

    python benchmarks/stretch_rates.py --model minivgg:32 --batch-size 16 --steps 300 --evals 10 \\
        [--methods single,sync-dp,layerwise-sync] [--rounds 3]

Why: the simulator validation (``benchmarks/simulator_validation.py``, issue 16) judges each prediction, a steady
rate, against measured runs of ``steps`` steps. Until 2026-12-05 those runs were 30 steps, a quarter of a second of
training for minivgg at batch 16, so whatever the first steps pay and any pause of the shared machine weigh a lot.
This runs :func:`hgpart.compare.measured.run_measured` on 2 local pinned workers (as the validation's measuring
child does), each round its own process, evaluating ``evals`` times an epoch (the clock stopped) so that each
stretch between two evaluations is timed alone, and prints per strategy the images/s of every stretch, then of the
run's first 30 steps against the rest. The load average is printed before each round.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from simulator_validation import loadavg  # noqa: E402 - the benchmark next to this one


def child(model: str, size: int, batch: int, steps: int, methods: list[str], evals: int) -> None:
    """One round: every strategy's stretches as JSON lines on stdout."""
    from hgpart import quiet

    quiet.quiet_python()
    from hgpart.runtime.devices import open_devices

    ds = open_devices("local", 2, inter_op=4)
    from hgpart.compare.measured import run_measured

    cmp = run_measured(model, device_set=ds, input_shape=(size, size, 3), batch_sizes=[batch], steps=steps,
                       methods=methods, eval_n=64, evals_per_epoch=evals, devices_label="local", progress=False,
                       trace_dir=None, placement_dir=None)
    for r in cmp.runs:
        points = [(p.step, p.wall_s) for p in r.curve]
        print(json.dumps({"method": r.method, "ips": r.images_per_s, "pipeline": r.pipeline, "points": points}),
              flush=True)


def first_vs_rest(points: list[tuple[int, float]], batch: int, first: int = 30) -> tuple[float, float] | None:
    """Images/s of the stretches that end by step ``first`` and of the rest (None: no stretch on either side)."""
    cut = next((i for i, (s, _) in enumerate(points) if s >= first), None)
    if cut is None or cut == 0 or cut == len(points) - 1:
        return None
    (s0, w0), (s1, w1), (s2, w2) = points[0], points[cut], points[-1]
    return (s1 - s0) * batch / (w1 - w0), (s2 - s1) * batch / (w2 - w1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minivgg:32", help="model:input")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--evals", type=int, default=10, help="evaluations an epoch: the stretches' length")
    ap.add_argument("--methods", default="single,sync-dp,layerwise-sync")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    model, size = args.model.split(":")
    if args.child:
        child(model, int(size), args.batch_size, args.steps, args.methods.split(","), args.evals)
        return 0
    print("$ python benchmarks/stretch_rates.py " + " ".join(sys.argv[1:] if argv is None else argv), flush=True)
    ratios: dict[str, list[float]] = {}
    for rnd in range(args.rounds):
        print(f"round {rnd}, load {loadavg()}", flush=True)
        cmd = [sys.executable, __file__, "--child", "--model", args.model, "--batch-size", str(args.batch_size),
               "--steps", str(args.steps), "--evals", str(args.evals), "--methods", args.methods]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            pts = [(int(s), float(w)) for s, w in r["points"]]
            rates = [(b[0] - a[0]) * args.batch_size / (b[1] - a[1]) for a, b in itertools.pairwise(pts)
                     if b[1] > a[1]]
            split = first_vs_rest(pts, args.batch_size)
            head = "" if split is None else f"; first 30 steps {split[0]:.0f}, the rest {split[1]:.0f} " \
                                            f"(x{split[0] / split[1]:.2f})"
            if split is not None:
                ratios.setdefault(r["method"], []).append(split[0] / split[1])
            print(f"  {r['method']:16s} run {r['ips']:7.0f} images/s{head}; stretches "
                  + " ".join(f"{v:.0f}" for v in rates), flush=True)
    for method, rs in ratios.items():
        print(f"{method}: first 30 steps / the rest, median x{statistics.median(rs):.2f} over {len(rs)} round(s)")
    print(f"load at the end {loadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
