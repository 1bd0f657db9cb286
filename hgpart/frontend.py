"""Keras front end: turn a Keras 3 model into a framework-free :class:`LayerGraph`.

Usage::

    from hgpart.frontend import layer_graph_from_keras
    graph = layer_graph_from_keras(keras_model, name="vgg16")

The rest of the compiler never touches Keras objects: this module is the one
place that knows Keras classes, so supporting a new layer means one mapping
here plus the per-kind rules in :mod:`hgpart.layergraph`. TensorFlow/Keras is
imported lazily (inside functions) so importing hgpart stays cheap.

Traversal follows the model's own node graph (each output tensor's
``_keras_history``), depth first from the output, so functional models with
branches (ResNet Add, Inception-style Concatenate) come out in a topological
order that is deterministic for a given model. Nested sub-models and layers
called twice (shared weights) are refused with a clear error: the layer graph
has one record per executed layer.

FLOPs are forward floating-point operations **per sample**, inference mode,
a multiply-add counted as 2 (the convention of TensorFlow's own counter,
``tensorflow/python/profiler/internal/flops_registry.py``). Formulas, with
``Ho, Wo`` the output spatial size, ``Cin`` input channels, ``F`` filters,
``kh, kw`` kernel size, ``n = Ho*Wo*F`` output elements:

* ``conv2d``: ``2*n*kh*kw*Cin`` (TF ``Conv2D``) + ``n`` if ``use_bias``
  (TF ``BiasAdd``/``AddV2``) + ``n`` if a fused activation other than linear.
* ``depthwise_conv2d``: ``2*n*kh*kw`` + bias ``n`` + activation ``n``
  (``n = Ho*Wo*Cin*depth_multiplier``; TF ``DepthwiseConv2dNative``).
* ``dense``: ``2*Nin*F`` (TF ``MatMul``) + ``F`` bias + ``F`` activation.
* ``max_pool``/``avg_pool``: ``ph*pw*n`` (TF ``MaxPool``/``AvgPool``).
* ``global_avg_pool``/``global_max_pool``: ``H*W*C`` (TF ``Mean``: one add per
  input element plus one divide per output minus the first add of each output).
* ``batch_norm`` (inference form, as TF executes it): per channel
  ``a = gamma*rsqrt(var+eps)`` and ``b = beta - mean*a`` (``3*C`` for add and
  rsqrt, ``+C`` with ``scale``, ``+2*C`` with ``center``), then ``x*a + b``:
  ``2*n``.
* ``activation``: ``n`` (one op per element; ``softmax`` 5 per element like TF's
  ``Softmax``; ``linear`` 0). TF's counter registers no FLOPs for ``Relu``:
  this is the one deliberate difference, so activations are not free here.
* ``add``: ``(inputs-1)*n``. ``input``, ``dropout`` (identity at inference),
  ``flatten``, ``concat``, ``zero_padding``: 0.

``config`` carries everything a runtime needs to re-execute the layer with raw
``tf.nn`` ops: ``keras_name`` always; conv: ``filters, kernel_size, strides,
padding ("same"|"valid"), dilation_rate, use_bias, activation`` (+ activation
params); depthwise: ``depth_multiplier`` instead of filters; dense: ``units,
use_bias, activation``; pools: ``pool_size, strides, padding``; global pools:
``keepdims``; batch_norm: ``epsilon, center, scale, momentum``; activation:
``activation`` name (``relu``, ``softmax``, ``leaky_relu``, ``elu``, ...) and its
parameters (``negative_slope``, ``max_value``, ``threshold``, ``alpha``,
``axis``); dropout: ``rate``; zero_padding: ``padding`` ``[[top, bottom],
[left, right]]``; concat: ``axis`` (always -1).
"""

from __future__ import annotations

from typing import Any

from hgpart.errors import HgpartError
from hgpart.layergraph import Layer, LayerGraph

__all__ = ["layer_graph_from_keras", "SUPPORTED_KERAS_CLASSES"]

#: Keras class name -> layer-graph kind (activation layers all map to "activation")
SUPPORTED_KERAS_CLASSES: dict[str, str] = {
    "InputLayer": "input",
    "Conv2D": "conv2d",
    "DepthwiseConv2D": "depthwise_conv2d",
    "Dense": "dense",
    "MaxPooling2D": "max_pool",
    "AveragePooling2D": "avg_pool",
    "GlobalAveragePooling2D": "global_avg_pool",
    "GlobalMaxPooling2D": "global_max_pool",
    "BatchNormalization": "batch_norm",
    "Activation": "activation",
    "ReLU": "activation",
    "LeakyReLU": "activation",
    "Softmax": "activation",
    "ELU": "activation",
    "Dropout": "dropout",
    "Flatten": "flatten",
    "Add": "add",
    "Concatenate": "concat",
    "ZeroPadding2D": "zero_padding",
}

