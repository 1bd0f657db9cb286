"""The ``auto`` backend: the best placement of several strategies, by our own km1.

Usage::

    res = partition(hg, k=8, backend="auto", epsilon=0.1, time_limit=60)
    res.info["chosen"], res.info["candidates"]     # which strategy won, and every km1 tried (bytes)
    res = partition(hg, k=8, backend="auto", preset="deterministic")   # same seed, same placement

Choice (measured with ``benchmarks/partition_quality.py``; the figures are in
``benchmarks/results/partition_quality/README.md``):

* **Coarse grain.** The exact count program (:mod:`hgpart.partitioners.exact`,
  seeded with the best contiguous chain placement of :mod:`.chain`) proves
  the optimum for VGG-like models at small K, where the general partitioners
  stay well above it. It does not model split Add/depthwise columns (ResNet),
  and at large K the time limit stops it before optimality, so auto also
  runs Mt-KaHyPar QUALITY and KaHyPar side by side (one thread each),
  refines the best with Mt-KaHyPar V-cycles
  (:func:`hgpart.partitioners.portfolio.refine`) and keeps the best that
  meets the balance. It is therefore never worse than the better of KaHyPar
  and Mt-KaHyPar QUALITY with the same seed whenever they finish within the
  time limit, which every stage shares (on graphs above ``LARGE_PINS`` pins
  they run on the per-layer grouped graph). The exact program's proven
  lower bound is reported (``lower_bound_bytes``, coarse grain only: fine
  placements may split filters, so the coarse optimum bounds nothing there).
* **Fine grain.** Each conv layer is a dense filters x channels block, so
  the portfolio (:mod:`hgpart.partitioners.portfolio`) partitions nested
  per-layer groupings (:data:`SIDES` groups per axis of every conv layer,
  :func:`.block.grouped_family`; sides below K/8 cannot balance and are
  skipped): single-threaded Mt-KaHyPar QUALITY runs, one worker per core,
  seeds round-robin over the groupings, then V-cycles from the best runs.
  Why many small runs: one QUALITY run varies a lot with the seed, and the
  coarser groupings win at large K. For residual models at K <= ``SMALL_K``
  the coarse projection (filters kept whole) joins the portfolio. A coarse
  placement is a fine placement of the same volume (all channel tasks of
  filter f with its reduction), so at small K the count program runs on
  the coarse projection in a thread beside the portfolio (which then has one
  worker fewer) and its placement is lifted; above that K it is far behind
  and is not run. Every candidate is scored on the graph it was found on (a
  grouping keeps km1 exactly) and expanded to full resolution. The 2-D
  checkerboard (:mod:`.block`) is neither a candidate nor a start: V-cycles
  from it lose to auto almost everywhere and cost most of a sweep's time.

Reproducibility. By default the stages race the time limit: how many seeds
finish, how far HiGHS gets and whether V-cycles run depend on the machine's
speed and load, so two runs with the same seed can differ. With
``preset="deterministic"`` every stage does a fixed amount of work
(:data:`DET_SEEDS` / :data:`DET_FINE_SEEDS` Mt-KaHyPar seeds, HiGHS node and
branch-and-price iteration limits of :data:`.exact.DETERMINISTIC`, V-cycles
run to the end; no KaHyPar in the coarse grain, its run time is too long and
varied to wait for); the time limit then bounds each stage only as a guard,
so a run may take a few times the limit. The
same seed and thread count give the same placement whenever no stage hits
that guard (``info["deterministic"]``; a note names the stage otherwise).

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
from dataclasses import dataclass, field

import numpy as np

from hgpart.errors import HgpartError
from hgpart.hypergraph import Hypergraph, VertexBlock
from hgpart.metrics import balance_class, km1_bytes
from hgpart.partitioners._interrupt import cancel_on_interrupt
from hgpart.partitioners._memo import memo
from hgpart.partitioners.base import PartitionResult
from hgpart.partitioners.block import contract, contract_with_map, grouped_family
from hgpart.partitioners.counts import analyze
from hgpart.partitioners.exact import DETERMINISTIC, Effort
from hgpart.partitioners.exact import run as exact_run
from hgpart.partitioners.incremental import incremental_parts
from hgpart.partitioners.kahypar_backend import run as kahypar_run
from hgpart.partitioners.portfolio import MAX_SEEDS, Candidate, refine, run_portfolio, worker_count

__all__ = ["run", "fine_to_coarse", "fine_sides", "prepare_fine", "resolve_preset", "Mode"]

DEFAULT_TIME_LIMIT = 60.0
#: above this many pins Mt-KaHyPar works on the per-layer grouped graph, also in the coarse grain (large fully
#: connected layers make coarse graphs of tens of millions of pins, which ungrouped QUALITY needs minutes for)
LARGE_PINS = 2_000_000
#: a partitioner stage is not started with less time than this (s): it could not finish
MIN_STAGE = 1.0
#: fine grain of residual models: up to this K, Mt-KaHyPar also partitions the grouped coarse projection
SMALL_K = 16
#: fine-grain portfolio: groups per axis of every conv layer in the nested groupings it partitions
SIDES = (8, 16, 32, 64)
#: deterministic preset, coarse grain: Mt-KaHyPar QUALITY seeds ``seed .. seed + DET_SEEDS - 1``
DET_SEEDS = 4
#: deterministic preset, fine grain: Mt-KaHyPar QUALITY seeds per grouping
DET_FINE_SEEDS = 4


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


@dataclass
class Mode:
    """How the stages stop: racing the time limit (``effort`` None) or after fixed work (deterministic preset).

    ``cut`` collects the stages a deterministic run's guard time limit cut
    short (their result may then depend on the machine).
    """

    effort: Effort | None = None
    cut: list[str] = field(default_factory=list)

    @property
    def deterministic(self) -> bool:
        return self.effort is not None

    def info(self, notes: dict[str, str]) -> dict[str, object]:
        """The result's ``deterministic`` flag (and a note naming the stages the guard cut short)."""
        if self.cut:
            notes["deterministic"] = "cut short by the time limit: " + ", ".join(self.cut)
        return {"deterministic": self.deterministic and not self.cut}


