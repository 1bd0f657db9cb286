"""Shared helpers of the baseline partitioners: layer units of a hypergraph.

A *unit* is everything one vertex layer owns: its filter block (coarse) or its
channel and reduction blocks (fine). The input channels carry no work of their
own and belong to the first vertex layer's unit, so a layer-wise split never
separates the input from the layer that reads it.
"""

from __future__ import annotations

import numpy as np

from hgpart.hypergraph import Hypergraph

__all__ = ["vertex_units", "unit_names"]


def unit_names(hg: Hypergraph) -> list[str]:
    """Names of the vertex layers in block (topological) order."""
    names: list[str] = []
    for b in hg.blocks:
        if b.role != "input" and (not names or names[-1] != b.layer):
            names.append(b.layer)
    return names


def vertex_units(hg: Hypergraph) -> np.ndarray:
    """Unit index (0-based, in topological order) of every vertex."""
    out = np.zeros(hg.num_vertices, dtype=np.int64)
    index: dict[str, int] = {}
    for b in hg.blocks:
        if b.role == "input":
            out[b.start : b.stop] = 0
            continue
        if b.layer not in index:
            index[b.layer] = len(index)
        out[b.start : b.stop] = index[b.layer]
    return out
