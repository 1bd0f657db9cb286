"""Training strategies as typed values: what runs where and when, instead of names parsed at each use.

Usage::

    from hgpart.runtime.strategy import Strategy
    s = Strategy.parse("coarse-sync")       # BadOptionError for an unknown name
    s.parallelism is Parallelism.MODEL, s.schedule is Schedule.SYNC, s.placement.grain == "coarse"
    Strategy.parse("async-dp-dps").param_sync is ParamSync.DISTRIBUTED_PS

A strategy's ``name`` is what the CLI, the measured comparison's JSON and its
reports use; every other property is read from the fields. The table
:data:`STRATEGIES` is the one list of strategies: the measured comparison
(:mod:`hgpart.compare.measured`) trains each of them, and the data-parallel
ones are compiled by :func:`hgpart.runtime.dataparallel.make_strategy`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hgpart.errors import BadOptionError, parse_enum

__all__ = ["Parallelism", "Schedule", "PlacementKind", "ParamSync", "Strategy", "STRATEGIES"]


class Parallelism(Enum):
    """How the model and the batch are spread over the K devices."""

    SINGLE = "single"  # one device: the reference
    MODEL = "model"  # a placement file's parts, one per device (the hgpart runtime)
    DATA = "data"  # a full replica per device, each on a shard of the batch


class Schedule(Enum):
    """``async``: K batches (or worker updates) in flight, stale weights; ``sync``: one update per global step."""

    ASYNC = "async"
    SYNC = "sync"

    @staticmethod
    def parse(value: str | Schedule, *, where: str = "--mode") -> Schedule:
        """The schedule called ``value`` (``"async"`` or ``"sync"``; a :class:`Schedule` is returned as it is)."""
        return parse_enum(Schedule, value, what="mode", where=where)


class PlacementKind(Enum):
    """How a model-parallel strategy's placement is compiled."""

    LAYERWISE = "layerwise"  # whole layers (the layer-wise backend on the coarse hypergraph)
    COARSE = "coarse"  # coarse-grain hypergraph, partitioned by the chosen backend
    FINE = "fine"  # fine-grain hypergraph, partitioned by the chosen backend

    @property
    def grain(self) -> str:
        """The hypergraph grain the placement is built on."""
        return "fine" if self is PlacementKind.FINE else "coarse"


class ParamSync(Enum):
    """How data-parallel replicas keep their parameters in step."""

    RING = "ring"  # explicit ring all-reduce, every replica applies the same update
    MIRRORED = "mirrored"  # tf.distribute.MirroredStrategy's all-reduce
    ONE_PS = "one-ps"  # one parameter server on device 0, asynchronous workers
    DISTRIBUTED_PS = "distributed-ps"  # every device is a parameter server for a share of the parameters


@dataclass(frozen=True)
class Strategy:
    """One training strategy of the measured comparison."""

    name: str
    parallelism: Parallelism
    schedule: Schedule
    placement: PlacementKind | None = None  # model parallelism only
    param_sync: ParamSync | None = None  # data parallelism only

    @staticmethod
    def parse(name: str | Strategy, *, where: str = "--methods") -> Strategy:
        """The strategy called ``name`` (a :class:`Strategy` is returned as it is)."""
        if isinstance(name, Strategy):
            return name
        found = STRATEGIES.get(name)
        if found is None:
            raise BadOptionError(f"unknown strategy {name!r}", where=where, option=where, value=name,
                                 fix=f"use any of {', '.join(STRATEGIES)}")
        return found

    @property
    def is_model_parallel(self) -> bool:
        return self.parallelism is Parallelism.MODEL

    @property
    def is_async(self) -> bool:
        return self.schedule is Schedule.ASYNC


def _model(kind: PlacementKind, schedule: Schedule) -> Strategy:
    return Strategy(f"{kind.value}-{schedule.value}", Parallelism.MODEL, schedule, placement=kind)


#: every strategy by name, in the order the comparison runs and reports them
STRATEGIES: dict[str, Strategy] = {s.name: s for s in (
    Strategy("single", Parallelism.SINGLE, Schedule.SYNC, param_sync=ParamSync.RING),
    *(_model(kind, sched) for kind in PlacementKind for sched in (Schedule.ASYNC, Schedule.SYNC)),
    Strategy("sync-dp", Parallelism.DATA, Schedule.SYNC, param_sync=ParamSync.RING),
    Strategy("sync-dp-mirrored", Parallelism.DATA, Schedule.SYNC, param_sync=ParamSync.MIRRORED),
    Strategy("async-dp-1ps", Parallelism.DATA, Schedule.ASYNC, param_sync=ParamSync.ONE_PS),
    Strategy("async-dp-dps", Parallelism.DATA, Schedule.ASYNC, param_sync=ParamSync.DISTRIBUTED_PS),
)}
