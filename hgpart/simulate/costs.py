"""Seconds of work on a device kind: every layer's forward and backward pass, and an optimizer update.

Usage::

    t = layer_times(graph, cluster.device, batch=32)
    t.forward["block1_conv1"], t.backward["block1_conv1"], t.source
    update_seconds(params=1_000_000, device=cluster.device, optimizer="adam")
    u = layer_update_seconds(graph, t, cluster.device, optimizer="adam")   # per layer, the whole layer's update

A device kind with a ``profiles`` folder uses the measured profile of the model (same fingerprint) whose batch size
is nearest, scaled linearly to the batch asked for (and lifted to the profile's own whole training step where its
layers add up to less: :func:`step_floor`); with ``profile_cores`` only profiles measured with that many
cores count (a one-core worker is not described by a profile of the whole machine). Otherwise the layers' forward
FLOP counts are divided by the sustained rate (peak x efficiency), and the backward pass costs
:data:`hgpart.profile.BACKWARD_FLOP_FACTOR` times the forward one (input and weight gradients). An optimizer
update is memory-bound: it streams the bytes of :data:`UPDATE_BYTES` per parameter through the device's memory
bandwidth, unless the profile measured it: a profile with ``update_ms`` timed each weighted layer's update with
the fused Adam kernel the runtime runs, and :func:`layer_update_seconds` uses that (scaled by the bytes another
optimizer streams), since the kernel's speed on small and large tensors is not a bandwidth figure.
Where ``hgpart calibrate-split`` timed the runtime's unsplit step of the model on one device, what that step
spends beyond its layers and update is a cost of every call on the device (:func:`worker_call_cost`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from hgpart.cluster import DeviceSpec
from hgpart.errors import BadOptionError, HgpartError, MissingProfileError
from hgpart.layergraph import LayerGraph
from hgpart.metrics import OPTIMIZER_SLOTS
from hgpart.profile import BACKWARD_FLOP_FACTOR, Profile

__all__ = ["LayerTimes", "WorkerCall", "layer_times", "worker_call_cost", "measured_profiles", "step_floor",
           "step_without_update_ms", "layer_update_seconds", "update_seconds", "UPDATE_BYTES"]

#: bytes read and written per parameter by one update, float32: parameter, gradient and each optimizer slot are
#: read, parameter and slots written (sgd 3 x 4, momentum 5 x 4, adam 7 x 4)
UPDATE_BYTES = {opt: 4 * (3 + 2 * slots) for opt, slots in OPTIMIZER_SLOTS.items()}


@dataclass(frozen=True)
class LayerTimes:
    """Forward and backward seconds of every layer at ``batch`` samples on one device kind."""

    forward: dict[str, float]
    backward: dict[str, float]
    batch: int
    source: str
    #: measured seconds of one Adam update of each weighted layer (independent of the batch); empty: not measured
    update: dict[str, float] = field(default_factory=dict)

    def total(self) -> float:
        return sum(self.forward.values()) + sum(self.backward.values())

    def scaled(self, factor: float, why: str) -> LayerTimes:
        """Every layer's forward and backward time times ``factor`` (the updates as they are), ``why`` added to
        the source."""
        return LayerTimes({n: t * factor for n, t in self.forward.items()},
                          {n: t * factor for n, t in self.backward.items()}, self.batch,
                          f"{self.source}, {why}", self.update)


@dataclass(frozen=True)
class WorkerCall:
    """What one call of a model's training step costs its device beyond the layers and the update: the runtime's
    unsplit step of the model on one device, ``whole_ms`` at ``batch_size``, less ``layers_ms`` + ``update_ms``
    the simulator gives that step (none below zero)."""

    batch_size: int
    whole_ms: float
    layers_ms: float  # the forward and backward passes of every layer at batch_size (profile or FLOPs)
    update_ms: float  # the Adam update of every layer, which the measured step also ran

    @property
    def seconds(self) -> float:
        return max(0.0, self.whole_ms - self.layers_ms - self.update_ms) / 1000.0


def worker_call_cost(graph: LayerGraph, device: DeviceSpec, batch: int) -> WorkerCall | None:
    """The :class:`WorkerCall` of ``graph`` from the device's measured unsplit steps (``device.split_costs`` at one
    micro-batch, of this model name and input, at the batch size nearest ``batch`` by ratio), or None.

    Why: a profile times each layer in the profiler's harness, and its layers and update add up to less than the
    runtime's own step of the model on a worker (a remote function, its input on the worker, Adam), which
    ``hgpart calibrate-split`` times beside every placement it measures: by a few milliseconds per call whatever
    the batch, which is why the single device and data parallelism, one call per step, ran slower than their
    layers at small batches on every validation. The simulator charges that difference on the device once per
    call of the step (:func:`hgpart.simulate.run.simulate`), so the compiled pipeline's calls of many steps pay it
    once for all of them."""
    shape = tuple(graph.input_shape)
    mine = [c for c in device.split_costs if c.model == graph.name and c.micro_batches == 1
            and (c.input_shape is None or c.input_shape == shape)]
    if not mine:
        return None
    near = min({c.batch_size for c in mine}, key=lambda b: (abs(math.log(b / batch)), b))
    whole = statistics.median(c.whole_ms for c in mine if c.batch_size == near)
    ref = layer_times(graph, device, batch=near)
    update = sum(layer_update_seconds(graph, ref, device, "adam").values())
    return WorkerCall(near, whole, 1000.0 * ref.total(), 1000.0 * update)


def layer_times(graph: LayerGraph, device: DeviceSpec, *, batch: int) -> LayerTimes:
    """The layer times of ``graph`` at ``batch`` samples on ``device`` (see the module docstring)."""
    if batch < 1:
        raise BadOptionError(f"batch size {batch} must be >= 1", option="--batch-size", value=batch)
    if device.profiles is not None:
        prof = _matching_profile(graph, device.profiles, batch, cores=device.profile_cores)
        if prof is not None:
            floor = step_floor(prof, device)
            scale = batch / prof.batch_size / 1000.0 * floor
            update = {c.name: c.update_ms / 1000.0 for c in prof.layers if c.update_ms is not None}
            return LayerTimes({c.name: c.forward_ms * scale for c in prof.layers},
                              {c.name: c.backward_ms * scale for c in prof.layers}, batch,
                              f"measured profile of {device.kind} at batch {prof.batch_size}, scaled to {batch}"
                              + (f", x{floor:.3f} to its whole step" if floor > 1.0 else ""), update)
    rate = device.rate_flops
    if rate is None:
        raise MissingProfileError(f"no measured profile of {graph.name} {list(graph.input_shape)} in "
                                  f"{device.profiles}", where="--cluster", path=str(device.profiles),
                                  model=graph.name, batch_size=batch,
                                  fix=f"run `hgpart profile --model {graph.name}` on that device kind into the "
                                      "folder, or give the device peak_TFLOPs and efficiency")
    fwd = {layer.name: float(layer.flops) * batch / rate for layer in graph.layers}
    # a profiles folder that holds none of this model is easy to miss (e.g. a profile of another class count)
    missing = (f"; no measured profile of this model ({graph.name} {list(graph.input_shape)}, "
               f"{graph.num_classes} classes) in {device.profiles}") if device.profiles is not None else ""
    return LayerTimes(fwd, {n: BACKWARD_FLOP_FACTOR * s for n, s in fwd.items()}, batch,
                      f"FLOPs / ({rate / 1e12:.3g} TFLOP/s = peak x efficiency of {device.kind}){missing}")


def step_floor(prof: Profile, device: DeviceSpec) -> float:
    """The factor that lifts a profile's layers to its own whole training step, or 1 if they reach it already.

    The profiler times each layer alone and the whole step too (``quality.step_ms``: forward, backward and an
    SGD update, same threads, clock and statistic). The SGD update is taken off the whole step first (the
    profile's measured Adam updates scaled to SGD's bytes, ``UPDATE_BYTES``, or :func:`update_seconds` on
    ``device`` where the profile has none), since the simulator charges the optimizer update
    on its own. Where the layers then add up to less than the rest of the step, the step pays for something no
    layer alone does (on VGG16, feature maps that no longer fit the cache between layers), and the runtime's
    step cannot be faster than the profiler's own whole step of the same model on the same core: every layer is
    scaled up by the same factor. Where they add up to more (small layers, whose fixed per-op cost the whole
    step's graph amortises), they are kept: the runtime's step, dispatched op by op on a worker, measured close
    to their sum (``benchmarks/results/simulator_validation/``)."""
    layers = prof.layer_sum_ms
    step = step_without_update_ms(prof, device)
    if step is None or layers <= 0:
        return 1.0
    return max(1.0, step / layers)


def step_without_update_ms(prof: Profile, device: DeviceSpec) -> float | None:
    """A profile's whole training step less its SGD update, in ms (None: the profile has no whole step): what its
    layers' forward and backward passes take together in one graph (see :func:`step_floor`)."""
    q = prof.quality
    if q is None or not q.step_ms:
        return None
    sgd = UPDATE_BYTES["sgd"]
    if any(c.update_ms is not None for c in prof.layers):
        update_ms = sum(c.update_ms or 0.0 for c in prof.layers) * sgd / UPDATE_BYTES["adam"]
    else:
        update_ms = 1000.0 * update_seconds(sum(c.params for c in prof.layers), device, "sgd")
    return q.step_ms - update_ms


def _matching_profile(graph: LayerGraph, folder: Path, batch: int, *, cores: int | None = None) -> Profile | None:
    """The measured profile of ``graph`` in ``folder`` (made with ``cores`` cores, if given) with the batch size
    nearest ``batch`` (None: none)."""
    best: Profile | None = None
    for prof in measured_profiles(folder):
        if prof.fingerprint != graph.fingerprint():
            continue
        if cores is not None and prof.setup.cores != cores:
            continue
        if best is None or abs(prof.batch_size - batch) < abs(best.batch_size - batch):
            best = prof
    return best


def measured_profiles(folder: Path) -> list[Profile]:
    """The measured profiles in ``folder``, by file name; a file that is not a profile is skipped."""
    out = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            prof = Profile.load(path)
        except HgpartError:
            continue
        if prof.mode == "measured":
            out.append(prof)
    return out


def _update_bytes(optimizer: str) -> int:
    per = UPDATE_BYTES.get(optimizer)
    if per is None:
        raise BadOptionError(f"unknown optimizer {optimizer!r}", where="--optimizer", option="--optimizer",
                             value=optimizer, fix=f"use one of {sorted(UPDATE_BYTES)}")
    return per


def update_seconds(params: float, device: DeviceSpec, optimizer: str) -> float:
    """Seconds of one optimizer update of ``params`` parameters on ``device`` (memory-bound)."""
    return float(params) * _update_bytes(optimizer) / device.memory_bandwidth


def layer_update_seconds(graph: LayerGraph, times: LayerTimes, device: DeviceSpec, optimizer: str
                         ) -> dict[str, float]:
    """Seconds of one update of each layer's parameters (0 for a layer without any): measured where ``times``
    has it (Adam's, scaled by ``UPDATE_BYTES[optimizer] / UPDATE_BYTES["adam"]``), else :func:`update_seconds`."""
    scale = _update_bytes(optimizer) / UPDATE_BYTES["adam"]
    return {layer.name: (times.update[layer.name] * scale if layer.name in times.update and layer.params
                         else update_seconds(layer.params, device, optimizer)) for layer in graph.layers}
