"""Structured fine-grain placements (2-D checkerboard) and per-layer vertex grouping.

Usage::

    res = partition(hg, k=16, backend="block")            # checkerboard baseline, any grain
    small, vmap = contract(hg, k=16)                      # grouped copy of a fine hypergraph
    parts = vmap_parts[vmap]                               # grouped parts back to every vertex

Checkerboard: in the fine grain every Conv2D is a dense filters x channels
block of tasks. With ``K = a * b`` (``a`` the divisor of K nearest to
sqrt(K)), filter rows are split into ``a`` contiguous bands and input-channel
columns into ``b`` bands; task ``(f, c)`` goes to part ``band(f) * b +
band(c)``, so every layer is spread evenly over all K parts, and a
partial-sum reduction spans only ``b`` parts, a feature map only ``a``
parts plus its producer. The reduction vertex of filter ``f`` sits at the
column band its channel index has in the next layer, so the reading band
already holds it. Dense layers, filters of coarse-grain layers and the input
are split into K contiguous bands. Balance: a layer the grid cannot balance
(too few channels or filters) is cut into K bands of its task list, and the
backend spreads the reductions over the rows when they are too heavy for
the diagonal (see :func:`checkerboard_parts` and :func:`run`). It is the
structured baseline the partitioners must beat (``hgpart compare``,
``benchmarks/partition_quality.py``, backends ``block`` and
``block-vcycles``, the latter Mt-KaHyPar V-cycles started from it).

Grouping: :func:`contract` merges, per layer, ``g_f`` consecutive filters
and ``g_c`` consecutive channels into one vertex (chosen from K and the layer
widths so each conv layer keeps about :data:`TARGET_PER_LAYER` vertices and at
least K/2 along each split axis when it can), sums vertex weights, maps pins,
drops pins repeated within a net and nets inside one vertex, and merges nets
with identical pin sets (costs added). Every placement of the small
hypergraph is a placement of the full one with the same km1 restricted to
unsplit groups, so partitioning it is a fast, honest approximation; the
result is always expanded and measured at full resolution.
"""

from __future__ import annotations

import math
import time

import numpy as np

from hgpart.hypergraph import Hypergraph, VertexBlock, sorted_unique
from hgpart.metrics import balance_class
from hgpart.partitioners.base import PartitionResult

__all__ = ["checkerboard_parts", "contract", "contract_with_map", "choose_groups", "run", "TARGET_PER_LAYER",
           "grouped_family"]

#: vertices a grouped conv layer keeps (about a 64 x 64 grid of tasks)
TARGET_PER_LAYER = 4096


def _grid(k: int) -> tuple[int, int]:
    a = max(d for d in range(1, int(math.isqrt(k)) + 1) if k % d == 0)
    return a, k // a  # a <= b


def _bands(n: int, parts: int) -> np.ndarray:
    """Band (0..parts-1) of each of n indices, contiguous and as even as possible."""
    return (np.arange(n) * parts) // max(n, 1)


#: a layer whose largest grid rectangle holds more than this much above its average per part is laid out in K
#: bands of its task list instead (see :func:`checkerboard_parts`)
THIN_SLACK = 0.05


