"""The 1F1B pipeline over a placement's stages (async, or sync with micro-batches): one client thread per stage.

Usage::

    records = run_staged(staged, n_tasks, task, images_per_task=32, window=2, on_step=..., on_metrics=...)

Each stage's thread issues its stage's calls in PipeDream's one-forward-one-backward order: it alternates the
backward of its oldest batch (once that batch's output gradients are there) with the forward of its next batch
(once that batch's inputs are there and fewer than ``window`` of its batches are forwarded but not yet
backwarded), and runs whichever is ready when only one is. So at most ``window`` batches are in flight, as in the
whole-step driver (:mod:`hgpart.runtime.pipeline`), and a batch's forward on a stage may miss the updates of at
most ``window - 1`` older batches there. A stage's call holds its thread until its worker has run it, and a
thread blocks only on its own calls, so the workers run different stages of different batches at the same time.
A stage sends its input gradients on before it runs its optimizer update, and each stage that reads the images
or the labels puts them on its own device from its own thread.

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
    metrics: Any = None  # [loss, accuracy] as one tensor, from the loss stage


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
        self.step_data: dict[int, tuple[Any, Any]] = {}  # step -> x, y, until every fed stage has taken it
        self.takes_left: dict[int, int] = {}  # step -> micro-batches of it the fed stages have still to take
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
        #: where a batch's data goes: the devices of the stages reading the model input; the loss stage its labels
        self.input_devices = {s: staged.fns[s].device for s in self.readers.get(self.input_piece, [])}
        #: per stage that is fed (reads the images, or computes the loss): batches fed to it so far
        self.fed = {s.index: 0 for s in stages if s.index in self.input_devices or s.loss}
        self.data_lock = threading.Lock()  # a step's data is read once, by the first stage to need it

    # -------------------------------------------------------------------------------------------- helpers
    def _data(self, i: int) -> tuple[Any, Any]:
        """Batch ``i``'s images and labels; its step is read once, when the first fed stage asks for it, and
        dropped when every fed stage has taken every micro-batch of it."""
        step, j = divmod(i, self.micro)
        with self.data_lock:
            if step not in self.step_data:
                self.step_data[step] = self.task(step)
                self.takes_left[step] = len(self.fed) * self.micro
            x, y = self.step_data[step]
            self.takes_left[step] -= 1
            if self.takes_left[step] == 0:
                del self.step_data[step], self.takes_left[step]
        if self.micro > 1:
            m = len(x) // self.micro
            x, y = x[j * m:(j + 1) * m], y[j * m:(j + 1) * m]
        return x, y

    def _feed(self, i: int, s: int) -> None:
        """Put what stage ``s`` reads of batch ``i`` on its device: the images, if it reads the model input,
        and the labels, if it computes the loss. Each fed stage's own thread does this just before it needs
        them, so a copy to a worker that is busy with another stage's call never holds up a different stage."""
        import tensorflow as tf

        x, y = self._data(i)
        inputs: dict[tuple[int, Piece], Any] = {}
        labels = None
        dev = self.st.fns[s].device
        with tf.device(dev):
            if s in self.input_devices:
                inputs[(s, self.input_piece)] = tf.constant(np.asarray(x, np.float32))
            if self.st.stages[s].loss:
                labels = tf.constant(np.asarray(y, np.int32))
        with self.cond:
            b = self.batches.get(i)
            if b is None:
                b = self.batches[i] = _Batch(i, time.perf_counter())
            b.inputs.update(inputs)
            if labels is not None:
                b.labels = labels
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
    def _take_inputs(self, s: int, i: int) -> tuple[_Batch, list[Any], Any]:
        """Batch ``i``, the inputs of stage ``s`` for it (taken out of the batch) and its labels."""
        with self.cond:
            b = self.batches[i]
            return b, [b.inputs.pop((s, t)) for t in self.st.stages[s].inputs], b.labels

    def _forward(self, s: int, i: int) -> None:
        st = self.st
        stage = st.stages[s]
        b, ins, _ = self._take_inputs(s, i)
        tape, outs = st.forward(s, ins)
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
        in_grads, var_grads = st.backward(s, tape, ins, outs, out_grads)
        self._send_and_update(s, b, ins, in_grads, var_grads)

    def _fused(self, s: int, i: int) -> None:
        """The loss stage's forward and backward of batch ``i`` in one call (it has no outputs that other stages
        read, and 1F1B runs its backward right after its forward anyway), then its update."""
        b, ins, labels = self._take_inputs(s, i)
        metrics, in_grads, var_grads = self.st.fused(s, ins, labels, micro=self.micro)
        b.metrics = metrics  # read by the finisher only once every stage is done with the batch
        self._send_and_update(s, b, ins, in_grads, var_grads)

    def _send_and_update(self, s: int, b: _Batch, ins: list[Any], in_grads: list[Any], var_grads: list[Any]) -> None:
        """After stage ``s``'s backward of batch ``b``: its input gradients go to the stages waiting for them
        first, then the stage's update runs, and the batch is done once every stage has updated."""
        sent = self._grads_out(s, ins, in_grads)
        with self.cond:  # the stages waiting for these gradients go on while this device updates
            for key, g in sent:
                b.grads.setdefault(key, []).append(g)
            self.cond.notify_all()
        self.st.apply(s, var_grads, micro=self.micro)
        with self.cond:
            b.backwarded += 1
            if b.backwarded == len(self.st.stages):
                self.done.put(b.index)
            self.cond.notify_all()

    def _grads_out(self, s: int, ins: list[Any], in_grads: list[Any]) -> list[tuple[tuple[int, Piece], Any]]:
        """Stage ``s``'s input gradients, each on the device of the stage that made the input (zeros for an
        input that does not reach the stage's outputs); the model input's are dropped."""
        import tensorflow as tf

        st = self.st
        stage = st.stages[s]
        dev = st.fns[s].device
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
        return sent

    def _next_action(self, s: int, f: int, bwd: int, last: str) -> str:
        """What stage ``s`` does next (under the lock): ``b``ackward, ``f``orward, ``feed`` or ``wait``.

        One forward, one backward: a backward that is ready goes first, except right after a backward, when a
        forward that can go (or only needs its data fed) goes first. A stage's calls hold its thread until its
        worker has run them, so without the alternation a stage whose gradients arrive early runs all its
        backwards back to back while the next stage waits for a forward."""
        if self.errors:
            return "stop"
        # sync: a step's first forward on a stage waits for the stage's update of the step before
        fwd_ok = f < self.n and f - bwd < self.window and (self.micro == 1 or f // self.micro <= bwd // self.micro)
        fwd_ready = fwd_ok and self._ready_fwd(s, f)
        feed = fwd_ok and not fwd_ready and s in self.fed and self.fed[s] <= f
        if bwd < f and self._ready_bwd(s, bwd) and not (last == "b" and (fwd_ready or feed)):
            return "b"
        if fwd_ready:
            return "f"
        return "feed" if feed else "wait"

    def stage_loop(self, s: int) -> None:
        """Stage ``s``'s thread: one forward, one backward (see the module docstring), until every batch is done."""
        f = bwd = 0
        last = ""
        fused = self.st.stages[s].loss  # the loss stage runs forward and backward as one call
        try:
            while bwd < self.n:
                with self.cond:
                    while (action := self._next_action(s, f, bwd, last)) == "wait":
                        self.cond.wait()
                if action == "stop":
                    return
                t_a = time.perf_counter()
                if action == "b":
                    self._backward(s, bwd)
                    bwd += 1
                elif action == "f" and fused:
                    self._fused(s, f)
                    f += 1
                    bwd += 1
                elif action == "f":
                    self._forward(s, f)
                    f += 1
                else:
                    self._feed(self.fed[s], s)
                    self.fed[s] += 1
                if action in ("f", "b"):
                    last = action
                    if self.events is not None:
                        kind = "fb" if fused else action
                        with self.cond:
                            self.events.append((s, kind, (bwd if action == "b" else f) - 1, t_a - self.t0,
                                                time.perf_counter() - self.t0))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        with self.cond:
            self.errors.append(exc)
            self.cond.notify_all()
        self.done.put(None)

    def finisher(self) -> None:
        """Reads each finished batch's loss and accuracy (in the order batches finish) and reports every step
        (in sync mode, once all its micro-batches are read: their mean). A failure here (a fetch, or an
        ``on_step`` / ``on_metrics`` callback that raises) stops the run like a failed stage call."""
        for _ in range(self.n):
            i = self.done.get()
            if i is None:
                return
            try:
                self._report(i)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                self._fail(exc)
                return

    def _report(self, i: int) -> None:
        """Batch ``i``'s loss and accuracy; a step's record once all its micro-batches are read."""
        with self.cond:
            b = self.batches.pop(i)
        loss, acc = (float(v) for v in b.metrics.numpy())
        step = i // self.micro
        got = self.parts.setdefault(step, [])
        got.append((loss, acc, b.start))
        if len(got) < self.micro:
            return
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
    made, in order (what ``benchmarks/step_breakdown.py`` and the tests read the schedule from); the loss
    stage's are ``"fb"``: its forward and backward call, then its update.
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
