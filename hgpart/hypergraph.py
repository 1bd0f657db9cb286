"""Coarse- and fine-grain hypergraph models of a CNN (thesis chapter 3).

Usage::

    hg = build_hypergraph(graph, profile.work(), batch_size=32, grain="coarse")
    hg.num_vertices, hg.num_nets, hg.num_pins

Vertices are tasks, nets are feature maps, net costs are the bytes of the
map at the given batch size, vertex weights are the profiled work. The
builder is vectorised: it loops over layers, never over pins, so the
1.6-million-vertex fine-grain VGG16 graph builds in seconds.

Rules (documented in ``docs/cost-model.md``):

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
from hgpart.layergraph import LayerGraph

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
    """A hypergraph in CSR form with the data the metrics need.

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
    """Sorted distinct values. numpy 2's hash-based ``np.unique`` is ~10x slower on tens of millions of keys."""
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
    B, d = int(batch_size), int(dtype_bytes)

    # ---- 1. vertex blocks and the vertex producing every output channel
    blocks: list[VertexBlock] = []
    by_role: dict[tuple[str, str], VertexBlock] = {}
    out_vertex: dict[str, np.ndarray] = {}
    nv = 0

    def add_block(layer: str, role: str, extent: tuple[int, ...], grp: tuple[int, ...]) -> VertexBlock:
        nonlocal nv
        blk = VertexBlock(layer, role, nv, extent, grp)
        blocks.append(blk)
        by_role[(layer, role)] = blk
        nv = blk.stop
        return blk

    fine_conv: set[str] = set()
    for layer in graph.layers:
        if layer.kind == "input":
            blk = add_block(layer.name, "input", (layer.out_channels,), (1,))
            out_vertex[layer.name] = blk.vertex_of(np.arange(layer.out_channels))
        elif layer.is_vertex_layer:
            F = layer.out_channels
            g = min(group, F)
            if grain == "fine" and layer.kind == "conv2d":
                C = layer.in_channels
                add_block(layer.name, "channel", (F, C), (g, min(channel_group, C)))
                red = add_block(layer.name, "reduce", (F,), (g,))
                fine_conv.add(layer.name)
                out_vertex[layer.name] = red.vertex_of(np.arange(F))
            else:
                blk = add_block(layer.name, "filter", (F,), (g,))
                out_vertex[layer.name] = blk.vertex_of(np.arange(F))

    weight = np.zeros(nv, dtype=np.float64)
    params = np.zeros(nv, dtype=np.float64)
    act = np.zeros(nv, dtype=np.float64)

    # ---- 2. channel sources of every tensor, weights, params, activations
    src: dict[str, np.ndarray] = {}
    elems: dict[str, int] = {}
    for layer in graph.layers:
        w = float(work[layer.name])
        if layer.kind == "input":
            src[layer.name] = out_vertex[layer.name]
            elems[layer.name] = _spatial(layer.output_shape)
        elif layer.is_vertex_layer:
            F = layer.out_channels
            src[layer.name] = out_vertex[layer.name]
            elems[layer.name] = _spatial(layer.output_shape)
            if layer.name in fine_conv:
                ch = by_role[(layer.name, "channel")]
                red = by_role[(layer.name, "reduce")]
                C = ch.extent[1]
                sizes = ch.group_sizes().ravel()
                weight[ch.start : ch.stop] += w * sizes / (F * C)
                bias = F if layer.config.get("use_bias", True) else 0
                params[ch.start : ch.stop] += (layer.params - bias) * sizes / (F * C)
                params[red.start : red.stop] += (bias / F) * red.group_sizes()
            else:
                np.add.at(weight, out_vertex[layer.name], w / F)
                np.add.at(params, out_vertex[layer.name], layer.params / F)
        elif layer.kind == "concat":
            src[layer.name] = np.concatenate([src[s] for s in layer.inputs])
            sizes = {elems[s] for s in layer.inputs}
            if len(sizes) != 1:
                raise HgpartError(
                    f"layer {layer.name!r} concatenates maps of different spatial sizes {sorted(sizes)}",
                    where=f"model {graph.name}", fix="only channel-axis concatenation is supported",
                )
            elems[layer.name] = sizes.pop()
        elif layer.kind == "flatten":
            src[layer.name] = src[layer.inputs[0]]
            elems[layer.name] = elems[layer.inputs[0]]
        else:  # per-channel layer
            src[layer.name] = src[layer.inputs[0]]
            if layer.kind in ("global_avg_pool", "global_max_pool"):
                elems[layer.name] = 1
            elif len(layer.output_shape) >= 2:
                elems[layer.name] = _spatial(layer.output_shape)
            else:  # per-feature layer after Flatten or Dense
                elems[layer.name] = elems[layer.inputs[0]]
        s = src[layer.name]
        if not layer.is_vertex_layer and layer.kind != "input":
            np.add.at(weight, s, w / len(s))
            np.add.at(params, s, layer.params / len(s))
        if layer.kind != "flatten":  # Flatten is a view, it allocates nothing
            np.add.at(act, s, float(elems[layer.name] * B * d))

    # ---- 3. nets: one per (tensor read by a vertex layer, producing vertex)
    readers: dict[str, list[str]] = {}
    for layer in graph.layers:
        if layer.is_vertex_layer:
            for t in layer.inputs:
                readers.setdefault(t, [])
                if layer.name not in readers[t]:
                    readers[t].append(layer.name)

    pin_net: list[np.ndarray] = []
    pin_v: list[np.ndarray] = []
    costs: list[np.ndarray] = []
    roots: list[np.ndarray] = []
    kinds: list[np.ndarray] = []
    net_of_channel: dict[str, np.ndarray] = {}
    nn = 0
    for t in (layer.name for layer in graph.layers if layer.name in readers):
        if group > 1 or channel_group > 1:
            # one net per channel: channels of one grouped vertex may have different readers (fine-grain
            # channel vertices, depthwise, Add); identical ones are merged by _merge_parallel_nets below
            uniq, inv = src[t], np.arange(len(src[t]))
        else:
            uniq, inv = np.unique(src[t], return_inverse=True)
        count = np.bincount(inv, minlength=len(uniq))
        net_of_channel[t] = nn + inv
        ids = nn + np.arange(len(uniq))
        pin_net.append(ids)
        pin_v.append(uniq)
        roots.append(uniq)
        costs.append(count.astype(np.float64) * elems[t] * B * d)
        kinds.append(np.full(len(uniq), BROADCAST, dtype=np.int8))
        nn += len(uniq)

    for layer in graph.layers:
        if not layer.is_vertex_layer:
            continue
        F = layer.out_channels
        if layer.kind == "add":
            for t in layer.inputs:
                if len(src[t]) != F:
                    raise HgpartError(
                        f"Add layer {layer.name!r} adds {len(src[t])} channels to {F}",
                        where=f"model {graph.name}",
                    )
                pin_net.append(net_of_channel[t])
                pin_v.append(out_vertex[layer.name])
            continue
        t = layer.inputs[0]
        nets_t = net_of_channel[t]
        if layer.kind == "depthwise_conv2d":
            C = len(src[t])
            mult = F // C
            pin_net.append(nets_t[np.arange(F) // mult])
            pin_v.append(out_vertex[layer.name])
        elif layer.name in fine_conv:
            ch = by_role[(layer.name, "channel")]
            red = by_role[(layer.name, "reduce")]
            C = ch.extent[1]
            if len(nets_t) != C:
                raise HgpartError(
                    f"layer {layer.name!r} expects {C} input channels but its input has {len(nets_t)}",
                    where=f"model {graph.name}",
                )
            nfg, ncg = ch.shape
            J = np.arange(nfg)[:, None]
            k = np.arange(C)[None, :]
            pin_net.append(np.broadcast_to(nets_t[None, :], (nfg, C)).ravel())
            pin_v.append((ch.start + J * ncg + k // ch.group[1]).ravel())
            # reduction nets: channel vertices of filter group J plus r_J
            ids = nn + np.arange(nfg)
            pin_net.append(np.repeat(ids, ncg + 1))
            pin_v.append(
                np.concatenate(
                    [ch.start + J * ncg + np.arange(ncg)[None, :], red.start + J], axis=1
                ).ravel()
            )
            roots.append(red.start + np.arange(nfg))
            costs.append(red.group_sizes() * _spatial(layer.output_shape) * B * d)
            kinds.append(np.full(nfg, REDUCE, dtype=np.int8))
            nn += nfg
        else:  # conv2d coarse, dense: every vertex reads every channel
            blk = by_role[(layer.name, "filter")]
            un = np.unique(nets_t)
            pin_net.append(np.repeat(un, blk.size))
            pin_v.append(np.tile(np.arange(blk.start, blk.stop), len(un)))

    net_cost = np.concatenate(costs) if costs else np.zeros(0)
    net_root = np.concatenate(roots).astype(np.int64) if roots else np.zeros(0, np.int64)
    net_kind = np.concatenate(kinds) if kinds else np.zeros(0, np.int8)
    if pin_net:
        keys = sorted_unique(np.concatenate(pin_net).astype(np.int64) * nv + np.concatenate(pin_v).astype(np.int64))
        pnet, pv = np.divmod(keys, nv)
    else:
        pnet = pv = np.zeros(0, np.int64)
    counts = np.bincount(pnet, minlength=nn)
    # drop nets whose pins are all one vertex (cannot be cut)
    keep = counts >= 2
    if not keep.all():
        remap = np.cumsum(keep) - 1
        pin_keep = keep[pnet]
        pnet, pv = remap[pnet[pin_keep]], pv[pin_keep]
        net_cost, net_root, net_kind, counts = net_cost[keep], net_root[keep], net_kind[keep], counts[keep]
    if group > 1 or channel_group > 1:
        pnet, pv, counts, net_cost, net_root, net_kind = _merge_parallel_nets(
            pnet, pv, counts, net_cost, net_root, net_kind
        )
    net_ptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=net_ptr[1:])

    return Hypergraph(
        model=graph.name,
        grain=grain,
        batch_size=B,
        work_unit=work_unit,
        vertex_weight=weight,
        vertex_params=params,
        vertex_act_bytes=act,
        net_ptr=net_ptr,
        net_pins=pv.astype(np.int64),
        net_cost=net_cost,
        net_root=net_root,
        net_kind=net_kind,
        blocks=blocks,
        build_seconds=time.perf_counter() - t0,
        fingerprint=graph.fingerprint(),
    )
