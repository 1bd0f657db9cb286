"""Keras front end: turn a Keras 3 model into a framework-free :class:`LayerGraph`.

Usage::

    from hgpart.frontend import layer_graph_from_keras
    graph = layer_graph_from_keras(keras_model, name="vgg16")

The rest of the compiler never touches Keras objects: this module is the one
place that walks Keras objects; what each Keras class becomes (kind, runtime
config, FLOPs) is the ``convert`` method of its kind in :mod:`hgpart.kinds`.
TensorFlow/Keras is imported lazily (inside functions) so importing hgpart
stays cheap.

Traversal follows the model's own node graph (each output tensor's
``_keras_history``), depth first from the output, so functional models with
branches (ResNet Add, Inception-style Concatenate) come out in a topological
order that is deterministic for a given model. Nested ``Sequential`` and
functional sub-models (ConvNeXt's stem) are flattened: their layers become
layers of the graph, each recording the enclosing models' names in
``config["keras_path"]`` so the runtime finds its weights. Layers or
sub-models called twice (shared weights) and nested subclassed models are
refused with a clear error: the layer graph has one record per executed layer.

FLOPs are forward floating-point operations **per sample**, inference mode,
a multiply-add counted as 2 (the convention of TensorFlow's own counter,
``tensorflow/python/profiler/internal/flops_registry.py``); activations count
one operation per element (softmax five), where TF's counter registers none.
Each kind's formula and the ``config`` it records for the runtime are in its
``convert`` method (:mod:`hgpart.kinds`). A ``SeparableConv2D`` becomes two
layers, ``<name>.depthwise`` and ``<name>``, which read the Keras layer's
``depthwise_kernel`` and ``pointwise_kernel``.
"""

from __future__ import annotations

from typing import Any

from hgpart.errors import HgpartError
from hgpart.kinds import KERAS_CLASSES, KerasCall, kind_for_keras_class
from hgpart.layergraph import Layer, LayerGraph

__all__ = ["layer_graph_from_keras", "SUPPORTED_KERAS_CLASSES"]

#: Keras class name -> layer-graph kind (several activation layers map to "activation")
SUPPORTED_KERAS_CLASSES: dict[str, str] = {k: v for k, v in KERAS_CLASSES.items() if ":" not in k and "." not in k}


def layer_graph_from_keras(model: Any, *, name: str) -> LayerGraph:
    """Convert a built Keras 3 Sequential or functional model (one input, one output)."""
    where = f"model {name}"
    try:
        inputs = list(model.inputs)
        outputs = list(model.outputs)
    except (AttributeError, ValueError):
        raise HgpartError(
            "the Keras model has no symbolic inputs/outputs (it was never built)",
            where=where, fix="start the model with keras.Input(shape=...) or call model.build(input_shape)",
        ) from None
    if len(inputs) != 1 or len(outputs) != 1:
        raise HgpartError(
            f"the model has {len(inputs)} inputs and {len(outputs)} outputs",
            where=where, fix="hgpart supports single-input, single-output models",
        )

    walk = _Walker(where)
    walk.visit(outputs[0])

    layers: list[Layer] = []
    for op, node, path in walk.order:
        layers.extend(_convert(op, node, path, walk))
    # The DFS emits the input first only if it is reachable first; force the input layer to the front.
    layers.sort(key=lambda layer: 0 if not layer.input_shapes else 1)
    in_shape = layers[0].output_shape
    num_classes = int(layers[-1].output_shape[-1]) if layers else 0
    graph = LayerGraph(name=name, input_shape=in_shape, layers=layers, num_classes=num_classes)
    ours = graph.total_params
    theirs = int(model.count_params())
    if ours != theirs:  # a guard against a mapping bug, not a user error
        raise AssertionError(f"parameter count mismatch for {name}: layer graph {ours}, Keras {theirs}")
    return graph


