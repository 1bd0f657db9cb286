"""Our exact FLOP formulas agree with TensorFlow's own counter, layer by layer.

TensorFlow's counter (``tf.compat.v1.profiler`` float_ops, i.e. the per-op
``flops`` statistics registered in ``tensorflow/python/profiler/internal/
flops_registry.py`` and ``nn_ops.py``) is run on the frozen inference graph of a
model at batch 1 and grouped by Keras layer name scope. The only convention
difference: TensorFlow registers no FLOPs for ReLU (and for ``Max``, used by
global max pooling), where hgpart counts one per element; the expected value
below removes exactly that part.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import pytest
import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

from hgpart.frontend import layer_graph_from_keras
from hgpart.layergraph import Layer, LayerGraph
from hgpart.zoo import build_model


def _tf_flops(model, graph: LayerGraph) -> tuple[dict[str, int], int]:
    """Per-layer and total float ops from TensorFlow's counter on the frozen graph."""
    fn = tf.function(lambda x: model(x, training=False))
    concrete = fn.get_concrete_function(tf.TensorSpec((1, *graph.input_shape), tf.float32))
    graph_def = convert_variables_to_constants_v2(concrete).graph.as_graph_def()
    names = {layer.name for layer in graph.layers}
    per_layer = dict.fromkeys(names, 0)
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(graph_def, name="")
        opts = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
        opts["output"] = "none"
        total = tf.compat.v1.profiler.profile(graph=g, cmd="op", options=opts).total_float_ops
        for op in g.get_operations():
            try:
                value = tf_ops.get_stats_for_node_def(g, op.node_def, "flops").value
            except ValueError:
                value = None
            if not value:
                continue
            scope = op.name.split("/")[1]
            owner = scope if scope in names else scope.rsplit("_", 1)[0]
            assert owner in names, f"op {op.name} is outside every layer scope"
            per_layer[owner] += int(value)
    return per_layer, int(total)


def _tf_convention(layer: Layer) -> int:
    """Our count minus what TF does not count (ReLU-like activations, Max reduction)."""
    n = 1
    for v in layer.output_shape:
        n *= v
    act = layer.config.get("activation", "linear")
    relu_part = n if act not in ("linear", "softmax") else 0
    if layer.kind == "activation":
        return layer.flops - relu_part
    if layer.kind == "global_max_pool":
        return 0
    if layer.kind in ("conv2d", "depthwise_conv2d", "dense"):
        return layer.flops - relu_part
    return layer.flops


def _depthwise_net():
    L = keras.layers
    inp = keras.Input((16, 16, 3), name="input")
    x = L.Conv2D(8, 3, strides=2, padding="valid", name="c1")(inp)
    x = L.DepthwiseConv2D(3, depth_multiplier=2, padding="same", name="dw")(x)
    x = L.BatchNormalization(name="bn")(x)
    x = L.ReLU(max_value=6.0, name="relu6")(x)
    x = L.AveragePooling2D(2, name="ap")(x)
    x = L.Conv2D(6, 1, use_bias=False, activation="linear", name="pw")(x)
    x = L.GlobalMaxPooling2D(name="gmp")(x)
    out = L.Dense(5, activation="softmax", name="out")(x)
    return keras.Model(inp, out)


@pytest.mark.parametrize("which", ["minires", "depthwise"])
def test_flops_match_tensorflow_counter(which: str) -> None:
    model = _depthwise_net() if which == "depthwise" else build_model(which)
    graph = layer_graph_from_keras(model, name=which)
    per_layer, total = _tf_flops(model, graph)
    expected = {layer.name: _tf_convention(layer) for layer in graph.layers}
    assert per_layer == expected
    assert total == sum(expected.values())
    # the counter really saw every convolution and dense layer (guards against an empty comparison)
    assert all(per_layer[x.name] > 0 for x in graph.layers if x.kind in ("conv2d", "depthwise_conv2d", "dense"))
