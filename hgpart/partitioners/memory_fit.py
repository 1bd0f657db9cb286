"""Partitions in which every part fits a device's memory (``hgpart partition --memory-limit``).

Usage::

    from hgpart.memory import MemorySettings, parse_size
    from hgpart.partitioners.memory_fit import Job, MemoryLimit, partition_fitting
    limit = MemoryLimit(parse_size("16GiB"), MemorySettings(batch_size=256, inflight=1))
    res = partition_fitting(hg, Job(k=4, backend="auto"), limit)
    res.parts, res.info["memory"]        # the placement; the limit, every attempt and the bytes per part

The backends know one balance constraint (work); memory is a second one. What is done, in order, at K:

1. the backend as asked; if every part fits (:func:`hgpart.memory.part_memory`, received maps
   included), that is the placement, unchanged;
2. ``auto`` and ``exact`` on a coarse hypergraph: the exact count program with a memory row per part
   (:func:`hgpart.partitioners.exact.run_with_memory`), received maps included, the work balance kept;
   if HiGHS proves that infeasible, again without the work balance; if that is infeasible too and no
   column is split, no placement fits at K (proven) and step 3 is skipped;
3. if nothing fits yet, every hypergraph backend: the same partitioner (Mt-KaHyPar for ``auto`` and
   ``exact``) with the vertex memory as the vertex weight and the imbalance that makes its part capacity
   the limit, ``eps = K * cap / total - 1``; the work balance is then not enforced. The vertex weights leave
   out the received maps (they depend on the placement), so this runs up to :data:`ROUNDS` times, ``cap``
   lowered by the largest part's overshoot, and at least halfway to an even split, each time.

Among the placements that fit, the one within the work balance with the least volume wins (any that fits
if none is balanced).

When nothing fits at K, :class:`NoFitError` says so in one line, with the lower bound ``ceil(total / limit)``
on K and the smallest K at which a placement was then found, searching up from that bound (the steps above,
the exact program replacing the plain run of ``auto`` and ``exact``): the smallest K that fits when every K
between was below the bound or proven infeasible by the exact program.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from hgpart.errors import BadOptionError, HgpartError
from hgpart.hypergraph import Hypergraph
from hgpart.memory import (
    MemorySettings,
    Optimizer,
    VertexMemory,
    format_size,
    parse_size,
    part_memory,
    received_scale,
    smallest_k_bound,
    vertex_memory,
)
from hgpart.metrics import PartitionMetrics, balance_class, km1_bytes, partition_metrics
from hgpart.partitioners.base import MemoryCap, PartitionResult
from hgpart.partitioners.counts import analyze
from hgpart.partitioners.exact import InfeasibleError, resolve_preset, run_with_memory

__all__ = ["Job", "MemoryLimit", "Attempt", "NoFitError", "limit_from_options", "fitting_metrics", "partition_fitting",
           "ROUNDS", "SEARCH_SPAN"]

#: how often a memory-weighted run is repeated with the cap lowered for the received maps' overshoot
ROUNDS = 4
#: K values tried above the lower bound when no placement fits at the requested K
SEARCH_SPAN = 8
#: seconds for each exact program with memory rows when the caller gives no time limit
EXACT_SECONDS = 30.0
#: backends that run the exact count program (coarse grain), and the balance-only hypergraph partitioners
_COUNTED = ("auto", "exact")
_HEURISTIC = ("mtkahypar", "kahypar")


@dataclass(frozen=True)
class Job:
    """One partition request: the arguments of :func:`hgpart.partitioners.partition`."""

    k: int
    backend: str = "auto"
    epsilon: float = 0.1
    seed: int = 1
    preset: str | None = None
    time_limit: float | None = None
    threads: int | None = None
    #: :func:`hgpart.partitioners.partition`, passed in (this module is below the package's ``__init__``)
    runner: Callable[..., PartitionResult] | None = None


@dataclass(frozen=True)
class MemoryLimit:
    """Bytes a device holds, and the batch, in-flight batches and optimizer the memory is counted for."""

    limit_bytes: float
    settings: MemorySettings

    def to_dict(self) -> dict[str, object]:
        s = self.settings
        return {"limit_bytes": self.limit_bytes, "batch_size": s.batch_size, "inflight": s.inflight,
                "optimizer": s.optimizer.value, "dtype_bytes": s.dtype_bytes}


@dataclass(frozen=True)
class Attempt:
    """One placement tried: how it was made, its volume, its largest part's memory (``None``: the run made no
    placement, ``how`` says why), whether it fits."""

    how: str
    km1_bytes: float | None
    max_memory_bytes: float | None
    balanced: bool
    fits: bool
    seconds: float


class NoFitError(HgpartError):
    """No placement found at ``k`` in which every part fits; ``smallest_k``: the least K found that fits."""

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None, k: int = 0,
                 smallest_k: int | None = None) -> None:
        self.k = k
        self.smallest_k = smallest_k
        super().__init__(what, where=where, fix=fix)


@dataclass
class _Candidates:
    """The placements tried at one K and their memory, checked the same way."""

    hg: Hypergraph
    job: Job
    limit: MemoryLimit
    vm: VertexMemory
    attempts: list[Attempt] = field(default_factory=list)
    fitting: list[tuple[PartitionResult, Attempt]] = field(default_factory=list)
    proven: bool = False  # the exact program proved that no placement fits at this K

    def consider(self, how: str, res: PartitionResult) -> float:
        """Check ``res``; returns its largest part's memory in bytes."""
        k = self.job.k
        pm = part_memory(self.hg, res.parts, k, self.limit.settings, limit=self.limit.limit_bytes, vm=self.vm)
        worst = max(p.total for p in pm)
        att = Attempt(how, km1_bytes(self.hg, res.parts, k), worst,
                      balance_class(self.hg, res.parts, k, self.job.epsilon) < 2, all(p.fits for p in pm),
                      round(res.seconds, 3))
        self.attempts.append(att)
        if att.fits:
            self.fitting.append((res, att))
        return worst

    def fail(self, how: str, exc: HgpartError) -> None:
        self.attempts.append(Attempt(f"{how}: {exc.what}", None, None, False, False, 0.0))

    def best(self) -> tuple[PartitionResult, Attempt] | None:
        """Balanced before unbalanced, then the least volume."""
        if not self.fitting:
            return None
        return min(self.fitting, key=lambda ra: (not ra[1].balanced, ra[1].km1_bytes or 0.0))