def resolve_preset(preset: str | None) -> Mode:
    """``None`` / ``"race"``: stages race the time limit; ``"deterministic"``: fixed work per stage."""
    key = (preset or "race").strip().lower()
    if key == "race":
        return Mode()
    if key == "deterministic":
        return Mode(DETERMINISTIC)
    raise HgpartError(f"unknown auto preset {preset!r}", fix="use 'race' (default) or 'deterministic'")


def run(hg: Hypergraph, *, k: int, epsilon: float, seed: int, preset: str | None, time_limit: float | None,
        threads: int | None = None) -> PartitionResult:
    """Backend entry point (see :mod:`hgpart.partitioners`); ``threads``: workers of the fine-grain portfolio."""
    mode = resolve_preset(preset)
    limit = float(time_limit) if time_limit else DEFAULT_TIME_LIMIT
    if hg.grain == "coarse":
        return _coarse(hg, k=k, epsilon=epsilon, seed=seed, limit=limit, mode=mode)
    return _fine(hg, k=k, epsilon=epsilon, seed=seed, limit=limit, threads=threads, mode=mode)


def _result(best: str, scored: dict[str, float], parts: np.ndarray, t0: float, notes: dict[str, str],
            bound: float | None, proven: bool, mode: Mode, **info: object) -> PartitionResult:
    return PartitionResult(
        parts=parts,
        backend="auto",
        seconds=time.perf_counter() - t0,
        preset=best,
        backend_objective=scored[best],
        lower_bound_bytes=None if bound is None else min(bound, scored[best]),
        info={"chosen": best, "candidates": scored, "notes": notes, "proven_optimal": proven and best == "exact",
              **mode.info(notes), **info},
    )


def _fallback(hg: Hypergraph, k: int, epsilon: float) -> tuple[str, np.ndarray]:
    """The thesis's fill-in-order placement: one vertex over the average at most, so auto always answers."""
    return "incremental", incremental_parts(hg.vertex_weight, k)


