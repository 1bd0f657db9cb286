"""The static comparison: every method x grain x N x epsilon on one model and profile.

Usage::

    from hgpart.compare.static import run_static
    cmp = run_static(graph, profile, ks=[2, 4, 8], methods=["layerwise", "incremental", "hypergraph"],
                     grains=["coarse", "fine"], epsilons=[0.1], backend="auto")
    for r in cmp.results:
        r.method, r.grain, r.k, r.status, r.metrics.comm_volume_mib, r.thesis

Methods (thesis §5.1): ``layerwise`` (whole layers, exact min-max DP; grain
independent, so it runs on the first requested grain only), ``horizontal``
(every layer split evenly over all parts), ``incremental`` (fill a part to the
average; filter-wise on the coarse grain, channel-wise on the fine grain) and
``hypergraph`` (KaHyPar / Mt-KaHyPar, once per epsilon). Only ``hypergraph``
has a balance parameter; the others are recorded with ``epsilon=None``.

A method that cannot make N parts (N above the vertex count, layer-wise with
N above the number of vertex layers) is recorded with status ``"not
possible"`` and the reason; it is a result, not an error. With
``budget_seconds`` the remaining hypergraph runs are recorded as
``"skipped"`` once the budget is spent, saying so; ``skip(method, grain, k,
epsilon)`` may return a reason to skip any other cell (e.g. a benchmark that
cannot afford fine-grain runs at every N).

The thesis's value sits beside ours (``thesis``) only for VGG16 at 224x224x3,
batch 32, the configuration it measured.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from hgpart.allocator import physical_memory_bytes
from hgpart.compare.thesis import thesis_applies, thesis_value
from hgpart.errors import BadOptionError, HgpartError
from hgpart.hypergraph import Hypergraph, build_hypergraph
from hgpart.layergraph import LayerGraph
from hgpart.metrics import MIB, PartitionMetrics, partition_metrics
from hgpart.models import ModelSource
from hgpart.partitioners import BACKENDS, partition
from hgpart.partitioners.certificate import Certificate, certify, not_computed
from hgpart.profile import Profile

__all__ = ["METHODS", "GRAINS", "StaticResult", "ThesisCell", "StaticComparison", "run_static", "THESIS_COLUMNS",
           "machine_info"]

METHODS = ("layerwise", "horizontal", "incremental", "hypergraph")
GRAINS = ("coarse", "fine")
#: metric columns looked up in the thesis's tables
THESIS_COLUMNS = (
    "max_work", "min_work", "avg_work", "max_over_min", "max_over_avg", "max_times_n",
    "comm_volume_mib", "max_comm_mib", "avg_comm_mib", "max_over_avg_comm",
)
_METRIC_KEEP = (
    "k", "max_work", "min_work", "avg_work", "max_over_min", "max_over_avg", "max_times_n", "comm_volume_mib",
    "max_comm_mib", "avg_comm_mib", "max_over_avg_comm", "max_recv_mib", "cut_nets", "part_work",
    "part_send_mib", "part_param_bytes", "part_optimizer_bytes", "part_activation_bytes", "max_memory_bytes",
    "max_over_avg_memory",
)


@dataclass(frozen=True)
class ThesisCell:
    """The thesis's printed value of one metric for one cell of the grid, and where it is printed."""

    value: float
    citation: str


@dataclass
class StaticResult:
    """One cell of the grid: a method at one grain, N and epsilon."""

    method: str
    grain: str
    k: int
    epsilon: float | None
    status: str  # "ok" | "not possible" | "skipped" | "failed" (a backend error or time limit, with the reason)
    reason: str = ""
    backend: str = ""
    seconds: float = 0.0
    metrics: PartitionMetrics | None = None  # written to JSON as the _METRIC_KEEP fields
    #: the thesis's printed values by metric column (empty unless :func:`thesis_applies`)
    thesis: dict[str, ThesisCell] = field(default_factory=dict)
    placement: str | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    #: coarse grain: proven lower bound on the volume and the gap (:mod:`hgpart.partitioners.certificate`)
    certificate: Certificate | None = None
    parts: np.ndarray | None = field(default=None, repr=False)  # in memory only (placements, heat-map)

    @property
    def label(self) -> str:
        """Method name as the thesis's tables title it."""
        names = {
            ("layerwise", "coarse"): "Layer-wise", ("layerwise", "fine"): "Layer-wise",
            ("horizontal", "coarse"): "Filter-wise horizontal", ("horizontal", "fine"): "Channel-wise horizontal",
            ("incremental", "coarse"): "Filter-wise incremental", ("incremental", "fine"): "Channel-wise incremental",
            ("hypergraph", "coarse"): "Coarse-grain hypergraph", ("hypergraph", "fine"): "Fine-grain hypergraph",
        }
        base = names.get((self.method, self.grain), f"{self.method} ({self.grain})")
        return base if self.epsilon is None else f"{base} eps={self.epsilon:g}"

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "parts"}
        d["metrics"] = None if self.metrics is None else self.metrics.to_dict(_METRIC_KEEP)
        d["thesis"] = {col: asdict(cell) for col, cell in self.thesis.items()}
        d["certificate"] = {} if self.certificate is None else self.certificate.to_dict()
        d["label"] = self.label
        return d


