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


def squeeze_excite(drop: float = 0.2) -> keras.Model:
    """EfficientNet's preprocessing and SE block: Rescaling, Normalization, swish, GAP keepdims, Reshape,
    a broadcast Multiply gate, per-sample dropout (stochastic depth)."""
    x = inp = keras.Input((8, 8, 3), name="input")
    x = L.Rescaling(1.0 / 255.0, offset=0.1, name="rescale")(x)
    x = L.Normalization(axis=-1, mean=[0.4, 0.5, 0.6], variance=[0.2, 0.3, 0.25], name="norm")(x)
    x = L.Conv2D(6, 3, padding="same", activation="swish", name="c1")(x)
    s = L.GlobalAveragePooling2D(name="se_squeeze")(x)
    s = L.Reshape((1, 1, 6), name="se_reshape")(s)
    s = L.Conv2D(2, 1, activation="silu", name="se_reduce")(s)
    s = L.Conv2D(6, 1, activation="sigmoid", name="se_expand")(s)
    x = L.Multiply(name="se_excite")([x, s])
    x = L.Dropout(drop, noise_shape=(None, 1, 1, 1), name="drop")(x)
    x = L.Activation("gelu", name="gelu")(x)
    x = L.GlobalAveragePooling2D(keepdims=True, name="gap")(x)
    x = L.Conv2D(5, 1, name="logits")(x)
    out = L.Reshape((5,), name="flat")(x)
    return keras.Model(inp, out, name="squeeze_excite")


def hard_ops() -> keras.Model:
    """MobileNetV3's hard sigmoid written with operators (x + 3, * 1/6), hard_swish, hard_sigmoid."""
    x = inp = keras.Input((8, 8, 3), name="input")
    x = L.Conv2D(4, 3, padding="same", name="c1")(x)
    g = L.ReLU(6.0, name="relu6")(x + 3.0) * (1.0 / 6.0)
    x = L.Multiply(name="gate")([x, g])
    x = L.Activation("hard_swish", name="hswish")(x)
    x = L.Activation("hard_sigmoid", name="hsig")(x - 0.5)
    x = L.GlobalAveragePooling2D(name="gap")(x)
    out = L.Dense(5, name="pred")(x)
    return keras.Model(inp, out, name="hard_ops")


def separable() -> keras.Model:
    """SeparableConv2D (depthwise + pointwise parts), Cropping2D, UpSampling2D, Conv2DTranspose, Permute."""
    x = inp = keras.Input((8, 8, 3), name="input")
    x = L.SeparableConv2D(6, 3, padding="same", depth_multiplier=2, activation="relu", name="sep")(x)
    x = L.Cropping2D(((1, 0), (0, 1)), name="crop")(x)
    x = L.Permute((2, 1, 3), name="perm")(x)
    x = L.UpSampling2D(2, name="up")(x)
    x = L.Conv2DTranspose(4, 3, strides=2, padding="same", name="deconv")(x)
    x = L.UpSampling2D(2, interpolation="bilinear", name="up_bilinear")(x)
    x = L.Conv2DTranspose(3, 2, padding="valid", name="deconv_valid")(x)
    x = L.GlobalMaxPooling2D(name="gmp")(x)
    out = L.Dense(5, name="pred")(x)
    return keras.Model(inp, out, name="separable")


def inception_resnet_merge() -> keras.Model:
    """InceptionResNetV2's residual merge layer (x + r * scale)."""
    from keras.src.applications.inception_resnet_v2 import CustomScaleLayer

    x = inp = keras.Input((8, 8, 3), name="input")
    x = L.Conv2D(4, 3, padding="same", name="c1")(x)
    r = L.Conv2D(4, 1, name="r")(x)
    x = CustomScaleLayer(0.17, name="scale")([x, r])
    x = L.GlobalAveragePooling2D(name="gap")(x)
    out = L.Dense(5, name="pred")(x)
    return keras.Model(inp, out, name="inception_resnet_merge")


EXAMPLES.update({"squeeze_excite": squeeze_excite, "hard_ops": hard_ops, "separable": separable,
                 "inception_resnet_merge": inception_resnet_merge})


def layer_norm() -> keras.Model:
    """LayerNormalization over channels (statistics cross devices), gelu, as in ConvNeXt."""
    x = inp = keras.Input((8, 8, 3), name="input")
    x = L.Conv2D(6, 3, padding="same", name="c1")(x)
    x = L.LayerNormalization(epsilon=1e-6, name="ln")(x)
    x = L.Activation("gelu", name="gelu")(x)
    x = L.Conv2D(4, 1, name="c2")(x)
    x = L.GlobalAveragePooling2D(name="gap")(x)
    out = L.Dense(5, name="pred")(x)
    return keras.Model(inp, out, name="layer_norm")


EXAMPLES["layer_norm"] = layer_norm


def convnext_block() -> keras.Model:
    """ConvNeXt's pieces: a nested Sequential stem, a depthwise (groups = C) and a grouped Conv2D, Dense on an
    image, LayerScale, a residual ``x + y`` written with the operator."""
    from keras.src.applications.convnext import LayerScale

    x = inp = keras.Input((8, 8, 3), name="input")
    stem = keras.Sequential([L.Conv2D(8, 2, strides=2, name="stem_conv"),
                             L.LayerNormalization(epsilon=1e-6, name="stem_ln")], name="stem")
    x = stem(x)
    y = L.Conv2D(8, 3, padding="same", groups=8, name="dw")(x)
    y = L.Conv2D(8, 3, padding="same", groups=2, name="grouped")(y)
    y = L.Dense(12, name="pw1")(y)
    y = L.Activation("gelu", name="gelu")(y)
    y = L.Dense(8, name="pw2")(y)
    y = LayerScale(0.5, 8, name="scale")(y)
    x = x + y
    x = L.GlobalAveragePooling2D(name="gap")(x)
    out = L.Dense(5, name="pred")(x)
    return keras.Model(inp, out, name="convnext_block")


EXAMPLES["convnext_block"] = convnext_block
