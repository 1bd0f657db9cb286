"""Contiguous chain placements: DP optimality over its cut points, cost = our km1, balance, use in exact/auto."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_exact_partitioners import balanced, chain, coarse

from hgpart.metrics import MIB, km1_bytes
from hgpart.partitioners import partition
from hgpart.partitioners.chain import _cut_points, chain_counts
from hgpart.partitioners.counts import PartCost, analyze, expand_counts

FINE_STEPS = 10**6  # every column boundary is a cut point


def brute_force_chain(model, k: int, eps: float) -> float:
    """Cheapest split of the cut-point sequence into at most k pieces within the balance, by enumeration."""
    order = np.argsort([int(m.min()) for m in model.members], kind="stable")
    cap = (1.0 + eps) * model.total_weight / k
    X = _cut_points(model, order, cap, FINE_STEPS)
    best = float("inf")
    inner = range(1, len(X) - 1)
    for r in range(k):
        for cuts in itertools.combinations(inner, r):
            pts = [0, *cuts, len(X) - 1]
            x = np.array([X[b] - X[a] for a, b in itertools.pairwise(pts)])
            if (x @ model.weight).max() > cap * (1 + 1e-12):
                continue
            best = min(best, float(PartCost.of(model)(x).sum()))
    return best


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    widths=st.lists(st.integers(1, 4), min_size=2, max_size=4),
    fc=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    k=st.integers(2, 3),
    eps=st.sampled_from([0.05, 0.3, 1.0]),
)
def test_chain_dp_is_the_best_contiguous_split_and_its_cost_is_km1(widths, fc, k, eps):
    hg = coarse(chain(widths, fc))
    model = analyze(hg)
    got = chain_counts(model, k, eps, steps=FINE_STEPS)
    want = brute_force_chain(model, k, eps)
    if got is None:
        assert want == float("inf")
        return
    counts, mib = got
    assert np.isclose(mib, want, rtol=1e-9, atol=1e-12)
    assert (counts.sum(axis=1) == model.sizes).all()
    parts = expand_counts(hg, model, counts)
    assert np.isclose(km1_bytes(hg, parts, k), mib * MIB, rtol=1e-9)
    assert balanced(hg, parts, k, eps)


def test_chain_seeds_the_exact_backend_at_large_k():
    """With no time for the program, exact still returns the chain placement (never the even split)."""
    hg = coarse(chain([3, 8, 8, 8], [6, 4]))
    model = analyze(hg)
    counts, mib = chain_counts(model, 5, 0.1)
    res = partition(hg, k=5, backend="exact", epsilon=0.1, time_limit=0.2)
    assert res.objective_bytes <= mib * MIB * (1 + 1e-9)
    assert res.lower_bound_bytes <= res.objective_bytes
