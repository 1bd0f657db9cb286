"""Element-wise merges of several tensors (Add, Multiply, Subtract, Average, Maximum, Minimum).

Output channel ``j`` reads channel ``j`` of every input: one vertex per output channel, whose nets are the
producers of channel ``j`` of each input. An input of per-sample shape ``(1, 1, C)`` (the gate of a
squeeze-and-excitation block) is broadcast over the spatial axes: its nets cost one value per channel.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from hgpart.kinds import tfops
from hgpart.kinds.base import Converted, KerasCall, LayerKind, LayerLike, Role

__all__ = ["Merge", "Add", "Multiply", "Subtract", "Average", "Maximum", "Minimum", "ScaledAdd"]


class Merge(LayerKind, ABC):
    """Base of the element-wise merges; subclasses name the op."""

    role = Role.VERTEX
    rule = "output channel j reads channel j of every input (same-shape maps)"
    #: the Keras layer broadcasts a (1, 1, C) input over the spatial axes (only Multiply is used so)
    broadcasts: ClassVar[bool] = True
    #: extra FLOPs per output element beyond one per input after the first (Average's divide)
    extra_flops: ClassVar[int] = 0

    def convert(self, call: KerasCall) -> list[Converted]:
        out = call.output_shape
        for s in call.input_shapes:
            same = s == out
            gate = self.broadcasts and len(s) == len(out) and s[-1] == out[-1] and all(v == 1 for v in s[:-1])
            if not (same or gate):
                raise call.refuse(f"{call.cls} of shapes {list(call.input_shapes)}: hgpart merges same-shape "
                                  "tensors or a (1, 1, C) gate with a (H, W, C) map")
        n = call.n_out
        flops = (len(call.inputs) - 1) * n + self.extra_flops * n
        return [Converted(self.name, {"keras_name": call.name}, flops)]

    def read_map(self, layer: LayerLike) -> np.ndarray | None:
        return np.arange(layer.out_channels)

    @abstractmethod
    def combine(self, layer: LayerLike, terms: list[Any]) -> Any:
        """The merge of the parts' column-aligned input slices."""

    def forward(self, rt: Any, layer: LayerLike, x: Any, vals: dict[str, Any], views: dict, training: bool,
                bn_stats: list | None, scope: str) -> dict[int, Any]:
        import tensorflow as tf

        t = {}
        for p, jp in rt.layout[layer.name].items():
            terms = []
            for inp in layer.inputs:
                view = rt.view(vals, views, inp, p)
                pos = rt.pos_in_view(inp, p, jp)
                with tf.device(rt.devices[p]):
                    terms.append(tfops.take_channels(view, pos))
            with tf.device(rt.devices[p]):
                t[p] = self.combine(layer, terms)
        return t


def _fold(fn: Callable[[Any, Any], Any], terms: list[Any]) -> Any:
    out = terms[0]
    for v in terms[1:]:
        out = fn(out, v)
    return out


class Add(Merge):
    name = "add"
    keras_classes = ("Add",)
    doc_label = "`x + y` of two tensors"
    broadcasts = False

    def combine(self, layer: LayerLike, terms: list[Any]) -> Any:
        import tensorflow as tf

        return tf.add_n(terms)


class Multiply(Merge):
    name = "multiply"
    keras_classes = ("Multiply",)
    doc_label = "`x * y` of two tensors"
    rule = ("output channel j reads channel j of every input; a broadcast (1, 1, C) gate (squeeze-and-excitation) "
            "crosses as one value per channel")

    def combine(self, layer: LayerLike, terms: list[Any]) -> Any:
        import tensorflow as tf

        return _fold(tf.multiply, terms)


class Subtract(Merge):
    name = "subtract"
    keras_classes = ("Subtract",)
    doc_label = "`x - y` of two tensors"
    broadcasts = False

    def combine(self, layer: LayerLike, terms: list[Any]) -> Any:
        import tensorflow as tf

        return tf.subtract(terms[0], terms[1])


class Average(Merge):
    name = "average"
    keras_classes = ("Average",)
    broadcasts = False
    extra_flops = 1

    def combine(self, layer: LayerLike, terms: list[Any]) -> Any:
        import tensorflow as tf

        return tf.add_n(terms) / float(len(terms))


class Maximum(Merge):
    name = "maximum"
    keras_classes = ("Maximum",)
    broadcasts = False

    def combine(self, layer: LayerLike, terms: list[Any]) -> Any:
        import tensorflow as tf

        return _fold(tf.maximum, terms)


class Minimum(Merge):
    name = "minimum"
    keras_classes = ("Minimum",)
    broadcasts = False

    def combine(self, layer: LayerLike, terms: list[Any]) -> Any:
        import tensorflow as tf

        return _fold(tf.minimum, terms)


class ScaledAdd(Merge):
    """``inputs[0] + inputs[1] * scale``: InceptionResNetV2's residual merge (its ``CustomScaleLayer``)."""

    name = "scaled_add"
    keras_classes = ("keras.src.applications.inception_resnet_v2.CustomScaleLayer",)
    rule = "x + r * scale: output channel j reads channel j of both inputs"
    broadcasts = False
    extra_flops = 1  # the multiply by scale

    def convert(self, call: KerasCall) -> list[Converted]:
        out = super().convert(call)
        if len(call.inputs) != 2:
            raise call.refuse(f"{len(call.inputs)} inputs, expected 2")
        return [Converted(self.name, {**out[0].config, "scale": float(call.cfg["scale"])}, out[0].flops)]

    def combine(self, layer: LayerLike, terms: list[Any]) -> Any:
        return terms[0] + terms[1] * float(layer.config["scale"])
