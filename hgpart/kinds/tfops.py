"""TensorFlow ops shared by several kinds' runtime builders, and the fused Adam update that the runtime's
per-device optimizers run and the profiler times (TensorFlow is imported inside each function)."""

from __future__ import annotations

from typing import Any

import numpy as np

from hgpart.errors import HgpartError

__all__ = ["conv", "depthwise", "bias_act", "activation", "fused_adam", "adam_powers", "take_channels",
           "place_channels", "ACTIVATIONS", "SELECT_BY_MATMUL_MAX"]

#: activation names the runtime executes (``softmax`` only as the model's last op)
ACTIVATIONS = ("linear", "relu", "relu6", "sigmoid", "tanh", "softplus", "softsign", "swish", "silu", "gelu",
               "hard_sigmoid", "hard_silu", "hard_swish", "leaky_relu", "elu", "selu", "exponential", "mish",
               "softmax")


def conv(x: Any, kern: Any, cfg: dict[str, Any]) -> Any:
    import tensorflow as tf

    return tf.nn.conv2d(x, kern, strides=[1, *cfg.get("strides", [1, 1]), 1], padding=cfg["padding"].upper(),
                        dilations=[1, *cfg.get("dilation_rate", [1, 1]), 1])


def depthwise(x: Any, kern: Any, cfg: dict[str, Any]) -> Any:
    import tensorflow as tf

    return tf.nn.depthwise_conv2d(x, kern, strides=[1, *cfg.get("strides", [1, 1]), 1],
                                  padding=cfg["padding"].upper(), dilations=cfg.get("dilation_rate", [1, 1]))


def bias_act(y: Any, bias: Any, cfg: dict[str, Any]) -> Any:
    import tensorflow as tf

    if bias is not None:
        y = tf.nn.bias_add(y, bias)
    act = cfg.get("activation", "linear")
    return y if act == "softmax" else activation(y, act, cfg, final=False)


def _relu(y: Any, cfg: dict[str, Any]) -> Any:
    import tensorflow as tf

    slope = float(cfg.get("negative_slope", 0.0) or 0.0)
    mv = cfg.get("max_value")
    thr = float(cfg.get("threshold", 0.0) or 0.0)
    if slope == 0.0 and mv is None and thr == 0.0:
        return tf.nn.relu(y)
    out = tf.where(y >= thr, y, slope * (y - thr))
    return out if mv is None else tf.minimum(out, float(mv))


def _simple() -> dict[str, Any]:
    import tensorflow as tf

    def hard_sigmoid(v: Any) -> Any:  # Keras 3: relu6(x + 3) / 6
        return tf.nn.relu6(v + 3.0) / 6.0

    return {"sigmoid": tf.nn.sigmoid, "tanh": tf.nn.tanh, "relu6": tf.nn.relu6, "swish": tf.nn.silu,
            "silu": tf.nn.silu, "gelu": lambda v: tf.nn.gelu(v, approximate=False), "softplus": tf.nn.softplus,
            "softsign": tf.nn.softsign, "selu": tf.nn.selu, "exponential": tf.exp,
            "mish": lambda v: v * tf.nn.tanh(tf.nn.softplus(v)), "hard_sigmoid": hard_sigmoid,
            "hard_silu": lambda v: v * hard_sigmoid(v), "hard_swish": lambda v: v * hard_sigmoid(v)}


def activation(y: Any, act: str | None, cfg: dict[str, Any], *, final: bool) -> Any:
    """Element-wise activations; a final softmax is left to the loss (logits are what is returned)."""
    import tensorflow as tf

    if act in ("linear", None):
        return y
    if act == "softmax":
        if final:
            return y
        raise HgpartError("softmax inside the model", where="runtime", fix="use softmax only as the last layer")
    if act == "relu":
        return _relu(y, cfg)
    simple = _simple()
    if act in simple:
        return simple[act](y)
    if act == "leaky_relu":
        return tf.nn.leaky_relu(y, alpha=float(cfg.get("negative_slope", 0.2)))
    if act == "elu":
        alpha = float(cfg.get("alpha", 1.0))
        return tf.where(y > 0, y, alpha * (tf.exp(y) - 1.0))
    raise HgpartError(f"activation {act!r} is not supported by the runtime", where="runtime",
                      fix="use one of " + ", ".join(ACTIVATIONS))


