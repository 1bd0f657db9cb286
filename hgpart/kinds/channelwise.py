"""Per-channel layers: pooling, normalisation, activations, dropout, padding. No vertex of their own.

Each output channel ``j`` depends on input channel ``j`` only, so the layer is *fused* into the vertex that
owns channel ``j`` (the reduction vertex in the fine grain): it adds work to that vertex and changes the size
of the map later readers receive, but moves nothing itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hgpart.kinds import tfops
from hgpart.kinds.base import Converted, FusedKind, KerasCall, LayerLike, pair
from hgpart.kinds.conv import activation_flops, activation_name

__all__ = ["Pool", "AvgPool", "GlobalPool", "GlobalAvgPool", "BatchNorm", "Activation", "Dropout", "ZeroPadding",
           "Cropping", "UpSampling"]


class Pool(FusedKind):
    name = "max_pool"
    keras_classes = ("MaxPooling2D",)
    rule = "fused: readers receive the pooled map"

    def convert(self, call: KerasCall) -> list[Converted]:
        call.check_channels_last()
        ph, pw = pair(call.cfg["pool_size"])
        strides = call.cfg.get("strides") or call.cfg["pool_size"]
        config = {"keras_name": call.name, "pool_size": [ph, pw], "strides": pair(strides),
                  "padding": str(call.cfg["padding"])}
        return [Converted(self.name, config, ph * pw * call.n_out)]

    def apply(self, rt: Any, layer: LayerLike, q: int, y: Any, training: bool, bn_stats: list | None) -> Any:
        import tensorflow as tf

        cfg = layer.config
        return tf.nn.max_pool2d(y, ksize=cfg["pool_size"], strides=cfg["strides"], padding=cfg["padding"].upper())


class AvgPool(Pool):
    name = "avg_pool"
    keras_classes = ("AveragePooling2D",)

    def apply(self, rt: Any, layer: LayerLike, q: int, y: Any, training: bool, bn_stats: list | None) -> Any:
        import tensorflow as tf

        cfg = layer.config
        return tf.nn.avg_pool2d(y, ksize=cfg["pool_size"], strides=cfg["strides"], padding=cfg["padding"].upper())


class GlobalPool(FusedKind):
    name = "global_max_pool"
    keras_classes = ("GlobalMaxPooling2D",)
    rule = "fused: readers receive one value per channel (also with keepdims=True)"

    def convert(self, call: KerasCall) -> list[Converted]:
        call.check_channels_last()
        config = {"keras_name": call.name, "keepdims": bool(call.cfg.get("keepdims", False))}
        return [Converted(self.name, config, int(np.prod(call.input_shapes[0])))]

    def values_per_channel(self, layer: LayerLike, in_values: list[int]) -> int:
        return 1

    def apply(self, rt: Any, layer: LayerLike, q: int, y: Any, training: bool, bn_stats: list | None) -> Any:
        import tensorflow as tf

        return tf.reduce_max(y, axis=[1, 2], keepdims=bool(layer.config.get("keepdims", False)))


class GlobalAvgPool(GlobalPool):
    name = "global_avg_pool"
    keras_classes = ("GlobalAveragePooling2D",)

    def apply(self, rt: Any, layer: LayerLike, q: int, y: Any, training: bool, bn_stats: list | None) -> Any:
        import tensorflow as tf

        return tf.reduce_mean(y, axis=[1, 2], keepdims=bool(layer.config.get("keepdims", False)))


def channel_axis_only(call: KerasCall, axis: Any) -> None:
    """Refuse a normalisation over another axis than the channels."""
    axis = axis[0] if isinstance(axis, list | tuple) and len(axis) == 1 else axis
    if axis not in (-1, len(call.input_shapes[0])):
        raise call.refuse(f"axis={axis}; only the channel (last) axis is supported")


class BatchNorm(FusedKind):
    name = "batch_norm"
    keras_classes = ("BatchNormalization",)
    weights = ("gamma", "beta", "moving_mean", "moving_variance")
    rule = "fused: per-channel statistics stay on the channel's part"

    def convert(self, call: KerasCall) -> list[Converted]:
        cfg = call.cfg
        channel_axis_only(call, cfg.get("axis", -1))
        config = {"keras_name": call.name, "epsilon": float(cfg["epsilon"]), "center": bool(cfg["center"]),
                  "scale": bool(cfg["scale"]), "momentum": float(cfg["momentum"])}
        c = call.output_shape[-1]
        flops = 2 * call.n_out + (3 + int(bool(cfg["scale"])) + 2 * int(bool(cfg["center"]))) * c
        return [Converted(self.name, config, flops)]

    def make_variables(self, rt: Any, layer: LayerLike, w: dict[str, np.ndarray]) -> None:
        for q, idx in rt.layout[layer.name].items():
            for name in ("gamma", "beta", "moving_mean", "moving_variance"):
                if name in w:
                    rt.add_variable(layer, q, name, w[name][idx], (idx,), trainable=not name.startswith("moving"))

    def apply(self, rt: Any, layer: LayerLike, q: int, y: Any, training: bool, bn_stats: list | None) -> Any:
        import tensorflow as tf

        cfg = layer.config
        mm = rt.entry(layer.name, "moving_mean", q)
        mv = rt.entry(layer.name, "moving_variance", q)
        if training:
            mean, var = tf.nn.moments(y, axes=list(range(len(y.shape) - 1)))
            if bn_stats is not None:
                bn_stats.append((mm, mv, mean, var, float(cfg.get("momentum", 0.99))))
        else:
            mean, var = mm.var, mv.var
        return tf.nn.batch_normalization(y, mean, var, rt.var(layer.name, "beta", q), rt.var(layer.name, "gamma", q),
                                         float(cfg.get("epsilon", 1e-3)))


class Activation(FusedKind):
    name = "activation"
    keras_classes = ("Activation", "ReLU", "LeakyReLU", "Softmax", "ELU")
    rule = "fused: element-wise (" + ", ".join(tfops.ACTIVATIONS[:-1]) + "; softmax as the last layer only)"

    def convert(self, call: KerasCall) -> list[Converted]:
        act, extra = self._normalise(call)
        config = {"keras_name": call.name, "activation": act, **extra}
        return [Converted(self.name, config, activation_flops(act, call.n_out))]

    def _normalise(self, call: KerasCall) -> tuple[str, dict[str, Any]]:
        """The activation layers as one (name, parameters) pair."""
        cfg = call.cfg
        if call.cls == "ReLU":
            mv = cfg.get("max_value")
            return "relu", {"negative_slope": float(cfg.get("negative_slope", 0.0)),
                            "threshold": float(cfg.get("threshold", 0.0)),
                            "max_value": None if mv is None else float(mv)}
        if call.cls == "LeakyReLU":
            return "leaky_relu", {"negative_slope": float(cfg.get("negative_slope", cfg.get("alpha", 0.3)))}
        if call.cls == "ELU":
            return "elu", {"alpha": float(cfg.get("alpha", 1.0))}
        if call.cls == "Softmax":
            axis = cfg.get("axis", -1)
            if axis not in (-1, [-1]):
                raise call.refuse(f"Softmax over axis {axis}; only the last axis is supported")
            return "softmax", {"axis": -1}
        act = activation_name(call, cfg.get("activation", "linear"))
        if act not in tfops.ACTIVATIONS:
            raise call.refuse(f"activation {act!r}", fix="supported: " + ", ".join(tfops.ACTIVATIONS))
        return act, {}

    def apply(self, rt: Any, layer: LayerLike, q: int, y: Any, training: bool, bn_stats: list | None) -> Any:
        return tfops.activation(y, layer.config.get("activation", "linear"), layer.config,
                                final=layer.name == rt.graph.output_layer.name)


class Dropout(FusedKind):
    name = "dropout"
    keras_classes = ("Dropout",)
    rule = "fused: identity at inference; a per-sample mask (noise_shape (None, 1, 1, 1)) is sent from the host"

    def convert(self, call: KerasCall) -> list[Converted]:
        config: dict[str, Any] = {"keras_name": call.name, "rate": float(call.cfg["rate"])}
        noise = call.cfg.get("noise_shape")
        if noise is not None:
            noise = [1 if v is None else int(v) for v in noise][1:]
            if any(v != 1 for v in noise):
                raise call.refuse(f"Dropout with noise_shape {call.cfg['noise_shape']}",
                                  fix="hgpart supports noise_shape=(None, 1, 1, 1) (drop whole samples)")
            config["per_sample"] = True  # stochastic depth: one draw per sample, shared by every channel
        return [Converted(self.name, config, 0)]

    def forward(self, rt: Any, layer: LayerLike, x: Any, vals: dict[str, Any], views: dict, training: bool,
                bn_stats: list | None, scope: str) -> dict[int, Any]:
        import tensorflow as tf

        rate = float(layer.config.get("rate", 0.0))
        src = vals[layer.inputs[0]].tensors
        if not training or rate <= 0:
            return dict(src)
        mask = None
        if layer.config.get("per_sample"):  # drawn once on the host so every part drops the same samples
            first = next(iter(src.values()))
            with tf.device(rt.host):
                keep = tf.cast(tf.random.uniform([tf.shape(first)[0]] + [1] * (len(first.shape) - 1)) >= rate,
                               tf.float32)
                mask = keep / (1.0 - rate)
        out = {}
        for q, y in src.items():
            with tf.device(rt.devices[q]):
                out[q] = tf.nn.dropout(y, rate=rate) if mask is None else y * mask
        return out


class ZeroPadding(FusedKind):
    name = "zero_padding"
    keras_classes = ("ZeroPadding2D",)
    rule = "fused: readers receive the padded map"

    def convert(self, call: KerasCall) -> list[Converted]:
        call.check_channels_last()
        pad = call.cfg["padding"]
        if isinstance(pad, int):
            pad = ((pad, pad), (pad, pad))
        return [Converted(self.name, {"keras_name": call.name, "padding": [pair(p) for p in pad]}, 0)]

    def apply(self, rt: Any, layer: LayerLike, q: int, y: Any, training: bool, bn_stats: list | None) -> Any:
        import tensorflow as tf

        (t, b), (lft, rgt) = layer.config["padding"]
        return tf.pad(y, [[0, 0], [t, b], [lft, rgt], [0, 0]])


class Cropping(FusedKind):
    name = "cropping"
    keras_classes = ("Cropping2D",)
    rule = "fused: readers receive the cropped map"

    def convert(self, call: KerasCall) -> list[Converted]:
        call.check_channels_last()
        crop = call.cfg["cropping"]
        if isinstance(crop, int):
            crop = ((crop, crop), (crop, crop))
        return [Converted(self.name, {"keras_name": call.name, "cropping": [pair(c) for c in crop]}, 0)]

    def apply(self, rt: Any, layer: LayerLike, q: int, y: Any, training: bool, bn_stats: list | None) -> Any:
        (t, b), (lft, rgt) = layer.config["cropping"]
        h, w = layer.input_shapes[0][:2]
        return y[:, t : h - b, lft : w - rgt, :]


class UpSampling(FusedKind):
    name = "upsampling"
    keras_classes = ("UpSampling2D",)
    rule = "fused: readers receive the upsampled map"

    def convert(self, call: KerasCall) -> list[Converted]:
        call.check_channels_last()
        interp = str(call.cfg.get("interpolation", "nearest"))
        if interp not in ("nearest", "bilinear"):
            raise call.refuse(f"interpolation={interp!r}", fix="use nearest or bilinear")
        flops = 0 if interp == "nearest" else 4 * call.n_out  # bilinear: 2 multiply-adds per axis
        return [Converted(self.name, {"keras_name": call.name, "size": pair(call.cfg["size"]),
                                      "interpolation": interp}, flops)]

    def apply(self, rt: Any, layer: LayerLike, q: int, y: Any, training: bool, bn_stats: list | None) -> Any:
        import tensorflow as tf

        sh, sw = layer.config["size"]
        if layer.config["interpolation"] == "nearest":
            return tf.repeat(tf.repeat(y, sh, axis=1), sw, axis=2)
        h, w = layer.output_shape[:2]
        return tf.image.resize(y, [h, w], method="bilinear")
