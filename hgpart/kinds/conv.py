"""Convolutions and fully connected layers: vertex kinds whose filters read many input channels."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from hgpart.errors import HgpartError
from hgpart.kinds import tfops
from hgpart.kinds.base import Converted, KerasCall, LayerKind, LayerLike, Role, pair
from hgpart.kinds.rects import rectangles

__all__ = ["Conv2D", "Conv2DTranspose", "DepthwiseConv2D", "GroupedConv2D", "Dense", "PointwiseDense",
           "SeparableConv2D", "activation_name", "activation_flops"]

_SOFTMAX_FLOPS_PER_ELEMENT = 5  # TF flops_registry: shift (2) + exp (1) + normalise (2)


def activation_name(call: KerasCall, value: Any) -> str:
    """A layer's ``activation`` argument as a built-in name (``None`` is linear)."""
    if value is None:
        return "linear"
    if not isinstance(value, str):
        raise call.refuse(f"activation {value!r} is not a built-in Keras activation",
                          fix="use a built-in activation name, or an Activation layer after this one")
    return value


def activation_flops(act: str, n: int) -> int:
    """One op per element; softmax five (TF's ``Softmax``); linear none."""
    if act == "linear":
        return 0
    if act == "softmax":
        return _SOFTMAX_FLOPS_PER_ELEMENT * n
    return n


def conv_config(call: KerasCall) -> tuple[dict[str, Any], str]:
    """Kernel, strides, padding, dilation, bias and activation of a convolution's Keras config."""
    cfg = call.cfg
    call.check_channels_last()
    act = activation_name(call, cfg.get("activation", "linear"))
    config = {"keras_name": call.name, "kernel_size": pair(cfg["kernel_size"]), "strides": pair(cfg["strides"]),
              "padding": str(cfg["padding"]), "dilation_rate": pair(cfg["dilation_rate"]),
              "use_bias": bool(cfg["use_bias"]), "activation": act}
    return config, act