_SOFTMAX_FLOPS_PER_ELEMENT = 5  # TF flops_registry: shift (2) + exp (1) + normalise (2)


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

    order: list[tuple[Any, Any]] = []  # (operation, node), topological
    state: dict[int, int] = {}  # id(operation) -> 1 visiting, 2 done

    def visit(tensor: Any) -> None:
        # Iterative DFS (deep ResNets exceed nothing, but avoid recursion limits anyway).
        stack: list[tuple[Any, bool]] = [(tensor, False)]
        while stack:
            t, expanded = stack.pop()
            op, node = _producer(t, where)
            key = id(op)
            if expanded:
                if state.get(key) != 2:
                    state[key] = 2
                    order.append((op, node))
                continue
            if state.get(key) == 2:
                continue
            state[key] = 1
            stack.append((t, True))
            for src in reversed(list(node.input_tensors)):
                src_op, _ = _producer(src, where)
                if state.get(id(src_op)) != 2:
                    stack.append((src, False))

    visit(outputs[0])

    names: dict[int, str] = {id(op): op.name for op, _ in order}
    layers: list[Layer] = []
    for op, node in order:
        layers.append(_convert(op, node, names, where))
    # The DFS emits the input first only if it is reachable first; force the input layer to the front.
    layers.sort(key=lambda layer: 0 if layer.kind == "input" else 1)
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


def _prod(shape: tuple[int, ...]) -> int:
    out = 1
    for v in shape:
        out *= int(v)
    return out


def _pair(v: Any) -> list[int]:
    if isinstance(v, int):
        return [v, v]
    return [int(x) for x in v]


def _unsupported(op: Any, where: str, why: str | None = None) -> HgpartError:
    cls = type(op).__name__
    if why:
        return HgpartError(f"layer {op.name!r} of class {cls} is not supported: {why}", where=where)
    return HgpartError(
        f"layer {op.name!r} of class {cls} is not supported",
        where=where,
        fix="supported: " + ", ".join(sorted(SUPPORTED_KERAS_CLASSES)),
    )


def _activation_name(op: Any, cfg: dict[str, Any], where: str) -> str:
    act = cfg.get("activation", "linear")
    if act is None:
        return "linear"
    if not isinstance(act, str):
        raise _unsupported(op, where, f"activation {act!r} is not a built-in Keras activation")
    return act


def _activation_flops(act: str, n: int) -> int:
    if act == "linear":
        return 0
    if act == "softmax":
        return _SOFTMAX_FLOPS_PER_ELEMENT * n
    return n


def _check_channels_last(op: Any, cfg: dict[str, Any], where: str) -> None:
    fmt = cfg.get("data_format")
    if fmt not in (None, "channels_last"):
        raise _unsupported(op, where, f"data_format={fmt!r}; hgpart needs channels_last")


