"""The count model of a coarse hypergraph: classes of interchangeable columns, their nets and per-part cost.

Usage::

    from hgpart.partitioners.counts import PartCost, analyze, expand_counts
    model = analyze(hg)                  # verified from the hypergraph's blocks and nets; raises when it fails
    cost = PartCost.of(model)            # km1 (MiB) one part pays for the counts it holds
    parts = expand_counts(hg, model, counts)   # (classes, K) counts -> a part per vertex

The exact program (:mod:`.exact`), its branch and price (:mod:`.branch_price`)
and the chain placements (:mod:`.chain`) all work on this model.

Why counts suffice
------------------
In the coarse (filter) grain every filter of a Conv2D/Dense layer has the same
weight and reads every channel of its input, so the filters of one layer are
interchangeable: a partition is described, up to relabelling filters, by
``x[c, p]`` = how many *columns* of class ``c`` sit on part ``p``. The
symmetry is not assumed, it is verified on the :class:`Hypergraph` itself
(:func:`analyze`), and the backend refuses with a clear error when it fails.

* A net (feature map) has a root (producer vertex) and reader pins. Per
  (net, block) the readers are either *full* (every vertex of the block is a
  pin: Conv2D, Dense) or *partial* (a few: Add vertex ``j`` reads channel
  ``j``, depthwise filter ``j`` reads channel ``j // multiplier``).
* Partial readers tie vertices of different layers together. A *column* is a
  connected component of "root - partial reader" links (one vertex for plain
  VGG-like layers; for ResNet the conv output, the Add and the conv behind the
  skip of one channel index). A column's *signature* is the tuple of (block,
  group size) of its members; columns with equal signature form a *class*.
  Checked per class: equal column weight (grouped blocks with a short last
  group become a class of their own, so unequal group sizes are fine) and the
  same multiset of net types rooted in every column, where a net type is
  (root member, set of full-reader blocks, cost). Concat and Flatten need no
  special case: a tensor whose channels come from several layers gives nets
  rooted in several classes, each with the same full readers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hgpart.errors import HgpartError
from hgpart.hypergraph import BROADCAST, Hypergraph
from hgpart.partitioners._memo import memo

__all__ = ["MIB", "NetType", "CoarseClasses", "PartCost", "analyze", "expand_counts", "even_counts"]

MIB = float(2**20)


@dataclass
class NetType:
    """Nets of one kind: rooted in class ``cls`` (``per_column`` per column), same readers and cost."""

    cls: int
    per_column: int
    cost: float  # bytes per net
    readers: tuple[int, ...]  # full-reader block ids
    partial: tuple[int, ...] = ()  # block-model only: classes of one-to-one partial readers


@dataclass
class CoarseClasses:
    """The count model of a coarse hypergraph: classes of interchangeable columns and their nets."""

    members: list[np.ndarray]  # per class: (n_c, m_c) vertex ids, rows = columns
    weight: np.ndarray  # per class: weight of one column
    reader_classes: dict[int, list[int]]  # full-reader block -> classes holding its vertices
    net_types: list[NetType]
    split_columns: bool  # True when some column has several vertices (partial readers)
    total_weight: float = 0.0
    constant_bytes: float = 0.0  # km1 that no placement avoids (nets not modelled: none so far)

    @property
    def sizes(self) -> np.ndarray:
        return np.array([m.shape[0] for m in self.members], dtype=np.int64)


@dataclass
class PartCost:
    """km1 (MiB) one part pays for the counts it holds: ``sum_T w_T m_T z_T (n_c - x_c)``.

    The objective of the count model is a sum of this per-part term (a part
    holding any reader of a net type receives every map of the type's class
    it does not hold), which is why parts can be priced, chained and
    recombined one at a time; branch and price, the chain DP and the tests
    all evaluate it here.
    """

    cls: np.ndarray  # per net type with readers: class of its root
    mib: np.ndarray  # per net type: MiB per column (w_T m_T)
    readers: list[np.ndarray]  # per net type: classes holding a reader
    n: np.ndarray  # columns per class

    @classmethod
    def of(cls, model: CoarseClasses) -> PartCost:
        typed = [t for t in model.net_types if t.readers]
        return cls(
            cls=np.array([t.cls for t in typed], dtype=np.int64),
            mib=np.array([t.cost / MIB * t.per_column for t in typed]),
            readers=[np.array(sorted({c for b in t.readers for c in model.reader_classes[b]}), dtype=np.int64)
                     for t in typed],
            n=model.sizes.astype(float),
        )

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Cost of every row of ``x`` (rows: parts, columns: classes)."""
        x = np.atleast_2d(np.asarray(x, dtype=float))
        out = np.zeros(x.shape[0])
        for j in range(len(self.cls)):
            z = (x[:, self.readers[j]] > 0).any(axis=1)
            out += z * self.mib[j] * (self.n[self.cls[j]] - x[:, self.cls[j]])
        return out


