"""Contiguous chain placements of a count model, optimal among their kind by dynamic programming.

Usage::

    from hgpart.partitioners.counts import analyze
    from hgpart.partitioners.chain import chain_counts
    counts, mib = chain_counts(analyze(hg), k=64, epsilon=0.1)   # (classes x K) filter counts, km1 in MiB

Why: at large K the exact count program needs minutes before it holds any
placement, and the general partitioners lose the layer structure. A CNN is
nearly a chain, and good placements look like one: lay the filters of every
layer out in topological order and cut that sequence into at most K
contiguous pieces, each within the balance ``(1 + eps) * total / K``. A
layer may be cut anywhere, so heavy layers spread over several parts next to
their neighbours. In the count model the km1 of such a placement is a sum of
one term per piece (:class:`~hgpart.partitioners.counts.PartCost`, the same per-part cost the branch
and price of :mod:`hgpart.partitioners.branch_price` prices), so the best set of
cut points is a shortest path: ``best[j][p] = min_{p'} best[j-1][p'] +
cost(p', p)``. Cut points are every layer boundary plus a grid inside each
layer fine enough (a ``1/steps`` of a part's capacity) that pieces can be
filled to within a few percent; only cut pairs within one part's capacity
are ever evaluated, so even K = 128 on a large model takes about a second.

The result is a placement (an upper bound) for any model the count program
accepts; its optimality is only among contiguous placements on that grid.
"""

from __future__ import annotations

import numpy as np

from hgpart.partitioners.counts import CoarseClasses, PartCost

__all__ = ["chain_counts"]


def _cut_points(model: CoarseClasses, order: np.ndarray, cap: float, steps: int) -> np.ndarray:
    """Prefix count vectors (points x classes) of the candidate cuts, in sequence order."""
    n = model.sizes
    C = len(n)
    rows = [np.zeros(C)]
    done = np.zeros(C)
    for c in order:
        w = float(model.weight[c])
        per = max(1, int(np.floor(cap / steps / w))) if w > 0 else int(n[c])
        js = np.unique(np.r_[np.arange(per, int(n[c]), per), int(n[c])])
        for j in js:
            r = done.copy()
            r[c] = j
            rows.append(r)
        done[c] = n[c]
    return np.array(rows)


def chain_counts(model: CoarseClasses, k: int, epsilon: float, *, steps: int = 40) -> tuple[np.ndarray, float] | None:
    """Best contiguous placement (counts, classes x K) and its km1 in MiB; None if none fits the balance."""
    C, K = len(model.members), int(k)
    cap = (1.0 + epsilon) * model.total_weight / K
    # topological order of classes: by their first vertex
    order = np.argsort([int(m.min()) for m in model.members], kind="stable")
    X = _cut_points(model, order, cap, steps)
    wt = X @ model.weight
    P = len(X)
    piece_cost = PartCost.of(model)
    best = np.full((K + 1, P), np.inf)
    best[0, 0] = 0.0
    arg = np.zeros((K + 1, P), dtype=np.int64)
    lo = 0
    for p in range(1, P):
        while wt[p] - wt[lo] > cap * (1.0 + 1e-12):
            lo += 1
        if lo >= p:
            continue  # one step of this layer alone exceeds a part
        cost = piece_cost(X[p][None, :] - X[lo:p])
        tot = best[:-1, lo:p] + cost[None, :]
        i = np.argmin(tot, axis=1)
        best[1:, p] = tot[np.arange(K), i]
        arg[1:, p] = lo + i
    j = int(np.argmin(best[:, P - 1]))
    if not np.isfinite(best[j, P - 1]):
        return None
    counts = np.zeros((C, K), dtype=np.int64)
    p = P - 1
    q = 0
    while j > 0:
        pp = int(arg[j, p])
        counts[:, q] = np.rint(X[p] - X[pp]).astype(np.int64)
        q += 1
        p, j = pp, j - 1
    return counts, float(best[int(np.argmin(best[:, P - 1])), P - 1])
