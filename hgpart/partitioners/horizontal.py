"""Filter-wise horizontal naive partitioning (thesis §5.1.2).

Usage::

    res = partition(hg, k=8, backend="horizontal")

Every block of vertices (each layer's filters in the coarse grain; each
layer's (filter, channel) vertices and its reduction vertices in the fine
grain; the input channels) is cut into ``k`` contiguous chunks of (nearly)
equal size: vertex ``i`` of a block of ``s`` vertices goes to part
``floor(i * k / s)``. Every part therefore holds ~1/k of every layer: perfect
work balance, but every feature map is needed by every part. With ``k``
dividing the filter count, the fine-grain chunks coincide with the coarse ones
(a filter's channels stay with its reduction), as the thesis observes.

Blocks smaller than ``k`` leave some parts without vertices of that layer.
``epsilon``, ``seed``, ``preset``, ``time_limit`` are ignored (deterministic).
"""

from __future__ import annotations

import time

import numpy as np

from hgpart.hypergraph import Hypergraph
from hgpart.partitioners.base import PartitionResult

__all__ = ["run"]


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
    parts = np.empty(hg.num_vertices, dtype=np.int64)
    for b in hg.blocks:
        s = b.size
        parts[b.start : b.stop] = (np.arange(s, dtype=np.int64) * k) // s
    return PartitionResult(parts=parts, backend="horizontal", seconds=time.perf_counter() - t0)
