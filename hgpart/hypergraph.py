"""Coarse- and fine-grain hypergraph models of a CNN (thesis chapter 3).

Usage::

    hg = build_hypergraph(graph, profile.work(), batch_size=32, grain="coarse")
    hg.num_vertices, hg.num_nets, hg.num_pins

Vertices are tasks, nets are feature maps, net costs are the bytes of the
map at the given batch size, vertex weights are the profiled work. The
builder is vectorised: it loops over layers, never over pins, so the
1.6-million-vertex fine-grain VGG16 graph builds in seconds.

Rules (documented in ``docs/cost-model.md``; each kind's role, reading
rule and map sizes come from its definition in :mod:`hgpart.kinds`):

* **Vertices.** The input contributes one vertex per channel. Each *vertex
  layer* (Conv2D, DepthwiseConv2D, Dense, Add) contributes one vertex per
  output channel (coarse), optionally ``g`` channels per vertex. In the fine
  grain a Conv2D instead contributes one vertex per (filter, input channel)
  pair plus one reduction vertex per filter; DepthwiseConv2D (one input
  channel per filter), Dense and Add stay one vertex per output channel.
* **Fusion.** Per-channel layers (pooling, BatchNorm, activations, dropout,
  zero padding), Flatten and Concatenate create no vertices: each output
  channel is computed by the vertex that produced the channel (the reduction
  vertex in the fine grain); their work is spread evenly over those vertices.
* **Nets.** A feature map is (producing vertex, tensor it is read through).
  For every tensor read by at least one vertex layer there is one net per
  producing vertex: its root is the producer and its pins are every vertex
  that reads that channel - all filters of a Conv2D/Dense, filter
  ``j`` of a depthwise conv reads channel ``j // multiplier``, channel vertex
  ``(j, k)`` reads channel ``k``, and Add vertex ``j`` reads channel ``j`` of
  every input (so a skip connection is a net whose pins are every reader of
  that map, across branches). Cost = ``B * H * W * d`` of that tensor, i.e.
  after any pooling that follows the producer. The model output has no net.
* **Reduction nets** (fine grain): all channel vertices of filter ``j`` plus
  its reduction vertex ``r_j``; cost = one pre-pooling output map. Partial
  sums travel *to* the root, so its senders are the non-root parts.
* **Weights.** A vertex layer's profiled work is divided evenly among its
  vertices (the fine-grain Conv2D work among its channel vertices).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from hgpart.errors import HgpartError
from hgpart.kinds import Role
from hgpart.layergraph import Layer, LayerGraph

__all__ = [
    "VertexBlock",
    "Hypergraph",
    "build_hypergraph",
    "BROADCAST",
    "REDUCE",
    "DTYPE_BYTES",
    "sorted_unique",
]

BROADCAST = 0
REDUCE = 1
DTYPE_BYTES = 4

Grain = Literal["coarse", "fine"]


@dataclass(frozen=True)
class VertexBlock:
    """A contiguous range of vertex ids that belong to one layer and role.

    ``extent`` is the ungrouped size (``(F,)`` filters or ``(F, C)`` filter x
    input-channel pairs), ``group`` how many of each axis one vertex covers,
    ``shape`` the grouped size, row-major from ``start``.
    """

    layer: str
    role: str  # "input" | "filter" | "channel" | "reduce"
    start: int
    extent: tuple[int, ...]
    group: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(-(-e // g) for e, g in zip(self.extent, self.group, strict=True))

    @property
    def size(self) -> int:
        return int(math.prod(self.shape))

    @property
    def stop(self) -> int:
        return self.start + self.size

    def vertex_of(self, *index: np.ndarray) -> np.ndarray:
        """Vertex ids of ungrouped indices (one array per axis, broadcastable)."""
        if len(index) != len(self.extent):
            raise ValueError(f"block {self.layer}/{self.role} has {len(self.extent)} axes")
        if len(index) == 1:
            return self.start + np.asarray(index[0]) // self.group[0]
        ncg = self.shape[1]
        return self.start + (np.asarray(index[0]) // self.group[0]) * ncg + np.asarray(index[1]) // self.group[1]

    def expand(self, vertex_values: np.ndarray) -> np.ndarray:
        """Values per ungrouped element (e.g. the part of every filter) from per-vertex values."""
        if len(self.extent) == 1:
            return vertex_values[self.vertex_of(np.arange(self.extent[0]))]
        f = np.arange(self.extent[0])[:, None]
        k = np.arange(self.extent[1])[None, :]
        return vertex_values[self.vertex_of(f, k)]

    def group_sizes(self) -> np.ndarray:
        """How many ungrouped elements each vertex of the block covers (shape ``self.shape``)."""
        sizes = [np.minimum(g, e - np.arange(0, e, g)) for e, g in zip(self.extent, self.group, strict=True)]
        if len(sizes) == 1:
            return sizes[0].astype(np.float64)
        return np.outer(sizes[0], sizes[1]).astype(np.float64)


@dataclass
class Hypergraph:
    """A hypergraph in CSR form with the data the metrics need (its arrays are read-only).

    ``net_cost`` is in bytes at ``batch_size``; ``vertex_weight`` in the
    profile's work unit. ``net_root`` is the producer (broadcast nets) or the
    reduction vertex (reduce nets); ``net_kind`` says which.
    """

    model: str
    grain: str
    batch_size: int
    work_unit: str
    vertex_weight: np.ndarray
    vertex_params: np.ndarray
    vertex_act_bytes: np.ndarray
    net_ptr: np.ndarray
    net_pins: np.ndarray
    net_cost: np.ndarray
    net_root: np.ndarray
    net_kind: np.ndarray
    blocks: list[VertexBlock]
    build_seconds: float = 0.0
    fingerprint: str = ""
    _block_index: dict[tuple[str, str], VertexBlock] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        # read-only, so caches keyed on the object (partitioners/_memo.py) can never serve a changed graph
        for arr in (self.vertex_weight, self.vertex_params, self.vertex_act_bytes, self.net_ptr, self.net_pins,
                    self.net_cost, self.net_root, self.net_kind):
            arr.setflags(write=False)
        self._block_index = {(b.layer, b.role): b for b in self.blocks}

    @property
    def num_vertices(self) -> int:
        return int(self.vertex_weight.shape[0])

    @property
    def num_nets(self) -> int:
        return int(self.net_ptr.shape[0] - 1)

    @property
    def num_pins(self) -> int:
        return int(self.net_pins.shape[0])

    def block(self, layer: str, role: str) -> VertexBlock | None:
        return self._block_index.get((layer, role))

    def blocks_of(self, layer: str) -> list[VertexBlock]:
        return [b for b in self.blocks if b.layer == layer]

    def pin_nets(self) -> np.ndarray:
        """Net id of every pin (the CSR expanded)."""
        return np.repeat(np.arange(self.num_nets, dtype=np.int64), np.diff(self.net_ptr))

    def vertex_layer_index(self, graph: LayerGraph) -> np.ndarray:
        """Index (in ``graph.layers``) of the layer each vertex belongs to."""
        out = np.empty(self.num_vertices, dtype=np.int64)
        for b in self.blocks:
            out[b.start : b.stop] = graph.index(b.layer)
        return out

    def summary(self) -> dict[str, float | int | str]:
        return {
            "model": self.model,
            "grain": self.grain,
            "vertices": self.num_vertices,
            "nets": self.num_nets,
            "pins": self.num_pins,
            "total_work": float(self.vertex_weight.sum()),
            "work_unit": self.work_unit,
            "build_seconds": self.build_seconds,
        }


# --------------------------------------------------------------------------- builder


def sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct values, by sort and compare: numpy 2's hash-based ``np.unique`` is much slower on the tens of
    millions of pin keys a large fine-grain graph has (figures: benchmarks/results/README.md)."""
    keys = np.sort(keys, kind="quicksort")
    if keys.size == 0:
        return keys
    keep = np.empty(keys.size, dtype=bool)
    keep[0] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]