def _run(hg: Hypergraph, job: Job, backend: str) -> PartitionResult:
    if job.runner is None:
        raise HgpartError("no partition function given", fix="pass Job(runner=hgpart.partitioners.partition)")
    return job.runner(hg, k=job.k, backend=backend, epsilon=job.epsilon, seed=job.seed,
                     preset=job.preset if backend == job.backend else None, time_limit=job.time_limit,
                     threads=job.threads)


def _exact_with_rows(cands: _Candidates) -> bool:
    """The count program with a memory row per part, received maps included, first with the work balance,
    then (if that is infeasible) without it. Returns whether the program proved that no placement fits at K
    (columns not split: the count model is then every placement, up to relabelling filters)."""
    job = cands.job
    effort = resolve_preset(job.preset) if job.backend == "exact" else None
    cap = MemoryCap(cands.vm.total, cands.limit.limit_bytes, received_scale(cands.hg, cands.limit.settings))
    try:
        model = analyze(cands.hg, columns=True)
    except HgpartError as exc:  # not a count-symmetric coarse grain
        cands.fail("exact with memory rows", exc)
        return False
    for eps, how in ((job.epsilon, "exact with memory rows"),
                     (float(job.k - 1), "exact with memory rows, work balance dropped")):
        try:
            res = run_with_memory(cands.hg, model, job.k, eps, cap, time_limit=job.time_limit or EXACT_SECONDS,
                                  node_limit=None if effort is None else effort.nodes,
                                  deterministic=effort is not None)
        except InfeasibleError as exc:
            cands.fail(how, exc)
            continue
        except HgpartError as exc:
            cands.fail(how, exc)
            return False
        cands.consider(how, res)
        return False
    return not model.split_columns


def _weighted_rounds(cands: _Candidates, backend: str) -> None:
    """``backend`` with memory as the vertex weight and its part capacity at the cap, lowered by the overshoot."""
    job, limit = cands.job, cands.limit.limit_bytes
    weight = cands.vm.total
    total = float(weight.sum())
    cap = limit
    for _ in range(ROUNDS):
        eps = min(job.k * cap / total - 1.0, 9.0)
        how = f"{backend} with memory as vertex weight (eps {eps:.3g})"
        if eps < 0.0:
            return
        try:
            res = _run(replace(cands.hg, vertex_weight=weight), replace(job, epsilon=eps), backend)
        except HgpartError as exc:
            cands.fail(how, exc)
            return
        res.lower_bound_bytes = None  # proven for memory balance, not for the work balance asked
        worst = cands.consider(how, res)
        if worst <= limit:
            return
        # the received maps pushed a part over: lower the cap by the overshoot, at least halfway to an even split
        cap = min(cap - (worst - limit), 0.5 * (cap + total / job.k))


def _at_k(hg: Hypergraph, job: Job, limit: MemoryLimit, vm: VertexMemory, *, first: bool) -> _Candidates:
    """Every step of the module docstring at ``job.k``. ``first=False`` is the search of a larger K: the exact
    program with memory rows replaces the plain run where it applies, and Mt-KaHyPar replaces ``auto``."""
    cands = _Candidates(hg, job, limit, vm)
    counted = job.backend in _COUNTED and hg.grain == "coarse"
    plain = job.backend if first or job.backend not in _COUNTED else "mtkahypar"
    if first or not counted:
        try:
            cands.consider(plain, _run(hg, job, plain))
        except HgpartError as exc:
            if first:
                raise
            cands.fail(plain, exc)
    if cands.fitting or job.k == 1:
        return cands
    cands.proven = counted and _exact_with_rows(cands)
    if not cands.fitting and not cands.proven and job.backend in (*_COUNTED, *_HEURISTIC):
        _weighted_rounds(cands, job.backend if job.backend in _HEURISTIC else "mtkahypar")
    return cands


