"""The layer-kind registry: every stage uses it, and every registered kind works end to end.

``test_no_kind_string_switched_outside_registry`` greps the compiler and the runtime for comparisons of a
layer's kind with a registered kind name: only ``hgpart/kinds/`` may hold them. The walk takes every example
model (together they use every registered kind) through the front end, both grains of the hypergraph, the
metrics, a placement written to disk and read back, and the runtime on 2 logical devices, whose forward pass
must equal Keras's within 1e-4.
"""

from __future__ import annotations

import re
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from hgpart.runtime.devices import open_devices
from hgpart.runtime.partitioned import PlacedModel
from hgpart.runtime.step import OptimizerSpec, TrainStep
from hgpart.runtime.traffic import measure_traffic
from kind_examples import EXAMPLES, squeeze_excite

from hgpart.frontend import layer_graph_from_keras
from hgpart.hypergraph import build_hypergraph
from hgpart.kinds import CONVERTERS, KERAS_CLASSES, KINDS, keras_layer
from hgpart.metrics import partition_metrics
from hgpart.placement import Placement, load_placement
from hgpart.profile import analytic_profile

DS = open_devices("logical", 2, inter_op=4)
ROOT = Path(__file__).resolve().parents[1]
B = 4


def _kind_comparisons(text: str) -> list[str]:
    """Lines comparing something named ``kind`` with a registered kind name (==, !=, in, dict dispatch)."""
    names = "|".join(re.escape(k) for k in sorted(KINDS, key=len, reverse=True))
    lit = rf"""["']({names})["']"""
    patterns = [
        rf"kind\W{{0,3}}\s*(==|!=)\s*{lit}",
        rf"{lit}\s*(==|!=)\s*\w*\.?kind\b",
        rf"kind\W{{0,3}}\s+(not\s+)?in\s*[\(\[\{{][^\)\]\}}]*{lit}",
        rf"\{{\s*{lit}\s*:[^\}}]*\}}\s*\[\s*\w*\.?kind\b",
    ]
    return [line for line in text.splitlines() if any(re.search(p, line) for p in patterns)]


def test_grep_finds_a_kind_switch():
    assert _kind_comparisons('    if layer.kind == "depthwise_conv2d":')
    assert _kind_comparisons('    elif kind in ("conv2d", "dense"):')
    assert _kind_comparisons('    if ld["kind"] != "conv2d":')
    assert not _kind_comparisons('    if r.kind == "partition":')
    assert not _kind_comparisons('    if blk.role == "input":')


