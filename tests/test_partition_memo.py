"""The per-hypergraph memo: what it promises about new, collected and in-place-modified graphs."""

from __future__ import annotations

import gc

import pytest
from hgtoys import toy_network, unit_work

from hgpart.hypergraph import build_hypergraph
from hgpart.partitioners._memo import forget, memo
from hgpart.partitioners.counts import analyze


def _coarse():
    g = toy_network()
    return build_hypergraph(g, unit_work(g), batch_size=2, grain="coarse")


def test_a_new_graph_is_never_served_another_graphs_result() -> None:
    a, b = _coarse(), _coarse()
    assert memo(a, "k", lambda: "a") == "a"
    assert memo(b, "k", lambda: "b") == "b"  # equal contents, another object: computed anew
    del a
    gc.collect()
    c = _coarse()  # may reuse a's address
    assert memo(c, "k", lambda: "c") == "c"


def test_a_graphs_arrays_cannot_change_in_place() -> None:
    hg = _coarse()
    analyze(hg)
    with pytest.raises(ValueError, match="read-only"):
        hg.vertex_weight *= 3.0  # the memo's key is the object: its arrays must not change under it


def test_a_replaced_array_is_served_the_stale_result_until_forget() -> None:
    hg = _coarse()
    before = analyze(hg)
    hg.vertex_weight = hg.vertex_weight * 3.0  # same object, new work: the documented limit
    assert analyze(hg) is before
    assert before.total_weight != float(hg.vertex_weight.sum())
    forget(hg)
    after = analyze(hg)
    assert after is not before and after.total_weight == float(hg.vertex_weight.sum())


def test_prepare_fine_leaves_no_k_independent_work_to_the_first_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep prepares once; the first K's time limit then goes to partitioning, not to the analysis."""
    from hgpart.partitioners import auto, block, counts, partition

    g = toy_network()
    hg = build_hypergraph(g, unit_work(g), batch_size=2, grain="fine")
    auto.prepare_fine(hg)
    calls: list[str] = []
    real_family, real_analyze = block.grouped_family, counts._analyze

    def family(*a, **kw):
        calls.append("groupings")
        return real_family(*a, **kw)

    def analysis(*a, **kw):
        calls.append("analysis")
        return real_analyze(*a, **kw)

    monkeypatch.setattr(auto, "grouped_family", family)
    monkeypatch.setattr(counts, "_analyze", analysis)
    monkeypatch.setattr(auto, "_fine_to_coarse", lambda h: calls.append("projection"))
    res = partition(hg, k=2, backend="auto", epsilon=0.1, seed=1, time_limit=5)
    assert res.parts.shape == (hg.num_vertices,)
    assert calls == []
