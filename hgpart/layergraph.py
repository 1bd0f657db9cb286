"""The layer graph: the compiler's framework-free picture of a CNN.

Usage::

    from hgpart.layergraph import LayerGraph
    graph = LayerGraph.from_dict(json.load(open("graph.json")))
    graph.layer("block1_conv1").out_channels

Every later stage (hypergraph builders, partitioners, metrics, placement
files, the runtime) works from this record, never from Keras objects, so the
compiler can run without importing TensorFlow and a placement file can carry
the whole graph it was made for. Shapes exclude the batch axis and are
channels-last, as in Keras.

Layer kinds (``conv2d``, ``batch_norm``, ...) and how each treats channels are
defined once, in :mod:`hgpart.kinds`; this module only checks that every
layer's kind is registered there.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from hgpart.errors import HgpartError
from hgpart.kinds import KINDS, LayerKind, Role, kind_of

__all__ = ["Layer", "LayerGraph"]


@dataclass(frozen=True)
class Layer:
    """One layer of the model, as the compiler and runtime need it.

    ``flops`` counts forward floating-point operations per sample (a
    multiply-add is two). ``params`` counts all weights including biases and
    non-trainable BatchNorm statistics. ``config`` holds what the runtime needs
    to execute the layer (kernel size, strides, padding, activation, ...).
    """

    name: str
    kind: str
    keras_class: str
    inputs: tuple[str, ...]
    input_shapes: tuple[tuple[int, ...], ...]
    output_shape: tuple[int, ...]
    params: int = 0
    flops: int = 0
    config: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def out_channels(self) -> int:
        """Number of channels (last axis) of the output."""
        return int(self.output_shape[-1])

    @property
    def in_channels(self) -> int:
        """Number of channels of the first input."""
        return int(self.input_shapes[0][-1]) if self.input_shapes else 0

    @property
    def definition(self) -> LayerKind:
        """The registered definition of this layer's kind (its rules in every stage)."""
        return kind_of(self.kind)

    @property
    def is_vertex_layer(self) -> bool:
        """True when each output channel of this layer is a hypergraph vertex."""
        return kind_of(self.kind).role is Role.VERTEX

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["inputs"] = list(self.inputs)
        d["input_shapes"] = [list(s) for s in self.input_shapes]
        d["output_shape"] = list(self.output_shape)
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Layer:
        return Layer(
            name=str(d["name"]),
            kind=str(d["kind"]),
            keras_class=str(d.get("keras_class", d["kind"])),
            inputs=tuple(str(x) for x in d.get("inputs", [])),
            input_shapes=tuple(tuple(int(v) for v in s) for s in d.get("input_shapes", [])),
            output_shape=tuple(int(v) for v in d["output_shape"]),
            params=int(d.get("params", 0)),
            flops=int(d.get("flops", 0)),
            config=dict(d.get("config", {})),
        )


