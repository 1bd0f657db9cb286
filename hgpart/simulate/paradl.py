"""ParaDL's closed-form epoch times for data, filter and channel parallelism (Kahira et al. 2021, Table III and
Appendix equations 5-6, 15, 18-19), on the same inputs as the simulator, to put the two side by side.

Usage::

    inp = paradl_inputs(graph, times, cluster, optimizer="adam")
    data_parallel_epoch(inp, p=4, batch=32, images=10240)      # seconds
    filter_parallel_epoch(inp, p=4, batch=32, images=10240)    # = channel_parallel_epoch (same equations)

Notation as in the paper: ``FW_l``, ``BW_l`` per-sample forward and backward seconds of layer ``l``, ``WU_l`` its
update, ``|w_l|`` its parameters, ``|y_l|`` its output values per sample, ``delta`` = 4 bytes, ``alpha`` the link
latency, ``beta`` seconds per byte (the inverse bandwidth of the link between devices 0 and 1). Layers are the
weighted layers (convolutions, dense) in order; the activation a layer exchanges is the tensor the next weighted
layer reads (after its pooling), since pooling is local to a filter's owner. The equations are for a chain of
layers and assume no overlap of computation and communication:

* data:    ``D/p sum(FW+BW) + D/B sum(WU) + 2 D/B (p-1) (alpha + sum|w| delta beta / p)``
* filter:  ``D/p sum(FW+BW) + D/(pB) sum(WU) + 3 D/B (p-1) sum_{l<G} (alpha + B |y_l| delta beta / p)``
* channel: the same as filter (an Allreduce forward and an Allgather backward instead of the reverse).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hgpart.cluster import Cluster
from hgpart.kinds import Role
from hgpart.layergraph import LayerGraph
from hgpart.simulate.costs import LayerTimes, layer_update_seconds

__all__ = ["ParaDLInputs", "paradl_inputs", "data_parallel_epoch", "filter_parallel_epoch", "channel_parallel_epoch"]

DELTA = 4


@dataclass(frozen=True)
class ParaDLInputs:
    """Per weighted layer: per-sample forward + backward seconds, update seconds, exchanged values; the link."""

    fwbw: list[float]
    wu: list[float]
    params: list[float]
    y: list[float]
    alpha: float
    beta: float


def paradl_inputs(graph: LayerGraph, times: LayerTimes, cluster: Cluster, *, optimizer: str) -> ParaDLInputs:
    """The paper's per-layer inputs from the layer graph, the simulator's layer times and the cluster's link."""
    layers = graph.layers
    weighted = [i for i, layer in enumerate(layers) if layer.definition.role is Role.VERTEX]
    fwbw, wu, params, y = [], [], [], []
    update = layer_update_seconds(graph, times, cluster.device, optimizer)
    for n, i in enumerate(weighted):
        stop = weighted[n + 1] if n + 1 < len(weighted) else len(layers)
        group = layers[i:stop]  # the weighted layer and the fused layers that follow it
        fwbw.append(sum(times.forward[g.name] + times.backward[g.name] for g in group) / times.batch)
        params.append(float(sum(g.params for g in group)))
        wu.append(sum(update[g.name] for g in group))
        y.append(float(math.prod(group[-1].output_shape)))
    route = cluster.route(0, 1) if cluster.num_devices > 1 else None
    alpha = route.link.latency if route else 0.0
    beta = 1.0 / route.link.bandwidth if route else 0.0
    return ParaDLInputs(fwbw, wu, params, y, alpha, beta)


def data_parallel_epoch(inp: ParaDLInputs, *, p: int, batch: int, images: int) -> float:
    """Equations 5 + 6: computation of B/p samples per PE, a full update per step, a ring Allreduce."""
    d, b = float(images), float(batch)
    comp = d / p * sum(inp.fwbw) + d / b * sum(inp.wu)
    comm = 2 * d / b * (p - 1) * (inp.alpha + sum(inp.params) * DELTA * inp.beta / p)
    return comp + comm


def filter_parallel_epoch(inp: ParaDLInputs, *, p: int, batch: int, images: int) -> float:
    """Equations 18 + 15: 1/p of the work and updates per PE, an Allgather and an Allreduce per layer."""
    d, b = float(images), float(batch)
    comp = d / p * sum(inp.fwbw) + d / (p * b) * sum(inp.wu)
    comm = 3 * d / b * (p - 1) * sum(inp.alpha + b * y * DELTA * inp.beta / p for y in inp.y[:-1])
    return comp + comm


def channel_parallel_epoch(inp: ParaDLInputs, *, p: int, batch: int, images: int) -> float:
    """Equations 18 + 19: the same cost as filter parallelism."""
    return filter_parallel_epoch(inp, p=p, batch=batch, images=images)
