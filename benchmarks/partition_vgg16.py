"""VGG16 at 224x224 (the thesis setting): hypergraph sizes, build time, partition time and quality.

Usage::

    python benchmarks/partition_vgg16.py                          # K = 2 4 8, both grains, both backends
    python benchmarks/partition_vgg16.py --ks 2 4 --grains coarse --backends mtkahypar
    python benchmarks/partition_vgg16.py --kahypar-time-limit 300

Uses the measured profile ``profiles/vgg16_224_b32.json`` when it exists and
matches the model, else the analytic (FLOP) profile, and says which. Every
figure printed is measured in this run: build seconds, partition seconds
(the backend's own time in its child process, without reading the hMetis file; "wall" adds writing and
reading that file and the child's start-up), Comm. Vol (MiB per
forward pass at batch 32, computed by hgpart.metrics from the partition) and
Max/Avg work. A backend that exceeds its time limit is reported as such.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--grains", nargs="+", default=["coarse", "fine"], choices=["coarse", "fine"])
    ap.add_argument("--backends", nargs="+", default=["mtkahypar", "kahypar"])
    ap.add_argument("--mtkahypar-preset", default="deterministic")
    ap.add_argument("--threads", type=int, default=2, help="Mt-KaHyPar threads")
    ap.add_argument("--epsilon", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=900.0, help="seconds per partition run")
    ap.add_argument("--kahypar-time-limit", type=float, default=240.0, help="seconds per KaHyPar run")
    args = ap.parse_args()

    from hgpart.errors import HgpartError
    from hgpart.hypergraph import build_hypergraph
    from hgpart.metrics import partition_metrics
    from hgpart.models import load_graph, parse_input
    from hgpart.partitioners import partition
    from hgpart.profile import Profile, analytic_profile

    console = Console()
    t0 = time.perf_counter()
    graph = load_graph("vgg16", input_shape=parse_input("224"))
    console.print(f"vgg16 224x224x3 layer graph in {time.perf_counter() - t0:.1f} s "
                  f"({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load "
                  f"{os.getloadavg()[0]:.1f})", highlight=False)
    prof_path = ROOT / "profiles" / "vgg16_224_b32.json"
    prof = None
    if prof_path.is_file():
        try:
            prof = Profile.load(prof_path)
            prof.check(graph, path=str(prof_path))
            console.print(f"profile: measured, {prof_path.relative_to(ROOT)} (work in {prof.work_unit})")
        except HgpartError as exc:
            console.print(f"profile {prof_path} unusable ({exc.line()}); using the analytic profile")
            prof = None
    if prof is None:
        prof = analytic_profile(graph, 32)
        console.print(f"profile: analytic (FLOP counts, work in {prof.work_unit}); "
                      f"{prof_path.relative_to(ROOT)} not found or not matching")
    work = prof.work()

    sizes = Table(title="VGG16 224x224, batch 32: hypergraphs", title_justify="left")
    for c in ("grain", "vertices", "nets", "pins", "build s"):
        sizes.add_column(c, justify="right" if c != "grain" else "left")
    results = Table(title=f"Partitions (epsilon {args.epsilon}, seed {args.seed}; Comm. Vol in MiB per forward "
                    "pass at batch 32)", title_justify="left")
    for c in ("grain", "K", "backend", "preset", "threads", "partition s", "wall s", "Comm. Vol (MiB)", "Max/Avg",
              "backend km1 (MiB)", "note"):
        results.add_column(c, justify="left" if c in ("grain", "backend", "preset", "note") else "right")

    for grain in args.grains:
        hg = build_hypergraph(graph, work, batch_size=prof.batch_size, grain=grain, work_unit=prof.work_unit)
        sizes.add_row(grain, f"{hg.num_vertices:,}", f"{hg.num_nets:,}", f"{hg.num_pins:,}",
                      f"{hg.build_seconds:.2f}")
        console.print(f"{grain}: {hg.num_vertices:,} vertices, {hg.num_nets:,} nets, {hg.num_pins:,} pins, "
                      f"built in {hg.build_seconds:.2f} s", highlight=False)
        for backend in args.backends:
            limit = args.kahypar_time_limit if backend == "kahypar" else args.time_limit
            preset = args.mtkahypar_preset if backend == "mtkahypar" else None
            for k in args.ks:
                t1 = time.perf_counter()
                try:
                    res = partition(hg, k=k, backend=backend, epsilon=args.epsilon, seed=args.seed, preset=preset,
                                    time_limit=limit, threads=args.threads)
                except HgpartError as exc:
                    wall = time.perf_counter() - t1
                    results.add_row(grain, str(k), backend, preset or "km1", "", "-", f"{wall:.0f}", "-", "-", "-",
                                    exc.line()[:70])
                    console.print(f"  {backend} K={k}: {exc.line()}", highlight=False)
                    continue
                wall = time.perf_counter() - t1
                m = partition_metrics(hg, res.parts, k)
                own = res.backend_objective * res.objective_scale / 2**20 if res.backend_objective else 0.0
                note = "" if res.info.get("cost_exact") else "costs rounded for int32"
                results.add_row(grain, str(k), backend, res.preset, str(res.info.get("threads", "")),
                                f"{res.seconds:.1f}", f"{wall:.1f}", f"{m.comm_volume_mib:,.1f}",
                                f"{m.max_over_avg:.3f}", f"{own:,.1f}", note)
                console.print(f"  {backend} K={k}: {res.seconds:.1f} s (wall {wall:.1f} s incl. file write/read), "
                              f"Comm. Vol {m.comm_volume_mib:,.1f} MiB, Max/Avg {m.max_over_avg:.3f}",
                              highlight=False)
        del hg
    console.print(sizes)
    console.print(results)


if __name__ == "__main__":
    main()
