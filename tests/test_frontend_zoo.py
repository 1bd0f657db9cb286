"""Every zoo model converts; parameter counts equal Keras's; shapes, edges and configs are sane."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import pytest

from hgpart.frontend import layer_graph_from_keras
from hgpart.layergraph import LayerGraph
from hgpart.models import load_graph, model_name, parse_input
from hgpart.zoo import ZOO, build_model

SMALL = {"lenet5": (32, 32, 1), "minivgg": (32, 32, 3), "minires": (32, 32, 3)}


@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_model_converts_with_exact_params(name: str) -> None:
    shape = SMALL.get(name, (32, 32, 3))
    model = build_model(name, input_shape=shape, num_classes=7)
    graph = layer_graph_from_keras(model, name=name)
    assert graph.total_params == model.count_params()
    assert graph.input_shape == shape
    assert graph.output_layer.output_shape == (7,)
    assert graph.num_classes == 7
    assert graph.layers[0].kind == "input"
    # every Keras layer appears once, and per-layer params match Keras's own count
    by_name = {layer.name: layer for layer in graph.layers}
    for klayer in model.layers:
        assert by_name[klayer.name].params == klayer.count_params()
        assert by_name[klayer.name].keras_class == type(klayer).__name__
    assert sum(layer.flops for layer in graph.layers) > 0
    # the graph survives its own dict round trip with the same fingerprint
    again = LayerGraph.from_dict(graph.to_dict())
    assert again.fingerprint() == graph.fingerprint()


def test_vgg16_thesis_setting_224() -> None:
    graph = load_graph("vgg16", input_shape=parse_input("224"))
    assert graph.name == "vgg16"
    assert graph.total_params == 138_357_544  # the published VGG-16 count
    convs = [layer for layer in graph.layers if layer.kind == "conv2d"]
    assert len(convs) == 13 and len([x for x in graph.layers if x.kind == "dense"]) == 3
    # 15.47 G multiply-adds per sample (well known) -> exact count with biases and ReLUs
    macs = sum(
        layer.output_shape[0] * layer.output_shape[1] * layer.out_channels * 9 * layer.in_channels for layer in convs
    ) + sum(layer.input_shapes[0][0] * layer.out_channels for layer in graph.layers if layer.kind == "dense")
    assert macs == 15_470_264_320
    assert graph.layer("block5_pool").output_shape == (7, 7, 512)
    assert graph.layer("fc1").input_shapes == ((25088,),)
    c = graph.layer("block1_conv1").config
    assert c == {
        "keras_name": "block1_conv1", "filters": 64, "kernel_size": [3, 3], "strides": [1, 1], "padding": "same",
        "dilation_rate": [1, 1], "use_bias": True, "activation": "relu",
    }
    assert graph.layer("block1_pool").config["pool_size"] == [2, 2]


def test_branching_models_have_correct_edges() -> None:
    g = load_graph("minires")
    add = g.layer("res_add")
    assert add.kind == "add" and add.inputs == ("stem_relu", "res_conv2")
    cat = g.layer("mix_concat")
    assert cat.kind == "concat" and cat.inputs == ("mix_1x1", "mix_3x3", "mix_pool_proj")
    assert cat.output_shape == (16, 16, 40)
    order = {layer.name: i for i, layer in enumerate(g.layers)}
    for layer in g.layers:
        for src in layer.inputs:
            assert order[src] < order[layer.name]
    r18 = load_graph("resnet18", input_shape=(32, 32, 3))
    assert len([x for x in r18.layers if x.kind == "add"]) == 8
    bn = r18.layer("conv1_bn").config
    assert bn["epsilon"] == pytest.approx(1.001e-5) and bn["center"] and bn["scale"] and "momentum" in bn


def test_input_parsing_and_names() -> None:
    assert parse_input("224") == (224, 224, 3)
    assert parse_input("32x32x1") == (32, 32, 1)
    assert parse_input("28x28") == (28, 28, 3)
    assert parse_input(None) is None
    assert model_name("keras:ResNet50") == "resnet50"
    assert model_name("/tmp/abc/net.keras") == "net"
    assert model_name("vgg16") == "vgg16"


def test_lenet5_at_28_and_default_input_tags() -> None:
    g = load_graph("lenet5", input_shape=(28, 28, 1))
    assert g.layer("pool2").output_shape == (4, 4, 16)
    assert g.input_tag == "28x28x1"
    assert load_graph("minivgg").input_tag == "32"


def test_sequential_models_convert() -> None:
    import keras

    L = keras.layers
    m = keras.Sequential([
        keras.Input((16, 16, 3)), L.Conv2D(4, 3, activation="relu", name="c"), L.MaxPooling2D(name="p"),
        L.Flatten(name="f"), L.Dense(3, name="d"),
    ])
    g = layer_graph_from_keras(m, name="seq")
    assert [x.kind for x in g.layers] == ["input", "conv2d", "max_pool", "flatten", "dense"]
    assert g.layer("d").inputs == ("f",) and g.total_params == m.count_params()


def test_keras_resnet50_application_uses_zero_padding() -> None:
    g = load_graph("keras:ResNet50", input_shape=(32, 32, 3), num_classes=10)
    pad = g.layer("conv1_pad")
    assert pad.kind == "zero_padding" and pad.config["padding"] == [[3, 3], [3, 3]] and pad.flops == 0
    assert len([x for x in g.layers if x.kind == "add"]) == 16
