"""The 1F1B pipeline over a placement's stages (async, or sync with micro-batches): one client thread per stage.

Usage::

    records = run_staged(staged, n_tasks, task, images_per_task=32, window=2, on_step=..., on_metrics=...)

Each stage's thread issues its stage's calls in PipeDream's one-forward-one-backward order: it runs the backward
of its oldest batch as soon as that batch's output gradients are there, else the forward of its next batch once
that batch's inputs are there and fewer than ``window`` of its batches are forwarded but not yet backwarded. So
at most ``window`` batches are in flight, as in the whole-step driver (:mod:`hgpart.runtime.pipeline`), and a
batch's forward on a stage may miss the updates of at most ``window - 1`` older batches there. A stage's thread
blocks only on its own calls, so the workers run different stages of different batches at the same time.

A batch is finished when every stage has issued its update for it; a separate thread then reads its loss and
accuracy (which waits for the last stage's forward) and reports it. At the end the driver waits until every
device has applied every update. The first failure stops every thread and is re-raised as one DeviceError.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hgpart.runtime.pipeline import StepRecord, Task, raise_first
from hgpart.runtime.stages import Piece, StagedStep

__all__ = ["run_staged"]


@dataclass
class _Batch:
    """Everything in flight for one batch: stage inputs, tapes and outputs, and gradients arriving."""

    index: int
    start: float
    inputs: dict[tuple[int, Piece], Any] = field(default_factory=dict)  # (stage, piece) -> tensor on its device
    labels: Any = None
    tapes: dict[int, tuple[Any, list[Any], list[Any]]] = field(default_factory=dict)  # stage -> tape, ins, outs
    grads: dict[tuple[int, Piece], list[Any]] = field(default_factory=dict)  # (stage, output) -> gradients
    backwarded: int = 0
    loss: Any = None
    acc: Any = None


def _move(t: Any, device: str) -> Any:
    """``t`` (on one worker) copied to ``device`` (another): an eager copy between the workers, so each byte
    crosses the link once, as the placement's volume counts it."""
    import tensorflow as tf

    with tf.device(device):
        return tf.identity(t)