def _thin(shape: tuple[int, ...], a: int, b: int) -> bool:
    """The a x b grid cannot balance this filters x channels block within :data:`THIN_SLACK`."""
    nf, nc = shape
    return -(-nf // a) * -(-nc // b) * a * b > (1.0 + THIN_SLACK) * nf * nc


def _spread_rows(n: int, a: int, b: int) -> np.ndarray:
    """Row band of each of ``n`` reductions when the reductions of every column band are spread over all rows."""
    cols = _bands(n, b)
    first = np.searchsorted(cols, cols, side="left")
    size = np.bincount(cols, minlength=b)[cols]
    return ((np.arange(n) - first) * a) // size


def checkerboard_parts(hg: Hypergraph, k: int, *, spread_reductions: bool = False) -> np.ndarray:
    """Checkerboard placement of ``hg`` (fine or coarse, grouped or not).

    A *thin* layer, one the grid cannot balance (a first conv with 3 input
    channels would sit on 3 of 8 column bands of a 4 x 8 grid), is cut into K
    contiguous bands of its tasks in filter-major order instead, and each
    reduction sits with its filter's first task.

    The reduction of filter ``f`` goes to the column band that reads its
    map next, so the map costs no extra part. By default it also keeps ``f``'s
    row band (the "diagonal", no extra part on the partial sums either); the
    reductions of a layer then sit on only about ``a + b`` of the K parts,
    which breaks the balance when they carry much work (they hold the
    per-channel layers fused after the conv). ``spread_reductions`` spreads the
    reductions of each column band over all row bands, at the cost of one
    extra part on the partial-sum net of most filters.
    """
    a, b = _grid(k)
    parts = np.zeros(hg.num_vertices, dtype=np.int64)
    for blk in hg.blocks:
        if blk.role == "channel":
            nfg, ncg = blk.shape
            if _thin(blk.shape, a, b):
                parts[blk.start : blk.stop] = _bands(nfg * ncg, k)
            else:
                parts[blk.start : blk.stop] = (_bands(nfg, a)[:, None] * b + _bands(ncg, b)[None, :]).ravel()
        elif blk.role == "reduce":
            n = blk.size
            ch = hg.block(blk.layer, "channel")
            if ch is not None and _thin(ch.shape, a, b):
                parts[blk.start : blk.stop] = _bands(ch.size, k)[np.arange(n) * ch.shape[1]]
            else:
                rows = _spread_rows(n, a, b) if spread_reductions else _bands(n, a)
                parts[blk.start : blk.stop] = rows * b + _bands(n, b)
        else:
            parts[blk.start : blk.stop] = _bands(blk.size, k)
    return parts


def choose_groups(blk: VertexBlock, k: int, target: int = TARGET_PER_LAYER, side: int | None = None) -> tuple[int, ...]:
    """Group sizes for one (ungrouped) block: about ``target`` vertices, >= K/2 groups along each axis.

    Why K/2: a layer spread over all K parts still gets whole groups of
    about 2 per part along each axis (4 per part in the 2-D block), enough
    for the balance, while the graph stays more than ten times smaller than
    the ungrouped one and Mt-KaHyPar on it matches the ungrouped run in a
    fraction of the time (figures in ``benchmarks/results/partition_quality/README.md``).
    """
    if side is None:
        side = max(int(math.isqrt(target)), k // 2)
    if len(blk.extent) == 1:
        (f,) = blk.extent
        keep = max(k, 4 * side)
        return (max(1, f // keep),)
    f, c = blk.extent
    return (max(1, f // side), max(1, c // side))


def contract(hg: Hypergraph, k: int, *, target: int = TARGET_PER_LAYER,
             side: int | None = None) -> tuple[Hypergraph, np.ndarray]:
    """A grouped copy of ``hg`` and the map old vertex -> new vertex (see module docstring).

    ``side`` fixes the groups per axis of every 2-D block (and ``max(K, 4 side)`` vertices per 1-D block)
    instead of deriving them from ``target`` and K.
    """
    t0 = time.perf_counter()
    vmap = np.empty(hg.num_vertices, dtype=np.int64)
    blocks: list[VertexBlock] = []
    nv = 0
    # reduce blocks follow the filter grouping of their channel block
    fgroup: dict[str, int] = {}
    for blk in hg.blocks:
        if blk.role == "channel":
            fgroup[blk.layer] = choose_groups(blk, k, target, side)[0]
    for blk in hg.blocks:
        if any(g != 1 for g in blk.group):
            grp = blk.group  # already grouped: keep as is
            new = VertexBlock(blk.layer, blk.role, nv, blk.extent, grp)
            vmap[blk.start : blk.stop] = nv + np.arange(blk.size)
        else:
            if blk.role == "reduce" and blk.layer in fgroup:
                grp = (fgroup[blk.layer],)
            elif blk.role == "input":
                grp = (1,)
            else:
                grp = choose_groups(blk, k, target, side)
            new = VertexBlock(blk.layer, blk.role, nv, blk.extent, grp)
            if len(blk.extent) == 1:
                vmap[blk.start : blk.stop] = new.vertex_of(np.arange(blk.extent[0]))
            else:
                f = np.arange(blk.extent[0])[:, None]
                c = np.arange(blk.extent[1])[None, :]
                vmap[blk.start : blk.stop] = new.vertex_of(f, c).ravel()
        blocks.append(new)
        nv = new.stop
    out = contract_with_map(hg, vmap, blocks, merge_nets=True)
    out.build_seconds = time.perf_counter() - t0
    return out, vmap


def _family_groups(hg: Hypergraph, side: int, min_1d: int, finer: dict[tuple[str, str], tuple[int, ...]] | None
                   ) -> dict[tuple[str, str], tuple[int, ...]]:
    """Group sizes per block for ``side`` groups per axis, each a multiple of the ``finer`` grouping's."""
    out: dict[tuple[str, str], tuple[int, ...]] = {}
    for blk in hg.blocks:
        key = (blk.layer, blk.role)
        base = finer[key] if finer is not None else blk.group
        if blk.role == "input":
            out[key] = base
            continue
        if blk.role == "reduce" and (blk.layer, "channel") in out:
            out[key] = (out[(blk.layer, "channel")][0],)  # a filter group and its reduction stay together
            continue
        want = [e // side for e in blk.extent] if len(blk.extent) == 2 else [blk.extent[0] // max(min_1d, 4 * side)]
        out[key] = tuple(b * max(1, w // b) for b, w in zip(base, want, strict=True))
    return out


def grouped_family(hg: Hypergraph, sides: tuple[int, ...], *, min_1d: int = 128
                   ) -> dict[int, tuple[Hypergraph, np.ndarray]]:
    """Nested groupings of ``hg``, one per ``side`` (groups per axis of every 2-D block): side -> (graph, vmap).

    Why nested: every grouping is a coarsening of the next finer one (group
    sizes are multiples), so only the finest is contracted from ``hg`` (the
    expensive step: seconds on a large model's fine graph) and each coarser one
    from the previous small graph, with the same exact km1 as at full
    resolution. 1-D blocks (Dense, Add, depthwise, coarse filters) keep at
    least ``max(min_1d, 4 side)`` vertices, enough for K <= ``min_1d``.
    """
    t0 = time.perf_counter()
    out: dict[int, tuple[Hypergraph, np.ndarray]] = {}
    cur, cur_map, cur_groups = hg, np.arange(hg.num_vertices), None
    for side in sorted(set(sides), reverse=True):
        groups = _family_groups(hg, side, min_1d, cur_groups)
        blocks: list[VertexBlock] = []
        step = np.empty(cur.num_vertices, dtype=np.int64)
        nv = 0
        for blk in cur.blocks:
            full = hg.block(blk.layer, blk.role)
            assert full is not None  # every grouped block comes from a block of hg
            new = VertexBlock(blk.layer, blk.role, nv, full.extent, groups[(blk.layer, blk.role)])
            # the first ungrouped index each current vertex covers, mapped into the new grouping
            firsts = [np.arange(n) * g for n, g in zip(blk.shape, blk.group, strict=True)]
            if len(firsts) == 1:
                step[blk.start : blk.stop] = new.vertex_of(firsts[0])
            else:
                step[blk.start : blk.stop] = new.vertex_of(firsts[0][:, None], firsts[1][None, :]).ravel()
            blocks.append(new)
            nv = new.stop
        small = contract_with_map(cur, step, blocks, merge_nets=True)
        cur_map = step[cur_map]
        small.build_seconds = time.perf_counter() - t0
        out[side] = (small, cur_map)
        cur, cur_groups = small, groups
    return out


def contract_with_map(hg: Hypergraph, vmap: np.ndarray, blocks: list[VertexBlock], *, merge_nets: bool) -> Hypergraph:
    """Merge vertices by ``vmap`` (old -> new, new ids laid out by ``blocks``); nets as in :func:`contract`."""
    t0 = time.perf_counter()
    nv = blocks[-1].stop if blocks else 0
    weight = np.bincount(vmap, weights=hg.vertex_weight, minlength=nv)
    params = np.bincount(vmap, weights=hg.vertex_params, minlength=nv)
    act = np.bincount(vmap, weights=hg.vertex_act_bytes, minlength=nv)
    pin_net = hg.pin_nets()
    keys = sorted_unique(pin_net * nv + vmap[hg.net_pins])
    pnet, pv = np.divmod(keys, nv)
    cnt = np.bincount(pnet, minlength=hg.num_nets)
    keep = cnt >= 2
    pin_keep = keep[pnet]
    pnet, pv = pnet[pin_keep], pv[pin_keep]
    if not merge_nets:
        ids = np.flatnonzero(keep)
        new_id = np.full(hg.num_nets, -1, dtype=np.int64)
        new_id[ids] = np.arange(len(ids))
        pnet = new_id[pnet]
        counts = np.bincount(pnet, minlength=len(ids))
        net_ptr = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(counts, out=net_ptr[1:])
        return Hypergraph(
            model=hg.model, grain=hg.grain, batch_size=hg.batch_size, work_unit=hg.work_unit,
            vertex_weight=weight, vertex_params=params, vertex_act_bytes=act, net_ptr=net_ptr, net_pins=pv,
            net_cost=hg.net_cost[ids], net_root=vmap[hg.net_root[ids]], net_kind=hg.net_kind[ids], blocks=blocks,
            build_seconds=time.perf_counter() - t0, fingerprint=hg.fingerprint,
        )
    # merge nets with identical pin sets: two independent random hashes of the pin set
    rng = np.random.default_rng(12345)
    h1 = rng.integers(1, 2**62, size=nv, dtype=np.int64)
    h2 = rng.integers(1, 2**62, size=nv, dtype=np.int64)
    s1 = np.bincount(pnet, weights=(h1[pv] % 2**32).astype(np.float64), minlength=hg.num_nets)
    s2 = np.bincount(pnet, weights=(h2[pv] % 2**32).astype(np.float64), minlength=hg.num_nets)
    ids = np.flatnonzero(keep)
    sig = np.stack([s1[ids], s2[ids], cnt[ids].astype(np.float64)], axis=1)
    _, first, group_of = np.unique(sig, axis=0, return_index=True, return_inverse=True)
    group_of = group_of.ravel()
    rep = ids[first]  # representative old net of each merged net
    new_cost = np.bincount(group_of, weights=hg.net_cost[ids], minlength=len(rep))
    new_id = np.full(hg.num_nets, -1, dtype=np.int64)
    new_id[rep] = np.arange(len(rep))
    sel = new_id[pnet] >= 0
    pnet, pv = new_id[pnet[sel]], pv[sel]
    order = np.lexsort((pv, pnet))
    pnet, pv = pnet[order], pv[order]
    counts = np.bincount(pnet, minlength=len(rep))
    net_ptr = np.zeros(len(rep) + 1, dtype=np.int64)
    np.cumsum(counts, out=net_ptr[1:])
    small = Hypergraph(
        model=hg.model,
        grain=hg.grain,
        batch_size=hg.batch_size,
        work_unit=hg.work_unit,
        vertex_weight=weight,
        vertex_params=params,
        vertex_act_bytes=act,
        net_ptr=net_ptr,
        net_pins=pv,
        net_cost=new_cost,
        net_root=vmap[hg.net_root[rep]],
        net_kind=hg.net_kind[rep],
        blocks=blocks,
        build_seconds=time.perf_counter() - t0,
        fingerprint=hg.fingerprint,
    )
    return small


def run(hg: Hypergraph, *, k: int, epsilon: float, seed: int, preset: str | None, time_limit: float | None,
        threads: int | None = None) -> PartitionResult:
    """Backend entry point: the checkerboard placement (deterministic, ignores seed and preset).

    Diagonal reductions when they keep the balance ``(1 + eps) * avg``, else spread ones (see
    :func:`checkerboard_parts`); ``info["reductions"]`` says which.
    """
    t0 = time.perf_counter()
    mode = "diagonal"
    parts = checkerboard_parts(hg, k)
    if balance_class(hg, parts, k, epsilon) > 0:
        mode = "spread"
        parts = checkerboard_parts(hg, k, spread_reductions=True)
    a, b = _grid(k)
    return PartitionResult(parts=parts, backend="block", seconds=time.perf_counter() - t0, preset=f"{a}x{b}",
                           info={"grid": [a, b], "reductions": mode})
