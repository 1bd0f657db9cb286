"""Partition metrics on the thesis toy network against values computed by hand.

Toy network and costs as in tests/test_hypergraph_toy.py (B = 2, d = 4: a 4x4 map is 128 bytes).
"""

from __future__ import annotations

import numpy as np
import pytest
from hgtoys import toy_network

from hgpart.errors import HgpartError
from hgpart.hypergraph import build_hypergraph
from hgpart.metrics import MIB, km1_bytes, partition_metrics

WORK = {"input": 0.0, "conv1": 8.0, "conv2": 6.0, "pool": 3.0, "conv3": 4.0, "flatten": 0.0,
        "fc1": 4.0, "fc2": 3.0, "fc3": 2.0}


def test_coarse_two_parts_by_hand():
    hg = build_hypergraph(toy_network(), WORK, batch_size=2, grain="coarse")
    # part 0: input 0-2 and conv1 filters 3, 4; part 1: everything else
    parts = np.ones(21, dtype=int)
    parts[[0, 1, 2, 3, 4]] = 0
    m = partition_metrics(hg, parts, 2)
    # input nets {i, 3, 4, 5, 6}: root in part 0, pins 5 and 6 in part 1 -> 3 x 128 sent by part 0
    # conv1 nets of 3 and 4 ({3|4, 7, 8, 9}): root in 0, readers in 1 -> 2 x 128 sent by part 0
    # conv1 nets of 5 and 6 and everything later lie inside part 1
    assert km1_bytes(hg, parts, 2) == 5 * 128
    assert m.comm_volume_mib == pytest.approx(640 / MIB)
    assert m.part_send_mib == pytest.approx([640 / MIB, 0.0])
    assert m.part_recv_mib == pytest.approx([0.0, 640 / MIB])
    assert m.max_comm_mib == pytest.approx(640 / MIB)
    assert m.avg_comm_mib == pytest.approx(320 / MIB)
    assert m.max_over_avg_comm == pytest.approx(2.0)
    assert m.cut_nets == 5
    # work: conv1 8/4 = 2 per filter; conv2 6/3 + pool 3/3 = 3; conv3 4/2 = 2; fc1 1, fc2 1, fc3 1
    # part 0 = 2 + 2 = 4; part 1 = 2*2 + 3*3 + 2*2 + 4 + 3 + 2 = 26; total 30
    assert m.part_work == pytest.approx([4.0, 26.0])
    assert (m.max_work, m.min_work, m.avg_work) == pytest.approx((26.0, 4.0, 15.0))
    assert m.max_over_min == pytest.approx(6.5)
    assert m.max_over_avg == pytest.approx(26 / 15)
    assert m.max_times_n == pytest.approx(52.0)


def test_coarse_memory_by_hand():
    g = toy_network()
    hg = build_hypergraph(g, WORK, batch_size=2, grain="coarse")
    parts = np.ones(21, dtype=int)
    parts[[0, 1, 2, 3, 4]] = 0
    m = partition_metrics(hg, parts, 2, optimizer="adam")
    # conv1 has 3*3*3*4 + 4 = 112 parameters, 28 per filter; part 0 holds 2 filters = 56 params = 224 bytes;
    # Adam keeps 2 slots per parameter -> 448 bytes of optimizer state
    assert m.part_param_bytes[0] == pytest.approx(224.0)
    assert m.part_optimizer_bytes[0] == pytest.approx(448.0)
    # activations of part 0: 3 input maps + 2 conv1 maps, each 4x4 x B=2 x 4 bytes = 128 -> 640
    assert m.part_activation_bytes[0] == pytest.approx(640.0)


def test_fine_reduce_and_broadcast_by_hand():
    hg = build_hypergraph(toy_network(), WORK, batch_size=2, grain="fine")
    # only r_0 of conv1 (vertex 15) is on part 1
    parts = np.zeros(51, dtype=int)
    parts[15] = 1
    m = partition_metrics(hg, parts, 2)
    # reduce net {3, 4, 5, 15}: partial sums go from part 0 (non-root) to the root's part 1: 128 bytes
    # broadcast net {15, 19, 23, 27}: r_0's map goes from part 1 to part 0: 128 bytes
    assert km1_bytes(hg, parts, 2) == 256
    assert m.part_send_mib == pytest.approx([128 / MIB, 128 / MIB])
    assert m.part_recv_mib == pytest.approx([128 / MIB, 128 / MIB])
    assert m.max_over_avg_comm == pytest.approx(1.0)
    assert m.cut_nets == 2


def test_three_parts_broadcast_counts_each_receiving_part_once():
    hg = build_hypergraph(toy_network(), WORK, batch_size=2, grain="coarse")
    # input 0 on part 0, conv1 filters 3, 4 on part 1 and 5, 6 on part 2, rest on part 0
    parts = np.zeros(21, dtype=int)
    parts[[3, 4]] = 1
    parts[[5, 6]] = 2
    m = partition_metrics(hg, parts, 3)
    # each input net {i, 3, 4, 5, 6} spans 3 parts: part 0 sends 128 to each of 2 parts -> 3 nets x 256 = 768
    # conv1 nets {3|4|5|6, 7, 8, 9}: readers on part 0, each root elsewhere -> 4 x 128 = 512
    # part 1 sends 256, part 2 sends 256; part 0 receives 512, parts 1 and 2 receive 384 each
    assert m.comm_volume_mib == pytest.approx(1280 / MIB)
    assert m.part_send_mib == pytest.approx([768 / MIB, 256 / MIB, 256 / MIB])
    assert m.part_recv_mib == pytest.approx([512 / MIB, 384 / MIB, 384 / MIB])
    assert m.max_over_avg_comm == pytest.approx(768 / (1280 / 3))


def test_bad_part_ids_are_refused():
    hg = build_hypergraph(toy_network(), WORK, batch_size=2, grain="coarse")
    with pytest.raises(HgpartError):
        partition_metrics(hg, np.full(21, 2), 2)
    with pytest.raises(HgpartError):
        partition_metrics(hg, np.zeros(20, dtype=int), 2)