class _Run:
    def __init__(self, staged: StagedStep, steps: int, task: Task, images: int, window: int, micro: int,
                 on_step: Callable[[StepRecord], None] | None,
                 on_metrics: Callable[[int, float], None] | None, events: list | None = None) -> None:
        self.st, self.task, self.images = staged, task, images
        self.events = events
        self.micro = max(1, micro)
        self.n = steps * self.micro  # batches through the stages (micro-batches in sync)
        self.window = self.micro if self.micro > 1 else max(1, window)
        self.step_data: dict[int, tuple[Any, Any]] = {}
        self.parts: dict[int, list[tuple[float, float, float]]] = {}  # step -> (loss, accuracy, start) so far
        self.on_step, self.on_metrics = on_step, on_metrics
        self.cond = threading.Condition()
        self.batches: dict[int, _Batch] = {}
        self.errors: list[BaseException] = []
        self.records: list[StepRecord] = []
        self.done: queue.Queue[int | None] = queue.Queue()
        self.t0 = time.perf_counter()
        stages = staged.stages
        self.input_piece: Piece = (staged.input_name, -1)
        self.readers: dict[Piece, list[int]] = {}
        for s in stages:
            for t in s.inputs:
                self.readers.setdefault(t, []).append(s.index)
        #: where a batch's data goes: the devices of the stages reading the model input, and the loss stage's
        self.input_devices = {s: staged.fns[s].device for s in self.readers.get(self.input_piece, [])}
        self.label_device = next(f.device for f in staged.fns if f.stage.loss)
        self.fed = 0  # batches whose data has been handed to the stages reading the model input
        self.feed_lock = threading.Lock()  # batches are read one at a time, in order

    # -------------------------------------------------------------------------------------------- helpers
    def _feed(self, i: int) -> None:
        """Read batch ``i`` and put its images on every stage device reading them, its labels on the loss's."""
        import tensorflow as tf

        step, j = divmod(i, self.micro)
        if j == 0:
            self.step_data[step] = self.task(step)
        x, y = self.step_data[step]
        if self.micro > 1:
            m = len(x) // self.micro
            x, y = x[j * m:(j + 1) * m], y[j * m:(j + 1) * m]
            if j == self.micro - 1:
                del self.step_data[step]
        else:
            del self.step_data[step]
        b = _Batch(i, time.perf_counter())
        for s, dev in self.input_devices.items():
            with tf.device(dev):
                b.inputs[(s, self.input_piece)] = tf.constant(np.asarray(x, np.float32))
        with tf.device(self.label_device):
            b.labels = tf.constant(np.asarray(y, np.int32))
        with self.cond:
            old = self.batches.get(i)
            if old is not None:  # another stage already delivered some inputs
                old.inputs.update(b.inputs)
                old.labels, old.start = b.labels, b.start
            else:
                self.batches[i] = b
            self.cond.notify_all()

    def _ready_fwd(self, s: int, i: int) -> bool:
        stage = self.st.stages[s]
        b = self.batches.get(i)
        if b is None:
            return False
        if stage.loss and b.labels is None:
            return False
        return all((s, t) in b.inputs for t in stage.inputs)

    def _ready_bwd(self, s: int, i: int) -> bool:
        stage = self.st.stages[s]
        b = self.batches.get(i)
        if b is None or s not in b.tapes:
            return False
        return all(len(b.grads.get((s, t), [])) == len(self.readers[t]) for t in stage.outputs)

    # ------------------------------------------------------------------------------------------ the work
    def _forward(self, s: int, i: int) -> None:
        st = self.st
        stage = st.stages[s]
        with self.cond:
            b = self.batches[i]
            ins = [b.inputs.pop((s, t)) for t in stage.inputs]
            labels = b.labels
        tape, outs = st.forward(s, ins, labels)
        sent: dict[tuple[int, Piece], Any] = {}
        for t, o in zip(stage.outputs, outs, strict=False):
            for r in self.readers[t]:
                dev = st.fns[r].device
                if dev == st.fns[s].device:
                    sent[(r, t)] = o
                else:
                    sent[(r, t)] = _move(o, dev)
        with self.cond:
            b.tapes[s] = (tape, ins, outs)
            b.inputs.update(sent)
            if stage.loss:
                b.loss, b.acc = outs[len(stage.outputs)], outs[len(stage.outputs) + 1]
            self.cond.notify_all()

    def _backward(self, s: int, i: int) -> None:
        import tensorflow as tf

        st = self.st
        stage = st.stages[s]
        with self.cond:
            b = self.batches[i]
            tape, ins, outs = b.tapes.pop(s)
            gs = [b.grads.pop((s, t)) for t in stage.outputs]
        dev = st.fns[s].device
        out_grads = []
        for g in gs:
            if len(g) == 1:
                out_grads.append(g[0])
            else:
                with tf.device(dev):
                    out_grads.append(tf.add_n(g))
        in_grads = st.backward(s, tape, ins, outs, out_grads, micro=self.micro)
        sent: list[tuple[tuple[int, Piece], Any]] = []
        for t, a, g in zip(stage.inputs, ins, in_grads, strict=True):
            if t == self.input_piece:
                continue
            p = st.stage_of[t]
            pdev = st.fns[p].device
            if g is None:  # the input does not reach this stage's outputs
                with tf.device(dev):
                    g = tf.zeros_like(a)
            if pdev != dev:
                g = _move(g, pdev)
            sent.append(((p, t), g))
        with self.cond:
            for key, g in sent:
                b.grads.setdefault(key, []).append(g)
            b.backwarded += 1
            if b.backwarded == len(st.stages):
                self.done.put(i)
            self.cond.notify_all()

    def _next_action(self, s: int, f: int, bwd: int, reads_input: bool) -> str:
        """What stage ``s`` does next (under the lock): ``b``ackward, ``f``orward, ``feed`` or ``wait``."""
        if self.errors:
            return "stop"
        if bwd < f and self._ready_bwd(s, bwd):
            return "b"
        # sync: a step's first forward on a stage waits for the stage's update of the step before
        if f < self.n and f - bwd < self.window and (self.micro == 1 or f // self.micro <= bwd // self.micro):
            if self._ready_fwd(s, f):
                return "f"
            if reads_input and self.fed <= f:
                return "feed"
        return "wait"

    def stage_loop(self, s: int) -> None:
        """Stage ``s``'s thread: one forward, one backward (see the module docstring), until every batch is done."""
        reads_input = self.input_piece in self.st.stages[s].inputs
        f = bwd = 0
        try:
            while bwd < self.n:
                with self.cond:
                    while (action := self._next_action(s, f, bwd, reads_input)) == "wait":
                        self.cond.wait()
                if action == "stop":
                    return
                t_a = time.perf_counter()
                if action == "b":
                    self._backward(s, bwd)
                    bwd += 1
                elif action == "f":
                    self._forward(s, f)
                    f += 1
                else:
                    self._feed_next()
                if self.events is not None and action in ("f", "b"):
                    with self.cond:
                        self.events.append((s, action, (bwd if action == "b" else f) - 1, t_a - self.t0,
                                            time.perf_counter() - self.t0))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            self._fail(exc)

    def _feed_next(self) -> None:
        with self.feed_lock:
            with self.cond:
                i = self.fed
                if i >= self.n:
                    return
                self.fed += 1
            self._feed(i)

    def _fail(self, exc: BaseException) -> None:
        with self.cond:
            self.errors.append(exc)
            self.cond.notify_all()
        self.done.put(None)

    def finisher(self) -> None:
        """Reads each finished batch's loss and accuracy (in the order batches finish) and reports every step
        (in sync mode, once all its micro-batches are read: their mean)."""
        for _ in range(self.n):
            i = self.done.get()
            if i is None:
                return
            with self.cond:
                b = self.batches.pop(i)
            try:
                loss, acc = float(b.loss.numpy()), float(b.acc.numpy())
            except BaseException as exc:  # noqa: BLE001
                self._fail(exc)
                return
            step = i // self.micro
            got = self.parts.setdefault(step, [])
            got.append((loss, acc, b.start))
            if len(got) < self.micro:
                continue
            del self.parts[step]
            end = time.perf_counter()
            start = min(g[2] for g in got)
            with self.cond:
                done = len(self.records) + 1
                end_s = end - self.t0
                rec = StepRecord(step=step, slot=0, loss=sum(g[0] for g in got) / len(got), start_s=start - self.t0,
                                 end_s=end_s, batch_s=end - start, images_per_s=done * self.images / max(end_s, 1e-9))
                self.records.append(rec)
                if self.on_metrics is not None:
                    self.on_metrics(step, sum(g[1] for g in got) / len(got))
                if self.on_step is not None:
                    self.on_step(rec)


def run_staged(staged: StagedStep, n_tasks: int, task: Task, *, images_per_task: int, window: int = 1,
               micro: int = 1, on_step: Callable[[StepRecord], None] | None = None,
               on_metrics: Callable[[int, float], None] | None = None,
               fix: str | None = None, events: list | None = None) -> list[StepRecord]:
    """Train ``n_tasks`` steps (``task(i)`` gives step i's batch ``x, y``) through the stages, 1F1B; returns one
    :class:`StepRecord` per step, sorted by finishing time. ``on_metrics`` gets each step's accuracy just before
    ``on_step`` gets its record.

    Async (``micro`` 1): one update per batch, at most ``window`` batches in flight. Sync (``micro`` M > 1): each
    batch is cut into M micro-batches that flow through the stages 1F1B; each stage applies the mean of their
    gradients once, after its last backward of the step, and starts the next step's forwards only then (so every
    step sees the whole previous update, as in the whole-step function's sync mode, without a global barrier).

    ``events``, if given, receives ``(stage, "f" or "b", batch, start_s, end_s)`` for every call a stage's thread
    made, in order (what ``benchmarks/step_breakdown.py`` and the tests read the schedule from).
    """
    run = _Run(staged, n_tasks, task, images_per_task, window, micro, on_step, on_metrics, events)
    threads = [threading.Thread(target=run.stage_loop, args=(s,), daemon=True, name=f"hgpart-stage{s}")
               for s in range(len(staged.stages))]
    fin = threading.Thread(target=run.finisher, daemon=True, name="hgpart-finish")
    for th in (*threads, fin):
        th.start()
    for th in (*threads, fin):
        th.join()
    if not run.errors:
        try:
            for c in staged.step.counters.values():  # every update applied before the clock stops
                c.numpy()
            for f in staged.fns:
                for v in f.variables[-1:]:
                    v.numpy()
        except BaseException as exc:  # noqa: BLE001
            run.errors.append(exc)
    raise_first(run.errors, fix)
    run.records.sort(key=lambda r: r.end_s)
    return run.records
