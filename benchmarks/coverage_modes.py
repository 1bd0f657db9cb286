"""Eager or graph mode: how far apart Keras's and the partitioned forwards are in each, against float64.

Usage::

    python benchmarks/coverage_modes.py EfficientNetV2      # a family of benchmarks/coverage.py

Builds the family's model as ``benchmarks/coverage.py`` does (same seed, calibration, K = 4 coarse placement
folded onto 2 logical devices) and prints the largest difference between every two of: the partitioned
forward in a ``tf.function`` and eagerly, Keras's forward in a ``tf.function`` and eagerly, and Keras in
float64, each relative to the largest float32 Keras logit. It shows which part of a coverage mismatch is the
execution mode (Grappler's graph rewrites change float32 rounding) rather than the partitioning.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import coverage  # noqa: E402 - the sibling benchmark script, not the coverage.py package
import coverage_precision  # noqa: E402


def _keras_eager(model: Any, x: np.ndarray) -> np.ndarray:
    import keras

    last = model.layers[-1]
    act = getattr(last, "activation", None)
    if act is keras.activations.softmax:
        last.activation = keras.activations.linear
    try:
        return np.asarray(model(x, training=False))
    finally:
        if act is not None:
            last.activation = act


def forwards(family: str) -> dict[str, np.ndarray]:
    """The logits of the five forwards, by name."""
    import keras
    import tensorflow as tf
    from hgpart.runtime.devices import open_devices

    ds = open_devices("logical", 2, inter_op=2)
    from hgpart.runtime.partitioned import PlacedModel

    from hgpart.models import load_keras_model

    app, size = coverage.FAMILIES[family]
    pl = coverage_precision.folded_placement(app, size)
    keras.utils.set_random_seed(0)
    model = load_keras_model(f"keras:{app}", input_shape=(size, size, 3), num_classes=10)
    x = np.random.default_rng(0).normal(size=(coverage.BATCH, size, size, 3)).astype(np.float32)
    coverage._calibrate(model, x.shape[1:])
    pm = PlacedModel(pl, model, ds.devices)
    out = {"partitioned graph": coverage._logits(pm, x),
           "partitioned eager": np.asarray(pm.forward(tf.constant(x), training=False)),
           "keras graph": coverage._keras_logits(model, x), "keras eager": _keras_eager(model, x)}
    keras.config.set_floatx("float64")
    keras.config.set_dtype_policy("float64")
    model64 = load_keras_model(f"keras:{app}", input_shape=(size, size, 3), num_classes=10)
    model64.set_weights([np.asarray(w, np.float64) for w in model.get_weights()])
    out["keras float64"] = _keras_eager(model64, x.astype(np.float64))
    return out


def main(argv: list[str]) -> None:
    family = argv[0] if argv else "EfficientNetV2"
    out = forwards(family)
    scale = float(np.max(np.abs(out["keras graph"])))
    print(f"{family}: largest |logit| {scale:.4g}; max difference / largest |logit|")
    names = list(out)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            print(f"  {a:>18} vs {b:<18} {float(np.max(np.abs(out[a] - out[b]))) / scale:.2e}")


if __name__ == "__main__":
    main(sys.argv[1:])
