"""Profiles side by side: per-layer ratios between two profiles, and between identical layers of one.

Usage::

    cmp = compare_profiles(Profile.load("a.json"), Profile.load("b.json"), min_share=0.02)
    cmp.median, cmp.worst, cmp.over(1.10)
    shape_twin_ratio(prof, min_share=0.02)   # worst max/min among layers of identical shape

Why: a profile is only worth partitioning on if measuring again gives the
same weights. Two profiles of one model, made back to back, should agree
layer by layer, and layers that do identical work (same kind, shapes,
parameters and FLOPs) should cost the same within one profile. Layers below
``min_share`` of the step are left out: they barely move a partition, and
their relative noise is the largest.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from hgpart.errors import HgpartError
from hgpart.layergraph import LayerGraph
from hgpart.profile import Profile

__all__ = ["LayerRatio", "ProfileComparison", "compare_profiles", "ratios_across", "shape_twin_ratio",
           "significant_layers"]


@dataclass(frozen=True)
class LayerRatio:
    """One layer's work in two profiles and the larger over the smaller."""

    name: str
    a_ms: float
    b_ms: float

    @property
    def ratio(self) -> float:
        lo, hi = sorted((self.a_ms, self.b_ms))
        return hi / lo if lo > 0 else float("inf")


@dataclass(frozen=True)
class ProfileComparison:
    """Per-layer ratios (larger over smaller) of the layers both profiles time and that pass ``min_share``."""

    rows: tuple[LayerRatio, ...]
    min_share: float

    @property
    def median(self) -> float:
        return float(statistics.median(r.ratio for r in self.rows)) if self.rows else 1.0

    @property
    def worst(self) -> LayerRatio | None:
        return max(self.rows, key=lambda r: r.ratio) if self.rows else None

    def over(self, limit: float) -> list[LayerRatio]:
        return [r for r in self.rows if r.ratio > limit]


def significant_layers(prof: Profile, min_share: float) -> list[str]:
    """Layers with positive work and at least ``min_share`` of the profile's sum of layers."""
    work = prof.work()
    total = sum(work.values())
    return [name for name, w in work.items() if w > 0 and w >= min_share * total]


def compare_profiles(a: Profile, b: Profile, *, min_share: float = 0.0, scale_free: bool = False) -> ProfileComparison:
    """Per-layer ratios between two measured profiles of the same layer graph.

    ``scale_free`` divides each profile's work by its sum of layers first: the
    relative weights, which is what a partitioner balances, so a machine that
    was uniformly slower during one profile does not count.
    """
    for p in (a, b):
        if p.mode != "measured":
            raise HgpartError(f"profile of {p.model} is {p.mode}, not measured", where="--compare",
                              fix="compare two measured profiles")
    if a.fingerprint != b.fingerprint:
        raise HgpartError(f"the profiles are of different layer graphs ({a.model} {a.fingerprint}, "
                          f"{b.model} {b.fingerprint})", where="--compare", fix="compare profiles of one model")
    if a.batch_size != b.batch_size:
        raise HgpartError(f"the profiles are at batch sizes {a.batch_size} and {b.batch_size}", where="--compare",
                          fix="compare profiles made at one batch size")
    keep = set(significant_layers(a, min_share)) | set(significant_layers(b, min_share))
    wa, wb = a.work(), b.work()
    if scale_free:
        sa, sb = sum(wa.values()) or 1.0, sum(wb.values()) or 1.0
        wa, wb = {k: v / sa for k, v in wa.items()}, {k: v / sb for k, v in wb.items()}
    rows = tuple(LayerRatio(c.name, wa[c.name], wb[c.name]) for c in a.layers
                 if c.name in keep and wa[c.name] > 0 and wb[c.name] > 0)
    return ProfileComparison(rows=rows, min_share=min_share)


def ratios_across(profiles: list[Profile], *, min_share: float = 0.0, scale_free: bool = False) -> dict[str, float]:
    """Each layer's max/min work across several profiles of one model (the worst of every pair)."""
    worst: dict[str, float] = {}
    for i, a in enumerate(profiles):
        for b in profiles[i + 1:]:
            for row in compare_profiles(a, b, min_share=min_share, scale_free=scale_free).rows:
                worst[row.name] = max(worst.get(row.name, 1.0), row.ratio)
    return worst


def _shape_key(graph: LayerGraph, name: str) -> tuple[object, ...]:
    layer = graph.layer(name)
    return (layer.kind, layer.keras_class, layer.input_shapes, layer.output_shape, layer.params, layer.flops)


def shape_twin_ratio(prof: Profile, *, min_share: float = 0.0) -> tuple[float, tuple[str, str] | None]:
    """Worst max/min work among layers of identical shape, and the two layers (1.0, None if no twins)."""
    if prof.graph is None:
        return 1.0, None
    graph = LayerGraph.from_dict(prof.graph)
    work = prof.work()
    groups: dict[tuple[object, ...], list[str]] = defaultdict(list)
    for name in significant_layers(prof, min_share):
        groups[_shape_key(graph, name)].append(name)
    worst, pair = 1.0, None
    for names in groups.values():
        if len(names) < 2:
            continue
        lo, hi = min(names, key=work.__getitem__), max(names, key=work.__getitem__)
        if work[hi] / work[lo] > worst:
            worst, pair = work[hi] / work[lo], (hi, lo)
    return worst, pair
