"""The task graph of one model-parallel batch: per part, per vertex block, forward and backward work and transfers.

Usage::

    tpl = mp_template(placement, times, micro_batch=32)       # times: hgpart.simulate.costs.LayerTimes
    tasks = add_batch(engine, tpl, placer, batch=0, after=())  # forward, transfers, backward on the engine
    tasks.backward_of_part[p]                                  # what part p's optimizer update waits for

A *unit* is the share of one vertex block (a layer's filters, or in the fine grain its (filter, channel) pairs or
its reduction vertices) that one part owns; its forward and backward seconds are the weights of those vertices in
the hypergraph built with the layer times as work (so fused layers such as pooling and BatchNorm are charged to the
part that owns each channel, exactly as the cost model charges them). Transfers follow the hypergraph's nets
(``docs/cost-model.md``): a feature map goes once from its producer's part to every other part that reads it, fine
partial sums go from every non-root part to the reduction vertex's part; one message per (unit, destination part)
carries all the maps of that unit that the destination reads. Backward, each message returns as a gradient of the
same size, except into the input (no input gradient is computed). The loss waits for the forward of every output
unit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from hgpart.hypergraph import BROADCAST, Grain, Hypergraph, build_hypergraph
from hgpart.kinds import Role
from hgpart.placement import Placement, fresh_pieces
from hgpart.simulate.costs import LayerTimes
from hgpart.simulate.engine import Engine, Task, TaskKind

__all__ = ["Unit", "Message", "MPTemplate", "BatchTasks", "mp_template", "add_batch"]


@dataclass(frozen=True)
class Unit:
    """The share of one vertex block on one part."""

    label: str  # "<layer>" or "<layer>/<role>" for fine-grain blocks
    layer: str
    part: int
    forward: float
    backward: float
    is_input: bool


@dataclass(frozen=True)
class Message:
    """The maps of unit ``src`` read on part ``dst_part``: ``nbytes`` per batch, needed by the units ``feeds``."""

    src: int
    dst_part: int
    nbytes: float
    feeds: tuple[int, ...]


@dataclass(frozen=True)
class MPTemplate:
    """One batch of a placement at ``micro_batch`` samples, independent of the devices."""

    k: int
    micro_batch: int
    units: list[Unit]  # in topological order
    messages: list[Message]
    local: list[tuple[int, int]]  # (src unit, dst unit) on the same part
    part_params: list[float]
    hg: Hypergraph | None = field(default=None, repr=False, compare=False)  # built at micro_batch (for memory)
    parts: np.ndarray | None = field(default=None, repr=False, compare=False)  # part of every vertex of hg
    #: the units of the pieces the compiled async pipeline updates right after each step's gradients
    #: (:func:`hgpart.placement.fresh_pieces`): a step's forward of such a unit waits for the last step's backward
    fresh: frozenset[int] = frozenset()


@dataclass
class BatchTasks:
    """Engine task ids of one batch."""

    loss: int
    backward_of_part: dict[int, list[int]]
    #: per unit, its backward task (-1 for the input's units, which have none)
    backward: list[int] = field(default_factory=list)
    #: per part, the backward of its units that read from another part: the gradients it sends back
    cross_backward: dict[int, list[int]] = field(default_factory=dict)


def _unit_keys(hg: Hypergraph, parts: np.ndarray, k: int) -> np.ndarray:
    vblock = np.empty(hg.num_vertices, dtype=np.int64)
    for i, b in enumerate(hg.blocks):
        vblock[b.start : b.stop] = i
    return vblock * k + parts


def _edges(hg: Hypergraph, parts: np.ndarray, unit_of: np.ndarray, k: int) -> tuple[list[Message],
                                                                                list[tuple[int, int]]]:
    """Messages and same-part dependencies from the nets (see the module docstring)."""
    pin_net = hg.pin_nets()
    root = hg.net_root[pin_net]
    bcast = hg.net_kind[pin_net] == BROADCAST
    src_v = np.where(bcast, root, hg.net_pins)
    dst_v = np.where(bcast, hg.net_pins, root)
    keep = src_v != dst_v
    pin_net, src_v, dst_v = pin_net[keep], src_v[keep], dst_v[keep]
    su, du = unit_of[src_v], unit_of[dst_v]
    sp, dp = parts[src_v], parts[dst_v]
    same = sp == dp
    n_units = int(unit_of.max(initial=0)) + 1
    pairs = np.unique(su[same] * n_units + du[same])
    local = [(int(a), int(b)) for a, b in zip(pairs // n_units, pairs % n_units, strict=True) if a != b]
    r = ~same
    n_r, su_r, dp_r, du_r, sp_r = pin_net[r], su[r], dp[r], du[r], sp[r]
    # bytes: each net travels once per (sending part, receiving part)
    _, first = np.unique((n_r * k + sp_r) * k + dp_r, return_index=True)
    msg_key = su_r * k + dp_r
    keys, inverse = np.unique(msg_key[first], return_inverse=True)
    nbytes = np.bincount(inverse, weights=hg.net_cost[n_r[first]], minlength=keys.size)
    feed_pairs = np.unique(msg_key * n_units + du_r)
    feeds: dict[int, list[int]] = {}
    for key, d in zip(feed_pairs // n_units, feed_pairs % n_units, strict=True):
        feeds.setdefault(int(key), []).append(int(d))
    msgs = [Message(int(key // k), int(key % k), float(b), tuple(feeds[int(key)]))
            for key, b in zip(keys, nbytes, strict=True)]
    return msgs, local


def mp_template(placement: Placement, times: LayerTimes, *, micro_batch: int) -> MPTemplate:
    """The batch template of ``placement`` with ``times`` (at any batch; scaled to ``micro_batch``)."""
    graph = placement.graph
    scale = micro_batch / times.batch
    fwd = {n: s * scale for n, s in times.forward.items()}
    bwd = {n: s * scale for n, s in times.backward.items()}
    grain: Grain = "fine" if placement.grain == "fine" else "coarse"
    hg = build_hypergraph(graph, fwd, batch_size=micro_batch, grain=grain, work_unit="s")
    k = placement.k
    parts = placement.vertex_parts(hg)
    key = _unit_keys(hg, parts, k)
    size = len(hg.blocks) * k
    fw: np.ndarray = np.bincount(key, weights=hg.vertex_weight, minlength=size)
    bw: np.ndarray
    ratio = _common_ratio(fwd, bwd)
    if ratio is not None:  # every layer's backward is the same multiple of its forward (the FLOP model): scale
        bw = fw * ratio
    else:
        hg_b = build_hypergraph(graph, bwd, batch_size=micro_batch, grain=grain, work_unit="s")
        bw = np.bincount(key, weights=hg_b.vertex_weight, minlength=size)
    present = np.flatnonzero(np.bincount(key, minlength=size))
    unit_index = np.full(size, -1, dtype=np.int64)
    unit_index[present] = np.arange(present.size)
    units = []
    for u in present:
        blk = hg.blocks[int(u) // k]
        label = blk.layer if blk.role in ("filter", "input") else f"{blk.layer}/{blk.role}"
        units.append(Unit(label, blk.layer, int(u) % k, float(fw[u]), float(bw[u]), blk.role == "input"))
    msgs, local = _edges(hg, parts, unit_index[key], k)
    params = np.bincount(parts, weights=hg.vertex_params, minlength=k)
    return MPTemplate(k, micro_batch, units, msgs, local, [float(p) for p in params], hg=hg, parts=parts,
                      fresh=_fresh_units(placement, units))


def template_fresh_pieces(placement: Placement, units: Sequence[Unit]) -> set[tuple[str, int]]:
    """:func:`hgpart.placement.fresh_pieces` of ``placement``: a vertex layer's piece is its units on one part, and
    a fused layer with weights (BatchNorm) has a piece on every part owning some of its channels."""
    owner = placement.channel_parts()
    layout = {name: set(np.unique(parts).tolist()) for name, parts in owner.items()}
    pieces = {(u.layer, u.part) for u in units}
    for layer in placement.graph.layers:
        if layer.definition.weights and layer.definition.role is Role.FUSED:
            pieces |= {(layer.name, p) for p in layout[layer.name]}
    weighted = {layer.name for layer in placement.graph.layers if layer.definition.weights}
    pieces = {(name, p) for name, p in pieces if name in weighted}
    return fresh_pieces(placement.graph, layout, pieces, placement.loss_part(owner))


def _fresh_units(placement: Placement, units: Sequence[Unit]) -> frozenset[int]:
    """The units that read a fresh piece's weights: a vertex layer's own units on the piece's part; for a fused
    layer, the units on that part of the vertex layers whose outputs it reads, which the hypergraph charges it to."""
    anchors: dict[str, set[str]] = {}
    for layer in placement.graph.layers:
        role = layer.definition.role
        if role in (Role.INPUT, Role.VERTEX):
            anchors[layer.name] = {layer.name}
        elif role is Role.CONCAT:
            anchors[layer.name] = set().union(*(anchors[s] for s in layer.inputs))
        else:
            anchors[layer.name] = anchors[layer.inputs[0]]
    fresh = template_fresh_pieces(placement, units)
    held = {(a, p) for name, p in fresh for a in anchors[name] if a != name}  # fused pieces' output units
    return frozenset(i for i, u in enumerate(units)
                     if (u.layer, u.part) in fresh or (not u.label.endswith("/channel") and (u.layer, u.part) in held))


def _common_ratio(fwd: dict[str, float], bwd: dict[str, float]) -> float | None:
    """The one factor with ``bwd = factor * fwd`` for every layer, or ``None`` if there is none."""
    ratios = {bwd[n] / f for n, f in fwd.items() if f > 0}
    if len(ratios) != 1 or any(bwd[n] for n, f in fwd.items() if f <= 0):
        return None
    return ratios.pop()


#: maps a part to (its device, the compute resource) and a pair of parts to (seconds, ports) of a transfer
Placer = Callable[[int], tuple[int, str]]
Router = Callable[[int, int, float], tuple[float, tuple[str, ...]]]


class _Builder:
    """Adds one batch of a template to an engine (state: the task ids made so far)."""

    def __init__(self, eng: Engine, tpl: MPTemplate, place: Placer, route: Router, batch: int, tag: str,
                 micro: int = 0) -> None:
        self.eng, self.tpl, self.place, self.route, self.batch, self.tag = eng, tpl, place, route, batch, tag
        self.micro = micro
        n = len(tpl.units)
        self.in_local: list[list[int]] = [[] for _ in range(n)]
        self.out_local: list[list[int]] = [[] for _ in range(n)]
        for a, b in tpl.local:
            self.in_local[b].append(a)
            self.out_local[a].append(b)
        self.in_msgs: list[list[int]] = [[] for _ in range(n)]
        self.out_msgs: list[list[int]] = [[] for _ in range(n)]
        for m, msg in enumerate(tpl.messages):
            self.out_msgs[msg.src].append(m)
            for d in msg.feeds:
                self.in_msgs[d].append(m)

    def _send(self, name: str, src_part: int, dst_part: int, nbytes: float, deps: Sequence[int]) -> int:
        a, _ = self.place(src_part)
        b, _ = self.place(dst_part)
        seconds, ports = self.route(a, b, nbytes)
        return self.eng.add(Task(name, TaskKind.SEND, seconds, ports, device=a, peer=b, batch=self.batch,
                                 deps=tuple(deps), nbytes=nbytes))

    def forward(self, after: Sequence[int], gate: Mapping[int, Sequence[int]],
                fresh_after: Mapping[int, int]) -> tuple[list[int], list[int]]:
        tpl = self.tpl
        f: list[int] = []
        t: list[int] = [-1] * len(tpl.messages)
        for u, unit in enumerate(tpl.units):
            dev, res = self.place(unit.part)
            deps = [f[a] for a in self.in_local[u]] + [t[m] for m in self.in_msgs[u]]
            if self.in_msgs[u]:
                deps += gate.get(unit.part, ())
            if u in fresh_after:
                deps.append(fresh_after[u])
            f.append(self.eng.add(Task(f"fwd {unit.label}{self.tag}", TaskKind.COMPUTE, unit.forward, (res,),
                                       device=dev, batch=self.batch, deps=tuple(deps or after), micro=self.micro)))
            for m in self.out_msgs[u]:
                msg = tpl.messages[m]
                t[m] = self._send(f"map {unit.label}{self.tag}", unit.part, msg.dst_part, msg.nbytes, (f[u],))
        return f, t

    def backward(self, f: list[int], loss: int) -> list[int]:
        tpl = self.tpl
        b: list[int] = [-1] * len(tpl.units)
        g: dict[int, int] = {}
        for u in reversed(range(len(tpl.units))):
            unit = tpl.units[u]
            if unit.is_input:
                continue
            for m in self.out_msgs[u]:
                msg = tpl.messages[m]
                g[m] = self._send(f"grad {unit.label}{self.tag}", msg.dst_part, unit.part, msg.nbytes,
                                  [b[d] for d in msg.feeds])
            deps = [f[u]] + [b[d] for d in self.out_local[u]] + [g[m] for m in self.out_msgs[u]]
            if not self.out_local[u] and not self.out_msgs[u]:
                deps.append(loss)
            dev, res = self.place(unit.part)
            b[u] = self.eng.add(Task(f"bwd {unit.label}{self.tag}", TaskKind.COMPUTE, unit.backward, (res,),
                                     device=dev, batch=self.batch, deps=tuple(deps), micro=self.micro))
        return b


def add_batch(eng: Engine, tpl: MPTemplate, place: Placer, route: Router, *, batch: int,
              after: Sequence[int] = (), tag: str = "", gate: Mapping[int, Sequence[int]] | None = None,
              fresh_after: Mapping[int, int] | None = None, micro: int = 0) -> BatchTasks:
    """Add the forward, transfers and backward of one (micro-)batch; its first tasks wait for ``after``.
    ``gate[p]``: tasks every forward of part ``p`` that reads from another part also waits for (the runtime's
    1F1B order in one compiled call, :class:`hgpart.runtime.partitioned.CrossGate`). ``fresh_after[u]``: a task
    the forward of unit ``u`` also waits for (the last step's backward of a fresh unit, :attr:`MPTemplate.fresh`)."""
    bld = _Builder(eng, tpl, place, route, batch, tag, micro)
    f, _ = bld.forward(after, gate or {}, fresh_after or {})
    outputs = [f[u] for u in range(len(tpl.units)) if not bld.out_local[u] and not bld.out_msgs[u]]
    loss = eng.add(Task(f"loss{tag}", TaskKind.MARK, 0.0, batch=batch, deps=tuple(outputs)))
    b = bld.backward(f, loss)
    per_part: dict[int, list[int]] = {}
    cross: dict[int, list[int]] = {}
    for u, unit in enumerate(tpl.units):
        if b[u] >= 0:
            per_part.setdefault(unit.part, []).append(b[u])
            if bld.in_msgs[u]:
                cross.setdefault(unit.part, []).append(b[u])
    return BatchTasks(loss, per_part, cross_backward=cross, backward=b)
