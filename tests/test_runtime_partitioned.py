"""Runtime correctness: forward equals Keras, sync training equals single-device Keras training, collocated
gradients, measured bytes equal the placement's predicted volume, clear errors."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hgpart.runtime.devices import open_devices  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from hgpart.errors import HgpartError  # noqa: E402

K = 3
DS = open_devices("logical", K, inter_op=4)  # before anything initialises TensorFlow

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from hgpart.runtime.partitioned import PlacedModel  # noqa: E402
from hgpart.runtime.step import OptimizerSpec, TrainStep  # noqa: E402
from hgpart.runtime.traffic import measure_traffic  # noqa: E402

from hgpart.frontend import layer_graph_from_keras  # noqa: E402
from hgpart.hypergraph import build_hypergraph  # noqa: E402
from hgpart.placement import Placement  # noqa: E402
from hgpart.profile import analytic_profile  # noqa: E402

tf.config.set_soft_device_placement(False)
B = 8


def mini_vgg(shape: tuple[int, int, int] = (16, 16, 3), classes: int = 10) -> keras.Model:
    L = keras.layers
    x = inp = keras.Input(shape, name="input")
    x = L.Conv2D(6, 3, padding="same", use_bias=False, name="c1")(x)  # a bias before BN has ~0 gradient
    x = L.BatchNormalization(name="bn1")(x)
    x = L.Activation("relu", name="r1")(x)
    x = L.MaxPooling2D(2, name="p1")(x)
    x = L.Conv2D(8, 3, padding="same", activation="relu", name="c2")(x)
    x = L.Dropout(0.0, name="drop")(x)
    x = L.MaxPooling2D(2, name="p2")(x)
    x = L.Flatten(name="flat")(x)
    x = L.Dense(12, activation="relu", name="fc1")(x)
    out = L.Dense(classes, activation="softmax", name="pred")(x)
    return keras.Model(inp, out, name="tvgg")


def branchy() -> keras.Model:
    L = keras.layers
    x = inp = keras.Input((16, 16, 3), name="input")
    x = L.Conv2D(6, 3, padding="same", activation="relu", name="stem")(x)
    y = L.Conv2D(6, 3, padding="same", name="res")(x)
    x = L.Add(name="add")([x, y])
    x = L.AveragePooling2D(2, name="pool")(x)
    a = L.Conv2D(4, 1, activation="relu", name="a")(x)
    b = L.DepthwiseConv2D(3, padding="same", name="dw")(x)
    x = L.Concatenate(name="cat")([a, b])
    x = L.GlobalAveragePooling2D(name="gap")(x)
    out = L.Dense(10, activation="softmax", name="pred")(x)
    return keras.Model(inp, out, name="tbranch")


MODELS = {"vgg": mini_vgg, "branch": branchy}


def make(name: str, seed: int = 0) -> tuple[keras.Model, object]:
    keras.utils.set_random_seed(seed)
    m = MODELS[name]()
    return m, layer_graph_from_keras(m, name=m.name)


def placement(graph, grain: str, parts_fn, k: int = K) -> Placement:
    prof = analytic_profile(graph, B)
    hg = build_hypergraph(graph, prof.work(), batch_size=B, grain=grain)
    parts = np.asarray(parts_fn(hg), dtype=np.int64)
    return Placement.from_vertex_parts(graph, hg, parts, k=k, method="test", work=prof.work())


def layerwise(graph):
    """Whole layers on one part each (round robin over vertex layers), input with the first layer."""
    def fn(hg):
        parts = np.zeros(hg.num_vertices, np.int64)
        layer_part = {ly.name: i % K for i, ly in enumerate(graph.vertex_layers)}
        for b in hg.blocks:
            parts[b.start:b.stop] = layer_part.get(b.layer, 0)
        return parts
    return fn


def data(n: int = B, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 16, 16, 3)).astype(np.float32), rng.integers(0, 10, n).astype(np.int32)


def keras_reference(model: keras.Model, opt: OptimizerSpec, batches, micro: int) -> dict[str, dict[str, np.ndarray]]:
    """Single-device Keras training with the same micro-batching and optimizer."""
    kopt = opt.keras()
    for x, y in batches:
        grads = None
        for xm, ym in zip(np.split(x, micro), np.split(y, micro), strict=True):
            with tf.GradientTape() as tape:
                p = model(xm, training=True)
                loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(ym, p)) / micro
            g = tape.gradient(loss, model.trainable_variables)
            grads = g if grads is None else [a + b for a, b in zip(grads, g, strict=True)]
        kopt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    out = {}
    for layer in model.layers:
        d = {}
        for name in ("kernel", "bias", "gamma", "beta", "moving_mean", "moving_variance"):
            w = getattr(layer, name, None)
            if w is not None and hasattr(w, "numpy"):
                d[name] = w.numpy()
        if d:
            out[layer.name] = d
    return out


def assert_weights_close(got, want, rtol=1e-5):
    assert set(got) == set(want)
    for layer, ws in want.items():
        for name, w in ws.items():
            g = got[layer][name]
            assert g.shape == w.shape, (layer, name)
            err = np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-12)
            assert err < rtol, f"{layer}.{name}: relative error {err:.2e}"


# ------------------------------------------------------------------------------------------ forward
@pytest.mark.parametrize("model", ["vgg", "branch"])
@pytest.mark.parametrize("grain,kind", [("coarse", "random"), ("fine", "random"), ("coarse", "layerwise")])
def test_forward_equals_keras(model, grain, kind):
    m, g = make(model)
    rng = np.random.default_rng(3)
    fn = layerwise(g) if kind == "layerwise" else (lambda hg: rng.integers(0, K, hg.num_vertices))
    pl = placement(g, grain, fn)
    pm = PlacedModel(pl, m, DS.devices)
    x, _ = data()
    np.testing.assert_allclose(pm.predict(x), m(x, training=False).numpy(), atol=1e-5)
    # every weight goes back to its Keras position unchanged
    assert_weights_close(pm.keras_weights(), keras_reference(m, OptimizerSpec(), [], 1), rtol=1e-7)


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 10_000), grain=st.sampled_from(["coarse", "fine"]), model=st.sampled_from(["vgg", "branch"]))
def test_random_placements_forward(seed, grain, model):
    m, g = make(model)
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, K + 1))
    pl = placement(g, grain, lambda hg: rng.integers(0, k, hg.num_vertices), k=k)
    pm = PlacedModel(pl, m, DS.devices)
    x, _ = data(seed=seed)
    np.testing.assert_allclose(pm.predict(x), m(x, training=False).numpy(), atol=1e-5)


# --------------------------------------------------------------------------------------- sync training
@pytest.mark.parametrize("model,grain,opt,micro", [
    ("vgg", "coarse", "adam", 2), ("vgg", "fine", "momentum", 1), ("branch", "fine", "adam", 2),
    ("branch", "coarse", "momentum", 1)])
def test_sync_training_equals_single_device(model, grain, opt, micro):
    m, g = make(model)
    rng = np.random.default_rng(7)
    pl = placement(g, grain, lambda hg: rng.integers(0, K, hg.num_vertices))
    pm = PlacedModel(pl, m, DS.devices)
    spec = OptimizerSpec(opt, lr=1e-2)
    step = TrainStep(pm, spec, batch_size=B, micro_batches=micro)
    batches = [data(seed=s) for s in range(3)]
    for x, y in batches:
        step(x, y)
    want = keras_reference(m, spec, batches, micro)  # trains the Keras model from the same initial weights
    assert_weights_close(pm.keras_weights(), want)


# ------------------------------------------------------------------------------------ collocation, bytes
def test_gradients_and_updates_collocated_with_variables():
    m, g = make("vgg")
    rng = np.random.default_rng(5)
    pl = placement(g, "fine", lambda hg: rng.integers(0, K, hg.num_vertices))
    pm = PlacedModel(pl, m, DS.devices)
    step = TrainStep(pm, OptimizerSpec("adam"), batch_size=B)
    graph = step.concrete.graph
    handle_dev = {}
    for ext, internal in graph.captures:
        handle_dev[internal.op.name] = ext.device
    ops = graph.get_operations()
    grads = [op for op in ops if op.name.startswith("gradients/")]
    assert grads and all(op.device for op in grads), "every gradient op must carry a device"
    fwd = {op.name: op.device for op in ops}
    for op in grads:  # gradient of forward op F sits on F's device
        base = op.name[len("gradients/"):].rsplit("_grad/", 1)[0]
        if base in fwd and fwd[base]:
            assert op.device == fwd[base], (op.name, op.device, fwd[base])
    n_upd = 0
    for op in ops:
        if op.type in ("AssignVariableOp", "AssignSubVariableOp", "AssignAddVariableOp", "ResourceApplyAdam"):
            var_dev = handle_dev.get(op.inputs[0].op.name)
            assert var_dev and tf.DeviceSpec.from_string(op.device) == tf.DeviceSpec.from_string(var_dev), op.name
            n_upd += op.type == "ResourceApplyAdam"
    assert n_upd == len(pm.trainable)  # one fused update of w, m, v per variable
    # the gradient of each variable is produced on that variable's device
    for pv in pm.trainable:
        assert pv.var.device.endswith(pm.devices[pv.part].split("/")[-1].replace("device:", ""))


@pytest.mark.parametrize("grain", ["coarse", "fine"])
def test_measured_bytes_match_prediction(grain):
    m, g = make("branch")
    rng = np.random.default_rng(11)
    pl = placement(g, grain, lambda hg: rng.integers(0, K, hg.num_vertices))
    pm = PlacedModel(pl, m, DS.devices)
    t = measure_traffic(TrainStep(pm, OptimizerSpec("momentum"), batch_size=B))
    pred = pl.recompute_metrics().comm_volume_mib * 2**20
    assert t.forward == pytest.approx(pred, rel=1e-9)
    assert t.backward == pytest.approx(pred - t.input_nets, rel=1e-9)
    assert t.check(pred)["rel_err"] < 1e-9
    assert t.input_nets > 0  # random input placement: input channels cross


def test_layerwise_single_part_moves_nothing():
    m, g = make("vgg")
    pl = placement(g, "coarse", lambda hg: np.zeros(hg.num_vertices), k=1)
    t = measure_traffic(TrainStep(PlacedModel(pl, m, DS.devices), OptimizerSpec(), batch_size=B))
    assert t.forward == t.backward == t.loss == 0


# ------------------------------------------------------------------------------------------- errors
def test_placement_for_another_model_is_refused():
    from hgpart.runtime.train import train

    _, g = make("vgg")
    pl = placement(g, "coarse", lambda hg: np.zeros(hg.num_vertices), k=1)
    other, _ = make("branch")
    with pytest.raises(HgpartError, match="placement is for model"):
        train(pl, keras_model=other, steps=1, batch_size=B, device_set=DS)


def test_placement_for_another_model_names_both_models():
    from hgpart.runtime.train import train

    _, g = make("vgg")
    pl = placement(g, "coarse", lambda hg: np.zeros(hg.num_vertices), k=1)
    other, _ = make("branch")
    with pytest.raises(HgpartError) as exc:
        train(pl, keras_model=other, steps=1, batch_size=B, device_set=DS)
    line = exc.value.line()
    assert "model 'tvgg'" in line and "not 'tbranch'" in line  # the placement's model, then the Keras model's own


@pytest.mark.parametrize(("shape", "classes", "what"), [((32, 32, 3), 10, "[32, 32, 3]"), ((16, 16, 3), 12, "")])
def test_partitioned_model_refuses_a_keras_model_the_placement_is_not_for(shape, classes, what):
    """The placement is for a 32x32 model (a 16x16 one raised IndexError) / a 10-class one (12 built silently)."""
    keras.utils.set_random_seed(0)
    big = mini_vgg(shape, 10)
    pl = placement(layer_graph_from_keras(big, name="tvgg"), "coarse", lambda hg: np.arange(hg.num_vertices) % 2,
                   k=2)
    model = mini_vgg((16, 16, 3), classes)
    with pytest.raises(HgpartError, match="placement is for a model named 'tvgg'") as exc:
        PlacedModel(pl, model, DS.devices)
    assert what in exc.value.line()


def test_too_few_devices():
    m, g = make("vgg")
    pl = placement(g, "coarse", lambda hg: np.arange(hg.num_vertices) % 2, k=2)
    with pytest.raises(HgpartError, match="only 1 devices"):
        PlacedModel(pl, m, DS.devices[:1])
    with pytest.raises(HgpartError, match="logical CPU devices"):
        open_devices("logical", 64)
    with pytest.raises(HgpartError, match="GPUs"):
        open_devices("gpu", 2)
