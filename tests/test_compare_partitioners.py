"""Baseline partitioners: layer-wise DP optimality, horizontal and incremental hand cases."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from compare_helpers import tiny_vgg

from hgpart.errors import HgpartError
from hgpart.hypergraph import build_hypergraph
from hgpart.partitioners import partition
from hgpart.partitioners._units import unit_names, vertex_units
from hgpart.partitioners.incremental import incremental_parts
from hgpart.partitioners.layerwise import split_min_max
from hgpart.profile import analytic_profile


def _brute(work: np.ndarray, k: int, cost: np.ndarray) -> tuple[float, float]:
    """(min over splits of max run, least cut cost among the optimal splits) by enumeration."""
    n = len(work)
    best = (np.inf, np.inf)
    for cuts in itertools.combinations(range(1, n), k - 1):
        bounds = (0, *cuts, n)
        mx = max(work[a:b].sum() for a, b in itertools.pairwise(bounds))
        cc = sum(cost[c - 1] for c in cuts)
        if mx < best[0] - 1e-9 or (abs(mx - best[0]) <= 1e-9 and cc < best[1]):
            best = (mx, cc)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_layerwise_dp_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 10))
    k = int(rng.integers(1, n + 1))
    # integer work makes ties common, which exercises the communication tie-break
    work = rng.integers(0, 6, size=n).astype(float) if seed % 2 else rng.random(n) * 10
    cost = rng.integers(0, 9, size=max(n - 1, 0)).astype(float)
    parts, opt = split_min_max(work, k, cut_cost=cost)
    want_max, want_cost = _brute(work, k, cost)
    assert opt == pytest.approx(want_max)
    # the returned split is contiguous, uses exactly k non-empty runs, attains the optimum and the least cut cost
    assert parts[0] == 0 and parts[-1] == k - 1 and np.all(np.diff(parts) >= 0) and np.all(np.diff(parts) <= 1)
    assert max(work[parts == p].sum() for p in range(k)) == pytest.approx(want_max)
    got_cost = sum(cost[i] for i in range(n - 1) if parts[i] != parts[i + 1])
    assert got_cost == pytest.approx(want_cost)


def test_layerwise_dp_is_not_greedy() -> None:
    # greedy "fill to the average" gives [9 | 1 1 1 ... ] style splits; the optimum here is 10
    work = np.array([5.0, 5.0, 6.0, 4.0])
    parts, opt = split_min_max(work, 2)
    assert opt == 10.0 and parts.tolist() == [0, 0, 1, 1]


def _hg(grain: str = "coarse"):
    g = tiny_vgg()
    return g, build_hypergraph(g, analytic_profile(g, 4).work(), batch_size=4, grain=grain)


@pytest.mark.parametrize("grain", ["coarse", "fine"])
def test_layerwise_keeps_layers_whole_and_contiguous(grain: str) -> None:
    g, hg = _hg(grain)
    res = partition(hg, k=3, backend="layerwise")
    units = vertex_units(hg)
    for u in range(len(unit_names(hg))):
        assert len(np.unique(res.parts[units == u])) == 1  # whole layer (and the input with the first layer)
    unit_part = np.array([res.parts[units == u][0] for u in range(units.max() + 1)])
    assert np.all(np.diff(unit_part) >= 0) and set(unit_part) == {0, 1, 2}
    w = np.bincount(units, weights=hg.vertex_weight)
    _, opt = split_min_max(w, 3)
    assert np.bincount(res.parts, weights=hg.vertex_weight).max() == pytest.approx(opt)


def test_layerwise_more_parts_than_layers_is_refused() -> None:
    _, hg = _hg()
    with pytest.raises(HgpartError, match="layer-wise partitioning cannot make 6 parts from 5 vertex layers"):
        partition(hg, k=6, backend="layerwise")


def test_horizontal_hand_case_and_even_split() -> None:
    _, hg = _hg("coarse")
    res = partition(hg, k=2, backend="horizontal")
    for b in hg.blocks:
        p = res.parts[b.start:b.stop]
        assert np.all(np.diff(p) >= 0)  # contiguous chunks
        counts = np.bincount(p, minlength=2)
        assert counts.max() - counts.min() <= 1
    conv1 = hg.block("conv1", "filter")
    assert res.parts[conv1.start:conv1.stop].tolist() == [0, 0, 1, 1]
    inp = hg.block("input", "input")
    assert res.parts[inp.start:inp.stop].tolist() == [0, 0, 1]


def test_horizontal_fine_equals_coarse_when_k_divides_filters() -> None:
    g, hgc = _hg("coarse")
    _, hgf = _hg("fine")
    pc = partition(hgc, k=2, backend="horizontal").parts
    pf = partition(hgf, k=2, backend="horizontal").parts
    from hgpart.placement import Placement

    lc = Placement.layer_parts_from_vertices(hgc, pc)
    lf = Placement.layer_parts_from_vertices(hgf, pf)
    for layer in g.vertex_layers:
        assert np.array_equal(lc[layer.name]["filters"], lf[layer.name]["filters"])
        if "channels" in lf[layer.name]:  # every channel vertex sits with its filter's reduction
            assert np.array_equal(lf[layer.name]["channels"], np.repeat(lf[layer.name]["filters"][:, None],
                                                                        lf[layer.name]["channels"].shape[1], 1))


@pytest.mark.parametrize(("weights", "k", "want"), [
    ([3, 3, 3, 3], 2, [0, 0, 0, 1]),           # part 0 takes 3+3 = 6 (not above 6), then 3 more
    ([2, 2, 2, 2], 4, [0, 0, 1, 1]),           # avg 2: parts overshoot to 4, the last two stay empty
    ([1, 5, 1, 1, 1, 1], 3, [0, 0, 1, 1, 1, 1]),
    ([5, 1, 1, 1], 2, [0, 1, 1, 1]),
])
def test_incremental_hand_cases(weights: list[float], k: int, want: list[int]) -> None:
    assert incremental_parts(np.array(weights, dtype=float), k).tolist() == want


def test_incremental_backend_walks_vertex_order() -> None:
    _, hg = _hg("fine")
    res = partition(hg, k=4, backend="incremental")
    assert np.all(np.diff(res.parts) >= 0)
    work = np.bincount(res.parts, weights=hg.vertex_weight, minlength=4)
    avg = hg.vertex_weight.sum() / 4
    # every part but the last exceeds the average by less than its last vertex
    cum_last = [hg.vertex_weight[np.flatnonzero(res.parts == p)[-1]] for p in range(3)]
    for p in range(3):
        assert avg < work[p] <= avg + cum_last[p] + 1e-12
