"""Training semantics: the warm-up makes no update, ``steps=N`` makes exactly N updates, and sync mode with one
micro-batch equals plain single-device Keras training on a BatchNorm model (with several micro-batches it does not:
BatchNorm then normalises each micro-batch with its own statistics, as documented)."""

from __future__ import annotations

import importlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hgpart.runtime.devices import open_devices  # noqa: E402

K = 2
DS = open_devices("logical", K, inter_op=4)  # before anything initialises TensorFlow

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from hgpart.runtime.evaluation import MeteredStep  # noqa: E402
from hgpart.runtime.partitioned import PlacedModel  # noqa: E402
from hgpart.runtime.step import OptimizerSpec, TrainStep  # noqa: E402

from hgpart.frontend import layer_graph_from_keras  # noqa: E402
from hgpart.hypergraph import build_hypergraph  # noqa: E402
from hgpart.models import load_graph  # noqa: E402
from hgpart.partitioners import partition  # noqa: E402
from hgpart.placement import Placement  # noqa: E402
from hgpart.profile import analytic_profile  # noqa: E402

tf.config.set_soft_device_placement(False)
B = 8
#: the module (``hgpart.runtime.train`` the attribute is the function of the same name)
train_mod = importlib.import_module("hgpart.runtime.train")
api_mod = importlib.import_module("hgpart.runtime.api")


def bn_model() -> keras.Model:
    L = keras.layers
    x = inp = keras.Input((12, 12, 3), name="input")
    x = L.Conv2D(6, 3, padding="same", use_bias=False, name="c1")(x)
    x = L.BatchNormalization(name="bn1")(x)
    x = L.Activation("relu", name="r1")(x)
    x = L.MaxPooling2D(2, name="p1")(x)
    x = L.Conv2D(8, 3, padding="same", activation="relu", name="c2")(x)
    x = L.Flatten(name="flat")(x)
    out = L.Dense(10, activation="softmax", name="pred")(x)
    return keras.Model(inp, out, name="tbn")


def random_placement(model: keras.Model, seed: int) -> Placement:
    graph = layer_graph_from_keras(model, name=model.name)
    prof = analytic_profile(graph, B)
    hg = build_hypergraph(graph, prof.work(), batch_size=B, grain="coarse")
    parts = np.random.default_rng(seed).integers(0, K, hg.num_vertices)
    return Placement.from_vertex_parts(graph, hg, parts, k=K, method="test", work=prof.work())


def data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(B, 12, 12, 3)).astype(np.float32), rng.integers(0, 10, B).astype(np.int32)


def snapshot(step: TrainStep) -> list[np.ndarray]:
    return [v.numpy().copy() for v in step.state]


def built(seed: int = 0, opt: str = "adam", micro: int = 1) -> tuple[keras.Model, PlacedModel, TrainStep]:
    keras.utils.set_random_seed(seed)
    m = bn_model()
    pm = PlacedModel(random_placement(m, seed), m, DS.devices)
    return m, pm, TrainStep(pm, OptimizerSpec(opt, lr=1e-2), batch_size=B, micro_batches=micro)


# ------------------------------------------------------------------------------------------- warm-up
@pytest.mark.parametrize("opt", ["adam", "momentum"])
def test_warm_up_leaves_every_variable_unchanged(opt: str) -> None:
    _, _, step = built(opt=opt)
    before = snapshot(step)
    loss = step.warm_up(*data(1))
    assert np.isfinite(loss)
    after = snapshot(step)
    for a, b in zip(before, after, strict=True):
        np.testing.assert_array_equal(a, b)
    step(*data(1))  # the same batch through the real step does change them (the snapshot sees updates)
    assert any(not np.array_equal(a, b) for a, b in zip(before, snapshot(step), strict=True))


def test_warm_up_then_training_equals_training_without_warm_up() -> None:
    _, pm_a, a = built()
    _, pm_b, b = built()
    a.warm_up(*data(5))
    for s in range(3):
        a(*data(s))
        b(*data(s))
    for layer, ws in pm_b.keras_weights().items():
        for name, w in ws.items():
            np.testing.assert_array_equal(pm_a.keras_weights()[layer][name], w, err_msg=f"{layer}.{name}")


def minivgg_placement(tmp: Path) -> Path:
    graph = load_graph("minivgg", (16, 16, 3), 10)
    prof = analytic_profile(graph, B)
    hg = build_hypergraph(graph, prof.work(), batch_size=B, grain="coarse")
    res = partition(hg, k=K, backend="mtkahypar", epsilon=0.05, seed=0)
    pl = Placement.from_vertex_parts(graph, hg, res.parts, k=K, method="hypergraph", work=prof.work())
    return Path(pl.save(tmp / "minivgg_coarse_k2.json"))


@pytest.mark.parametrize("mode,trace", [("async", False), ("sync", False), ("async", True)])
def test_train_makes_exactly_steps_updates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str,
                                           trace: bool) -> None:
    """Every device's Adam step counter equals ``steps`` after a run: no warm-up or traced step trained."""
    made: list[MeteredStep] = []

    class Recorded(MeteredStep):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            made.append(self)

    monkeypatch.setattr(api_mod, "MeteredStep", Recorded)
    steps = 3
    res = train_mod.train(minivgg_placement(tmp_path), devices="logical", device_set=DS, batch_size=B, steps=steps,
                          mode=mode, dataset="synthetic", trace=tmp_path / "trace" if trace else None)
    assert res.steps == steps
    (step,) = made
    assert {float(c.numpy()) for c in step.counters.values()} == {float(steps)}


# ---------------------------------------------------------------------------------------- BatchNorm
def plain_keras(model: keras.Model, opt: OptimizerSpec, batches: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """Single-device Keras training on whole mini-batches (no micro-batching)."""
    kopt = opt.keras()
    for x, y in batches:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, model(x, training=True)))
        kopt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables,
                                 strict=True))


def max_rel_err(pm: PlacedModel, model: keras.Model) -> float:
    errs = []
    for layer, ws in pm.keras_weights().items():
        for name, got in ws.items():
            want = getattr(model.get_layer(layer), name).numpy()
            errs.append(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-12))
    return float(max(errs))


@pytest.mark.parametrize("micro,exact", [(1, True), (2, False)])
def test_sync_batchnorm_equals_single_device_only_with_one_micro_batch(micro: int, exact: bool) -> None:
    m, pm, step = built(seed=3, micro=micro)
    batches = [data(10 + s) for s in range(3)]
    for x, y in batches:
        step(x, y)
    plain_keras(m, step.opt, batches)
    err = max_rel_err(pm, m)
    if exact:
        assert err < 1e-5
    else:  # per-micro-batch statistics: a real difference, far above float noise
        assert err > 1e-3


@pytest.mark.parametrize("strategy", ["sync-dp", "async-dp-dps"])
def test_data_parallel_warm_up_leaves_every_variable_unchanged(strategy: str) -> None:
    from hgpart.runtime.dataparallel import make_strategy

    keras.utils.set_random_seed(0)
    s = make_strategy(strategy, bn_model(), DS, OptimizerSpec("adam", lr=1e-2), batch_size=B)
    assert s.state
    before = [v.numpy().copy() for v in s.state]
    s.warm_up(*data(2))
    for a, v in zip(before, s.state, strict=True):
        np.testing.assert_array_equal(a, v.numpy())
    s.slot_fns[0](*(d[: s.task_batch] for d in data(2)))
    assert any(not np.array_equal(a, v.numpy()) for a, v in zip(before, s.state, strict=True))
