"""Several training steps in one compiled function: a pipeline with no client call between its steps.

Usage::

    ms = MultiStep(step, steps_per_call=16, inflight=2)   # step: a warm MeteredStep
    ms.warm([16, 4])                                        # trace and place, updates undone
    losses, accs = ms.run(xs, ys)                           # n stacked batches: n steps, n losses and accuracies

Why: a step of a small model computes for a few milliseconds per device, and every call from the client costs
the cores the workers need; and the whole-step function runs its steps one after the other, so on a layer-wise
placement one part waits while the other computes. Here one call's body is ``n`` training steps, traced so that
they overlap as PipeDream's asynchronous pipeline does (``benchmarks/results/steps_per_call/``):

* **Staleness.** On every piece (a layer's share on one part) that runs ahead of the loss, step ``i``'s forward
  is traced before the update of step ``i - (inflight - 1)``. TensorFlow runs the reads and writes of one variable
  in the order they were traced, so there step ``i`` reads weights that miss at most the ``inflight - 1`` previous
  steps' updates, and nothing else orders its forward after their backward. The last stage's pieces (on the loss
  part, where the logits are: :func:`fresh_pieces`) are updated right after each step's gradients: in 1F1B order
  it runs a batch's backward right after its forward anyway, so its weights need not be stale, and making them
  so did not converge (3 in flight on every part: 0 of 6 seeded minivgg runs; 2: 4 of 5). As in PipeDream, only
  the stages that run ahead read older weights, also when the loss part holds the model's first layers as well
  as its last (they run ahead; fresh, they would wait for every step's whole backward). Each part's Adam step
  counter moves once a step; where a part holds both kinds of piece, the ahead pieces' Adam step is counted from
  the call's first step, so their update does not wait for a later step's fresh update. Each step's gradient is computed
  against the weights its own forward read (the forward's read is the backward's input: weight stashing, with no
  copy) and applied, in step order, to the current ones. The updates still pending at the end of a call are
  applied in it, so a call's first step sees every earlier update. ``inflight = 1`` (and sync mode) runs the steps
  strictly one after the other: exact sequential training, on logical devices and on worker processes (where
  eager writes are settled before a call: :mod:`hgpart.runtime.settle`).
* **Order.** TensorFlow's executor has no priorities, so a part could run the next batch's forward before the
  gradient another part waits for. A :class:`~hgpart.runtime.partitioned.CrossGate` makes each part read across
  parts for step ``i`` only after it has computed the gradients it sends back for step ``i - 1`` (1F1B).
* **Calls.** A segment of ``s`` steps runs as calls of ``steps_per_call`` steps and a remainder cut into powers of
  two, so a run compiles at most ``log2(steps_per_call) + 1`` functions. Checkpoints and validation cut segments
  (:class:`hgpart.runtime.api._EpochLoop`), so they fall on call boundaries.
* **Records.** The steps of one call finish together: each gets the call's start and end time, and its own loss
  and accuracy (before its update).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from hgpart.runtime.evaluation import MeteredStep
from hgpart.runtime.partitioned import CrossGate, PlacedModel
from hgpart.runtime.pipeline import StepRecord, Task, raise_first
from hgpart.runtime.step import read_gradients, restoring

from hgpart.errors import HgpartError
from hgpart.placement import STEPS_PER_CALL
from hgpart.placement import fresh_pieces as placement_fresh_pieces

__all__ = ["MultiStep", "Block", "fresh_pieces", "call_sizes", "run_calls", "STEPS_PER_CALL"]

def call_sizes(steps: int, steps_per_call: int) -> list[int]:
    """The calls of a segment of ``steps`` steps: full calls of ``steps_per_call``, then the remainder as powers of
    two, largest first (``call_sizes(45, 16) == [16, 16, 8, 4, 1]``)."""
    if steps_per_call < 1:
        raise HgpartError(f"{steps_per_call} steps per call requested", where="--steps-per-call",
                          fix="pass a number >= 1")
    full, rest = divmod(int(steps), int(steps_per_call))
    return [steps_per_call] * full + [1 << b for b in range(rest.bit_length() - 1, -1, -1) if rest >> b & 1]


def adam_steps(pm: PlacedModel, base: dict[int, Any], j: int) -> dict[int, Any]:
    """Adam's step of a call's step ``j`` on each part whose counter was ``base`` at the call's start (computed on
    that part's device)."""
    import tensorflow as tf

    out = {}
    for p, b in base.items():
        with tf.device(pm.devices[p]), tf.name_scope("update/t"):
            out[p] = b + float(j + 1)
    return out


