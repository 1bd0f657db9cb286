"""One training step of a partitioned model: forward, collocated gradients, per-device optimizer updates.

Usage::

    opt = OptimizerSpec("adam", lr=1e-3)
    step = TrainStep(pm, opt, batch_size=32, micro_batches=1)
    loss = step(x, y)          # numpy in, float out; thread-safe (the async pipeline calls it concurrently)

Collocation: gradients come from ``tf.gradients`` inside one ``tf.function`` graph, which places every gradient
op with its forward op, so a variable's gradient is computed on the device that holds the variable; the update
(SGD with momentum or Adam, Keras 3's formulas, one fused and locked kernel per variable: :func:`apply_update`)
runs under that variable's ``tf.device`` with its slots created there. Each device keeps its own Adam step counter.

Micro-batches: the mini-batch is split into ``micro_batches`` equal parts, each with its own forward pass
(BatchNorm uses that micro-batch's statistics, as Keras would when called on it), and the loss is their mean, so
one ``tf.gradients`` call accumulates the gradients and one update is applied per mini-batch. Independent
micro-batches run concurrently on the devices (a synchronous pipeline). BatchNorm moving statistics are updated
once per micro-batch in order, exactly as sequential Keras calls would. So with BatchNorm and more than one
micro-batch the step equals single-device training *with the same micro-batching*, not plain training on the
whole mini-batch; ``micro_batches=1`` is the exact-equivalence mode.

Warm-up: the first call of the compiled step partitions its graph, registers the pieces on every device and
allocates memory. :meth:`TrainStep.warm_up` pays that cost on a batch and then puts back every variable the step
wrote (:func:`restoring`: weights, BatchNorm moving statistics, optimizer slots and step counters), so a run of N
steps makes exactly N updates.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
from hgpart.runtime.partitioned import CrossGate, PlacedModel
from hgpart.runtime.settle import settle

from hgpart.errors import HgpartError
from hgpart.kinds.tfops import adam_powers, fused_adam

__all__ = ["Optimizer", "OptimizerSpec", "TrainStep", "Forward", "OPTIMIZERS", "apply_update", "restoring",
           "read_gradients"]


class Optimizer(Enum):
    """The update rule: SGD with momentum or Adam (the value is the name the CLI and the logs use)."""

    MOMENTUM = "momentum"
    ADAM = "adam"

    @property
    def slot_count(self) -> int:
        """Slot variables per parameter: the momentum, or Adam's first and second moments."""
        return 1 if self is Optimizer.MOMENTUM else 2


OPTIMIZERS = tuple(o.value for o in Optimizer)


@dataclass(frozen=True)
class OptimizerSpec:
    """SGD with momentum (Keras ``SGD(momentum=...)``) or Adam (Keras ``Adam``), with Keras's defaults."""

    name: str = "adam"
    lr: float = 1e-3
    momentum: float = 0.9
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-7

    def __post_init__(self) -> None:
        if self.name not in OPTIMIZERS:
            raise HgpartError(f"unknown optimizer {self.name!r}", where="--optimizer", fix=f"use one of {OPTIMIZERS}")
        if not self.lr > 0:
            raise HgpartError(f"learning rate {self.lr} must be > 0", where="--lr")

    @property
    def kind(self) -> Optimizer:
        """The update rule named by ``name`` (checked when the spec is made)."""
        return Optimizer(self.name)

    def keras(self) -> Any:
        """The equivalent Keras optimizer (for single-device reference training)."""
        import keras

        if self.kind is Optimizer.ADAM:
            return keras.optimizers.Adam(self.lr, beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon)
        return keras.optimizers.SGD(self.lr, momentum=self.momentum)


@dataclass(frozen=True)
class Forward:
    """The graph of one batch's forward passes (:meth:`TrainStep.forward_loss`): its mean loss, and per micro-batch
    the BatchNorm statistics (for :meth:`TrainStep.update`), the logits and the labels."""

    loss: Any
    stats: list[list]
    logits: list[Any]
    labels: list[Any]


