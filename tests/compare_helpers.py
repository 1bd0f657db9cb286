"""Hand-built layer graphs for the comparison tests (no TensorFlow needed)."""

from __future__ import annotations

from hgpart.layergraph import Layer, LayerGraph


def tiny_vgg(*, hw: int = 8, channels: tuple[int, ...] = (4, 8, 8), dense: int = 6, classes: int = 3) -> LayerGraph:
    """input -> [conv3x3 (+pool after every second conv)]* -> flatten -> dense -> dense."""
    layers = [Layer("input", "input", "InputLayer", (), (), (hw, hw, 3))]
    prev, shape = "input", (hw, hw, 3)
    for i, c in enumerate(channels):
        cin = shape[-1]
        out = (shape[0], shape[1], c)
        layers.append(Layer(f"conv{i + 1}", "conv2d", "Conv2D", (prev,), (shape,), out,
                            params=9 * cin * c + c, flops=2 * 9 * cin * c * out[0] * out[1],
                            config={"kernel_size": [3, 3], "padding": "same"}))
        prev, shape = f"conv{i + 1}", out
        if i % 2 == 1:
            pooled = (shape[0] // 2, shape[1] // 2, c)
            layers.append(Layer(f"pool{i + 1}", "max_pool", "MaxPooling2D", (prev,), (shape,), pooled,
                                flops=shape[0] * shape[1] * c))
            prev, shape = f"pool{i + 1}", pooled
    flat = shape[0] * shape[1] * shape[2]
    layers.append(Layer("flatten", "flatten", "Flatten", (prev,), (shape,), (flat,)))
    layers.append(Layer("fc1", "dense", "Dense", ("flatten",), ((flat,),), (dense,),
                        params=flat * dense + dense, flops=2 * flat * dense))
    layers.append(Layer("fc2", "dense", "Dense", ("fc1",), ((dense,),), (classes,),
                        params=dense * classes + classes, flops=2 * dense * classes))
    return LayerGraph("tinyvgg", (hw, hw, 3), layers, num_classes=classes)
