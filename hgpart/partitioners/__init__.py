"""Partitioner backends behind one verb.

Usage::

    from hgpart.partitioners import partition
    res = partition(hg, k=4, backend="mtkahypar", epsilon=0.1, seed=1)
    res.parts            # one part id per vertex of hg
    res.objective_bytes  # km1 in bytes as *we* compute it (hgpart.metrics)

Every backend is a module in this package satisfying
:class:`~hgpart.partitioners.base.Backend` (one ``run(hg, *, k, epsilon,
seed, preset, time_limit, threads) -> PartitionResult``) and is registered in
:data:`BACKENDS` (name -> module path). :func:`partition` imports only the
backend it uses, so ``hgpart partition`` does not load every solver; backends
import :mod:`.base`, never this module, so the table hides no import cycle.
Backends are deterministic for a given seed, except where their docstring
says what is not (``auto`` under a wall-clock limit).
"""

from __future__ import annotations

import importlib
import time
from typing import cast

import numpy as np

from hgpart.errors import HgpartError
from hgpart.hypergraph import Hypergraph
from hgpart.metrics import km1_bytes
from hgpart.partitioners._interrupt import interruptible
from hgpart.partitioners.base import Backend, PartitionResult

__all__ = ["PartitionResult", "Backend", "BACKENDS", "partition", "available_backends", "load_backend"]

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


def available_backends() -> list[str]:
    """Names :func:`partition` accepts as ``backend``, sorted."""
    return sorted(BACKENDS)


def load_backend(name: str) -> Backend:
    """The module registered as ``name`` (imported on first use)."""
    if name not in BACKENDS:
        raise HgpartError(f"unknown partitioner backend {name!r}", fix=f"use one of {available_backends()}")
    return cast(Backend, importlib.import_module(BACKENDS[name]))


def partition(
    hg: Hypergraph,
    *,
    k: int,
    backend: str = "mtkahypar",
    epsilon: float = 0.1,
    seed: int = 1,
    preset: str | None = None,
    time_limit: float | None = None,
    threads: int | None = None,
) -> PartitionResult:
    """Partition ``hg`` into ``k`` parts with ``backend``; validates inputs first.

    Args:
        time_limit: seconds the backend may take (None: its default); must be > 0.
        threads: cores Mt-KaHyPar (and ``auto``'s portfolio) may use; None: the backend's default.

    Raises:
        HgpartError: an unknown backend, K outside ``1 .. vertices``, epsilon out of range,
            ``time_limit <= 0`` or ``threads < 1``, and any failure of the backend.
    """
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
    if time_limit is not None and not time_limit > 0.0:  # also rejects NaN
        raise HgpartError(f"time limit {time_limit} s must be positive",
                          fix="pass a number of seconds above 0, or omit it for the backend's default")
    if threads is not None and threads < 1:
        raise HgpartError(f"{threads} threads requested", fix="use 1 or more threads")
    mod = load_backend(backend)
    t0 = time.perf_counter()
    if k == 1:
        res = PartitionResult(parts=np.zeros(hg.num_vertices, dtype=np.int64), backend=backend, seconds=0.0)
    else:
        with interruptible():  # SIGTERM / Ctrl-C: prompt, and every temporary folder and worker is cleaned up
            res = mod.run(hg, k=k, epsilon=epsilon, seed=seed, preset=preset, time_limit=time_limit,
                          threads=threads)
    res.seconds = res.seconds or (time.perf_counter() - t0)
    res.parts = np.asarray(res.parts, dtype=np.int64)
    res.objective_bytes = km1_bytes(hg, res.parts, k)
    return res
