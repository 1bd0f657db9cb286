"""Data parallelism: communication per step and per epoch, memory per device (thesis §5.1.7-5.1.8).

Usage::

    dp = data_parallel(params=138_357_544, n=2, batch_size=32, images=64_000, activation_bytes=act)
    dp.epoch_gib      # 2061.69, Table 5.14's "2,061 GB"

Conventions (the thesis's, Table 5.14, checked against its numbers):

* Ring all-reduce moves ``2 * (N - 1) * P * d`` bytes per step (``d = 4``).
* ``batch_size`` is the *global* batch of one step, shared by the N replicas
  (each replica processes ``B / N`` samples); an epoch is ``ceil(images / B)``
  steps. Table 5.14 uses ``images / BS`` steps independent of N.
* The thesis prints per-epoch volumes in "GB" that are GiB (2**30 bytes),
  truncated: N=2, BS=32 gives 2,061.69 -> "2,061".
* Memory per device: the full parameters, the optimizer state (slots per
  parameter: sgd 0, momentum 1, adam 2) and the activations of one replica at
  ``B / N`` samples (``activation_bytes`` is given at ``activation_batch``
  samples and scaled linearly). Same definitions as the model-parallel
  per-part memory in :mod:`hgpart.metrics`.
* Hypergraph model parallelism per epoch moves ``steps * 2 * volume(B)``,
  where ``volume(B)`` is the forward km1 volume, linear in ``B``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from hgpart.errors import BadOptionError
from hgpart.metrics import OPTIMIZER_SLOTS

__all__ = ["DataParallelCost", "data_parallel", "dp_step_bytes", "mp_epoch_bytes", "steps_per_epoch", "GIB"]

GIB = float(2**30)


@dataclass
class DataParallelCost:
    """Communication and memory of N-way data parallelism for one model."""

    n: int
    batch_size: int
    images: int
    params: int
    steps: int
    step_bytes: float
    epoch_bytes: float
    param_bytes: float
    optimizer_bytes: float
    activation_bytes: float
    memory_bytes: float
    optimizer: str

    @property
    def step_mib(self) -> float:
        return self.step_bytes / 2**20

    @property
    def epoch_gib(self) -> float:
        return self.epoch_bytes / GIB

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["epoch_gib"] = self.epoch_gib
        return d


def steps_per_epoch(images: int, batch_size: int) -> int:
    if images < 1 or batch_size < 1:
        raise BadOptionError(f"images ({images}) and batch size ({batch_size}) must be >= 1",
                             value=(images, batch_size))
    return math.ceil(images / batch_size)


def dp_step_bytes(params: int, n: int, *, dtype_bytes: int = 4) -> float:
    """Ring all-reduce volume of one step: ``2 (N - 1) P d`` bytes."""
    if n < 1:
        raise BadOptionError(f"N = {n} must be >= 1", option="n", value=n)
    return 2.0 * (n - 1) * params * dtype_bytes


def mp_epoch_bytes(forward_bytes: float, *, at_batch: int, batch_size: int, images: int) -> float:
    """Model-parallel bytes per epoch: steps x 2 x forward volume, the volume scaled from ``at_batch`` to B."""
    return steps_per_epoch(images, batch_size) * 2.0 * forward_bytes * batch_size / at_batch


def data_parallel(
    *,
    params: int,
    n: int,
    batch_size: int,
    images: int,
    activation_bytes: float = 0.0,
    activation_batch: int = 1,
    optimizer: str = "adam",
    dtype_bytes: int = 4,
) -> DataParallelCost:
    """Per-step and per-epoch communication and per-device memory of N-way data parallelism."""
    slots = OPTIMIZER_SLOTS.get(optimizer)
    if slots is None:
        raise BadOptionError(f"unknown optimizer {optimizer!r}", fix=f"use one of {sorted(OPTIMIZER_SLOTS)}",
                             option="optimizer", value=optimizer)
    if batch_size < n:
        raise BadOptionError(f"batch size {batch_size} is smaller than N = {n} replicas",
                             fix="use a global batch of at least N samples", option="batch_size", value=batch_size)
    steps = steps_per_epoch(images, batch_size)
    step = dp_step_bytes(params, n, dtype_bytes=dtype_bytes)
    pbytes = float(params) * dtype_bytes
    obytes = pbytes * slots
    abytes = float(activation_bytes) * (batch_size / n) / activation_batch
    return DataParallelCost(
        n=n, batch_size=batch_size, images=images, params=int(params), steps=steps, step_bytes=step,
        epoch_bytes=step * steps, param_bytes=pbytes, optimizer_bytes=obytes, activation_bytes=abytes,
        memory_bytes=pbytes + obytes + abytes, optimizer=optimizer,
    )
