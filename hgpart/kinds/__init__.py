"""The layer-kind registry: one definition per kind, used by every stage.

Usage::

    from hgpart.kinds import KINDS, kind_of, kind_for_keras_class
    kind_of(layer.kind).role            # Role.VERTEX, Role.FUSED, ...
    kind_for_keras_class("Conv2D").name  # "conv2d"

Adding a kind means adding one :class:`~hgpart.kinds.base.LayerKind` subclass to a family module: defining
the class registers it (a new family module is added to the import below). The front end, the hypergraph
builder, ``Placement.channel_parts`` and the runtime all look it up here, and no other module compares kind
strings (``tests/test_kinds_registry.py`` checks).
"""

from __future__ import annotations

from hgpart.errors import HgpartError
from hgpart.kinds import channelwise, conv, merge, norm, preprocess, structure  # noqa: F401 - they register
from hgpart.kinds.base import REGISTERED, Converted, FusedKind, KerasCall, LayerKind, Role, keras_layer

__all__ = ["KINDS", "KERAS_CLASSES", "CONVERTERS", "kind_of", "kind_for_keras_class", "LayerKind", "FusedKind",
           "Role", "KerasCall", "Converted", "keras_layer"]

_ALL: tuple[LayerKind, ...] = tuple(k for k in REGISTERED if not k.front_end_only)
#: front-end only: Keras classes converted into layers of registered kinds (SeparableConv2D -> two layers)
CONVERTERS: tuple[LayerKind, ...] = tuple(k for k in REGISTERED if k.front_end_only)

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
