"""Optimality certificate of a coarse-grain placement: a proven lower bound on km1 and the gap to it.

Usage::

    from hgpart.partitioners.certificate import certify
    cert = certify(hg, k=8, epsilon=0.1, volume_bytes=res.objective_bytes, max_over_avg=1.09,
                   known_bound=res.lower_bound_bytes, time_limit=30.0)
    cert.status, cert.lower_bound_bytes, cert.gap, cert.line(res.objective_bytes)

Why one module: ``hgpart partition``, ``hgpart compare`` and
``benchmarks/partition_quality.py`` print the same certificate beside a
coarse result from *any* backend, so they must agree on when a bound
applies and what the gap means.

* The bound is the exact count program's proven bound
  (:func:`hgpart.partitioners.exact.coarse_lower_bound`) at the imbalance the
  placement actually reached, ``max(epsilon, Max/Avg - 1)``: a placement
  that overshoots epsilon (layer-wise, fill-in-order) is bounded over the
  looser problem it solved, never compared with a tighter one. That
  imbalance is rounded *up* to 1e-4 so that nearby results share one solve
  (a bound for a looser balance is still a bound).
* A backend that proved its own bound (``exact``, ``auto``) passes it as
  ``known_bound`` and nothing is solved again.
* Fine-grain placements may split filters, so no count bound applies; the
  certificate says so instead of printing a number.
* ``gap = volume / bound - 1``: "within 1.5% of the optimum" means the
  placement is at most 1.5% above the best possible one.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

from hgpart.hypergraph import Hypergraph
from hgpart.partitioners._memo import memo
from hgpart.partitioners.exact import coarse_lower_bound

__all__ = ["Certificate", "certify", "not_computed"]

MIB = float(2**20)


@dataclass
class Certificate:
    """What a placement's volume is proven to be within, or why nothing is proven."""

    status: str  # "ok" | "not computed" | "not computable"
    reason: str = ""
    lower_bound_bytes: float | None = None
    gap: float | None = None  # volume / bound - 1 (inf when the bound is 0 and the volume is not)
    epsilon: float | None = None  # the imbalance the bound holds for
    seconds: float = 0.0  # time spent proving it here (0 when the backend supplied it)
    time_limit: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if d["gap"] is not None and math.isinf(d["gap"]):
            d["gap"] = None  # JSON has no infinity; the status and bound still say it
        return d

    def line(self, volume_bytes: float) -> str:
        """One human sentence for the terminal."""
        if self.status != "ok" or self.lower_bound_bytes is None:
            return f"lower bound: {self.status} ({self.reason})"
        within = "an unbounded gap" if self.gap is None or math.isinf(self.gap) else f"{self.gap:.1%}"
        return (f"proven lower bound {self.lower_bound_bytes / MIB:,.3f} MiB; this placement "
                f"{volume_bytes / MIB:,.3f} MiB is within {within} of the optimum")

    def cells(self) -> tuple[str, str]:
        """(bound MiB, gap) as short table cells ("-" when nothing is proven)."""
        if self.status != "ok" or self.lower_bound_bytes is None:
            return "-", "-"
        gap = "inf" if self.gap is None or math.isinf(self.gap) else f"{self.gap:.1%}"
        return _mib(self.lower_bound_bytes / MIB), gap


def _mib(v: float) -> str:
    return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.1f}"


def not_computed(reason: str) -> Certificate:
    return Certificate(status="not computed", reason=reason)


def _gap(volume: float, bound: float) -> float:
    if bound > 0:
        return max(volume / bound - 1.0, 0.0)
    return 0.0 if volume <= 0 else math.inf


def certify(
    hg: Hypergraph,
    *,
    k: int,
    epsilon: float,
    volume_bytes: float,
    max_over_avg: float,
    time_limit: float,
    known_bound: float | None = None,
) -> Certificate:
    """The certificate of one placement of ``hg`` (see the module docstring)."""
    if hg.grain != "coarse":
        return not_computed("fine placements may split filters; no count bound applies")
    reached = max(float(epsilon), float(max_over_avg) - 1.0)
    if known_bound is not None:
        lb = min(float(known_bound), float(volume_bytes))
        return Certificate("ok", lower_bound_bytes=lb, gap=_gap(volume_bytes, lb), epsilon=reached)
    eps_key = math.ceil(reached * 1e4 - 1e-9) / 1e4
    t0 = time.perf_counter()
    found = memo(hg, f"lower_bound:{k}:{eps_key:.4f}:{time_limit:g}",
                 lambda: coarse_lower_bound(hg, k, eps_key, time_limit)[0])
    seconds = time.perf_counter() - t0
    if found is None:
        return Certificate("not computable", reason="the filters of a layer are not interchangeable here",
                           epsilon=reached)
    lb = min(float(found), float(volume_bytes))  # the solver's bound, to its tolerance
    return Certificate("ok", lower_bound_bytes=lb, gap=_gap(volume_bytes, lb), epsilon=eps_key,
                       seconds=round(seconds, 3), time_limit=time_limit)