@dataclass
class StaticComparison:
    """Everything one comparison run produced, plus what it was run on."""

    model: str
    input_shape: list[int]
    batch_size: int
    work_unit: str
    profile_mode: str
    profile_source: str
    fingerprint: str
    params: int
    activation_bytes: float  # all activations of one replica at batch_size (sum over vertices)
    ks: list[int]
    methods: list[str]
    grains: list[str]
    epsilons: list[float]
    backend: str
    preset: str | None
    seed: int
    results: list[StaticResult]
    hypergraphs: dict[str, dict[str, Any]]
    thesis_applies: bool
    wall_seconds: float = 0.0
    machine: dict[str, Any] = field(default_factory=dict)
    hypergraph_objects: dict[str, Hypergraph] = field(default_factory=dict, repr=False)  # in memory only

    def to_dict(self) -> dict[str, Any]:
        skip = {"results", "hypergraph_objects"}
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
        d["results"] = [r.to_dict() for r in self.results]
        return d

    def find(self, method: str, grain: str, k: int, epsilon: float | None = None) -> StaticResult | None:
        for r in self.results:
            same_eps = r.epsilon == epsilon or (
                r.epsilon is not None and epsilon is not None and abs(r.epsilon - epsilon) < 1e-12
            )
            if r.method == method and r.grain == grain and r.k == k and same_eps:
                return r
        return None


def machine_info() -> dict[str, Any]:
    """The machine a comparison ran on (for committed reports)."""
    import os

    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = physical_memory_bytes() or 0
    return {
        "host": platform.node(), "cpu": cpu, "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": round(mem / 2**30, 1), "python": platform.python_version(), "platform": platform.platform(),
    }


def _validate(methods: Sequence[str], grains: Sequence[str], ks: Sequence[int], epsilons: Sequence[float],
              backend: str) -> None:
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise BadOptionError(f"unknown method(s) {bad}", where="--methods", fix=f"use some of {','.join(METHODS)}",
                             value=bad)
    badg = [g for g in grains if g not in GRAINS]
    if badg:
        raise BadOptionError(f"unknown grain(s) {badg}", where="--grains", fix="use coarse, fine or coarse,fine",
                             value=badg)
    if not methods or not grains or not ks:
        raise BadOptionError("nothing to compare: methods, grains and K must each list at least one value")
    if any(k < 1 for k in ks):
        raise BadOptionError(f"every K must be >= 1, got {list(ks)}", where="--k", value=list(ks))
    if "hypergraph" in methods:
        if backend not in BACKENDS or backend in ("layerwise", "horizontal", "incremental"):
            raise BadOptionError(f"unknown hypergraph backend {backend!r}", where="--backend",
                                 fix="use auto, exact, mtkahypar, kahypar or block", value=backend)
        if not epsilons:
            raise BadOptionError("no epsilon given for hypergraph partitioning", where="--epsilon", fix="e.g. 0.1")
        if any(not 0.0 <= e < 10.0 for e in epsilons):
            raise BadOptionError(f"imbalance epsilon out of range in {list(epsilons)}", where="--epsilon",
                                 fix="use values like 0.03,0.1,0.15,0.2", value=list(epsilons))


