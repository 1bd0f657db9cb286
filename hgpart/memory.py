"""Device memory of a placement: parameters, gradients, optimizer slots and the activations kept for backward.

Usage::

    from hgpart.memory import MemorySettings, Optimizer, parse_size, placement_memory, vertex_memory
    limit = parse_size("16GiB")                                   # 17179869184 bytes
    parts = placement_memory(pl, batch_size=256, inflight=2, optimizer="adam", limit=limit)
    [p.total for p in parts], all(p.fits for p in parts)
    vm = vertex_memory(hg, MemorySettings(batch_size=256))         # per-vertex arrays for the partitioners
    vm.total                                                       # bytes each vertex brings to its part

What a device holds during a training step (``d`` bytes per value, ``B`` the batch size, ``n`` batches in
flight in the asynchronous pipeline, 1 in a synchronous step):

* **parameters**: the weights of the vertices it holds, ``params * d`` (each layer's Keras parameter count
  spread over its vertices as the hypergraph builder spreads it: a filter's kernel and bias on the filter's
  vertex, a fine-grain kernel slice on its (filter, channel) vertex and the bias on the reduction vertex,
  BatchNorm's per-channel statistics with the channel);
* **gradients**: one value per parameter (``params * d``);
* **optimizer slots**: ``slots * params * d`` with 2 slots for Adam (first and second moments), 1 for
  momentum SGD, 0 for plain SGD (:class:`Optimizer`);
* **activations**: for each batch in flight, every map the backward pass reads, kept from its forward until
  its backward: the output of every layer whose kind allocates a tensor (``LayerKind.allocates``; views such
  as Flatten hold nothing) with the kind's values per channel (``LayerKind.values_per_channel``), counted on
  the part that owns the channel, and the model input's channels on their part. That is
  ``B * n * values * d`` per channel, which is ``hg.vertex_act_bytes`` scaled from the hypergraph's batch;
* **received maps**: a part that reads a channel owned by another part holds the copy it received until its
  backward (``B * n`` times the map, once per part, the receive volume of the feature-map nets). Partial
  sums of the fine grain are added into the reduction vertex's map on arrival and are not kept.

Not counted: the transient buffers of one layer's backward (its output gradient), TensorFlow's workspace
and allocator slack. The parameter and optimizer figures are exact (a test checks them against Keras and
an Adam optimizer built on the model); the activation figure is the model of ``docs/cost-model.md``.

Every figure is additive over vertices except the received maps, which depend on the placement:
:func:`vertex_memory` gives the additive part as numpy arrays (the partitioners' vertex weights and the
exact program's memory rows), :func:`part_memory` and :func:`placement_memory` the whole breakdown.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

import numpy as np

from hgpart.errors import BadOptionError
from hgpart.hypergraph import BROADCAST, DTYPE_BYTES, Hypergraph, sorted_unique

__all__ = ["Optimizer", "MemorySettings", "VertexMemory", "PartMemory", "vertex_memory", "part_memory",
           "received_bytes", "placement_memory", "parse_size", "format_size", "smallest_k_bound", "PlacementLike"]

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-z]*)\s*$", re.IGNORECASE)


class Optimizer(Enum):
    """The optimizer whose slots a device holds per parameter."""

    SGD = "sgd"
    MOMENTUM = "momentum"
    ADAM = "adam"

    @property
    def slots(self) -> int:
        """Values it keeps per parameter: Adam's two moments, momentum's velocity, none for SGD."""
        return {"sgd": 0, "momentum": 1, "adam": 2}[self.value]

    @classmethod
    def parse(cls, name: str | Optimizer, *, where: str = "--optimizer") -> Optimizer:
        """The optimizer called ``name`` (case-insensitive); an unknown name is one user error."""
        if isinstance(name, Optimizer):
            return name
        try:
            return cls(str(name).strip().lower())
        except ValueError:
            raise BadOptionError(f"unknown optimizer {name!r}", where=where,
                                 fix=f"use one of {', '.join(o.value for o in cls)}", option=where,
                                 value=name) from None


@dataclass(frozen=True)
class MemorySettings:
    """What the memory of a step depends on besides the placement."""

    batch_size: int
    inflight: int = 1
    optimizer: Optimizer = Optimizer.ADAM
    dtype_bytes: int = DTYPE_BYTES

    def __post_init__(self) -> None:
        for name in ("batch_size", "inflight", "dtype_bytes"):
            value = getattr(self, name)
            if int(value) < 1:
                option = "--" + name.replace("_", "-")
                raise BadOptionError(f"{name.replace('_', ' ')} {value} must be >= 1", where=option, option=option,
                                     value=value)

    @property
    def kept_batches(self) -> int:
        """Samples whose activations a part keeps at once: ``batch_size * inflight``."""
        return self.batch_size * self.inflight


@dataclass(frozen=True)
class VertexMemory:
    """Per-vertex bytes (numpy arrays, one entry per vertex of the hypergraph) that add up per part."""

    params: np.ndarray
    gradients: np.ndarray
    optimizer: np.ndarray
    activations: np.ndarray

    @property
    def static(self) -> np.ndarray:
        """Bytes that do not depend on the batch: parameters, gradients and optimizer slots."""
        return self.params + self.gradients + self.optimizer

    @property
    def total(self) -> np.ndarray:
        """Bytes every vertex brings to its part (everything but the received maps)."""
        return self.static + self.activations


@dataclass(frozen=True)
class PartMemory:
    """The memory of one part (device), in bytes, and the limit it is held to (``None``: no limit)."""

    part: int
    params: float
    gradients: float
    optimizer: float
    activations: float
    received: float
    limit: float | None = None

    @property
    def total(self) -> float:
        return self.params + self.gradients + self.optimizer + self.activations + self.received

    @property
    def fits(self) -> bool:
        """Within the limit (always, without one)."""
        return self.limit is None or self.total <= self.limit

    @property
    def use(self) -> float:
        """Total over the limit (``nan`` without one)."""
        return self.total / self.limit if self.limit else float("nan")


class PlacementLike(Protocol):
    """What :func:`placement_memory` reads of a :class:`hgpart.placement.Placement` (kept structural, since
    the placement module imports the metrics, which import this module)."""

    @property
    def k(self) -> int: ...

    @property
    def batch_size(self) -> int: ...

    def hypergraph(self) -> Hypergraph: ...

    def vertex_parts(self, hg: Hypergraph | None = None) -> np.ndarray: ...


def vertex_memory(hg: Hypergraph, settings: MemorySettings) -> VertexMemory:
    """The additive memory of every vertex of ``hg`` under ``settings`` (see the module docstring)."""
    params = hg.vertex_params * float(settings.dtype_bytes)
    per_sample = hg.vertex_act_bytes / float(hg.batch_size)  # the builder counted B_hg samples of d bytes
    scale = settings.dtype_bytes / DTYPE_BYTES
    return VertexMemory(
        params=params,
        gradients=params.copy(),
        optimizer=params * float(settings.optimizer.slots),
        activations=per_sample * (settings.kept_batches * scale),
    )


def received_bytes(hg: Hypergraph, parts: np.ndarray, k: int, settings: MemorySettings) -> np.ndarray:
    """Per part: the bytes of the feature maps it reads from other parts, kept for the batches in flight."""
    parts = np.asarray(parts, dtype=np.int64)
    keys = sorted_unique(hg.pin_nets() * k + parts[hg.net_pins])
    net_of, part_of = np.divmod(keys, k)
    other = (part_of != parts[hg.net_root][net_of]) & (hg.net_kind[net_of] == BROADCAST)
    per_batch = np.bincount(part_of[other], weights=hg.net_cost[net_of[other]], minlength=k)
    return per_batch / float(hg.batch_size) * (settings.kept_batches * settings.dtype_bytes / DTYPE_BYTES)


def part_memory(hg: Hypergraph, parts: np.ndarray, k: int, settings: MemorySettings, *,
                limit: float | None = None, vm: VertexMemory | None = None) -> list[PartMemory]:
    """The memory of every part of ``parts`` (one part id per vertex of ``hg``), against ``limit`` bytes.

    ``vm``: the vertex memory of ``hg`` under ``settings`` when the caller already has it.
    """
    parts = np.asarray(parts, dtype=np.int64)
    vm = vm or vertex_memory(hg, settings)
    par, grad, opt, act = (np.bincount(parts, weights=v, minlength=k)
                           for v in (vm.params, vm.gradients, vm.optimizer, vm.activations))
    recv = received_bytes(hg, parts, k, settings)
    return [PartMemory(q, float(par[q]), float(grad[q]), float(opt[q]), float(act[q]), float(recv[q]), limit=limit)
            for q in range(k)]


def placement_memory(pl: PlacementLike, *, batch_size: int | None = None, inflight: int = 1,
                     optimizer: str | Optimizer = "adam", limit: float | None = None) -> list[PartMemory]:
    """The memory of every part of a placement at ``batch_size`` (default: the placement's) with ``inflight``
    batches in flight and ``optimizer``'s slots, against ``limit`` bytes.

    Raises:
        BadOptionError: an unknown optimizer, or a batch size or in-flight count below 1.
    """
    settings = MemorySettings(batch_size=pl.batch_size if batch_size is None else batch_size, inflight=inflight,
                              optimizer=Optimizer.parse(optimizer))
    hg = pl.hypergraph()
    return part_memory(hg, pl.vertex_parts(hg), pl.k, settings, limit=limit)


def smallest_k_bound(vm: VertexMemory, limit: float) -> int:
    """A lower bound on the parts any placement needs: the total additive memory over the limit.

    Received maps only add to a part, so no placement with fewer parts fits; 0 when a single vertex alone
    exceeds the limit (no K fits).
    """
    total = vm.total
    if total.size and float(total.max()) > limit:
        return 0
    return max(1, math.ceil(float(total.sum()) / limit - 1e-12))


def parse_size(text: str, *, where: str = "--memory-limit") -> int:
    """Bytes of a size such as ``16GiB``, ``512MB``, ``1.5 GB``, ``8g`` or ``4096`` (bytes).

    ``KB``/``MB``/``GB``/``TB`` are powers of 1000, ``KiB``/``MiB``/``GiB``/``TiB`` and the bare letters
    ``K``/``M``/``G``/``T`` powers of 1024; case does not matter.

    Raises:
        BadOptionError: text that is not a positive number with a known unit.
    """
    m = _SIZE.match(str(text))
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        raise BadOptionError(f"cannot read the size {text!r}", where=where,
                             fix="write a number and a unit, e.g. 16GiB, 512MB or 8G", option=where, value=text)
    value = int(float(m.group(1)) * _UNITS[unit])
    if value < 1:
        raise BadOptionError(f"size {text!r} is not positive", where=where, fix="give at least one byte",
                             option=where, value=text)
    return value


def format_size(nbytes: float) -> str:
    """``nbytes`` in the largest binary unit that keeps it at or above 1 (``17.3 GiB``)."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes:.0f} B"
