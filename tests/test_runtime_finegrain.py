"""Fine-grain compute fidelity: a part's (filter, channel) pairs are convolved as a few dense rectangles, so the
executed MACs stay close to the assigned ones, and the outputs still equal Keras."""

from __future__ import annotations

import keras
import numpy as np
from hgpart.runtime.devices import open_devices
from hgpart.runtime.partitioned import PlacedModel, rectangles
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from hgpart.frontend import layer_graph_from_keras
from hgpart.hypergraph import build_hypergraph
from hgpart.placement import Placement
from hgpart.profile import analytic_profile

K = 2
DS = open_devices("logical", K, inter_op=4)
B = 4


def tiny() -> keras.Model:
    L = keras.layers
    x = inp = keras.Input((8, 8, 3), name="input")
    x = L.Conv2D(6, 3, padding="same", activation="relu", name="c1")(x)
    x = L.Conv2D(8, 3, padding="same", activation="relu", name="c2")(x)
    x = L.GlobalAveragePooling2D(name="gap")(x)
    out = L.Dense(10, activation="softmax", name="pred")(x)
    return keras.Model(inp, out, name="tfine")


def block_diagonal_placement(graph) -> Placement:
    """All on part 0 except c2's off-diagonal (filter, channel) blocks: each part's c2 mask is two blocks whose
    bounding box is twice the owned entries."""
    prof = analytic_profile(graph, B)
    hg = build_hypergraph(graph, prof.work(), batch_size=B, grain="fine")
    parts = np.zeros(hg.num_vertices, np.int64)
    for b in hg.blocks:
        if b.layer == "c2" and b.role == "channel":
            assert b.group == (1, 1) and b.extent == (8, 6)
            f, c = np.meshgrid(np.arange(8), np.arange(6), indexing="ij")
            parts[b.start:b.stop] = ((f < 4) != (c < 3)).astype(np.int64).ravel()
    return Placement.from_vertex_parts(graph, hg, parts, k=K, method="test", work=prof.work())


def test_block_masks_run_as_exact_rectangles_and_equal_keras():
    keras.utils.set_random_seed(0)
    m = tiny()
    g = layer_graph_from_keras(m, name=m.name)
    pl = block_diagonal_placement(g)
    pm = PlacedModel(pl, m, DS.devices)
    c2 = [r for r in pm.compute if r["layer"] == "c2"]
    assert sorted(r["part"] for r in c2) == [0, 1]
    hw = 8 * 8 * 9
    for r in c2:
        assert r["assigned_macs"] == hw * 24  # each part owns half of the 8 x 6 pairs
        assert r["executed_macs"] == r["assigned_macs"]  # the bounding box would execute 48 pairs
    for p in (0, 1):
        assert len(pm._by_layer["c2"][("kernel", p)].rects) == 2
    assert pm.compute_overhead()["ratio"] == 1.0
    x = np.random.default_rng(1).normal(size=(B, 8, 8, 3)).astype(np.float32)
    np.testing.assert_allclose(pm.predict(x), m(x).numpy(), rtol=1e-5, atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(arrays(bool, st.tuples(st.integers(1, 12), st.integers(1, 12))), st.integers(1, 6),
       st.sampled_from([0.0, 0.05, 1.0]))
def test_rectangles_cover_every_owned_entry(mask, max_rects, waste):
    mask[0, :] = True  # every filter column of a part's kernel owns >= 1 channel
    rects = rectangles(mask, max_rects=max_rects, waste=waste)
    cols = np.concatenate([c for _, c in rects])
    assert np.array_equal(np.sort(cols), np.arange(mask.shape[1]))  # each filter in exactly one rectangle
    covered = np.zeros_like(mask)
    for rows, cs in rects:
        covered[np.ix_(rows, cs)] = True
    assert not (mask & ~covered).any()
    n_pat = len(np.unique(mask.T, axis=0))
    executed = sum(r.size * c.size for r, c in rects)
    if waste == 0.0 and max_rects >= n_pat:
        assert executed == mask.sum()  # exact: one rectangle per distinct channel set
    assert len(rects) <= max_rects
    assert executed <= mask.any(axis=1).sum() * mask.shape[1]  # never worse than the used-channel bounding box