def _report(limit: MemoryLimit, cands: _Candidates, chosen: Attempt) -> dict[str, object]:
    return {**limit.to_dict(), "chosen": chosen.how, "max_memory_bytes": chosen.max_memory_bytes,
            "attempts": [asdict(a) for a in cands.attempts]}


def _no_fit(hg: Hypergraph, job: Job, limit: MemoryLimit, vm: VertexMemory, cands: _Candidates, *,
            search: bool = True) -> NoFitError:
    """The one-line error: nothing fits at K; the bound on K and (``search``) the smallest K found that fits."""
    lim = format_size(limit.limit_bytes)
    where = None
    bound = smallest_k_bound(vm, limit.limit_bytes)
    if bound == 0:
        v = int(np.argmax(vm.total))
        layer = next(b.layer for b in hg.blocks if b.start <= v < b.stop)
        return NoFitError(f"no placement fits: one vertex of layer {layer!r} alone needs "
                          f"{format_size(float(vm.total[v]))}, more than {lim}", where=where, k=job.k,
                          fix="lower --batch-size or --inflight, use the fine grain, or raise the limit")
    tried = [a.max_memory_bytes for a in cands.attempts if a.max_memory_bytes is not None]
    best = f"; the best placement tried needs {format_size(min(tried))} on its largest part" if tried else ""
    what = (f"no placement fits {lim} per part at K = {job.k} (the exact program proves it)" if cands.proven
            else f"no placement found at K = {job.k} in which every part fits {lim}{best}")
    total = f"total {format_size(float(vm.total.sum()))} needs K >= {bound}"
    if not search:
        return NoFitError(what, where=where, k=job.k, fix=f"{total}; raise the limit or lower --batch-size or "
                          "--inflight")
    start = max(bound, job.k + 1)
    proven_below = True  # every K above the one asked and below the one tried is below the bound or proven
    for kk in range(start, min(start + SEARCH_SPAN, hg.num_vertices + 1)):
        at = _at_k(hg, replace(job, k=kk), limit, vm, first=False)
        if at.best() is not None:
            exact = "the smallest K that fits" if proven_below else f"the smallest K found to fit ({total})"
            return NoFitError(what, where=where, k=job.k, smallest_k=kk, fix=f"use --k {kk}, {exact}")
        proven_below = proven_below and at.proven
    return NoFitError(what, where=where, k=job.k, fix=f"{total}, and none was found up to K = "
                      f"{start + SEARCH_SPAN - 1}; raise the limit or lower --batch-size or --inflight")


def limit_from_options(text: str | None, *, inflight: int = 1, batch_size: int = 1, optimizer: str = "adam",
                 where: str = "--memory-limit") -> MemoryLimit | None:
    """The limit of the command-line options (``None`` when ``text`` is ``None``): ``16GiB`` per device.

    Raises:
        BadOptionError: a size that cannot be read, an in-flight count or batch size below 1, an unknown
            optimizer.
    """
    settings = MemorySettings(batch_size=batch_size, inflight=inflight, optimizer=Optimizer.parse(optimizer))
    if text is None and inflight != 1:
        raise BadOptionError(f"--inflight {inflight} counts memory only under a limit", where="--inflight",
                             fix="add --memory-limit SIZE, or drop --inflight", option="--inflight", value=inflight)
    return None if text is None else MemoryLimit(float(parse_size(text, where=where)), settings)


def fitting_metrics(hg: Hypergraph, parts: np.ndarray, k: int, limit: MemoryLimit) -> PartitionMetrics:
    """The metrics of ``parts`` with the memory counted under ``limit``'s settings and held against it."""
    s = limit.settings
    return partition_metrics(hg, parts, k, optimizer=s.optimizer.value, dtype_bytes=s.dtype_bytes,
                             inflight=s.inflight, memory_limit=limit.limit_bytes)


def partition_fitting(hg: Hypergraph, job: Job, limit: MemoryLimit | None, *, search: bool = True
                      ) -> PartitionResult:
    """A placement of ``hg`` in ``job.k`` parts in which every part fits ``limit`` (module docstring);
    without a limit, :func:`hgpart.partitioners.partition` as it is. ``search=False``: when nothing fits at K,
    raise at once instead of searching for the smallest K that fits (a caller that tries every K itself).

    Returns:
        the chosen :class:`PartitionResult`; ``info["memory"]`` records the limit, the settings, every
        attempt and the largest part's bytes.

    Raises:
        NoFitError: nothing fits at ``job.k``; it names the smallest K found that fits.
        HgpartError: the backend's own errors (bad options) on the requested run.
    """
    if limit is None:
        return _run(hg, job, job.backend)
    t0 = time.perf_counter()
    vm = vertex_memory(hg, limit.settings)
    cands = _at_k(hg, job, limit, vm, first=True)
    chosen = cands.best()
    if chosen is None:
        raise _no_fit(hg, job, limit, vm, cands, search=search)
    res, att = chosen
    res.objective_bytes = km1_bytes(hg, res.parts, job.k)
    res.info["memory"] = _report(limit, cands, att)
    res.seconds = time.perf_counter() - t0
    return res
