"""Hand-computed hypergraphs of the newer layer kinds (coarse and fine grain), from tiny Keras models.

Batch B = 1, d = 4 bytes: a 4x4 map costs 64 bytes, a 2x2 map 16, one value per channel 4. Every expected
number is derived by hand in the comments; the vertex ids are looked up by block so the layer order of the
front end does not matter.
"""

from __future__ import annotations

import keras
import numpy as np

from hgpart.frontend import layer_graph_from_keras
from hgpart.hypergraph import REDUCE, build_hypergraph
from hgpart.metrics import km1_bytes

L = keras.layers


def _graph(inp, out, name="toy"):
    return layer_graph_from_keras(keras.Model(inp, out, name=name), name=name)


def _work(graph):
    return {layer.name: float(layer.flops) + 1.0 for layer in graph.layers}


def _hg(graph, grain="coarse"):
    return build_hypergraph(graph, _work(graph), batch_size=1, grain=grain)


def _nets(hg):
    """{frozenset(pins): cost}."""
    return {frozenset(hg.net_pins[hg.net_ptr[n]:hg.net_ptr[n + 1]].tolist()): float(hg.net_cost[n])
            for n in range(hg.num_nets)}


def _v(hg, layer, role="filter"):
    return hg.block(layer, role).start


def se_block():
    x = inp = keras.Input((4, 4, 2), name="input")
    c = L.Conv2D(3, 1, name="c")(x)
    s = L.GlobalAveragePooling2D(name="sq")(c)
    s = L.Reshape((1, 1, 3), name="rs")(s)
    r = L.Conv2D(1, 1, activation="swish", name="r")(s)
    e = L.Conv2D(3, 1, activation="sigmoid", name="e")(r)
    m = L.Multiply(name="m")([c, e])
    g = L.GlobalAveragePooling2D(name="g")(m)
    return _graph(inp, L.Dense(2, name="d")(g), "se")


def test_squeeze_excite_gate_costs_one_value_per_channel():
    g = se_block()
    hg = _hg(g)
    # vertices: input 2 + c 3 + r 1 + e 3 + m 3 + d 2 = 14 (GAP, Reshape are fused / views)
    assert hg.num_vertices == 14
    c, r, e, m, d = (_v(hg, n) for n in ("c", "r", "e", "m", "d"))
    nets = _nets(hg)
    # input k -> every filter of c: 2 nets, 4x4 map = 64 bytes
    assert nets[frozenset({0, c, c + 1, c + 2})] == 64.0
    # c_j read by the Multiply: the full map (64); c_j read through GAP + Reshape by r: one value (4)
    for j in range(3):
        assert nets[frozenset({c + j, m + j})] == 64.0
        assert nets[frozenset({c + j, r})] == 4.0
        # the gate e_j is broadcast over 4x4 but crosses as one value per channel
        assert nets[frozenset({e + j, m + j})] == 4.0
        assert nets[frozenset({m + j, d, d + 1})] == 4.0
    assert nets[frozenset({r, e, e + 1, e + 2})] == 4.0
    assert hg.num_nets == 2 + 3 + 3 + 1 + 3 + 3 == 15
    assert hg.num_pins == 2 * 4 + 3 * 2 + 3 * 2 + 4 + 3 * 2 + 3 * 3 == 39
    # the gate alone on part 1: r's net and the 3 gate nets are cut, 4 * 4 = 16 bytes (not 3 maps of 64)
    parts = np.zeros(hg.num_vertices, np.int64)
    parts[e:e + 3] = 1
    assert km1_bytes(hg, parts, 2) == 16.0


def test_squeeze_excite_fine_grain():
    hg = _hg(se_block(), "fine")
    # input 2; c 3x2 pairs + 3 reductions; r 1x3 + 1; e 3x1 + 3; m 3; d 2 = 26
    assert hg.num_vertices == 2 + 9 + 4 + 6 + 3 + 2 == 26
    red = hg.net_kind == REDUCE
    # reductions: c 3 (64 bytes, 2 pairs + r_j), r 1 (4 bytes, 3 + 1), e 3 (4 bytes, 1 + 1)
    assert sorted(hg.net_cost[red].tolist()) == [4.0] * 4 + [64.0] * 3
    assert sorted(np.diff(hg.net_ptr)[red].tolist()) == [2, 2, 2, 3, 3, 3, 4]
    assert hg.num_nets == 15 + 7


def separable_net():
    x = inp = keras.Input((4, 4, 2), name="input")
    x = L.SeparableConv2D(3, 3, padding="same", depth_multiplier=2, name="sep")(x)
    x = L.GlobalAveragePooling2D(name="gap")(x)
    return _graph(inp, L.Dense(2, name="d")(x), "sep")


