"""What a finished simulation shows: per-device busy, idle and communication time, the critical path, and a
Chrome/Perfetto trace in the runtime's format.

Usage::

    times = device_times(engine.tasks, n_devices=4)    # one DeviceTime per device over the whole run
    path = critical_path(engine.tasks)                  # the chain of tasks that set the end time
    trace = chrome_trace(engine.tasks, ["dev0", ...], times, meta={...})

The trace has the shape of ``hgpart.runtime.devtrace.chrome_trace`` (``devices_trace.json``): one process per
device named ``part p: <device> (busy x%)``, complete events ``"ph": "X"`` in microseconds with the op as ``name``
and its type as ``cat``. Thread 0 of a device holds its compute and updates, thread 1 its outgoing transfers and
thread 2 its incoming ones, so predicted and measured timelines open side by side in Perfetto.

The critical path walks back from the task that ended last: to the dependency that ended last, or, when the task
waited for a busy device or port after its dependencies were done, to the task that held it. A job (step) enters
the engine when the one before it on its slot ends, with no dependency on it, so the walk covers the last job: the
chain that set its end, including the tasks of earlier jobs that held its devices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from hgpart.simulate.engine import Task, TaskKind

__all__ = ["DeviceTime", "PathStep", "device_times", "critical_path", "chrome_trace"]


@dataclass(frozen=True)
class DeviceTime:
    """Seconds over the simulated run: computing, updating and running the client's work (the core's seconds the
    tasks took: their work, :func:`device_times`), transferring (sending or receiving: the union of the transfers'
    spans), and idle (the span less the first three; on a shared core it includes the share transfers took)."""

    device: int
    compute_s: float
    update_s: float
    comm_s: float
    idle_s: float
    span_s: float
    client_s: float = 0.0  # the runtime client's CPU work that ran on this device's core

    @property
    def busy(self) -> float:
        """Fraction of the run's core time the device spent computing, updating or on the client's work."""
        return (self.compute_s + self.update_s + self.client_s) / self.span_s if self.span_s > 0 else 0.0

    def to_dict(self) -> dict[str, float]:
        return {**asdict(self), "busy": self.busy}


@dataclass(frozen=True)
class PathStep:
    """One task on the critical path."""

    name: str
    kind: str
    device: int
    peer: int
    start_s: float
    end_s: float


def _union(intervals: list[tuple[float, float]]) -> float:
    if not intervals:
        return 0.0
    arr = np.array(sorted(intervals))
    total, lo, hi = 0.0, arr[0, 0], arr[0, 1]
    for s, e in arr[1:]:
        if s > hi:
            total += hi - lo
            lo, hi = s, e
        else:
            hi = max(hi, e)
    return float(total + hi - lo)


def device_times(tasks: Sequence[Task], n_devices: int) -> list[DeviceTime]:
    """Per device: compute, update, client and transfer seconds and idle time over [0, last end]. Client work on a
    core that is not one of the ``n_devices`` (a spare core of the node) is left out.

    Compute, update and client seconds are the tasks' work (their ``duration``), the core's seconds they took: on a
    shared core (processor sharing) two tasks side by side at half speed each last twice their work, and summing
    those stretched spans would count the core's time twice (a busy share over 100 %, a negative idle time).
    Transfer seconds are the union of the device's transfers' spans, as long as they held its port."""
    span = max((t.end for t in tasks), default=0.0)
    comp = np.zeros(n_devices)
    upd = np.zeros(n_devices)
    cli = np.zeros(n_devices)
    comm: list[list[tuple[float, float]]] = [[] for _ in range(n_devices)]
    for t in tasks:
        if t.kind is TaskKind.COMPUTE:
            comp[t.device] += t.duration
        elif t.kind is TaskKind.UPDATE:
            upd[t.device] += t.duration
        elif t.kind is TaskKind.CLIENT:
            if 0 <= t.device < n_devices:
                cli[t.device] += t.duration
        elif t.kind is TaskKind.SEND:
            comm[t.device].append((t.start, t.end))
            comm[t.peer].append((t.start, t.end))
    return [DeviceTime(d, float(comp[d]), float(upd[d]), _union(comm[d]), float(span - comp[d] - upd[d] - cli[d]),
                       span, float(cli[d])) for d in range(n_devices)]


def critical_path(tasks: Sequence[Task]) -> list[PathStep]:
    """The tasks that determined when the last one ended, first to last (zero-length marks left out)."""
    if not tasks:
        return []
    cur = max(range(len(tasks)), key=lambda i: (tasks[i].end, i))
    out: list[PathStep] = []
    while cur >= 0:
        t = tasks[cur]
        if t.kind is not TaskKind.MARK:
            out.append(PathStep(t.name, t.kind.value, t.device, t.peer, t.start, t.end))
        if t.waited_for >= 0 and t.start > t.ready:
            cur = t.waited_for
        elif t.deps:
            cur = max(t.deps, key=lambda d: (tasks[d].end, d))
        else:
            cur = -1
    return out[::-1]


def chrome_trace(tasks: Sequence[Task], devices: Sequence[str], times: Sequence[DeviceTime],
                 meta: dict[str, Any]) -> dict[str, Any]:
    """The Chrome trace JSON of a simulated run (see the module docstring)."""
    out: list[dict[str, Any]] = []
    rows = ("compute", "send", "receive")
    for p, dev in enumerate(devices):
        out.append({"ph": "M", "pid": p, "name": "process_name",
                    "args": {"name": f"part {p}: {dev} (busy {100 * times[p].busy:.1f}%)"}})
        out.append({"ph": "M", "pid": p, "name": "process_sort_index", "args": {"sort_index": p}})
        for tid, row in enumerate(rows):
            out.append({"ph": "M", "pid": p, "tid": tid, "name": "thread_name", "args": {"name": row}})
    for t in sorted(tasks, key=lambda t: t.start):
        if t.kind is TaskKind.MARK or t.end <= t.start or not 0 <= t.device < len(devices):
            continue
        span = {"name": t.name, "cat": t.kind.value, "ts": t.start * 1e6, "dur": (t.end - t.start) * 1e6,
                "args": {"type": t.kind.value, "batch": t.batch, **({"bytes": t.nbytes} if t.nbytes else {})}}
        if t.kind is TaskKind.SEND:
            out.append({"ph": "X", "pid": t.device, "tid": 1, **span})
            out.append({"ph": "X", "pid": t.peer, "tid": 2, **span})
        else:
            out.append({"ph": "X", "pid": t.device, "tid": 0, **span})
    return {"traceEvents": out, "displayTimeUnit": "ms",
            "otherData": {**meta, "simulated": True, "device_busy": [d.busy for d in times]}}
