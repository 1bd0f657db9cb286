"""hMetis / PaToH writers and the 32-bit scaling in front of the backends."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hgtoys import toy_network, unit_work

from hgpart.errors import HgpartError
from hgpart.formats import format_int_rows, hmetis_bytes, patoh_bytes
from hgpart.hypergraph import build_hypergraph
from hgpart.partitioners.scaling import INT32_MAX, ScaledHypergraph, scale_hypergraph, validate_hypergraph


def _tiny() -> ScaledHypergraph:
    # 3 nets over 4 vertices: {0,1} cost 5, {1,2,3} cost 12, {0,3} cost 7; weights 1 2 3 40
    return ScaledHypergraph(
        num_vertices=4, num_nets=3, net_ptr=np.array([0, 2, 5, 7]), net_pins=np.array([0, 1, 1, 2, 3, 0, 3]),
        vertex_weight=np.array([1, 2, 3, 40]), net_cost=np.array([5, 12, 7]), weight_scale=1.0, cost_scale=1.0,
        cost_exact=True,
    )


def test_hmetis_text_exact():
    # header "<nets> <vertices> 11", nets as "cost pins(1-based)", then one weight per line
    assert hmetis_bytes(_tiny()).decode() == "3 4 11\n5 1 2\n12 2 3 4\n7 1 4\n1\n2\n3\n40\n"


def test_patoh_text_exact():
    # thesis Figure 3.5 layout: "0 V N P 3", nets as "cost pins(0-based)", vertex weights on the last line
    assert patoh_bytes(_tiny()).decode() == "0 4 3 7 3\n5 0 1\n12 1 2 3\n7 0 3\n1 2 3 40\n"


def test_format_int_rows_matches_python():
    rng = np.random.default_rng(0)
    v = np.concatenate([[0, 9, 10, 99, 100, 2**31 - 1], rng.integers(0, 10**12, 500)])
    seps = rng.choice([32, 10], size=v.size).astype(np.uint8)
    want = "".join(f"{int(x)}{chr(s)}" for x, s in zip(v, seps, strict=True))
    assert format_int_rows(v, seps).decode() == want


def test_hmetis_of_toy_parses_back():
    g = toy_network()
    hg = build_hypergraph(g, unit_work(g), batch_size=2, grain="fine")
    sh = scale_hypergraph(hg, k=4, epsilon=0.1)
    lines = hmetis_bytes(sh).decode().splitlines()
    nn, nv, fmt = map(int, lines[0].split())
    assert (nn, nv, fmt) == (hg.num_nets, hg.num_vertices, 11)
    for n in range(nn):
        tok = list(map(int, lines[1 + n].split()))
        assert tok[0] * sh.cost_scale == hg.net_cost[n]
        assert [p - 1 for p in tok[1:]] == hg.net_pins[hg.net_ptr[n] : hg.net_ptr[n + 1]].tolist()
    assert [int(x) for x in lines[1 + nn :]] == sh.vertex_weight.tolist()


def test_scaling_keeps_costs_exact_and_weights_positive():
    g = toy_network()
    hg = build_hypergraph(g, unit_work(g), batch_size=2, grain="coarse")
    sh = scale_hypergraph(hg, k=2, epsilon=0.1)
    # toy costs are 8, 32, 128 bytes: gcd 8, so units 1, 4, 16 and exact
    assert sh.cost_exact and sh.cost_scale == 8.0
    assert sorted(set(sh.net_cost.tolist())) == [1, 4, 16]
    # input vertices have no work but the backends refuse weight 0
    assert sh.vertex_weight.min() >= 1 and sh.vertex_weight[:3].tolist() == [1, 1, 1]
    # fine enough that rounding does not distort balance: relative error of every heavy vertex < 1e-6
    heavy = hg.vertex_weight > 1e-3 * hg.vertex_weight.max()
    rel = np.abs(sh.vertex_weight[heavy] / sh.weight_scale - hg.vertex_weight[heavy]) / hg.vertex_weight[heavy]
    assert rel.max() < 1e-6
    assert int(sh.vertex_weight.sum()) * 1.1 < INT32_MAX / 8


def test_scaling_coarsens_huge_costs_to_fit_int32():
    g = toy_network()
    hg = build_hypergraph(g, unit_work(g), batch_size=2, grain="coarse")
    rng = np.random.default_rng(1)
    big = dataclasses.replace(hg, net_cost=rng.integers(1, 10**12, hg.num_nets).astype(np.float64) + 0.5)
    sh = scale_hypergraph(big, k=8, epsilon=0.1)
    assert not sh.cost_exact and sh.net_cost.min() >= 1
    sizes = np.diff(hg.net_ptr)
    assert int(np.dot(sh.net_cost, np.minimum(8, sizes) - 1)) < 2**31
    np.testing.assert_allclose(sh.net_cost * sh.cost_scale, big.net_cost, rtol=0.02)


@pytest.mark.parametrize("defect", ["empty net", "pin out of range", "duplicate pin", "negative weight"])
def test_validation_refuses_what_kahypar_would_exit_on(defect):
    g = toy_network()
    hg = build_hypergraph(g, unit_work(g), batch_size=2, grain="coarse")
    if defect == "empty net":
        ptr = hg.net_ptr.copy()
        ptr[1] = ptr[0]
        bad = dataclasses.replace(hg, net_ptr=ptr)
    elif defect == "pin out of range":
        pins = hg.net_pins.copy()
        pins[-1] = hg.num_vertices
        bad = dataclasses.replace(hg, net_pins=pins)
    elif defect == "duplicate pin":
        pins = hg.net_pins.copy()
        pins[1] = pins[0]
        bad = dataclasses.replace(hg, net_pins=pins)
    else:
        w = hg.vertex_weight.copy()
        w[4] = -1.0
        bad = dataclasses.replace(hg, vertex_weight=w)
    with pytest.raises(HgpartError):
        validate_hypergraph(bad)
    validate_hypergraph(hg)
