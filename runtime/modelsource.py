"""The Keras model a placement was compiled for, rebuilt with a fixed seed and checked against the placement.

Usage::

    from hgpart.runtime.modelsource import build_for_placement
    model = build_for_placement(placement, seed=0)   # a Keras model whose layer graph is the placement's
"""

from __future__ import annotations

from typing import Any

from hgpart.runtime.partitioned import check_keras_model

from hgpart.placement import Placement

__all__ = ["build_for_placement"]


def build_for_placement(pl: Placement, *, seed: int = 0) -> Any:
    """The Keras model of the placement's model name with a fixed seed, checked against the placement."""
    import keras

    from hgpart.models import load_keras_model

    keras.utils.set_random_seed(seed)
    g = pl.graph
    model = load_keras_model(g.name, input_shape=tuple(g.input_shape), num_classes=g.num_classes or None)
    check_keras_model(pl, model, where="placement vs Keras model")
    return model
