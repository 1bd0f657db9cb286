"""What a layer kind is: the one definition the front end, hypergraph builder, placement and runtime share.

Usage::

    from hgpart.kinds import kind_of
    k = kind_of("conv2d")
    k.role, k.read_map(layer), k.values_per_channel(layer, [in_values])

A kind answers, for both grains:

* **vertices** - its :class:`Role`: the model input and *vertex* layers own one vertex per output channel
  (``fine_split`` kinds instead one per (filter, input channel) pair plus a reduction vertex per filter in
  the fine grain); *fused* layers are computed by the vertex that owns each channel; *concat* concatenates
  the channels of its inputs; *view* (Flatten) re-labels them;
* **reading rule** - :meth:`LayerKind.read_map`: the input channel each output channel reads (``None``: all);
* **owner of each output channel** - follows from the role (own vertex, input's owner, concatenation);
* **cost** - FLOPs and parameters come from :meth:`LayerKind.convert` (front end), memory from
  :meth:`LayerKind.values_per_channel` (values per channel of its output) and ``allocates``;
* **runtime op** - :meth:`LayerKind.make_variables` and :meth:`LayerKind.forward`, which build the ops of
  every part's share through a runtime context (the ``PlacedModel``). TensorFlow is imported inside
  those methods only, so the compiler never loads it.

This module imports nothing of hgpart but the error type: every stage imports it, it imports no stage.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Protocol

import numpy as np

from hgpart.errors import HgpartError

__all__ = ["REGISTERED", "Role", "LayerLike", "KerasCall", "Converted", "LayerKind", "FusedKind", "spatial", "pair",
           "keras_layer"]


class Role(Enum):
    """How a kind's output channels map to hypergraph vertices."""

    INPUT = "input"  # the model input: one vertex per channel
    VERTEX = "vertex"  # one vertex (task) per output channel
    FUSED = "fused"  # per-channel: channel j is computed by the vertex owning input channel j
    CONCAT = "concat"  # the channels of its inputs, concatenated
    VIEW = "view"  # the channels of its input, re-labelled without computing (Flatten)


class LayerLike(Protocol):
    """The fields of :class:`hgpart.layergraph.Layer` a kind reads (kept structural to avoid an import cycle)."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def inputs(self) -> tuple[str, ...]: ...

    @property
    def input_shapes(self) -> tuple[tuple[int, ...], ...]: ...

    @property
    def output_shape(self) -> tuple[int, ...]: ...

    @property
    def params(self) -> int: ...

    @property
    def config(self) -> dict[str, Any]: ...

    @property
    def out_channels(self) -> int: ...

    @property
    def in_channels(self) -> int: ...

    @property
    def definition(self) -> LayerKind: ...


def spatial(shape: tuple[int, ...]) -> int:
    """Values per channel of a tensor of per-sample ``shape`` (``H*W``; 1 for a vector)."""
    return int(math.prod(shape[:-1])) if len(shape) > 1 else 1


def pair(v: Any) -> list[int]:
    """Keras's ``int or (a, b)`` arguments as ``[a, b]``."""
    if isinstance(v, int):
        return [v, v]
    return [int(x) for x in v]


@dataclass(frozen=True)
class KerasCall:
    """One call of a Keras layer as the front end sees it: class, config, tensors' shapes, producers."""

    op: Any
    cls: str
    name: str
    cfg: dict[str, Any]
    inputs: tuple[str, ...]
    input_shapes: tuple[tuple[int, ...], ...]
    output_shape: tuple[int, ...]
    params: int
    where: str
    #: the call's positional arguments (tensors and constants), for operations such as ``x + 3``
    args: tuple[Any, ...] = ()

    @property
    def n_out(self) -> int:
        """Output elements per sample."""
        return int(math.prod(self.output_shape))

    def refuse(self, why: str, fix: str | None = None) -> HgpartError:
        """The one-line error for a layer hgpart cannot model, naming it."""
        return HgpartError(f"layer {self.name!r} of class {self.cls} is not supported: {why}", where=self.where,
                           fix=fix)

    def check_channels_last(self) -> None:
        fmt = self.cfg.get("data_format")
        if fmt not in (None, "channels_last"):
            raise self.refuse(f"data_format={fmt!r}; hgpart needs channels_last")


