"""What a placement's split op structure costs without any transfer: its training step with every part on one device.

Usage::

    from hgpart.runtime.splitbench import SplitRequest, measure_split_costs
    with open_local(1, cores=[0]) as ds:
        costs = measure_split_costs([SplitRequest(pl, micro_batches=2)], ds, batch_size=64)
    costs[0].factor                      # the placement's step over the unsplit model's, same batch and micro-batches

Why: the simulator charges each part the profiled layers' work in proportion to the vertices it holds, as if a
layer split over parts cost what the whole layer costs. The runtime runs a split layer as several smaller ops plus
channel selections, concatenations and partial sums (:mod:`hgpart.runtime.partitioned`), which cost more on the
same core. This builds each placement's training step exactly as the runtime does (:class:`TrainStep` over a
:class:`PlacedModel`, Adam) with all its parts on ONE device, so that nothing crosses between devices, and the same
model's unsplit step (one part) at the same batch size and micro-batches, and times them interleaved: ``reps``
rounds of ``calls`` calls each, the median per step. Their ratio is what ``hgpart calibrate-split`` records in a
cluster file (the runtime shares only the placement with the compiler, so it returns its own
:class:`SplitTiming`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from hgpart.runtime.cluster import guarded
from hgpart.runtime.deviceset import DeviceSet
from hgpart.runtime.modelsource import build_for_placement
from hgpart.runtime.partitioned import PlacedModel
from hgpart.runtime.step import OptimizerSpec, TrainStep

from hgpart.errors import HgpartError
from hgpart.placement import Placement

__all__ = ["SplitRequest", "SplitTiming", "measure_split_costs", "whole_placement"]

#: warm-up calls of every step before the timed rounds (the first traces and allocates)
WARMUP_CALLS = 3


@dataclass(frozen=True)
class SplitRequest:
    """One placement to time at ``micro_batches`` micro-batches (1: as async model parallelism runs a batch; K: as
    sync model parallelism does)."""

    placement: Placement
    micro_batches: int = 1


@dataclass(frozen=True)
class SplitTiming:
    """A placement's training step and its model's unsplit step, timed on one device at one batch size."""

    placement: str  #: the placement's content hash
    model: str
    batch_size: int
    micro_batches: int
    whole_ms: float  #: the unsplit model's step (one part), median over the rounds
    split_ms: float  #: the placement's step with every part on the same device
    input_shape: tuple[int, ...] = ()  #: the model's input

    @property
    def factor(self) -> float:
        """The split step over the unsplit one."""
        return self.split_ms / self.whole_ms


def whole_placement(pl: Placement) -> Placement:
    """The one-part placement of ``pl``'s model: every vertex on part 0, so no layer is split."""
    hg = pl.hypergraph()
    return Placement.from_vertex_parts(pl.graph, hg, np.zeros(hg.num_vertices, dtype=np.int64), k=1,
                                       method="layerwise", work=pl.work, source=pl.source)


def measure_split_costs(requests: Sequence[SplitRequest], ds: DeviceSet, *, batch_size: int, reps: int = 15,
                        calls: int = 5, report: Callable[[str], None] | None = None) -> list[SplitTiming]:
    """The :class:`SplitTiming` of every request on ``ds.devices[0]`` at ``batch_size`` (see the module docstring),
    in request order. A dead worker is one :class:`HgpartError`."""
    if reps < 1 or calls < 1:
        raise HgpartError(f"need reps >= 1 and calls >= 1 (got {reps}, {calls})", where="split benchmark")
    for r in requests:
        if r.micro_batches < 1 or batch_size % r.micro_batches:
            raise HgpartError(f"batch size {batch_size} does not split into {r.micro_batches} micro-batches",
                              where=f"split benchmark of {r.placement.graph.name}",
                              fix="use a batch size divisible by the micro-batches")
    return guarded(ds, _measure, list(requests), ds.devices[0], batch_size, reps, calls, report)


def _measure(requests: list[SplitRequest], dev: str, batch: int, reps: int, calls: int,
             report: Callable[[str], None] | None) -> list[SplitTiming]:
    import tensorflow as tf

    steps: dict[tuple[str, int], tuple[Any, Any, Any]] = {}  # (content hash, micro-batches) -> (step, x, y)
    wholes: dict[tuple[str, int], tuple[str, int]] = {}  # (model fingerprint, micro-batches) -> the unsplit step

    def add(pl: Placement, micro: int) -> tuple[str, int]:
        key = (pl.content_hash(), micro)
        if key not in steps:
            pm = PlacedModel(pl, build_for_placement(pl, seed=0), [dev] * pl.k, host=dev)
            st = TrainStep(pm, OptimizerSpec("adam", 1e-3), batch_size=batch, micro_batches=micro)
            with tf.device(dev):
                x = tf.random.normal([batch, *pl.graph.input_shape], seed=1)
                y = tf.zeros([batch], tf.int32)
            steps[key] = (st, x, y)
        return key

    keys = []
    for r in requests:
        fp = (r.placement.graph.fingerprint(), r.micro_batches)
        if fp not in wholes:
            wholes[fp] = add(whole_placement(r.placement), r.micro_batches)
        keys.append((add(r.placement, r.micro_batches), fp))
    for st, x, y in steps.values():
        for _ in range(WARMUP_CALLS):
            st.concrete(x, y).numpy()
    times: dict[tuple[str, int], list[float]] = {k: [] for k in steps}
    for i in range(reps):
        for k, (st, x, y) in steps.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                loss = st.concrete(x, y)
            loss.numpy()
            times[k].append((time.perf_counter() - t0) / calls)
        if report is not None:
            report(f"round {i + 1}/{reps}")
    out = []
    for r, (key, fp) in zip(requests, keys, strict=True):
        whole = statistics.median(times[wholes[fp]])
        split = statistics.median(times[key])
        out.append(SplitTiming(placement=key[0], model=r.placement.graph.name, batch_size=batch,
                             micro_batches=r.micro_batches, whole_ms=1000.0 * whole, split_ms=1000.0 * split,
                             input_shape=tuple(r.placement.graph.input_shape)))
    return out