class Conv2D(LayerKind):
    name = "conv2d"
    role = Role.VERTEX
    keras_classes: ClassVar[tuple[str, ...]] = ("Conv2D",)
    fine_split = True
    weights = ("kernel", "bias")
    rule = ("coarse: every filter reads every input channel; fine: pair (j, k) reads channel k, "
            "and the partial maps of filter j are summed on its reduction vertex")

    def convert(self, call: KerasCall) -> list[Converted]:
        if int(call.cfg.get("groups", 1)) != 1:
            return GroupedConv2D().convert(call)
        config, act = conv_config(call)
        config = {"keras_name": call.name, "filters": int(call.cfg["filters"]),
                  **{k: v for k, v in config.items() if k != "keras_name"}}
        kh, kw = config["kernel_size"]
        n = call.n_out
        flops = 2 * n * kh * kw * call.input_shapes[0][-1] + (n if config["use_bias"] else 0) + \
            activation_flops(act, n)
        return [Converted(self.name, config, flops)]

    def bias_params(self, layer: LayerLike) -> int:
        return layer.out_channels if layer.config.get("use_bias", True) else 0

    def weight_shape(self, layer: LayerLike, name: str) -> tuple[int, ...]:
        if name == "kernel":
            return tuple(layer.config["kernel_size"]) + (layer.in_channels, layer.out_channels)
        return (layer.out_channels,)

    def make_variables(self, rt: Any, layer: LayerLike, w: dict[str, np.ndarray]) -> None:
        f = rt.filters(layer)
        for p in range(rt.k):
            jp = np.flatnonzero(f == p)
            if rt.fine(layer):
                own = rt.pl.layer_parts[layer.name]["channels"] == p  # (F, C)
                jf = np.flatnonzero(own.any(axis=1))
                if jf.size:
                    vi = rt.view_index(layer.inputs[0], p)
                    mask = own[np.ix_(jf, vi)].T  # (C_view, F_p)
                    kern = self.kernel(w, vi, jf) * mask
                    pv = rt.add_variable(layer, p, "kernel", kern, (vi, jf), mask=mask)
                    pv.rects = rectangles(mask)
            elif jp.size:
                vi = rt.view_index(layer.inputs[0], p)
                rt.add_variable(layer, p, "kernel", self.kernel(w, vi, jp), (vi, jp))
            if layer.config.get("use_bias", True) and "bias" in w and jp.size:
                rt.add_variable(layer, p, "bias", w["bias"][jp], (jp,))

    def kernel(self, w: dict[str, np.ndarray], rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """The kernel slice of input channels ``rows`` and filters ``cols``."""
        return w["kernel"][:, :, rows][..., cols]

    def op(self, view: Any, kern: Any, cfg: dict[str, Any]) -> Any:
        return tfops.conv(view, kern, cfg)

    def forward(self, rt: Any, layer: LayerLike, x: Any, vals: dict[str, Any], views: dict, training: bool,
                bn_stats: list | None, scope: str) -> dict[int, Any]:
        import tensorflow as tf

        if rt.fine(layer):
            return _fine_conv(rt, layer, vals, views)
        t = {}
        for p in rt.layout[layer.name]:
            view = rt.view(vals, views, layer.inputs[0], p)
            with tf.device(rt.devices[p]):
                y = self.op(view, rt.var(layer.name, "kernel", p), layer.config)
                t[p] = tfops.bias_act(y, rt.var(layer.name, "bias", p), layer.config)
        return t


def _partials(rt: Any, layer: LayerLike, vals: dict[str, Any], views: dict) -> dict[int, tuple[Any, np.ndarray]]:
    """Fine grain: every part's partial maps (one per filter it holds pairs of) and those filters' ids."""
    import tensorflow as tf

    partial: dict[int, tuple[Any, np.ndarray]] = {}
    kind = layer.definition
    op = kind.op if isinstance(kind, Conv2D) else tfops.conv
    for p in range(rt.k):
        pv = rt.entry(layer.name, "kernel", p)
        if pv is None:
            continue
        view = rt.view(vals, views, layer.inputs[0], p)
        with tf.device(rt.devices[p]):
            kern = pv.var * tf.constant(pv.mask[None, None].astype(np.float32))
            ys, cols = [], []
            for rows, cs in pv.rects:
                full_r, full_c = rows.size == pv.mask.shape[0], cs.size == pv.mask.shape[1]
                k_r = kern if full_r else tf.gather(kern, rows, axis=2)
                k_r = k_r if full_c else tf.gather(k_r, cs, axis=3)
                ys.append(op(view if full_r else tfops.take_channels(view, rows), k_r, layer.config))
                cols.append(cs)
            y = tf.concat(ys, axis=-1) if len(ys) > 1 else ys[0]
            partial[p] = (y, pv.index[1][np.concatenate(cols)])
    return partial


def _fine_conv(rt: Any, layer: LayerLike, vals: dict[str, Any], views: dict) -> dict[int, Any]:
    """Partial convolutions on every part, summed on the part owning each filter's reduction vertex."""
    import tensorflow as tf

    f = rt.filters(layer)
    partial = _partials(rt, layer, vals, views)
    t = {}
    for r, jr in rt.layout[layer.name].items():
        terms = []
        for p, (y, jf) in sorted(partial.items()):
            sel = np.flatnonzero(f[jf] == r)
            if sel.size == 0:
                continue
            with tf.device(rt.devices[p]):
                piece = tfops.take_channels(y, sel)  # y itself when sel is all of it
            cols = jf[sel]
            with tf.device(rt.devices[r]):
                if np.array_equal(cols, jr):
                    terms.append(piece)
                else:  # place the partial's columns at their positions among r's filters
                    terms.append(tfops.place_channels(piece, np.searchsorted(jr, cols), jr.size))
        with tf.device(rt.devices[r]):
            y = tf.add_n(terms) if len(terms) > 1 else terms[0]
            t[r] = tfops.bias_act(y, rt.var(layer.name, "bias", r), layer.config)
    return t


class DepthwiseConv2D(LayerKind):
    name = "depthwise_conv2d"
    role = Role.VERTEX
    keras_classes = ("DepthwiseConv2D",)
    weights = ("kernel", "bias")
    rule = "output channel j reads input channel j // depth_multiplier only (same in the fine grain)"

    def convert(self, call: KerasCall) -> list[Converted]:
        config, act = conv_config(call)
        config = {"keras_name": call.name, "depth_multiplier": int(call.cfg["depth_multiplier"]),
                  **{k: v for k, v in config.items() if k != "keras_name"}}
        kh, kw = config["kernel_size"]
        n = call.n_out
        flops = 2 * n * kh * kw + (n if config["use_bias"] else 0) + activation_flops(act, n)
        return [Converted(self.name, config, flops)]

    def multiplier(self, layer: LayerLike) -> int:
        return layer.out_channels // layer.in_channels

    def read_map(self, layer: LayerLike) -> np.ndarray | None:
        return np.arange(layer.out_channels) // self.multiplier(layer)

    def make_variables(self, rt: Any, layer: LayerLike, w: dict[str, np.ndarray]) -> None:
        f = rt.filters(layer)
        mult = self.multiplier(layer)
        for p in range(rt.k):
            jp = np.flatnonzero(f == p)
            if jp.size == 0:
                continue
            rt.add_variable(layer, p, "kernel", w["kernel"][:, :, jp // mult, jp % mult][..., None],
                            (jp // mult, jp % mult))
            if layer.config.get("use_bias", True) and "bias" in w:
                rt.add_variable(layer, p, "bias", w["bias"][jp], (jp,))

    def forward(self, rt: Any, layer: LayerLike, x: Any, vals: dict[str, Any], views: dict, training: bool,
                bn_stats: list | None, scope: str) -> dict[int, Any]:
        import tensorflow as tf

        t = {}
        for p in rt.layout[layer.name]:
            view = rt.view(vals, views, layer.inputs[0], p)
            with tf.device(rt.devices[p]):
                pos = rt.pos_in_view(layer.inputs[0], p, rt.entry(layer.name, "kernel", p).index[0])
                y = tfops.depthwise(tfops.take_channels(view, pos), rt.var(layer.name, "kernel", p), layer.config)
                t[p] = tfops.bias_act(y, rt.var(layer.name, "bias", p), layer.config)
        return t

    def weight_shape(self, layer: LayerLike, name: str) -> tuple[int, ...]:
        if name == "kernel":
            return tuple(layer.config["kernel_size"]) + (layer.in_channels, self.multiplier(layer))
        return (layer.out_channels,)

    def _scatter_kernel(self, layer: LayerLike, out: np.ndarray, pv: Any, value: np.ndarray) -> None:
        out[:, :, pv.index[0], pv.index[1]] = value[..., 0]  # one (input channel, multiplier) pair per column


class Dense(Conv2D):
    name = "dense"
    keras_classes = ("Dense",)
    fine_split = False
    rule = "every unit reads every input feature (one vertex per unit in both grains)"

    def convert(self, call: KerasCall) -> list[Converted]:
        if len(call.input_shapes[0]) == 3:
            return PointwiseDense().convert(call)
        if len(call.input_shapes[0]) != 1:
            raise call.refuse(f"Dense on a rank-{len(call.input_shapes[0]) + 1} input {call.input_shapes[0]}; "
                              "hgpart reads a vector or an image (H, W, C)",
                              fix="add Flatten or global pooling before it")
        act = activation_name(call, call.cfg.get("activation", "linear"))
        use_bias = bool(call.cfg["use_bias"])
        config = {"keras_name": call.name, "units": int(call.cfg["units"]), "use_bias": use_bias,
                  "activation": act}
        n = call.n_out
        flops = 2 * call.input_shapes[0][0] * n + (n if use_bias else 0) + activation_flops(act, n)
        return [Converted(self.name, config, flops)]

    def kernel(self, w: dict[str, np.ndarray], rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return w["kernel"][rows][:, cols]

    def op(self, view: Any, kern: Any, cfg: dict[str, Any]) -> Any:
        import tensorflow as tf

        return tf.matmul(view, kern)

    def runtime_check(self, layer: LayerLike) -> None:
        if len(layer.input_shapes[0]) != 1:
            raise HgpartError(f"Dense layer {layer.name!r} reads a rank-{len(layer.input_shapes[0]) + 1} input",
                              where="runtime", fix="put Flatten or global pooling before it")

    def weight_shape(self, layer: LayerLike, name: str) -> tuple[int, ...]:
        if name == "kernel":
            return (int(np.prod(layer.input_shapes[0])), layer.out_channels)
        return (layer.out_channels,)


class Conv2DTranspose(Conv2D):
    """A transposed convolution: every filter reads every input channel, like Conv2D (fine grain included).

    Part variables hold the kernel in Conv2D's (kh, kw, in, out) layout so the fine-grain masks and
    rectangles are shared; :meth:`op` transposes it back to Keras's (kh, kw, out, in).
    """

    name = "conv2d_transpose"
    keras_classes = ("Conv2DTranspose",)
    rule = "as Conv2D: every filter reads every input channel; fine: pair (j, k) reads channel k, partials summed"

    def convert(self, call: KerasCall) -> list[Converted]:
        if call.cfg.get("output_padding") is not None:
            raise call.refuse("output_padding is set", fix="leave output_padding=None")
        config, act = conv_config(call)
        config = {"keras_name": call.name, "filters": int(call.cfg["filters"]),
                  **{k: v for k, v in config.items() if k != "keras_name"}}
        if config["dilation_rate"] != [1, 1]:
            raise call.refuse("dilation_rate > 1", fix="use dilation_rate=1")
        kh, kw = config["kernel_size"]
        n = call.n_out
        h, w, cin = call.input_shapes[0]
        flops = 2 * h * w * cin * kh * kw * config["filters"] + (n if config["use_bias"] else 0) + \
            activation_flops(act, n)
        return [Converted(self.name, config, flops)]

    def kernel(self, w: dict[str, np.ndarray], rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return w["kernel"].transpose(0, 1, 3, 2)[:, :, rows][..., cols]

    def op(self, view: Any, kern: Any, cfg: dict[str, Any]) -> Any:
        import tensorflow as tf

        strides = cfg.get("strides", [1, 1])
        kh, kw = cfg["kernel_size"]
        h, w = int(view.shape[1]), int(view.shape[2])
        if cfg["padding"] == "same":
            ho, wo = h * strides[0], w * strides[1]
        else:
            ho, wo = h * strides[0] + max(kh - strides[0], 0), w * strides[1] + max(kw - strides[1], 0)
        shape = tf.stack([tf.shape(view)[0], ho, wo, tf.shape(kern)[3]])
        return tf.nn.conv2d_transpose(view, tf.transpose(kern, [0, 1, 3, 2]), shape, strides=[1, *strides, 1],
                                      padding=cfg["padding"].upper())

    def weight_shape(self, layer: LayerLike, name: str) -> tuple[int, ...]:
        if name == "kernel":
            return tuple(layer.config["kernel_size"]) + (layer.out_channels, layer.in_channels)
        return (layer.out_channels,)

    def _scatter_kernel(self, layer: LayerLike, out: np.ndarray, pv: Any, value: np.ndarray) -> None:
        rows, cols = pv.index[0][None, :], pv.index[1][:, None]
        new = value.transpose(0, 1, 3, 2)
        out[:, :, cols, rows] = new if pv.mask is None else np.where(pv.mask.T, new, out[:, :, cols, rows])


class SeparableConv2D(LayerKind):
    """Converted into its two parts: a depthwise conv ``<name>.depthwise`` and a pointwise 1x1 conv ``<name>``.

    The parts are ordinary ``depthwise_conv2d`` and ``conv2d`` layers (the pointwise one has the filter x
    channel structure of the fine grain), reading the Keras layer's ``depthwise_kernel`` and
    ``pointwise_kernel``; this kind exists only in the front end.
    """

    name = "separable_conv2d"
    role = Role.VERTEX
    front_end_only = True
    keras_classes = ("SeparableConv2D",)
    rule = "a depthwise part (channel j // multiplier) then a pointwise Conv2D part (every channel)"

    def convert(self, call: KerasCall) -> list[Converted]:
        config, act = conv_config(call)
        mult = int(call.cfg["depth_multiplier"])
        kh, kw = config["kernel_size"]
        h, w, c = call.input_shapes[0]
        ho, wo, f = call.output_shape
        mid = (ho, wo, c * mult)
        dw_name = f"{call.name}.depthwise"
        dw = {"keras_name": call.name, "depth_multiplier": mult, "kernel_size": [kh, kw],
              "strides": config["strides"], "padding": config["padding"], "dilation_rate": config["dilation_rate"],
              "use_bias": False, "activation": "linear", "weight_names": {"kernel": "depthwise_kernel"}}
        pw = {"keras_name": call.name, "filters": f, "kernel_size": [1, 1], "strides": [1, 1], "padding": "valid",
              "dilation_rate": [1, 1], "use_bias": config["use_bias"], "activation": act,
              "weight_names": {"kernel": "pointwise_kernel"}}
        dw_params = kh * kw * c * mult
        n = ho * wo * f
        return [
            Converted("depthwise_conv2d", dw, 2 * ho * wo * c * mult * kh * kw, name=dw_name, params=dw_params,
                      output_shape=mid),
            Converted("conv2d", pw, 2 * n * c * mult + (n if config["use_bias"] else 0) + activation_flops(act, n),
                      params=call.params - dw_params, inputs=(dw_name,), input_shapes=(mid,)),
        ]


class GroupedConv2D(LayerKind):
    """A Conv2D with ``groups`` > 1: filter ``j`` of group ``g = j // (F / G)`` reads only that group's ``C / G``
    input channels (``groups = C`` is a depthwise convolution, ConvNeXt's 7x7 conv). One vertex per filter in
    both grains; each part convolves its filters group by group (one depthwise op when ``C / G`` is 1)."""

    name = "grouped_conv2d"
    role = Role.VERTEX
    doc_label = "`Conv2D` with `groups` > 1"
    weights = ("kernel", "bias")
    rule = "filter j of group g reads only group g's C / G input channels (one vertex per filter in both grains)"

    def convert(self, call: KerasCall) -> list[Converted]:
        config, act = conv_config(call)
        config = {"keras_name": call.name, "filters": int(call.cfg["filters"]), "groups": int(call.cfg["groups"]),
                  **{k: v for k, v in config.items() if k != "keras_name"}}
        kh, kw = config["kernel_size"]
        n = call.n_out
        per_group = call.input_shapes[0][-1] // config["groups"]
        flops = 2 * n * kh * kw * per_group + (n if config["use_bias"] else 0) + activation_flops(act, n)
        return [Converted(self.name, config, flops)]

    def _sizes(self, layer: LayerLike) -> tuple[int, int]:
        """Filters per group and input channels per group."""
        g = int(layer.config["groups"])
        return layer.out_channels // g, layer.in_channels // g

    def read_map(self, layer: LayerLike) -> np.ndarray | None:
        return self._reads(layer)

    def _reads(self, layer: LayerLike) -> np.ndarray:
        """``(F,)`` or ``(F, C / G)``: the input channels each filter reads."""
        fpg, cpg = self._sizes(layer)
        read = (np.arange(layer.out_channels) // fpg)[:, None] * cpg + np.arange(cpg)[None, :]
        return read[:, 0] if cpg == 1 else read

    def weight_shape(self, layer: LayerLike, name: str) -> tuple[int, ...]:
        if name == "kernel":
            return (*layer.config["kernel_size"], self._sizes(layer)[1], layer.out_channels)
        return (layer.out_channels,)

    def make_variables(self, rt: Any, layer: LayerLike, w: dict[str, np.ndarray]) -> None:
        f = rt.filters(layer)
        cpg = self._sizes(layer)[1]
        for p in range(rt.k):
            jp = np.flatnonzero(f == p)
            if jp.size == 0:
                continue
            rt.add_variable(layer, p, "kernel", w["kernel"][..., jp], (np.arange(cpg), jp))
            if layer.config.get("use_bias", True) and "bias" in w:
                rt.add_variable(layer, p, "bias", w["bias"][jp], (jp,))

    def forward(self, rt: Any, layer: LayerLike, x: Any, vals: dict[str, Any], views: dict, training: bool,
                bn_stats: list | None, scope: str) -> dict[int, Any]:
        import tensorflow as tf

        fpg, cpg = self._sizes(layer)
        read = self._reads(layer)
        t = {}
        for p in rt.layout[layer.name]:
            view = rt.view(vals, views, layer.inputs[0], p)
            jp = rt.entry(layer.name, "kernel", p).index[1]
            kern = rt.var(layer.name, "kernel", p)
            with tf.device(rt.devices[p]):
                if cpg == 1:  # depthwise: column i of the gathered input meets filter jp[i]
                    xs = tfops.take_channels(view, rt.pos_in_view(layer.inputs[0], p, read[jp]))
                    y = tfops.depthwise(xs, tf.transpose(kern, [0, 1, 3, 2]), layer.config)
                else:
                    ys = []
                    for g in np.unique(jp // fpg):
                        cols = np.flatnonzero(jp // fpg == g)
                        xs = tfops.take_channels(view, rt.pos_in_view(layer.inputs[0], p, read[jp[cols[0]]]))
                        ys.append(tfops.conv(xs, tf.gather(kern, cols, axis=3), layer.config))
                    y = tf.concat(ys, axis=-1) if len(ys) > 1 else ys[0]
                t[p] = tfops.bias_act(y, rt.var(layer.name, "bias", p), layer.config)
        return t


class PointwiseDense(Conv2D):
    """A Dense layer on an image ``(H, W, C)``: the same units applied at every pixel, i.e. a 1x1 convolution
    (ConvNeXt's pointwise layers). It has Conv2D's filter x channel structure, fine grain included; the part
    variables hold the kernel as ``(1, 1, C, F)`` and write back Keras's ``(C, F)``."""

    name = "pointwise_dense"
    keras_classes = ()
    doc_label = "`Dense` on an image (H, W, C)"
    rule = ("as a 1x1 Conv2D: every unit reads every input channel at each pixel; fine: pair (j, k) reads channel "
            "k, partials summed")

    def convert(self, call: KerasCall) -> list[Converted]:
        act = activation_name(call, call.cfg.get("activation", "linear"))
        use_bias = bool(call.cfg["use_bias"])
        config = {"keras_name": call.name, "filters": int(call.cfg["units"]), "kernel_size": [1, 1],
                  "strides": [1, 1], "padding": "valid", "dilation_rate": [1, 1], "use_bias": use_bias,
                  "activation": act}
        n = call.n_out
        flops = 2 * n * call.input_shapes[0][-1] + (n if use_bias else 0) + activation_flops(act, n)
        return [Converted(self.name, config, flops)]

    def kernel(self, w: dict[str, np.ndarray], rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return w["kernel"][rows][:, cols][None, None]

    def weight_shape(self, layer: LayerLike, name: str) -> tuple[int, ...]:
        if name == "kernel":
            return (layer.in_channels, layer.out_channels)
        return (layer.out_channels,)

    def _scatter_kernel(self, layer: LayerLike, out: np.ndarray, pv: Any, value: np.ndarray) -> None:
        sel = (pv.index[0][:, None], pv.index[1][None, :])
        out[sel] = value[0, 0] if pv.mask is None else np.where(pv.mask, value[0, 0], out[sel])
