"""Data-parallel baselines (hgpart.runtime.dataparallel): they train, sync DP equals one device, bytes are right."""

from __future__ import annotations

import numpy as np
import pytest
from hgpart.runtime.dataparallel import DP_STRATEGIES, greedy_assign, make_strategy, ring_bytes, run_slots
from hgpart.runtime.devices import open_devices
from hgpart.runtime.step import OptimizerSpec

SHAPE = (16, 16, 3)


def _model(seed: int = 0):  # noqa: ANN202 - keras.Model
    import keras

    from hgpart.models import load_keras_model

    keras.utils.set_random_seed(seed)
    return load_keras_model("minivgg", input_shape=SHAPE, num_classes=10)


def _batch(n: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, *SHAPE)).astype(np.float32), (np.arange(n) % 10).astype(np.int32)


def test_greedy_assign_balances_by_size() -> None:
    # largest first, each to the least-loaded device (thesis §5.2.3), not round-robin
    sizes = [3, 4, 2, 3]
    dev = greedy_assign(sizes, 2)
    assert dev == [1, 0, 0, 1]
    loads = [sum(s for s, d in zip(sizes, dev, strict=True) if d == p) for p in range(2)]
    assert loads == [6, 6]
    assert greedy_assign([10, 9, 8, 1, 1, 1], 2) == [0, 1, 1, 0, 0, 0]
    assert greedy_assign([5, 5, 5], 3) == [0, 1, 2]


@pytest.mark.parametrize("name", DP_STRATEGIES)
def test_strategy_lowers_the_loss_on_a_fixed_batch(name: str) -> None:
    ds = open_devices("logical", 2)
    x, y = _batch(16)
    s = make_strategy(name, _model(), ds, OptimizerSpec("adam", 3e-3), batch_size=16)
    acc0, loss0 = s.evaluate(x, y)
    per = 16 // s.task_batch
    xs = np.stack([x[i * s.task_batch:(i + 1) * s.task_batch] for i in range(per)] * 6)
    ys = np.stack([y[i * s.task_batch:(i + 1) * s.task_batch] for i in range(per)] * 6)
    rows = run_slots(s.slot_fns, xs, ys)
    assert len(rows) == len(xs)
    assert {r.slot for r in rows} <= set(range(len(s.slot_fns)))
    _, loss1 = s.evaluate(x, y)
    assert loss1 < loss0 - 0.05, (name, loss0, loss1)


def _keras_sgd_step(x: np.ndarray, y: np.ndarray, lr: float) -> list[np.ndarray]:
    import tensorflow as tf

    model = _model()
    with tf.device("/CPU:0"), tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, model(x, training=True)))
    grads = tape.gradient(loss, model.trainable_variables)
    return [v.numpy() - lr * g.numpy() for v, g in zip(model.trainable_variables, grads, strict=True)]


@pytest.mark.parametrize("name,k", [("single", 1), ("sync-dp", 4), ("sync-dp-mirrored", 4)])
def test_sync_dp_equals_single_device_sgd_step(name: str, k: int) -> None:
    ds = open_devices("logical", 4)
    x, y = _batch(16)
    lr = 0.1
    want = _keras_sgd_step(x, y, lr)
    # the first momentum-SGD step is plain SGD: m = -lr g, w += m
    s = make_strategy(name, _model(), ds, OptimizerSpec("momentum", lr), batch_size=16)
    s.slot_fns[0](x, y)
    reps = s.replica_weights()
    assert len(reps) == k
    for rep in reps:
        for got, exp in zip(rep, want, strict=True):
            np.testing.assert_allclose(got, exp, rtol=1e-4, atol=2e-5)


def test_sync_dp_moves_the_ring_all_reduce_volume() -> None:
    ds = open_devices("logical", 4)
    s = make_strategy("sync-dp", _model(), ds, OptimizerSpec("adam", 1e-3), batch_size=16)
    expected = ring_bytes(s.params, 4)
    # plus the K-1 scalar losses gathered on the host
    assert expected <= s.comm_bytes_per_step <= expected + 4 * 3
    assert s.bytes_source == "graph"


def test_parameter_servers_pull_and_push_what_is_remote() -> None:
    ds = open_devices("logical", 2)
    one = make_strategy("async-dp-1ps", _model(), ds, OptimizerSpec("adam", 1e-3), batch_size=16)
    dist = make_strategy("async-dp-dps", _model(), ds, OptimizerSpec("adam", 1e-3), batch_size=16)
    p = one.params * 4
    # one PS on device 0: worker 1 pulls and pushes every parameter, worker 0 nothing
    assert one.comm_bytes_per_step == pytest.approx(2 * p)
    # distributed PS: each worker pulls and pushes the remote half; greedy halves are within one tensor
    assert dist.comm_bytes_per_step == pytest.approx(2 * p)
    assert len(one.slot_fns) == len(dist.slot_fns) == 2 and one.task_batch == 8


def test_batch_not_divisible_is_a_clear_error() -> None:
    from hgpart.errors import HgpartError

    ds = open_devices("logical", 4)
    with pytest.raises(HgpartError, match="divisible"):
        make_strategy("sync-dp", _model(), ds, OptimizerSpec("adam", 1e-3), batch_size=6)