# ---------------------------------------------------------------------- helpers
def _producer(tensor: Any, where: str) -> tuple[Any, Any]:
    hist = getattr(tensor, "_keras_history", None)
    if hist is None or hist.operation is None:
        raise HgpartError("a tensor of the model has no producing layer", where=where,
                          fix="build the model from keras.Input with Keras layers")
    op = hist.operation
    if len(op._inbound_nodes) > 1:
        raise HgpartError(
            f"layer {op.name!r} ({type(op).__name__}) is called more than once (shared weights or a re-used model)",
            where=where, fix="give every call its own layer, and convert a model that was not called again",
        )
    return op, op._inbound_nodes[hist.node_index]


def _shape(tensor: Any, layer_name: str, where: str) -> tuple[int, ...]:
    shape = tuple(tensor.shape)[1:]
    if any(v is None for v in shape):
        raise HgpartError(
            f"layer {layer_name!r} has a tensor of unknown shape {tuple(tensor.shape)}",
            where=where, fix="give keras.Input a fully defined shape, e.g. shape=(224, 224, 3)",
        )
    return tuple(int(v) for v in shape)


def _unsupported(op: Any, where: str) -> HgpartError:
    cls = type(op).__name__
    if class_key(op).startswith("op:"):
        return HgpartError(
            f"operation {op.name!r} ({cls}) applied to a Keras tensor is not supported", where=where,
            fix="write it with Keras layers (supported: " + ", ".join(sorted(SUPPORTED_KERAS_CLASSES)) + ")",
        )
    if cls == "Lambda" or not type(op).__module__.startswith("keras.src.layers"):
        what = "a Lambda layer" if cls == "Lambda" else "a custom layer"
        return HgpartError(
            f"layer {op.name!r} of class {cls} is {what}, whose computation hgpart cannot see",
            where=where,
            fix="rewrite it with built-in Keras layers (supported: " + ", ".join(sorted(SUPPORTED_KERAS_CLASSES)) + ")",
        )
    return HgpartError(
        f"layer {op.name!r} of class {cls} is not supported",
        where=where,
        fix="supported: " + ", ".join(sorted(SUPPORTED_KERAS_CLASSES)),
    )


def class_key(op: Any) -> str:
    """How the registry names a Keras class: ``Conv2D`` for built-in layers, ``op:Add`` for operations
    (``x + 3``), the qualified name for layers defined elsewhere (e.g. an application's own layer)."""
    import keras

    cls = type(op).__name__
    module = type(op).__module__
    if not isinstance(op, keras.layers.Layer):
        return f"op:{cls}"
    if module.startswith(("keras.src.layers", "keras.layers", "keras.src.models", "keras.src.engine")):
        return cls
    return f"{module}.{cls}"


def _is_model(op: Any) -> bool:
    import keras

    return isinstance(op, keras.Model)


