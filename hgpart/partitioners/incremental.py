"""Incremental naive partitioning (thesis §5.1.3 filter-wise, §5.1.4 channel-wise).

Usage::

    res = partition(hg_coarse, k=8, backend="incremental")   # filter-wise
    res = partition(hg_fine, k=8, backend="incremental")     # channel-wise

Vertices are walked in id order (the builder numbers them layer by layer in
topological order; in the fine grain a layer's (filter, channel) vertices come
before its reduction vertices). Part 0 takes vertices until its work
*exceeds* the average ``total / k`` (the vertex that crosses the average is
included), then part 1 opens, and so on; the last part takes the rest. This
is the thesis's rule verbatim, so parts overshoot and the last parts can end
light, or even empty when a few heavy vertices exhaust the total early
(reported as such, never hidden).

Vectorised: one ``searchsorted`` on the cumulative work per part.
``epsilon``, ``seed``, ``preset``, ``time_limit`` are ignored (deterministic).
"""

from __future__ import annotations

import time

import numpy as np

from hgpart.hypergraph import Hypergraph
from hgpart.partitioners.base import PartitionResult

__all__ = ["run", "incremental_parts"]


def incremental_parts(weights: np.ndarray, k: int) -> np.ndarray:
    """Part of every item under the fill-until-above-average rule."""
    w = np.asarray(weights, dtype=np.float64)
    n = len(w)
    cum = np.cumsum(w)
    avg = float(cum[-1]) / k if n else 0.0
    parts = np.full(n, k - 1, dtype=np.int64)
    start = 0
    for p in range(k - 1):
        if start >= n:
            break
        base = float(cum[start - 1]) if start > 0 else 0.0
        # first index whose running part work exceeds avg; it belongs to this part
        idx = int(np.searchsorted(cum, base + avg, side="right"))
        stop = min(idx + 1, n)
        parts[start:stop] = p
        start = stop
    return parts


def run(
    hg: Hypergraph,
    *,
    k: int,
    epsilon: float = 0.0,
    seed: int = 1,
    preset: str | None = None,
    time_limit: float | None = None,
    threads: int | None = None,
) -> PartitionResult:
    """Backend entry point (see :mod:`hgpart.partitioners`); deterministic, uses only ``hg`` and ``k``."""
    t0 = time.perf_counter()
    parts = incremental_parts(hg.vertex_weight, k)
    return PartitionResult(parts=parts, backend="incremental", seconds=time.perf_counter() - t0)