# ------------------------------------------------------------------ structure


def _vertex_sizes(hg: Hypergraph) -> np.ndarray:
    size = np.ones(hg.num_vertices, dtype=np.int64)
    for b in hg.blocks:
        size[b.start : b.stop] = b.group_sizes().astype(np.int64).ravel()
    return size


def analyze(hg: Hypergraph, *, columns: bool = True) -> CoarseClasses:
    """Classes of interchangeable columns of a coarse hypergraph, verified from its blocks and nets.

    ``columns=True`` merges partial readers with their roots (the column
    model); ``columns=False`` keeps every vertex separate (the block model,
    used for the lower bound). Computed once per hypergraph (a K sweep
    reuses it; a graph of tens of millions of pins takes seconds to classify).
    """
    return memo(hg, f"analyze:{columns}", lambda: _analyze(hg, columns))


@dataclass
class _Pins:
    """Every (net, block) pair of the hypergraph's pins: how many pins, and whether the block reads fully."""

    vblock: np.ndarray  # block of every vertex
    pin_net: np.ndarray  # net of every pin
    inv: np.ndarray  # pin -> its (net, block) pair
    cnt: np.ndarray  # per pair: pins
    k_net: np.ndarray  # per pair: net
    k_blk: np.ndarray  # per pair: block
    full: np.ndarray  # per pair: a full reader (every vertex of the block is a pin)
    partial: np.ndarray  # per pair: a partial reader (some vertices)
    pin_partial: np.ndarray  # per pin: its pair is partial


@dataclass
class _Columns:
    """Columns (connected root - partial reader links) and their classes (equal signature)."""

    members: list[np.ndarray]  # per class: (n_c, m_c) vertex ids
    col_class: np.ndarray  # class of every column
    col_of_vertex: np.ndarray  # column of every vertex
    count: int  # columns
    split: bool  # some column has several vertices


def _analyze(hg: Hypergraph, columns: bool) -> CoarseClasses:
    """The count model of ``hg`` (see :func:`analyze`); raises :class:`HgpartError` where the symmetry fails."""
    if hg.grain != "coarse":
        raise HgpartError(
            f"the exact backend handles the coarse grain only, this hypergraph is {hg.grain}-grain",
            where=f"model {hg.model}", fix="use --backend auto or mtkahypar for the fine grain",
        )
    if np.any(hg.net_kind != BROADCAST):
        raise HgpartError("coarse hypergraph has reduction nets", where=f"model {hg.model}")
    pins = _pin_pairs(hg)
    cols = _columns(hg, pins, columns)
    weight = _class_weights(hg, cols.members, pins.vblock)
    # full readers of every net, as a tuple of blocks
    readers_of_net: list[list[int]] = [[] for _ in range(hg.num_nets)]
    for n, bl in zip(pins.k_net[pins.full].tolist(), pins.k_blk[pins.full].tolist(), strict=True):
        readers_of_net[n].append(bl)
    reader_classes: dict[int, list[int]] = {}
    for bl in sorted(set(pins.k_blk[pins.full].tolist())):
        b = hg.blocks[bl]
        reader_classes[bl] = sorted(set(cols.col_class[cols.col_of_vertex[b.start : b.stop]].tolist()))
    partial_of_net = _partial_links(hg, pins, cols) if not columns and pins.partial.any() else {}
    return CoarseClasses(
        members=cols.members,
        weight=weight,
        reader_classes=reader_classes,
        net_types=_net_types(hg, pins, cols, readers_of_net, partial_of_net),
        split_columns=cols.split,
        total_weight=float(hg.vertex_weight.sum()),
    )


