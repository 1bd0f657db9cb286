"""The layer-kind registry: one definition per kind, used by every stage.

Usage::

    from hgpart.kinds import KINDS, kind_of, kind_for_keras_class
    kind_of(layer.kind).role            # Role.VERTEX, Role.FUSED, ...
    kind_for_keras_class("Conv2D").name  # "conv2d"

Adding a kind means adding one :class:`~hgpart.kinds.base.LayerKind` subclass to a family module and listing
it in ``_ALL`` below: the front end, the hypergraph builder, ``Placement.channel_parts`` and the runtime
all look it up here, and no other module compares kind strings (``tests/test_kinds_registry.py`` checks).
"""

from __future__ import annotations

from hgpart.errors import HgpartError
from hgpart.kinds import channelwise, conv, merge, norm, preprocess, structure
from hgpart.kinds.base import Converted, FusedKind, KerasCall, LayerKind, Role

__all__ = ["KINDS", "KERAS_CLASSES", "CONVERTERS", "kind_of", "kind_for_keras_class", "LayerKind", "FusedKind", "Role",
           "KerasCall", "Converted"]

_ALL: tuple[LayerKind, ...] = (
    structure.Input(), structure.Flatten(), structure.Concat(),
    conv.Conv2D(), conv.DepthwiseConv2D(), conv.Dense(),
    merge.Add(), merge.Multiply(), merge.Subtract(), merge.Average(), merge.Maximum(), merge.Minimum(),
    channelwise.Pool(), channelwise.AvgPool(), channelwise.GlobalPool(), channelwise.GlobalAvgPool(),
    channelwise.BatchNorm(), channelwise.Activation(), channelwise.Dropout(), channelwise.ZeroPadding(),
    channelwise.Cropping(), channelwise.UpSampling(),
    conv.Conv2DTranspose(), merge.ScaledAdd(), structure.Reshape(), structure.Permute(),
    preprocess.Rescaling(), preprocess.Normalization(), preprocess.ConstantOp(), norm.LayerNorm(),
)
#: front-end only: Keras classes converted into layers of registered kinds (SeparableConv2D -> two layers)
CONVERTERS: tuple[LayerKind, ...] = (conv.SeparableConv2D(),)

#: kind name -> its definition
KINDS: dict[str, LayerKind] = {k.name: k for k in _ALL}
#: Keras class name -> kind name
KERAS_CLASSES: dict[str, str] = {cls: k.name for k in _ALL + CONVERTERS for cls in k.keras_classes}
_BY_CLASS: dict[str, LayerKind] = {cls: k for k in _ALL + CONVERTERS for cls in k.keras_classes}


def kind_of(name: str) -> LayerKind:
    """The definition of kind ``name``; an unknown kind (a hand-edited graph file) is a user error."""
    try:
        return KINDS[name]
    except KeyError:
        raise HgpartError(f"unknown layer kind {name!r}", fix="supported kinds: " + ", ".join(sorted(KINDS))) \
            from None


def kind_for_keras_class(cls: str) -> LayerKind | None:
    """The converter of a Keras class key (see :func:`hgpart.frontend.class_key`), ``None`` if unsupported."""
    return _BY_CLASS.get(cls)
