"""The thesis's toy network (Eserol 2019, §3.3-3.5, Figures 3.3-3.5) in both grains, checked by hand.

Network (tests/hgtoys.py): RGB input 4x4x3 -> conv1 (4 filters, 3x3 same) -> conv2 (3 filters)
-> maxpool 2x2 -> conv3 (2 filters) -> flatten (2x2x2 = 8) -> fc1 (4) -> fc2 (3) -> fc3 (2, softmax).
Batch B = 2, d = 4 bytes, so one feature map of H x W costs H*W*8 bytes:
4x4 map = 128 bytes, 2x2 map = 32 bytes, one Dense unit = 8 bytes.
Every expected number below is derived by hand in the comments, never by the code under test.
"""

from __future__ import annotations

import numpy as np
from hgtoys import toy_network, unit_work

from hgpart.hypergraph import BROADCAST, REDUCE, build_hypergraph


def _nets(hg):
    """{frozenset(pins): (cost, kind)} so tests can name nets by their pins."""
    out = {}
    for n in range(hg.num_nets):
        pins = frozenset(hg.net_pins[hg.net_ptr[n] : hg.net_ptr[n + 1]].tolist())
        out[pins] = (float(hg.net_cost[n]), int(hg.net_kind[n]), int(hg.net_root[n]))
    return out


def test_coarse_grain_counts_and_costs():
    g = toy_network()
    hg = build_hypergraph(g, unit_work(g), batch_size=2, grain="coarse")
    # vertices: 3 input channels + 4 + 3 + 2 conv filters + 4 + 3 + 2 dense units = 21
    # (thesis Figure 3.4 numbers the input 0-2, conv1 3-6, conv2 7-9, conv3 10-11)
    assert hg.num_vertices == 21
    # nets, one per feature map that a vertex layer reads:
    #   input 3 maps  -> pins: map + 4 conv1 filters = 5 pins, cost 4x4 map = 128
    #   conv1 4 maps  -> 1 + 3 conv2 filters = 4 pins, cost 128 (no pooling after conv1)
    #   pool  3 maps  -> 1 + 2 conv3 filters = 3 pins, cost 2x2 map = 32 (after pooling)
    #   conv3 2 maps via flatten -> 1 + 4 fc1 units = 5 pins, cost 2x2 = 32
    #   fc1 4 units   -> 1 + 3 = 4 pins, cost 8;  fc2 3 units -> 1 + 2 = 3 pins, cost 8
    #   fc3 is the model output: no net
    assert hg.num_nets == 3 + 4 + 3 + 2 + 4 + 3 == 19
    assert hg.num_pins == 3 * 5 + 4 * 4 + 3 * 3 + 2 * 5 + 4 * 4 + 3 * 3 == 75
    assert sorted(hg.net_cost.tolist()) == sorted([128.0] * 7 + [32.0] * 5 + [8.0] * 7)
    assert (hg.net_kind == BROADCAST).all()
    nets = _nets(hg)
    # Figure 3.4: maps of 3, 4, 5, 6 are read by 7 (and 8, 9): net of vertex 3 is {3, 7, 8, 9}
    assert nets[frozenset({3, 7, 8, 9})] == (128.0, BROADCAST, 3)
    assert nets[frozenset({0, 3, 4, 5, 6})] == (128.0, BROADCAST, 0)
    assert nets[frozenset({7, 10, 11})] == (32.0, BROADCAST, 7)
    assert nets[frozenset({10, 12, 13, 14, 15})] == (32.0, BROADCAST, 10)


def test_fine_grain_counts_and_costs():
    g = toy_network()
    hg = build_hypergraph(g, unit_work(g), batch_size=2, grain="fine")
    # vertices: input 3; conv1 4 filters x 3 channels = 12 channel vertices + 4 reductions;
    # conv2 3 x 4 = 12 + 3; conv3 2 x 3 = 6 + 2; dense 4 + 3 + 2 stay one vertex per unit
    assert hg.num_vertices == 3 + 16 + 15 + 8 + 9 == 51
    # broadcast nets (map -> every channel vertex that reads it):
    #   input: 3 nets, input k + f(j,k) for j = 0..3: 5 pins, 128 bytes
    #   conv1: 4 nets, r_j + f(m,j) of conv2 for m = 0..2: 4 pins, 128 bytes
    #   pool:  3 nets, r_j of conv2 + f(m,j) of conv3 for m = 0..1: 3 pins, 32 bytes (pooled)
    #   conv3 (flatten): 2 nets, r_j + 4 fc1 units: 5 pins, 32 bytes
    #   fc1: 4 nets x 4 pins, fc2: 3 nets x 3 pins, 8 bytes
    # reduce nets (channel vertices of filter j + r_j), cost = the map *before* pooling:
    #   conv1: 4 nets x (3 + 1) pins, 128;  conv2: 3 x (4 + 1), 4x4 map = 128;  conv3: 2 x (3 + 1), 32
    assert hg.num_nets == (3 + 4 + 3 + 2 + 4 + 3) + (4 + 3 + 2) == 28
    assert hg.num_pins == (15 + 16 + 9 + 10 + 16 + 9) + (16 + 15 + 8) == 114
    assert int((hg.net_kind == REDUCE).sum()) == 9
    assert sorted(hg.net_cost[hg.net_kind == REDUCE].tolist()) == [32.0] * 2 + [128.0] * 7
    assert sorted(hg.net_cost[hg.net_kind == BROADCAST].tolist()) == [8.0] * 7 + [32.0] * 5 + [128.0] * 7
    nets = _nets(hg)
    # thesis §3.3: "the results of the convolution between vertex 0 and 3, 1 and 4, 2 and 5 are reduced
    # to one feature map ... to the vertex 15": channel vertices f(0,k) = 3 + k, reduction r_0 = 15
    assert nets[frozenset({3, 4, 5, 15})] == (128.0, REDUCE, 15)
    # input channel 0 is read by f(j,0) = 3 + 3j for j = 0..3
    assert nets[frozenset({0, 3, 6, 9, 12})] == (128.0, BROADCAST, 0)
    # r_0 of conv1 (15) is read by channel 0 of each conv2 filter: conv2 channel block starts at 19,
    # f(m,0) = 19 + 4m -> 19, 23, 27
    assert nets[frozenset({15, 19, 23, 27})] == (128.0, BROADCAST, 15)


