"""Per-hypergraph memo for K-independent analysis (a sweep over K partitions the same graph).

Why: ``hgpart compare`` and the benchmarks call a backend once per K on the
same :class:`~hgpart.hypergraph.Hypergraph`; projecting VGG16's fine graph to
its coarse one and analysing its count classes take seconds each and do not
depend on K. Entries live exactly as long as the hypergraph (weak reference),
so a new or modified graph is never served a stale result.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
_CACHE: dict[tuple[int, str], tuple[weakref.ref, object]] = {}


def memo(obj: object, key: str, make: Callable[[], T]) -> T:
    """``make()`` computed once per live ``obj`` and ``key``."""
    slot = (id(obj), key)
    hit = _CACHE.get(slot)
    if hit is not None and hit[0]() is obj:
        return hit[1]  # type: ignore[return-value]
    value = make()
    _CACHE[slot] = (weakref.ref(obj, lambda _ref, s=slot: _CACHE.pop(s, None)), value)
    return value
