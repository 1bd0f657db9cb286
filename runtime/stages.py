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
from hgpart.runtime.step import Optimizer, TrainStep, apply_update

from hgpart.errors import BadOptionError
from hgpart.kinds import Role, tfops
from hgpart.placement import pipeline_runs

__all__ = ["PIPELINES", "Piece", "Stage", "StagedStep", "check_pipeline", "plan_stages"]

#: how training steps run (see :meth:`hgpart.runtime.api.PartitionedModel.from_placement`)
PIPELINES = ("auto", "stages", "graph", "compiled")


def check_pipeline(pipeline: str) -> str:
    """``pipeline`` if it is one of :data:`PIPELINES`, else one BadOptionError."""
    if pipeline not in PIPELINES:
        raise BadOptionError(f"unknown pipeline {pipeline!r}", where="--pipeline", fix=f"use one of {PIPELINES}",
                             option="--pipeline", value=pipeline)
    return pipeline


#: a piece: the columns of layer output ``name`` that part ``q`` owns (``(input, -1)``: the whole model input)
Piece = tuple[str, int]


@dataclass(frozen=True)
class Stage:
    """A maximal run of consecutive layer pieces (topological order) that all sit on one part."""

    index: int
    part: int
    layers: tuple[str, ...]  # the layers whose piece on ``part`` this stage computes, in order
    inputs: tuple[Piece, ...]  # pieces made elsewhere (or the model input) that this stage reads
    outputs: tuple[Piece, ...]  # pieces made here that later stages read
    loss: bool  # computes the loss and the accuracy (from every piece of the output layer)


def _pieceable(pm: PlacedModel, layer: Any) -> bool:
    """Whether ``layer`` can run as one piece per owning part (else it must sit on one part)."""
    return len(pm.layout[layer.name]) <= 1 or pm.pl.splits_piecewise(layer)


def _deps(pm: PlacedModel, layer: Any, p: int, input_name: str) -> list[Piece]:
    """The pieces that layer ``layer``'s piece on part ``p`` reads."""
    out: list[Piece] = []
    for inp in dict.fromkeys(layer.inputs):
        if inp == input_name:
            out.append((inp, -1))
        elif layer.definition.role is Role.VERTEX:  # its view of the input: the pieces holding needed channels
            chans = pm.view_channels[(inp, p)]
            c = len(pm.owner[inp])
            out += [(inp, q) for q, idx in sorted(pm.layout[inp].items()) if np.isin(idx % c, chans).any()]
        elif p in pm.layout[inp]:
            out.append((inp, p))
    return out


def plan_stages(pm: PlacedModel) -> list[Stage] | None:
    """The placement's stages, or None when a split layer cannot run piecewise (fine-grain convolutions, layer
    normalisation), or when a stage would read a piece made by a later stage."""
    graph = pm.graph
    input_name = next(ly.name for ly in graph.layers if ly.definition.role is Role.INPUT)
    placed = [layer for layer in graph.layers if layer.definition.role is not Role.INPUT]
    if not all(_pieceable(pm, layer) for layer in placed):
        return None
    runs = pipeline_runs([(layer.name, list(pm.layout[layer.name])) for layer in placed], pm.loss_part)
    where: dict[Piece, int] = {(input_name, -1): -1}
    for s, (p, names) in enumerate(runs):
        where.update({(name, p): s for name in names})
    by_name = {layer.name: layer for layer in placed}
    deps = {piece: _deps(pm, by_name[piece[0]], piece[1], input_name) for piece in where if piece[1] >= 0}
    out = graph.output_layer.name
    out_pieces = [(out, q) for q in sorted(pm.layout[out])]
    last = len(runs) - 1
    readers: dict[Piece, set[int]] = {}
    ins: list[dict[Piece, None]] = [{} for _ in runs]
    for piece, ds in deps.items():
        s = where[piece]
        for d in ds:
            if where[d] > s:
                return None
            if where[d] != s:
                ins[s][d] = None
                readers.setdefault(d, set()).add(s)
    for d in out_pieces:
        if where[d] != last:
            ins[last][d] = None
            readers.setdefault(d, set()).add(last)
    stages = []
    for s, (p, names) in enumerate(runs):
        outs = tuple(pc for pc in readers if where[pc] == s)
        stages.append(Stage(s, p, tuple(names), tuple(ins[s]), tuple(sorted(outs)), s == last))
    return stages


class _OnePiece(dict):
    """``PlacedModel.layout`` as a layer being built sees it: its own entry is only the stage's part (so the
    kind builds that part's piece), every other tensor keeps its full layout (views and positions need it)."""

    current: tuple[str, int] | None = None

    def __getitem__(self, key: str) -> Any:
        full = super().__getitem__(key)
        if self.current is not None and key == self.current[0]:
            p = self.current[1]
            return {p: full[p]}
        return full


