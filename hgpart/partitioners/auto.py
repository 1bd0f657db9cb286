"""The ``auto`` backend: the best placement of several strategies, by our own km1.

Usage::

    res = partition(hg, k=8, backend="auto", epsilon=0.1, time_limit=60)
    res.info["chosen"], res.info["candidates"]     # which strategy won, and every km1 tried (bytes)

Choice, from ``benchmarks/partition_quality.py`` (VGG16 224^2 b32, ResNet18 32^2):

* **Coarse grain.** The exact count program (:mod:`hgpart.partitioners.exact`,
  seeded with the best contiguous chain placement of :mod:`.chain`) proves
  the optimum for VGG-like models at small K in seconds, where KaHyPar and
  Mt-KaHyPar QUALITY stay ~28-40% above it. It does not model split
  Add/depthwise columns (ResNet), and at large K the time limit stops it
  before optimality, so auto also runs Mt-KaHyPar QUALITY and KaHyPar side
  by side (one thread each: both deterministic, so these candidates *are*
  the two tools' results for the seed; while KaHyPar runs, Mt-KaHyPar's core
  tries further seeds, see :func:`_general`), refines the best with
  Mt-KaHyPar V-cycles (:func:`hgpart.partitioners.portfolio.refine`) and
  keeps the best that meets the balance. It is therefore never worse than
  the better of KaHyPar and Mt-KaHyPar QUALITY with the same seed whenever
  they finish within the time limit, which every stage shares (on graphs above
  ``LARGE_PINS`` pins they run on the per-layer grouped graph). The exact
  program's proven lower bound is reported (``lower_bound_bytes``, coarse
  grain only: fine placements may split filters, so the coarse optimum
  bounds nothing there).
* **Fine grain.** Each conv layer is a dense filters x channels block, so
  the portfolio (:mod:`hgpart.partitioners.portfolio`) partitions nested
  per-layer groupings with 8, 16, 32 and 64 groups per axis of every conv
  layer (:func:`.block.grouped_family`; sides below K/8 are skipped, they
  cannot balance): single-threaded Mt-KaHyPar QUALITY runs, one worker per
  core, seeds round-robin over the groupings, then V-cycles from the best
  runs. Why many small runs: one QUALITY run varies by 10-30% with the seed,
  and the coarser groupings win at large K (VGG16 FLOP K = 128: 16 x 16
  groups 7,275 MiB, 64 x 64 groups 9,209). For residual models at K <=
  ``SMALL_K`` the coarse projection (filters kept whole, >= 64 groups per
  layer) joins the portfolio (ResNet18 FLOP K = 8: 2.49 MiB against
  2.72-2.84 from the fine groupings).
  A coarse placement is a fine placement of the same volume (all channel
  tasks of filter f with its reduction), so at K <= 8 (K <= 4 for residual
  models) the count program of :mod:`hgpart.partitioners.exact` runs on the
  coarse projection in a thread beside the portfolio (which then has one
  worker fewer) for 85% of the budget, and its placement is lifted: it
  proves the coarse optimum of VGG-like models there in seconds, which the
  portfolio rarely beats (VGG16 FLOP K = 4: 252.2 MiB, the groupings
  350-355). Above that K it is far behind and is not run. Every candidate
  is scored on the graph it was found on (a grouping keeps km1 exactly) and
  expanded to full resolution. The 2-D checkerboard (:mod:`.block`) is
  neither a candidate nor a start: six V-cycles from it (``partition_quality.py
  --fine-backends block,block-vcycles``) tie auto at K = 2 and are above it in
  23 of the other 24 (model, weights, K) rows, by 0.2-169%, once 1.3% below
  (ResNet18 measured K = 16, within one-thread Mt-KaHyPar's run-to-run
  spread), and they take 4-46 s per K on one thread, most of a 55 s sweep.

The time limit is split between the stages; every candidate is measured with
:func:`hgpart.metrics.km1_bytes` on the hypergraph given, and one that breaks
the balance ``(1 + eps) * total / K`` by more than one vertex (the
partitioners' own tolerance) is discarded; the fill-in-order fallback competes
only when it meets the balance exactly.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from hgpart.errors import HgpartError
from hgpart.hypergraph import Hypergraph, VertexBlock
from hgpart.metrics import balance_class, km1_bytes
from hgpart.partitioners._interrupt import cancel_on_interrupt
from hgpart.partitioners._memo import memo
from hgpart.partitioners.base import PartitionResult
from hgpart.partitioners.block import contract, contract_with_map, grouped_family
from hgpart.partitioners.counts import analyze
from hgpart.partitioners.exact import run as exact_run
from hgpart.partitioners.incremental import incremental_parts
from hgpart.partitioners.kahypar_backend import run as kahypar_run
from hgpart.partitioners.portfolio import MAX_SEEDS, Candidate, refine, run_portfolio, worker_count

__all__ = ["run", "fine_to_coarse"]

DEFAULT_TIME_LIMIT = 60.0
#: above this many pins Mt-KaHyPar works on the per-layer grouped graph, also in the coarse grain (VGG16's
#: fully connected layers alone give its coarse graph 24.6 M pins; ungrouped, QUALITY needs many minutes)
LARGE_PINS = 2_000_000
#: a partitioner stage is not started with less time than this (s): it could not finish
MIN_STAGE = 1.0
#: fine grain of residual models: up to this K, Mt-KaHyPar also partitions the grouped coarse projection
SMALL_K = 16
#: fine-grain portfolio: groups per axis of every conv layer in the nested groupings it partitions
SIDES = (8, 16, 32, 64)


def fine_to_coarse(hg: Hypergraph) -> tuple[Hypergraph, np.ndarray]:
    """The coarse hypergraph of a fine one (each filter's channel tasks merged into its reduction) and the map.

    Computed once per fine hypergraph (it does not depend on K).
    """
    return memo(hg, "fine_to_coarse", lambda: _fine_to_coarse(hg))


def _fine_to_coarse(hg: Hypergraph) -> tuple[Hypergraph, np.ndarray]:
    vmap = np.empty(hg.num_vertices, dtype=np.int64)
    blocks: list[VertexBlock] = []
    nv = 0
    for blk in hg.blocks:
        if blk.role == "channel":
            continue
        role = "filter" if blk.role == "reduce" else blk.role
        new = VertexBlock(blk.layer, role, nv, (blk.extent[0],), (blk.group[0],))
        vmap[blk.start : blk.stop] = nv + np.arange(blk.size)
        if blk.role == "reduce":
            ch = hg.block(blk.layer, "channel")
            if ch is not None:
                vmap[ch.start : ch.stop] = nv + np.repeat(np.arange(ch.shape[0]), ch.shape[1])
        blocks.append(new)
        nv = new.stop
    small = contract_with_map(hg, vmap, blocks, merge_nets=False)
    small.grain = "coarse"
    return small, vmap


def run(hg: Hypergraph, *, k: int, epsilon: float, seed: int, preset: str | None, time_limit: float | None,
        threads: int | None = None) -> PartitionResult:
    """Backend entry point (see :mod:`hgpart.partitioners`); ``threads``: workers of the fine-grain portfolio."""
    limit = float(time_limit) if time_limit else DEFAULT_TIME_LIMIT
    if hg.grain == "coarse":
        return _coarse(hg, k=k, epsilon=epsilon, seed=seed, limit=limit)
    return _fine(hg, k=k, epsilon=epsilon, seed=seed, limit=limit, threads=threads)


def _result(best: str, scored: dict[str, float], parts: np.ndarray, t0: float, notes: dict[str, str],
            bound: float | None, proven: bool, **info: object) -> PartitionResult:
    return PartitionResult(
        parts=parts,
        backend="auto",
        seconds=time.perf_counter() - t0,
        preset=best,
        backend_objective=scored[best],
        lower_bound_bytes=None if bound is None else min(bound, scored[best]),
        info={"chosen": best, "candidates": scored, "notes": notes, "proven_optimal": proven and best == "exact",
              **info},
    )


def _fallback(hg: Hypergraph, k: int, epsilon: float) -> tuple[str, np.ndarray]:
    """The thesis's fill-in-order placement: one vertex over the average at most, so auto always answers."""
    return "incremental", incremental_parts(hg.vertex_weight, k)


def _coarse(hg: Hypergraph, *, k: int, epsilon: float, seed: int, limit: float) -> PartitionResult:
    """Coarse grain: the exact program (proven bound), KaHyPar and Mt-KaHyPar QUALITY, V-cycles from the best."""
    t0 = time.perf_counter()
    cands: dict[str, np.ndarray] = {}
    notes: dict[str, str] = {}
    bound: float | None = None
    proven = False

    def left(until: float) -> float:
        """Seconds left before ``until`` x the time limit (every stage shares one budget)."""
        return until * limit - (time.perf_counter() - t0)

    try:
        # with split columns (residual Adds) the program's placement is rarely the best: less time
        share = 0.2 if analyze(hg).split_columns else 0.5
        ex = exact_run(hg, k=k, epsilon=epsilon, seed=seed, preset=None, time_limit=share * limit)
        cands["exact"] = ex.parts
        proven = bool(ex.info.get("optimal"))
        bound = ex.lower_bound_bytes
    except HgpartError as exc:  # not count-symmetric: the partitioners alone
        notes["exact"] = exc.line()

    work_hg, vmap = (hg, None) if hg.num_pins <= LARGE_PINS else contract(hg, k)
    if not proven and left(0.8) < MIN_STAGE:
        notes["general"] = "skipped: no time left"
    elif not proven:
        _general(work_hg, vmap, cands, notes, k=k, epsilon=epsilon, seed=seed, seconds=left(0.8))
    name, parts = _fallback(hg, k, epsilon)
    cands[name] = parts

    scored = _score(hg, cands, k, epsilon)
    best = min(scored, key=scored.__getitem__)
    # V-cycles from the best candidate, unless it is proven optimal
    if left(1.0) < MIN_STAGE:
        notes["vcycles"] = "skipped: no time left"
    elif not (proven and best == "exact") and (bound is None or scored[best] > bound * 1.001):
        seed_parts = cands[best] if vmap is None else _project(cands[best], vmap, work_hg.num_vertices)
        try:
            ref = refine(work_hg, seed_parts, k=k, epsilon=epsilon, seed=seed, preset="quality", vcycles=2,
                             time_limit=left(1.0))
        except HgpartError as exc:
            notes["vcycles"] = exc.line()
        else:
            ref_full = _expand(ref, vmap)
            if balance_class(hg, ref_full, k, epsilon) <= 1:
                scored[f"{best}+vcycles"] = km1_bytes(hg, ref_full, k)
                cands[f"{best}+vcycles"] = ref_full
    best = min(scored, key=scored.__getitem__)
    return _result(best, scored, cands[best], t0, notes, bound, proven)


def _general(work_hg: Hypergraph, vmap: np.ndarray | None, cands: dict[str, np.ndarray], notes: dict[str, str],
             *, k: int, epsilon: float, seed: int, seconds: float) -> None:
    """KaHyPar beside a one-worker Mt-KaHyPar QUALITY portfolio, one core each, into ``cands`` (full resolution).

    The portfolio's first run is Mt-KaHyPar QUALITY for ``seed`` on one thread
    (``"mtkahypar-quality"``, the tool's own result for the seed); while
    KaHyPar is still running (it takes 3-25x longer on CNN graphs: ResNet18
    32^2 coarse K = 16, 199 s against 8.5 s) the same core runs further seeds,
    and the best of them competes as ``"mtkahypar-quality seeds"``. Why: one
    QUALITY run varies by 5-15% from seed to seed on CNN graphs (ResNet18
    32^2 coarse, FLOP weights, ``final6_resnet18_coarse.log``: K = 8 first run
    2.743 MiB, best further seed 2.469; K = 16 6.637 and 5.898; with the
    measured profile no further seed beat the first). Which extra seeds
    finish depends on how long KaHyPar takes, so that candidate is not
    reproducible across machines.
    """
    done = threading.Event()

    def run_kahypar() -> PartitionResult:
        try:
            return kahypar_run(work_hg, k=k, epsilon=epsilon, seed=seed, preset=None, time_limit=seconds)
        finally:
            done.set()

    with ThreadPoolExecutor(max_workers=1) as pool, cancel_on_interrupt():
        kahypar_future = pool.submit(run_kahypar)
        try:
            runs = run_portfolio([Candidate("graph", work_hg, None, seeds=MAX_SEEDS)], k=k, epsilon=epsilon,
                                 seconds=seconds, workers=1, refine_share=0.0, seed0=seed, stop=done)
        except HgpartError as exc:
            notes["mtkahypar-quality"] = exc.line()
            runs = []
        try:
            cands["kahypar"] = _expand(kahypar_future.result().parts, vmap)
        except HgpartError as exc:  # out of time: keep the other candidates
            notes["kahypar"] = exc.line()
    first = [r for r in runs if r.kind == "partition" and r.seed == seed]
    others = [r for r in runs if r.kind == "partition" and r.seed != seed and r.imbalance <= epsilon + 1e-3]
    if first:
        cands["mtkahypar-quality"] = _expand(first[0].parts, vmap)
    elif "mtkahypar-quality" not in notes:
        notes["mtkahypar-quality"] = f"no run finished in {seconds:.1f} s"
    if others:
        best = min(others, key=lambda r: r.km1_bytes)
        cands["mtkahypar-quality seeds"] = _expand(best.parts, vmap)
        notes["mtkahypar-quality seeds"] = (f"{sum(r.kind == 'partition' for r in runs)} runs, "
                                            f"best further seed {best.seed}")


def _score(hg: Hypergraph, cands: dict[str, np.ndarray], k: int, epsilon: float) -> dict[str, float]:
    """km1 of the candidates that may compete (see the module docstring on balance)."""
    level = {name: balance_class(hg, p, k, epsilon) for name, p in cands.items()}
    names = [n for n in cands if level[n] == 0 or (level[n] == 1 and n != "incremental")]
    names = names or [n for n in cands if level[n] <= 1]
    if not names:
        raise HgpartError(f"no candidate placement met the balance for K = {k}", fix="raise --epsilon")
    return {name: km1_bytes(hg, cands[name], k) for name in names}


def fine_sides(k: int) -> list[int]:
    """Groupings (groups per axis of each conv layer) the fine-grain portfolio partitions at K, cheapest first.

    A side below K/8 leaves too few vertices per layer for the balance
    (VGG16 224^2, K = 128, 8 x 8 groups: Max/Avg 1.195).
    """
    return [s for s in SIDES if 8 * s >= k]


def _fine(hg: Hypergraph, *, k: int, epsilon: float, seed: int, limit: float,
          threads: int | None = None) -> PartitionResult:
    """Fine grain: the lifted exact coarse placement, then a portfolio of Mt-KaHyPar runs on nested groupings."""
    t0 = time.perf_counter()
    notes: dict[str, str] = {}
    coarse, cmap = fine_to_coarse(hg)
    # every candidate lives on some graph: (graph, parts on it, map to hg), scored on that graph (same km1)
    cands: dict[str, tuple[Hypergraph, np.ndarray, np.ndarray | None]] = {}
    split = False
    exact_ok = True
    try:
        split = analyze(coarse).split_columns
    except HgpartError as exc:  # not count-symmetric: no count placement to lift
        notes["exact"] = exc.line()
        exact_ok = False
    if exact_ok and k > (4 if split else 8):
        exact_ok = False
        notes["exact"] = f"skipped at K = {k}: the count placement is far behind the fine portfolio here"

    stages = {"analysis": round(time.perf_counter() - t0, 2)}
    sides = fine_sides(k)
    family = memo(hg, f"family:{SIDES}:{max(128, k)}", lambda: grouped_family(hg, SIDES, min_1d=max(128, k)))
    graphs: list[Candidate] = []
    for s in sides:  # a coarser side that groups nothing more (small layers) is the same graph: once
        if not graphs or family[s][0].num_vertices != graphs[-1].hg.num_vertices:
            graphs.append(Candidate(f"{s}x{s}", *family[s]))
    if split and k <= SMALL_K:
        # residual models: the coarse projection (filters kept whole, >= 64 groups per layer) partitions well at
        # small K (ResNet18 32^2 FLOP, K = 8: 2.49 MiB best of ten runs, fine groupings 2.72-2.84)
        cg, cgmap = memo(coarse, "family:proj", lambda: grouped_family(coarse, (8,), min_1d=64))[8]
        graphs.insert(0, Candidate("coarse projection", cg, cgmap[cmap]))
    stages["groupings"] = round(time.perf_counter() - t0 - sum(stages.values()), 2)
    budget = limit - (time.perf_counter() - t0)
    graphs = [g for g in graphs if _predicted_seconds(g.hg, k) <= 0.5 * budget] or graphs[:1]
    # the count program runs beside the portfolio (HiGHS releases the GIL) for most of the time: it proves the
    # coarse optimum of VGG-like models at K <= 8 in seconds, which the fine portfolio rarely beats there (VGG16
    # FLOP K = 4: 252.2 MiB, the groupings 350-355). With split columns (ResNet) the block-model program's counts
    # are the placement that matters (ResNet18 FLOP K = 4: 1.062 MiB in 4.5 s, the column model's optimum 1.711)
    pool = ThreadPoolExecutor(max_workers=1)
    exact_future = (pool.submit(exact_run, coarse, k=k, epsilon=epsilon, seed=seed, preset=None,
                                time_limit=max(0.85 * budget, 0.1), bound=split) if exact_ok else None)
    if budget < MIN_STAGE:
        notes["portfolio"] = "skipped: no time left"
    else:
        try:
            # while the program runs, it has a core of its own
            workers = max(1, worker_count(threads) - 1) if exact_future is not None else worker_count(threads)
            runs = run_portfolio(graphs, k=k, epsilon=epsilon, seconds=budget, seed0=seed, workers=workers)
        except HgpartError as exc:
            notes["portfolio"] = exc.line()
            runs = []
        best_of: dict[str, tuple[float, int]] = {}
        for i, r in enumerate(runs):
            g = graphs[r.graph]
            name = f"mtkahypar-quality {g.name}" + ("" if r.kind == "partition" else "+vcycles")
            if balance_class(hg, r.parts, k, epsilon, g.hg.vertex_weight) > 1:
                continue
            if name not in best_of or r.km1_bytes < best_of[name][0]:
                best_of[name] = (r.km1_bytes, i)
        for name, (_, i) in best_of.items():
            g = graphs[runs[i].graph]
            cands[name] = (g.hg, runs[i].parts, g.to_full)
        notes["portfolio_runs"] = f"{sum(r.kind == 'partition' for r in runs)} runs, " \
                                  f"{sum(r.kind == 'refine' for r in runs)} refinements on {[g.name for g in graphs]}"
    stages["portfolio"] = round(time.perf_counter() - t0 - sum(stages.values()), 2)
    if exact_future is not None:
        try:
            cands["exact"] = (coarse, exact_future.result().parts, cmap)
        except HgpartError as exc:
            notes["exact"] = exc.line()
        stages["exact_wait"] = round(time.perf_counter() - t0 - sum(stages.values()), 2)
    pool.shutdown()

    scored = {name: km1_bytes(g_hg, parts, k) for name, (g_hg, parts, _) in cands.items()
              if balance_class(hg, parts, k, epsilon, g_hg.vertex_weight) <= 1}
    if not scored:
        name, parts = _fallback(hg, k, epsilon)
        if balance_class(hg, parts, k, epsilon) > 1:
            raise HgpartError(f"no candidate placement met the balance for K = {k}", fix="raise --epsilon")
        scored[name] = km1_bytes(hg, parts, k)
        return _result(name, scored, parts, t0, notes, None, False, stage_seconds=stages)
    best = min(scored, key=scored.__getitem__)
    g_hg, parts, to_full = cands[best]
    return _result(best, scored, _expand(parts, to_full), t0, notes, None, False, stage_seconds=stages)


#: seconds per pin and log2 K of one single-threaded Mt-KaHyPar QUALITY run on a grouped CNN graph
#: (2-core EPYC: VGG16 224^2 fine 64 x 64 groups, 268 k pins, K = 128 in ~7.5 s)
SECONDS_PER_PIN_LOGK = 4e-6


def _predicted_seconds(hg: Hypergraph, k: int) -> float:
    return SECONDS_PER_PIN_LOGK * hg.num_pins * max(1.0, math.log2(k))


def _expand(parts: np.ndarray, vmap: np.ndarray | None) -> np.ndarray:
    """Full-resolution parts of a placement of the grouped graph (``vmap``: vertex -> group; None = not grouped)."""
    return parts if vmap is None else parts[vmap]


def _project(parts: np.ndarray, vmap: np.ndarray, n: int) -> np.ndarray:
    """Parts of the grouped vertices from full-resolution parts: the part of the group's first member."""
    out = np.zeros(n, dtype=np.int64)
    out[vmap[::-1]] = parts[::-1]
    return out
