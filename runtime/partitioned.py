"""The partitioned model: a placement executed with raw ``tf.Variable`` + ``tf.nn`` ops on K devices.

Usage::

    pm = PartitionedModel(placement, keras_model, devices)   # weights copied from the Keras model
    probs = pm.predict(x)                                    # equals keras_model(x)
    pm.keras_weights()                                       # {layer: {"kernel": ..., ...}} back in Keras layout

How a placement becomes ops (thesis chapter 4, plus the fine grain it never implemented):

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
  one convolution over a gathered slice of the input view and kernel. ``PartitionedModel.compute`` gives, per
  (layer, part), the executed and the assigned forward MACs (exact, from the masks); ``compute_overhead()``
  summarises them. Limitation: placements with more than 64 distinct channel sets in one part's layer (e.g.
  random ones) fall back to the bounding box of the used channels, so they can execute up to that box's MACs.
* Per-channel layers (BatchNorm, pooling, activation, dropout, zero padding), Flatten and Concatenate run per part
  on the channels that part owns; Add runs per part on the channels it owns, gathering channel j of every input.
* The logits are gathered on one *loss device* (the part owning most output channels); a final softmax is fused
  into the cross-entropy there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hgpart.errors import HgpartError
from hgpart.frontend import layer_graph_from_keras
from hgpart.layergraph import Layer
from hgpart.placement import Placement

__all__ = ["PartitionedModel", "PartVariable", "rectangles", "check_keras_model"]


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


def _np_keras_weights(layer: Any) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for name in ("kernel", "bias", "gamma", "beta", "moving_mean", "moving_variance"):
        w = getattr(layer, name, None)
        if w is not None and hasattr(w, "numpy"):
            out[name] = np.asarray(w.numpy())
    return out


class PartitionedModel:
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
        out = self.graph.output_layer
        counts = np.bincount(self.owner[out.name], minlength=self.k)
        self.loss_part = int(np.argmax(counts))
        self.final_softmax = out.config.get("activation") == "softmax"
        self.compute = self._compute_fidelity()

    # ------------------------------------------------------------------ planning
    def _check_supported(self) -> None:
        for layer in self.graph.layers:
            act = layer.config.get("activation")
            if act == "softmax" and layer is not self.graph.output_layer:
                raise HgpartError(f"layer {layer.name!r} applies softmax inside the model", where="runtime",
                                  fix="softmax is supported only as the final activation")
            if layer.kind == "dense" and len(layer.input_shapes[0]) != 1:
                raise HgpartError(f"Dense layer {layer.name!r} reads a rank-{len(layer.input_shapes[0]) + 1} input",
                                  where="runtime", fix="put Flatten or global pooling before it")

    def _fine(self, layer: Layer) -> bool:
        return self.pl.grain == "fine" and layer.kind == "conv2d"

    def _needed(self, layer: Layer, inp: str, p: int) -> np.ndarray:
        """Channels of input tensor ``inp`` that part ``p`` reads for ``layer`` (empty if none)."""
        f = self.pl.layer_parts[layer.name]["filters"]
        n_in = len(self.owner[inp])
        if layer.kind == "add":
            return np.flatnonzero(f == p)
        if layer.kind == "depthwise_conv2d":
            mult = int(layer.config.get("depth_multiplier", 1))
            return np.unique(np.flatnonzero(f == p) // mult)
        if self._fine(layer):
            ch = self.pl.layer_parts[layer.name]["channels"]
            return np.flatnonzero((ch == p).any(axis=0))
        return np.arange(n_in) if (f == p).any() else np.zeros(0, np.int64)

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
            if layer.kind == "flatten" and len(layer.input_shapes[0]) == 3:
                h, w, c = layer.input_shapes[0]
                lay[layer.name] = {
                    q: (np.arange(h * w)[:, None] * c + idx[None, :]).ravel()
                    for q, idx in lay[layer.inputs[0]].items()
                }
            elif layer.kind == "concat":
                out: dict[int, list[np.ndarray]] = {}
                off = 0
                for s in layer.inputs:
                    for q, idx in lay[s].items():
                        out.setdefault(q, []).append(idx + off)
                    off += len(self.owner[s])
                lay[layer.name] = {q: np.concatenate(v) for q, v in sorted(out.items())}
            elif layer.kind == "input" or layer.is_vertex_layer:
                lay[layer.name] = {q: np.flatnonzero(own == q) for q in range(self.k) if (own == q).any()}
            else:
                lay[layer.name] = lay[layer.inputs[0]]
        return lay

    def _view_index(self, lay: dict[str, dict[int, np.ndarray]], t: str, p: int) -> np.ndarray:
        """Column positions (original) of the view of tensor ``t`` on part ``p``, in view order."""
        chans = self.view_channels[(t, p)]
        c = len(self.owner[t])
        cols = []
        for q in sorted(lay[t]):
            idx = lay[t][q]
            cols.append(idx[np.isin(idx % c, chans)])
        return np.concatenate(cols)

    # ---------------------------------------------------------------- variables
    def _make_variables(self, keras_model: Any) -> None:
        import tensorflow as tf

        self.layout = self._layout()
        for layer in self.graph.layers:
            if layer.kind not in ("conv2d", "depthwise_conv2d", "dense", "batch_norm"):
                continue
            try:
                kl = keras_model.get_layer(layer.config.get("keras_name", layer.name))
            except ValueError:
                raise HgpartError(f"the Keras model has no layer {layer.name!r}", where="runtime",
                                  fix="use the model the placement was compiled for") from None
            w = _np_keras_weights(kl)
            f = self.pl.layer_parts[layer.name]["filters"] if layer.is_vertex_layer else None

            def add(p: int, name: str, value: np.ndarray, index: tuple[np.ndarray, ...],
                    mask: np.ndarray | None = None, trainable: bool = True, layer: Layer = layer) -> None:
                with tf.device(self.devices[p]):
                    v = tf.Variable(value.astype(np.float32), trainable=trainable,
                                    name=f"{layer.name}_{name}_p{p}")
                pv = PartVariable(v, p, layer.name, name, index, mask, trainable)
                self.vars.append(pv)
                self._by_layer.setdefault(layer.name, {})[(name, p)] = pv

            if layer.kind == "batch_norm":
                for q, idx in self.layout[layer.name].items():
                    for name in ("gamma", "beta", "moving_mean", "moving_variance"):
                        if name in w:
                            add(q, name, w[name][idx], (idx,), trainable=not name.startswith("moving"))
                continue
            for p in range(self.k):
                jp = np.flatnonzero(f == p)
                if layer.kind == "depthwise_conv2d":
                    if jp.size == 0:
                        continue
                    mult = int(layer.config.get("depth_multiplier", 1))
                    kern = w["kernel"][:, :, jp // mult, jp % mult][..., None]
                    add(p, "kernel", kern, (jp // mult, jp % mult))
                elif self._fine(layer):
                    ch = self.pl.layer_parts[layer.name]["channels"]  # (F, C)
                    own = ch == p
                    jf = np.flatnonzero(own.any(axis=1))
                    if jf.size:
                        vi = self._view_index(self.layout, layer.inputs[0], p)
                        mask = own[np.ix_(jf, vi)].T  # (C_view, F_p)
                        kern = w["kernel"][:, :, vi][:, :, :, jf] * mask
                        add(p, "kernel", kern, (vi, jf), mask=mask)
                        self._by_layer[layer.name][("kernel", p)].rects = rectangles(mask)
                elif jp.size:
                    vi = self._view_index(self.layout, layer.inputs[0], p)
                    kern = w["kernel"][vi][:, jp] if layer.kind == "dense" else w["kernel"][:, :, vi][..., jp]
                    add(p, "kernel", kern, (vi, jp))
                if "bias" in w and jp.size:
                    add(p, "bias", w["bias"][jp], (jp,))

    def _compute_fidelity(self) -> list[dict[str, Any]]:
        """Fine Conv2D only: per (layer, part), forward MACs per sample the executed convolutions perform vs the
        MACs of the (filter, channel) pairs the placement assigns to that part (exact, from the masks)."""
        rows: list[dict[str, Any]] = []
        for layer in self.graph.layers:
            if not self._fine(layer):
                continue
            kh, kw = layer.config["kernel_size"]
            per_pair = int(np.prod(layer.output_shape[:2])) * int(kh) * int(kw)
            for (name, p), pv in sorted(self._by_layer.get(layer.name, {}).items()):
                if name != "kernel" or pv.mask is None:
                    continue
                executed = per_pair * sum(int(r.size) * int(c.size) for r, c in pv.rects)
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

    def keras_weights(self) -> dict[str, dict[str, np.ndarray]]:
        """Current weights reassembled in the Keras layout (for checking against single-device training)."""
        out: dict[str, dict[str, np.ndarray]] = {}
        for layer in self.graph.layers:
            pvs = self._by_layer.get(layer.name, {})
            if not pvs:
                continue
            d: dict[str, np.ndarray] = {}
            for (name, _), pv in sorted(pvs.items(), key=lambda kv: (kv[0][0], kv[0][1])):
                val = pv.var.numpy()
                if layer.kind == "depthwise_conv2d" and name == "kernel":
                    c_in = layer.in_channels
                    mult = int(layer.config.get("depth_multiplier", 1))
                    full = d.setdefault(name, np.zeros(tuple(layer.config["kernel_size"]) + (c_in, mult), np.float32))
                    full[:, :, pv.index[0], pv.index[1]] = val[..., 0]
                    continue
                if name not in d:
                    d[name] = np.zeros(self._full_shape(layer, name), np.float32)
                full = d[name]
                if len(pv.index) == 1:
                    full[..., pv.index[0]] = val
                elif pv.mask is not None:
                    sub = full[..., pv.index[0][:, None], pv.index[1][None, :]]
                    full[..., pv.index[0][:, None], pv.index[1][None, :]] = np.where(pv.mask, val, sub)
                elif layer.kind == "dense":
                    full[np.ix_(pv.index[0], pv.index[1])] = val
                else:
                    full[..., pv.index[0][:, None], pv.index[1][None, :]] = val
            out[layer.name] = d
        return out

    def _full_shape(self, layer: Layer, name: str) -> tuple[int, ...]:
        if name == "kernel":
            if layer.kind == "dense":
                return (int(np.prod(layer.input_shapes[0])), layer.out_channels)
            return tuple(layer.config["kernel_size"]) + (layer.in_channels, layer.out_channels)
        return (layer.out_channels,)

    # ------------------------------------------------------------------ forward
    def forward(self, x: Any, *, training: bool, bn_stats: list | None = None, scope: str = "fwd") -> Any:
        """Build the partitioned forward pass of batch ``x`` (on the host); returns the logits on the loss device.

        ``bn_stats`` (training only) collects ``(PartVariable mean, PartVariable var, batch mean, batch var,
        momentum)`` so the caller applies the moving-statistics updates once per step in a fixed order.
        """
        import tensorflow as tf

        vals: dict[str, _Split] = {}
        views: dict[tuple[str, int], Any] = {}
        for layer in self.graph.layers:
            with tf.name_scope(f"{scope}/{layer.name}" if layer.kind != "input" else "feed/input"):
                vals[layer.name] = self._layer(layer, x, vals, views, training, bn_stats, scope)
        out = vals[self.graph.output_layer.name]
        with tf.name_scope("loss/gather"), tf.device(self.devices[self.loss_part]):
            parts = [out.tensors[q] for q in sorted(out.tensors)]
            idx = np.concatenate([out.index[q] for q in sorted(out.tensors)])
            logits = tf.concat(parts, axis=-1) if len(parts) > 1 else parts[0]
            if not np.array_equal(idx, np.arange(len(idx))):
                logits = tf.gather(logits, np.argsort(idx), axis=-1)
        return logits

    def _view(self, vals: dict[str, _Split], views: dict, t: str, p: int) -> Any:
        """The view of tensor ``t`` on part ``p`` (cached: each column crosses to ``p`` once)."""
        import tensorflow as tf

        key = (t, p)
        if key in views:
            return views[key]
        chans = self.view_channels[key]
        src = vals[t]
        pieces = []
        for q in sorted(src.tensors):
            idx = src.index[q]
            sel = np.flatnonzero(np.isin(idx % src.channels, chans))
            if sel.size == 0:
                continue
            with tf.device(self.devices[q]):
                piece = src.tensors[q] if sel.size == idx.size else tf.gather(src.tensors[q], sel, axis=-1)
            pieces.append(piece)
        with tf.device(self.devices[p]):
            view = tf.concat(pieces, axis=-1) if len(pieces) > 1 else tf.identity(pieces[0])
        views[key] = view
        return view

    def _pos_in_view(self, t: str, p: int, cols: np.ndarray) -> np.ndarray:
        """Positions, within the view of ``t`` on part ``p``, of the original columns ``cols``."""
        vi = self._view_index(self.layout, t, p)
        order = np.argsort(vi, kind="stable")
        return order[np.searchsorted(vi[order], cols)]

    def _var(self, layer: str, name: str, p: int) -> Any:
        pv = self._by_layer.get(layer, {}).get((name, p))
        return None if pv is None else pv.var

    def _layer(self, layer: Layer, x: Any, vals: dict[str, _Split], views: dict, training: bool,
               bn_stats: list | None, scope: str = "fwd") -> _Split:
        import tensorflow as tf

        cfg = layer.config
        kind = layer.kind
        lay = self.layout[layer.name]
        if kind == "input":  # the host sends each part the input channels it owns (a feed, not model traffic)
            t = {}
            for q, idx in lay.items():
                with tf.device(self.host):
                    piece = x if idx.size == layer.out_channels else tf.gather(x, idx, axis=-1)
                with tf.device(self.devices[q]), tf.name_scope(f"{scope}/input/"):
                    t[q] = tf.identity(piece)
            return _Split(t, lay, layer.out_channels)
        if kind in ("conv2d", "dense", "depthwise_conv2d") and not self._fine(layer):
            t = {}
            for p in lay:
                view = self._view(vals, views, layer.inputs[0], p)
                with tf.device(self.devices[p]):
                    kern = self._var(layer.name, "kernel", p)
                    if kind == "dense":
                        y = tf.matmul(view, kern)
                    elif kind == "conv2d":
                        y = _conv(view, kern, cfg)
                    else:
                        vi = self._var_index(layer.name, "kernel", p)[0]
                        pos = self._pos_in_view(layer.inputs[0], p, vi)
                        y = _depthwise(tf.gather(view, pos, axis=-1), kern, cfg)
                    t[p] = _bias_act(y, self._var(layer.name, "bias", p), cfg)
            return _Split(t, lay, layer.out_channels)
        if kind == "conv2d":  # fine grain: partial convolutions, reduced on the filter owner
            f = self.pl.layer_parts[layer.name]["filters"]
            partial: dict[int, tuple[Any, np.ndarray]] = {}
            for p in range(self.k):
                pv = self._by_layer.get(layer.name, {}).get(("kernel", p))
                if pv is None:
                    continue
                view = self._view(vals, views, layer.inputs[0], p)
                with tf.device(self.devices[p]):
                    kern = pv.var * tf.constant(pv.mask[None, None].astype(np.float32))
                    ys, cols = [], []
                    for rows, cs in pv.rects:
                        full_r, full_c = rows.size == pv.mask.shape[0], cs.size == pv.mask.shape[1]
                        k_r = kern if full_r else tf.gather(kern, rows, axis=2)
                        k_r = k_r if full_c else tf.gather(k_r, cs, axis=3)
                        ys.append(_conv(view if full_r else tf.gather(view, rows, axis=-1), k_r, cfg))
                        cols.append(cs)
                    y = tf.concat(ys, axis=-1) if len(ys) > 1 else ys[0]
                    partial[p] = (y, pv.index[1][np.concatenate(cols)])
            t = {}
            for r, jr in lay.items():
                terms = []
                for p, (y, jf) in sorted(partial.items()):
                    sel = np.flatnonzero(f[jf] == r)
                    if sel.size == 0:
                        continue
                    with tf.device(self.devices[p]):
                        piece = y if sel.size == jf.size else tf.gather(y, sel, axis=-1)
                    cols = jf[sel]
                    with tf.device(self.devices[r]):
                        if np.array_equal(cols, jr):
                            terms.append(piece)
                        else:  # place the partial's columns at their positions among r's filters
                            zero = tf.zeros_like(piece[..., :1])
                            where = np.full(jr.size, cols.size)
                            where[np.searchsorted(jr, cols)] = np.arange(cols.size)
                            terms.append(tf.gather(tf.concat([piece, zero], axis=-1), where, axis=-1))
                with tf.device(self.devices[r]):
                    y = tf.add_n(terms) if len(terms) > 1 else terms[0]
                    t[r] = _bias_act(y, self._var(layer.name, "bias", r), cfg)
            return _Split(t, lay, layer.out_channels)
        if kind == "add":
            t = {}
            for p, jp in lay.items():
                terms = []
                for inp in layer.inputs:
                    view = self._view(vals, views, inp, p)
                    pos = self._pos_in_view(inp, p, jp)
                    with tf.device(self.devices[p]):
                        terms.append(view if np.array_equal(pos, np.arange(view.shape[-1]))
                                     else tf.gather(view, pos, axis=-1))
                with tf.device(self.devices[p]):
                    t[p] = tf.add_n(terms)
            return _Split(t, lay, layer.out_channels)
        if kind == "concat":
            t = {}
            for q in lay:
                pieces = [vals[s].tensors[q] for s in layer.inputs if q in vals[s].tensors]
                with tf.device(self.devices[q]):
                    t[q] = tf.concat(pieces, axis=-1) if len(pieces) > 1 else tf.identity(pieces[0])
            return _Split(t, lay, layer.out_channels)
        src = vals[layer.inputs[0]]
        t = {}
        for q, y in src.tensors.items():
            with tf.device(self.devices[q]):
                t[q] = self._per_channel(layer, q, y, training, bn_stats)
        return _Split(t, lay, layer.out_channels if kind != "flatten" else src.channels)

    def _var_index(self, layer: str, name: str, p: int) -> tuple[np.ndarray, ...]:
        return self._by_layer[layer][(name, p)].index

    def _per_channel(self, layer: Layer, q: int, y: Any, training: bool, bn_stats: list | None) -> Any:
        import tensorflow as tf

        cfg = layer.config
        kind = layer.kind
        if kind in ("max_pool", "avg_pool"):
            fn = tf.nn.max_pool2d if kind == "max_pool" else tf.nn.avg_pool2d
            return fn(y, ksize=cfg["pool_size"], strides=cfg["strides"], padding=cfg["padding"].upper())
        if kind in ("global_avg_pool", "global_max_pool"):
            fn = tf.reduce_mean if kind == "global_avg_pool" else tf.reduce_max
            return fn(y, axis=[1, 2], keepdims=bool(cfg.get("keepdims", False)))
        if kind == "flatten":
            return tf.reshape(y, [-1, int(np.prod(y.shape[1:]))])
        if kind == "zero_padding":
            (t, b), (lft, rgt) = cfg["padding"]
            return tf.pad(y, [[0, 0], [t, b], [lft, rgt], [0, 0]])
        if kind == "dropout":
            rate = float(cfg.get("rate", 0.0))
            return tf.nn.dropout(y, rate=rate) if training and rate > 0 else y
        if kind == "activation":
            return _activation(y, cfg.get("activation", "linear"), cfg, final=layer is self.graph.output_layer)
        if kind == "batch_norm":
            gamma = self._var(layer.name, "gamma", q)
            beta = self._var(layer.name, "beta", q)
            mm = self._by_layer[layer.name][("moving_mean", q)]
            mv = self._by_layer[layer.name][("moving_variance", q)]
            eps = float(cfg.get("epsilon", 1e-3))
            if training:
                axes = list(range(len(y.shape) - 1))
                mean, var = tf.nn.moments(y, axes=axes)
                if bn_stats is not None:
                    bn_stats.append((mm, mv, mean, var, float(cfg.get("momentum", 0.99))))
            else:
                mean, var = mm.var, mv.var
            return tf.nn.batch_normalization(y, mean, var, beta, gamma, eps)
        raise HgpartError(f"layer {layer.name!r} of kind {kind!r} is not supported by the runtime", where="runtime")

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


def rectangles(mask: np.ndarray, *, max_rects: int = 4, waste: float = 0.05,
               max_patterns: int = 64) -> list[tuple[np.ndarray, np.ndarray]]:
    """Cover the owned entries of a fine kernel ``mask`` (channels x filters) with few dense rectangles.

    Filters with the same channel set form one exact rectangle (executed MACs = assigned MACs). Rectangles are
    then merged greedily, cheapest first (merging ``a`` and ``b`` costs ``|Sa u Sb|(|Ga|+|Gb|) - |Sa||Ga| -
    |Sb||Gb|`` wasted MACs), while there are more than ``max_rects`` or a merge wastes at most ``waste`` of the
    part's assigned MACs: each rectangle is one more convolution (plus an input gather), so tiny savings are not
    worth an op. More than ``max_patterns`` distinct channel sets (e.g. random placements) -> one bounding box.
    Returns ``(rows, cols)`` index pairs into the mask; every column appears in exactly one rectangle.
    """
    c, f = mask.shape
    used = np.flatnonzero(mask.any(axis=1))
    if f == 0 or used.size == 0:
        return [(np.arange(c), np.arange(f))]
    pats, inv = np.unique(mask.T, axis=0, return_inverse=True)
    inv = np.asarray(inv).ravel()
    if len(pats) > max_patterns:
        return [(used, np.arange(f))]
    sets = pats.astype(np.int64)  # (n, C) channel sets
    sizes = np.bincount(inv, minlength=len(pats)).astype(np.int64)  # filters per set
    members = [np.flatnonzero(inv == g) for g in range(len(pats))]
    total = float(mask.sum())
    while len(members) > 1:
        nch = sets.sum(axis=1)
        union = nch[:, None] + nch[None, :] - sets @ sets.T
        cost = union * (sizes[:, None] + sizes[None, :]) - (nch * sizes)[:, None] - (nch * sizes)[None, :]
        np.fill_diagonal(cost, np.iinfo(np.int64).max)
        a, b = np.unravel_index(int(np.argmin(cost)), cost.shape)
        if len(members) <= max_rects and cost[a, b] > waste * total:
            break
        a, b = min(a, b), max(a, b)
        sets[a] = np.maximum(sets[a], sets[b])
        sizes[a] += sizes[b]
        members[a] = np.concatenate([members[a], members[b]])
        sets, sizes = np.delete(sets, b, axis=0), np.delete(sizes, b)
        del members[b]
    return [(np.flatnonzero(sets[g]), np.sort(members[g])) for g in range(len(members))]


def _conv(x: Any, kern: Any, cfg: dict[str, Any]) -> Any:
    import tensorflow as tf

    return tf.nn.conv2d(x, kern, strides=[1, *cfg.get("strides", [1, 1]), 1], padding=cfg["padding"].upper(),
                        dilations=[1, *cfg.get("dilation_rate", [1, 1]), 1])


def _depthwise(x: Any, kern: Any, cfg: dict[str, Any]) -> Any:
    import tensorflow as tf

    return tf.nn.depthwise_conv2d(x, kern, strides=[1, *cfg.get("strides", [1, 1]), 1],
                                  padding=cfg["padding"].upper(), dilations=cfg.get("dilation_rate", [1, 1]))


def _bias_act(y: Any, bias: Any, cfg: dict[str, Any]) -> Any:
    import tensorflow as tf

    if bias is not None:
        y = tf.nn.bias_add(y, bias)
    act = cfg.get("activation", "linear")
    return y if act == "softmax" else _activation(y, act, cfg, final=False)


def _activation(y: Any, act: str, cfg: dict[str, Any], *, final: bool) -> Any:
    """Element-wise activations; a final softmax is left to the loss (logits are what is returned)."""
    import tensorflow as tf

    if act in ("linear", None):
        return y
    if act == "softmax":
        if final:
            return y
        raise HgpartError("softmax inside the model", where="runtime", fix="use softmax only as the last layer")
    if act == "relu":
        slope = float(cfg.get("negative_slope", 0.0) or 0.0)
        mv = cfg.get("max_value")
        thr = float(cfg.get("threshold", 0.0) or 0.0)
        if slope == 0.0 and mv is None and thr == 0.0:
            return tf.nn.relu(y)
        out = tf.where(y >= thr, y, slope * (y - thr))
        return out if mv is None else tf.minimum(out, float(mv))
    simple = {"sigmoid": tf.nn.sigmoid, "tanh": tf.nn.tanh, "relu6": tf.nn.relu6, "swish": tf.nn.silu,
              "silu": tf.nn.silu, "gelu": lambda v: tf.nn.gelu(v, approximate=False),
              "softplus": tf.nn.softplus}
    if act in simple:
        return simple[act](y)
    if act == "leaky_relu":
        return tf.nn.leaky_relu(y, alpha=float(cfg.get("negative_slope", 0.2)))
    if act == "elu":
        alpha = float(cfg.get("alpha", 1.0))
        return tf.where(y > 0, y, alpha * (tf.exp(y) - 1.0))
    raise HgpartError(f"activation {act!r} is not supported by the runtime", where="runtime",
                      fix="use relu, sigmoid, tanh, elu, leaky_relu, swish, gelu or softmax (last layer)")