def test_no_kind_string_switched_outside_registry():
    found = []
    for folder in ("hgpart", "runtime"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "kinds" in path.relative_to(ROOT).parts:
                continue
            found += [f"{path.relative_to(ROOT)}: {line.strip()}" for line in _kind_comparisons(path.read_text())]
    assert not found, "kind strings switched on outside hgpart/kinds/:\n" + "\n".join(found)


def test_every_kind_has_an_example():
    used: set[str] = set()
    for build in EXAMPLES.values():
        m = build()
        used |= {layer.kind for layer in layer_graph_from_keras(m, name=m.name).layers}
    assert used == set(KINDS), f"kinds without an example model: {sorted(set(KINDS) - used)}"


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_each_kind_counts_the_keras_variables_its_layer_holds(example: str) -> None:
    """The simulator charges a parameter server's pull and push a latency per variable: the kinds' counts must add
    up to the Keras model's own weights (biases switched off, BatchNorm's moving statistics, converted layers)."""
    model = EXAMPLES[example]()
    graph = layer_graph_from_keras(model, name=example)
    assert sum(layer.definition.variables(layer) for layer in graph.layers) == len(model.weights)


def test_every_keras_class_maps_to_a_registered_kind():
    assert set(KERAS_CLASSES.values()) <= set(KINDS) | {c.name for c in CONVERTERS}
    for name, kind in KINDS.items():
        assert kind.name == name and kind.rule, f"kind {name} needs a name and a communication rule"


def _alternating(graph, grain: str) -> Placement:
    """Vertex v on part v % 2: every layer is split, so every reading rule moves data."""
    prof = analytic_profile(graph, B)
    hg = build_hypergraph(graph, prof.work(), batch_size=B, grain=grain)
    parts = np.arange(hg.num_vertices) % 2
    return Placement.from_vertex_parts(graph, hg, parts, k=2, method="test", work=prof.work())


@pytest.mark.parametrize("grain", ["coarse", "fine"])
@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_kind_walk(example: str, grain: str, tmp_path: Path) -> None:
    keras.utils.set_random_seed(3)
    model = EXAMPLES[example]()
    graph = layer_graph_from_keras(model, name=model.name)
    pl = _alternating(graph, grain)
    hg = pl.hypergraph()
    met = partition_metrics(hg, pl.vertex_parts(hg), 2)
    assert met.to_dict() == pl.metrics
    back = load_placement(pl.save(tmp_path / "p.json"))
    assert back.recompute_metrics().to_dict() == pl.metrics
    for name, arr in pl.channel_parts().items():
        np.testing.assert_array_equal(back.channel_parts()[name], arr)
    x = np.random.default_rng(0).normal(size=(B, 8, 8, 3)).astype(np.float32)
    pm = PlacedModel(back, model, DS.devices)
    np.testing.assert_allclose(pm.predict(x), np.asarray(model(x, training=False)), atol=1e-4, rtol=1e-4)


def _keras_training(model: keras.Model, spec: OptimizerSpec, batches: list, from_logits: bool) -> None:
    """Single-device Keras training with the same optimizer (the reference)."""
    kopt = spec.keras()
    for x, y in batches:
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, out, from_logits=from_logits))
        kopt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables,
                                 strict=True))


@pytest.mark.parametrize("grain", ["coarse", "fine"])
@pytest.mark.parametrize("example", ["squeeze_excite", "separable", "convnext_block"])
def test_sync_training_equals_keras(example: str, grain: str) -> None:
    """An SE block (with Rescaling and Normalization), a separable conv and ConvNeXt's block (nested stem,
    grouped convs, Dense on an image, LayerScale) train as Keras does, end to end."""
    keras.utils.set_random_seed(5)
    model = squeeze_excite(drop=0.0) if example == "squeeze_excite" else EXAMPLES[example]()
    graph = layer_graph_from_keras(model, name=model.name)
    pm = PlacedModel(_alternating(graph, grain), model, DS.devices)
    spec = OptimizerSpec("adam", lr=1e-2)
    step = TrainStep(pm, spec, batch_size=B)
    rng = np.random.default_rng(1)
    batches = [(rng.normal(size=(B, 8, 8, 3)).astype(np.float32), rng.integers(0, 5, B).astype(np.int32))
               for _ in range(2)]
    losses = [step(x, y) for x, y in batches]
    assert all(np.isfinite(losses))
    _keras_training(model, spec, batches, from_logits=not pm.final_softmax)
    for name, weights in pm.keras_weights().items():
        layer = graph.layer(name)
        kl = keras_layer(model, layer)
        for wname, got in weights.items():
            want = np.asarray(getattr(kl, layer.config.get("weight_names", {}).get(wname, wname))).reshape(got.shape)
            err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-12)
            assert err < 1e-4, f"{name}.{wname}: relative error {err:.2e}"


@pytest.mark.parametrize("example", ["layer_norm", "squeeze_excite"])
def test_measured_bytes_match_prediction(example: str) -> None:
    """The bytes the runtime moves equal the hypergraph's: LayerNorm's statistics net, the SE gate's nets."""
    keras.utils.set_random_seed(2)
    model = squeeze_excite(drop=0.0) if example == "squeeze_excite" else EXAMPLES[example]()
    pl = _alternating(layer_graph_from_keras(model, name=model.name), "coarse")
    t = measure_traffic(TrainStep(PlacedModel(pl, model, DS.devices), OptimizerSpec("momentum"), batch_size=B))
    pred = pl.recompute_metrics().comm_volume_mib * 2**20
    assert t.forward == pytest.approx(pred, rel=1e-9)
