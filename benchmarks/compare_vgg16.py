"""Benchmark: the thesis's §5.1 comparison for VGG16 224x224x3, batch 32, on this machine.

Usage::

    python benchmarks/compare_vgg16.py                       # measured profile, all methods, N = 2..128
    python benchmarks/compare_vgg16.py --wait 1800           # poll for the committed profile first
    python benchmarks/compare_vgg16.py --fine-k 2,4,8 --budget 1800

Runs layer-wise, horizontal, incremental and coarse/fine hypergraph
partitioning (Mt-KaHyPar, fast preset) over N, prints the thesis-style tables
with the thesis's numbers beside ours, the wall time of each method and of the
whole run, and writes the report folder (CSV, JSON, Markdown, PNGs, and this
console output with the machine description) under benchmarks/results/.

It uses the committed measured profile ``profiles/vgg16_224_b32.json``; the
layer graph embedded in it (if any) avoids importing TensorFlow. Without a
profile it waits ``--wait`` seconds for one, then falls back to the analytic
(FLOP) profile and says so in the output. Every number is measured in this run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default=str(ROOT / "profiles" / "vgg16_224_b32.json"))
    ap.add_argument("--wait", type=float, default=0.0, help="seconds to poll for the profile before falling back")
    ap.add_argument("--k", default="2,4,8,16,32,64,128")
    ap.add_argument("--fine-k", default=None, help="N values for the fine-grain hypergraph (default: --k)")
    ap.add_argument("--methods", default="layerwise,horizontal,incremental,hypergraph")
    ap.add_argument("--epsilon", default="0.1")
    ap.add_argument("--preset", default="default", help="Mt-KaHyPar preset (default: the fast 'default')")
    ap.add_argument("--backend", default="mtkahypar",
                    help="hypergraph partitioner: mtkahypar (the thesis's kind of tool) or auto (exact + refinement)")
    ap.add_argument("--budget", type=float, default=None, help="skip hypergraph runs once this many s are spent")
    ap.add_argument("--time-limit", type=float, default=None, help="seconds per hypergraph run")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "vgg16_224_b32_compare"))
    args = ap.parse_args(argv)

    from rich.console import Console

    from hgpart.compare.report import print_report, write_report
    from hgpart.compare.static import machine_info, run_static
    from hgpart.layergraph import LayerGraph
    from hgpart.profile import Profile, analytic_profile

    console = Console(record=True, width=200)
    started = time.perf_counter()
    prof_path = Path(args.profile)
    deadline = time.monotonic() + args.wait
    while not prof_path.is_file() and time.monotonic() < deadline:
        time.sleep(min(30.0, max(1.0, deadline - time.monotonic())))
    note = ""
    if prof_path.is_file():
        prof = Profile.load(prof_path)
        if prof.graph:
            graph = LayerGraph.from_dict(prof.graph)
        else:
            from hgpart.models import load_graph

            graph = load_graph("vgg16", input_shape=(224, 224, 3))
        source = str(prof_path.relative_to(ROOT)) if prof_path.is_relative_to(ROOT) else str(prof_path)
    else:
        from hgpart.models import load_graph

        graph = load_graph("vgg16", input_shape=(224, 224, 3))
        prof, source = analytic_profile(graph, 32), "analytic"
        note = (f"NOTE: {prof_path} was not there after waiting {args.wait:g} s; this run uses the ANALYTIC "
                "(FLOP-count) profile, not measured times.")
        console.print(f"[bold yellow]{note}[/]")
    ks = _ints(args.k)
    fine_ks = set(_ints(args.fine_k)) if args.fine_k else set(ks)
    eps = [float(e) for e in args.epsilon.split(",")]

    def skip(method: str, grain: str, k: int, e: float | None) -> str:
        if method == "hypergraph" and grain == "fine" and k not in fine_ks:
            return (f"fine-grain Mt-KaHyPar runs limited to N in {sorted(fine_ks)} by --fine-k "
                    "(each fine-grain run takes minutes on this 2-core machine)")
        return ""

    from hgpart.partitioners.mtkahypar_backend import DEFAULT_THREADS

    threads = f"{DEFAULT_THREADS} (Mt-KaHyPar default)"
    console.print(f"VGG16 224x224x3 batch {prof.batch_size}, profile: {source} ({prof.mode}, {prof.work_unit}); "
                  f"N = {ks}; fine-grain hypergraph N = {sorted(fine_ks)}; epsilon = {eps}; "
                  f"backend {args.backend}, Mt-KaHyPar preset {args.preset}, threads {threads}",
                  highlight=False)
    cmp = run_static(graph, prof, ks=ks, methods=args.methods.split(","), grains=["coarse", "fine"], epsilons=eps,
                     backend=args.backend, preset=args.preset, time_limit=args.time_limit,
                     budget_seconds=args.budget, skip=skip, profile_source=source)
    print_report(cmp, images=64000, batch_sizes=[16, 32, 64], console=console)

    from rich.table import Table

    per = Table(title="Wall time per method (partitioning + metrics, summed over N)", title_justify="left")
    for col in ("method", "runs ok", "not possible / skipped / failed", "seconds"):
        per.add_column(col, justify="left" if col == "method" else "right")
    groups: dict[str, list] = {}
    for r in cmp.results:
        groups.setdefault(r.label, []).append(r)
    for label, rs in groups.items():
        ok = [r for r in rs if r.status == "ok"]
        other = [f"N={r.k} {r.status}" for r in rs if r.status != "ok"]
        per.add_row(label, str(len(ok)), ", ".join(other) or "-", f"{sum(r.seconds for r in rs):.1f}")
    console.print(per)
    for g, info in cmp.hypergraphs.items():
        console.print(f"{g} hypergraph: {info['vertices']:,} vertices, {info['nets']:,} nets, {info['pins']:,} pins, "
                      f"built in {info['build_seconds']:.1f} s", highlight=False)
    m = machine_info()
    console.print(f"machine: {m['cpu']}, {m['usable_cpus']} usable of {m['logical_cpus']} logical CPUs, "
                  f"{m['memory_gib']} GiB, Python {m['python']}, {m['platform']}", highlight=False)
    total = time.perf_counter() - started
    console.print(f"wall time of the whole comparison: {cmp.wall_seconds:.1f} s (benchmark total {total:.1f} s)",
                  highlight=False)
    out = Path(args.out)
    write_report(cmp, out, images=64000, batch_sizes=[16, 32, 64])
    from hgpart.fileio import atomic_write_text

    atomic_write_text(out / "benchmark_output.txt", (note + "\n" if note else "") + console.export_text())
    console.print(f"wrote {out}", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
