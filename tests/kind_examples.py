"""Small Keras models that together use every registered layer kind (the registry walk's inputs).

Each builder returns a functional model on an 8 x 8 x 3 input; ``EXAMPLES`` names them. A kind added to the
registry without an example here fails ``test_every_kind_has_an_example``.
"""

from __future__ import annotations

from collections.abc import Callable

import keras

L = keras.layers


def core() -> keras.Model:
    """Conv, BN, activations, pools, depthwise, Add, Concatenate, padding, dropout, Flatten, Dense."""
    x = inp = keras.Input((8, 8, 3), name="input")
    x = L.Conv2D(6, 3, padding="same", use_bias=False, name="c1")(x)
    x = L.BatchNormalization(name="bn")(x)
    x = L.ReLU(6.0, name="relu6")(x)
    y = L.DepthwiseConv2D(3, padding="same", depth_multiplier=1, name="dw")(x)
    x = L.Add(name="add")([x, y])
    x = L.ZeroPadding2D(1, name="pad")(x)
    x = L.MaxPooling2D(2, name="mp")(x)
    a = L.Conv2D(4, 1, activation="relu", name="a")(x)
    b = L.AveragePooling2D(3, strides=1, padding="same", name="ap")(x)
    x = L.Concatenate(name="cat")([a, b])
    x = L.LeakyReLU(0.1, name="leaky")(x)
    g = L.GlobalMaxPooling2D(name="gmp")(x)
    x = L.GlobalAveragePooling2D(name="gap")(x)
    x = L.Add(name="add_pools")([x, g])
    x = L.Dropout(0.0, name="drop")(x)
    x = L.Dense(8, activation="elu", name="fc")(x)
    out = L.Dense(5, activation="softmax", name="pred")(x)
    return keras.Model(inp, out, name="core")


def flat() -> keras.Model:
    """Flatten between a conv and Dense layers, ELU and Softmax layers."""
    x = inp = keras.Input((8, 8, 3), name="input")
    x = L.Conv2D(4, 3, strides=2, padding="same", name="c1")(x)
    x = L.ELU(name="elu")(x)
    x = L.Flatten(name="flat")(x)
    x = L.Dense(5, name="fc")(x)
    out = L.Softmax(name="softmax")(x)
    return keras.Model(inp, out, name="flat")


def merges() -> keras.Model:
    """Subtract, Average, Maximum, Minimum and Multiply of same-shape maps."""
    x = inp = keras.Input((8, 8, 3), name="input")
    a = L.Conv2D(4, 3, padding="same", name="a")(x)
    b = L.Conv2D(4, 1, name="b")(x)
    s = L.Subtract(name="sub")([a, b])
    m = L.Average(name="avg")([a, b, s])
    hi = L.Maximum(name="max")([a, m])
    lo = L.Minimum(name="min")([b, m])
    x = L.Multiply(name="mul")([hi, lo])
    x = L.GlobalAveragePooling2D(name="gap")(x)
    out = L.Dense(5, name="pred")(x)
    return keras.Model(inp, out, name="merges")


EXAMPLES: dict[str, Callable[[], keras.Model]] = {"core": core, "flat": flat, "merges": merges}
