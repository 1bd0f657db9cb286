"""A placement cut into pipeline stages: one compiled single-device function per stage, forward and backward.

Usage::

    stages = plan_stages(pm)                  # None unless every layer sits wholly on one part
    staged = StagedStep(step, stages)         # shares the step's optimizer slots and step counters
    run_staged(staged, n_tasks, task, images_per_task=32, window=2)   # 1F1B, see hgpart.runtime.stagepipe

Why: TensorFlow runs one call of a multi-device function as one unit on every worker it touches. Two calls of
the whole-step function from two client threads do not overlap on the workers (measured: two in flight run at
the speed of one), so a whole-step function cannot pipeline batches. Calls of *single-device* functions on
different workers do overlap. So when every layer of a placement lies on one part (layer-wise placements and
the pipeline-shaped coarse placements that chain CNNs get at small K), the layers are cut, in topological
order, into stages: maximal runs of consecutive layers on one part. Each stage is one ``tf.function`` placed on
its device. Its forward call runs under a ``tf.GradientTape`` of the calling thread, so TensorFlow keeps the
stage's intermediate activations on its worker and its backward function reuses them (no recomputation); the
backward call runs under the stage's device, so every gradient op is placed where its forward op ran. The
weights a backward pass uses are the ones its forward pass read: PipeDream's weight stashing, for free.

Tensors crossing stages are copied once per (tensor, consuming device) with an eager copy between the workers;
a gradient of a tensor read by several stages is summed on the producing device. The bytes are those of the
placement's cut nets (whole feature maps: every reader of a layer on another part reads all its channels).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hgpart.runtime.partitioned import PlacedModel, _Split
from hgpart.runtime.step import TrainStep, apply_update

from hgpart.errors import BadOptionError
from hgpart.kinds import Role

__all__ = ["PIPELINES", "Stage", "StagedStep", "check_pipeline", "plan_stages"]

#: how asynchronous steps run (see :meth:`hgpart.runtime.api.PartitionedModel.from_placement`)
PIPELINES = ("auto", "stages", "graph")


def check_pipeline(pipeline: str) -> str:
    """``pipeline`` if it is one of :data:`PIPELINES`, else one BadOptionError."""
    if pipeline not in PIPELINES:
        raise BadOptionError(f"unknown pipeline {pipeline!r}", where="--pipeline", fix=f"use one of {PIPELINES}",
                             option="--pipeline", value=pipeline)
    return pipeline


@dataclass(frozen=True)
class Stage:
    """A maximal run of consecutive layers (topological order) that all sit on one part."""

    index: int
    part: int
    layers: tuple[str, ...]
    inputs: tuple[str, ...]  # tensors (layer outputs, or the model input) made elsewhere and read here
    outputs: tuple[str, ...]  # tensors made here and read by later stages
    loss: bool  # holds the output layer: computes the loss and the accuracy


def _single_part(pm: PlacedModel, name: str) -> int | None:
    """The one part holding all of layer ``name`` (channels, filters and fine-grain pairs), or None."""
    layer = pm.graph.layer(name)
    parts = set(np.unique(pm.owner[name]).tolist())
    if layer.definition.role is Role.VERTEX:
        parts |= set(np.unique(pm.filters(layer)).tolist())
        if pm.fine(layer):
            parts |= set(np.unique(pm.pl.layer_parts[name]["channels"]).tolist())
    return parts.pop() if len(parts) == 1 else None


def plan_stages(pm: PlacedModel) -> list[Stage] | None:
    """The placement's stages, or None when some layer is split over parts (then no stage structure exists)."""
    graph = pm.graph
    run: list[tuple[int, list[str]]] = []
    for layer in graph.layers:
        if layer.definition.role is Role.INPUT:
            continue
        p = _single_part(pm, layer.name)
        if p is None:
            return None
        if run and run[-1][0] == p:
            run[-1][1].append(layer.name)
        else:
            run.append((p, [layer.name]))
    stage_of = {name: s for s, (_, names) in enumerate(run) for name in names}
    readers: dict[str, set[int]] = {}
    for layer in graph.layers:
        for t in dict.fromkeys(layer.inputs):
            s = stage_of.get(layer.name)
            if s is not None and stage_of.get(t) != s:
                readers.setdefault(t, set()).add(s)
    out_name = graph.output_layer.name
    stages = []
    for s, (p, names) in enumerate(run):
        mine = set(names)
        ins = tuple(dict.fromkeys(t for n in names for t in graph.layer(n).inputs if t not in mine))
        outs = tuple(n for n in names if readers.get(n))
        stages.append(Stage(s, p, tuple(names), ins, outs, out_name in mine))
    return stages


