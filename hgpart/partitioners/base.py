"""What every partitioner backend returns and the signature it implements; imports no backend.

Usage::

    from hgpart.partitioners.base import Backend, PartitionResult

    def run(hg, *, k, epsilon, seed, preset, time_limit, threads) -> PartitionResult:
        ...                                  # a backend module: satisfies Backend

Why a module of its own: the package's ``__init__`` loads backends by name,
and backends (and ``auto``, which combines them) need the result type. With
the type here, backends import this module and never the package's
``__init__``, so there is no import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from hgpart.hypergraph import Hypergraph

__all__ = ["PartitionResult", "Backend", "MemoryCap"]


@dataclass
class PartitionResult:
    """What a backend returns: parts per vertex plus provenance."""

    parts: np.ndarray
    backend: str
    seconds: float
    preset: str = ""
    backend_objective: float | None = None  # the backend's own km1 figure, in its (scaled) units
    objective_scale: float = 1.0  # bytes per backend cost unit
    lower_bound_bytes: float | None = None  # proven lower bound on km1 (exact backends)
    info: dict[str, Any] = field(default_factory=dict)
    objective_bytes: float = 0.0  # filled by partition(): our own km1 in bytes


@dataclass(frozen=True)
class MemoryCap:
    """A per-part memory limit for the backends that take one as a constraint (the exact program).

    ``vertex_bytes`` is what each vertex brings to its part (:func:`hgpart.memory.vertex_memory`), ``cap``
    the most a part may hold, and ``received_scale`` the bytes a part keeps per byte of net cost it receives
    (:func:`hgpart.memory.received_scale`; 0: received maps not counted).
    """

    vertex_bytes: np.ndarray
    cap: float
    received_scale: float = 0.0


class Backend(Protocol):
    """A backend module: one ``run`` with this signature, deterministic for a seed unless documented."""

    def run(
        self, hg: Hypergraph, *, k: int, epsilon: float, seed: int, preset: str | None, time_limit: float | None,
        threads: int | None = None,
    ) -> PartitionResult:
        """Parts of ``hg``'s vertices in ``k`` parts; ``threads``: cores the backend may use (None: default)."""
        ...
