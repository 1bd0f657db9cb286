"""The discrete-event engine: tasks with dependencies on exclusive resources, list-scheduled in time order.

Usage::

    eng = Engine()
    a = eng.add(Task("fwd", TaskKind.COMPUTE, 2.0, ("dev0",), device=0))
    b = eng.add(Task("send", TaskKind.SEND, 1.0, ("out:d0", "in:d1"), device=0, peer=1, deps=(a,)))
    eng.on_finish(b, lambda now: ...)        # may add more tasks (the next batch)
    eng.run()
    eng.tasks[b].start, eng.tasks[b].end     # 2.0, 3.0

A task becomes ready when its last dependency ends. It starts as soon as every resource it names is free, holding
all of them for its whole duration (a device runs one task at a time; a transfer holds the sender's out-port and the
receiver's in-port together). A task may also name alternatives (``any_of``): it then holds, besides, the first of
them that is free, as the client's CPU work takes whichever core is free. Among ready tasks the engine starts them in
the order they became ready, ties broken by batch (older first) and then by the order they were added; a task whose
resources are busy does not hold back a later one whose resources are free. Times are exact sums of durations (no
rounding), so a schedule computed by hand is reproduced to the last bit.

A resource named in ``shared`` is a core that runs up to that many tasks at once, sharing its time between them
(processor sharing), as the inter-op threads of one TensorFlow worker share its core: each of the ``n`` tasks on it
advances at ``1 / n`` of its speed, and a task on several shared resources at the slowest of their rates. A task
that finds every thread of one busy waits, as for an exclusive resource. Without ``shared`` every resource is
exclusive and the times are as above.

With ``one_flow``, the compute tasks that share a resource at once belong to one flow, a (``batch``, ``micro``)
pair: a compute task of another micro-batch or batch waits, like one that finds every thread busy, until the
running ones end; meanwhile tasks of the running flow that became ready later may start before it, so the core
stays with a flow while any of its compute runs. Transfers, updates and the other kinds share the resource with
any flow. This is an approximation of a traced compiled sync call
(``benchmarks/results/simulator_validation/2026-11-28-calls/compiled_sync/order.txt``): there the first stage's
worker runs one micro-batch's forward and then the other's, not side by side, and the second stage starts the
first while the first stage runs the other; the second stage does run one long op of one micro-batch's backward
beside the other's ops, which the rule does not allow. Sharing the core between micro-batches instead lets them
end together, so no stage starts early and the pipeline is lost. For batches in flight (async) the rule is assumed
alike; no trace checks it.

The engine is a heap of finishing times and a sorted ready list: small, deterministic, and able to hold several
ports at once, which a transfer needs; the simulated workloads are a few thousand tasks.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

__all__ = ["Engine", "Task", "TaskKind"]


class TaskKind(Enum):
    """What a task does; the trace and the per-device times group by it."""

    COMPUTE = "compute"  # forward or backward work on a device
    UPDATE = "update"  # an optimizer update on a device
    SEND = "send"  # a transfer from ``device`` to ``peer`` on the ports of their route
    CALL = "call"  # the runtime's client starting one step call (feed in, loss back); holds the client
    CLIENT = "client"  # the client's CPU work for a call, on whichever of the cores it may use is free
    MARK = "mark"  # a zero-length join point (end of a step); holds nothing


@dataclass
class Task:
    """One unit of simulated work. ``start``, ``end`` and ``waited_for`` are filled in by the engine."""

    name: str
    kind: TaskKind
    duration: float
    resources: tuple[str, ...] = ()
    device: int = -1  # the device that computes, or the sender of a transfer
    peer: int = -1  # the receiver of a transfer
    batch: int = 0
    deps: tuple[int, ...] = ()
    nbytes: float = 0.0
    start: float = math.nan
    end: float = math.nan
    ready: float = math.nan
    waited_for: int = -1  # the task whose end released the resource this one waited for (-1: none)
    #: (resource, device) pairs: the task also holds the first of them that is free when it starts, and takes that
    #: device as its own (empty: only ``resources``)
    any_of: tuple[tuple[str, int], ...] = ()
    #: which micro-batch of its batch the task belongs to (0 when the batch is not split)
    micro: int = 0


@dataclass
class Engine:
    """Runs :class:`Task` s; see the module docstring for the rules."""

    tasks: list[Task] = field(default_factory=list)
    now: float = 0.0
    _succ: list[list[int]] = field(default_factory=list)
    _pending: list[int] = field(default_factory=list)
    _ready: list[tuple[float, int, int]] = field(default_factory=list)
    _events: list[tuple[float, int, int]] = field(default_factory=list)  # (end, task, version)
    _busy: dict[str, int] = field(default_factory=dict)  # resource -> the task holding it
    _released: dict[str, int] = field(default_factory=dict)  # resource -> the task that last released it
    _listeners: dict[int, list[Callable[[float], None]]] = field(default_factory=dict)
    #: resource -> how many tasks may share it at once (processor sharing; see the module docstring)
    shared: dict[str, int] = field(default_factory=dict)
    _on: dict[str, list[int]] = field(default_factory=dict)  # shared resource -> the tasks running on it
    _left: dict[int, tuple[float, float, float]] = field(default_factory=dict)  # tid -> (work left, rate, since)
    _version: dict[int, int] = field(default_factory=dict)  # tid -> the version of its latest finish event
    #: on a shared resource, compute tasks of one (micro-)batch share it at once; one of another waits for them
    one_flow: bool = False

    def add(self, task: Task) -> int:
        """Add ``task`` (its ``deps`` are ids of tasks already added); its id."""
        tid = len(self.tasks)
        self.tasks.append(task)
        self._succ.append([])
        waiting = 0
        for d in task.deps:
            if not 0 <= d < tid:
                raise ValueError(f"task {task.name!r} depends on unknown task {d}")
            if math.isnan(self.tasks[d].end):
                self._succ[d].append(tid)
                waiting += 1
        self._pending.append(waiting)
        if waiting == 0:
            self._make_ready(tid)
        return tid

    def on_finish(self, tid: int, fn: Callable[[float], None]) -> None:
        """Call ``fn(now)`` when task ``tid`` ends (it may add tasks)."""
        self._listeners.setdefault(tid, []).append(fn)

    def run(self) -> float:
        """Run until no task is left; the time the last one ended."""
        self._dispatch()
        while self._drop_stale():
            t = self._events[0][0]
            self.now = t
            while self._drop_stale() and self._events[0][0] == t:
                self._finish(heapq.heappop(self._events)[1])
            self._dispatch()
        if self._ready or any(self._pending[i] for i in range(len(self.tasks)) if math.isnan(self.tasks[i].end)):
            raise RuntimeError("the simulation stopped with tasks that never became ready (a dependency cycle)")
        return self.now

    # ------------------------------------------------------------------------------------------ internals
    def _make_ready(self, tid: int) -> None:
        task = self.tasks[tid]
        task.ready = self.now
        bisect.insort(self._ready, (self.now, task.batch, tid))

    def _dispatch(self) -> None:
        started: list[int] = []
        for i, (_, _, tid) in enumerate(self._ready):
            task = self.tasks[tid]
            if any(r in self._busy or len(self._on.get(r, ())) >= self.shared.get(r, 1) for r in task.resources):
                continue
            if self.one_flow and task.kind is TaskKind.COMPUTE and any(
                    self._other_flow(r, task) for r in task.resources if r in self.shared):
                continue
            if task.any_of:
                free = next(((r, d) for r, d in task.any_of if r not in self._busy and r not in task.resources
                             and len(self._on.get(r, ())) < self.shared.get(r, 1)), None)
                if free is None:
                    continue
                task.resources, task.device, task.any_of = (*task.resources, free[0]), free[1], ()
            task.start = self.now
            if task.start > task.ready:
                task.waited_for = max((self._released[r] for r in task.resources if r in self._released),
                                      key=lambda t: self.tasks[t].end, default=-1)
            cores = [r for r in task.resources if r in self.shared]
            for r in task.resources:
                if r in self.shared:
                    self._on.setdefault(r, []).append(tid)
                else:
                    self._busy[r] = tid
            if cores:
                self._left[tid] = (task.duration, 0.0, self.now)
                self._rerate(cores)
            else:
                heapq.heappush(self._events, (self.now + task.duration, tid, 0))
            started.append(i)
        for i in reversed(started):
            del self._ready[i]

    def _other_flow(self, res: str, task: Task) -> bool:
        """Whether a compute task of another (micro-)batch than ``task``'s runs on the shared resource ``res``."""
        for t in self._on.get(res, ()):
            other = self.tasks[t]
            if other.kind is TaskKind.COMPUTE and (other.batch, other.micro) != (task.batch, task.micro):
                return True
        return False

    def _drop_stale(self) -> bool:
        """Drop the end events at the top that a rate change replaced; whether an event is left."""
        while self._events and self._events[0][2] != self._version.get(self._events[0][1], 0):
            heapq.heappop(self._events)
        return bool(self._events)

    def _rerate(self, cores: list[str]) -> None:
        """Give every task on the shared resources ``cores`` its new rate, and its end event at that rate."""
        for tid in dict.fromkeys(t for r in cores for t in self._on[r]):
            left, rate, since = self._left[tid]
            left -= (self.now - since) * rate
            new = min(1.0 / len(self._on[r]) for r in self.tasks[tid].resources if r in self.shared)
            self._left[tid] = (left, new, self.now)
            if new != rate:
                version = self._version.get(tid, 0) + 1
                self._version[tid] = version
                heapq.heappush(self._events, (self.now + max(left, 0.0) / new, tid, version))

    def _finish(self, tid: int) -> None:
        task = self.tasks[tid]
        task.end = self.now
        cores = []
        for r in task.resources:
            if r in self.shared:
                self._on[r].remove(tid)
                cores.append(r)
            else:
                del self._busy[r]
            self._released[r] = tid
        if cores:
            del self._left[tid]
            self._rerate(cores)
        for s in self._succ[tid]:
            self._pending[s] -= 1
            if self._pending[s] == 0:
                self._make_ready(s)
        for fn in self._listeners.pop(tid, ()):
            fn(self.now)