def _channels(pm: PlacedModel) -> dict[str, int]:
    """The ``channels`` of every layer's :class:`_Split` (what :meth:`PlacedModel._layer` computes)."""
    ch: dict[str, int] = {}
    for layer in pm.graph.layers:
        ch[layer.name] = layer.definition.split_channels(layer, ch[layer.inputs[0]] if layer.inputs else 0)
    return ch


@dataclass
class _StageFns:
    """The compiled functions of one stage and the variables it updates."""

    stage: Stage
    device: str
    forward: Any  # tf.function: inputs (+ labels) -> outputs (+ loss, hits)
    apply: Any  # tf.function: gradients -> the optimizer updates of the stage's variables
    variables: list[Any] = field(default_factory=list)  # the trainable tf.Variables, in apply's order
    pending: list[Any] | None = None  # sync mode: the summed gradients of the step's micro-batches so far
    count: int = 0  # sync mode: backward calls made


class StagedStep:
    """The stages of a placed model as compiled single-device functions, sharing ``step``'s optimizer state."""

    def __init__(self, step: TrainStep, stages: list[Stage]) -> None:
        import tensorflow as tf

        self.step, self.stages = step, stages
        pm = step.pm
        self.pm = pm
        self.batch_size = step.batch_size
        self.input_name = next(ly.name for ly in pm.graph.layers if ly.definition.role is Role.INPUT)
        self._ch = _channels(pm)
        self.stage_of = {n: st.index for st in stages for n in st.layers}
        # the device's step counter is advanced by its first stage in forward order (its last backward)
        first_on: dict[int, int] = {}
        for st in stages:
            first_on.setdefault(st.part, st.index)
        index_of = {id(pv.var): i for i, pv in enumerate(pm.trainable)}
        self.fns: list[_StageFns] = []
        for st in stages:
            dev = pm.devices[st.part]
            pvs = [pv for pv in pm.trainable if pv.layer in set(st.layers)]
            slots = [step.slots[index_of[id(pv.var)]] for pv in pvs]
            fwd = tf.function(self._forward_fn(st))
            app = tf.function(self._apply_fn(st, pvs, slots, bump=first_on[st.part] == st.index))
            self.fns.append(_StageFns(st, dev, fwd, app, [pv.var for pv in pvs]))

    # --------------------------------------------------------------------------------------------- graphs
    def _forward_fn(self, st: Stage) -> Any:
        import tensorflow as tf

        pm, ch = self.pm, self._ch
        rt = copy.copy(pm)  # the same model, every part mapped to this stage's device: all ops land there
        rt.devices = [pm.devices[st.part]] * pm.k
        graph = pm.graph

        def fwd(*args: Any) -> Any:
            vals: dict[str, _Split] = {}
            for t, a in zip(st.inputs, args, strict=False):
                lay = pm.layout[t]
                if t == self.input_name:
                    full = np.arange(int(a.shape[-1]))
                    tensors = {q: a if np.array_equal(idx, full) else tf.gather(a, idx, axis=-1)
                               for q, idx in lay.items()}
                else:
                    (q,) = lay.keys()
                    tensors = {q: a}
                vals[t] = _Split(tensors, lay, ch[t])
            views: dict = {}
            bn: list = []
            with tf.device(rt.devices[0]):
                for name in st.layers:
                    layer = graph.layer(name)
                    with tf.name_scope(f"stage{st.index}/{name}"):
                        tensors = layer.definition.forward(rt, layer, None, vals, views, True, bn, "fwd")
                    vals[name] = _Split(tensors, pm.layout[name], ch[name])
                for mm, mv, mean, var, mom in bn:
                    mm.var.assign(mm.var * mom + mean * (1.0 - mom))
                    mv.var.assign(mv.var * mom + var * (1.0 - mom))
                outs = [next(iter(vals[t].tensors.values())) for t in st.outputs]
                if not st.loss:
                    return outs
                y = args[len(st.inputs)]
                o = vals[graph.output_layer.name]
                logits = next(iter(o.tensors.values()))
                idx = next(iter(o.index.values()))
                if not np.array_equal(idx, np.arange(len(idx))):
                    logits = tf.gather(logits, np.argsort(idx), axis=-1)
                ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
                hits = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), y),
                                             tf.float32))
                return [*outs, tf.reduce_mean(ce), hits / tf.cast(tf.shape(y)[0], tf.float32)]

        return fwd

    def _apply_fn(self, st: Stage, pvs: list[Any], slots: list[list[Any]], *, bump: bool) -> Any:
        step = self.step
        counter = step.counters.get(self.pm.devices[st.part])

        def apply(*grads: Any) -> None:
            t = counter + 1.0 if counter is not None else None
            for pv, g, sl in zip(pvs, grads, slots, strict=True):
                apply_update(step.opt, pv.var, g, sl, t)
            if bump and counter is not None:
                counter.assign_add(1.0)

        return apply

    # ---------------------------------------------------------------------------------------------- calls
    def forward(self, s: int, inputs: list[Any], labels: Any | None) -> tuple[Any, list[Any]]:
        """Stage ``s``'s forward call on its device under a new tape; returns (tape, outputs)."""
        import tensorflow as tf

        f = self.fns[s]
        args = [*inputs, labels] if f.stage.loss else inputs
        watched = [a for t, a in zip(f.stage.inputs, inputs, strict=True) if t != self.input_name]
        with tf.GradientTape(watch_accessed_variables=True) as tape:
            for a in watched:
                tape.watch(a)
            with tf.device(f.device):
                outs = f.forward(*args)
        return tape, list(outs)

    def backward(self, s: int, tape: Any, inputs: list[Any], outs: list[Any], grads: list[Any],
                 micro: int = 1) -> list[Any]:
        """Stage ``s``'s backward on its device, then its optimizer update; returns the gradients of its inputs
        (None for the model input).

        ``micro`` > 1 (sync mode): the gradients of ``micro`` consecutive calls (one step's micro-batches) are
        summed on the device and their mean is applied once, after the last of them.
        """
        import tensorflow as tf

        f = self.fns[s]
        st = f.stage
        with tf.device(f.device):
            targets = list(outs[: len(st.outputs)])
            out_grads = list(grads)
            if st.loss:
                targets.append(outs[len(st.outputs)])
                out_grads.append(tf.constant(1.0 / micro))
            srcs = [a for t, a in zip(st.inputs, inputs, strict=True) if t != self.input_name]
            res = tape.gradient(targets, [*srcs, *f.variables], output_gradients=out_grads)
            var_grads = [g if g is not None else tf.zeros_like(v)
                         for v, g in zip(f.variables, res[len(srcs):], strict=True)]
            if micro > 1:
                acc = f.pending
                f.pending = var_grads if acc is None else [a + g for a, g in zip(acc, var_grads, strict=True)]
                f.count += 1
                if f.count % micro == 0:
                    f.apply(*f.pending)
                    f.pending = None
            else:
                f.apply(*var_grads)
        it = iter(res[: len(srcs)])
        return [None if t == self.input_name else next(it) for t in st.inputs]