@dataclass
class _StageFns:
    """The compiled functions of one stage and the variables it updates."""

    stage: Stage
    device: str
    forward: Any  # tf.function: inputs (+ labels) -> outputs (+ loss, hits)
    apply: Any  # tf.function: gradients -> the optimizer updates of the stage's variables
    variables: list[Any] = field(default_factory=list)  # the trainable tf.Variables, in apply's order
    #: the loss stage's forward and backward as one tf.function (None on the other stages)
    fused: Any = None
    pending: list[Any] | None = None  # sync mode: the summed gradients of the step's micro-batches so far
    count: int = 0  # sync mode: backward calls made


class StagedStep:
    """The stages of a placed model as compiled single-device functions, sharing ``step``'s optimizer state."""

    def __init__(self, step: TrainStep, stages: list[Stage]) -> None:
        import tensorflow as tf

        self.step, self.stages = step, stages
        pm = step.pm
        self.pm = pm
        self.input_name = next(ly.name for ly in pm.graph.layers if ly.definition.role is Role.INPUT)
        #: the stage making every piece (the model input: none)
        self.stage_of: dict[Piece, int] = {(n, st.part): st.index for st in stages for n in st.layers}
        # the device's step counter is advanced by its first stage in forward order (its last backward)
        first_on: dict[int, int] = {}
        for st in stages:
            first_on.setdefault(st.part, st.index)
        index_of = {id(pv.var): i for i, pv in enumerate(pm.trainable)}
        self.fns: list[_StageFns] = []
        for st in stages:
            dev = pm.devices[st.part]
            pvs = [pv for pv in pm.trainable if pv.layer in set(st.layers) and pv.part == st.part]
            slots = [step.slots[index_of[id(pv.var)]] for pv in pvs]
            fwd = self._forward_fn(st)
            app = tf.function(self._apply_fn(st, pvs, slots, bump=first_on[st.part] == st.index))
            f = _StageFns(st, dev, tf.function(fwd), app, [pv.var for pv in pvs])
            if st.loss:
                f.fused = tf.function(self._fused_fn(st, fwd, f.variables))
            self.fns.append(f)

    # --------------------------------------------------------------------------------------------- graphs
    def _forward_fn(self, st: Stage) -> Any:
        import tensorflow as tf

        pm, ch, p = self.pm, self.pm.channels, st.part
        rt = copy.copy(pm)  # the same model, every part mapped to this stage's device: all ops land there
        rt.devices = [pm.devices[p]] * pm.k
        layout = _OnePiece(pm.layout)
        rt.layout = layout
        graph = pm.graph
        out_name = graph.output_layer.name

        def split(t: str, pieces: dict[int, Any]) -> _Split:
            return _Split(pieces, {q: pm.layout[t][q] for q in pieces}, ch[t])

        def fwd(*args: Any) -> Any:
            have: dict[str, dict[int, Any]] = {}
            for (t, q), a in zip(st.inputs, args, strict=False):
                if t == self.input_name:
                    have[t] = {r: tfops.take_channels(a, idx) for r, idx in pm.layout[t].items()}
                else:
                    have.setdefault(t, {})[q] = a
            views: dict = {}
            bn: list = []
            with tf.device(rt.devices[0]):
                for name in st.layers:
                    layer = graph.layer(name)
                    vertex = layer.definition.role is Role.VERTEX
                    vals = {inp: split(inp, dict(have.get(inp, {})) if vertex
                                       else {q: a for q, a in have.get(inp, {}).items() if q == p})
                            for inp in layer.inputs}
                    layout.current = (name, p)
                    try:
                        with tf.name_scope(f"stage{st.index}/{name}"):
                            made = layer.definition.forward(rt, layer, None, vals, views, True, bn, "fwd")
                    finally:
                        layout.current = None
                    have.setdefault(name, {})[p] = made[p]
                for mm, mv, mean, var, mom in bn:
                    mm.var.assign(mm.var * mom + mean * (1.0 - mom))
                    mv.var.assign(mv.var * mom + var * (1.0 - mom))
                outs = [have[t][q] for t, q in st.outputs]
                if not st.loss:
                    return outs
                y = args[len(st.inputs)]
                qs = sorted(pm.layout[out_name])
                logits = tf.concat([have[out_name][q] for q in qs], axis=-1) if len(qs) > 1 else have[out_name][qs[0]]
                idx = np.concatenate([pm.layout[out_name][q] for q in qs])
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
            powers = (tfops.adam_powers(t, step.opt.beta_1, step.opt.beta_2, grads[0].dtype)
                      if t is not None and grads and step.opt.kind is Optimizer.ADAM else None)
            for pv, g, sl in zip(pvs, grads, slots, strict=True):
                apply_update(step.opt, pv.var, g, sl, t, powers=powers)
            if bump and counter is not None:
                counter.assign_add(1.0)

        return apply

    def _fused_fn(self, st: Stage, fwd: Any, variables: list[Any]) -> Any:
        """The loss stage's forward and backward in one graph: ``(*inputs, labels, scale) -> [metrics (loss,
        accuracy), *input gradients, *variable gradients]``. In 1F1B the last stage runs a batch's backward right
        after its forward, so one call does both: no tape on the client and one fetch for the loss and the
        accuracy. The update stays a call of its own, made after the input gradients are sent on: a function's
        outputs come back only when all of it has run, so an update inside would hold up the stages waiting
        for the gradients (by the time Adam takes over VGG16's fully connected layers)."""
        import tensorflow as tf

        n_in = len(st.inputs)
        watch = [i for i, (t, _) in enumerate(st.inputs) if t != self.input_name]

        def fused(*args: Any) -> Any:
            ins, labels, scale = list(args[:n_in]), args[n_in], args[n_in + 1]
            with tf.GradientTape(watch_accessed_variables=False) as tape:
                for i in watch:
                    tape.watch(ins[i])
                for v in variables:
                    tape.watch(v)
                outs = fwd(*ins, labels)
                loss, acc = outs[-2], outs[-1]
            res = tape.gradient(loss, [ins[i] for i in watch] + variables)
            in_grads = [tf.zeros_like(ins[i]) if g is None else g * scale for i, g in zip(watch, res, strict=False)]
            var_grads = [tf.zeros_like(v) if g is None else g * scale
                         for v, g in zip(variables, res[len(watch):], strict=True)]
            return [tf.stack([loss, acc]), *in_grads, *var_grads]

        return fused

    # ---------------------------------------------------------------------------------------------- calls
    def fused(self, s: int, inputs: list[Any], labels: Any, micro: int = 1) -> tuple[Any, list[Any], list[Any]]:
        """The loss stage's forward and backward of one batch in one call on its device; returns the batch's
        ``[loss, accuracy]`` (one tensor), the gradients of its inputs (None for the model input) and those of
        its variables, for :meth:`apply`. ``micro`` > 1 (sync mode): the gradients are scaled by ``1 / micro``."""
        import tensorflow as tf

        f = self.fns[s]
        st = f.stage
        with tf.device(f.device):
            res = f.fused(*inputs, labels, 1.0 / micro)
        n = sum(1 for t, _ in st.inputs if t != self.input_name)
        return res[0], self._per_input(st, res[1:1 + n]), list(res[1 + n:])

    def forward(self, s: int, inputs: list[Any]) -> tuple[Any, list[Any]]:
        """Stage ``s``'s forward call on its device under a new tape; returns (tape, outputs). Not for the loss
        stage, whose forward and backward are one call (:meth:`fused`)."""
        import tensorflow as tf

        f = self.fns[s]
        watched = [a for (t, _), a in zip(f.stage.inputs, inputs, strict=True) if t != self.input_name]
        with tf.GradientTape(watch_accessed_variables=True) as tape:
            for a in watched:
                tape.watch(a)
            with tf.device(f.device):
                outs = f.forward(*inputs)
        return tape, list(outs)

    def backward(self, s: int, tape: Any, inputs: list[Any], outs: list[Any],
                 grads: list[Any]) -> tuple[list[Any], list[Any]]:
        """Stage ``s``'s backward on its device; returns the gradients of its inputs (None for the model input)
        and of its variables, for :meth:`apply`. The two are separate calls so that the caller can send the
        input gradients on to the stages waiting for them before this device spends time on its update."""
        import tensorflow as tf

        f = self.fns[s]
        st = f.stage
        with tf.device(f.device):
            srcs = [a for (t, _), a in zip(st.inputs, inputs, strict=True) if t != self.input_name]
            res = tape.gradient(list(outs[: len(st.outputs)]), [*srcs, *f.variables], output_gradients=list(grads))
            var_grads = [g if g is not None else tf.zeros_like(v)
                         for v, g in zip(f.variables, res[len(srcs):], strict=True)]
        return self._per_input(st, res[: len(srcs)]), var_grads

    def _per_input(self, st: Stage, grads: Any) -> list[Any]:
        """``grads`` (one per input of ``st`` other than the model input) as one entry per input, None for the
        model input."""
        it = iter(grads)
        return [None if t == self.input_name else next(it) for t, _ in st.inputs]

    def apply(self, s: int, var_grads: list[Any], micro: int = 1) -> None:
        """Stage ``s``'s optimizer update from one backward's ``var_grads``; with ``micro`` > 1 (sync mode) the
        gradients of ``micro`` consecutive backwards (one step's micro-batches) are summed on the device and
        applied once, after the last of them."""
        import tensorflow as tf

        f = self.fns[s]
        with tf.device(f.device):
            if micro > 1:
                acc = f.pending
                f.pending = var_grads if acc is None else [a + g for a, g in zip(acc, var_grads, strict=True)]
                f.count += 1
                if f.count % micro == 0:
                    f.apply(*f.pending)
                    f.pending = None
            else:
                f.apply(*var_grads)