def adam_powers(t: Any, beta_1: float, beta_2: float, dtype: Any) -> tuple[Any, Any]:
    """``beta_1 ** t`` and ``beta_2 ** t``, Adam's bias corrections at 1-based step ``t``, where it is called: one
    pair serves every variable updated at that step on that device (:func:`fused_adam`'s ``powers``)."""
    import tensorflow as tf

    t = tf.cast(t, dtype)
    return tf.pow(beta_1, t), tf.pow(beta_2, t)


def fused_adam(var: Any, m: Any, v: Any, grad: Any, *, t: Any, lr: float, beta_1: float, beta_2: float,
               epsilon: float, powers: tuple[Any, Any] | None = None) -> Any:
    """Keras 3's Adam update of ``var`` (slots ``m``, ``v``) by ``grad`` at 1-based step ``t``, as one fused
    ``ResourceApplyAdam`` kernel with ``use_locking`` (see :func:`hgpart.runtime.step.apply_update` for why).
    ``powers``: :func:`adam_powers` of ``t``, made once for the variables of one device's update (``t`` is then
    not read); without, they are made here."""
    import tensorflow as tf

    dt = grad.dtype
    b1p, b2p = adam_powers(t, beta_1, beta_2, dt) if powers is None else powers
    return tf.raw_ops.ResourceApplyAdam(var=var.handle, m=m.handle, v=v.handle, beta1_power=b1p,
                                        beta2_power=b2p, lr=tf.constant(lr, dt),
                                        beta1=tf.constant(beta_1, dt), beta2=tf.constant(beta_2, dt),
                                        epsilon=tf.constant(epsilon, dt), grad=grad, use_locking=True)


#: channel selection by a one-hot matrix product while the product is at most this many source x result channels
#: (``benchmarks/channel_select.py`` measures where it beats a gather: its cost grows with both counts, a gather's
#: with the result's only)
SELECT_BY_MATMUL_MAX = 256 * 256


def _one_hot_product(x: Any, src: np.ndarray, dst: np.ndarray, m: int) -> Any:
    """``x`` times the 0/1 matrix with ones at (``src[i]``, ``dst[i]``) (x's channels x ``m``), over the last axis.

    Exact for finite values: each result is one input times 1.0 plus zeros. A non-finite input channel spreads to
    every result channel (0 x inf is NaN), where a gather would drop it if it is not selected."""
    import tensorflow as tf

    c = int(x.shape[-1])
    sel = np.zeros((c, m), dtype=np.float32)
    sel[src, dst] = 1.0
    flat = tf.reshape(x, [-1, c]) @ tf.constant(sel, dtype=x.dtype)
    lead = x.shape[:-1]
    shape = [*lead.as_list(), m] if lead.is_fully_defined() else tf.concat([tf.shape(x)[:-1], [m]], 0)
    return tf.reshape(flat, shape)


def take_channels(x: Any, idx: np.ndarray) -> Any:
    """``x[..., idx]`` for a static index array (unique entries): ``x`` itself when ``idx`` is every channel in
    order, else a one-hot matrix product up to :data:`SELECT_BY_MATMUL_MAX`, else a gather.

    Why: a gather along the last axis copies, and its gradient scatters, one element at a time (TensorFlow
    transposes the axis to the front and back for the gradient's segment sum), so the fine grain's channel
    selections cost more than the convolutions beside them; a product runs at matrix speed both ways. A slice
    of a contiguous run is no better: its gradient (``StridedSliceGrad``) is slower than a gather's."""
    import tensorflow as tf

    idx = np.asarray(idx, dtype=np.int64)
    c = int(x.shape[-1])
    if np.array_equal(idx, np.arange(c)):
        return x
    if c * idx.size <= SELECT_BY_MATMUL_MAX:
        return _one_hot_product(x, idx, np.arange(idx.size), idx.size)
    return tf.gather(x, idx, axis=-1)


def place_channels(x: Any, pos: np.ndarray, n: int) -> Any:
    """A tensor of ``n`` channels holding channel ``i`` of ``x`` at ``pos[i]`` (unique) and zeros elsewhere: a
    one-hot product while ``x``'s channels x ``n`` is at most :data:`SELECT_BY_MATMUL_MAX`, else a gather from
    ``x`` with one zero channel appended (see :func:`take_channels` for why)."""
    import tensorflow as tf

    pos = np.asarray(pos, dtype=np.int64)
    m = int(x.shape[-1])
    if m * n <= SELECT_BY_MATMUL_MAX:
        return _one_hot_product(x, np.arange(m), pos, n)
    where = np.full(n, m)
    where[pos] = np.arange(m)
    return tf.gather(tf.concat([x, tf.zeros_like(x[..., :1])], axis=-1), where, axis=-1)
