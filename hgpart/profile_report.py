"""What ``hgpart profile`` prints about a profile's quality, and ``hgpart profile --compare``'s table.

Usage::

    print_quality(prof, console=Console())
    print_comparison(compare_profiles(a, b, min_share=0.02), "a.json", "b.json", console=Console())

Why: a profile that does not repeat makes partitioners optimise noise, so
every measured profile says how well it is pinned down: the layers whose
confidence half-width is above the target, the worst of them, the worst
ratio between layers of identical shape, and the sum of the layers against a
measured whole training step.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from hgpart.profile import Profile
from hgpart.profile_compare import ProfileComparison, shape_twin_ratio, significant_layers

__all__ = ["QualitySummary", "print_comparison", "print_quality", "STEP_TOLERANCE", "COMPARE_LIMIT"]

STEP_TOLERANCE = 0.15  # the sum of layers should be within this fraction of a whole step
COMPARE_LIMIT = 1.10  # two profiles agree on a layer when its max/min is at most this


@dataclass(frozen=True)
class QualitySummary:
    """The figures of :func:`print_quality`, for tests and benchmarks."""

    timed: int
    above_target: list[str]
    above_target_significant: list[str]  # those of at least ``min_share`` of the sum of layers
    worst_layer: str | None
    worst_spread: float | None
    twin_ratio: float
    twin_pair: tuple[str, str] | None
    step_ratio: float | None  # sum of layers / whole step

    @staticmethod
    def of(prof: Profile, *, min_share: float = 0.02) -> QualitySummary:
        target = prof.quality.target if prof.quality else 0.05
        spreads = {c.name: c.spread for c in prof.layers if c.spread is not None and c.total_ms > 0}
        worst = max(spreads, key=lambda n: spreads[n] or 0.0) if spreads else None
        twin, pair = shape_twin_ratio(prof, min_share=min_share)
        step = prof.quality.step_ms if prof.quality else None
        above = [n for n, s in spreads.items() if s is not None and s > target]
        significant = set(significant_layers(prof, min_share))
        return QualitySummary(
            timed=len(spreads), above_target=above, above_target_significant=[n for n in above if n in significant],
            worst_layer=worst, worst_spread=spreads[worst] if worst else None, twin_ratio=twin, twin_pair=pair,
            step_ratio=prof.layer_sum_ms / step if step else None)


def print_quality(prof: Profile, *, console: Console, min_share: float = 0.02) -> QualitySummary:
    """Print the setup and quality lines of a measured profile; return their figures."""
    q = QualitySummary.of(prof, min_share=min_share)
    target = prof.quality.target if prof.quality else 0.05
    console.print(f"setup: {prof.setup.describe()}", highlight=False)
    if q.worst_layer is None:
        console.print("spread: not recorded (a profile made before spreads were recorded)", highlight=False)
    else:
        rounds = f" after {prof.quality.rounds} rounds" if prof.quality else ""
        console.print(f"spread: {len(q.above_target)} of {q.timed} timed layers above the {target:.0%} target{rounds} "
                      f"({len(q.above_target_significant)} of them >= {min_share:.0%} of the step); "
                      f"worst {q.worst_layer} +-{(q.worst_spread or 0.0):.1%}", highlight=False)
    if q.twin_pair is not None:
        console.print(f"identical-shape layers (>= {min_share:.0%} of the step): worst max/min {q.twin_ratio:.3f} "
                      f"({q.twin_pair[0]} / {q.twin_pair[1]})", highlight=False)
    if q.step_ratio is not None and prof.quality is not None and prof.quality.step_ms:
        ok = "within" if abs(q.step_ratio - 1.0) <= STEP_TOLERANCE else "NOT within"
        console.print(f"sum of layers {prof.layer_sum_ms:,.1f} ms / whole training step {prof.quality.step_ms:,.1f} ms "
                      f"= {q.step_ratio:.3f} ({ok} {STEP_TOLERANCE:.0%})", highlight=False)
    return q


def print_comparison(cmp: ProfileComparison, a: str, b: str, *, console: Console,
                     scale_free: ProfileComparison | None = None) -> None:
    """Per-layer work in both profiles and the larger over the smaller; then median, worst, layers over 1.10
    (and the same figures of ``scale_free``, the comparison of the relative weights, when given)."""
    table = Table(title=f"{a} vs {b}: layers of at least {cmp.min_share:.0%} of the step")
    for col, justify in [("layer", "left"), ("A ms", "right"), ("B ms", "right"), ("max/min", "right")]:
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in cmp.rows:
        flag = "[red]" if r.ratio > COMPARE_LIMIT else ""
        table.add_row(r.name, f"{r.a_ms:,.3f}", f"{r.b_ms:,.3f}", f"{flag}{r.ratio:.3f}")
    console.print(table)
    worst = cmp.worst
    over = cmp.over(COMPARE_LIMIT)
    console.print(f"{len(cmp.rows)} layers: median max/min {cmp.median:.3f}, worst "
                  f"{f'{worst.ratio:.3f} ({worst.name})' if worst else '-'}, {len(over)} over {COMPARE_LIMIT:.2f}"
                  f"{': ' + ', '.join(r.name for r in over) if over else ''}", highlight=False)
    if scale_free is not None and scale_free.worst is not None:
        console.print(f"scale-free (each profile over its sum of layers): median max/min {scale_free.median:.3f}, "
                      f"worst {scale_free.worst.ratio:.3f} ({scale_free.worst.name}), "
                      f"{len(scale_free.over(COMPARE_LIMIT))} over {COMPARE_LIMIT:.2f}", highlight=False)
