"""Choose a strategy and K for a model on a cluster: simulate every candidate, rank by time per epoch among the
plans that fit in memory, and say why each loser loses.

Usage::

    from hgpart.simulate.plan import PlanOptions, plan
    p = plan(graph, cluster, PlanOptions(batch_size=32, max_k=8))
    p.winner.name, p.winner.result.epoch_s, p.winner.placement   # placement: None for data parallelism
    [(row.name, row.reason) for row in p.rows]

Candidates: the single device; for every K = 2, 4, 8, ... up to ``max_k`` (and the cluster's size) sync data
parallelism (ring), async data parallelism with one and with distributed parameter servers, and model parallelism
with layer-wise, coarse-grain and (``fine=True``) fine-grain hypergraph placements, each run as the async pipeline
with the runtime's default batches in flight (one per stage, at most K + 1) and as sync micro-batches (K of
``B / K``: one batch's activations in flight, not K); and model parallelism x data parallelism: R copies of the
coarse-grain placement on K devices each, sync, every part's gradient all-reduced over its R copies, for every K x R
<= ``max_k`` (and the cluster's size) with K, R >= 2.
``max_k`` bounds the devices any plan uses. Placements are partitioned on the layers' FLOP counts (the work the
simulator charges when the cluster's device has no profile of the model) with the ``backend`` partitioner,
``group`` filters per vertex (a coarse VGG16 224 has 25 million pins ungrouped; grouping by 8 divides them by 64
so that planning takes minutes, at some cost in volume); the placement files are written at full resolution all
the same.

Memory is checked against the device's capacity, or ``memory_limit`` when given. A hypergraph placement that does
not fit is partitioned again to fit (:func:`hgpart.partitioners.memory_fit.partition_fitting`: memory rows in
the exact program where it applies, else the partitioner with memory as the vertex weight), counting the memory of
that plan (its batch share and batches in flight); if none is found, the row says so and stays unfit.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from hgpart.cluster import Cluster
from hgpart.errors import BadOptionError
from hgpart.hypergraph import Grain, Hypergraph, build_hypergraph
from hgpart.layergraph import LayerGraph
from hgpart.memory import MemorySettings, format_size
from hgpart.partitioners import partition
from hgpart.partitioners.memory_fit import Job, MemoryLimit, NoFitError, partition_fitting
from hgpart.placement import Placement
from hgpart.profile import analytic_profile
from hgpart.simulate.run import SimOptions, SimResult, SimStrategy, model_memory_settings, simulate
from hgpart.simulate.workloads import Mode

__all__ = ["PlanOptions", "PlanRow", "Plan", "plan"]


@dataclass(frozen=True)
class PlanOptions:
    """What to consider: batch size, largest K, memory limit in bytes (``None``: the device's capacity)."""

    batch_size: int = 32
    max_k: int = 8
    memory_limit: float | None = None
    fine: bool = False
    backend: str = "mtkahypar"
    images: int = 10_240
    optimizer: str = "adam"
    seed: int = 1
    group: int = 8  # filters (and fine-grain input channels) per vertex of the hypergraph partitioned


@dataclass
class PlanRow:
    """One candidate: its name, devices used, the simulation, the placement to train it (model parallelism and the
    single device), and how that placement was made to fit memory (``""``: it fitted as partitioned)."""

    name: str
    k: int
    result: SimResult
    placement: Placement | None
    reason: str = ""
    fitted: str = ""

    @property
    def fits(self) -> bool:
        return self.result.fits

    @property
    def max_memory(self) -> float:
        return max(m.total for m in self.result.memory)


@dataclass
class Plan:
    """Every candidate, best first (those that fit before those that do not)."""

    rows: list[PlanRow] = field(default_factory=list)

    @property
    def winner(self) -> PlanRow | None:
        return self.rows[0] if self.rows and self.rows[0].fits else None


#: the work imbalance every planned placement is partitioned with
EPSILON = 0.1


@dataclass(frozen=True)
class _Candidate:
    """A plan to simulate; ``refit``: the grain and backend to partition it again with if it does not fit (None:
    a baseline on the one-part placement, or a layer-wise placement, whose split is the method)."""

    name: str
    devices: int
    sim: SimOptions
    placement: Placement
    refit: tuple[Grain, str] | None = None


class _Placements:
    """The placements a plan needs, made once per (K, grain, backend) on one grouped hypergraph per grain."""

    def __init__(self, graph: LayerGraph, opts: PlanOptions) -> None:
        self.graph, self.opts = graph, opts
        self.work = analytic_profile(graph, opts.batch_size).work()
        self.hgs: dict[str, Hypergraph] = {}
        self.made: dict[tuple[int, str, str], Placement] = {}

    def hypergraph(self, grain: Grain) -> Hypergraph:
        if grain not in self.hgs:
            self.hgs[grain] = build_hypergraph(self.graph, self.work, batch_size=self.opts.batch_size, grain=grain,
                                               work_unit="MFLOP", group=self.opts.group,
                                               channel_group=self.opts.group)
        return self.hgs[grain]

    def _wrap(self, hg: Hypergraph, parts: np.ndarray, k: int, backend: str, **extra: object) -> Placement:
        method = "layerwise" if backend == "layerwise" else "hypergraph"
        return Placement.from_vertex_parts(self.graph, hg, parts, k=k, method=method, work=self.work,
                                           provenance={"backend": backend, "planned": True, **extra})

    def get(self, k: int, grain: Grain, backend: str) -> Placement:
        key = (k, grain, backend)
        if key not in self.made:
            hg = self.hypergraph(grain)
            parts = (np.zeros(hg.num_vertices, dtype=np.int64) if k == 1 else
                     partition(hg, k=k, backend=backend, epsilon=EPSILON, seed=self.opts.seed).parts)
            self.made[key] = self._wrap(hg, parts, k, backend)
        return self.made[key]

    def fitting(self, k: int, grain: Grain, backend: str, settings: MemorySettings, limit: float
                ) -> tuple[Placement, str]:
        """A placement at K whose every part fits ``limit`` under ``settings``, and how it was made.

        Raises:
            NoFitError: none was found at K.
        """
        hg = self.hypergraph(grain)
        res = partition_fitting(hg, Job(k, backend, EPSILON, self.opts.seed, runner=partition),
                                MemoryLimit(limit, settings), search=False)  # the plan tries every K itself
        mem = res.info.get("memory")
        how = str(mem.get("chosen", backend)) if isinstance(mem, dict) else backend
        return self._wrap(hg, res.parts, k, backend, memory_limit_bytes=limit, fitted=how), how


def _candidates(cluster: Cluster, opts: PlanOptions, made: _Placements) -> list[_Candidate]:
    base = SimOptions(batch_size=opts.batch_size, images=opts.images, optimizer=opts.optimizer)
    single = made.get(1, "coarse", "layerwise")
    out = [_Candidate("single device", 1, dataclasses.replace(base, strategy=SimStrategy.SINGLE), single)]
    most = min(opts.max_k, cluster.num_devices)
    grains: list[tuple[str, Grain, str]] = [("layer-wise", "coarse", "layerwise"),
                                            ("coarse hypergraph", "coarse", opts.backend)]
    if opts.fine:
        grains.append(("fine hypergraph", "fine", opts.backend))
    k = 2
    while k <= most:
        if opts.batch_size % k == 0:
            for strat in (SimStrategy.SYNC_DP, SimStrategy.ASYNC_DP_1PS, SimStrategy.ASYNC_DP_DPS):
                out.append(_Candidate(f"{strat.value} K={k}", k, dataclasses.replace(base, strategy=strat, devices=k),
                                      single))
        for label, grain, backend in grains:
            pl = made.get(k, grain, backend)
            refit = None if backend == "layerwise" else (grain, backend)
            out.append(_Candidate(f"{label} K={k} async", k, dataclasses.replace(base, mode=Mode.ASYNC),
                                  pl, refit))
            if opts.batch_size % k == 0:
                out.append(_Candidate(f"{label} K={k} sync", k, dataclasses.replace(base, mode=Mode.SYNC, inflight=k),
                                      pl, refit))
        reps = 2
        while k * reps <= most:
            if opts.batch_size % (k * reps) == 0:
                sim = dataclasses.replace(base, mode=Mode.SYNC, inflight=k, replicas=reps)
                out.append(_Candidate(f"coarse hypergraph K={k} x DP {reps}", k * reps, sim,
                                      made.get(k, "coarse", opts.backend), ("coarse", opts.backend)))
            reps *= 2
        k *= 2
    return out


def _reason(row: PlanRow, best: PlanRow | None, limit: float) -> str:
    if not row.fits:
        worst = max(row.result.memory, key=lambda m: m.total)
        why = f"does not fit: {format_size(worst.total)} on device {worst.device} > {format_size(limit)}"
        return f"{why}; {row.fitted}" if row.fitted else why
    fitted = f" (partitioned to fit: {row.fitted})" if row.fitted else ""
    if best is None or row is best:
        return "fastest that fits" + fitted
    path = row.result.path_seconds()
    total = sum(path.values()) or 1.0
    shares = ", ".join(f"{kind} {100 * s / total:.0f}%" for kind, s in sorted(path.items(), key=lambda x: -x[1]))
    slower = 100 * (row.result.epoch_s / best.result.epoch_s - 1)
    return f"{slower:.0f}% slower; its critical path: {shares}{fitted}"


def plan(graph: LayerGraph, cluster: Cluster, opts: PlanOptions) -> Plan:
    """Simulate every candidate (see the module docstring) and rank them."""
    if opts.batch_size < 1 or opts.max_k < 1:
        raise BadOptionError("batch size and --max-k must be >= 1", where="plan",
                             value=(opts.batch_size, opts.max_k))
    limit = cluster.device.memory_bytes if opts.memory_limit is None else float(opts.memory_limit)
    target = dataclasses.replace(cluster, device=dataclasses.replace(cluster.device, memory_bytes=limit))
    made = _Placements(graph, opts)
    rows = []
    replica_hg = None
    for c in _candidates(target, opts, made):
        baseline = c.sim.strategy is not SimStrategy.MODEL
        if baseline and replica_hg is None:
            replica_hg = c.placement.hypergraph()  # every baseline runs the same one-part placement
        res = simulate(c.placement, target, c.sim, hypergraph=replica_hg if baseline else None)
        pl = c.placement if c.sim.strategy in (SimStrategy.MODEL, SimStrategy.SINGLE) else None
        fitted = ""
        if not res.fits and c.refit is not None:
            k = c.placement.k
            # async: fitted for the most batches the runtime's default keeps of any placement at K (K + 1), since
            # the new placement's own stages, and so its default, are not known before it is made
            most = dataclasses.replace(c.sim, inflight=k + 1) if c.sim.mode is Mode.ASYNC else c.sim
            settings = model_memory_settings(most, opts.batch_size, c.placement)
            try:
                pl, how = made.fitting(k, *c.refit, settings, limit)
            except NoFitError as exc:
                fitted = exc.what
            else:
                res = simulate(pl, target, c.sim)
                fitted = how
        rows.append(PlanRow(c.name, c.devices, res, pl, fitted=fitted))
    rows.sort(key=lambda r: (not r.fits, r.result.epoch_s))
    best = rows[0] if rows and rows[0].fits else None
    for r in rows:
        r.reason = _reason(r, best, limit)
    return Plan(rows)