def test_separable_conv_is_a_depthwise_and_a_pointwise_layer():
    g = separable_net()
    dw, pw = g.layer("sep.depthwise"), g.layer("sep")
    assert (dw.kind, pw.kind) == ("depthwise_conv2d", "conv2d") and pw.inputs == ("sep.depthwise",)
    # FLOPs: depthwise 2 * 16 positions * 4 channels * 9 taps = 1152; pointwise 2 * 16 * 3 * 4 + bias 48 = 432
    assert (dw.flops, pw.flops) == (1152, 432)
    # parameters: 3x3x2x2 = 36 depthwise, 4x3 + 3 = 15 pointwise
    assert (dw.params, pw.params) == (36, 15)
    hg = _hg(g)
    assert hg.num_vertices == 2 + 4 + 3 + 2 == 11
    a, b, d = _v(hg, "sep.depthwise"), _v(hg, "sep"), _v(hg, "d")
    nets = _nets(hg)
    for k in range(2):  # input channel k is read by depthwise channels 2k and 2k + 1 only
        assert nets[frozenset({k, a + 2 * k, a + 2 * k + 1})] == 64.0
    for j in range(4):  # each depthwise channel is read by every pointwise filter
        assert nets[frozenset({a + j, b, b + 1, b + 2})] == 64.0
    for j in range(3):
        assert nets[frozenset({b + j, d, d + 1})] == 4.0
    assert (hg.num_nets, hg.num_pins) == (9, 2 * 3 + 4 * 4 + 3 * 3)
    fine = _hg(g, "fine")
    # the pointwise part splits into 3 x 4 pairs + 3 reductions; the depthwise part stays 4 vertices
    assert fine.num_vertices == 2 + 4 + 12 + 3 + 2
    assert sorted(fine.net_cost[fine.net_kind == REDUCE].tolist()) == [64.0] * 3


def test_conv2d_transpose_both_grains():
    x = inp = keras.Input((2, 2, 2), name="input")
    x = L.Conv2DTranspose(3, 2, strides=2, name="t")(x)
    x = L.GlobalAveragePooling2D(name="gap")(x)
    g = _graph(inp, L.Dense(2, name="d")(x), "tconv")
    t = g.layer("t")
    # output 4x4x3; FLOPs 2 * (2*2 inputs) * 2 channels * (2*2 taps) * 3 filters = 192 + bias 48
    assert t.output_shape == (4, 4, 3) and t.flops == 240
    hg = _hg(g)
    v = _v(hg, "t")
    nets = _nets(hg)
    assert nets[frozenset({0, v, v + 1, v + 2})] == 16.0  # a 2x2 input map
    assert (hg.num_vertices, hg.num_nets, hg.num_pins) == (7, 5, 2 * 4 + 3 * 3)
    fine = _hg(g, "fine")
    assert fine.num_vertices == 2 + 6 + 3 + 2
    red = fine.net_kind == REDUCE  # partial sums of one 4x4 output map per filter, 2 pairs + r_j
    assert sorted(fine.net_cost[red].tolist()) == [64.0] * 3
    assert sorted(np.diff(fine.net_ptr)[red].tolist()) == [3] * 3


def test_fused_kinds_add_work_and_resize_maps_but_no_vertices():
    x = inp = keras.Input((4, 4, 2), name="input")
    y = L.Rescaling(0.5, offset=1.0, name="scale")(x)
    y = L.Normalization(mean=[0.0, 1.0], variance=[1.0, 4.0], name="norm")(y)
    y = L.Cropping2D(1, name="crop")(y)  # 2x2
    y = L.Permute((2, 1, 3), name="perm")(y)
    y = L.UpSampling2D(3, name="up")(y)  # 6x6
    y = L.Activation("hard_swish", name="hs")(y + 1.0)
    y = L.Conv2D(3, 1, name="c")(y)
    y = L.GlobalAveragePooling2D(name="gap")(y)
    g = _graph(inp, L.Dense(2, name="d")(y), "fused")
    hg = _hg(g)
    assert hg.num_vertices == 2 + 3 + 2  # only input, c and d own vertices
    c = _v(hg, "c")
    nets = _nets(hg)
    assert nets[frozenset({0, c, c + 1, c + 2})] == 36 * 4.0  # read after upsampling: a 6x6 map
    # the fused layers' work lands on the input channel vertices, split evenly between the 2 channels
    work = _work(g)
    fused = sum(work[n] for n in ("scale", "norm", "crop", "perm", "up", "hs"))
    fused += sum(work[ly.name] for ly in g.layers if ly.kind == "constant_op")
    np.testing.assert_allclose(hg.vertex_weight[:2], [fused / 2] * 2)


