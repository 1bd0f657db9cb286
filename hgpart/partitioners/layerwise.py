"""Layer-wise partitioning (thesis §5.1.1): whole layers, contiguous, min-max work by dynamic programming.

Usage::

    from hgpart.partitioners import partition
    res = partition(hg, k=4, backend="layerwise")

The vertex layers are taken in topological (block) order; each part receives a
contiguous run of whole layers (every filter, channel and reduction vertex of
a layer, plus the fused pooling/activation work; the input channels travel
with the first layer). The split points minimise the largest part's work
*exactly*: ``best[j][i]`` is the smallest possible maximum when the first
``i`` layers form ``j`` parts, ``best[j][i] = min_s max(best[j-1][s],
work(s..i))`` - the classic linear-partition recurrence, O(K n^2) vectorised
over ``s``. Among the optimal splits a second pass picks the one with the
least communication, counting for every split the bytes of the nets whose
layer span crosses it (exact for chains; for skip connections that jump over
a whole part it over-counts, since such a net is charged at every split it
crosses).

``epsilon``, ``seed``, ``preset`` and ``time_limit`` are accepted for the
common backend signature and ignored: the method is exact and deterministic.
"""

from __future__ import annotations

import time

import numpy as np

from hgpart.errors import HgpartError
from hgpart.hypergraph import Hypergraph
from hgpart.partitioners._units import unit_names, vertex_units
from hgpart.partitioners.base import PartitionResult

__all__ = ["run", "split_min_max", "max_parts", "boundary_costs"]


def max_parts(hg: Hypergraph) -> int:
    """The largest K layer-wise can produce: the number of vertex layers."""
    return len(unit_names(hg))


def boundary_costs(hg: Hypergraph, units: np.ndarray, n: int) -> np.ndarray:
    """Bytes of the nets crossing the boundary after unit ``b`` (length ``n - 1``)."""
    if hg.num_nets == 0 or n < 2:
        return np.zeros(max(n - 1, 0))
    pin_units = units[hg.net_pins]
    lo = np.minimum.reduceat(pin_units, hg.net_ptr[:-1])
    hi = np.maximum.reduceat(pin_units, hg.net_ptr[:-1])
    delta = np.zeros(n + 1)
    np.add.at(delta, lo, hg.net_cost)
    np.add.at(delta, hi, -hg.net_cost)
    return np.cumsum(delta)[: n - 1]


def split_min_max(work: np.ndarray, k: int, *, cut_cost: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Exact contiguous split of ``work`` into ``k`` non-empty runs minimising the largest run's sum.

    Returns (part id of every item, optimal maximum). With ``cut_cost`` (cost
    of splitting after item ``b``) the optimal split with the least total cut
    cost is returned.
    """
    w = np.asarray(work, dtype=np.float64)
    n = len(w)
    if not 1 <= k <= n:
        raise ValueError(f"cannot split {n} items into {k} non-empty runs")
    prefix = np.concatenate([[0.0], np.cumsum(w)])
    inf = np.inf
    # seg[s, i] = sum of items s..i-1 (for s < i)
    seg = prefix[None, :] - prefix[:, None]
    valid = np.triu(np.ones((n + 1, n + 1), dtype=bool), k=1)
    best = np.full(n + 1, inf)
    best[1:] = prefix[1:]  # one part: everything so far
    best[0] = inf
    for _ in range(2, k + 1):
        cand = np.where(valid, np.maximum(best[:, None], seg), inf)
        best = cand.min(axis=0)
    opt = float(best[n])
    # second pass: least cut cost among splits whose every run is <= opt
    cost = np.zeros(max(n - 1, 0)) if cut_cost is None else np.asarray(cut_cost, dtype=np.float64)
    tol = opt * 1e-12 + 1e-300
    fits = valid & (seg <= opt + tol)
    # cost of ending a run at item i-1 with another run following = cost[i-1]
    end_cost = np.concatenate([[0.0], cost, [0.0]])  # index i: boundary after item i-1 (i=1..n-1)
    c = np.full(n + 1, inf)
    c[0] = 0.0
    choice = np.zeros((k + 1, n + 1), dtype=np.int64)
    for j in range(1, k + 1):
        cand = np.where(fits, c[:, None], inf)
        arg = cand.argmin(axis=0)
        c_new = cand[arg, np.arange(n + 1)]
        if j < k:
            c_new = c_new + np.where(np.arange(n + 1) < n, end_cost, inf)
        choice[j] = arg
        c = c_new
    if not np.isfinite(c[n]):  # numerical corner: fall back to the pure min-max split
        raise ArithmeticError("no split attains the optimum within tolerance")
    parts = np.empty(n, dtype=np.int64)
    i = n
    for j in range(k, 0, -1):
        s = int(choice[j][i])
        parts[s:i] = j - 1
        i = s
    return parts, opt


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
    names = unit_names(hg)
    n = len(names)
    if k > n:
        raise HgpartError(
            f"layer-wise partitioning cannot make {k} parts from {n} vertex layers",
            where=f"model {hg.model}", fix=f"use K <= {n} or a filter/channel-level method",
        )
    units = vertex_units(hg)
    work = np.bincount(units, weights=hg.vertex_weight, minlength=n)
    unit_part, opt = split_min_max(work, k, cut_cost=boundary_costs(hg, units, n))
    parts = unit_part[units]
    cuts = [names[i] for i in range(n - 1) if unit_part[i] != unit_part[i + 1]]
    return PartitionResult(
        parts=parts,
        backend="layerwise",
        seconds=time.perf_counter() - t0,
        info={"max_work": opt, "last_layer_of_part": cuts + [names[-1]]},
    )
