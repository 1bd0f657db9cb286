"""The partitioned model: a placement executed with raw ``tf.Variable`` + ``tf.nn`` ops on K devices.

Usage::

    pm = PlacedModel(placement, keras_model, devices)   # weights copied from the Keras model
    probs = pm.predict(x)                                    # equals keras_model(x)
    pm.keras_weights()                                       # {layer: {"kernel": ..., ...}} back in Keras layout

How a placement becomes ops (thesis chapter 4, plus the fine grain it never implemented). Each layer's ops are
built by its kind's definition (``forward`` / ``make_variables`` in :mod:`hgpart.kinds`); this class gives them
the placement, the per-part views of every tensor and the per-part variables:

* Every layer output is a :class:`_Split` tensor: for each part ``q`` that owns some of its channels
  (``Placement.channel_parts``) one tensor on ``devices[q]`` holding those channels. ``index[q]`` records the
  original last-axis position of each column (channel, or ``h*W*C + c`` after Flatten), so channel order stays
  consistent end to end without runtime permutations: every weight slice is gathered from the Keras weights with
  the same index when the model is built, and scattered back with it by :meth:`keras_weights`.
* A vertex layer on part ``p`` reads a *view* of its input on ``devices[p]``: for each other part ``q`` the columns
  ``p`` needs that ``q`` owns (one slice made on ``q``, sent once), concatenated with ``p``'s own columns. One view
  per (tensor, destination part), shared by every reader there, so a column crosses to a part exactly once: the
  hypergraph's connectivity-minus-one rule.
* Coarse Conv2D/Dense/DepthwiseConv2D: one op per part over that part's filters. Fine Conv2D: each part convolves
  the input channels of its (filter, channel) pairs (one masked kernel variable over its channel x filter box;
  masked entries are zero and get zero gradient), sends one partial map per filter to the part owning the filter's
  reduction vertex, which sums, adds the bias and applies the activation. Layer-wise placements are coarse
  placements whose layers sit on one part.
* Fine-grain compute fidelity: a convolution over the whole box would execute every masked (zero) pair too. So
  the box is covered by a few dense rectangles (:func:`rectangles`: filters with the same channel set form an exact
  rectangle; rectangles are merged while there are more than 4 or a merge wastes <= 5% of the part's MACs), each
  one convolution over the rectangle's input channels and kernel slice. Channel selections here and in the views
  run through :func:`hgpart.kinds.tfops.take_channels` (a one-hot product for small channel counts, whose
  gradient is a product too, else a gather); ``benchmarks/results/channel_select/`` measures why.
  ``PlacedModel.compute`` gives, per (layer, part), the executed and the assigned forward MACs (exact, from the
  masks); ``compute_overhead()`` summarises them. Limitation: placements with more than 64 distinct channel
  sets in one part's layer (e.g. random ones) fall back to the bounding box of the used channels, so they can
  execute up to that box's MACs.
* Per-channel layers (BatchNorm, pooling, activation, dropout, zero padding), Flatten and Concatenate run per part
  on the channels that part owns; Add runs per part on the channels it owns, gathering channel j of every input.
* The logits are gathered on one *loss device* (the part owning most output channels); a final softmax is fused
  into the cross-entropy there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hgpart.runtime.settle import settle

from hgpart.errors import HgpartError
from hgpart.frontend import layer_graph_from_keras
from hgpart.kinds import Role, keras_layer, tfops
from hgpart.kinds.rects import rectangles
from hgpart.layergraph import Layer
from hgpart.placement import Placement

__all__ = ["PlacedModel", "PartVariable", "CrossGate", "rectangles", "check_keras_model"]


def check_keras_model(pl: Placement, keras_model: Any, *, where: str = "placement vs Keras model") -> None:
    """Refuse a Keras model whose layer graph is not the placement's (fingerprints differ): one HgpartError.

    Names both sides as they are: the placement file's model name and the Keras model's own name.
    """
    graph = layer_graph_from_keras(keras_model, name=str(getattr(keras_model, "name", "") or "keras model"))
    mine = pl.graph
    if graph.fingerprint() == mine.fingerprint():
        return
    if graph.name != mine.name:
        pl.check_model(graph, where=where)
    raise HgpartError(
        f"placement is for a model named {mine.name!r} {list(mine.input_shape)} whose layers (fingerprint "
        f"{mine.fingerprint()}) differ from those of the Keras model {graph.name!r} {list(graph.input_shape)} "
        f"(fingerprint {graph.fingerprint()})", where=where,
        fix="compile a placement for this model with `hgpart partition` (was the placement file edited?)")


@dataclass
class PartVariable:
    """One variable on one part and where its entries live in the Keras weight."""

    var: Any  # tf.Variable
    part: int
    layer: str
    weight: str  # "kernel" | "bias" | "gamma" | "beta" | "moving_mean" | "moving_variance"
    index: tuple[np.ndarray, ...]  # per trailing axis: positions in the Keras weight
    mask: np.ndarray | None = None  # fine grain: which (channel, filter) entries this part owns
    trainable: bool = True
    #: fine grain: the (view rows, kernel columns) rectangles convolved, covering every owned entry of ``mask``
    rects: list[tuple[np.ndarray, np.ndarray]] | None = None


@dataclass
class _Split:
    """A layer output split by owning part: tensors[q] has columns index[q] of the original last axis."""

    tensors: dict[int, Any]
    index: dict[int, np.ndarray]
    channels: int  # channels of the tensor (position -> channel is pos % channels)


class CrossGate:
    """Orders the cross-part reads of a forward pass after given work on the reading part (1F1B in one graph).

    While a forward is built with a gate (``PlacedModel.forward(..., gate=g)``), every view that part ``p`` reads
    with columns owned by another part waits (control dependencies, on ``p``'s device) for the tensors
    ``g.wait[p]``, and is recorded in ``g.views`` as ``(p, view)``. Why: TensorFlow's executor runs ready ops in
    no set order, so when several training steps are traced into one function a part may run the next batch's
    forward before the gradient another part waits for. Setting ``wait[p]`` to the gradients of the previous
    step's recorded views (which ``p`` computes and sends back) gives each part PipeDream's one-backward-then-
    one-forward order (:mod:`hgpart.runtime.multistep`).
    """

    def __init__(self) -> None:
        self.wait: dict[int, list[Any]] = {}
        self.views: list[tuple[int, Any]] = []

    def gated(self, p: int, view: Any, device: str) -> Any:
        """``view`` (read on part ``p`` from another part) after ``wait[p]``; recorded in :attr:`views`."""
        import tensorflow as tf

        if self.wait.get(p):
            with tf.device(device), tf.control_dependencies(self.wait[p]):
                view = tf.identity(view)
        self.views.append((p, view))
        return view


class _Views(dict):
    """The views one forward pass made, by (tensor, part), and the :class:`CrossGate` its cross-part reads obey."""

    def __init__(self, gate: CrossGate | None = None) -> None:
        super().__init__()
        self.gate = gate


def _np_keras_weights(keras_layer: Any, layer: Layer) -> dict[str, np.ndarray]:
    """The Keras weights the layer's kind copies, by its names (``config["weight_names"]`` renames them)."""
    rename = layer.config.get("weight_names", {})
    out: dict[str, np.ndarray] = {}
    for name in layer.definition.weights:
        w = getattr(keras_layer, rename.get(name, name), None)
        if w is not None and hasattr(w, "numpy"):
            out[name] = np.asarray(w.numpy())
    return out


class PlacedModel:
    """A placement's model as per-part variables and a function building the partitioned graph."""

    def __init__(self, placement: Placement, keras_model: Any, devices: list[str], *, host: str | None = None) -> None:
        if len(devices) < placement.k:
            raise HgpartError(f"the placement has K = {placement.k} parts but only {len(devices)} devices are open",
                              where="runtime", fix=f"open {placement.k} devices")
        check_keras_model(placement, keras_model)
        self.pl = placement
        self.graph = placement.graph
        self.k = placement.k
        self.devices = list(devices[: placement.k])
        self.host = host or self.devices[0]
        self.owner = placement.channel_parts()
        self.vars: list[PartVariable] = []
        self._by_layer: dict[str, dict[tuple[str, int], PartVariable]] = {}
        self._check_supported()
        self._plan_views()
        self._make_variables(keras_model)
        settle()  # their creation, before a compiled call reads them
        out = self.graph.output_layer
        self.loss_part = placement.loss_part(self.owner)
        self.final_softmax = out.config.get("activation") == "softmax"
        self.compute = self._compute_fidelity()

    # ------------------------------------------------------------------ planning
    def _check_supported(self) -> None:
        for layer in self.graph.layers:
            act = layer.config.get("activation")
            if act == "softmax" and layer is not self.graph.output_layer:
                raise HgpartError(f"layer {layer.name!r} applies softmax inside the model", where="runtime",
                                  fix="softmax is supported only as the final activation")
            layer.definition.runtime_check(layer)

    def fine(self, layer: Layer) -> bool:
        """True when ``layer`` runs as (filter, channel) pairs reduced on the filter's owner."""
        return self.pl.grain == "fine" and layer.definition.fine_split

    def filters(self, layer: Layer) -> np.ndarray:
        """The part owning every output channel of vertex layer ``layer``."""
        return self.pl.layer_parts[layer.name]["filters"]

    def _needed(self, layer: Layer, inp: str, p: int) -> np.ndarray:
        """Channels of input tensor ``inp`` that part ``p`` reads for ``layer`` (empty if none)."""
        f = self.filters(layer)
        if self.fine(layer):
            ch = self.pl.layer_parts[layer.name]["channels"]
            return np.flatnonzero((ch == p).any(axis=0))
        read = layer.definition.read_map(layer)
        if read is not None:
            return np.unique(read[f == p])
        return np.arange(len(self.owner[inp])) if (f == p).any() else np.zeros(0, np.int64)

    def _plan_views(self) -> None:
        """Union of the channels every part needs from every tensor read by a vertex layer."""
        need: dict[tuple[str, int], set[int]] = {}
        for layer in self.graph.vertex_layers:
            for inp in dict.fromkeys(layer.inputs):
                for p in range(self.k):
                    ch = self._needed(layer, inp, p)
                    if ch.size:
                        need.setdefault((inp, p), set()).update(ch.tolist())
        self.view_channels = {key: np.array(sorted(v), dtype=np.int64) for key, v in need.items()}

    def _layout(self) -> dict[str, dict[int, np.ndarray]]:
        """Static column index of every part tensor of every layer (what forward() produces)."""
        lay: dict[str, dict[int, np.ndarray]] = {}
        for layer in self.graph.layers:
            own = self.owner[layer.name]
            role = layer.definition.role
            if role is Role.CONCAT:
                out: dict[int, list[np.ndarray]] = {}
                off = 0
                for s in layer.inputs:
                    for q, idx in lay[s].items():
                        out.setdefault(q, []).append(idx + off)
                    off += len(self.owner[s])
                lay[layer.name] = {q: np.concatenate(v) for q, v in sorted(out.items())}
            elif role in (Role.INPUT, Role.VERTEX):
                lay[layer.name] = {q: np.flatnonzero(own == q) for q in range(self.k) if (own == q).any()}
            else:
                lay[layer.name] = layer.definition.column_layout(layer, lay[layer.inputs[0]])
        return lay

    def view_index(self, t: str, p: int) -> np.ndarray:
        """Column positions (original) of the view of tensor ``t`` on part ``p``, in view order."""
        chans = self.view_channels[(t, p)]
        c = len(self.owner[t])
        cols = []
        for q in sorted(self.layout[t]):
            idx = self.layout[t][q]
            cols.append(idx[np.isin(idx % c, chans)])
        return np.concatenate(cols)

    # ---------------------------------------------------------------- variables
    def _make_variables(self, keras_model: Any) -> None:
        self.layout = self._layout()
        #: every layer output's ``_Split.channels`` (position -> channel is ``pos % channels``)
        self.channels: dict[str, int] = {}
        for layer in self.graph.layers:
            self.channels[layer.name] = layer.definition.split_channels(
                layer, self.channels[layer.inputs[0]] if layer.inputs else 0)
        for layer in self.graph.layers:
            if not layer.definition.weights:
                continue
            try:
                kl = keras_layer(keras_model, layer)
            except ValueError:
                raise HgpartError(f"the Keras model has no layer {layer.name!r}", where="runtime",
                                  fix="use the model the placement was compiled for") from None
            layer.definition.make_variables(self, layer, _np_keras_weights(kl, layer))

    def add_variable(self, layer: Layer, p: int, name: str, value: np.ndarray, index: tuple[np.ndarray, ...],
                     mask: np.ndarray | None = None, trainable: bool = True) -> PartVariable:
        """A variable of ``layer`` on part ``p`` holding entries ``index`` of its Keras weight ``name``."""
        import tensorflow as tf

        with tf.device(self.devices[p]):
            v = tf.Variable(value.astype(np.float32), trainable=trainable, name=f"{layer.name}_{name}_p{p}")
        pv = PartVariable(v, p, layer.name, name, index, mask, trainable)
        self.vars.append(pv)
        self._by_layer.setdefault(layer.name, {})[(name, p)] = pv
        return pv

    def _compute_fidelity(self) -> list[dict[str, Any]]:
        """Fine Conv2D only: per (layer, part), forward MACs per sample the executed convolutions perform vs the
        MACs of the (filter, channel) pairs the placement assigns to that part (exact, from the masks)."""
        rows: list[dict[str, Any]] = []
        for layer in self.graph.layers:
            if not self.fine(layer):
                continue
            kh, kw = layer.config["kernel_size"]
            per_pair = int(np.prod(layer.output_shape[:2])) * int(kh) * int(kw)
            for (name, p), pv in sorted(self._by_layer.get(layer.name, {}).items()):
                if name != "kernel" or pv.mask is None:
                    continue
                executed = per_pair * sum((int(r.size) * int(c.size) for r, c in pv.rects or []), 0)
                rows.append({"layer": layer.name, "part": p, "assigned_macs": per_pair * int(pv.mask.sum()),
                             "executed_macs": executed})
        return rows

    def compute_overhead(self) -> dict[str, Any]:
        """Executed / assigned forward MACs of the fine convolutions: overall, worst (layer, part), per part."""
        rows = self.compute
        if not rows:
            return {"fine_layers": 0, "ratio": 1.0, "worst": None, "per_part": []}
        ex = np.array([r["executed_macs"] for r in rows], np.float64)
        asg = np.array([r["assigned_macs"] for r in rows], np.float64)
        part = np.array([r["part"] for r in rows], np.int64)
        worst = int(np.argmax(ex / np.maximum(asg, 1.0)))
        per_part = [float(ex[part == p].sum() / max(asg[part == p].sum(), 1.0)) for p in range(self.k)]
        return {"fine_layers": len({r["layer"] for r in rows}), "ratio": float(ex.sum() / max(asg.sum(), 1.0)),
                "worst": {**rows[worst], "ratio": float(ex[worst] / max(asg[worst], 1.0))}, "per_part": per_part}

    @property
    def trainable(self) -> list[PartVariable]:
        return [pv for pv in self.vars if pv.trainable]

    @property
    def pieces(self) -> set[tuple[str, int]]:
        """Every (layer, part) that holds variables: what an update applied in pieces selects from."""
        return {(pv.layer, pv.part) for pv in self.vars}

    def keras_weights(self) -> dict[str, dict[str, np.ndarray]]:
        """Current weights reassembled in the Keras layout (for checking against single-device training)."""
        out: dict[str, dict[str, np.ndarray]] = {}
        for layer in self.graph.layers:
            pvs = self._by_layer.get(layer.name, {})
            if not pvs:
                continue
            d: dict[str, np.ndarray] = {}
            for (name, _), pv in sorted(pvs.items(), key=lambda kv: (kv[0][0], kv[0][1])):
                layer.definition.scatter(layer, name, pv, pv.var.numpy(), d)
            out[layer.name] = d
        return out

    # ------------------------------------------------------------------ forward
    def forward(self, x: Any, *, training: bool, bn_stats: list | None = None, scope: str = "fwd",
                gate: CrossGate | None = None) -> Any:
        """Build the partitioned forward pass of batch ``x`` (on the host); returns the logits on the loss device.

        ``bn_stats`` (training only) collects ``(PartVariable mean, PartVariable var, batch mean, batch var,
        momentum)`` so the caller applies the moving-statistics updates once per step in a fixed order.
        ``gate``: the order of this pass's cross-part reads (:class:`CrossGate`).
        """
        import tensorflow as tf

        vals: dict[str, _Split] = {}
        views = _Views(gate)
        for layer in self.graph.layers:
            with tf.name_scope(f"{scope}/{layer.name}" if layer.inputs else "feed/input"):
                vals[layer.name] = self._layer(layer, x, vals, views, training, bn_stats, scope)
        out = vals[self.graph.output_layer.name]
        with tf.name_scope("loss/gather"), tf.device(self.devices[self.loss_part]):
            parts = [out.tensors[q] for q in sorted(out.tensors)]
            idx = np.concatenate([out.index[q] for q in sorted(out.tensors)])
            logits = tf.concat(parts, axis=-1) if len(parts) > 1 else parts[0]
            if not np.array_equal(idx, np.arange(len(idx))):
                logits = tf.gather(logits, np.argsort(idx), axis=-1)
        return logits

    def view(self, vals: dict[str, _Split], views: dict, t: str, p: int) -> Any:
        """The view of tensor ``t`` on part ``p`` (cached: each column crosses to ``p`` once); a view with columns
        from another part obeys the forward pass's :class:`CrossGate`, if it has one."""
        import tensorflow as tf

        key = (t, p)
        if key in views:
            return views[key]
        chans = self.view_channels[key]
        src = vals[t]
        pieces, remote = [], False
        for q in sorted(src.tensors):
            idx = src.index[q]
            sel = np.flatnonzero(np.isin(idx % src.channels, chans))
            if sel.size == 0:
                continue
            with tf.device(self.devices[q]):
                piece = tfops.take_channels(src.tensors[q], sel)
            pieces.append(piece)
            remote = remote or q != p
        with tf.device(self.devices[p]):
            view = tf.concat(pieces, axis=-1) if len(pieces) > 1 else tf.identity(pieces[0])
        gate = getattr(views, "gate", None)
        if gate is not None and remote:
            view = gate.gated(p, view, self.devices[p])
        views[key] = view
        return view

    def pos_in_view(self, t: str, p: int, cols: np.ndarray) -> np.ndarray:
        """Positions, within the view of ``t`` on part ``p``, of the original columns ``cols``."""
        vi = self.view_index(t, p)
        order = np.argsort(vi, kind="stable")
        return order[np.searchsorted(vi[order], cols)]

    def entry(self, layer: str, name: str, p: int) -> PartVariable | None:
        """Part ``p``'s variable ``name`` of ``layer``, if it has one."""
        return self._by_layer.get(layer, {}).get((name, p))

    def var(self, layer: str, name: str, p: int) -> Any:
        pv = self.entry(layer, name, p)
        return None if pv is None else pv.var

    def _layer(self, layer: Layer, x: Any, vals: dict[str, _Split], views: dict, training: bool,
               bn_stats: list | None, scope: str = "fwd") -> _Split:
        tensors = layer.definition.forward(self, layer, x, vals, views, training, bn_stats, scope)
        return _Split(tensors, self.layout[layer.name], self.channels[layer.name])

    # ------------------------------------------------------------------- helpers
    def predict(self, x: np.ndarray) -> np.ndarray:
        """Inference-mode outputs (probabilities if the model ends in softmax), to compare with Keras."""
        import tensorflow as tf

        if not hasattr(self, "_predict_fn"):
            @tf.function(reduce_retracing=True)
            def fn(xb: Any) -> Any:
                logits = self.forward(xb, training=False)
                with tf.device(self.devices[self.loss_part]):
                    return tf.nn.softmax(logits) if self.final_softmax else logits
            self._predict_fn = fn
        with tf.device(self.host):
            xt = tf.constant(np.asarray(x, np.float32))
        return self._predict_fn(xt).numpy()