def _plan(methods: Sequence[str], grains: Sequence[str], ks: Sequence[int],
          epsilons: Sequence[float]) -> list[tuple[str, str, int, float | None]]:
    """The grid: method, then grain, then epsilon, then N; hypergraph runs by epsilon, N, grain.

    The (cheap) baselines come first; the hypergraph runs interleave the
    grains at each N, smallest N first, so a time budget cuts the largest N of
    both grains rather than a whole grain.
    """
    tasks: list[tuple[str, str, int, float | None]] = []
    for method in METHODS:
        if method not in methods:
            continue
        method_grains = [g for g in GRAINS if g in grains]
        if method == "layerwise":
            method_grains = method_grains[:1]  # whole layers: the split and its metrics do not depend on grain
        if method == "hypergraph":
            tasks.extend((method, grain, k, eps) for eps in epsilons for k in ks for grain in method_grains)
            continue
        for grain in method_grains:
            eps_list: list[float | None] = list(epsilons) if method == "hypergraph" else [None]
            for eps in eps_list:
                tasks.extend((method, grain, k, eps) for k in ks)
    return tasks


def _thesis_cells(method: str, grain: str, eps: float | None, k: int) -> dict[str, ThesisCell]:
    out: dict[str, ThesisCell] = {}
    for col in THESIS_COLUMNS:
        hit = thesis_value(method, grain, eps, k, col)
        if hit is not None:
            out[col] = ThesisCell(value=hit[0], citation=hit[1])
    return out


def run_static(
    graph: LayerGraph,
    profile: Profile,
    *,
    ks: Sequence[int],
    methods: Sequence[str] = METHODS,
    grains: Sequence[str] = GRAINS,
    epsilons: Sequence[float] = (0.1,),
    backend: str = "auto",
    preset: str | None = None,
    seed: int = 1,
    time_limit: float | None = None,
    bound_time_limit: float | None = None,
    budget_seconds: float | None = None,
    skip: Callable[[str, str, int, float | None], str] | None = None,
    placements_dir: str | Path | None = None,
    profile_source: str = "",
    progress: bool = True,
    on_result: Callable[[StaticResult], None] | None = None,
    model_source: ModelSource | None = None,
) -> StaticComparison:
    """Run the comparison grid; see the module docstring (``model_source`` is recorded in saved placements)."""
    _validate(methods, grains, ks, epsilons, backend)
    profile.check(graph, path=profile_source or None)
    t_start = time.perf_counter()
    ks = sorted(set(int(k) for k in ks))
    work = profile.work()
    tasks = _plan(methods, grains, ks, epsilons)
    applies = thesis_applies(graph.name, graph.input_shape, profile.batch_size)
    hgs: dict[str, Hypergraph] = {}
    hg_info: dict[str, dict[str, Any]] = {}
    results: list[StaticResult] = []

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  disable=not progress, transient=False) as bar:
        job = bar.add_task("comparing", total=len(tasks))
        for method, grain, k, eps in tasks:
            tag = f" eps={eps:g}" if eps is not None else ""
            bar.update(job, description=f"{method:<11} {grain:<6} N={k:<4}{tag}")
            if grain not in hgs:
                hgs[grain] = build_hypergraph(graph, work, batch_size=profile.batch_size, grain=grain,  # type: ignore[arg-type]
                                              work_unit=profile.work_unit)
                hg_info[grain] = hgs[grain].summary()
            hg = hgs[grain]
            why = (skip(method, grain, k, eps) if skip is not None else "") or _budget_reason(
                method, budget_seconds, t_start)
            res = _run_one(graph, hg, method, grain, k, eps, backend=backend, preset=preset, seed=seed,
                           time_limit=time_limit, skip_reason=why)
            if res.status == "ok" and grain == "coarse":
                bar.update(job, description=f"{method:<11} {grain:<6} N={k:<4}{tag} lower bound")
                res.certificate = _certificate(hg, res, k, eps, bound_time_limit)
            if applies and res.status == "ok":
                res.thesis = _thesis_cells(method, grain, eps, k)
            if res.status == "ok" and placements_dir is not None:
                res.placement = str(_save_placement(graph, hg, res, work, profile, placements_dir, seed,
                                                    model_source))
            results.append(res)
            if on_result is not None:
                on_result(res)
            bar.advance(job)

    act = float(hgs[next(iter(hgs))].vertex_act_bytes.sum()) if hgs else 0.0
    return StaticComparison(
        model=graph.name, input_shape=list(graph.input_shape), batch_size=profile.batch_size,
        work_unit=profile.work_unit, profile_mode=profile.mode, profile_source=profile_source,
        fingerprint=graph.fingerprint(), params=int(graph.total_params), activation_bytes=act, ks=list(ks),
        methods=[m for m in METHODS if m in methods], grains=[g for g in GRAINS if g in grains],
        epsilons=[float(e) for e in epsilons], backend=backend, preset=preset, seed=seed, results=results,
        hypergraphs=hg_info, thesis_applies=applies, wall_seconds=time.perf_counter() - t_start,
        machine=machine_info(), hypergraph_objects=hgs,
    )


