"""Cover a fine-grain kernel mask with a few dense rectangles, so a part convolves only what it owns."""

from __future__ import annotations

import numpy as np

__all__ = ["rectangles"]


def rectangles(mask: np.ndarray, *, max_rects: int = 4, waste: float = 0.05,
               max_patterns: int = 64) -> list[tuple[np.ndarray, np.ndarray]]:
    """Cover the owned entries of a fine kernel ``mask`` (channels x filters) with few dense rectangles.

    Filters with the same channel set form one exact rectangle (executed MACs = assigned MACs). Rectangles are
    then merged greedily, cheapest first (merging ``a`` and ``b`` costs ``|Sa u Sb|(|Ga|+|Gb|) - |Sa||Ga| -
    |Sb||Gb|`` wasted MACs), while there are more than ``max_rects`` or a merge wastes at most ``waste`` of the
    part's assigned MACs: each rectangle is one more convolution (plus an input gather), so tiny savings are not
    worth an op. More than ``max_patterns`` distinct channel sets (e.g. random placements) -> one bounding box.
    Returns ``(rows, cols)`` index pairs into the mask; every column appears in exactly one rectangle.
    """
    c, f = mask.shape
    used = np.flatnonzero(mask.any(axis=1))
    if f == 0 or used.size == 0:
        return [(np.arange(c), np.arange(f))]
    pats, inv = np.unique(mask.T, axis=0, return_inverse=True)
    inv = np.asarray(inv).ravel()
    if len(pats) > max_patterns:
        return [(used, np.arange(f))]
    sets = pats.astype(np.int64)  # (n, C) channel sets
    sizes = np.bincount(inv, minlength=len(pats)).astype(np.int64)  # filters per set
    members = [np.flatnonzero(inv == g) for g in range(len(pats))]
    total = float(mask.sum())
    while len(members) > 1:
        nch = sets.sum(axis=1)
        union = nch[:, None] + nch[None, :] - sets @ sets.T
        cost = union * (sizes[:, None] + sizes[None, :]) - (nch * sizes)[:, None] - (nch * sizes)[None, :]
        np.fill_diagonal(cost, np.iinfo(np.int64).max)
        a, b = np.unravel_index(int(np.argmin(cost)), cost.shape)
        if len(members) <= max_rects and cost[a, b] > waste * total:
            break
        a, b = min(a, b), max(a, b)
        sets[a] = np.maximum(sets[a], sets[b])
        sizes[a] += sizes[b]
        members[a] = np.concatenate([members[a], members[b]])
        sets, sizes = np.delete(sets, b, axis=0), np.delete(sizes, b)
        del members[b]
    return [(np.flatnonzero(sets[g]), np.sort(members[g])) for g in range(len(members))]