def _pin_pairs(hg: Hypergraph) -> _Pins:
    """Group the pins by (net, block); a net must have exactly one pin in its producer's block."""
    nv, nb = hg.num_vertices, len(hg.blocks)
    vblock = np.empty(nv, dtype=np.int64)
    bsize = np.array([b.size for b in hg.blocks], dtype=np.int64)
    for i, b in enumerate(hg.blocks):
        vblock[b.start : b.stop] = i
    pin_net = hg.pin_nets()
    key = pin_net * nb + vblock[hg.net_pins]
    ukey, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
    k_net, k_blk = np.divmod(ukey, nb)
    root_blk = vblock[hg.net_root]
    is_root_blk = k_blk == root_blk[k_net]
    if np.any(cnt[is_root_blk] != 1):
        n = int(k_net[is_root_blk & (cnt != 1)][0])
        raise HgpartError(
            f"net {n} has several pins in its producer's layer {hg.blocks[int(root_blk[n])].layer!r}",
            where=f"model {hg.model}", fix="the exact backend needs a DAG of layers",
        )
    full = (~is_root_blk) & (cnt == bsize[k_blk])
    partial = (~is_root_blk) & ~full
    return _Pins(vblock, pin_net, inv, cnt, k_net, k_blk, full, partial, partial[inv])


def _columns(hg: Hypergraph, pins: _Pins, columns: bool) -> _Columns:
    """Columns (``columns=True``: components of root - partial reader links, else single vertices), by class."""
    nv = hg.num_vertices
    if columns and pins.pin_partial.any():
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        a = hg.net_root[pins.pin_net[pins.pin_partial]]
        b = hg.net_pins[pins.pin_partial]
        adj = coo_matrix((np.ones(len(a)), (a, b)), shape=(nv, nv))
        _, comp = connected_components(adj, directed=False)
        split = True
    else:
        comp = np.arange(nv)
        split = False
    # signature of every column: sorted (block, size) of its members
    vblock, vsize = pins.vblock, _vertex_sizes(hg)
    order = np.lexsort((np.arange(nv), vblock, comp))
    comp_sorted = comp[order]
    starts = np.flatnonzero(np.r_[True, comp_sorted[1:] != comp_sorted[:-1]])
    bounds = np.r_[starts, nv]
    sig_of: dict[tuple[tuple[int, int], ...], int] = {}
    col_class = np.empty(len(starts), dtype=np.int64)
    class_rows: list[list[np.ndarray]] = []
    for ci in range(len(starts)):
        vs = order[bounds[ci] : bounds[ci + 1]]
        sig = tuple(zip(vblock[vs].tolist(), vsize[vs].tolist(), strict=True))
        c = sig_of.setdefault(sig, len(sig_of))
        if c == len(class_rows):
            class_rows.append([])
        class_rows[c].append(vs)
        col_class[ci] = c
    col_of_vertex = np.empty(nv, dtype=np.int64)
    col_of_vertex[order] = np.repeat(np.arange(len(starts)), np.diff(bounds))
    return _Columns([np.stack(rows) for rows in class_rows], col_class, col_of_vertex, len(starts), split)


def _class_weights(hg: Hypergraph, members: list[np.ndarray], vblock: np.ndarray) -> np.ndarray:
    """Weight of one column per class; every column of a class must weigh the same."""
    weight = np.empty(len(members))
    for c, mem in enumerate(members):
        w = hg.vertex_weight[mem].sum(axis=1)
        scale = max(float(np.abs(w).max()), 1e-300)
        if float(w.max() - w.min()) > 1e-6 * scale:
            blk = hg.blocks[int(vblock[mem[0, 0]])]
            raise HgpartError(
                f"the filters of layer {blk.layer!r} do not all have the same work "
                f"({float(w.min()):.6g} .. {float(w.max()):.6g})",
                where=f"model {hg.model}", fix="the exact backend needs interchangeable filters; use mtkahypar",
            )
        weight[c] = float(w.mean())
    return weight


