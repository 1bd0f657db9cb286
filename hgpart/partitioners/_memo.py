"""Per-hypergraph memo for K-independent analysis (a sweep over K partitions the same graph).

Why: ``hgpart compare`` and the benchmarks call a backend once per K on the
same :class:`~hgpart.hypergraph.Hypergraph`; projecting a large fine graph to
its coarse one and analysing its count classes take seconds each and do not
depend on K. Entries live exactly as long as the hypergraph object (weak
reference), so a new graph, even one at the address of a collected one, is
never served a stale result.

The key is the object, not its contents. A ``Hypergraph``'s arrays are
read-only, so they cannot change in place; but a ``Hypergraph`` whose array
attribute is replaced after a memoised call is served the result computed
before. Build a new hypergraph instead of editing one that has been
partitioned, or call :func:`forget` on it after editing.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TypeVar

__all__ = ["memo", "forget"]

T = TypeVar("T")
_CACHE: dict[tuple[int, str], tuple[weakref.ref[object], object]] = {}


def memo(obj: object, key: str, make: Callable[[], T]) -> T:
    """``make()`` computed once per live ``obj`` and ``key``."""
    slot = (id(obj), key)
    hit = _CACHE.get(slot)
    if hit is not None and hit[0]() is obj:
        return hit[1]  # type: ignore[return-value]
    value = make()

    def drop(_ref: weakref.ref[object], s: tuple[int, str] = slot) -> None:
        _CACHE.pop(s, None)

    _CACHE[slot] = (weakref.ref(obj, drop), value)
    return value


def forget(obj: object) -> None:
    """Drop every memoised result of ``obj`` (after changing it in place)."""
    for slot in [s for s, (ref, _) in _CACHE.items() if s[0] == id(obj) and ref() is obj]:
        del _CACHE[slot]
