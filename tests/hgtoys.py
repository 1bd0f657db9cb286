"""Hand-built layer graphs for the hypergraph, partitioner, metrics and placement tests.

No TensorFlow: the layers are written out the way the Keras front end records them, so these tests
exercise the compiler alone. ``toy_network`` is the thesis's Figure 3.3-3.5 network (RGB input, convs
with 4, 3 and 2 filters, then fully connected layers); ``branching_network`` has an Add skip
connection, a Concatenate and a depthwise conv.
"""

from __future__ import annotations

from hgpart.layergraph import Layer, LayerGraph


def conv(name, src, in_shape, filters, *, k=3, bias=True):
    h, w, c = in_shape
    params = k * k * c * filters + (filters if bias else 0)
    flops = 2 * h * w * k * k * c * filters
    return Layer(name, "conv2d", "Conv2D", (src,), (tuple(in_shape),), (h, w, filters), params, flops,
                 {"filters": filters, "kernel_size": [k, k], "strides": [1, 1], "padding": "same",
                  "activation": "relu", "use_bias": bias})


def maxpool2(name, src, in_shape):
    """2 x 2 max pooling, stride 2 (FLOPs: one per output element, as the toy networks always counted them)."""
    h, w, c = in_shape
    out = (h // 2, w // 2, c)
    return Layer(name, "max_pool", "MaxPooling2D", (src,), (tuple(in_shape),), out, 0, out[0] * out[1] * c,
                 {"pool_size": [2, 2], "strides": [2, 2], "padding": "valid"})


def dense(name, src, n_in, units, activation="relu"):
    return Layer(name, "dense", "Dense", (src,), ((n_in,),), (units,), n_in * units + units, 2 * n_in * units,
                 {"units": units, "activation": activation, "use_bias": True})


def toy_network() -> LayerGraph:
    """Input 4x4x3 -> conv 4 -> conv 3 -> maxpool 2 -> conv 2 -> flatten -> dense 4 -> dense 3 -> dense 2."""
    layers = [
        Layer("input", "input", "InputLayer", (), (), (4, 4, 3)),
        conv("conv1", "input", (4, 4, 3), 4),
        conv("conv2", "conv1", (4, 4, 4), 3),
        maxpool2("pool", "conv2", (4, 4, 3)),
        conv("conv3", "pool", (2, 2, 3), 2),
        Layer("flatten", "flatten", "Flatten", ("conv3",), ((2, 2, 2),), (8,)),
        dense("fc1", "flatten", 8, 4),
        dense("fc2", "fc1", 4, 3),
        dense("fc3", "fc2", 3, 2, activation="softmax"),
    ]
    return LayerGraph("toy", (4, 4, 3), layers, num_classes=2)


def branching_network() -> LayerGraph:
    """input -> c1 -> c2, add(c1, c2) -> c3 | c4 -> concat -> depthwise -> global avg pool -> dense 3."""
    layers = [
        Layer("input", "input", "InputLayer", (), (), (4, 4, 3)),
        conv("c1", "input", (4, 4, 3), 4),
        conv("c2", "c1", (4, 4, 4), 4),
        Layer("add", "add", "Add", ("c1", "c2"), ((4, 4, 4), (4, 4, 4)), (4, 4, 4), 0, 64),
        conv("c3", "add", (4, 4, 4), 2),
        conv("c4", "add", (4, 4, 4), 2),
        Layer("cat", "concat", "Concatenate", ("c3", "c4"), ((4, 4, 2), (4, 4, 2)), (4, 4, 4), 0, 0, {"axis": -1}),
        Layer("dw", "depthwise_conv2d", "DepthwiseConv2D", ("cat",), ((4, 4, 4),), (4, 4, 4), 4 * 9 + 4,
              2 * 16 * 9 * 4, {"kernel_size": [3, 3], "depth_multiplier": 1, "padding": "same", "use_bias": True}),
        Layer("gap", "global_avg_pool", "GlobalAveragePooling2D", ("dw",), ((4, 4, 4),), (4,), 0, 64),
        dense("out", "gap", 4, 3, activation="softmax"),
    ]
    return LayerGraph("branchy", (4, 4, 3), layers, num_classes=3)


def unit_work(graph: LayerGraph) -> dict[str, float]:
    """Work proportional to FLOPs (plus a little for every layer so no vertex weighs zero)."""
    return {layer.name: float(layer.flops) / 1000.0 + 0.5 for layer in graph.layers}


def chain(widths: list[int], fc: list[int], hw: int = 4) -> LayerGraph:
    """input (widths[0] channels) -> convs of widths[1:] -> flatten -> dense layers fc."""
    layers = [Layer("input", "input", "InputLayer", (), (), (hw, hw, widths[0]))]
    prev = "input"
    for i, w in enumerate(widths[1:]):
        layers.append(conv(f"c{i}", prev, (hw, hw, widths[i]), w))
        prev = f"c{i}"
    layers.append(Layer("flat", "flatten", "Flatten", (prev,), ((hw, hw, widths[-1]),), (hw * hw * widths[-1],)))
    prev, n_in = "flat", hw * hw * widths[-1]
    for i, u in enumerate(fc):
        layers.append(dense(f"d{i}", prev, n_in, u))
        prev, n_in = f"d{i}", u
    return LayerGraph("chain", (hw, hw, widths[0]), layers)