def _partial_links(hg: Hypergraph, pins: _Pins, cols: _Columns) -> dict[int, list[tuple[int, int]]]:
    """Block model: per net, the (block, class) of its one-to-one partial readers."""
    out: dict[int, list[tuple[int, int]]] = {}
    pn, pb = pins.k_net[pins.partial], pins.k_blk[pins.partial]
    ok1 = pins.cnt[pins.partial] == 1
    pin_v = np.full(len(pins.k_net), -1, dtype=np.int64)
    pin_v[pins.inv[pins.pin_partial]] = hg.net_pins[pins.pin_partial]
    for n, bl, good, v in zip(pn.tolist(), pb.tolist(), ok1.tolist(), pin_v[pins.partial].tolist(), strict=True):
        if good:
            out.setdefault(n, []).append((bl, int(cols.col_class[cols.col_of_vertex[v]])))
    return out


def _net_types(hg: Hypergraph, pins: _Pins, cols: _Columns, readers_of_net: list[list[int]],
               partial_of_net: dict[int, list[tuple[int, int]]]) -> list[NetType]:
    """Net types, checking that every column of a class roots the same nets."""
    type_of: dict[tuple[int, int, tuple[int, ...], float, tuple[tuple[int, int], ...]], int] = {}
    net_type = np.empty(hg.num_nets, dtype=np.int64)
    for n in range(hg.num_nets):
        r = int(hg.net_root[n])
        c = int(cols.col_class[cols.col_of_vertex[r]])
        tkey = (
            c,
            int(pins.vblock[r]),
            tuple(sorted(readers_of_net[n])),
            float(hg.net_cost[n]),
            tuple(sorted(partial_of_net.get(n, []))),
        )
        net_type[n] = type_of.setdefault(tkey, len(type_of))
    net_types: list[NetType] = []
    roots_col = cols.col_of_vertex[hg.net_root]
    for tkey, t in type_of.items():
        c, rblk, readers, cost, part = tkey
        n_c = cols.members[c].shape[0]
        per = np.bincount(roots_col[net_type == t], minlength=cols.count)[np.flatnonzero(cols.col_class == c)]
        if per.min() != per.max():
            raise HgpartError(
                f"the filters of layer {hg.blocks[rblk].layer!r} feed different readers "
                f"(maps of {cost:.0f} bytes read by {len(readers)} layers "
                f"from {int((per > 0).sum())} of {n_c} filters)",
                where=f"model {hg.model}", fix="the exact backend needs interchangeable filters; use mtkahypar",
            )
        partial_classes: tuple[int, ...] = ()
        if part:
            # one-to-one only: every reader vertex of D serves exactly one net of this type
            dcls = sorted({pc for _, pc in part})
            if len(dcls) == 1 and cols.members[dcls[0]].shape[0] == n_c and int(per[0]) == 1:
                partial_classes = (dcls[0],)
        net_types.append(NetType(cls=c, per_column=int(per[0]), cost=cost, readers=readers,
                                 partial=partial_classes))
    return net_types


def expand_counts(hg: Hypergraph, model: CoarseClasses, counts: np.ndarray) -> np.ndarray:
    """Per-vertex parts from class counts: contiguous columns per part, in vertex order."""
    parts = np.zeros(hg.num_vertices, dtype=np.int64)
    K = counts.shape[1]
    for c, mem in enumerate(model.members):
        col_part = np.repeat(np.arange(K), counts[c])
        parts[mem] = col_part[:, None]
    return parts


def even_counts(model: CoarseClasses, k: int) -> np.ndarray:
    """Every class split as evenly as possible (the layer-wise filter split); always near-balanced."""
    n = model.sizes
    base = n[:, None] // k
    extra = (n % k)[:, None] > np.arange(k)[None, :]
    return base + extra.astype(np.int64)
