"""Partition quality and speed: volume, Max/Avg, time, proven bound and gap per backend per K.

Usage::

    python benchmarks/partition_quality.py                       # VGG16 224^2 b32 + ResNet18 32^2, everything
    python benchmarks/partition_quality.py --models vgg16 --coarse-ks 2,4,8,16 --skip-fine
    nohup python benchmarks/partition_quality.py > benchmarks/results/partition_quality.log 2>&1 &

Weights: the committed measured profile ``profiles/<model>_<input>_b32.json``
when it exists, and FLOP weights (``analytic_profile``) always. For every
coarse K: KaHyPar (km1 preset), Mt-KaHyPar DEFAULT and QUALITY, exact, auto;
``bound`` is the exact program's proven lower bound at the imbalance each
result actually reached, ``gap`` = volume / bound - 1. Fine grain: grouped
auto (and grouped Mt-KaHyPar QUALITY) over the K sweep, total time, against
ungrouped Mt-KaHyPar QUALITY on the K values in ``--ungrouped-ks``. Every
figure is measured in this run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("HGPART_MTKAHYPAR_THREADS", "2")

from hgpart.errors import HgpartError  # noqa: E402
from hgpart.hypergraph import build_hypergraph  # noqa: E402
from hgpart.metrics import MIB, partition_metrics  # noqa: E402
from hgpart.partitioners import partition  # noqa: E402
from hgpart.partitioners.block import contract  # noqa: E402
from hgpart.partitioners.exact import coarse_lower_bound  # noqa: E402
from hgpart.profile import Profile, analytic_profile, default_profile_path  # noqa: E402

MODELS = {"vgg16": (224, 224, 3), "resnet18": (32, 32, 3)}
BACKENDS = [
    ("kahypar", None),
    ("mtkahypar", "default"),
    ("mtkahypar", "quality"),
    ("exact", None),
    ("auto", None),
]


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def profiles_for(graph, batch: int, root: Path) -> list[tuple[str, Profile]]:
    out = []
    path = root / default_profile_path(graph, batch)
    if path.is_file():
        prof = Profile.load(path)
        prof.check(graph, path=str(path))
        out.append((f"measured ({path.name})", prof))
    else:
        print(f"# no measured profile at {path}: FLOP weights only", flush=True)
    out.append(("FLOP", analytic_profile(graph, batch)))
    return out


def coarse_table(hg, ks, args) -> None:
    print(f"{'K':>4} {'backend':<18} {'Comm.Vol MiB':>13} {'Max/Avg':>8} {'time s':>8} {'bound MiB':>10} {'gap':>7}",
          flush=True)
    for k in ks:
        for name, preset in BACKENDS:
            if name in args.skip:
                continue
            label = name + (f"-{preset}" if preset else "")
            try:
                t0 = time.perf_counter()
                tl = args.kahypar_limit if name == "kahypar" else args.time_limit
                res = partition(hg, k=k, backend=name, epsilon=args.epsilon, seed=1, preset=preset, time_limit=tl)
                secs = time.perf_counter() - t0
            except HgpartError as exc:
                print(f"{k:>4} {label:<18} failed: {exc.line()[:90]}", flush=True)
                continue
            m = partition_metrics(hg, res.parts, k)
            bound = res.lower_bound_bytes
            if bound is None and args.bound_limit > 0:
                eps = max(args.epsilon, m.max_over_avg - 1.0)
                bound, _ = coarse_lower_bound(hg, k, eps, args.bound_limit)
            bstr = f"{bound / MIB:10.1f}" if bound is not None else f"{'-':>10}"
            gap = f"{res.objective_bytes / bound - 1.0:7.1%}" if bound else f"{'-':>7}"
            print(f"{k:>4} {label:<18} {m.comm_volume_mib:13.1f} {m.max_over_avg:8.3f} {secs:8.1f} {bstr} {gap}",
                  flush=True)


def fine_table(graph, prof, batch, ks, args) -> None:
    t0 = time.perf_counter()
    hg = build_hypergraph(graph, prof.work(), batch_size=batch, grain="fine", work_unit=prof.work_unit)
    print(f"# fine hypergraph: {hg.num_vertices} vertices, {hg.num_pins} pins, built in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    print(f"{'K':>4} {'grouped auto MiB':>17} {'Max/Avg':>8} {'s':>6} {'chosen':<22} {'grp mtk-Q MiB':>14} {'s':>6} "
          f"{'ungrouped mtk-Q MiB':>20} {'s':>7} {'auto vs ungrouped':>17}", flush=True)
    total_auto = 0.0
    for k in ks:
        t = time.perf_counter()
        auto = partition(hg, k=k, backend="auto", epsilon=args.epsilon, seed=1, time_limit=args.fine_limit)
        ta = time.perf_counter() - t
        total_auto += ta
        ma = partition_metrics(hg, auto.parts, k)
        t = time.perf_counter()
        small, vmap = contract(hg, k)
        gq = partition(small, k=k, backend="mtkahypar", epsilon=args.epsilon, seed=1, preset="quality")
        tg = time.perf_counter() - t
        gq_mib = partition_metrics(hg, gq.parts[vmap], k).comm_volume_mib
        ug, tu, rel = "-", "-", "-"
        if k in args.ungrouped_ks:
            try:
                t = time.perf_counter()
                r = partition(hg, k=k, backend="mtkahypar", epsilon=args.epsilon, seed=1, preset="quality",
                              time_limit=args.ungrouped_limit)
                tu = f"{time.perf_counter() - t:.1f}"
                um = r.objective_bytes / MIB
                ug = f"{um:.1f}"
                rel = f"{ma.comm_volume_mib / um - 1.0:+.1%}"
            except HgpartError as exc:
                ug = "timeout" if "time limit" in exc.line() else "failed"
        print(f"{k:>4} {ma.comm_volume_mib:17.1f} {ma.max_over_avg:8.3f} {ta:6.1f} {auto.info['chosen']:<22} "
              f"{gq_mib:14.1f} {tg:6.1f} {ug:>20} {tu:>7} {rel:>17}", flush=True)
    print(f"# fine sweep K={ks}: grouped auto total {total_auto:.1f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="vgg16,resnet18")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--epsilon", type=float, default=0.1)
    ap.add_argument("--coarse-ks", default="2,4,8,16,32,64,128")
    ap.add_argument("--fine-ks", default="2,4,8,16,32,64,128")
    ap.add_argument("--ungrouped-ks", default="2,4,8")
    ap.add_argument("--time-limit", type=float, default=60.0, help="exact/auto time limit per K (s)")
    ap.add_argument("--bound-limit", type=float, default=30.0, help="time for the bound of other backends (s)")
    ap.add_argument("--kahypar-limit", type=float, default=300.0)
    ap.add_argument("--fine-limit", type=float, default=20.0)
    ap.add_argument("--ungrouped-limit", type=float, default=600.0)
    ap.add_argument("--skip", default="", help="backends to leave out, e.g. kahypar")
    ap.add_argument("--skip-fine", action="store_true")
    ap.add_argument("--weights", default="all", choices=["all", "measured", "flop"])
    args = ap.parse_args()
    args.skip = set(args.skip.split(",")) if args.skip else set()
    args.ungrouped_ks = ints(args.ungrouped_ks)
    root = Path(__file__).resolve().parents[1]
    from hgpart.models import load_graph

    print(f"# partition_quality: epsilon={args.epsilon}, batch={args.batch}, cores={os.cpu_count()}, "
          f"argv={' '.join(sys.argv[1:])}", flush=True)
    for name in args.models.split(","):
        graph = load_graph(name, input_shape=MODELS.get(name))
        for wname, prof in profiles_for(graph, args.batch, root):
            if args.weights == "measured" and not wname.startswith("measured"):
                continue
            if args.weights == "flop" and wname != "FLOP":
                continue
            t0 = time.perf_counter()
            hg = build_hypergraph(graph, prof.work(), batch_size=args.batch, grain="coarse", work_unit=prof.work_unit)
            print(f"\n## {name} {graph.input_tag} b{args.batch}, {wname} weights, coarse grain "
                  f"({hg.num_vertices} vertices, {hg.num_pins} pins, built in {time.perf_counter() - t0:.1f} s)",
                  flush=True)
            coarse_table(hg, ints(args.coarse_ks), args)
            if not args.skip_fine:
                print(f"\n## {name} {graph.input_tag} b{args.batch}, {wname} weights, fine grain", flush=True)
                fine_table(graph, prof, args.batch, ints(args.fine_ks), args)


if __name__ == "__main__":
    main()