class TrainStep:
    """A compiled training step over the partitioned model (see the module docstring)."""

    def __init__(self, pm: PlacedModel, opt: OptimizerSpec, *, batch_size: int, micro_batches: int = 1) -> None:
        import tensorflow as tf

        if micro_batches < 1 or batch_size % micro_batches:
            raise HgpartError(f"batch size {batch_size} is not a multiple of {micro_batches} micro-batches",
                              where="train", fix="choose a batch size divisible by the number of micro-batches")
        self.pm, self.opt = pm, opt
        self.batch_size, self.micro = int(batch_size), int(micro_batches)
        self.slots: dict[int, list[Any]] = {}
        self.counters: dict[str, Any] = {}
        for i, pv in enumerate(pm.trainable):
            dev = pm.devices[pv.part]
            with tf.device(dev):
                n = opt.kind.slot_count
                self.slots[i] = [tf.Variable(tf.zeros_like(pv.var), trainable=False,
                                             name=f"{pv.var.name.split(':')[0]}_slot{s}") for s in range(n)]
                if dev not in self.counters:
                    self.counters[dev] = tf.Variable(0.0, trainable=False, name=f"adam_step_p{pv.part}")
        settle()  # the slots' and counters' creation, before a compiled call reads them
        shape = (self.batch_size, *pm.graph.input_shape)
        self._fn = tf.function(self._step)
        self.concrete = self._fn.get_concrete_function(
            tf.TensorSpec(shape, tf.float32), tf.TensorSpec((self.batch_size,), tf.int32))

    # ---------------------------------------------------------------- graph
    def _step(self, x: Any, y: Any) -> Any:
        import tensorflow as tf

        f = self.forward_loss(x, y)
        self.update(tf.gradients(f.loss, [pv.var for pv in self.pm.trainable]), f.stats)
        return f.loss

    def forward_loss(self, x: Any, y: Any, *, scope: str = "fwd", gate: CrossGate | None = None) -> Forward:
        """The graph of the batch's forward passes (one per micro-batch, scopes ``<scope><i>``) and mean loss on the
        loss device, with each micro-batch's logits and BatchNorm statistics (for :meth:`update`). ``gate``: the
        order of the passes' cross-part reads (:class:`~hgpart.runtime.partitioned.CrossGate`)."""
        import tensorflow as tf

        pm = self.pm
        loss_dev = pm.devices[pm.loss_part]
        with tf.device(pm.host), tf.name_scope("feed/split"):
            xs = tf.split(x, self.micro) if self.micro > 1 else [x]
            ys = tf.split(y, self.micro) if self.micro > 1 else [y]
        losses, stats, logits = [], [], []
        for i in range(self.micro):
            bn: list = []
            lg = pm.forward(xs[i], training=True, bn_stats=bn, scope=f"{scope}{i}", gate=gate)
            stats.append(bn)
            logits.append(lg)
            with tf.device(loss_dev), tf.name_scope("loss"):
                ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ys[i], logits=lg)
                losses.append(tf.reduce_mean(ce))
        with tf.device(loss_dev), tf.name_scope("loss"):
            loss = tf.add_n(losses) / float(self.micro) if self.micro > 1 else losses[0]
        return Forward(loss, stats, logits, ys)

    def update(self, grads: list[Any], stats: list[list], *, pieces: set[tuple[str, int]] | None = None,
               advance: set[int] | None = None, steps: dict[int, Any] | None = None) -> None:
        """The graph of one optimizer update: ``grads`` (one per trainable variable, None for none) applied on each
        variable's device, every device's step counter advanced, the BatchNorm moving statistics updated.

        A step's update applied in pieces (:mod:`hgpart.runtime.multistep`): ``pieces``, the (layer, part) pairs
        whose variables and statistics this update writes; ``advance``, the parts whose step counters it advances
        (default: every part it writes). On a part it writes without advancing, Adam's step is ``steps[part]``
        (its counter is advanced by another update of the same step, which this one must not wait for)."""
        import tensorflow as tf

        pm = self.pm
        mine = pm.pieces if pieces is None else pieces
        moves = {p for _, p in mine} if advance is None else advance
        powers: dict[int, Any] = {}  # per part: Adam's bias corrections of this update, shared by its variables
        for i, (pv, g) in enumerate(zip(pm.trainable, grads, strict=True)):
            if g is None or (pv.layer, pv.part) not in mine:
                continue
            if self.opt.kind is Optimizer.ADAM and pv.part not in powers:
                with tf.device(pm.devices[pv.part]), tf.name_scope("update/t"):  # the step count on its device too
                    t = self.counters[pm.devices[pv.part]] + 1.0 if pv.part in moves else (steps or {})[pv.part]
                    powers[pv.part] = adam_powers(t, self.opt.beta_1, self.opt.beta_2, g.dtype)
            with tf.device(pm.devices[pv.part]), tf.name_scope(f"update/{pv.layer}"):
                apply_update(self.opt, pv.var, g, self.slots[i], None, powers=powers.get(pv.part))
        devices = {pm.devices[p] for p in moves}
        for dev, c in self.counters.items():
            if dev in devices:
                with tf.device(dev), tf.name_scope("update/step"):
                    c.assign_add(1.0)
        self._bn_updates(stats, mine)

    def _bn_updates(self, stats: list[list], pieces: set[tuple[str, int]]) -> None:
        """Apply every micro-batch's moving-statistics update in order, on the statistic's device (``pieces``'
        statistics only)."""
        import tensorflow as tf

        if not stats or not stats[0]:
            return
        for j in range(len(stats[0])):
            mm, mv, _, _, mom = stats[0][j]
            if (mm.layer, mm.part) not in pieces:
                continue
            with tf.device(self.pm.devices[mm.part]), tf.name_scope("update/bn"):
                a, b = mm.var.read_value(), mv.var.read_value()
                for s in stats:
                    a = a * mom + s[j][2] * (1.0 - mom)
                    b = b * mom + s[j][3] * (1.0 - mom)
                mm.var.assign(a)
                mv.var.assign(b)

    # ------------------------------------------------------------------ call
    def __call__(self, x: np.ndarray, y: np.ndarray) -> float:
        import tensorflow as tf

        with tf.device(self.pm.host):
            xt = tf.constant(np.asarray(x, np.float32))
            yt = tf.constant(np.asarray(y, np.int32))
        return float(self.concrete(xt, yt).numpy())

    @property
    def state(self) -> list[Any]:
        """Every variable a step writes: weights, BatchNorm moving statistics, optimizer slots, step counters."""
        return ([pv.var for pv in self.pm.vars] + [s for slots in self.slots.values() for s in slots]
                + list(self.counters.values()))

    def warm_up(self, x: np.ndarray, y: np.ndarray) -> float:
        """Run the compiled step once on ``x, y`` (forward, backward, the first call's set-up on every device) and
        leave every variable as it was: the warm-up makes no update. Returns the batch's loss."""
        with restoring(self.state):
            return self(x, y)


