"""Built-in model zoo: Keras 3 functional models built from layers, no downloads.

Usage::

    from hgpart.zoo import build_model, ZOO
    model = build_model("vgg16", input_shape=(224, 224, 3), num_classes=1000)

Every builder takes ``input_shape`` (H, W, C) and ``num_classes`` so the same
architecture can be studied at 224x224 (the thesis setting) and at 32x32 (fast
tests). Layer names are fixed (VGG names follow ``keras.applications``), so a
profile or placement made for one build matches the next build exactly.
All convolutions use ``padding="same"`` (pools too where needed), so every
model works down to 32x32 inputs without ZeroPadding layers.
The two small models are for tests and the quickstart: ``minivgg`` (six convs)
and ``minires`` (a branching net with both Add and Concatenate).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hgpart.errors import HgpartError

__all__ = ["ZooEntry", "ZOO", "build_model", "zoo_names"]


@dataclass(frozen=True)
class ZooEntry:
    """One zoo model: its builder and default input shape / class count."""

    builder: Callable[..., Any]
    input_shape: tuple[int, int, int]
    num_classes: int
    summary: str


def _keras() -> Any:
    import keras

    return keras


def _vgg(cfg: list[list[int]], input_shape: tuple[int, ...], num_classes: int, name: str) -> Any:
    keras = _keras()
    L = keras.layers
    x = inp = keras.Input(shape=input_shape, name="input")
    for b, widths in enumerate(cfg, start=1):
        for i, w in enumerate(widths, start=1):
            x = L.Conv2D(w, 3, padding="same", activation="relu", name=f"block{b}_conv{i}")(x)
        x = L.MaxPooling2D(2, strides=2, padding="same", name=f"block{b}_pool")(x)
    x = L.Flatten(name="flatten")(x)
    x = L.Dense(4096, activation="relu", name="fc1")(x)
    x = L.Dense(4096, activation="relu", name="fc2")(x)
    out = L.Dense(num_classes, activation="softmax", name="predictions")(x)
    return keras.Model(inp, out, name=name)


def vgg11(input_shape: tuple[int, ...] = (224, 224, 3), num_classes: int = 1000) -> Any:
    """VGG-A (8 convs + 3 dense)."""
    return _vgg([[64], [128], [256, 256], [512, 512], [512, 512]], input_shape, num_classes, "vgg11")


def vgg16(input_shape: tuple[int, ...] = (224, 224, 3), num_classes: int = 1000) -> Any:
    """VGG-D (13 convs + 3 dense), layer names as keras.applications.VGG16."""
    return _vgg([[64, 64], [128, 128], [256] * 3, [512] * 3, [512] * 3], input_shape, num_classes, "vgg16")


def vgg19(input_shape: tuple[int, ...] = (224, 224, 3), num_classes: int = 1000) -> Any:
    """VGG-E (16 convs + 3 dense)."""
    return _vgg([[64, 64], [128, 128], [256] * 4, [512] * 4, [512] * 4], input_shape, num_classes, "vgg19")


def lenet5(input_shape: tuple[int, ...] = (32, 32, 1), num_classes: int = 10) -> Any:
    """LeNet-5 (two 5x5 convs, three dense); works at 32x32 and 28x28."""
    keras = _keras()
    L = keras.layers
    x = inp = keras.Input(shape=input_shape, name="input")
    x = L.Conv2D(6, 5, activation="relu", name="conv1")(x)
    x = L.MaxPooling2D(2, name="pool1")(x)
    x = L.Conv2D(16, 5, activation="relu", name="conv2")(x)
    x = L.MaxPooling2D(2, name="pool2")(x)
    x = L.Flatten(name="flatten")(x)
    x = L.Dense(120, activation="relu", name="fc1")(x)
    x = L.Dense(84, activation="relu", name="fc2")(x)
    out = L.Dense(num_classes, activation="softmax", name="predictions")(x)
    return keras.Model(inp, out, name="lenet5")


def alexnet(input_shape: tuple[int, ...] = (224, 224, 3), num_classes: int = 1000) -> Any:
    """AlexNet (single-tower, 5 convs + 3 dense, dropout), 'same' padding so 32x32 works."""
    keras = _keras()
    L = keras.layers
    x = inp = keras.Input(shape=input_shape, name="input")
    x = L.Conv2D(96, 11, strides=4, padding="same", activation="relu", name="conv1")(x)
    x = L.MaxPooling2D(3, strides=2, padding="same", name="pool1")(x)
    x = L.Conv2D(256, 5, padding="same", activation="relu", name="conv2")(x)
    x = L.MaxPooling2D(3, strides=2, padding="same", name="pool2")(x)
    x = L.Conv2D(384, 3, padding="same", activation="relu", name="conv3")(x)
    x = L.Conv2D(384, 3, padding="same", activation="relu", name="conv4")(x)
    x = L.Conv2D(256, 3, padding="same", activation="relu", name="conv5")(x)
    x = L.MaxPooling2D(3, strides=2, padding="same", name="pool5")(x)
    x = L.Flatten(name="flatten")(x)
    x = L.Dense(4096, activation="relu", name="fc1")(x)
    x = L.Dropout(0.5, name="drop1")(x)
    x = L.Dense(4096, activation="relu", name="fc2")(x)
    x = L.Dropout(0.5, name="drop2")(x)
    out = L.Dense(num_classes, activation="softmax", name="predictions")(x)
    return keras.Model(inp, out, name="alexnet")


def _conv_bn(x: Any, filters: int, kernel: int, stride: int, name: str, relu: bool = True) -> Any:
    L = _keras().layers
    x = L.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False, name=f"{name}_conv")(x)
    x = L.BatchNormalization(epsilon=1.001e-5, name=f"{name}_bn")(x)
    if relu:
        x = L.Activation("relu", name=f"{name}_relu")(x)
    return x


def _stem(input_shape: tuple[int, ...]) -> tuple[Any, Any]:
    keras = _keras()
    x = inp = keras.Input(shape=input_shape, name="input")
    x = _conv_bn(x, 64, 7, 2, "conv1")
    x = keras.layers.MaxPooling2D(3, strides=2, padding="same", name="pool1")(x)
    return inp, x


def _head(inp: Any, x: Any, num_classes: int, name: str) -> Any:
    keras = _keras()
    x = keras.layers.GlobalAveragePooling2D(name="avg_pool")(x)
    out = keras.layers.Dense(num_classes, activation="softmax", name="predictions")(x)
    return keras.Model(inp, out, name=name)


def resnet18(input_shape: tuple[int, ...] = (224, 224, 3), num_classes: int = 1000) -> Any:
    """ResNet-18: basic blocks [2, 2, 2, 2], 1x1 projection shortcuts where the shape changes."""
    L = _keras().layers
    inp, x = _stem(input_shape)
    in_ch = 64
    for s, width in enumerate([64, 128, 256, 512], start=2):
        for b in range(1, 3):
            stride = 2 if (b == 1 and s > 2) else 1
            pre = f"conv{s}_block{b}"
            y = _conv_bn(x, width, 3, stride, f"{pre}_1")
            y = _conv_bn(y, width, 3, 1, f"{pre}_2", relu=False)
            if stride != 1 or in_ch != width:
                x = _conv_bn(x, width, 1, stride, f"{pre}_0", relu=False)
            x = L.Add(name=f"{pre}_add")([x, y])
            x = L.Activation("relu", name=f"{pre}_out")(x)
            in_ch = width
    return _head(inp, x, num_classes, "resnet18")


def resnet50(input_shape: tuple[int, ...] = (224, 224, 3), num_classes: int = 1000) -> Any:
    """ResNet-50: bottleneck blocks [3, 4, 6, 3] (keras.applications naming, 'same' padding)."""
    L = _keras().layers
    inp, x = _stem(input_shape)
    for s, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)], start=2):
        for b in range(1, blocks + 1):
            stride = 2 if (b == 1 and s > 2) else 1
            pre = f"conv{s}_block{b}"
            y = _conv_bn(x, width, 1, stride, f"{pre}_1")
            y = _conv_bn(y, width, 3, 1, f"{pre}_2")
            y = _conv_bn(y, 4 * width, 1, 1, f"{pre}_3", relu=False)
            if b == 1:
                x = _conv_bn(x, 4 * width, 1, stride, f"{pre}_0", relu=False)
            x = L.Add(name=f"{pre}_add")([x, y])
            x = L.Activation("relu", name=f"{pre}_out")(x)
    return _head(inp, x, num_classes, "resnet50")


def minivgg(input_shape: tuple[int, ...] = (32, 32, 3), num_classes: int = 10) -> Any:
    """A small VGG-style net (6 convs, 2 dense) for tests and the quickstart."""
    keras = _keras()
    L = keras.layers
    x = inp = keras.Input(shape=input_shape, name="input")
    for b, w in enumerate([16, 32, 64], start=1):
        x = L.Conv2D(w, 3, padding="same", activation="relu", name=f"block{b}_conv1")(x)
        x = L.Conv2D(w, 3, padding="same", activation="relu", name=f"block{b}_conv2")(x)
        x = L.MaxPooling2D(2, padding="same", name=f"block{b}_pool")(x)
    x = L.Flatten(name="flatten")(x)
    x = L.Dense(128, activation="relu", name="fc1")(x)
    out = L.Dense(num_classes, activation="softmax", name="predictions")(x)
    return keras.Model(inp, out, name="minivgg")


def minires(input_shape: tuple[int, ...] = (32, 32, 3), num_classes: int = 10) -> Any:
    """A small branching net: a residual Add block and an Inception-style Concatenate block."""
    keras = _keras()
    L = keras.layers
    x = inp = keras.Input(shape=input_shape, name="input")
    x = L.Conv2D(16, 3, padding="same", use_bias=False, name="stem_conv")(x)
    x = L.BatchNormalization(name="stem_bn")(x)
    x = L.Activation("relu", name="stem_relu")(x)
    # residual block: x + conv(conv(x))
    y = L.Conv2D(16, 3, padding="same", activation="relu", name="res_conv1")(x)
    y = L.Conv2D(16, 3, padding="same", name="res_conv2")(y)
    x = L.Add(name="res_add")([x, y])
    x = L.Activation("relu", name="res_relu")(x)
    x = L.MaxPooling2D(2, padding="same", name="pool1")(x)
    # inception-style block: concat(1x1, 3x3, pooled 1x1)
    a = L.Conv2D(16, 1, activation="relu", name="mix_1x1")(x)
    b = L.Conv2D(8, 1, activation="relu", name="mix_3x3_reduce")(x)
    b = L.Conv2D(16, 3, padding="same", activation="relu", name="mix_3x3")(b)
    c = L.AveragePooling2D(3, strides=1, padding="same", name="mix_pool")(x)
    c = L.Conv2D(8, 1, activation="relu", name="mix_pool_proj")(c)
    x = L.Concatenate(name="mix_concat")([a, b, c])
    x = L.MaxPooling2D(2, padding="same", name="pool2")(x)
    x = L.Conv2D(64, 3, padding="same", activation="relu", name="top_conv")(x)
    x = L.GlobalAveragePooling2D(name="avg_pool")(x)
    x = L.Dropout(0.2, name="drop")(x)
    out = L.Dense(num_classes, activation="softmax", name="predictions")(x)
    return keras.Model(inp, out, name="minires")


ZOO: dict[str, ZooEntry] = {
    "lenet5": ZooEntry(lenet5, (32, 32, 1), 10, "LeNet-5, 2 conv + 3 dense"),
    "alexnet": ZooEntry(alexnet, (224, 224, 3), 1000, "AlexNet, 5 conv + 3 dense"),
    "vgg11": ZooEntry(vgg11, (224, 224, 3), 1000, "VGG-11, 8 conv + 3 dense"),
    "vgg16": ZooEntry(vgg16, (224, 224, 3), 1000, "VGG-16, 13 conv + 3 dense (thesis model)"),
    "vgg19": ZooEntry(vgg19, (224, 224, 3), 1000, "VGG-19, 16 conv + 3 dense"),
    "resnet18": ZooEntry(resnet18, (224, 224, 3), 1000, "ResNet-18, basic blocks with Add"),
    "resnet50": ZooEntry(resnet50, (224, 224, 3), 1000, "ResNet-50, bottleneck blocks with Add"),
    "minivgg": ZooEntry(minivgg, (32, 32, 3), 10, "small VGG-style net (6 conv), for tests/quickstart"),
    "minires": ZooEntry(minires, (32, 32, 3), 10, "small branching net with Add and Concatenate"),
}


def zoo_names() -> list[str]:
    return list(ZOO)


def build_model(name: str, *, input_shape: tuple[int, ...] | None = None, num_classes: int | None = None) -> Any:
    """Build zoo model ``name``; a too-small input gives a clear HgpartError."""
    entry = ZOO.get(name)
    if entry is None:
        raise HgpartError(
            f"unknown zoo model {name!r}", fix="choose one of " + ", ".join(ZOO),
        )
    shape = tuple(input_shape) if input_shape is not None else entry.input_shape
    classes = int(num_classes) if num_classes is not None else entry.num_classes
    if classes < 1:
        raise HgpartError(f"class count must be positive, got {classes}", where=f"model {name}")
    try:
        return entry.builder(shape, classes)
    except ValueError as exc:
        raise HgpartError(
            f"cannot build {name} at input {list(shape)}: {str(exc).splitlines()[0]}",
            where=f"model {name}", fix="use a larger input (e.g. --input 32 or 224)",
        ) from None