class _Walker:
    """Depth-first walk of the node graph from the output, nested sub-models inlined.

    A nested ``Sequential`` or functional model is replaced by its own layers: the walk continues from the
    sub-model's output tensor, and the sub-model's input layer stands for the outer tensor it was called on
    (``alias``). Each layer is emitted once, after its producers (``order``), with the names of the models
    enclosing it (``path``), which the runtime follows to find its weights.
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self.order: list[tuple[Any, Any, tuple[str, ...]]] = []  # (operation, node, enclosing models)
        self._state: dict[int, int] = {}  # id(operation) -> 1 visiting, 2 done
        #: id(input layer of a nested model) -> (the outer tensor it stands for, that tensor's enclosing models)
        self._alias: dict[int, tuple[Any, tuple[str, ...]]] = {}

    def resolve(self, tensor: Any, path: tuple[str, ...]) -> tuple[Any, Any, tuple[str, ...]]:
        """The layer (not a sub-model, not a sub-model's input) producing ``tensor``, its node and path."""
        while True:
            op, node = _producer(tensor, self.where)
            if id(op) in self._alias:
                tensor, path = self._alias[id(op)]
            elif _is_model(op):
                tensor, path = self._enter(op, node, tensor, path)
            else:
                return op, node, path

    def _enter(self, model: Any, node: Any, tensor: Any, path: tuple[str, ...]) -> tuple[Any, tuple[str, ...]]:
        """Map the sub-model's inputs to the tensors it was called on; return its output for ``tensor``."""
        try:
            inner_in, inner_out = list(model.inputs), list(model.outputs)
        except (AttributeError, ValueError):
            raise HgpartError(
                f"layer {model.name!r} is a nested subclassed model ({type(model).__name__}), whose graph hgpart "
                "cannot see", where=self.where, fix="build the sub-model as a Sequential or functional model",
            ) from None
        outer_in = list(node.input_tensors)
        if len(inner_in) != len(outer_in):
            raise HgpartError(f"nested model {model.name!r} has {len(inner_in)} inputs but is called on "
                              f"{len(outer_in)} tensors", where=self.where,
                              fix="call the sub-model on exactly its inputs")
        for inner, outer in zip(inner_in, outer_in, strict=True):
            self._alias[id(_producer(inner, self.where)[0])] = (outer, path)
        return inner_out[int(tensor._keras_history.tensor_index)], (*path, model.name)

    def visit(self, tensor: Any) -> None:
        """Append every layer ``tensor`` depends on to ``order``, producers first (iterative: deep nets)."""
        stack: list[tuple[Any, tuple[str, ...], bool]] = [(tensor, (), False)]
        while stack:
            t, path, expanded = stack.pop()
            op, node, inner = self.resolve(t, path)  # inner: the path of the layer itself
            key = id(op)
            if expanded:
                if self._state.get(key) != 2:
                    self._state[key] = 2
                    self.order.append((op, node, inner))
                continue
            if self._state.get(key) == 2:
                continue
            self._state[key] = 1
            stack.append((t, path, True))
            for src in reversed(list(node.input_tensors)):
                if self._state.get(id(self.resolve(src, inner)[0])) != 2:
                    stack.append((src, inner, False))


def _convert(op: Any, node: Any, path: tuple[str, ...], walk: _Walker) -> list[Layer]:
    """The layer records of one Keras call (SeparableConv2D gives two); its kind does the conversion.

    ``path`` names the sub-models enclosing the layer (recorded as ``keras_path`` for the runtime).
    """
    where = walk.where
    cls = type(op).__name__
    lname = op.name
    kind = kind_for_keras_class(class_key(op))
    if kind is None:
        raise _unsupported(op, where)
    ins = list(node.input_tensors)
    outs = list(node.output_tensors)
    if len(outs) != 1:
        raise HgpartError(f"layer {lname!r} of class {cls} is not supported: it has {len(outs)} outputs",
                          where=where)
    is_layer = hasattr(op, "count_params")
    call = KerasCall(
        op=op, cls=cls, name=lname, cfg=op.get_config() if is_layer else {},
        inputs=tuple(walk.resolve(t, path)[0].name for t in ins),
        input_shapes=tuple(_shape(t, lname, where) for t in ins),
        output_shape=_shape(outs[0], lname, where), params=int(op.count_params()) if is_layer else 0, where=where,
        args=tuple(getattr(getattr(node, "arguments", None), "args", ()) or ()),
    )
    extra = {"keras_path": list(path)} if path else {}
    return [
        Layer(
            name=c.name or call.name,
            kind=c.kind,
            keras_class=cls,
            inputs=call.inputs if c.inputs is None else c.inputs,
            input_shapes=call.input_shapes if c.input_shapes is None else c.input_shapes,
            output_shape=call.output_shape if c.output_shape is None else c.output_shape,
            params=call.params if c.params is None else c.params,
            flops=int(c.flops),
            config={**c.config, **extra},
        )
        for c in kind.convert(call)
    ]