def fresh_pieces(pm: PlacedModel) -> set[tuple[str, int]]:
    """The (layer, part) pieces whose update follows each step's gradients at once in the compiled pipeline: those
    on the loss part, except a whole layer there whose output reaches another part (it runs ahead of the loss, as
    the first parts do). A split layer's piece on the loss part stays fresh: such layers exchange pieces at every
    layer and do not pipeline, and making them stale did not converge (see the module docstring). The rule is
    :func:`hgpart.placement.fresh_pieces`, which the simulator shares."""
    return placement_fresh_pieces(pm.graph, pm.layout, pm.pieces, pm.loss_part)


class MultiStep:
    """``n`` training steps of a :class:`MeteredStep` per compiled call (see the module docstring)."""

    def __init__(self, step: MeteredStep, *, steps_per_call: int = STEPS_PER_CALL, inflight: int = 1,
                 gated: bool = True) -> None:
        if inflight < 1:
            raise HgpartError(f"{inflight} batches in flight requested", where="--inflight", fix="pass a number >= 1")
        call_sizes(0, steps_per_call)  # checks it
        self.step = step
        self.steps_per_call = int(steps_per_call)
        #: updates a step's forward may miss, plus one; 1 in sync mode (its micro-batches are the pipeline)
        self.inflight = 1 if step.micro > 1 else int(inflight)
        #: the 1F1B order of each part's reads (False: the executor's own order, to measure what the order buys)
        self.gated = bool(gated)
        #: where a call's images and labels are split into its steps' batches (the probe's resident feed)
        self.feed_device: str | None = None
        self._fns: dict[int, Any] = {}
        self._warm: set[int] = set()  # sizes whose function has run once (placed on the devices)

    @property
    def pm(self) -> Any:
        return self.step.pm

    def sizes(self, steps: int) -> list[int]:
        """The calls that run ``steps`` steps."""
        return call_sizes(steps, self.steps_per_call)

    # ---------------------------------------------------------------------------------------------- graph
    def _body(self, x: Any, y: Any, n: int) -> tuple[Any, Any]:
        import tensorflow as tf

        step, pm = self.step, self.pm
        tv = [pv.var for pv in pm.trainable]
        lag = self.inflight - 1
        with tf.device(self.feed_device or pm.host), tf.name_scope("feed/steps"):
            xs, ys = (tf.split(x, n), tf.split(y, n)) if n > 1 else ([x], [y])
        gate = CrossGate() if self.gated and lag > 0 and pm.k > 1 else None
        # the last stage's update right after its gradients (it runs a batch's backward right after its forward);
        # the pieces that run ahead read weights up to ``lag`` updates old
        fresh = fresh_pieces(pm) if lag > 0 else pm.pieces
        ahead = pm.pieces - fresh
        # a part's step counter moves once a step: with its fresh pieces' update if it has any, else its other one;
        # on a part with both, the stale pieces' Adam step counts from the call's first step (reading the counter
        # as it moves would order their update after the fresh pieces' update of a later step)
        moves = {p for _, p in fresh}
        late = {p for _, p in ahead} - moves
        base = {}
        for p in {p for _, p in ahead} & moves:
            with tf.device(pm.devices[p]), tf.name_scope("update/base"):
                base[p] = tf.identity(step.counters[pm.devices[p]].read_value())
        losses, accs, pending = [], [], []
        graph = tf.compat.v1.get_default_graph()
        for i in range(n):
            if gate is not None:
                gate.views.clear()
            first = len(graph.get_operations())
            f = step.forward_loss(xs[i], ys[i], scope=f"step{i}/fwd", gate=gate)
            crossing = gate.views if gate is not None else []
            # through this step's reads: from the handles, tracing n steps would take time quadratic in n
            grads = read_gradients(f.loss, tv, first, [v for _, v in crossing])
            if gate is not None:  # this step's cross-part gradients, before each part's next cross-part read
                gate.wait = {}
                for (p, _), g in zip(crossing, grads[len(tv):], strict=True):
                    if g is not None:
                        gate.wait.setdefault(p, []).append(g)
            step.update(grads[: len(tv)], f.stats, pieces=fresh)
            if ahead:
                pending.append((grads[: len(tv)], f.stats))
            if len(pending) > lag:  # step i - lag's update of the other pieces, traced after step i's forward
                step.update(*pending.pop(0), pieces=ahead, advance=late, steps=adam_steps(pm, base, i - lag))
            losses.append(f.loss)
            accs.append(step.accuracy(f))
        for j, p in enumerate(pending, start=n - len(pending)):
            step.update(*p, pieces=ahead, advance=late, steps=adam_steps(pm, base, j))
        with tf.device(pm.host), tf.name_scope("steps/out"):
            return tf.stack(losses), tf.stack(accs)

    def function(self, n: int) -> Any:
        """The concrete function of ``n`` steps (traced once)."""
        import tensorflow as tf

        if n not in self._fns:
            B = self.step.batch_size
            fn = tf.function(lambda x, y: self._body(x, y, n), autograph=False)
            self._fns[n] = fn.get_concrete_function(tf.TensorSpec((n * B, *self.pm.graph.input_shape), tf.float32),
                                                    tf.TensorSpec((n * B,), tf.int32))
        return self._fns[n]

    # ----------------------------------------------------------------------------------------------- call
    def run(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``n`` training steps on their batches ``x, y``, concatenated (``(n B, ...)``) or stacked
        (``(n, B, ...)``): their losses and accuracies."""
        import tensorflow as tf

        shape = tuple(self.pm.graph.input_shape)
        x = np.asarray(x, np.float32).reshape((-1, *shape))  # a view of stacked batches, not a copy
        y = np.asarray(y, np.int32).reshape(-1)
        n = len(y) // self.step.batch_size
        fn = self.function(n)
        with tf.device(self.pm.host):
            xt = tf.constant(x)
            yt = tf.constant(y)
        losses, accs = fn(xt, yt)
        return losses.numpy(), accs.numpy()

    def warm(self, runs: list[int]) -> None:
        """Trace, place and run once every call size that runs of ``runs`` steps make (:meth:`sizes`) and that has
        not run yet (the first call of each partitions its graph and registers it on every device), leaving every
        variable as it was: no update is kept."""
        B = self.step.batch_size
        shape = self.pm.graph.input_shape
        for n in sorted({m for r in runs for m in self.sizes(r)} - self._warm):
            with restoring(self.step.state):
                self.run(np.zeros((n * B, *shape), np.float32), np.zeros(n * B, np.int32))
            self._warm.add(n)


#: the batches of ``n`` steps from step ``i``, stacked: ``block(i, n) -> ((n, B, ...), (n, B))``
Block = Callable[[int, int], tuple[np.ndarray, np.ndarray]]


def run_calls(ms: MultiStep, n_tasks: int, task: Task, *, images_per_task: int,
              on_step: Callable[[StepRecord], None] | None = None,
              on_metrics: Callable[[int, float], None] | None = None, fix: str | None = None,
              block: Block | None = None) -> list[StepRecord]:
    """Run tasks ``0..n_tasks-1`` (``task(i)``: the batch of step ``i``) as calls of ``ms`` (:meth:`MultiStep.sizes`),
    one :class:`StepRecord` per step, in step order: the step's loss, and its call's start and end (seconds since
    the first call). ``on_metrics(i, accuracy)`` is called for every step before ``on_step`` gets its record.
    The signature of :func:`hgpart.runtime.stagepipe.run_staged`, so every driver is called the same way; a failure
    is raised as theirs are (:func:`hgpart.runtime.pipeline.raise_first`, with ``fix``). ``block``: a call's batches
    at once (:meth:`hgpart.runtime.data.StepFeed.block`: views of one read, no copy), else ``task`` per step."""
    try:
        return _run_calls(ms, n_tasks, task, images_per_task, on_step, on_metrics, block)
    except Exception as exc:  # noqa: BLE001 - one DeviceError (an HgpartError passes through)
        raise_first([exc], fix)
        raise


def _run_calls(ms: MultiStep, n_tasks: int, task: Task, images_per_task: int,
               on_step: Callable[[StepRecord], None] | None,
               on_metrics: Callable[[int, float], None] | None, block: Block | None) -> list[StepRecord]:
    recs: list[StepRecord] = []
    t0 = time.perf_counter()
    at = 0
    for n in ms.sizes(n_tasks):
        if block is not None:
            x, y = block(at, n)
        else:
            batches = [task(at + j) for j in range(n)]
            x, y = np.stack([b[0] for b in batches]), np.stack([b[1] for b in batches])
        start = time.perf_counter() - t0
        losses, accs = ms.run(x, y)
        end = time.perf_counter() - t0
        for j in range(n):
            if on_metrics is not None:
                on_metrics(at + j, float(accs[j]))
            rec = StepRecord(step=at + j, slot=0, loss=float(losses[j]), start_s=start, end_s=end,
                             batch_s=end - start, images_per_s=(len(recs) + 1) * images_per_task / max(end, 1e-9))
            recs.append(rec)
            if on_step is not None:
                on_step(rec)
        at += n
    return recs