def read_gradients(loss: Any, variables: Sequence[Any], first_op: int, extra: Sequence[Any] = ()) -> list[Any]:
    """``tf.gradients(loss, [*variables, *extra])`` inside a ``tf.function``, taken through the reads of each
    variable made by the ops from index ``first_op`` of the graph on (one step's forward), not through the
    variables' handles; None for a variable none of those reads reaches ``loss`` through.

    Why: ``tf.gradients`` first marks every op reachable from its ``xs``. From a variable's handle that is every
    op of every step traced so far that reads it, so a call of ``n`` steps spent time quadratic in ``n`` tracing
    their gradients (:mod:`hgpart.runtime.multistep`). A handle's gradient is the sum of its reads' gradients, so
    this builds the same backward ops and adds a variable's reads' gradients (one read each, in the usual case)
    on the variable's device, where ``tf.gradients`` would aggregate them too. Where the step uses a handle
    otherwise than by reading it whole (``tf.gather`` of a variable: ``ResourceGather``), the gradients are taken
    from the handles after all, so that no variable loses its gradient; and so they are where a variable found no
    read of its own while some read in the window matched no variable (a handle this matching missed)."""
    import tensorflow as tf

    graph = tf.compat.v1.get_default_graph()
    by_handle = {id(v.handle): j for j, v in enumerate(variables)}
    internal = {inner.ref(): by_handle[id(outer)] for outer, inner in graph.captures if id(outer) in by_handle}
    reads: list[list[Any]] = [[] for _ in variables]
    unmatched = other_use = False  # a read no variable matched; a use of a handle that is not a whole read
    for op in graph.get_operations()[first_op:]:
        if op.type == "ReadVariableOp" and op.inputs[0].ref() in internal:
            reads[internal[op.inputs[0].ref()]].append(op.outputs[0])
        elif op.type == "ReadVariableOp":
            unmatched = True
        elif any(t.ref() in internal for t in op.inputs):
            other_use = True
            break
    if other_use or (unmatched and not all(reads)):  # the slow, sure way (see above)
        return list(tf.gradients(loss, list(variables) + list(extra)))
    flat = [r for rs in reads for r in rs]
    got = tf.gradients(loss, flat + list(extra))
    out: list[Any] = []
    at = 0
    for v, rs in zip(variables, reads, strict=True):
        gs = [g for g in got[at : at + len(rs)] if g is not None]
        at += len(rs)
        if len(gs) > 1:
            with tf.device(v.device):
                gs = [tf.add_n(gs)]
        out.append(gs[0] if gs else None)
    return out + list(got[len(flat):])