@dataclass(frozen=True)
class Converted:
    """One layer record made from a Keras call; unset fields take the call's values."""

    kind: str
    config: dict[str, Any]
    flops: int
    name: str | None = None
    params: int | None = None
    inputs: tuple[str, ...] | None = None
    input_shapes: tuple[tuple[int, ...], ...] | None = None
    output_shape: tuple[int, ...] | None = None


#: every concrete kind, in definition order (a subclass that sets ``name`` registers itself)
REGISTERED: list[LayerKind] = []


class LayerKind:
    """One layer kind. Subclasses set the class attributes and override what differs from the defaults.

    Defining a subclass with its own ``name`` registers one instance of it (``REGISTERED``), so a new kind
    is one class in a family module and nothing else.
    """

    name: ClassVar[str]
    role: ClassVar[Role]
    #: Keras classes converted to this kind (several activation layers map to one kind)
    keras_classes: ClassVar[tuple[str, ...]] = ()
    #: fine grain: one vertex per (filter, input channel) pair plus one reduction vertex per filter
    fine_split: ClassVar[bool] = False
    #: Keras weights the runtime copies into per-part variables (attribute names of the Keras layer)
    weights: ClassVar[tuple[str, ...]] = ()
    #: its output is a new tensor in memory (False for views such as Flatten)
    allocates: ClassVar[bool] = True
    #: one line for the docs: what crosses devices
    rule: ClassVar[str] = ""
    #: a front-end converter into layers of other kinds (SeparableConv2D), not a kind of the layer graph
    front_end_only: ClassVar[bool] = False
    #: the docs' name for what the front end converts to this kind when no Keras class maps to it directly
    doc_label: ClassVar[str] = ""
    #: coarse grain: each part's share is computed from that part's own input pieces (FUSED, VIEW, CONCAT) or
    #: its views of the inputs (VERTEX), with no reduction across parts, so a layer split over parts can run as
    #: one piece per part in separate pipeline stages (``hgpart.runtime.stages``)
    piecewise: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            REGISTERED.append(cls())

    # ---------------------------------------------------------------- front end
    def convert(self, call: KerasCall) -> list[Converted]:
        """Layer records for one Keras call, with the runtime config and the forward FLOPs per sample."""
        raise call.refuse("no front-end conversion")

    # --------------------------------------------------------------- hypergraph
    def read_map(self, layer: LayerLike) -> np.ndarray | None:
        """Vertex kinds: the input channel each output channel reads from every input, shape ``(F,)``, or the
        ``r`` channels each reads, shape ``(F, r)`` (a grouped convolution); ``None``: all of them."""
        return None

    def values_per_channel(self, layer: LayerLike, in_values: list[int]) -> int:
        """Values per channel of this layer's output, for net costs and activation memory."""
        return spatial(layer.output_shape)

    def stats_cost(self, layer: LayerLike) -> int:
        """Values per sample that cross per extra part holding one of its channels (a reduction over
        channels, e.g. LayerNormalization); 0 for kinds whose channels are independent."""
        return 0

    def bias_params(self, layer: LayerLike) -> int:
        """``fine_split`` kinds: parameters that belong to the reduction vertex (the bias)."""
        return 0

    # ------------------------------------------------------------------ runtime
    def runtime_check(self, layer: LayerLike) -> None:
        """Refuse a layer the runtime cannot execute (the compiler may still model it)."""

    def column_layout(self, layer: LayerLike, in_layout: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
        """Fused and view kinds: original last-axis positions held by each part (default: the input's)."""
        return in_layout

    def split_channels(self, layer: LayerLike, in_channels: int) -> int:
        """Channels of the output tensor (position -> channel is ``pos % channels``)."""
        return layer.out_channels

    def make_variables(self, rt: Any, layer: LayerLike, weights: dict[str, np.ndarray]) -> None:
        """Create this layer's per-part variables from its Keras ``weights`` (``rt.add_variable``)."""

    def forward(self, rt: Any, layer: LayerLike, x: Any, vals: dict[str, Any], views: dict, training: bool,
                bn_stats: list | None, scope: str) -> dict[int, Any]:
        """The layer's output tensor on every part that owns some of its channels."""
        raise HgpartError(f"layer {layer.name!r} of kind {layer.kind!r} has no runtime op", where="runtime")

    def scatter(self, layer: LayerLike, name: str, pv: Any, value: np.ndarray, full: dict[str, np.ndarray]) -> None:
        """Write a part variable's ``value`` back into the full Keras-layout weight ``full[name]``."""
        out = full.setdefault(name, np.zeros(self.weight_shape(layer, name), np.float32))
        if name == "kernel":
            self._scatter_kernel(layer, out, pv, value)
        elif len(pv.index) == 1:
            out[..., pv.index[0]] = value
        else:
            out[..., pv.index[0][:, None], pv.index[1][None, :]] = value

    def _scatter_kernel(self, layer: LayerLike, out: np.ndarray, pv: Any, value: np.ndarray) -> None:
        """Write part ``pv``'s kernel slice into the full kernel ``out``: by default its two index arrays
        address the last two axes (input channel, filter), and entries outside a fine-grain ``mask`` are
        left as they are (another part owns them)."""
        sel = (..., pv.index[0][:, None], pv.index[1][None, :])
        out[sel] = value if pv.mask is None else np.where(pv.mask, value, out[sel])

    def weight_shape(self, layer: LayerLike, name: str) -> tuple[int, ...]:
        """Shape of the full Keras weight ``name`` (per-channel vectors by default)."""
        return (layer.out_channels,)

    def variables(self, layer: LayerLike) -> int:
        """How many Keras variables the layer holds: its ``weights``, without the bias when ``use_bias`` is off.
        A data-parallel parameter server moves each on its own, so each pays a transfer's latency."""
        if not layer.params:
            return 0
        return sum(1 for w in self.weights if not (w == "bias" and layer.config.get("use_bias", True) is False))


class FusedKind(LayerKind, ABC):
    """A per-channel layer: each part applies it to the channels it owns, no communication."""

    role = Role.FUSED

    def values_per_channel(self, layer: LayerLike, in_values: list[int]) -> int:
        # a per-feature layer after Flatten or Dense keeps its input's values per channel
        return spatial(layer.output_shape) if len(layer.output_shape) >= 2 else in_values[0]

    @abstractmethod
    def apply(self, rt: Any, layer: LayerLike, q: int, y: Any, training: bool, bn_stats: list | None) -> Any:
        """The op on part ``q``'s tensor ``y`` (already on ``q``'s device)."""

    def forward(self, rt: Any, layer: LayerLike, x: Any, vals: dict[str, Any], views: dict, training: bool,
                bn_stats: list | None, scope: str) -> dict[int, Any]:
        import tensorflow as tf

        out = {}
        for q, y in vals[layer.inputs[0]].tensors.items():
            with tf.device(rt.devices[q]):
                out[q] = self.apply(rt, layer, q, y, training, bn_stats)
        return out


def keras_layer(model: Any, layer: LayerLike) -> Any:
    """The Keras layer whose weights ``layer`` holds: ``config["keras_name"]`` inside the nested sub-models
    ``config["keras_path"]`` names (the front end flattens them). Raises ``ValueError`` if there is none."""
    owner = model
    for name in layer.config.get("keras_path", []):
        owner = owner.get_layer(name)
    return owner.get_layer(layer.config.get("keras_name", layer.name))
