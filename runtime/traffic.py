"""Bytes that cross devices in one executed training step, read from the step's placed graph.

Usage::

    t = measure_traffic(step)          # step: hgpart.runtime.step.TrainStep
    t.forward, t.backward, t.loss, t.feed     # bytes per category
    t.model_bytes / (2 * predicted)           # vs the placement's Comm. Vol x 2

Method: every op of the step's ``tf.function`` graph carries the device it runs on (the runtime places every
forward and update op explicitly, ``tf.gradients`` colocates gradient ops with their forward ops, variable reads
sit with their variable, and soft placement is switched off, so the graph's device labels are where the ops run).
TensorFlow's graph partitioner inserts one Send/Recv pair per (tensor, destination device), so the bytes that
cross are, for every distinct (tensor, consumer device) pair whose producer sits on another device, that tensor's
size. Categories, by the op names the runtime gives:

* ``forward`` - feature maps between parts (``fwd*/`` producers): the hypergraph's predicted volume.
* ``backward`` - their gradients flowing back (``gradients/`` ops).
* ``loss`` - logits gathered on the loss device and their gradients sent back (``loss/``), which the hypergraph
  does not model (the model output has no net).
* ``feed`` - input channels sent from the host to the parts that own them, and labels to the loss device.

``input_nets`` is the part of ``forward`` carrying input channels between parts: the hypergraph counts those nets
in both directions, but no gradient is computed for the input, so the backward pass moves that much less.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = ["Traffic", "measure_traffic", "graph_devices", "cross_device_edges"]


@dataclass
class Traffic:
    """Bytes that cross devices in one step, by category, plus the per-pair matrix."""

    forward: int = 0
    input_nets: int = 0  # the part of ``forward`` that carries input channels (no backward counterpart)
    backward: int = 0
    loss: int = 0
    feed: int = 0
    other: int = 0
    pairs: dict[str, int] = field(default_factory=dict)  # "src->dst" -> bytes

    @property
    def model_bytes(self) -> int:
        """Forward + backward feature-map traffic (what the hypergraph predicts, x2)."""
        return self.forward + self.backward

    @property
    def total(self) -> int:
        return self.forward + self.backward + self.loss + self.feed + self.other

    def check(self, predicted_fwd: float) -> dict[str, float]:
        """Measured vs predicted: forward maps vs Comm. Vol; backward vs Comm. Vol minus the input nets."""
        exp_bwd = predicted_fwd - self.input_nets
        return {"forward": self.forward, "predicted_forward": predicted_fwd,
                "backward": self.backward, "predicted_backward": exp_bwd,
                "model": self.model_bytes, "predicted_x2": 2 * predicted_fwd,
                "rel_err": abs(self.model_bytes - (predicted_fwd + exp_bwd)) / max(predicted_fwd + exp_bwd, 1.0)}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["model_bytes"] = self.model_bytes
        d["total"] = self.total
        return d


def graph_devices(graph: Any, host: str = "") -> dict[str, str]:
    """Device of every op of a traced function's graph (what a profiler trace's kernels map to); the ``Placeholder``
    ops of its captured variables, and reads of them, take the variable's device, its arguments the host's."""
    var_devices = {id(internal): (getattr(ext, "device", "") or "") for ext, internal in graph.captures}
    dev: dict[str, str] = {}
    for op in graph.get_operations():
        d = op.device
        if not d and op.type == "Placeholder":
            d = var_devices.get(id(op.outputs[0]), host)
        elif not d and op.type in ("ReadVariableOp", "ResourceGather"):
            d = dev.get(op.inputs[0].op.name, "")
        dev[op.name] = d
    return dev


def _category(producer: str, consumer: str) -> str:
    names = (producer, consumer)
    if any(n.startswith("feed/") for n in names) or not producer.startswith(("fwd", "gradients", "loss")):
        return "feed"
    if any(n.startswith("loss/") or n.startswith("gradients/loss/") for n in names):
        return "loss"
    if consumer.startswith("gradients/") or producer.startswith("gradients/"):
        return "backward"
    if producer.startswith("fwd") and consumer.startswith("fwd"):
        return "forward"
    return "other"


def cross_device_edges(concrete: Any, host: str) -> Iterator[tuple[Any, Any, str, str, int]]:
    """Every tensor that crosses devices in a placed ``tf.function`` graph, once per receiving device.

    Yields ``(tensor, consumer op, source device, destination device, bytes)``;
    resource handles and tensors of unknown shape are skipped. Captured
    resource handles (the function's captured inputs) take the device of the
    variable they stand for.
    """
    graph = concrete.graph
    dev = graph_devices(graph, host)
    seen: set[tuple[str, str]] = set()
    for op in graph.get_operations():
        dst = dev.get(op.name, "")
        if not dst:
            continue
        for t in op.inputs:
            src = dev.get(t.op.name, "")
            if not src or src == dst or t.dtype.name in ("resource", "variant") or (t.name, dst) in seen:
                continue
            seen.add((t.name, dst))
            if not t.shape.is_fully_defined():
                continue
            yield t, op, src, dst, int(np.prod(t.shape.as_list(), dtype=np.int64)) * t.dtype.size


def measure_traffic(step: Any) -> Traffic:
    """Count cross-device bytes in ``step.concrete`` (see the module docstring)."""
    out = Traffic()
    for t, op, src, dst, nbytes in cross_device_edges(step.concrete, step.pm.host):
        cat = _category(t.op.name, op.name)
        if cat == "forward" and "/input/" in t.op.name:
            out.input_nets += nbytes
        setattr(out, cat, getattr(out, cat) + nbytes)
        pair = f"{_short(src)}->{_short(dst)}"
        out.pairs[pair] = out.pairs.get(pair, 0) + nbytes
    return out


def _short(device: str) -> str:
    parts = device.split("/")
    return "/".join(p for p in parts if p.startswith(("job", "task", "device")) and p != "job:localhost")