@contextmanager
def restoring(variables: Sequence[Any]) -> Iterator[None]:
    """Snapshot ``variables`` (``tf.Variable``) on entry and assign the snapshot back on exit, even on error.

    Why: a compiled step's first call is slow (graph partitioning, kernel set-up, allocation) and must run
    before timing, but training on that call would make one update more than asked for. Each variable is
    read and written on its own device; nothing may run the variables concurrently meanwhile. The eager reads
    and writes are settled (:func:`hgpart.runtime.settle.settle`) before the block and before returning: on
    worker processes a compiled call is not ordered after eager ops.
    """
    saved = [v.read_value() for v in variables]  # a copy on each variable's device
    settle()  # the copies made before the block's compiled calls write the variables
    try:
        yield
    finally:
        for v, value in zip(variables, saved, strict=True):
            v.assign(value)
        settle()  # and the writes landed before the next compiled call reads them


def apply_update(o: OptimizerSpec, w: Any, g: Any, slots: list[Any], t: Any,
                 powers: tuple[Any, Any] | None = None) -> None:
    """Keras 3's SGD-momentum / Adam update of ``w`` with gradient ``g``, where it is called (under ``w``'s device).

    ``t`` is the 1-based step count for Adam's bias correction; or ``powers``, its corrections
    (:func:`hgpart.kinds.tfops.adam_powers`), made once for every variable a device updates at that step: per
    variable they were about ten small ops per step, a quarter of the ops of a compiled pipeline's call
    (:mod:`hgpart.runtime.multistep`), each traced, optimised and run. Shared by the model-parallel step and the
    data-parallel baselines, so every strategy optimises with the same formulas.

    TensorFlow's fused kernels run the update (``ResourceApplyAdam``: ``m += (g - m)(1 - b1)``,
    ``v += (g^2 - v)(1 - b2)``, ``w -= m lr sqrt(1 - b2^t) / (1 - b1^t) / (sqrt(v) + eps)``;
    ``ResourceApplyKerasMomentum``: ``m = m mu - lr g``, ``w += m``; Keras 3's formulas op for op) with
    ``use_locking``, so the variable and its slots change as one atomic step. Why: in asynchronous runs two batches
    update the same variable concurrently. With separate read and assign ops, one batch could read the first
    moment after the other batch wrote it but the second moment before: ``m`` then holds a large gradient that
    ``v`` does not, and ``m / sqrt(v)`` gives a step thousands of times the learning rate, enough to kill every
    ReLU of a layer (training then stays at chance).
    """
    import tensorflow as tf

    if o.kind is Optimizer.MOMENTUM:
        (m,) = slots
        tf.raw_ops.ResourceApplyKerasMomentum(var=w.handle, accum=m.handle, lr=tf.constant(o.lr, g.dtype), grad=g,
                                              momentum=tf.constant(o.momentum, g.dtype), use_locking=True)
        return
    m, v = slots
    fused_adam(w, m, v, g, t=t, lr=o.lr, beta_1=o.beta_1, beta_2=o.beta_2, epsilon=o.epsilon, powers=powers)