def test_vertex_weights_split_work_evenly():
    g = toy_network()
    work = {"input": 0.0, "conv1": 12.0, "conv2": 6.0, "pool": 3.0, "conv3": 4.0, "flatten": 0.0,
            "fc1": 4.0, "fc2": 3.0, "fc3": 2.0}
    coarse = build_hypergraph(g, work, batch_size=2, grain="coarse")
    # conv1 12 / 4 filters = 3 each; conv2 6 / 3 = 2 plus the fused pool 3 / 3 = 1 -> 3 each
    np.testing.assert_allclose(coarse.vertex_weight[3:7], [3.0] * 4)
    np.testing.assert_allclose(coarse.vertex_weight[7:10], [3.0] * 3)
    np.testing.assert_allclose(coarse.vertex_weight[:3], [0.0] * 3)
    fine = build_hypergraph(g, work, batch_size=2, grain="fine")
    # conv1 12 over 12 channel vertices = 1 each; its reductions get nothing (no fused layer)
    np.testing.assert_allclose(fine.vertex_weight[3:15], [1.0] * 12)
    np.testing.assert_allclose(fine.vertex_weight[15:19], [0.0] * 4)
    # conv2: 6 over 12 channel vertices = 0.5; the pool (3) goes to its 3 reductions
    np.testing.assert_allclose(fine.vertex_weight[19:31], [0.5] * 12)
    np.testing.assert_allclose(fine.vertex_weight[31:34], [1.0] * 3)
    assert fine.vertex_weight.sum() == coarse.vertex_weight.sum() == sum(work.values())


def test_grouping_merges_filters():
    g = toy_network()
    hg = build_hypergraph(g, unit_work(g), batch_size=2, grain="coarse", group=2)
    # groups of 2 filters: conv1 4 -> 2, conv2 3 -> 2, conv3 2 -> 1, fc1 4 -> 2, fc2 3 -> 2, fc3 2 -> 1
    assert hg.num_vertices == 3 + 2 + 2 + 1 + 2 + 2 + 1 == 13
    # channels of one group that have the same readers share a net whose cost is their sum:
    #   input 3 nets (128 each); conv1 groups {0,1},{2,3}: 2 nets of 2 x 128 = 256;
    #   pooled conv2 groups {0,1},{2}: 64 and 32; conv3 group {0,1}: 2 x 32 = 64;
    #   fc1 groups {0,1},{2,3}: 16, 16; fc2 groups {0,1},{2}: 16, 8
    assert hg.num_nets == 3 + 2 + 2 + 1 + 2 + 2 == 12
    assert sorted(hg.net_cost.tolist()) == sorted([128.0] * 3 + [256.0] * 2 + [64.0, 32.0, 64.0]
                                                  + [16.0, 16.0, 16.0, 8.0])


def test_fine_grain_grouping_keeps_per_channel_readers():
    g = toy_network()
    hg = build_hypergraph(g, unit_work(g), batch_size=2, grain="fine", group=2)
    # conv1's reduction groups r{0,1}, r{2,3} each produce 2 maps; map j is read only by the conv2
    # channel vertices (M, j), so the 4 maps keep 4 nets of 128 bytes (one net of 256 would charge a
    # part that reads map 0 for map 1 too). conv2 channel vertices: filter groups {0,1},{2} x 4 channels,
    # vertex (M, j) for M in 0..1 -> pins r-group + 2 channel vertices.
    red = hg.block("conv1", "reduce")
    nets = _nets(hg)
    from_r0 = [(pins, v) for pins, v in nets.items() if v[2] == red.start and v[1] == BROADCAST]
    assert len(from_r0) == 2 and all(v[0] == 128.0 and len(p) == 3 for p, v in from_r0)