def test_elementwise_merges_read_channel_j_of_every_input():
    x = inp = keras.Input((4, 4, 2), name="input")
    a = L.Conv2D(2, 1, name="a")(x)
    b = L.Conv2D(2, 1, name="b")(x)
    y = L.Maximum(name="mx")([a, L.Subtract(name="sub")([a, b])])
    y = L.GlobalAveragePooling2D(name="gap")(y)
    g = _graph(inp, L.Dense(2, name="d")(y), "merge")
    hg = _hg(g)
    va, vb, vs, vm = (_v(hg, n) for n in ("a", "b", "sub", "mx"))
    nets = _nets(hg)
    for j in range(2):
        assert nets[frozenset({va + j, vs + j, vm + j})] == 64.0  # a_j is read by sub_j and mx_j
        assert nets[frozenset({vb + j, vs + j})] == 64.0
        assert nets[frozenset({vs + j, vm + j})] == 64.0
    # Subtract's FLOPs: one per output element (32); Maximum's too
    assert g.layer("sub").flops == g.layer("mx").flops == 32


def test_layer_norm_statistics_net():
    x = inp = keras.Input((4, 4, 2), name="input")
    x = L.Conv2D(3, 1, name="c")(x)
    x = L.LayerNormalization(name="ln")(x)
    x = L.Conv2D(2, 1, name="d")(x)
    x = L.GlobalAveragePooling2D(name="gap")(x)
    g = _graph(inp, L.Dense(2, name="fc")(x), "ln")
    hg = _hg(g)
    # vertices: input 2 + c 3 + ln 3 (one per channel) + d 2 + fc 2 = 12
    assert hg.num_vertices == 12
    c, ln, d = _v(hg, "c"), _v(hg, "ln"), _v(hg, "d")
    nets = _nets(hg)
    for j in range(3):
        assert nets[frozenset({c + j, ln + j})] == 64.0  # channel j is normalised where ln_j is
        assert nets[frozenset({ln + j, d, d + 1})] == 64.0
    # statistics: 2 partial-sum maps to the part of channel 0 and 2 maps (mean, 1/sd) back: 4 x 64 bytes
    assert nets[frozenset({ln, ln + 1, ln + 2})] == 256.0
    parts = np.zeros(hg.num_vertices, np.int64)
    parts[ln + 1:ln + 3] = 1  # channels 1 and 2 of the layer norm on part 1, their readers on part 0
    # cut: c_1, c_2 -> ln (2 x 64), ln_1, ln_2 -> d (2 x 64), statistics (256)
    assert km1_bytes(hg, parts, 2) == 4 * 64.0 + 256.0
    # one vertex per channel in the fine grain too
    assert _hg(g, "fine").block("ln", "filter").size == 3


def _pins_of(hg, n):
    return hg.net_pins[hg.net_ptr[n]:hg.net_ptr[n + 1]].tolist()