def _coarse(hg: Hypergraph, *, k: int, epsilon: float, seed: int, limit: float, mode: Mode) -> PartitionResult:
    """Coarse grain: the exact program (proven bound), KaHyPar and Mt-KaHyPar QUALITY, V-cycles from the best."""
    t0 = time.perf_counter()
    cands: dict[str, np.ndarray] = {}
    notes: dict[str, str] = {}
    bound: float | None = None
    proven = False

    def left(until: float) -> float:
        """Seconds left before ``until`` x the time limit (racing, every stage shares one budget)."""
        return limit if mode.deterministic else until * limit - (time.perf_counter() - t0)

    try:
        # with split columns (residual Adds) the program's placement is rarely the best: less time
        share = 1.0 if mode.deterministic else 0.2 if analyze(hg).split_columns else 0.5
        ex = exact_run(hg, k=k, epsilon=epsilon, seed=seed, preset=None, time_limit=share * limit,
                       effort=mode.effort)
        cands["exact"] = ex.parts
        proven = bool(ex.info.get("optimal"))
        bound = ex.lower_bound_bytes
        if mode.deterministic and not ex.info["deterministic"]:
            mode.cut.append("exact")
    except HgpartError as exc:  # not count-symmetric: the partitioners alone
        notes["exact"] = exc.line()

    work_hg, vmap = (hg, None) if hg.num_pins <= LARGE_PINS else contract(hg, k)
    if not proven and left(0.8) < MIN_STAGE:
        notes["general"] = "skipped: no time left"
    elif not proven:
        _general(work_hg, vmap, cands, notes, k=k, epsilon=epsilon, seed=seed, seconds=left(0.8), mode=mode)
    name, parts = _fallback(hg, k, epsilon)
    cands[name] = parts

    scored = _score(hg, cands, k, epsilon)
    best = min(scored, key=scored.__getitem__)
    # V-cycles from the best candidate, unless it is proven optimal
    if left(1.0) < MIN_STAGE:
        notes["vcycles"] = "skipped: no time left"
    elif not (proven and best == "exact") and (bound is None or scored[best] > bound * 1.001):
        _vcycles(hg, work_hg, vmap, cands, scored, best, notes, k=k, epsilon=epsilon, seed=seed,
                 seconds=left(1.0), mode=mode)
    best = min(scored, key=scored.__getitem__)
    return _result(best, scored, cands[best], t0, notes, bound, proven, mode)


def _vcycles(hg: Hypergraph, work_hg: Hypergraph, vmap: np.ndarray | None, cands: dict[str, np.ndarray],
             scored: dict[str, float], best: str, notes: dict[str, str], *, k: int, epsilon: float, seed: int,
             seconds: float, mode: Mode) -> None:
    """Mt-KaHyPar V-cycles from candidate ``best``; the result joins ``cands`` / ``scored`` when it balances."""
    seed_parts = cands[best] if vmap is None else _project(cands[best], vmap, work_hg.num_vertices)
    t1 = time.perf_counter()
    try:
        ref = refine(work_hg, seed_parts, k=k, epsilon=epsilon, seed=seed, preset="quality", vcycles=2,
                     time_limit=seconds)
    except HgpartError as exc:
        notes["vcycles"] = exc.line()
        return
    if mode.deterministic and time.perf_counter() - t1 >= 0.98 * seconds:
        mode.cut.append("vcycles")
    ref_full = _expand(ref, vmap)
    if balance_class(hg, ref_full, k, epsilon) <= 1:
        scored[f"{best}+vcycles"] = km1_bytes(hg, ref_full, k)
        cands[f"{best}+vcycles"] = ref_full


def _general(work_hg: Hypergraph, vmap: np.ndarray | None, cands: dict[str, np.ndarray], notes: dict[str, str],
             *, k: int, epsilon: float, seed: int, seconds: float, mode: Mode) -> None:
    """KaHyPar beside a one-worker Mt-KaHyPar QUALITY portfolio, one core each, into ``cands`` (full resolution).

    The portfolio's first run is Mt-KaHyPar QUALITY for ``seed`` on one thread
    (``"mtkahypar-quality"``, the tool's own result for the seed). Racing,
    the same core runs further seeds while KaHyPar is still running (it takes
    several times longer on CNN graphs), and the best of them competes as
    ``"mtkahypar-quality seeds"``. Why: one QUALITY run varies with the seed
    on CNN graphs. Which extra seeds finish depends on how long KaHyPar
    takes, so that candidate is not reproducible across machines; the
    deterministic preset runs exactly :data:`DET_SEEDS` seeds and no KaHyPar.
    """
    done = threading.Event()
    seeds = DET_SEEDS if mode.deterministic else MAX_SEEDS

    def run_kahypar() -> PartitionResult:
        try:
            return kahypar_run(work_hg, k=k, epsilon=epsilon, seed=seed, preset=None, time_limit=seconds)
        finally:
            done.set()

    with ThreadPoolExecutor(max_workers=1) as pool, cancel_on_interrupt():
        # deterministic: no KaHyPar, whose run time on CNN graphs is too long and varied to wait for
        kahypar_future = None if mode.deterministic else pool.submit(run_kahypar)
        try:
            runs = run_portfolio([Candidate("graph", work_hg, None, seeds=seeds)], k=k, epsilon=epsilon,
                                 seconds=seconds, workers=1, refine_share=0.0, seed0=seed,
                                 stop=None if mode.deterministic else done, deterministic=mode.deterministic)
        except HgpartError as exc:
            notes["mtkahypar-quality"] = exc.line()
            runs = []
        try:
            if kahypar_future is not None:
                cands["kahypar"] = _expand(kahypar_future.result().parts, vmap)
        except HgpartError as exc:  # out of time: keep the other candidates
            notes["kahypar"] = exc.line()
    first = [r for r in runs if r.kind == "partition" and r.seed == seed]
    others = [r for r in runs if r.kind == "partition" and r.seed != seed and r.imbalance <= epsilon + 1e-3]
    if mode.deterministic and sum(r.kind == "partition" for r in runs) < seeds:
        mode.cut.append("mtkahypar-quality seeds")
    if first:
        cands["mtkahypar-quality"] = _expand(first[0].parts, vmap)
    elif "mtkahypar-quality" not in notes:
        notes["mtkahypar-quality"] = f"no run finished in {seconds:.1f} s"
    if others:
        best = min(others, key=lambda r: (r.km1_bytes, r.seed))
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