@dataclass
class LayerGraph:
    """A DAG of layers in topological order with a single input layer.

    ``name`` is the model name (``vgg16``), ``input_shape`` the per-sample
    input shape. The fingerprint covers everything that changes the cost
    model or the executed model, so a profile or placement made for another
    graph is refused.
    """

    name: str
    input_shape: tuple[int, ...]
    layers: list[Layer]
    num_classes: int = 0
    _index: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.input_shape = tuple(int(v) for v in self.input_shape)
        self._index = {layer.name: i for i, layer in enumerate(self.layers)}
        self.validate()

    # ------------------------------------------------------------------ access
    def layer(self, name: str) -> Layer:
        try:
            return self.layers[self._index[name]]
        except KeyError:
            raise HgpartError(
                f"layer {name!r} does not exist", where=f"model {self.name}",
                fix="check the layer name against `hgpart info`",
            ) from None

    def index(self, name: str) -> int:
        return self._index[name]

    def consumers(self) -> dict[str, list[str]]:
        """Map each layer name to the names of the layers reading its output."""
        out: dict[str, list[str]] = {layer.name: [] for layer in self.layers}
        for layer in self.layers:
            for src in layer.inputs:
                out[src].append(layer.name)
        return out

    @property
    def input_layer(self) -> Layer:
        return self.layers[0]

    @property
    def output_layer(self) -> Layer:
        return self.layers[-1]

    @property
    def vertex_layers(self) -> list[Layer]:
        return [layer for layer in self.layers if layer.is_vertex_layer]

    @property
    def total_params(self) -> int:
        return sum(layer.params for layer in self.layers)

    @property
    def input_tag(self) -> str:
        """Short text for the input size used in file names (``224`` or ``32x28x1``)."""
        h, w, c = (self.input_shape + (1, 1, 1))[:3]
        return f"{h}" if h == w and c == 3 else "x".join(str(v) for v in self.input_shape)

    # -------------------------------------------------------------- checking
    def validate(self) -> None:
        """Check the DAG: one input first, known kinds, inputs defined earlier, one sink."""
        if not self.layers:
            raise HgpartError("the model has no layers", where=f"model {self.name}")
        if self.layers[0].kind not in KINDS or kind_of(self.layers[0].kind).role is not Role.INPUT:
            raise HgpartError(
                "the first layer must be the input layer",
                where=f"model {self.name}", fix="give the model exactly one Input",
            )
        seen: set[str] = set()
        read: set[str] = set()
        for layer in self.layers:
            if layer.kind not in KINDS:
                raise HgpartError(
                    f"layer {layer.name!r} has unsupported kind {layer.kind!r}",
                    where=f"model {self.name}",
                )
            if kind_of(layer.kind).role is Role.INPUT and layer is not self.layers[0]:
                raise HgpartError(
                    f"layer {layer.name!r} is a second input",
                    where=f"model {self.name}", fix="hgpart supports single-input models",
                )
            for src in layer.inputs:
                if src not in seen:
                    raise HgpartError(
                        f"layer {layer.name!r} reads {src!r}, which is not defined before it",
                        where=f"model {self.name}", fix="layers must be in topological order",
                    )
                read.add(src)
            if layer.name in seen:
                raise HgpartError(f"layer name {layer.name!r} is used twice", where=f"model {self.name}")
            seen.add(layer.name)
        sinks = [layer.name for layer in self.layers if layer.name not in read]
        if len(sinks) != 1:
            raise HgpartError(
                f"the model must have exactly one output, found {len(sinks)}: {sinks[:4]}",
                where=f"model {self.name}", fix="hgpart supports single-output models",
            )

    # ------------------------------------------------------------ identity
    def fingerprint(self) -> str:
        """SHA-256 (first 16 hex digits) of the structure: kinds, edges, shapes, configs."""
        core = [
            [
                layer.name,
                layer.kind,
                list(layer.inputs),
                [list(s) for s in layer.input_shapes],
                list(layer.output_shape),
                layer.params,
                json.dumps(layer.config, sort_keys=True, default=str),
            ]
            for layer in self.layers
        ]
        blob = json.dumps([list(self.input_shape), core], sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    # ------------------------------------------------------------- (de)serialise
    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "input_shape": list(self.input_shape),
            "num_classes": self.num_classes,
            "fingerprint": self.fingerprint(),
            "layers": [layer.to_dict() for layer in self.layers],
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> LayerGraph:
        try:
            graph = LayerGraph(
                name=str(d["name"]),
                input_shape=tuple(int(v) for v in d["input_shape"]),
                layers=[Layer.from_dict(x) for x in d["layers"]],
                num_classes=int(d.get("num_classes", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise HgpartError(f"malformed layer graph ({exc.__class__.__name__}: {exc})") from None
        want = d.get("fingerprint")
        if want is not None and want != graph.fingerprint():
            raise HgpartError(
                f"layer graph fingerprint {want} does not match its content ({graph.fingerprint()})",
                where=f"model {graph.name}", fix="the file was edited or is corrupt; regenerate it",
            )
        return graph
