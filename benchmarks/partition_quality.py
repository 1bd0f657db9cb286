"""Partition quality and speed: volume, Max/Avg, time, proven bound and gap per backend per K.

Usage::

    python benchmarks/partition_quality.py                       # VGG16 224^2 b32 + ResNet18 32^2, everything
    python benchmarks/partition_quality.py --models vgg16 --weights flop --grains coarse --coarse-ks 8,16
    python benchmarks/partition_quality.py --models vgg16 --grains fine --fine-backends auto
    nohup python benchmarks/partition_quality.py > benchmarks/results/partition_quality.log 2>&1 &
    python benchmarks/partition_quality.py --models resnet18 --grains fine --fine-backends auto \
        --refs-from benchmarks/results/partition_quality/ref2_resnet18_fine.log   # compare with logged references

Weights: the committed measured profile ``profiles/<model>_<input>_b32.json``
when it exists, and FLOP weights (``analytic_profile``). Backends (pick with
``--coarse-backends`` / ``--fine-backends``):

* ``kahypar`` (our km1 preset), ``mtkahypar-<preset>`` (e.g. ``mtkahypar-quality``):
  the general partitioners on the *ungrouped* hypergraph (the references);
* ``grouped-mtkahypar-quality``: Mt-KaHyPar QUALITY on the per-layer grouped graph;
* ``block-vcycles``: the 2-D checkerboard as a starting point: Mt-KaHyPar QUALITY
  V-cycles (``improve_partition``, :data:`VCYCLES`) from it on the same grouped graph;
* ``exact``, ``auto``, ``block``: hgpart's own backends; ``auto-deterministic`` and
  ``exact-deterministic``: their fixed-work presets (same seed, same placement).

Coarse rows show ``bound`` = the exact program's proven lower bound at the
imbalance the row actually reached and ``gap`` = volume / bound - 1. After
each table, one line per K compares ``auto`` with the best reference that
finished (coarse: KaHyPar and Mt-KaHyPar QUALITY; fine: ungrouped Mt-KaHyPar
QUALITY) and the fine table sums the time of the ``auto`` sweep. A reference
that runs past ``--ref-limit`` is reported as such, never waited for.
Every figure is measured in this run.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from hgpart.errors import HgpartError  # noqa: E402
from hgpart.hypergraph import Hypergraph, build_hypergraph  # noqa: E402
from hgpart.metrics import MIB, partition_metrics  # noqa: E402
from hgpart.partitioners import partition  # noqa: E402
from hgpart.partitioners.auto import prepare_fine  # noqa: E402
from hgpart.partitioners.block import contract  # noqa: E402
from hgpart.partitioners.certificate import certify, not_computed  # noqa: E402
from hgpart.partitioners.portfolio import refine  # noqa: E402
from hgpart.profile import Profile, analytic_profile, default_profile_path  # noqa: E402

MODELS = {"vgg16": (224, 224, 3), "resnet18": (32, 32, 3)}
COARSE_BACKENDS = "kahypar,mtkahypar-quality,exact,auto"
FINE_BACKENDS = "auto,grouped-mtkahypar-quality,block,mtkahypar-quality"
#: V-cycles from the checkerboard (``block-vcycles``): 6 gave 2-15% less than 2 on VGG16 224^2 fine at K = 4..64
VCYCLES = 6
COARSE_REFS = ("kahypar", "mtkahypar-quality")
FINE_REFS = ("mtkahypar-quality",)


def mib(v: float, width: int = 13) -> str:
    """MiB with 3 decimals below 100 (ResNet18 32^2 volumes are a few MiB), 1 above."""
    return f"{v:{width}.3f}" if abs(v) < 100 else f"{v:{width}.1f}"


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def profiles_for(graph, batch: int, root: Path, which: str) -> list[tuple[str, Profile]]:
    out = []
    path = root / default_profile_path(graph, batch)
    if which in ("all", "measured"):
        if path.is_file():
            prof = Profile.load(path)
            prof.check(graph, path=str(path))
            out.append((f"measured ({path.name})", prof))
        else:
            print(f"# no measured profile at {path}", flush=True)
    if which in ("all", "flop"):
        out.append(("FLOP", analytic_profile(graph, batch)))
    return out


def run_backend(hg: Hypergraph, spec: str, k: int, args):
    """One partition by backend spec; returns (parts, seconds, result) or raises HgpartError."""
    t0 = time.perf_counter()
    if spec in ("grouped-mtkahypar-quality", "block-vcycles"):
        small, vmap = contract(hg, k)
        if spec == "block-vcycles":
            res = partition(small, k=k, backend="block", epsilon=args.epsilon, seed=1)
            res.parts = refine(small, res.parts, k=k, epsilon=args.epsilon, seed=1, vcycles=VCYCLES,
                               time_limit=args.ref_limit)
        else:
            res = partition(small, k=k, backend="mtkahypar", epsilon=args.epsilon, seed=1, preset="quality",
                            time_limit=args.ref_limit)
        return res.parts[vmap], time.perf_counter() - t0, res
    name, _, preset = spec.partition("-")
    if name in ("kahypar", "mtkahypar"):
        limit = args.ref_limit
    elif name in ("exact", "auto"):
        limit = args.time_limit if hg.grain == "coarse" else args.fine_limit
    else:
        limit = None
    res = partition(hg, k=k, backend=name, epsilon=args.epsilon, seed=1, preset=preset or None, time_limit=limit,
                    threads=args.threads if name in ("mtkahypar", "auto") else None)
    return res.parts, time.perf_counter() - t0, res


SECTION = re.compile(r"^## (\S+) (\S+) b(\d+), (\w+).* weights, (\w+) grain")
ROW = re.compile(r"^\s*(\d+) (\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")


def logged_refs(paths: list[str]) -> dict[tuple[str, str, str, str], dict[int, tuple[float, str]]]:
    """Reference volumes from earlier logs of this script: (model, input, weights, grain) -> K -> (MiB, where).

    Why: an ungrouped reference run takes minutes to an hour per K here, so
    it is measured once and its log reused by ``--refs-from`` (the comparison
    lines name the log they come from). A value printed too coarsely for a
    comparison within 0.5% (e.g. 0.2 for 0.25 MiB in the oldest logs) is skipped."""
    out: dict[tuple[str, str, str, str], dict[int, tuple[float, str]]] = {}
    for path in paths:
        key = None
        for line in Path(path).read_text().splitlines():
            if m := SECTION.match(line):
                key = (m[1], m[2], m[4].lower(), m[5])
            elif key and (m := ROW.match(line)) and m[2] in COARSE_REFS + FINE_REFS:
                k, vol = int(m[1]), float(m[3])
                decimals = len(m[3].partition(".")[2])
                if 0.5 * 10.0 ** -decimals > 5e-3 * vol:
                    continue  # rounding of more than 0.5% (older logs: one decimal) cannot show 2%
                have = out.setdefault(key, {}).get(k)
                if have is None or vol < have[0]:
                    out[key][k] = (vol, f"{m[2]} ({Path(path).name})")
    return out


def table(hg: Hypergraph, ks: list[int], specs: list[str], refs: tuple[str, ...], args,
          logged: dict[int, tuple[float, str]] | None = None) -> None:
    coarse = hg.grain == "coarse"
    print(f"{'K':>4} {'backend':<26} {'Comm.Vol MiB':>13} {'Max/Avg':>8} {'time s':>8}"
          + (f" {'bound MiB':>10} {'gap':>7}" if coarse else "") + "  chosen / note", flush=True)
    vols: dict[tuple[int, str], float] = {}
    auto_total = 0.0
    if not coarse and "auto" in specs and args.fine_budget > 0:
        # the K-independent work (coarse projection, its analysis, the groupings) is done once, counted in the
        # budget, instead of inside the share of whichever K comes first
        t0 = time.perf_counter()
        prepare_fine(hg)
        auto_total = time.perf_counter() - t0
        print(f"# auto's one-time fine-grain preparation: {auto_total:.1f} s of the {args.fine_budget:g} s budget",
              flush=True)
    proven: dict[int, float] = {}
    for i, k in enumerate(ks):
        for spec in specs:
            if spec == "auto" and not coarse and args.fine_budget > 0:
                # the sweep shares one budget, weighted by log2 K + 2 (a K-way partition costs about
                # log2 K bisections); what small K leave unused goes to the larger ones
                weights = [math.log2(kk) + 2.0 for kk in ks[i:]]
                args.fine_limit = max((args.fine_budget - auto_total) * weights[0] / sum(weights), 1.0)
            try:
                parts, secs, res = run_backend(hg, spec, k, args)
            except HgpartError as exc:
                line = exc.line()
                why = "time limit" if "time limit" in line else "failed"
                print(f"{k:>4} {spec:<26} {why}: {line[:110]}", flush=True)
                continue
            m = partition_metrics(hg, parts, k)
            vols[(k, spec)] = m.comm_volume_mib
            if spec == "auto":
                auto_total += secs
            note = str(res.info.get("chosen", "")) if res.info else ""
            if spec == "auto" and res.info.get("candidates"):
                # every candidate auto scored, incl. KaHyPar / Mt-KaHyPar QUALITY's own results on its graph
                note += " (" + ", ".join(f"{n} {mib(b / MIB, 0)}" for n, b in res.info["candidates"].items()) + ")"
            extra = ""
            if coarse:
                # a bound proven at epsilon by exact/auto also bounds every other row that met epsilon
                known = res.lower_bound_bytes
                if known is not None and m.max_over_avg <= 1.0 + args.epsilon + 1e-9:
                    proven[k] = max(known, proven.get(k, 0.0))
                elif known is None and m.max_over_avg <= 1.0 + args.epsilon + 1e-9:
                    known = proven.get(k)
                if known is None and args.bound_limit <= 0:
                    cert = not_computed("--bound-limit 0")
                else:
                    cert = certify(hg, k=k, epsilon=args.epsilon, volume_bytes=m.comm_volume_mib * MIB,
                                   max_over_avg=m.max_over_avg, time_limit=args.bound_limit, known_bound=known)
                bstr, gap = cert.cells()
                extra = f" {bstr:>10} {gap:>7}"
            print(f"{k:>4} {spec:<26} {mib(m.comm_volume_mib)} {m.max_over_avg:8.3f} {secs:8.1f}{extra}  {note}",
                  flush=True)
    if "auto" in specs and (any(r in specs for r in refs) or logged):
        print(f"# auto vs the best of {', '.join(refs)} on the ungrouped graph (this run"
              + (", --refs-from logs" if logged else "") + "):", flush=True)
        for k in ks:
            done = [(vols[(k, r)], r) for r in refs if (k, r) in vols]
            if logged and k in logged:
                done.append(logged[k])
            if (k, "auto") not in vols or not done:
                print(f"#   K={k}: not comparable (a run did not finish)", flush=True)
                continue
            best, who = min(done)
            a = vols[(k, "auto")]
            print(f"#   K={k}: auto {mib(a, 0)} MiB vs {who} {mib(best, 0)} MiB: {a / best - 1.0:+.2%}", flush=True)
    if "auto" in specs:
        print(f"# auto sweep K={','.join(map(str, ks))}: {auto_total:.1f} s in total", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="vgg16,resnet18")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--epsilon", type=float, default=0.1)
    ap.add_argument("--grains", default="coarse,fine")
    ap.add_argument("--weights", default="all", choices=["all", "measured", "flop"])
    ap.add_argument("--coarse-ks", default="2,4,8,16,32,64,128")
    ap.add_argument("--fine-ks", default="2,4,8,16,32,64,128")
    ap.add_argument("--coarse-backends", default=COARSE_BACKENDS)
    ap.add_argument("--fine-backends", default=FINE_BACKENDS)
    ap.add_argument("--time-limit", type=float, default=120.0, help="coarse exact/auto time limit per K (s)")
    ap.add_argument("--fine-limit", type=float, default=8.0, help="fine auto time limit per K (s)")
    ap.add_argument("--fine-budget", type=float, default=55.0,
                    help="time budget of the whole fine auto sweep (s), shared out over the remaining K "
                         "in proportion to log2 K + 2; "
                         "0 = --fine-limit per K")
    ap.add_argument("--bound-limit", type=float, default=60.0, help="time for the bound of other backends (s)")
    ap.add_argument("--ref-limit", type=float, default=900.0, help="KaHyPar / Mt-KaHyPar time limit per run (s)")
    ap.add_argument("--threads", type=int, default=2,
                    help="Mt-KaHyPar threads (also for its non-deterministic presets) and auto's fine-grain workers")
    ap.add_argument("--refs-from", nargs="*", default=[], metavar="LOG",
                    help="earlier logs of this script whose reference rows join the 'auto vs' lines")
    args = ap.parse_args()
    refs_logged = logged_refs(args.refs_from)
    root = Path(__file__).resolve().parents[1]
    from hgpart.models import load_graph

    print(f"# partition_quality: epsilon={args.epsilon}, batch={args.batch}, cores={os.cpu_count()}, "
          f"mtkahypar threads={args.threads}, argv={' '.join(sys.argv[1:])}", flush=True)
    grains = args.grains.split(",")
    for name in args.models.split(","):
        graph = load_graph(name, input_shape=MODELS.get(name))
        for wname, prof in profiles_for(graph, args.batch, root, args.weights):
            for grain in grains:
                t0 = time.perf_counter()
                hg = build_hypergraph(graph, prof.work(), batch_size=args.batch, grain=grain,
                                      work_unit=prof.work_unit)
                print(f"\n## {name} {graph.input_tag} b{args.batch}, {wname} weights, {grain} grain "
                      f"({hg.num_vertices} vertices, {hg.num_pins} pins, built in {time.perf_counter() - t0:.1f} s)",
                      flush=True)
                logged = refs_logged.get((name, graph.input_tag, wname.split()[0].lower(), grain))
                if grain == "coarse":
                    table(hg, ints(args.coarse_ks), args.coarse_backends.split(","), COARSE_REFS, args, logged)
                else:
                    table(hg, ints(args.fine_ks), args.fine_backends.split(","), FINE_REFS, args, logged)


if __name__ == "__main__":
    main()