def prepare_fine(hg: Hypergraph) -> None:
    """Do now, once per fine hypergraph, the work of the fine grain that does not depend on K (memoized on ``hg``).

    The coarse projection, its count analysis and the per-layer groupings take seconds on large models; the
    first :func:`run` pays them inside its time limit unless they were prepared. A sweep over K calls this
    first, so that the one-time cost is not charged to whichever K comes first.
    """
    if hg.grain != "fine":
        return
    coarse, _ = fine_to_coarse(hg)
    split, _ = _coarse_counts(coarse)
    _family(hg, 2)
    if split:
        _projection_family(coarse)


def _coarse_counts(coarse: Hypergraph) -> tuple[bool, str | None]:
    """Whether the coarse projection has split columns (ResNet adds), and why no count program applies (or None)."""
    try:
        return analyze(coarse).split_columns, None
    except HgpartError as exc:
        return False, exc.line()


def _family(hg: Hypergraph, k: int) -> dict[int, tuple[Hypergraph, np.ndarray]]:
    """The nested per-layer groupings of a fine graph (:data:`SIDES`), with at least max(128, K) groups a layer."""
    return memo(hg, f"family:{SIDES}:{max(128, k)}", lambda: grouped_family(hg, SIDES, min_1d=max(128, k)))


def _projection_family(coarse: Hypergraph) -> tuple[Hypergraph, np.ndarray]:
    """The coarse projection grouped to >= 64 groups a layer (filters kept whole), and its map."""
    return memo(coarse, "family:proj", lambda: grouped_family(coarse, (8,), min_1d=64))[8]


def fine_sides(k: int) -> list[int]:
    """Groupings (groups per axis of each conv layer) the fine-grain portfolio partitions at K, cheapest first.

    A side below K/8 leaves too few vertices per layer for the balance.
    """
    return [s for s in SIDES if 8 * s >= k]


def _fine_graphs(hg: Hypergraph, coarse: Hypergraph, cmap: np.ndarray, k: int, split: bool, *, limit: float,
                 t0: float, mode: Mode) -> list[Candidate]:
    """The graphs the fine portfolio partitions: the groupings a run can finish on within half of the budget.

    Racing, the budget is what is left of ``limit`` since ``t0``; deterministic, ``limit`` itself.
    """
    family = _family(hg, k)
    graphs: list[Candidate] = []
    for s in fine_sides(k):  # a coarser side that groups nothing more (small layers) is the same graph: once
        if not graphs or family[s][0].num_vertices != graphs[-1].hg.num_vertices:
            graphs.append(Candidate(f"{s}x{s}", *family[s]))
    if split and k <= SMALL_K:
        # residual models: the coarse projection (filters kept whole, >= 64 groups per layer) partitions well
        # at small K
        cg, cgmap = _projection_family(coarse)
        graphs.insert(0, Candidate("coarse projection", cg, cgmap[cmap]))
    budget = limit if mode.deterministic else limit - (time.perf_counter() - t0)
    return [g for g in graphs if _predicted_seconds(g.hg, k) <= 0.5 * budget] or graphs[:1]


