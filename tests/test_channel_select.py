"""Channel selection in the runtime (``tfops.take_channels`` / ``place_channels``): every way it can run (the
tensor itself, a one-hot product, a gather) gives exactly what a gather gives, forward and backward."""

from __future__ import annotations

import numpy as np
import pytest

from hgpart.kinds import tfops

tf = pytest.importorskip("tensorflow")


def _grad(fn, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    xv = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xv)
        y = fn(xv)
        loss = tf.reduce_sum(y * tf.constant(w))
    return y.numpy(), tape.gradient(loss, xv).numpy()


@pytest.mark.parametrize(("channels", "idx", "how"), [
    (16, np.arange(16), "itself"),
    (16, np.arange(3, 11), "product"),
    (16, np.array([0, 5, 6, 7, 12, 15]), "product"),
    (600, np.arange(0, 600, 2), "gather"),
])
def test_take_channels_equals_a_gather_forward_and_backward(channels: int, idx: np.ndarray, how: str) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4, channels)).astype(np.float32)
    w = rng.standard_normal((2, 3, 4, idx.size)).astype(np.float32)
    if how in ("product", "gather"):  # the case is the branch it names
        assert (channels * idx.size <= tfops.SELECT_BY_MATMUL_MAX) == (how == "product")
    got, got_g = _grad(lambda v: tfops.take_channels(v, idx), x, w)
    want, want_g = _grad(lambda v: tf.gather(v, idx, axis=-1), x, w)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_g, want_g)
    assert got.shape == (2, 3, 4, idx.size)


def test_take_channels_keeps_a_static_shape_in_a_function_and_works_on_dense_inputs() -> None:
    idx = np.array([1, 4, 2])
    fn = tf.function(lambda v: tfops.take_channels(v, idx))
    cf = fn.get_concrete_function(tf.TensorSpec((None, 8, 8, 6), tf.float32))
    assert cf.structured_outputs.shape.as_list() == [None, 8, 8, 3]
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(tfops.take_channels(tf.constant(x), idx).numpy(), x[:, idx])


@pytest.mark.parametrize(("m", "n"), [(5, 12), (40, 600)])
def test_place_channels_puts_each_channel_at_its_position_and_zeros_elsewhere(m: int, n: int) -> None:
    rng = np.random.default_rng(2)
    pos = np.sort(rng.choice(n, m, replace=False))
    x = rng.standard_normal((2, 3, m)).astype(np.float32)
    w = rng.standard_normal((2, 3, n)).astype(np.float32)
    got, got_g = _grad(lambda v: tfops.place_channels(v, pos, n), x, w)
    want = np.zeros((2, 3, n), np.float32)
    want[..., pos] = x
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_g, w[..., pos])