def _convert(op: Any, node: Any, names: dict[int, str], where: str) -> Layer:
    cls = type(op).__name__
    lname = op.name
    if cls in ("Functional", "Sequential", "Model") or hasattr(op, "layers") and cls not in SUPPORTED_KERAS_CLASSES:
        raise HgpartError(
            f"layer {lname!r} is a nested model ({cls})", where=where,
            fix="flatten the sub-model into the outer model (call its layers directly)",
        )
    kind = SUPPORTED_KERAS_CLASSES.get(cls)
    if kind is None:
        raise _unsupported(op, where)
    cfg = op.get_config()
    ins = list(node.input_tensors)
    outs = list(node.output_tensors)
    if len(outs) != 1:
        raise _unsupported(op, where, f"it has {len(outs)} outputs")
    out_shape = _shape(outs[0], lname, where)
    in_shapes = tuple(_shape(t, lname, where) for t in ins)
    inputs = tuple(names[id(_producer(t, where)[0])] for t in ins)
    n_out = _prod(out_shape)
    config: dict[str, Any] = {"keras_name": lname}
    flops = 0

    if kind == "input":
        in_shapes = ()
        inputs = ()
        if len(out_shape) != 3:
            raise HgpartError(
                f"input {lname!r} has shape {out_shape}; hgpart needs an image input (H, W, C)",
                where=where, fix="use keras.Input(shape=(H, W, C))",
            )
    elif kind == "conv2d":
        _check_channels_last(op, cfg, where)
        if int(cfg.get("groups", 1)) != 1:
            raise _unsupported(op, where, f"groups={cfg['groups']} (grouped convolution)")
        act = _activation_name(op, cfg, where)
        kh, kw = _pair(cfg["kernel_size"])
        cin = in_shapes[0][-1]
        config.update(
            filters=int(cfg["filters"]), kernel_size=[kh, kw], strides=_pair(cfg["strides"]),
            padding=str(cfg["padding"]), dilation_rate=_pair(cfg["dilation_rate"]),
            use_bias=bool(cfg["use_bias"]), activation=act,
        )
        flops = 2 * n_out * kh * kw * cin + (n_out if cfg["use_bias"] else 0) + _activation_flops(act, n_out)
    elif kind == "depthwise_conv2d":
        _check_channels_last(op, cfg, where)
        act = _activation_name(op, cfg, where)
        kh, kw = _pair(cfg["kernel_size"])
        config.update(
            depth_multiplier=int(cfg["depth_multiplier"]), kernel_size=[kh, kw], strides=_pair(cfg["strides"]),
            padding=str(cfg["padding"]), dilation_rate=_pair(cfg["dilation_rate"]),
            use_bias=bool(cfg["use_bias"]), activation=act,
        )
        flops = 2 * n_out * kh * kw + (n_out if cfg["use_bias"] else 0) + _activation_flops(act, n_out)
    elif kind == "dense":
        if len(in_shapes[0]) != 1:
            raise _unsupported(op, where, f"Dense on a rank-{len(in_shapes[0]) + 1} input {in_shapes[0]}; "
                                          "add Flatten or global pooling before it")
        act = _activation_name(op, cfg, where)
        config.update(units=int(cfg["units"]), use_bias=bool(cfg["use_bias"]), activation=act)
        flops = 2 * in_shapes[0][0] * n_out + (n_out if cfg["use_bias"] else 0) + _activation_flops(act, n_out)
    elif kind in ("max_pool", "avg_pool"):
        _check_channels_last(op, cfg, where)
        ph, pw = _pair(cfg["pool_size"])
        strides = cfg.get("strides") or cfg["pool_size"]
        config.update(pool_size=[ph, pw], strides=_pair(strides), padding=str(cfg["padding"]))
        flops = ph * pw * n_out
    elif kind in ("global_avg_pool", "global_max_pool"):
        _check_channels_last(op, cfg, where)
        config.update(keepdims=bool(cfg.get("keepdims", False)))
        flops = _prod(in_shapes[0])
    elif kind == "batch_norm":
        axis = cfg.get("axis", -1)
        axis = axis[0] if isinstance(axis, list | tuple) and len(axis) == 1 else axis
        if axis not in (-1, len(in_shapes[0])):
            raise _unsupported(op, where, f"axis={cfg.get('axis')}; only the channel (last) axis is supported")
        config.update(
            epsilon=float(cfg["epsilon"]), center=bool(cfg["center"]), scale=bool(cfg["scale"]),
            momentum=float(cfg["momentum"]),
        )
        c = out_shape[-1]
        flops = 2 * n_out + (3 + int(bool(cfg["scale"])) + 2 * int(bool(cfg["center"]))) * c
    elif kind == "activation":
        act, extra = _activation_layer(op, cls, cfg, where)
        config.update(activation=act, **extra)
        flops = _activation_flops(act, n_out)
    elif kind == "dropout":
        config.update(rate=float(cfg["rate"]))
        if cfg.get("noise_shape") is not None:
            raise _unsupported(op, where, "Dropout with noise_shape")
    elif kind == "flatten":
        _check_channels_last(op, cfg, where)
    elif kind == "add":
        if len({s for s in in_shapes}) != 1:
            raise _unsupported(op, where, f"Add of different shapes {list(in_shapes)} (broadcasting)")
        flops = (len(ins) - 1) * n_out
    elif kind == "concat":
        axis = int(cfg.get("axis", -1))
        if axis not in (-1, len(out_shape)):
            raise _unsupported(op, where, f"Concatenate on axis {axis}; only the channel (last) axis is supported")
        config.update(axis=-1)
    elif kind == "zero_padding":
        _check_channels_last(op, cfg, where)
        pad = cfg["padding"]
        if isinstance(pad, int):
            pad = ((pad, pad), (pad, pad))
        pad = [_pair(p) for p in pad]
        config.update(padding=pad)

    return Layer(
        name=lname,
        kind=kind,
        keras_class=cls,
        inputs=inputs,
        input_shapes=in_shapes,
        output_shape=out_shape,
        params=int(op.count_params()),
        flops=int(flops),
        config=config,
    )


def _activation_layer(op: Any, cls: str, cfg: dict[str, Any], where: str) -> tuple[str, dict[str, Any]]:
    """Normalise the activation layers to one (name, parameters) pair."""
    if cls == "Activation":
        return _activation_name(op, cfg, where), {}
    if cls == "ReLU":
        extra: dict[str, Any] = {
            "negative_slope": float(cfg.get("negative_slope", 0.0)),
            "threshold": float(cfg.get("threshold", 0.0)),
        }
        mv = cfg.get("max_value")
        extra["max_value"] = None if mv is None else float(mv)
        return "relu", extra
    if cls == "LeakyReLU":
        return "leaky_relu", {"negative_slope": float(cfg.get("negative_slope", cfg.get("alpha", 0.3)))}
    if cls == "ELU":
        return "elu", {"alpha": float(cfg.get("alpha", 1.0))}
    if cls == "Softmax":
        axis = cfg.get("axis", -1)
        if axis not in (-1, [-1]):
            raise _unsupported(op, where, f"Softmax over axis {axis}; only the last axis is supported")
        return "softmax", {"axis": -1}
    raise _unsupported(op, where)
