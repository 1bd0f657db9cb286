"""Property tests of the metrics on random partitions of branching and toy hypergraphs."""

from __future__ import annotations

import numpy as np
import pytest
from hgtoys import branching_network, toy_network, unit_work
from hypothesis import given, settings
from hypothesis import strategies as st

from hgpart.hypergraph import build_hypergraph
from hgpart.metrics import MIB, km1_bytes, partition_metrics

GRAPHS = {"toy": toy_network(), "branchy": branching_network()}
HGS = {
    (name, grain, group): build_hypergraph(g, unit_work(g), batch_size=4, grain=grain, group=group)
    for name, g in GRAPHS.items() for grain in ("coarse", "fine") for group in (1, 2)
}
CASES = sorted(HGS)


def _parts(data, hg, k):
    return np.array(data.draw(st.lists(st.integers(0, k - 1), min_size=hg.num_vertices, max_size=hg.num_vertices)))


@settings(max_examples=40, deadline=None)
@given(data=st.data(), case=st.sampled_from(CASES), k=st.integers(1, 5))
def test_volume_equals_sends_equals_receives(data, case, k):
    hg = HGS[case]
    parts = _parts(data, hg, k)
    m = partition_metrics(hg, parts, k)
    total = km1_bytes(hg, parts, k) / MIB
    assert m.comm_volume_mib == pytest.approx(total)
    assert sum(m.part_send_mib) == pytest.approx(total)
    assert sum(m.part_recv_mib) == pytest.approx(total)
    assert sum(m.part_work) == pytest.approx(float(hg.vertex_weight.sum()))
    assert m.max_work >= m.avg_work >= m.min_work


@settings(max_examples=15, deadline=None)
@given(case=st.sampled_from(CASES), k=st.integers(1, 6), target=st.integers(0, 5))
def test_everything_on_one_part_moves_nothing(case, k, target):
    hg = HGS[case]
    parts = np.full(hg.num_vertices, target % k)
    m = partition_metrics(hg, parts, k)
    assert m.comm_volume_mib == 0 and m.cut_nets == 0 and max(m.part_send_mib) == 0
    if k == 1:
        assert m.max_over_avg == pytest.approx(1.0)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), case=st.sampled_from(CASES), k=st.integers(2, 5))
def test_invariant_under_part_relabelling(data, case, k):
    hg = HGS[case]
    parts = _parts(data, hg, k)
    perm = np.array(data.draw(st.permutations(list(range(k)))))
    a = partition_metrics(hg, parts, k)
    b = partition_metrics(hg, perm[parts], k)
    assert b.comm_volume_mib == pytest.approx(a.comm_volume_mib)
    assert b.max_comm_mib == pytest.approx(a.max_comm_mib)
    assert b.cut_nets == a.cut_nets
    np.testing.assert_allclose(np.array(b.part_send_mib)[perm], a.part_send_mib)
    np.testing.assert_allclose(np.array(b.part_recv_mib)[perm], a.part_recv_mib)
    np.testing.assert_allclose(np.array(b.part_work)[perm], a.part_work)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(GRAPHS)), grain=st.sampled_from(["coarse", "fine"]),
       k=st.integers(2, 4))
def test_grouped_and_ungrouped_graphs_agree_on_the_same_filter_placement(data, name, grain, k):
    """A placement of groups of 2 filters, expanded to single filters, has the same metrics."""
    grouped, single = HGS[(name, grain, 2)], HGS[(name, grain, 1)]
    gparts = _parts(data, grouped, k)
    sparts = np.full(single.num_vertices, -1)
    for b in grouped.blocks:
        sb = single.block(b.layer, b.role)
        sparts[sb.start : sb.stop] = b.expand(gparts).ravel()
    assert (sparts >= 0).all()
    a = partition_metrics(grouped, gparts, k)
    b = partition_metrics(single, sparts, k)
    assert b.comm_volume_mib == pytest.approx(a.comm_volume_mib)
    np.testing.assert_allclose(b.part_send_mib, a.part_send_mib, atol=1e-12)
    np.testing.assert_allclose(b.part_recv_mib, a.part_recv_mib, atol=1e-12)
    np.testing.assert_allclose(b.part_work, a.part_work)
    np.testing.assert_allclose(b.part_param_bytes, a.part_param_bytes)
    np.testing.assert_allclose(b.part_activation_bytes, a.part_activation_bytes)
