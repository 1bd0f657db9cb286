"""The one threaded asynchronous step driver, shared by every strategy (thesis §4.2).

Usage::

    from hgpart.runtime.pipeline import run_slots, shuffled_batches, stacked_tasks
    records = run_slots([step] * inflight, steps, shuffled_batches(x, y, batch_size=32, seed=0),
                        images_per_task=32)
    records[-1].loss, records[-1].images_per_s

One thread per slot function; whenever a thread is free it takes the next
task (``task(i)`` gives its inputs), so several batches are in flight and no
device waits for a whole step to drain.

Bounded staleness: task ``i`` starts only after task ``i - window`` has
finished (``window`` defaults to the number of slots). Without the bound a
slow task could be overtaken without limit: while one thread works on task 0,
the others could finish tasks 1, 2, 3, ..., so task 0's gradient, computed on
the weights it read at its start, would land after any number of newer
updates. With it, at most ``window - 1`` older tasks' updates can be missing
from the weights a task reads, and at most ``window - 1`` newer tasks can
update the weights before its own update lands (PipeDream's bound for
``window`` batches in flight). The model-parallel pipeline
(:func:`hgpart.runtime.train.run_pipeline`: K threads sharing one partitioned
step) and the data-parallel strategies (:func:`hgpart.runtime.dataparallel.run_slots`:
one thread per worker's step) both run on it and get the same
:class:`StepRecord` per finished task. The first failure stops every thread and
is re-raised in the caller as one :class:`~hgpart.errors.DeviceError` (an
:class:`~hgpart.errors.HgpartError` raised by a step passes through as it is).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from hgpart.errors import DeviceError, HgpartError

__all__ = ["StepRecord", "raise_first", "run_slots", "shuffled_batches", "stacked_tasks", "steady_rate"]

#: what a task provides: the arguments of one call of a slot function
Task = Callable[[int], tuple[Any, ...]]


@dataclass(frozen=True)
class StepRecord:
    """One finished task: which slot ran it, its loss and when (seconds since the driver started)."""

    step: int  # task index, in the order tasks were handed out (0, 1, ...)
    slot: int  # the thread (and slot function) that ran it
    loss: float
    start_s: float
    end_s: float
    batch_s: float  # end_s - start_s
    images_per_s: float  # images of all tasks finished so far / end_s (0 when images per task is not given)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    #: columns of a CSV step log, in order
    COLUMNS = ("step", "slot", "loss", "start_s", "end_s", "batch_s", "images_per_s")


def shuffled_batches(x: np.ndarray, y: np.ndarray, *, batch_size: int, seed: int) -> Task:
    """Task ``i`` = the i-th ``batch_size`` slice of one seeded permutation of ``x, y`` (wrapping around)."""
    order = np.random.default_rng(seed).permutation(len(x))

    def batch(i: int) -> tuple[np.ndarray, np.ndarray]:
        idx = np.take(order, np.arange(i * batch_size, (i + 1) * batch_size), mode="wrap")
        return x[idx], y[idx]

    return batch


def stacked_tasks(xs: np.ndarray, ys: np.ndarray) -> Task:
    """Task ``i`` = ``xs[i], ys[i]`` (the batches are already cut and stacked along the first axis)."""
    return lambda i: (xs[i], ys[i])


class _Driver:
    """The state the slot threads share: next task, finished records, first error; all under one lock."""

    def __init__(self, fns: Sequence[Callable[..., Any]], n_tasks: int, task: Task, images_per_task: int,
                 on_step: Callable[[StepRecord], None] | None, window: int) -> None:
        self.fns, self.n_tasks, self.task = fns, n_tasks, task
        self.images_per_task = images_per_task
        self.on_step = on_step
        self.window = window
        self.lock = threading.Condition()
        self.next = 0
        self.finished = np.zeros(n_tasks, dtype=bool)
        self.records: list[StepRecord] = []
        self.errors: list[BaseException] = []
        self.t0 = time.perf_counter()

    def _take(self) -> int | None:
        """The next task, once task ``i - window`` has finished; None when all are taken or a task failed.

        No deadlock: tasks are handed out in order, so the oldest unfinished task never waits.
        """
        with self.lock:
            if self.errors or self.next >= self.n_tasks:
                return None
            i = self.next
            self.next += 1
            older = i - self.window
            self.lock.wait_for(lambda: bool(self.errors) or self.window < 1 or older < 0 or self.finished[older])
            return None if self.errors else i

    def _fail(self, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(exc)
            self.lock.notify_all()

    def _finish(self, i: int, slot: int, loss: Any, start: float, end: float) -> None:
        with self.lock:
            done = len(self.records) + 1
            end_s = end - self.t0
            rec = StepRecord(step=i, slot=slot, loss=float(loss), start_s=start - self.t0, end_s=end_s,
                             batch_s=end - start, images_per_s=done * self.images_per_task / max(end_s, 1e-9))
            self.records.append(rec)
            self.finished[i] = True
            self.lock.notify_all()
            if self.on_step is not None:
                self.on_step(rec)

    def work(self, slot: int) -> None:
        fn = self.fns[slot]
        while (i := self._take()) is not None:
            args = self.task(i)
            start = time.perf_counter()
            try:
                loss = fn(*args)
                self._finish(i, slot, loss, start, time.perf_counter())
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                self._fail(exc)  # also a loss that is no number, or an on_step callback that raised
                return


def steady_rate(ends: Sequence[float], warm: int) -> float:
    """Steps per second after the first ``warm`` steps to end: the steps after them over the time from the
    ``warm``-th end to the last (the whole run's rate when there are too few steps). A pipeline's fill is a
    one-off cost of a run, which a short run would otherwise charge to few steps."""
    ends = sorted(ends)
    w = min(max(1, warm), len(ends) - 1)
    if w < 1 or ends[-1] <= ends[w - 1]:
        return len(ends) / ends[-1] if ends and ends[-1] > 0 else 0.0
    return (len(ends) - w) / (ends[-1] - ends[w - 1])


def run_slots(
    fns: Sequence[Callable[..., Any]],
    n_tasks: int,
    task: Task,
    *,
    images_per_task: int = 0,
    on_step: Callable[[StepRecord], None] | None = None,
    fix: str | None = None,
    thread_name: str = "hgpart-slot",
    window: int | None = None,
) -> list[StepRecord]:
    """Run tasks ``0..n_tasks-1``, each as ``fns[slot](*task(i))`` on the first free slot.

    Args:
        fns: one step function per thread; the same function may appear several times (K batches in flight).
        n_tasks: how many tasks to run.
        task: the arguments of task ``i`` (see :func:`shuffled_batches`, :func:`stacked_tasks`).
        images_per_task: images one task consumes, for :attr:`StepRecord.images_per_s`.
        on_step: called under the driver's lock with each record as its task finishes.
        fix: the hint of the :class:`~hgpart.errors.DeviceError` raised when a step fails.
        thread_name: prefix of the threads' names (seen in profiler traces).
        window: the staleness bound: task ``i`` starts only after task ``i - window`` finished (see the module
            docstring). None: the number of slots; 0: no bound.

    Returns:
        One :class:`StepRecord` per task, sorted by finishing time.

    Raises:
        DeviceError: a step raised an exception that is not an :class:`~hgpart.errors.HgpartError`.
    """
    drv = _Driver(fns, n_tasks, task, images_per_task, on_step, len(fns) if window is None else int(window))
    threads = [threading.Thread(target=drv.work, args=(s,), daemon=True, name=f"{thread_name}{s}")
               for s in range(len(fns))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    raise_first(drv.errors, fix)
    drv.records.sort(key=lambda r: r.end_s)
    return drv.records


def raise_first(errors: Sequence[BaseException], fix: str | None) -> None:
    """Re-raise the first failure of a step driver's threads, if any: an HgpartError as it is, anything else
    as one DeviceError naming it."""
    if not errors:
        return
    first = errors[0]
    if isinstance(first, HgpartError):
        raise first
    raise DeviceError(f"a training step failed: {type(first).__name__}: {str(first).splitlines()[0][:200]}"
                      if str(first) else f"a training step failed: {type(first).__name__}",
                      where="runtime", fix=fix, cause=type(first).__name__)
