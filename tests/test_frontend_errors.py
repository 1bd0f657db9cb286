"""Unsupported models are refused with one clear HgpartError naming the layer and its class."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import pytest

from hgpart.errors import HgpartError
from hgpart.frontend import layer_graph_from_keras
from hgpart.models import load_graph, load_keras_model, parse_input

L = keras.layers


def _convert(x_in, x_out):
    return layer_graph_from_keras(keras.Model(x_in, x_out), name="bad")


def test_lstm_family_layer_is_named() -> None:
    inp = keras.Input((8, 8, 3))
    x = L.Conv2D(4, 3, padding="same", name="c1")(inp)
    x = L.ConvLSTM1D(4, 3, name="my_lstm")(x)
    with pytest.raises(HgpartError, match=r"layer 'my_lstm' of class ConvLSTM1D is not supported"):
        _convert(inp, x)


def test_upsampling_and_reshape_are_named() -> None:
    inp = keras.Input((8, 8, 3))
    x = L.UpSampling2D(interpolation="bicubic", name="up")(inp)
    with pytest.raises(HgpartError, match=r"'up' of class UpSampling2D.*bicubic"):
        _convert(inp, L.Flatten()(x))
    x = L.Reshape((8, 24), name="mix")(inp)
    with pytest.raises(HgpartError, match=r"'mix' of class Reshape.*mixes channels"):
        _convert(inp, L.Flatten()(x))


def test_grouped_conv_is_its_own_kind_and_channels_first_is_refused() -> None:
    inp = keras.Input((8, 8, 4))
    assert _convert(inp, L.Conv2D(4, 3, groups=2, name="g")(inp)).layer("g").kind == "grouped_conv2d"
    inp = keras.Input((4, 8, 8))
    with pytest.raises(HgpartError, match=r"'cf' of class Conv2D.*channels_first"):
        _convert(inp, L.Conv2D(4, 3, data_format="channels_first", name="cf")(inp))


def test_dense_on_a_sequence_and_non_channel_concat_are_refused() -> None:
    inp = keras.Input((8, 8, 3))
    assert _convert(inp, L.Dense(4, name="d")(inp)).layer("d").kind == "pointwise_dense"  # a 1x1 conv
    with pytest.raises(HgpartError, match=r"'d' of class Dense.*rank-3"):
        _convert(inp, L.Dense(4, name="d")(L.Reshape((64, 3))(inp)))
    a = L.Conv2D(4, 1, name="a")(inp)
    b = L.Conv2D(4, 1, name="b")(inp)
    with pytest.raises(HgpartError, match=r"'cat' of class Concatenate.*axis 1"):
        _convert(inp, L.Concatenate(axis=1, name="cat")([a, b]))


class _Subclassed(keras.Model):
    def __init__(self) -> None:
        super().__init__(name="sub")
        self.conv = L.Conv2D(4, 3, name="sc")

    def call(self, x):
        return self.conv(x)


def test_nested_subclassed_model_reused_sub_model_and_shared_layer_are_refused() -> None:
    inp = keras.Input((8, 8, 3))
    with pytest.raises(HgpartError, match=r"'sub' is a nested subclassed model"):
        _convert(inp, L.Flatten()(_Subclassed()(inp)))
    inner = keras.Sequential([keras.Input((8, 8, 3)), L.Conv2D(3, 3, padding="same", name="ic")], name="inner")
    inp = keras.Input((8, 8, 3))
    with pytest.raises(HgpartError, match=r"'inner'.*called more than once"):
        _convert(inp, L.Flatten()(inner(inner(inp))))
    shared = L.Conv2D(3, 3, padding="same", name="shared")
    inp = keras.Input((8, 8, 3))
    with pytest.raises(HgpartError, match=r"'shared'.*called more than once"):
        _convert(inp, shared(shared(inp)))


def test_multi_input_model_is_refused() -> None:
    a, b = keras.Input((8, 8, 3)), keras.Input((8, 8, 3))
    with pytest.raises(HgpartError, match="single-input"):
        _convert([a, b], L.Add()([a, b]))


def test_keras_application_by_name() -> None:
    g = load_graph("keras:VGG16", input_shape=(32, 32, 3), num_classes=10)
    model = load_keras_model("keras:VGG16", input_shape=(32, 32, 3), num_classes=10)
    assert g.name == "vgg16" and g.total_params == model.count_params()
    assert [x.kind for x in g.layers].count("conv2d") == 13
    with pytest.raises(HgpartError, match="keras.applications has no model 'NoSuchNet'"):
        load_graph("keras:NoSuchNet")


def test_unknown_zoo_name_and_bad_input() -> None:
    with pytest.raises(HgpartError, match="unknown zoo model 'vgg17'"):
        load_graph("vgg17")
    with pytest.raises(HgpartError, match="cannot read input size"):
        parse_input("big")
    with pytest.raises(HgpartError, match="cannot build lenet5"):
        load_graph("lenet5", input_shape=(8, 8, 1))


def test_keras_file_round_trip(tmp_path) -> None:
    model = load_keras_model("minires")
    path = tmp_path / "mynet.keras"
    model.save(path)
    g = load_graph(str(path))
    assert g.name == "mynet"
    assert g.fingerprint() == load_graph("minires").fingerprint()
    with pytest.raises(HgpartError, match="does not exist"):
        load_graph(str(tmp_path / "missing.keras"))
    bad = tmp_path / "broken.keras"
    bad.write_bytes(path.read_bytes()[:200])
    with pytest.raises(HgpartError, match="cannot read model file"):
        load_graph(str(bad))
    with pytest.raises(HgpartError, match="has input shape"):
        load_graph(str(path), input_shape=parse_input("64"))
    assert parse_input("32") == (32, 32, 3)
