"""Per-channel affine layers: preprocessing (Rescaling, Normalization), arithmetic with a constant (``x + 3``)
and ConvNeXt's LayerScale.

All are fused: output channel ``j`` is an affine function of input channel ``j`` with per-channel (or scalar)
constants, so each part applies it to the channels it owns and nothing crosses devices.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from hgpart.kinds.base import Converted, FusedKind, KerasCall, LayerLike
from hgpart.kinds.channelwise import channel_axis_only
from hgpart.kinds.merge import Add, Merge, Multiply, Subtract

__all__ = ["Rescaling", "Normalization", "ConstantOp", "LayerScale"]


#: operators between two tensors (ConvNeXt's residual ``x + y``) and the merge layer computing each
_TENSOR_MERGES: dict[str, Merge] = {"Add": Add(), "Subtract": Subtract(), "Multiply": Multiply()}


def _per_channel(call: KerasCall, value: Any, what: str) -> float | list[float]:
    """A scalar, or one value per channel (the last axis), as plain floats."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.size == 1:
        return float(arr.ravel()[0])
    c = call.output_shape[-1]
    if arr.size != c:
        raise call.refuse(f"{what} of shape {arr.shape} is not one value per channel ({c})")
    return [float(v) for v in arr.ravel()]


def _channel_values(rt: Any, layer: LayerLike, q: int, value: float | list[float]) -> Any:
    """``value`` for the channels part ``q`` holds (a scalar stays a scalar)."""
    if not isinstance(value, list):
        return float(value)
    idx = rt.layout[layer.name][q] % layer.out_channels
    return np.asarray(value, np.float32)[idx]


class Rescaling(FusedKind):
    name = "rescaling"
    keras_classes = ("Rescaling",)
    rule = "fused: x * scale + offset per channel, nothing crosses devices"

    def convert(self, call: KerasCall) -> list[Converted]:
        scale = _per_channel(call, call.cfg.get("scale", 1.0), "scale")
        offset = _per_channel(call, call.cfg.get("offset", 0.0), "offset")
        return [Converted(self.name, {"keras_name": call.name, "scale": scale, "offset": offset}, 2 * call.n_out)]

    def apply(self, rt: Any, layer: LayerLike, q: int, y: Any, training: bool, bn_stats: list | None) -> Any:
        cfg = layer.config
        return y * _channel_values(rt, layer, q, cfg["scale"]) + _channel_values(rt, layer, q, cfg["offset"])


class Normalization(FusedKind):
    name = "normalization"
    keras_classes = ("Normalization",)
    weights = ("mean", "variance")
    rule = "fused: (x - mean) / sqrt(variance) per channel, the statistics stay on the channel's part"

    def convert(self, call: KerasCall) -> list[Converted]:
        axis = call.cfg.get("axis", -1)
        channel_axis_only(call, axis)
        if call.cfg.get("invert"):
            raise call.refuse("invert=True", fix="use Normalization(invert=False) or a Rescaling layer")
        flops = 2 * call.n_out + call.output_shape[-1]  # subtract, divide; one sqrt per channel
        return [Converted(self.name, {"keras_name": call.name}, flops)]

    def make_variables(self, rt: Any, layer: LayerLike, w: dict[str, np.ndarray]) -> None:
        c = layer.out_channels
        for q, idx in rt.layout[layer.name].items():
            for name in self.weights:
                full = np.broadcast_to(np.asarray(w[name], np.float32).reshape(-1)[-c:], (c,))
                rt.add_variable(layer, q, name, full[idx % c], (idx % c,), trainable=False)

    def apply(self, rt: Any, layer: LayerLike, q: int, y: Any, training: bool, bn_stats: list | None) -> Any:
        import tensorflow as tf

        mean = rt.var(layer.name, "mean", q)
        var = rt.var(layer.name, "variance", q)
        return (y - mean) / tf.maximum(tf.sqrt(var), 1e-7)  # keras.backend.epsilon()


class ConstantOp(FusedKind):
    """``x + c``, ``x - c``, ``x * c``, ``x / c`` with a Python constant ``c`` (e.g. MobileNetV3's hard sigmoid)."""

    name = "constant_op"
    keras_classes = ("op:Add", "op:Subtract", "op:Multiply", "op:TrueDivide", "op:Divide")
    rule = "fused: element-wise with a constant, nothing crosses devices (`x + y` of two tensors is a merge)"
    _OPS: ClassVar[dict[str, str]] = {"Add": "add", "Subtract": "subtract", "Multiply": "multiply",
                                      "TrueDivide": "divide", "Divide": "divide"}

    def convert(self, call: KerasCall) -> list[Converted]:
        consts = [a for a in call.args if isinstance(a, int | float) and not isinstance(a, bool)]
        if len(call.inputs) == 2 and not consts and call.cls in _TENSOR_MERGES:  # x + y: the merge layer's rule
            return _TENSOR_MERGES[call.cls].convert(call)
        if len(call.inputs) != 1 or len(consts) != 1 or len(call.args) != 2:
            raise call.refuse(f"{call.cls} of two tensors written with an operator",
                              fix=f"use the keras.layers.{call.cls} layer to merge tensors")
        tensor_first = not isinstance(call.args[0], int | float)
        return [Converted(self.name, {"keras_name": call.name, "op": self._OPS[call.cls],
                                      "constant": float(consts[0]), "tensor_first": tensor_first}, call.n_out)]

    def apply(self, rt: Any, layer: LayerLike, q: int, y: Any, training: bool, bn_stats: list | None) -> Any:
        cfg = layer.config
        c = float(cfg["constant"])
        a, b = (y, c) if cfg["tensor_first"] else (c, y)
        op = cfg["op"]
        if op == "add":
            return a + b
        if op == "subtract":
            return a - b
        if op == "multiply":
            return a * b
        return a / b


class LayerScale(FusedKind):
    """ConvNeXt's ``LayerScale``: ``x * gamma`` with a trainable per-channel ``gamma``."""

    name = "layer_scale"
    keras_classes = ("keras.src.applications.convnext.LayerScale",)
    weights = ("gamma",)
    rule = "fused: x * gamma per channel, gamma stays on the channel's part"

    def convert(self, call: KerasCall) -> list[Converted]:
        return [Converted(self.name, {"keras_name": call.name}, call.n_out)]

    def make_variables(self, rt: Any, layer: LayerLike, w: dict[str, np.ndarray]) -> None:
        c = layer.out_channels
        for q, idx in rt.layout[layer.name].items():
            rt.add_variable(layer, q, "gamma", np.asarray(w["gamma"], np.float32)[idx % c], (idx % c,))

    def apply(self, rt: Any, layer: LayerLike, q: int, y: Any, training: bool, bn_stats: list | None) -> Any:
        return y * rt.var(layer.name, "gamma", q)
