"""Validate a hypergraph and scale its float weights to the 32-bit integers partitioners take.

Usage::

    from hgpart.partitioners.scaling import scale_hypergraph
    sh = scale_hypergraph(hg, k=4, epsilon=0.1)
    sh.vertex_weight, sh.net_cost          # int64 arrays, every value in [1, 2**31)
    km1_bytes = backend_km1 * sh.cost_scale  # the backend's objective back in bytes

Why: KaHyPar and Mt-KaHyPar store vertex and net weights as ``int32`` and sum
them into ``int32`` block weights and objectives; KaHyPar also calls
``exit()`` on a zero weight or an out-of-range pin. So before any backend
runs we check the structure, then

* **vertex weights** (milliseconds or MFLOP) are scaled so the total is about
  :data:`TARGET_TOTAL_WEIGHT` (fine enough that rounding each vertex to an
  integer moves no block weight by more than a tiny fraction, so the backend's
  epsilon means the same as ours), each vertex at least 1 because the
  backends refuse weight 0; the largest block weight the backend may compute,
  ``(1 + epsilon) * total / k`` plus one vertex, stays far below ``2**31``;
* **net costs** (bytes) are divided by their greatest common divisor (for a
  CNN that is ``B * d`` times a common spatial factor, which is exact), and
  only if the worst-case objective ``sum(cost * (min(k, |pins|) - 1))`` still
  does not fit in ``int32`` are they coarsened further by rounding (then
  :attr:`ScaledHypergraph.cost_exact` is False).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hgpart.errors import HgpartError
from hgpart.hypergraph import Hypergraph

__all__ = ["ScaledHypergraph", "scale_hypergraph", "validate_hypergraph", "INT32_MAX", "TARGET_TOTAL_WEIGHT"]

INT32_MAX = 2**31 - 1
#: total integer vertex weight we aim for: fine enough for balance, far from int32 overflow
TARGET_TOTAL_WEIGHT = 10**8
#: the worst-case objective must stay below this (headroom for the backends' gain arithmetic)
OBJECTIVE_LIMIT = 2**30


@dataclass(frozen=True)
class ScaledHypergraph:
    """Integer weights for a backend plus the factors that convert back.

    ``weight_scale`` is integer units per work unit (``int ~ float * weight_scale``);
    ``cost_scale`` is bytes per integer cost unit (``bytes ~ int * cost_scale``,
    exact when ``cost_exact``).
    """

    num_vertices: int
    num_nets: int
    net_ptr: np.ndarray
    net_pins: np.ndarray
    vertex_weight: np.ndarray
    net_cost: np.ndarray
    weight_scale: float
    cost_scale: float
    cost_exact: bool

    @property
    def num_pins(self) -> int:
        return int(self.net_pins.shape[0])


def validate_hypergraph(hg: Hypergraph) -> None:
    """Structural checks a backend would otherwise punish with a crash or ``exit()``."""
    nv, nn = hg.num_vertices, hg.num_nets
    where = f"{hg.grain}-grain hypergraph of {hg.model}"
    fix = "this is a bug in the hypergraph builder; please report it with the model"
    if nv < 1:
        raise HgpartError("the hypergraph has no vertices", where=where, fix=fix)
    ptr = np.asarray(hg.net_ptr)
    if ptr.shape != (nn + 1,) or ptr[0] != 0 or ptr[-1] != hg.num_pins:
        raise HgpartError("net pointer array is inconsistent with the pin array", where=where, fix=fix)
    sizes = np.diff(ptr)
    if nn and sizes.min() < 1:
        raise HgpartError(f"net {int(np.argmin(sizes))} has no pins", where=where, fix=fix)
    pins = np.asarray(hg.net_pins)
    if pins.size and (pins.min() < 0 or pins.max() >= nv):
        raise HgpartError(f"pin ids span {int(pins.min())}..{int(pins.max())}, vertices are 0..{nv - 1}",
                          where=where, fix=fix)
    if pins.size:
        keys = np.repeat(np.arange(nn, dtype=np.int64), sizes) * nv + pins.astype(np.int64)
        # the builder emits pins sorted within each net: then strictly increasing keys prove uniqueness in O(P)
        if not bool(np.all(keys[1:] > keys[:-1])) and np.unique(keys).size != keys.size:
            raise HgpartError("a net lists the same vertex twice", where=where, fix=fix)
    w = np.asarray(hg.vertex_weight, dtype=np.float64)
    c = np.asarray(hg.net_cost, dtype=np.float64)
    if not np.isfinite(w).all() or (w < 0).any():
        raise HgpartError("vertex weights must be finite and non-negative", where=where,
                          fix="check the profile for negative or NaN times")
    if c.shape != (nn,) or not np.isfinite(c).all() or (c < 0).any():
        raise HgpartError("net costs must be finite and non-negative, one per net", where=where, fix=fix)


def _scale_weights(w: np.ndarray, *, k: int, epsilon: float) -> tuple[np.ndarray, float]:
    nv = w.size
    total = float(w.sum())
    # the backend's max block weight is about (1 + eps) * total / k + max vertex; keep 8x headroom
    target = min(float(TARGET_TOTAL_WEIGHT), INT32_MAX / (8.0 * (1.0 + epsilon)))
    if nv > target / 4:
        raise HgpartError(f"{nv} vertices are too many for 32-bit vertex weights",
                          fix="group channels with --group")
    if total <= 0:  # no work at all: unit weights balance vertex counts
        return np.ones(nv, dtype=np.int64), 1.0
    scale = target / total
    out = np.maximum(1, np.rint(w * scale)).astype(np.int64)
    return out, scale


def _scale_costs(c: np.ndarray, sizes: np.ndarray, *, k: int) -> tuple[np.ndarray, float, bool]:
    if c.size == 0:
        return np.zeros(0, dtype=np.int64), 1.0, True
    ci = np.rint(c).astype(np.int64)
    exact = bool(np.all(ci == c)) and bool(np.all(ci >= 1))
    if exact:
        g = int(np.gcd.reduce(ci))
        units = ci // g
        worst = int(np.dot(units, np.minimum(k, sizes) - 1))
        if worst < OBJECTIVE_LIMIT and units.max() <= INT32_MAX:
            return units, float(g), True
    # coarsen: bytes per unit chosen so the worst case fits, every net costs at least 1
    worst_bytes = float(np.dot(c, np.minimum(k, sizes) - 1))
    per_unit = worst_bytes / (OBJECTIVE_LIMIT / 2) if worst_bytes > 0 else 1.0
    units = np.maximum(1, np.rint(c / per_unit)).astype(np.int64)
    while int(np.dot(units, np.minimum(k, sizes) - 1)) >= OBJECTIVE_LIMIT:
        per_unit *= 2
        units = np.maximum(1, np.rint(c / per_unit)).astype(np.int64)
    return units, per_unit, False


def scale_hypergraph(hg: Hypergraph, *, k: int, epsilon: float) -> ScaledHypergraph:
    """Validate ``hg`` and return integer weights safe for the 32-bit backends (see module docstring)."""
    validate_hypergraph(hg)
    w, ws = _scale_weights(np.asarray(hg.vertex_weight, dtype=np.float64), k=k, epsilon=epsilon)
    sizes = np.diff(np.asarray(hg.net_ptr))
    c, cs, exact = _scale_costs(np.asarray(hg.net_cost, dtype=np.float64), sizes, k=k)
    assert w.min() >= 1 and int(w.sum()) < INT32_MAX and (c.size == 0 or c.min() >= 1)
    if not math.isfinite(cs) or cs <= 0:
        raise HgpartError("net costs cannot be scaled to integers", where=f"hypergraph of {hg.model}")
    return ScaledHypergraph(
        num_vertices=hg.num_vertices,
        num_nets=hg.num_nets,
        net_ptr=np.asarray(hg.net_ptr, dtype=np.int64),
        net_pins=np.asarray(hg.net_pins, dtype=np.int64),
        vertex_weight=w,
        net_cost=c,
        weight_scale=ws,
        cost_scale=cs,
        cost_exact=exact,
    )
