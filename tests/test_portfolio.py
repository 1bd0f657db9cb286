"""Nested groupings, the Mt-KaHyPar portfolio (workers, deadline, V-cycles) and auto's fine grain on top of it."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hgtoys import branching_network, chain, unit_work

from hgpart.hypergraph import build_hypergraph
from hgpart.metrics import km1_bytes
from hgpart.partitioners import partition
from hgpart.partitioners.block import checkerboard_parts, grouped_family
from hgpart.partitioners.portfolio import Candidate, refine, run_portfolio


@pytest.fixture(scope="module")
def fine():
    graph = chain([3, 32, 48, 32], [24])  # a fine graph of a few thousand vertices
    return build_hypergraph(graph, unit_work(graph), batch_size=2, grain="fine")


def test_grouped_family_is_nested_and_keeps_km1_and_weights(fine):
    fam = grouped_family(fine, (4, 8, 16), min_1d=8)
    sizes = [fam[s][0].num_vertices for s in (4, 8, 16)]
    assert sizes[0] < sizes[1] < sizes[2] < fine.num_vertices
    rng = np.random.default_rng(1)
    for side, (g, vmap) in fam.items():
        assert np.allclose(np.bincount(vmap, weights=fine.vertex_weight, minlength=g.num_vertices), g.vertex_weight)
        for _ in range(5):  # any placement of the grouped graph has the same km1 at full resolution
            p = rng.integers(0, 5, g.num_vertices)
            assert km1_bytes(g, p, 5) == pytest.approx(km1_bytes(fine, p[vmap], 5))
        blk = g.block("c1", "channel")
        assert blk.shape == (48 // (48 // side), 32 // (32 // side))
    # nested: the vertices one 16x16 vertex covers all fall into one 8x8 vertex, and so on
    for fine_side, coarse_side in ((16, 8), (8, 4)):
        vf, vc = fam[fine_side][1], fam[coarse_side][1]
        pairs = np.unique(np.stack([vf, vc], axis=1), axis=0)
        assert len(np.unique(pairs[:, 0])) == len(pairs)


def test_portfolio_runs_are_exact_balanced_reproducible_and_meet_the_deadline(fine):
    fam = grouped_family(fine, (4, 8), min_1d=8)
    graphs = [Candidate(f"{s}x{s}", *fam[s], seeds=3) for s in (4, 8)]
    runs = run_portfolio(graphs, k=4, epsilon=0.1, seconds=60, workers=2, refine_share=0.5)
    kinds = [r.kind for r in runs]
    assert kinds.count("partition") == 6 and kinds.count("refine") == 2
    for r in runs:
        g = graphs[r.graph].hg
        assert r.parts.shape == (g.num_vertices,)
        # the backend's own km1 (costs scaled exactly) is our km1
        assert r.km1_bytes == pytest.approx(km1_bytes(g, r.parts, 4))
        w = np.bincount(r.parts, weights=g.vertex_weight, minlength=4)
        assert w.max() <= 1.1 * w.sum() / 4 + g.vertex_weight.max()
        if r.kind == "refine":  # V-cycles never lose what they start from
            assert r.km1_bytes <= runs[r.origin].km1_bytes + 1e-6
    # with the whole plan finished, the same call gives the same runs (fixed per-worker job sequences)
    again = run_portfolio(graphs, k=4, epsilon=0.1, seconds=60, workers=2, refine_share=0.5)
    key = sorted((r.kind, r.graph, r.seed, r.km1_bytes) for r in runs)
    assert key == sorted((r.kind, r.graph, r.seed, r.km1_bytes) for r in again)
    # a deadline stops the workers: whatever finished is returned, nothing waits past it
    t0 = time.perf_counter()
    cut = run_portfolio([Candidate("full", fine, None)], k=4, epsilon=0.1, seconds=1.5, workers=2)
    assert time.perf_counter() - t0 < 6.0
    assert all(r.parts.shape == (fine.num_vertices,) for r in cut)


def test_portfolio_stops_after_its_first_run_when_told(fine):
    """``stop`` ends the portfolio once a partition run has finished (auto: KaHyPar beside it is done)."""
    g, vmap = grouped_family(fine, (8,), min_1d=8)[8]
    graphs = [Candidate("8x8", g, vmap, seeds=5)]
    whole = run_portfolio(graphs, k=4, epsilon=0.1, seconds=60, workers=1, refine_share=0.0)
    assert [r.seed for r in whole if r.kind == "partition"] == [1, 2, 3, 4, 5]
    stop = threading.Event()
    stop.set()
    first = run_portfolio(graphs, k=4, epsilon=0.1, seconds=60, workers=1, refine_share=0.0, stop=stop)
    assert [(r.kind, r.seed) for r in first] == [("partition", 1)]
    assert first[0].km1_bytes == pytest.approx(whole[0].km1_bytes)


def test_refine_improves_a_structured_start_and_starts_compete(fine):
    g, vmap = grouped_family(fine, (8,), min_1d=8)[8]
    start = checkerboard_parts(g, 4)
    better = refine(g, start, k=4, epsilon=0.1, time_limit=60)
    assert km1_bytes(g, better, 4) < km1_bytes(g, start, 4)
    w = np.bincount(better, weights=g.vertex_weight, minlength=4)
    assert w.max() <= 1.1 * w.sum() / 4 + g.vertex_weight.max()
    # a given start is refined first when it beats the portfolio's own runs
    runs = run_portfolio([Candidate("8x8", g, vmap, seeds=1)], k=4, epsilon=0.1, seconds=60, workers=1,
                         refine_share=0.5, starts=[(0, better, 0.0)])
    origins = [r.origin for r in runs if r.kind == "refine"]
    assert origins and origins[0] == -2


def test_auto_fine_grain_picks_the_best_portfolio_candidate(fine):
    res = partition(fine, k=4, backend="auto", epsilon=0.1, time_limit=8)
    cands = res.info["candidates"]
    assert any(n.startswith("mtkahypar-quality ") for n in cands)
    assert res.objective_bytes == pytest.approx(min(cands.values()))
    assert "portfolio_runs" in res.info["notes"]
    w = np.bincount(res.parts, weights=fine.vertex_weight, minlength=4)
    assert w.max() <= 1.1 * w.sum() / 4 + fine.vertex_weight.max()
    # never worse than one Mt-KaHyPar QUALITY run on the whole graph
    mtk = partition(fine, k=4, backend="mtkahypar", epsilon=0.1, preset="quality")
    assert res.objective_bytes <= mtk.objective_bytes * 1.02


def test_auto_fine_grain_on_a_residual_model_tries_the_coarse_projection():
    graph = branching_network()
    fine = build_hypergraph(graph, unit_work(graph), batch_size=2, grain="fine")
    res = partition(fine, k=3, backend="auto", epsilon=0.1, time_limit=6)
    assert "mtkahypar-quality coarse projection" in res.info["candidates"]
    assert km1_bytes(fine, res.parts, 3) == pytest.approx(res.objective_bytes)
