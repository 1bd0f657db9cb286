"""KaHyPar and Mt-KaHyPar backends: our km1 equals the backend's own figure, same seed -> same placement."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hgtoys import branching_network, toy_network, unit_work

from hgpart.errors import HgpartError
from hgpart.hypergraph import build_hypergraph
from hgpart.metrics import km1_bytes, partition_metrics
from hgpart.partitioners import partition
from hgpart.partitioners._subprocess import run_child
from hgpart.partitioners.kahypar_backend import PRESET_FILE
from hgpart.partitioners.mtkahypar_backend import resolve_preset
from hgpart.partitioners.scaling import scale_hypergraph


def _hg(name="toy", grain="fine", batch=2):
    g = toy_network() if name == "toy" else branching_network()
    return build_hypergraph(g, unit_work(g), batch_size=batch, grain=grain)


@pytest.mark.parametrize("backend", ["kahypar", "mtkahypar"])
@pytest.mark.parametrize("case", [("toy", "fine", 3), ("branchy", "coarse", 2), ("branchy", "fine", 4)])
def test_our_km1_equals_the_backends_own_figure(backend, case):
    name, grain, k = case
    hg = _hg(name, grain)
    res = partition(hg, k=k, backend=backend, epsilon=0.1, seed=7)
    assert res.parts.shape == (hg.num_vertices,) and set(np.unique(res.parts)) <= set(range(k))
    assert res.info["cost_exact"]
    # the backend's figure is in scaled units; bytes per unit is the scale
    assert res.backend_objective * res.objective_scale == km1_bytes(hg, res.parts, k) == res.objective_bytes
    assert res.objective_bytes > 0
    m = partition_metrics(hg, res.parts, k)
    assert m.comm_volume_mib * 2**20 == pytest.approx(res.objective_bytes)


def test_km1_matches_backend_when_costs_are_coarsened():
    hg = _hg("branchy", "coarse")
    rng = np.random.default_rng(3)
    big = dataclasses.replace(hg, net_cost=rng.integers(10**9, 10**11, hg.num_nets).astype(np.float64))
    sh = scale_hypergraph(big, k=3, epsilon=0.1)
    assert not sh.cost_exact
    res = partition(big, k=3, backend="mtkahypar", seed=1)
    # with rounded costs the backend's figure is the km1 of the rounded costs: within the rounding error
    assert res.backend_objective * res.objective_scale == pytest.approx(res.objective_bytes, rel=0.02)


@pytest.mark.parametrize("backend,preset", [("kahypar", None), ("mtkahypar", None), ("mtkahypar", "Quality")])
def test_same_seed_same_placement(backend, preset):
    # non-deterministic Mt-KaHyPar presets are run on one thread unless threads are asked for explicitly
    hg = _hg("branchy", "fine")
    a = partition(hg, k=3, backend=backend, seed=11, preset=preset)
    b = partition(hg, k=3, backend=backend, seed=11, preset=preset)
    np.testing.assert_array_equal(a.parts, b.parts)
    assert a.info["deterministic"] and a.info["threads"] == (2 if backend == "mtkahypar" and not preset else 1)


def test_balance_respects_epsilon_on_scaled_weights():
    hg = _hg("toy", "fine", batch=2)
    # equal work per vertex: 51 vertices into 3 parts of 17 each is achievable exactly
    hg = dataclasses.replace(hg, vertex_weight=np.ones(hg.num_vertices))
    for backend in ("kahypar", "mtkahypar"):
        res = partition(hg, k=3, backend=backend, epsilon=0.05, seed=2)
        work = np.bincount(res.parts, minlength=3)
        assert work.max() <= 1.05 * 17 + 1e-9, (backend, work)


def test_presets_are_case_insensitive_and_checked():
    assert resolve_preset("Highest-Quality") == "highest_quality"
    assert resolve_preset(None) == "deterministic"
    with pytest.raises(HgpartError, match="unknown Mt-KaHyPar preset"):
        partition(_hg(), k=2, backend="mtkahypar", preset="fastest")
    with pytest.raises(HgpartError, match="unknown KaHyPar preset"):
        partition(_hg(), k=2, backend="kahypar", preset="quality")
    assert PRESET_FILE.is_file()


def test_a_child_that_dies_is_one_clear_error(tmp_path):
    sh = scale_hypergraph(_hg(), k=2, epsilon=0.1)
    with pytest.raises(HgpartError, match=r"kahypar failed \(exit code"):
        run_child("kahypar", sh, k=2, epsilon=0.1, seed=1, config=str(tmp_path / "missing.ini"))


def test_time_limit_stops_the_child():
    sh = scale_hypergraph(_hg(), k=2, epsilon=0.1)
    with pytest.raises(HgpartError, match="time limit"):
        run_child("mtkahypar", sh, k=2, epsilon=0.1, seed=1, config="DEFAULT", time_limit=0.01)
