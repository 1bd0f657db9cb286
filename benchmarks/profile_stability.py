"""Do profiles repeat on a shared machine? Three back-to-back profiles of resnet18 at 32 and of vgg16 at 64.

Run::

    python benchmarks/profile_stability.py                          # pinned one-core profiles (a local worker's)
    python benchmarks/profile_stability.py --cores 0 --runs 3       # unpinned, every core
    python benchmarks/profile_stability.py --models resnet18:32 --repeats 5 --max-rounds 12
    python benchmarks/profile_stability.py --report-only              # the figures of the profiles in --out-dir

Every profile is ``hgpart profile`` in its own process, one after the other, with the profiler's defaults
unless options say otherwise. Printed per model, for layers of at least 2 % of the sum of layers: the
per-layer max/min across the runs (median and worst), also scale-free (each run divided by its sum of layers:
the relative weights a partitioner balances), the worst max/min between layers of identical shape within one
profile, and the sum of layers over the measured whole training step of each run; also the whole step's
max/min across runs, the layers above the spread target, the wall time of each profile, and the load average
at the start and end. Targets: across runs <= 1.10 median and <= 1.25 worst; identical shapes within 1.15;
sum of layers within 15 % of the step. The profiles are written to ``--out-dir``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from hgpart.profile import Profile  # noqa: E402
from hgpart.profile_compare import ratios_across, shape_twin_ratio  # noqa: E402
from hgpart.profile_report import QualitySummary  # noqa: E402

MIN_SHARE = 0.02
TARGET_MEDIAN, TARGET_WORST, TARGET_TWINS, TARGET_STEP = 1.10, 1.25, 1.15, 0.15


@dataclass(frozen=True)
class Run:
    profile: Profile
    seconds: float
    load_end: float


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def profile_once(model: str, size: str, path: Path, args: argparse.Namespace) -> Run:
    cmd = [sys.executable, "-c", "from hgpart.cli import main; main()", "profile", "--model", model, "--input", size,
           "--batch-size", str(args.batch_size), "--out", str(path), "--repeats", str(args.repeats)]
    cmd += ["--cores", str(args.cores)] if args.cores else []
    cmd += ["--max-rounds", str(args.max_rounds)] if args.max_rounds else []
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return Run(Profile.load(path), time.perf_counter() - t0, os.getloadavg()[0])


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def _runs_line(profs: list[Profile], scale_free: bool, share: float) -> str:
    ratios = ratios_across(profs, min_share=share, scale_free=scale_free)
    med, worst = statistics.median(ratios.values()), max(ratios.values())
    name = max(ratios, key=ratios.__getitem__)
    return (f"median {med:.3f} ({_verdict(med <= TARGET_MEDIAN)} <= {TARGET_MEDIAN}), worst {worst:.3f} {name} "
            f"({_verdict(worst <= TARGET_WORST)} <= {TARGET_WORST}), {sum(r > TARGET_MEDIAN for r in ratios.values())}"
            f" of {len(ratios)} layers over {TARGET_MEDIAN}")


def report(model: str, runs: list[Run], share: float = MIN_SHARE) -> None:
    profs = [r.profile for r in runs]
    twin, pair = max((shape_twin_ratio(p, min_share=share) for p in profs), key=lambda t: t[0])
    steps = [p.quality.step_ms for p in profs if p.quality and p.quality.step_ms]
    ratios = [p.layer_sum_ms / p.quality.step_ms for p in profs if p.quality and p.quality.step_ms]
    far = max(ratios, key=lambda r: abs(r - 1.0)) if ratios else float("nan")
    print(f"\n{model}: layers of at least {share:.1%} of the step; setup {profs[0].setup.describe()}")
    for k, r in enumerate(runs, 1):
        q = QualitySummary.of(r.profile, min_share=share)
        rounds = r.profile.quality.rounds if r.profile.quality else 0
        print(f"  run {k}: {r.seconds:6.1f} s, {rounds} rounds, sum of layers {r.profile.layer_sum_ms:9.1f} ms, "
              f"whole step {r.profile.quality.step_ms if r.profile.quality else float('nan'):9.1f} ms, "
              f"{len(q.above_target)} of {q.timed} layers above the spread target "
              f"({len(q.above_target_significant)} of them >= {share:.1%}), load after {r.load_end:.2f}")
    print(f"  per-layer max/min across runs: {_runs_line(profs, False, share)}")
    print(f"  the same, scale-free (each run over its sum of layers): {_runs_line(profs, True, share)}")
    print(f"  identical-shape layers within one profile: worst {twin:.3f}"
          f"{f' ({pair[0]} / {pair[1]})' if pair else ''} ({_verdict(twin <= TARGET_TWINS)} <= {TARGET_TWINS})")
    print(f"  sum of layers / whole step: {', '.join(f'{r:.3f}' for r in ratios)} "
          f"({_verdict(abs(far - 1.0) <= TARGET_STEP)} within {TARGET_STEP:.0%}); whole step max/min across runs "
          f"{max(steps) / min(steps) if steps else float('nan'):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18:32,vgg16:64", help="model:input pairs, comma-separated")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cores", type=int, default=1, help="hgpart profile --cores (0: unpinned, every core)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-rounds", type=int, default=0, help="hgpart profile --max-rounds (0: its default)")
    ap.add_argument("--out-dir", type=Path, default=Path("benchmarks/results/profile_stability"))
    ap.add_argument("--report-only", action="store_true", help="measure nothing: report the profiles in --out-dir")
    ap.add_argument("--min-share", type=float, default=MIN_SHARE, help="layers of at least this share of the step")
    args = ap.parse_args()
    if args.report_only:
        for pair in args.models.split(","):
            model, size = pair.split(":")
            files = sorted(args.out_dir.glob(f"{model}_{size}_run*.json"))
            if files:
                report(f"{model} {size}", [Run(Profile.load(f), float("nan"), float("nan")) for f in files],
                       args.min_share)
        return
    args.out_dir.mkdir(parents=True, exist_ok=True)
    print(f"profile stability: {args.runs} back-to-back runs, cores {args.cores or 'all (unpinned)'}, "
          f"batch {args.batch_size}, repeats {args.repeats}, max rounds {args.max_rounds or 'default'}")
    print(f"load average at start (1/5/15 min): {_load()}  ({os.cpu_count()} cores)", flush=True)
    started = time.perf_counter()
    for pair in args.models.split(","):
        model, size = pair.split(":")
        runs = [profile_once(model, size, args.out_dir / f"{model}_{size}_run{k}.json", args) for k in
                range(1, args.runs + 1)]
        report(f"{model} {size}", runs, args.min_share)
        sys.stdout.flush()
    print(f"\nload average at end (1/5/15 min): {_load()}; benchmark wall {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