def test_grouped_conv_filters_read_only_their_group():
    x = inp = keras.Input((4, 4, 4), name="input")
    y = L.Conv2D(4, 1, groups=2, name="g")(x)  # filters 0, 1 read channels 0, 1; filters 2, 3 read 2, 3
    y = L.GlobalAveragePooling2D(name="gap")(y)
    g = _graph(inp, L.Dense(2, name="d")(y), "grouped")
    # FLOPs: 2 * 16 positions * 4 filters * (1 tap x 2 channels per group) = 256, + bias 64 = 320
    # parameters: 1x1 x 2 channels x 4 filters + 4 bias = 12
    assert (g.layer("g").kind, g.layer("g").flops, g.layer("g").params) == ("grouped_conv2d", 320, 12)
    for grain in ("coarse", "fine"):  # one vertex per filter in both grains: input 4 + g 4 + d 2
        hg = _hg(g, grain)
        assert hg.num_vertices == 10
        v, d = _v(hg, "g"), _v(hg, "d")
        nets = _nets(hg)
        for k in range(4):  # input channel k is read by the 2 filters of its group, a 4x4 map (64 bytes)
            first = v + 2 * (k // 2)
            assert nets[frozenset({k, first, first + 1})] == 64.0
        for j in range(4):  # read after global pooling: one value per channel
            assert nets[frozenset({v + j, d, d + 1})] == 4.0
        assert (hg.num_nets, hg.num_pins) == (8, 4 * 3 + 4 * 3)


def test_grouped_conv_with_groups_equal_channels_is_depthwise():
    x = inp = keras.Input((4, 4, 2), name="input")
    y = L.Conv2D(4, 3, padding="same", groups=2, name="dw")(x)  # C / G = 1: filters 2k, 2k + 1 read channel k
    y = L.GlobalAveragePooling2D(name="gap")(y)
    g = _graph(inp, L.Dense(2, name="d")(y), "dwconv")
    # FLOPs as a depthwise conv with multiplier 2: 2 * 16 * 4 outputs * 9 taps = 1152, + bias 64
    assert g.layer("dw").flops == 1216
    hg = _hg(g)
    v = _v(hg, "dw")
    nets = _nets(hg)
    for k in range(2):
        assert nets[frozenset({k, v + 2 * k, v + 2 * k + 1})] == 64.0


def test_dense_on_an_image_is_a_pointwise_conv_in_both_grains():
    x = inp = keras.Input((4, 4, 2), name="input")
    y = L.Dense(3, name="pw")(x)
    y = L.GlobalAveragePooling2D(name="gap")(y)
    g = _graph(inp, L.Dense(2, name="d")(y), "pointwise")
    pw = g.layer("pw")
    # FLOPs: 2 * 16 pixels * 3 units * 2 channels = 192, + bias 48 = 240; parameters 2 x 3 + 3 = 9
    assert (pw.kind, pw.flops, pw.params) == ("pointwise_dense", 240, 9)
    hg = _hg(g)
    assert hg.num_vertices == 2 + 3 + 2
    v = _v(hg, "pw")
    nets = _nets(hg)
    for k in range(2):  # every unit reads every channel at every pixel: a 4x4 map per channel
        assert nets[frozenset({k, v, v + 1, v + 2})] == 64.0
    fine = _hg(g, "fine")
    # pairs (j, k): 3 x 2 channel vertices + 3 reduction vertices
    assert fine.num_vertices == 2 + 6 + 3 + 2
    ch, red = fine.block("pw", "channel").start, fine.block("pw", "reduce").start
    fnets = _nets(fine)
    for k in range(2):  # pair (j, k) reads channel k
        assert fnets[frozenset({k, ch + k, ch + 2 + k, ch + 4 + k})] == 64.0
    for j in range(3):  # the partial maps of unit j are summed on r_j: one 4x4 output map
        assert fnets[frozenset({ch + 2 * j, ch + 2 * j + 1, red + j})] == 64.0
    # the kernel (6) is spread over the pairs, the bias (3) on the reduction vertices
    np.testing.assert_allclose(fine.vertex_params[ch:ch + 6], [1.0] * 6)
    np.testing.assert_allclose(fine.vertex_params[red:red + 3], [1.0] * 3)


def test_layer_scale_is_fused_and_tensor_add_is_a_merge():
    from keras.src.applications.convnext import LayerScale

    x = inp = keras.Input((4, 4, 2), name="input")
    c = L.Conv2D(2, 1, name="c")(x)
    s = LayerScale(0.1, 2, name="ls")(c)
    y = c + s  # written with the operator: the Add merge's rule
    y = L.GlobalAveragePooling2D(name="gap")(y)
    g = _graph(inp, L.Dense(2, name="d")(y), "scale")
    add = next(ly for ly in g.layers if ly.inputs == ("c", "ls"))
    assert (g.layer("ls").kind, add.kind) == ("layer_scale", "add")
    hg = _hg(g)
    assert hg.num_vertices == 2 + 2 + 2 + 2  # input, c, add, d: LayerScale has no vertex
    c0, a0 = _v(hg, "c"), _v(hg, add.name)
    nets = _nets(hg)
    for j in range(2):  # channel j of c reaches add_j once, directly and through the fused LayerScale
        assert nets[frozenset({c0 + j, a0 + j})] == 64.0
    # gamma (2 parameters) lands on the vertices owning its channels: c's, with c's 2 x (2 + 1)
    np.testing.assert_allclose(hg.vertex_params[c0:c0 + 2], [3.0 + 1.0] * 2)


def test_nested_sequential_is_flattened():
    inner = keras.Sequential([L.Conv2D(3, 1, name="ic"), L.LayerNormalization(name="iln")], name="stem")
    x = inp = keras.Input((4, 4, 2), name="input")
    y = L.GlobalAveragePooling2D(name="gap")(inner(x))
    g = _graph(inp, L.Dense(2, name="d")(y), "nested")
    assert [ly.name for ly in g.layers] == ["input", "ic", "iln", "gap", "d"]
    assert (g.layer("ic").inputs, g.layer("iln").inputs, g.layer("gap").inputs) == (("input",), ("ic",), ("iln",))
    assert g.layer("ic").config["keras_path"] == ["stem"] and "keras_path" not in g.layer("d").config
