"""Timing samples and the statistics that turn them into one robust cost.

Usage::

    from hgpart.timing import Clock, SampleSet, Statistic
    s = SampleSet()
    for _ in range(8):
        s.add(Clock.PROCESS_CPU.measure(fn, calls=4))
    s.estimate(Statistic.LOW_HALF)   # seconds per call
    s.rel_ci(Statistic.LOW_HALF)     # relative 95 % confidence half-width

Why: on a shared machine other processes preempt ours, so a wall-clock sample
is the true cost plus a random delay that is never negative. Process CPU time
leaves the time our threads sat preempted out; the low half of the samples
(or their minimum) leaves the delayed samples out. This module is plain
Python (no TensorFlow), so it is tested on synthetic samples.
"""

from __future__ import annotations

import enum
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Clock", "Statistic", "SampleSet", "t_quantile"]


class Clock(enum.Enum):
    """What a sample measures."""

    WALL = "wall"  # elapsed time (time.perf_counter)
    PROCESS_CPU = "process_cpu"  # CPU time of all the process's threads (time.process_time)

    def now(self) -> float:
        return time.perf_counter() if self is Clock.WALL else time.process_time()

    def measure(self, fn: Callable[[], Any], *, calls: int = 1) -> float:
        """Seconds per call of ``fn`` over ``calls`` back-to-back calls."""
        t0 = self.now()
        for _ in range(calls):
            fn()
        return (self.now() - t0) / calls


class Statistic(enum.Enum):
    """How the samples of one layer become its cost."""

    MEDIAN = "median"
    MIN = "min"
    LOW_HALF = "low_half"  # mean of the lowest half of the samples: a minimum that is less noisy


# two-sided 95 % Student t quantiles by degrees of freedom (1..30); beyond, the normal 1.96 is close enough
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042)


def t_quantile(dof: int) -> float:
    """Two-sided 95 % Student t quantile for ``dof`` degrees of freedom."""
    if dof < 1:
        return math.inf
    return _T95[dof - 1] if dof <= len(_T95) else 1.96


@dataclass
class SampleSet:
    """The timings (seconds per call) of one callable, in the order they were taken."""

    samples: list[float] = field(default_factory=list)

    def add(self, seconds: float) -> None:
        self.samples.append(float(seconds))

    def __len__(self) -> int:
        return len(self.samples)

    def kept(self, stat: Statistic) -> list[float]:
        """The samples ``stat`` rests on: all of them for the median, the lowest half otherwise."""
        ordered = sorted(self.samples)
        if stat is Statistic.MEDIAN or len(ordered) < 2:
            return ordered
        return ordered[: max(2, math.ceil(len(ordered) / 2))]

    def estimate(self, stat: Statistic) -> float:
        if not self.samples:
            return 0.0
        if stat is Statistic.MEDIAN:
            return float(statistics.median(self.samples))
        if stat is Statistic.MIN:
            return min(self.samples)
        return float(statistics.fmean(self.kept(stat)))

    def rel_ci(self, stat: Statistic) -> float:
        """Relative 95 % confidence half-width of the mean of the kept samples (inf below two samples).

        For the minimum and the low half this treats the kept samples as one
        sample of the undisturbed cost: it says how well that cost is pinned
        down, which is what a partitioner needs to know.
        """
        kept = self.kept(stat)
        if len(kept) < 2:
            return math.inf
        mean = statistics.fmean(kept)
        if mean <= 0:
            return math.inf
        return t_quantile(len(kept) - 1) * statistics.stdev(kept) / math.sqrt(len(kept)) / mean

    def max_over_min(self, stat: Statistic) -> float:
        """Largest over smallest kept sample (1.0 for one sample)."""
        kept = self.kept(stat)
        return kept[-1] / kept[0] if kept and kept[0] > 0 else math.inf