def _spatial(shape: tuple[int, ...]) -> int:
    return int(math.prod(shape[:-1])) if len(shape) > 1 else 1


def _mix(x: np.ndarray, salt: int) -> np.ndarray:
    """splitmix64 of ``x + salt`` (uint64, wrapping): a well-spread hash of every vertex id."""
    z = x.astype(np.uint64) + np.uint64(salt)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _merge_parallel_nets(
    pnet: np.ndarray, pv: np.ndarray, counts: np.ndarray, cost: np.ndarray, root: np.ndarray, kind: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Merge nets with the same root, kind and pin set into one net whose cost is the sum.

    Grouped graphs start with one net per channel; the channels of a grouped
    vertex that have the same readers collapse back into one net, so grouping
    still shrinks the hypergraph while every byte is charged only to the parts
    that read that channel. Pin sets are compared by two independent 64-bit
    hashes plus size, root and kind.
    """
    nn = len(counts)
    if nn == 0:
        return pnet, pv, counts, cost, root, kind
    starts = np.zeros(nn, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    with np.errstate(over="ignore"):
        h1 = np.add.reduceat(_mix(pv, 0x9E3779B97F4A7C15), starts)
        h2 = np.add.reduceat(_mix(pv, 0x632BE59BD9B4E019), starts)
    order = np.lexsort((np.arange(nn), h2, h1, counts, kind, root))
    k_sorted = np.stack([root[order], kind[order].astype(np.int64), counts[order], h1[order].view(np.int64),
                         h2[order].view(np.int64)], axis=1)
    new_group = np.ones(nn, dtype=bool)
    new_group[1:] = (k_sorted[1:] != k_sorted[:-1]).any(axis=1)
    gid_sorted = np.cumsum(new_group) - 1
    gid = np.empty(nn, dtype=np.int64)
    gid[order] = gid_sorted
    first = order[new_group]  # the lowest net id of every group (stable sort by id)
    # number the merged nets in order of their first member, keeping the original net order
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    new_id = rank[gid]
    merged_cost = np.bincount(new_id, weights=cost, minlength=len(first))
    rep = np.sort(first)
    keep_pin = np.zeros(nn, dtype=bool)
    keep_pin[rep] = True
    sel = keep_pin[pnet]
    return (new_id[pnet[sel]], pv[sel], counts[rep], merged_cost, root[rep], kind[rep])


class _Builder:
    """The state of one build: vertex blocks, the vertex owning every channel, then pins and nets."""

    def __init__(self, graph: LayerGraph, work: dict[str, float], *, batch_size: int, grain: str, group: int,
                 channel_group: int, dtype_bytes: int) -> None:
        self.graph = graph
        self.work = work
        self.B, self.d = int(batch_size), int(dtype_bytes)
        self.grain, self.group, self.channel_group = grain, group, channel_group
        self.blocks: list[VertexBlock] = []
        self.by_role: dict[tuple[str, str], VertexBlock] = {}
        self.out_vertex: dict[str, np.ndarray] = {}
        self.fine_split: set[str] = set()
        self.nv = 0
        self.src: dict[str, np.ndarray] = {}  # the vertex owning every channel of every tensor
        self.elems: dict[str, int] = {}  # values per channel of every tensor
        self.pin_net: list[np.ndarray] = []
        self.pin_v: list[np.ndarray] = []
        self.costs: list[np.ndarray] = []
        self.roots: list[np.ndarray] = []
        self.kinds: list[np.ndarray] = []
        self.nn = 0

    def add_block(self, layer: str, role: str, extent: tuple[int, ...], grp: tuple[int, ...]) -> VertexBlock:
        blk = VertexBlock(layer, role, self.nv, extent, grp)
        self.blocks.append(blk)
        self.by_role[(layer, role)] = blk
        self.nv = blk.stop
        return blk

    # ---- 1. vertex blocks and the vertex producing every output channel
    def make_vertices(self) -> None:
        for layer in self.graph.layers:
            role = layer.definition.role
            if role is Role.INPUT:
                blk = self.add_block(layer.name, "input", (layer.out_channels,), (1,))
                self.out_vertex[layer.name] = blk.vertex_of(np.arange(layer.out_channels))
            elif role is Role.VERTEX:
                F = layer.out_channels
                g = min(self.group, F)
                if self.grain == "fine" and layer.definition.fine_split:
                    C = layer.in_channels
                    self.add_block(layer.name, "channel", (F, C), (g, min(self.channel_group, C)))
                    red = self.add_block(layer.name, "reduce", (F,), (g,))
                    self.fine_split.add(layer.name)
                    self.out_vertex[layer.name] = red.vertex_of(np.arange(F))
                else:
                    blk = self.add_block(layer.name, "filter", (F,), (g,))
                    self.out_vertex[layer.name] = blk.vertex_of(np.arange(F))

    # ---- 2. channel sources of every tensor, weights, params, activations
    def spread_costs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        weight = np.zeros(self.nv, dtype=np.float64)
        params = np.zeros(self.nv, dtype=np.float64)
        act = np.zeros(self.nv, dtype=np.float64)
        for layer in self.graph.layers:
            w = float(self.work[layer.name])
            kind = layer.definition
            role = kind.role
            in_values = [self.elems[s] for s in layer.inputs]
            if role in (Role.INPUT, Role.VERTEX):
                self.src[layer.name] = self.out_vertex[layer.name]
            elif role is Role.CONCAT:
                self.src[layer.name] = np.concatenate([self.src[s] for s in layer.inputs])
            else:  # fused or view: the channels of its input
                self.src[layer.name] = self.src[layer.inputs[0]]
            self.elems[layer.name] = kind.values_per_channel(layer, in_values)
            s = self.src[layer.name]
            if layer.name in self.fine_split:
                self._fine_costs(layer, w, weight, params)
            elif role is Role.VERTEX:
                F = layer.out_channels
                np.add.at(weight, s, w / F)
                np.add.at(params, s, layer.params / F)
            elif role is not Role.INPUT:
                np.add.at(weight, s, w / len(s))
                np.add.at(params, s, layer.params / len(s))
            if kind.allocates:
                np.add.at(act, s, float(self.elems[layer.name] * self.B * self.d))
        return weight, params, act

    def _fine_costs(self, layer: Layer, w: float, weight: np.ndarray, params: np.ndarray) -> None:
        """Work and kernel on the channel vertices, the bias on the reduction vertices."""
        ch = self.by_role[(layer.name, "channel")]
        red = self.by_role[(layer.name, "reduce")]
        F, C = ch.extent
        sizes = ch.group_sizes().ravel()
        weight[ch.start : ch.stop] += w * sizes / (F * C)
        bias = layer.definition.bias_params(layer)
        params[ch.start : ch.stop] += (layer.params - bias) * sizes / (F * C)
        params[red.start : red.stop] += (bias / F) * red.group_sizes()

    # ---- 3. nets: one per (tensor read by a vertex layer, producing vertex)
    def make_nets(self) -> None:
        readers: set[str] = {t for layer in self.graph.layers if layer.is_vertex_layer for t in layer.inputs}
        net_of_channel: dict[str, np.ndarray] = {}
        grouped = self.group > 1 or self.channel_group > 1
        for t in (layer.name for layer in self.graph.layers if layer.name in readers):
            if grouped:
                # one net per channel: channels of one grouped vertex may have different readers (fine-grain
                # channel vertices, depthwise, Add); identical ones are merged by _merge_parallel_nets below
                uniq, inv = self.src[t], np.arange(len(self.src[t]))
            else:
                uniq, inv = np.unique(self.src[t], return_inverse=True)
            count = np.bincount(inv, minlength=len(uniq))
            net_of_channel[t] = self.nn + inv
            self._add_nets(uniq, count.astype(np.float64) * self.elems[t] * self.B * self.d, BROADCAST, uniq)
        for layer in self.graph.layers:
            if layer.is_vertex_layer:
                self._reader_pins(layer, net_of_channel)
                self._stats_net(layer)

    def _stats_net(self, layer: Layer) -> None:
        """A reduction over channels (LayerNormalization): one net over all of the layer's vertices."""
        values = layer.definition.stats_cost(layer)
        if values == 0:
            return
        blk = self.by_role[(layer.name, "filter")]
        ids = self._add_nets(np.array([blk.start]), np.array([float(values * self.B * self.d)]), BROADCAST, None)
        self.pin_net.append(np.repeat(ids, blk.size))
        self.pin_v.append(np.arange(blk.start, blk.stop))

    def _add_nets(self, roots: np.ndarray, cost: np.ndarray, kind: int, pins: np.ndarray | None) -> np.ndarray:
        """Append ``len(roots)`` nets (with one pin each from ``pins`` when given); returns their ids."""
        ids = self.nn + np.arange(len(roots))
        if pins is not None:
            self.pin_net.append(ids)
            self.pin_v.append(pins)
        self.roots.append(roots)
        self.costs.append(cost)
        self.kinds.append(np.full(len(roots), kind, dtype=np.int8))
        self.nn += len(roots)
        return ids

    def _reader_pins(self, layer: Layer, net_of_channel: dict[str, np.ndarray]) -> None:
        """Pins of ``layer``'s vertices on the nets of the channels they read (its kind's reading rule)."""
        read = layer.definition.read_map(layer)
        if read is not None:
            for t, shape in zip(layer.inputs, layer.input_shapes, strict=True):
                if len(self.src[t]) != shape[-1]:
                    raise HgpartError(f"layer {layer.name!r} reads {shape[-1]} channels of {t!r}, which has "
                                      f"{len(self.src[t])}", where=f"model {self.graph.name}")
                self.pin_net.append(net_of_channel[t][read].ravel())  # read: (F,) or (F, r) channels
                self.pin_v.append(np.repeat(self.out_vertex[layer.name], read.size // len(read)))
            return
        nets_t = net_of_channel[layer.inputs[0]]
        if layer.name in self.fine_split:
            self._fine_pins(layer, nets_t)
        else:  # every vertex reads every channel
            blk = self.by_role[(layer.name, "filter")]
            un = np.unique(nets_t)
            self.pin_net.append(np.repeat(un, blk.size))
            self.pin_v.append(np.tile(np.arange(blk.start, blk.stop), len(un)))

    def _fine_pins(self, layer: Layer, nets_t: np.ndarray) -> None:
        """Channel vertex (j, k) reads channel k; reduction net j joins filter j's channel vertices and r_j."""
        ch = self.by_role[(layer.name, "channel")]
        red = self.by_role[(layer.name, "reduce")]
        C = ch.extent[1]
        if len(nets_t) != C:
            raise HgpartError(
                f"layer {layer.name!r} expects {C} input channels but its input has {len(nets_t)}",
                where=f"model {self.graph.name}",
            )
        nfg, ncg = ch.shape
        J = np.arange(nfg)[:, None]
        k = np.arange(C)[None, :]
        self.pin_net.append(np.broadcast_to(nets_t[None, :], (nfg, C)).ravel())
        self.pin_v.append((ch.start + J * ncg + k // ch.group[1]).ravel())
        ids = self._add_nets(red.start + np.arange(nfg),
                             red.group_sizes() * _spatial(layer.output_shape) * self.B * self.d, REDUCE, None)
        self.pin_net.append(np.repeat(ids, ncg + 1))
        self.pin_v.append(np.concatenate([ch.start + J * ncg + np.arange(ncg)[None, :], red.start + J], axis=1).ravel())

    # ---- 4. the CSR, without uncuttable nets, grouped nets merged
    def csr(self) -> tuple[np.ndarray, ...]:
        nv, nn = self.nv, self.nn
        net_cost = np.concatenate(self.costs) if self.costs else np.zeros(0)
        net_root = np.concatenate(self.roots).astype(np.int64) if self.roots else np.zeros(0, np.int64)
        net_kind = np.concatenate(self.kinds) if self.kinds else np.zeros(0, np.int8)
        if self.pin_net:
            keys = sorted_unique(np.concatenate(self.pin_net).astype(np.int64) * nv
                                 + np.concatenate(self.pin_v).astype(np.int64))
            pnet, pv = np.divmod(keys, nv)
        else:
            pnet = pv = np.zeros(0, np.int64)
        counts = np.bincount(pnet, minlength=nn)
        keep = counts >= 2  # drop nets whose pins are all one vertex (cannot be cut)
        if not keep.all():
            remap = np.cumsum(keep) - 1
            pin_keep = keep[pnet]
            pnet, pv = remap[pnet[pin_keep]], pv[pin_keep]
            net_cost, net_root, net_kind, counts = net_cost[keep], net_root[keep], net_kind[keep], counts[keep]
        if self.group > 1 or self.channel_group > 1:
            pnet, pv, counts, net_cost, net_root, net_kind = _merge_parallel_nets(
                pnet, pv, counts, net_cost, net_root, net_kind
            )
        net_ptr = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=net_ptr[1:])
        return net_ptr, pv.astype(np.int64), net_cost, net_root, net_kind


def build_hypergraph(
    graph: LayerGraph,
    work: dict[str, float],
    *,
    batch_size: int,
    grain: Grain = "coarse",
    group: int = 1,
    channel_group: int = 1,
    work_unit: str = "ms",
    dtype_bytes: int = DTYPE_BYTES,
) -> Hypergraph:
    """Build the coarse- or fine-grain hypergraph of ``graph``.

    ``group`` puts that many consecutive filters (output channels) of each
    vertex layer into one vertex; ``channel_group`` does the same for the
    input-channel axis of fine-grain Conv2D vertices.
    """
    if grain not in ("coarse", "fine"):
        raise HgpartError(f"unknown grain {grain!r}", fix="use 'coarse' or 'fine'")
    if group < 1 or channel_group < 1:
        raise HgpartError("group sizes must be >= 1", fix="pass --group 1 or more")
    if batch_size < 1:
        raise HgpartError(f"batch size {batch_size} must be >= 1")
    missing = [layer.name for layer in graph.layers if layer.name not in work]
    if missing:
        raise HgpartError(
            f"the work of {len(missing)} layers is missing (first: {missing[0]!r})",
            fix="use a profile made for this model",
        )
    t0 = time.perf_counter()
    b = _Builder(graph, work, batch_size=batch_size, grain=grain, group=group, channel_group=channel_group,
                 dtype_bytes=dtype_bytes)
    b.make_vertices()
    weight, params, act = b.spread_costs()
    b.make_nets()
    net_ptr, net_pins, net_cost, net_root, net_kind = b.csr()
    return Hypergraph(
        model=graph.name,
        grain=grain,
        batch_size=b.B,
        work_unit=work_unit,
        vertex_weight=weight,
        vertex_params=params,
        vertex_act_bytes=act,
        net_ptr=net_ptr,
        net_pins=net_pins,
        net_cost=net_cost,
        net_root=net_root,
        net_kind=net_kind,
        blocks=b.blocks,
        build_seconds=time.perf_counter() - t0,
        fingerprint=graph.fingerprint(),
    )
