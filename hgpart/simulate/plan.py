"""Choose a strategy and K for a model on a cluster: simulate every candidate, rank by time per epoch among the
plans that fit in memory, and say why each loser loses.

Usage::

    from hgpart.simulate.plan import PlanOptions, plan
    p = plan(graph, cluster, PlanOptions(batch_size=32, max_k=8))
    p.winner.name, p.winner.result.epoch_s, p.winner.placement   # placement: None for data parallelism
    [(row.name, row.reason) for row in p.rows]

Candidates: the single device; for every K = 2, 4, 8, ... up to ``max_k`` (and the cluster's size) sync data
parallelism (ring), async data parallelism with one and with distributed parameter servers, and model parallelism
with layer-wise, coarse-grain and (``fine=True``) fine-grain hypergraph placements, run as the async pipeline with K
batches in flight. Placements are partitioned on the layers' FLOP counts (the work the simulator charges when the
cluster's device has no profile of the model) with the ``backend`` partitioner, ``group`` filters per vertex (a
coarse VGG16 224 has 25 million pins ungrouped; grouping by 8 divides them by 64 so that planning takes minutes,
at some cost in volume); the placement files are written at full resolution all the same. Memory is checked against the
device's capacity, or ``memory_limit`` when given.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from hgpart.cluster import GIB, Cluster
from hgpart.errors import BadOptionError
from hgpart.hypergraph import Grain, build_hypergraph
from hgpart.layergraph import LayerGraph
from hgpart.partitioners import partition
from hgpart.placement import Placement
from hgpart.profile import analytic_profile
from hgpart.simulate.run import SimOptions, SimResult, SimStrategy, simulate
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
    """One candidate: its name, K, the simulation, the placement to train it (model parallelism only)."""

    name: str
    k: int
    result: SimResult
    placement: Placement | None
    reason: str = ""

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


def _placement(graph: LayerGraph, k: int, grain: Grain, backend: str, opts: PlanOptions) -> Placement:
    work = analytic_profile(graph, opts.batch_size).work()
    hg = build_hypergraph(graph, work, batch_size=opts.batch_size, grain=grain, work_unit="MFLOP",
                          group=opts.group, channel_group=opts.group)
    if k == 1:
        parts = np.zeros(hg.num_vertices, dtype=np.int64)
    else:
        parts = partition(hg, k=k, backend=backend, epsilon=0.1, seed=opts.seed).parts
    method = "layerwise" if backend == "layerwise" else "hypergraph"
    return Placement.from_vertex_parts(graph, hg, parts, k=k, method=method, work=work,
                                       provenance={"backend": backend, "planned": True})


def _candidates(graph: LayerGraph, cluster: Cluster, opts: PlanOptions) -> list[tuple[str, int, SimOptions,
                                                                                        Placement]]:
    base = SimOptions(batch_size=opts.batch_size, images=opts.images, optimizer=opts.optimizer)
    single = _placement(graph, 1, "coarse", "layerwise", opts)
    out = [("single device", 1, dataclasses.replace(base, strategy=SimStrategy.SINGLE), single)]
    k = 2
    while k <= min(opts.max_k, cluster.num_devices):
        if opts.batch_size % k == 0:
            for strat in (SimStrategy.SYNC_DP, SimStrategy.ASYNC_DP_1PS, SimStrategy.ASYNC_DP_DPS):
                out.append((f"{strat.value} K={k}", k, dataclasses.replace(base, strategy=strat, devices=k), single))
        mp = dataclasses.replace(base, mode=Mode.ASYNC, inflight=k)
        out.append((f"layer-wise K={k}", k, mp, _placement(graph, k, "coarse", "layerwise", opts)))
        out.append((f"coarse hypergraph K={k}", k, mp, _placement(graph, k, "coarse", opts.backend, opts)))
        if opts.fine:
            out.append((f"fine hypergraph K={k}", k, mp, _placement(graph, k, "fine", opts.backend, opts)))
        k *= 2
    return out


def _reason(row: PlanRow, best: PlanRow | None, limit: float) -> str:
    if not row.fits:
        worst = max(row.result.memory, key=lambda m: m.total)
        return f"does not fit: {worst.total / GIB:.2f} GiB on device {worst.device} > {limit / GIB:.2f} GiB"
    if best is None or row is best:
        return "fastest that fits"
    path = row.result.path_seconds()
    total = sum(path.values()) or 1.0
    shares = ", ".join(f"{kind} {100 * s / total:.0f}%" for kind, s in sorted(path.items(), key=lambda x: -x[1]))
    slower = 100 * (row.result.epoch_s / best.result.epoch_s - 1)
    return f"{slower:.0f}% slower; its critical path: {shares}"


def plan(graph: LayerGraph, cluster: Cluster, opts: PlanOptions) -> Plan:
    """Simulate every candidate (see the module docstring) and rank them."""
    if opts.batch_size < 1 or opts.max_k < 1:
        raise BadOptionError("batch size and --max-k must be >= 1", where="plan",
                             value=(opts.batch_size, opts.max_k))
    limit = cluster.device.memory_bytes if opts.memory_limit is None else float(opts.memory_limit)
    target = dataclasses.replace(cluster, device=dataclasses.replace(cluster.device, memory_bytes=limit))
    rows = []
    replica_hg = None
    for name, k, sim_opts, pl in _candidates(graph, target, opts):
        if sim_opts.strategy is not SimStrategy.MODEL and replica_hg is None:
            replica_hg = pl.hypergraph()  # every baseline runs the same one-part placement
        res = simulate(pl, target, sim_opts, hypergraph=replica_hg if sim_opts.strategy is not SimStrategy.MODEL
                       else None)
        keep = pl if sim_opts.strategy in (SimStrategy.MODEL, SimStrategy.SINGLE) else None
        rows.append(PlanRow(name, k, res, keep))
    rows.sort(key=lambda r: (not r.fits, r.result.epoch_s))
    best = rows[0] if rows and rows[0].fits else None
    for r in rows:
        r.reason = _reason(r, best, limit)
    return Plan(rows)
