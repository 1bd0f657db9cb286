"""Layers that move no data: the model input, views (Flatten, Reshape, Permute) and channel concatenation."""

from __future__ import annotations

from typing import Any

import numpy as np

from hgpart.errors import HgpartError
from hgpart.kinds import tfops
from hgpart.kinds.base import Converted, KerasCall, LayerKind, LayerLike, Role

__all__ = ["Input", "Flatten", "Concat", "Reshape", "Permute"]


class Input(LayerKind):
    name = "input"
    role = Role.INPUT
    keras_classes = ("InputLayer",)
    rule = "one vertex per input channel, fed by the host"

    def convert(self, call: KerasCall) -> list[Converted]:
        if len(call.output_shape) != 3:
            raise HgpartError(f"input {call.name!r} has shape {call.output_shape}; hgpart needs an image input "
                              "(H, W, C)", where=call.where, fix="use keras.Input(shape=(H, W, C))")
        return [Converted(self.name, {"keras_name": call.name}, 0, inputs=(), input_shapes=())]

    def forward(self, rt: Any, layer: LayerLike, x: Any, vals: dict[str, Any], views: dict, training: bool,
                bn_stats: list | None, scope: str) -> dict[int, Any]:
        import tensorflow as tf

        t = {}  # the host sends each part the input channels it owns (a feed, not model traffic)
        for q, idx in rt.layout[layer.name].items():
            with tf.device(rt.host):
                piece = tfops.take_channels(x, idx)
            with tf.device(rt.devices[q]), tf.name_scope(f"{scope}/input/"):
                t[q] = tf.identity(piece)
        return t


class Flatten(LayerKind):
    name = "flatten"
    role = Role.VIEW
    keras_classes = ("Flatten",)
    allocates = False
    rule = "a view: channel c keeps its owner and now holds H*W values (Keras flattens (h, w, c) row-major)"

    def convert(self, call: KerasCall) -> list[Converted]:
        call.check_channels_last()
        return [Converted(self.name, {"keras_name": call.name}, 0)]

    def values_per_channel(self, layer: LayerLike, in_values: list[int]) -> int:
        return in_values[0]

    def column_layout(self, layer: LayerLike, in_layout: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
        if len(layer.input_shapes[0]) != 3:
            return in_layout
        h, w, c = layer.input_shapes[0]
        return {q: (np.arange(h * w)[:, None] * c + idx[None, :]).ravel() for q, idx in in_layout.items()}

    def split_channels(self, layer: LayerLike, in_channels: int) -> int:
        return in_channels

    def forward(self, rt: Any, layer: LayerLike, x: Any, vals: dict[str, Any], views: dict, training: bool,
                bn_stats: list | None, scope: str) -> dict[int, Any]:
        import tensorflow as tf

        out = {}
        for q, y in vals[layer.inputs[0]].tensors.items():
            with tf.device(rt.devices[q]):
                out[q] = tf.reshape(y, [-1, int(np.prod(y.shape[1:]))])
        return out


class Concat(LayerKind):
    name = "concat"
    role = Role.CONCAT
    keras_classes = ("Concatenate",)
    rule = "each part concatenates the channels it owns of every input"

    def convert(self, call: KerasCall) -> list[Converted]:
        axis = int(call.cfg.get("axis", -1))
        if axis not in (-1, len(call.output_shape)):
            raise call.refuse(f"Concatenate on axis {axis}; only the channel (last) axis is supported")
        return [Converted(self.name, {"keras_name": call.name, "axis": -1}, 0)]

    def values_per_channel(self, layer: LayerLike, in_values: list[int]) -> int:
        if len(set(in_values)) != 1:
            raise HgpartError(f"layer {layer.name!r} concatenates maps of different spatial sizes "
                              f"{sorted(set(in_values))}", fix="only channel-axis concatenation is supported")
        return in_values[0]

    def forward(self, rt: Any, layer: LayerLike, x: Any, vals: dict[str, Any], views: dict, training: bool,
                bn_stats: list | None, scope: str) -> dict[int, Any]:
        import tensorflow as tf

        t = {}
        for q in rt.layout[layer.name]:
            pieces = [vals[s].tensors[q] for s in layer.inputs if q in vals[s].tensors]
            with tf.device(rt.devices[q]):
                t[q] = tf.concat(pieces, axis=-1) if len(pieces) > 1 else tf.identity(pieces[0])
        return t


class Reshape(LayerKind):
    """A reshape that keeps the channel (last) axis: channel ``c``'s values stay channel ``c``'s (row-major)."""

    name = "reshape"
    role = Role.VIEW
    keras_classes = ("Reshape",)
    allocates = False
    rule = "a view when the last axis is kept (e.g. (C,) <-> (1, 1, C)): channels keep their owners; else refused"

    def convert(self, call: KerasCall) -> list[Converted]:
        src, out = call.input_shapes[0], call.output_shape
        if src[-1] != out[-1]:
            raise call.refuse(f"Reshape {src} -> {out} mixes channels (the last axis changes)",
                              fix="keep the channel axis last and unchanged, e.g. Reshape((1, 1, C)) after pooling")
        return [Converted(self.name, {"keras_name": call.name, "target_shape": list(out)}, 0)]

    def forward(self, rt: Any, layer: LayerLike, x: Any, vals: dict[str, Any], views: dict, training: bool,
                bn_stats: list | None, scope: str) -> dict[int, Any]:
        import tensorflow as tf

        out = {}
        for q, y in vals[layer.inputs[0]].tensors.items():
            with tf.device(rt.devices[q]):
                out[q] = tf.reshape(y, [-1, *layer.output_shape[:-1], int(y.shape[-1])])
        return out


class Permute(LayerKind):
    """A permutation of the spatial axes that keeps the channels last (channels keep their owners)."""

    name = "permute"
    role = Role.FUSED
    keras_classes = ("Permute",)
    rule = "fused when the channel axis stays last (spatial axes permuted); else refused"

    def convert(self, call: KerasCall) -> list[Converted]:
        dims = [int(d) for d in call.cfg["dims"]]
        if dims[-1] != len(dims):
            raise call.refuse(f"Permute{tuple(dims)} moves the channel axis",
                              fix="keep the channel axis last (permute only the spatial axes)")
        return [Converted(self.name, {"keras_name": call.name, "dims": dims}, 0)]

    def forward(self, rt: Any, layer: LayerLike, x: Any, vals: dict[str, Any], views: dict, training: bool,
                bn_stats: list | None, scope: str) -> dict[int, Any]:
        import tensorflow as tf

        out = {}
        for q, y in vals[layer.inputs[0]].tensors.items():
            with tf.device(rt.devices[q]):
                out[q] = tf.transpose(y, [0, *layer.config["dims"]])
        return out
