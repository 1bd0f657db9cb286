"""TensorFlow ops shared by several kinds' runtime builders, and the fused Adam update that the runtime's
per-device optimizers run and the profiler times (TensorFlow is imported inside each function)."""

from __future__ import annotations

from typing import Any

from hgpart.errors import HgpartError

__all__ = ["conv", "depthwise", "bias_act", "activation", "fused_adam", "ACTIVATIONS"]

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


def fused_adam(var: Any, m: Any, v: Any, grad: Any, *, t: Any, lr: float, beta_1: float, beta_2: float,
               epsilon: float) -> Any:
    """Keras 3's Adam update of ``var`` (slots ``m``, ``v``) by ``grad`` at 1-based step ``t``, as one fused
    ``ResourceApplyAdam`` kernel with ``use_locking`` (see :func:`hgpart.runtime.step.apply_update` for why)."""
    import tensorflow as tf

    dt = grad.dtype
    t = tf.cast(t, dt)
    return tf.raw_ops.ResourceApplyAdam(var=var.handle, m=m.handle, v=v.handle, beta1_power=tf.pow(beta_1, t),
                                        beta2_power=tf.pow(beta_2, t), lr=tf.constant(lr, dt),
                                        beta1=tf.constant(beta_1, dt), beta2=tf.constant(beta_2, dt),
                                        epsilon=tf.constant(epsilon, dt), grad=grad, use_locking=True)