def _certificate(hg: Hypergraph, res: StaticResult, k: int, eps: float | None,
                 time_limit: float | None) -> Certificate:
    """The proven lower bound and gap of one coarse result, at the imbalance it reached (see certificate)."""
    m = res.metrics
    known = res.provenance.get("lower_bound_bytes")
    if time_limit is None and known is None:
        return not_computed("no --bound-time-limit")
    assert m is not None  # certified only when the run is "ok"
    cert = certify(hg, k=k, epsilon=eps or 0.0, volume_bytes=m.comm_volume_mib * MIB,
                   max_over_avg=m.max_over_avg, known_bound=known, time_limit=time_limit or 0.0)
    return cert


def _budget_reason(method: str, budget: float | None, t_start: float) -> str:
    if method != "hypergraph" or budget is None:
        return ""
    spent = time.perf_counter() - t_start
    if spent > budget:
        return f"time budget of {budget:g} s spent ({spent:.0f} s elapsed) before this run started"
    return ""


def _not_possible(graph: LayerGraph, hg: Hypergraph, method: str, k: int) -> str:
    if k > hg.num_vertices:
        return f"N = {k} exceeds the {hg.num_vertices} vertices of the {hg.grain}-grain hypergraph"
    if method == "layerwise":
        from hgpart.partitioners.layerwise import max_parts

        n = max_parts(hg)
        if k > n:
            return f"N = {k} exceeds the {n} vertex layers of {graph.name} (layer-wise keeps layers whole)"
    return ""


def _run_one(graph: LayerGraph, hg: Hypergraph, method: str, grain: str, k: int, eps: float | None, *,
             backend: str, preset: str | None, seed: int, time_limit: float | None, skip_reason: str) -> StaticResult:
    reason = _not_possible(graph, hg, method, k)
    if reason:
        return StaticResult(method, grain, k, eps, "not possible", reason=reason)
    if skip_reason:
        return StaticResult(method, grain, k, eps, "skipped", reason=skip_reason, backend=backend)
    be = backend if method == "hypergraph" else method
    t0 = time.perf_counter()
    try:
        res = partition(hg, k=k, backend=be, epsilon=eps if eps is not None else 0.0, seed=seed,
                        preset=preset if method == "hypergraph" else None, time_limit=time_limit)
    except HgpartError as exc:
        if method != "hypergraph":
            raise
        # one failed or timed-out backend run must not cost the rest of the grid: record it and go on
        return StaticResult(method, grain, k, eps, "failed", reason=exc.line(), backend=be,
                            seconds=time.perf_counter() - t0)
    seconds = time.perf_counter() - t0
    metrics = partition_metrics(hg, res.parts, k)
    prov = {"backend": be, "preset": res.preset, "backend_seconds": res.seconds,
            **{key: v for key, v in res.info.items() if isinstance(v, (int, float, str))}}
    if res.lower_bound_bytes is not None:
        prov["lower_bound_bytes"] = float(res.lower_bound_bytes)
    return StaticResult(method, grain, k, eps, "ok", backend=be, seconds=seconds, metrics=metrics, provenance=prov,
                        parts=res.parts.astype(np.int32))


def _save_placement(graph: LayerGraph, hg: Hypergraph, res: StaticResult, work: dict[str, float], profile: Profile,
                    folder: str | Path, seed: int, source: ModelSource | None = None) -> Path:
    from hgpart.placement import Placement

    parts = np.asarray(res.parts, dtype=np.int64)
    prov = {"method": res.method, "epsilon": res.epsilon, "seed": seed, "profile_mode": profile.mode,
            "profile_fingerprint": profile.fingerprint, "source": "hgpart compare", **res.provenance}
    pl = Placement.from_vertex_parts(graph, hg, parts, k=res.k, method=res.method, work=work, provenance=prov,
                                     source=source)
    eps = "" if res.epsilon is None else f"_eps{res.epsilon:g}"
    path = Path(folder) / f"{graph.name}_{res.grain}_{res.method}_k{res.k}{eps}.json"
    return pl.save(path)