def _fine(hg: Hypergraph, *, k: int, epsilon: float, seed: int, limit: float, mode: Mode,
          threads: int | None = None) -> PartitionResult:
    """Fine grain: the lifted exact coarse placement, then a portfolio of Mt-KaHyPar runs on nested groupings."""
    t0 = time.perf_counter()
    notes: dict[str, str] = {}
    coarse, cmap = fine_to_coarse(hg)
    # every candidate lives on some graph: (graph, parts on it, map to hg), scored on that graph (same km1)
    cands: dict[str, tuple[Hypergraph, np.ndarray, np.ndarray | None]] = {}
    split, why_not = _coarse_counts(coarse)
    exact_ok = why_not is None
    if why_not is not None:  # not count-symmetric: no count placement to lift
        notes["exact"] = why_not
    if exact_ok and k > (4 if split else 8):
        exact_ok = False
        notes["exact"] = f"skipped at K = {k}: the count placement is far behind the fine portfolio here"

    stages = {"analysis": round(time.perf_counter() - t0, 2)}
    graphs = _fine_graphs(hg, coarse, cmap, k, split, limit=limit, t0=t0, mode=mode)
    stages["groupings"] = round(time.perf_counter() - t0 - sum(stages.values()), 2)
    budget = limit if mode.deterministic else limit - (time.perf_counter() - t0)
    # the count program runs beside the portfolio (HiGHS releases the GIL) for most of the time: at small K
    # it proves the coarse optimum of VGG-like models, which the fine portfolio rarely beats; with split columns
    # (ResNet) the block model's counts are the placement that matters
    pool = ThreadPoolExecutor(max_workers=1)
    exact_future = (pool.submit(exact_run, coarse, k=k, epsilon=epsilon, seed=seed, preset=None,
                                time_limit=max(0.85 * budget, 0.1), bound=split, effort=mode.effort)
                    if exact_ok else None)
    if budget < MIN_STAGE:
        notes["portfolio"] = "skipped: no time left"
    else:
        # while the program runs, it has a core of its own
        workers = max(1, worker_count(threads) - 1) if exact_future is not None else worker_count(threads)
        cands.update(_fine_portfolio(hg, graphs, notes, k=k, epsilon=epsilon, seed=seed, seconds=budget,
                                     workers=workers, mode=mode))
    stages["portfolio"] = round(time.perf_counter() - t0 - sum(stages.values()), 2)
    if exact_future is not None:
        try:
            ex = exact_future.result()
            cands["exact"] = (coarse, ex.parts, cmap)
            if mode.deterministic and not ex.info["deterministic"]:
                mode.cut.append("exact")
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
        return _result(name, scored, parts, t0, notes, None, False, mode, stage_seconds=stages)
    best = min(scored, key=scored.__getitem__)
    g_hg, parts, to_full = cands[best]
    return _result(best, scored, _expand(parts, to_full), t0, notes, None, False, mode, stage_seconds=stages)


def _fine_portfolio(hg: Hypergraph, graphs: list[Candidate], notes: dict[str, str], *, k: int, epsilon: float,
                    seed: int, seconds: float, workers: int,
                    mode: Mode) -> dict[str, tuple[Hypergraph, np.ndarray, np.ndarray | None]]:
    """The portfolio's best balanced run per grouping (and per grouping's V-cycles), by name."""
    if mode.deterministic:
        graphs = [Candidate(g.name, g.hg, g.to_full, seeds=DET_FINE_SEEDS) for g in graphs]
    try:
        runs = run_portfolio(graphs, k=k, epsilon=epsilon, seconds=seconds, seed0=seed, workers=workers,
                             refine_share=0.0 if mode.deterministic else 0.3, deterministic=mode.deterministic)
    except HgpartError as exc:
        notes["portfolio"] = exc.line()
        return {}
    if mode.deterministic:
        n_part = sum(r.kind == "partition" for r in runs)
        if n_part < DET_FINE_SEEDS * len(graphs) or sum(r.kind == "refine" for r in runs) < min(workers, n_part):
            mode.cut.append("portfolio")
    best_of: dict[str, tuple[float, int]] = {}
    for i, r in enumerate(runs):
        g = graphs[r.graph]
        name = f"mtkahypar-quality {g.name}" + ("" if r.kind == "partition" else "+vcycles")
        if balance_class(hg, r.parts, k, epsilon, g.hg.vertex_weight) > 1:
            continue
        if name not in best_of or r.km1_bytes < best_of[name][0]:
            best_of[name] = (r.km1_bytes, i)
    notes["portfolio_runs"] = f"{sum(r.kind == 'partition' for r in runs)} runs, " \
                              f"{sum(r.kind == 'refine' for r in runs)} refinements on {[g.name for g in graphs]}"
    return {name: (graphs[runs[i].graph].hg, runs[i].parts, graphs[runs[i].graph].to_full)
            for name, (_, i) in best_of.items()}


#: seconds per pin and log2 K of one single-threaded Mt-KaHyPar QUALITY run on a grouped CNN graph (calibrated on
#: a 2-core EPYC with a large grouped graph at K = 128)
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
