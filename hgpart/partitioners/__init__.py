"""Partitioner backends behind one verb.

Usage::

    from hgpart.partitioners import partition
    res = partition(hg, k=4, backend="mtkahypar", epsilon=0.1, seed=1)
    res.parts            # one part id per vertex of hg
    res.objective_bytes  # km1 in bytes as *we* compute it (hgpart.metrics)

Every backend is a module in this package exposing
``run(hg, *, k, epsilon, seed, preset, time_limit) -> PartitionResult`` and is
registered in :data:`BACKENDS` (name -> module path), imported lazily so that
``hgpart partition`` only loads the backend it uses. Backends must be
deterministic for a given seed.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hgpart.errors import HgpartError
from hgpart.hypergraph import Hypergraph
from hgpart.metrics import km1_bytes

__all__ = ["PartitionResult", "BACKENDS", "partition", "available_backends"]

#: backend name -> module implementing ``run``
BACKENDS: dict[str, str] = {
    "kahypar": "hgpart.partitioners.kahypar_backend",
    "mtkahypar": "hgpart.partitioners.mtkahypar_backend",
    "layerwise": "hgpart.partitioners.layerwise",
    "horizontal": "hgpart.partitioners.horizontal",
    "incremental": "hgpart.partitioners.incremental",
    "exact": "hgpart.partitioners.exact",
    "block": "hgpart.partitioners.block",
    "auto": "hgpart.partitioners.auto",
}


@dataclass
class PartitionResult:
    """What a backend returns: parts per vertex plus provenance."""

    parts: np.ndarray
    backend: str
    seconds: float
    preset: str = ""
    backend_objective: float | None = None  # the backend's own km1 figure, in its (scaled) units
    objective_scale: float = 1.0  # bytes per backend cost unit
    lower_bound_bytes: float | None = None  # proven lower bound on km1 (exact backends)
    info: dict[str, Any] = field(default_factory=dict)
    objective_bytes: float = 0.0  # filled by partition(): our own km1 in bytes


def available_backends() -> list[str]:
    return sorted(BACKENDS)


def partition(
    hg: Hypergraph,
    *,
    k: int,
    backend: str = "mtkahypar",
    epsilon: float = 0.1,
    seed: int = 1,
    preset: str | None = None,
    time_limit: float | None = None,
) -> PartitionResult:
    """Partition ``hg`` into ``k`` parts with ``backend``; validates inputs first."""
    if backend not in BACKENDS:
        raise HgpartError(f"unknown partitioner backend {backend!r}", fix=f"use one of {available_backends()}")
    if k < 1:
        raise HgpartError(f"K = {k} must be >= 1", fix="pass --k 2 or more")
    if k > hg.num_vertices:
        raise HgpartError(
            f"K = {k} exceeds the {hg.num_vertices} vertices of the {hg.grain}-grain hypergraph",
            fix="use fewer parts or a finer grain",
        )
    if not (0.0 <= epsilon < 10.0):
        raise HgpartError(f"imbalance epsilon = {epsilon} is out of range", fix="use a value like 0.03 or 0.1")
    mod = importlib.import_module(BACKENDS[backend])
    t0 = time.perf_counter()
    if k == 1:
        res = PartitionResult(parts=np.zeros(hg.num_vertices, dtype=np.int64), backend=backend, seconds=0.0)
    else:
        res = mod.run(hg, k=k, epsilon=epsilon, seed=seed, preset=preset, time_limit=time_limit)
    res.seconds = res.seconds or (time.perf_counter() - t0)
    res.parts = np.asarray(res.parts, dtype=np.int64)
    res.objective_bytes = km1_bytes(hg, res.parts, k)
    return res
