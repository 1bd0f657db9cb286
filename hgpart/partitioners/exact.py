"""Exact coarse-grain partitioning: an integer program over per-layer part counts (HiGHS via scipy).

Usage::

    from hgpart.partitioners import partition
    res = partition(hg, k=4, backend="exact", epsilon=0.1, time_limit=60)
    res.objective_bytes, res.lower_bound_bytes   # placement found, proven lower bound on km1

    from hgpart.partitioners.exact import coarse_lower_bound
    bound, best = coarse_lower_bound(hg, 4, 0.1, 30.0)

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

The program (column model)
--------------------------
Variables, for classes ``c`` (``n_c`` columns, column weight ``W_c``),
full-reader blocks ``b``, reader sets ``R`` (the full-reader blocks of a net),
net types ``T`` (class ``c_T``, ``m_T`` nets per column, cost ``w_T`` bytes,
readers ``R_T``), parts ``p, q``:

* ``x[c,p]`` integer in ``[0, n_c]``, ``sum_p x[c,p] = n_c``;
* ``y[b,p]`` binary, ``n_c * y[b,p] >= x[c,p]`` for every class ``c`` that
  holds members of ``b`` ("b has a vertex on p");
* ``z[R,q]`` binary, ``z[R,q] >= y[b,q]`` for ``b`` in ``R`` ("some reader
  of the map is on q": the net's span is the union of its readers' parts);
* ``s[T,q] >= 0``, ``s[T,q] >= m_T (n_c - x[c,q]) - m_T n_c (1 - z[R,q])``.

A net rooted on part ``p`` costs ``w * (lambda - 1) = w * sum_{q != p} z[R,q]``
(all partial readers share the root's column, hence its part). Summed over the
nets of a type this is ``w * sum_q z[R,q] * (#roots not on q)``, bilinear in
``z`` and ``x``; since ``z`` is binary and ``0 <= m(n - x) <= m n``, the
constraint on ``s`` linearises it exactly (``s = m(n - x[c,q])`` when
``z = 1``, ``0`` when ``z = 0``). Objective ``min sum_T w_T sum_q s[T,q]``;
at the optimum ``y`` and ``z`` are the indicators, so the optimum *is* the
minimum km1 over all placements whose columns are not split. Balance, as in
the other backends: ``sum_c W_c x[c,p] <= (1 + eps) * total / K``. Part
symmetry is broken by ordering the parts by the counts of the heaviest
class, ``x[c*,0] >= x[c*,1] >= ...`` (any solution can be relabelled so).
Counts are expanded to vertices with contiguous filters per part.

Lower bound when columns have several members (Add, depthwise)
---------------------------------------------------------------
Keeping a column together is a restriction, so with partial readers the
column model gives a placement (an upper bound) but not a proof. The
*block model* gives the bound: every vertex is its own column (classes are
(block, group size)), partial readers are dropped from the span and instead
each net type ``T`` with a one-to-one partial reader block ``D`` adds
``v_T >= w_T * M[T,D]`` where ``M = n - sum_p min(x[A,p], x[D,p])`` is the
least number of columns whose reader is not on the root's part
(``mm[p] <= x[A,p]``, ``mm[p] <= x[D,p]``), next to ``v_T >= w_T sum_q s[T,q]``.
Per net ``lambda - 1 >= max(|Z \\ {p}|, [D not on p])`` and
``sum max >= max sum``, so the block model's optimum (and HiGHS's dual bound
on it) never exceeds the true optimum. For VGG-like models both models are
the same program and the bound is tight.

Balance-implied cuts
--------------------
``U_c = min(n_c, floor(cap / W_c))`` columns of class ``c`` fit on one part,
so ``U_c y[b,p] >= x[c,p]`` (tighter than ``n_c``), a reader block spans at
least ``max_c ceil(n_c / U_c)`` parts, and a reader on ``q`` sees at least
``n - U`` roots elsewhere: ``s[T,q] >= m_T (n - U) z[R,q]``. All hold for
every balanced placement, so the optimum is unchanged (tests check against
brute force); they matter once a layer outweighs a part (VGG16, K = 16).

Closing the gap: branch and price (:func:`pattern_bound`)
---------------------------------------------------------
The LP relaxation of the compact program lets every layer sit thinly on all
parts (``y = x / n``), so from K = 8 its bound stalls far below the
incumbent. The objective is a sum of per-part terms and the parts are
identical, so :func:`solve_exact` runs the compact program (it proves
K <= 4 outright) in a thread next to a branch and price that prices
single-part patterns against
a Dantzig-Wolfe master tightened by cover cuts (at least
``ceil(work(Q) / cap)`` parts touch a run of layers ``Q``) and branches on how many parts hold at least ``t``
columns of a class (``t = 1``, the class's span, first; larger ``t`` once
every span is whole); every bound it reports is a Lagrangian bound whose
inner minimum is a proven lower bound of the pricing problem, hence a
proof. Pricing enumerates which classes a part holds (:class:`SupportPricer`,
up to :data:`ENUM_CLASSES` classes) and falls back to HiGHS for larger models
and threshold branches. Incumbents: the best contiguous chain placement
(:mod:`hgpart.partitioners.chain`, milliseconds at any K), the compact
program's, and whole-part solutions of the restricted master.

Scaling (VGG16 224 b32, 17 classes, eps 0.1, 2 shared cores,
``benchmarks/partition_quality.py``, logs in ``benchmarks/results/partition_quality/``,
``final4_*``): the compact program proves K = 2 and 4 in seconds. K = 8 and
16 are the hard middle: the balance lets a part hold several whole layers;
with the cover cuts, 150 s of branch and price prove the placement within
1.0% / 0.2% (FLOP weights, K = 8 / 16) and 1.3% / 1.5% (measured profile),
where without them the bound stayed 3-7% below. From K = 32 on every layer
must be spread over many parts, the balance-implied cuts pin the bound down
and 45 s prove 0.4% / 1.6% at K = 32, 0.2% at K = 64 and 0.0-0.1% at
K = 128. Branching is still not complete (a node whose counts are all
whole can remain fractional; it keeps its bound, so the result stays a
proof). The model size that matters is the number of classes (one per
layer for VGG-like models): support-enumeration pricing handles up to
:data:`ENUM_CLASSES` (2^C supports per pricing call); above that HiGHS
prices each pattern (~0.3 s a call), and Add/depthwise ties (ResNet)
leave only the loose block-model bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from hgpart.errors import HgpartError
from hgpart.hypergraph import BROADCAST, Hypergraph

__all__ = [
    "CoarseClasses",
    "ExactSolution",
    "analyze",
    "solve_counts",
    "solve_exact",
    "pattern_bound",
    "expand_counts",
    "coarse_lower_bound",
    "run",
]

MIB = float(2**20)
DEFAULT_TIME_LIMIT = 60.0
#: cut points per part capacity of the chain placement that seeds the program (:mod:`.chain`)
CHAIN_STEPS = 160


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


@dataclass
class ExactSolution:
    """Counts found by the solver, the objective it proved and its status."""

    counts: np.ndarray  # (classes, K)
    objective_bytes: float
    bound_bytes: float
    optimal: bool
    status: str
    seconds: float
    info: dict[str, object] = field(default_factory=dict)


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
    reuses it; VGG16's 24.6 M pins take seconds to classify).
    """
    from hgpart.partitioners._memo import memo

    return memo(hg, f"analyze:{columns}", lambda: _analyze(hg, columns))


def _analyze(hg: Hypergraph, columns: bool) -> CoarseClasses:
    if hg.grain != "coarse":
        raise HgpartError(
            f"the exact backend handles the coarse grain only, this hypergraph is {hg.grain}-grain",
            where=f"model {hg.model}", fix="use --backend auto or mtkahypar for the fine grain",
        )
    if np.any(hg.net_kind != BROADCAST):
        raise HgpartError("coarse hypergraph has reduction nets", where=f"model {hg.model}")
    nv, nb = hg.num_vertices, len(hg.blocks)
    vblock = np.empty(nv, dtype=np.int64)
    bsize = np.array([b.size for b in hg.blocks], dtype=np.int64)
    for i, b in enumerate(hg.blocks):
        vblock[b.start : b.stop] = i
    vsize = _vertex_sizes(hg)
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
    pin_partial = partial[inv]

    # columns: connected components of root <-> partial reader links
    if columns and pin_partial.any():
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        a = hg.net_root[pin_net[pin_partial]]
        b = hg.net_pins[pin_partial]
        adj = coo_matrix((np.ones(len(a)), (a, b)), shape=(nv, nv))
        _, comp = connected_components(adj, directed=False)
        split = True
    else:
        comp = np.arange(nv)
        split = False

    # signature of every column: sorted (block, size) of its members
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
    members = [np.stack(rows) for rows in class_rows]
    # column index of every vertex
    col_of_vertex = np.empty(nv, dtype=np.int64)
    col_of_vertex[order] = np.repeat(np.arange(len(starts)), np.diff(bounds))

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

    # full readers of every net, as a tuple of blocks
    readers_of_net: list[list[int]] = [[] for _ in range(hg.num_nets)]
    for n, bl in zip(k_net[full].tolist(), k_blk[full].tolist(), strict=True):
        readers_of_net[n].append(bl)
    reader_classes: dict[int, list[int]] = {}
    for bl in sorted(set(k_blk[full].tolist())):
        b = hg.blocks[bl]
        reader_classes[bl] = sorted(set(col_class[col_of_vertex[b.start : b.stop]].tolist()))

    # partial-reader classes per net (block model only): one-to-one links
    partial_of_net: dict[int, list[int]] = {}
    if not columns and partial.any():
        pn, pb = k_net[partial], k_blk[partial]
        ok1 = cnt[partial] == 1
        pin_v = np.full(len(ukey), -1, dtype=np.int64)
        pin_v[inv[pin_partial]] = hg.net_pins[pin_partial]
        for n, bl, good, v in zip(pn.tolist(), pb.tolist(), ok1.tolist(), pin_v[partial].tolist(), strict=True):
            if good:
                partial_of_net.setdefault(n, []).append((bl, int(col_class[col_of_vertex[v]])))

    # net types, and the check that every column of a class roots the same nets
    type_of: dict[tuple, int] = {}
    net_type = np.empty(hg.num_nets, dtype=np.int64)
    for n in range(hg.num_nets):
        r = int(hg.net_root[n])
        c = int(col_class[col_of_vertex[r]])
        tkey = (
            c,
            int(vblock[r]),
            tuple(sorted(readers_of_net[n])),
            float(hg.net_cost[n]),
            tuple(sorted(partial_of_net.get(n, []))),
        )
        net_type[n] = type_of.setdefault(tkey, len(type_of))
    net_types: list[NetType] = []
    roots_col = col_of_vertex[hg.net_root]
    for tkey, t in type_of.items():
        c, rblk, readers, cost, part = tkey
        cols = roots_col[net_type == t]
        n_c = members[c].shape[0]
        per = np.bincount(cols, minlength=len(starts))[np.flatnonzero(col_class == c)]
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
            if len(dcls) == 1 and members[dcls[0]].shape[0] == n_c and int(per[0]) == 1:
                partial_classes = (dcls[0],)
        net_types.append(NetType(cls=c, per_column=int(per[0]), cost=cost, readers=readers,
                                 partial=partial_classes))
    return CoarseClasses(
        members=members,
        weight=weight,
        reader_classes=reader_classes,
        net_types=net_types,
        split_columns=split,
        total_weight=float(hg.vertex_weight.sum()),
    )


# ------------------------------------------------------------------ program


def solve_counts(
    model: CoarseClasses, k: int, epsilon: float, *, time_limit: float, mip_rel_gap: float = 1e-6
) -> ExactSolution:
    """Build and solve the integer program of the module docstring with HiGHS."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    t0 = time.perf_counter()
    C = len(model.members)
    n = model.sizes
    K = int(k)
    nvar = 0

    def alloc(count: int) -> int:
        nonlocal nvar
        start = nvar
        nvar += count
        return start

    x0 = alloc(C * K)
    reader_blocks = sorted(model.reader_classes)
    yidx = {b: alloc(K) for b in reader_blocks}
    rsets = sorted({t.readers for t in model.net_types if t.readers})
    zidx = {r: alloc(K) for r in rsets}
    typed = [t for t in model.net_types if t.readers or t.partial]
    sidx = [alloc(K) if t.readers else -1 for t in typed]
    mix = [t for t in typed if t.partial]
    vidx = {id(t): alloc(1) for t in mix}
    mmidx = {id(t): alloc(K) for t in mix}

    lo = np.zeros(nvar)
    hi = np.full(nvar, np.inf)
    integ = np.zeros(nvar, dtype=np.uint8)
    cost = np.zeros(nvar)
    for c in range(C):
        hi[x0 + c * K : x0 + (c + 1) * K] = n[c]
    integ[x0 : x0 + C * K] = 1
    for b in reader_blocks:
        hi[yidx[b] : yidx[b] + K] = 1
        integ[yidx[b] : yidx[b] + K] = 1
    for r in rsets:
        hi[zidx[r] : zidx[r] + K] = 1
        integ[zidx[r] : zidx[r] + K] = 1

    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    rlo: list[float] = []
    rhi: list[float] = []

    def row(entries: list[tuple[int, float]], low: float, high: float) -> None:
        r = len(rlo)
        for col, val in entries:
            rows.append(r)
            cols.append(col)
            vals.append(val)
        rlo.append(low)
        rhi.append(high)

    def X(c: int, p: int) -> int:
        return x0 + c * K + p

    for c in range(C):
        row([(X(c, p), 1.0) for p in range(K)], float(n[c]), float(n[c]))
    cap = (1.0 + epsilon) * model.total_weight / K
    for p in range(K):
        row([(X(c, p), float(model.weight[c])) for c in range(C) if model.weight[c] != 0.0], -np.inf, cap)
    # the most columns of a class one part can hold (balance), and the fewest parts a class needs
    with np.errstate(divide="ignore", invalid="ignore"):
        fit = np.where(model.weight > 0, np.floor(cap / np.where(model.weight > 0, model.weight, 1.0) + 1e-9), n)
    U = np.minimum(n, fit).astype(np.int64)
    if np.any(U < 1):
        raise HgpartError(
            f"one filter weighs more than a part may hold ((1+{epsilon})*total/{K})",
            where=f"exact backend, K={K}", fix="raise --epsilon or use fewer parts",
        )
    need = -(-n // U)  # ceil(n / U)
    for b in reader_blocks:
        for c in model.reader_classes[b]:
            for p in range(K):
                row([(yidx[b] + p, float(U[c])), (X(c, p), -1.0)], 0.0, np.inf)
        nb = int(max(need[c] for c in model.reader_classes[b]))
        if nb > 1:
            row([(yidx[b] + p, 1.0) for p in range(K)], float(nb), np.inf)
    for r in rsets:
        for b in r:
            for p in range(K):
                row([(zidx[r] + p, 1.0), (yidx[b] + p, -1.0)], 0.0, np.inf)
    for t, s0 in zip(typed, sidx, strict=True):
        m, nc = float(t.per_column), float(n[t.cls])
        w = t.cost / MIB
        if t.readers:
            z = zidx[t.readers]
            # s >= m(n - x) - m n (1 - z)  <=>  s + m x - m n z >= 0
            for q in range(K):
                row([(s0 + q, 1.0), (X(t.cls, q), m), (z + q, -m * nc)], 0.0, np.inf)
                if U[t.cls] < n[t.cls]:
                    # a reader on q sees at least n - U roots elsewhere: s >= m (n - U) z
                    row([(s0 + q, 1.0), (z + q, -m * float(n[t.cls] - U[t.cls]))], 0.0, np.inf)
        if not t.partial:
            cost[s0 : s0 + K] += w
            continue
        v, mm = vidx[id(t)], mmidx[id(t)]
        cost[v] = w
        if t.readers:
            row([(v, 1.0)] + [(s0 + q, -1.0) for q in range(K)], 0.0, np.inf)
        d = t.partial[0]
        for p in range(K):
            row([(mm + p, 1.0), (X(t.cls, p), -1.0)], -np.inf, 0.0)
            row([(mm + p, 1.0), (X(d, p), -1.0)], -np.inf, 0.0)
        # v >= m * (n - sum mm)
        row([(v, 1.0)] + [(mm + p, m) for p in range(K)], m * nc, np.inf)
    # symmetry: parts ordered by the counts of the heaviest class
    star = int(np.argmax(model.weight * n))
    for p in range(K - 1):
        row([(X(star, p), 1.0), (X(star, p + 1), -1.0)], 0.0, np.inf)

    A = coo_matrix((vals, (rows, cols)), shape=(len(rlo), nvar)).tocsr()
    res = milp(
        cost,
        constraints=LinearConstraint(A, np.array(rlo), np.array(rhi)),
        integrality=integ,
        bounds=Bounds(lo, hi),
        options={"time_limit": float(max(time_limit, 0.1)), "mip_rel_gap": mip_rel_gap, "disp": False},
    )
    secs = time.perf_counter() - t0
    bound = getattr(res, "mip_dual_bound", None)
    bound_bytes = max(float(bound), 0.0) * MIB if bound is not None and np.isfinite(bound) else 0.0
    info = {"variables": nvar, "constraints": len(rlo), "nodes": int(getattr(res, "mip_node_count", 0) or 0)}
    if res.x is None:
        if res.status == 2:  # infeasible
            raise HgpartError(
                f"no placement of whole filters meets the balance (1+{epsilon})*total/{K}",
                where=f"exact backend, K={K}", fix="raise --epsilon or use fewer parts",
            )
        return ExactSolution(np.zeros((C, K), dtype=np.int64), float("inf"), bound_bytes, False,
                             f"no incumbent ({res.message})", secs, info)
    counts = np.rint(res.x[x0 : x0 + C * K]).astype(np.int64).reshape(C, K)
    obj = float(res.fun) * MIB
    optimal = res.status == 0
    if optimal:
        bound_bytes = max(bound_bytes, obj * (1.0 - mip_rel_gap))
    return ExactSolution(counts, obj, min(bound_bytes, obj), optimal, str(res.message), secs, info)


def solve_exact(model: CoarseClasses, k: int, epsilon: float, *, time_limit: float,
                head_start: float = 4.0) -> ExactSolution:
    """The compact program and branch and price side by side; the better placement, the larger bound.

    Why both: HiGHS on the compact program finds good placements fast and
    proves K <= 4 optimal in seconds, and its own branch and cut keeps
    raising the bound when layers are very unequal (measured VGG16 weights,
    K = 8); :func:`pattern_bound` proves far more from K = 8 on with FLOP-like
    weights. Neither dominates, so the compact program runs in a thread for
    the whole time limit (HiGHS releases the GIL: two cores, two solvers)
    while branch and price runs here after a short head start, stopping
    early when the compact program proves its optimum. Incumbents: the best
    contiguous chain placement (:mod:`hgpart.partitioners.chain`), the
    program's and the pattern master's.
    """
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from hgpart.partitioners.chain import chain_counts

    t0 = time.perf_counter()
    chain = chain_counts(model, k, epsilon, steps=CHAIN_STEPS) if k > 1 else None
    finished = threading.Event()

    def compact() -> ExactSolution:
        try:
            return solve_counts(model, k, epsilon, time_limit=time_limit)
        finally:
            finished.set()

    rel_gap = 1e-4
    lb, info = 0.0, {}
    with ThreadPoolExecutor(max_workers=1) as pool:
        fut = pool.submit(compact)
        finished.wait(min(head_start, time_limit))
        rest = time_limit - (time.perf_counter() - t0)
        if not finished.is_set() and chain is not None and rest >= 1.0 and not any(
                t.partial for t in model.net_types):
            lb, info = pattern_bound(model, k, epsilon, time_limit=rest, columns=chain[0].T,
                                     incumbent_bytes=chain[1] * MIB, rel_gap=rel_gap, stop=finished.is_set)
        sol = fut.result()
    counts, obj, source = sol.counts, sol.objective_bytes, "program"
    if sol.optimal:
        return sol
    for name, cand, cand_obj in (("chain", None if chain is None else chain[0], np.inf if chain is None
                                  else chain[1] * MIB),
                                 ("patterns", info.pop("counts", None), float(info.pop("counts_bytes", np.inf)))):
        if cand is not None and cand_obj < obj * (1.0 - 1e-9):
            counts, obj, source = np.asarray(cand), cand_obj, name
    if not np.isfinite(obj):
        return sol
    bound = min(max(sol.bound_bytes, lb), obj)
    optimal = bound >= obj * (1.0 - rel_gap)
    return ExactSolution(counts, obj, bound, optimal, "optimal (branch and price)" if optimal else
                         f"time limit, gap {obj / max(bound, 1e-300) - 1.0:.2%}", time.perf_counter() - t0,
                         {**sol.info, "incumbent": source, "program_bound_bytes": sol.bound_bytes,
                          "pricing": {kk: v for kk, v in info.items() if kk != "counts"}})


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


# ------------------------------------------------------------------ public verbs


def coarse_lower_bound(
    hg: Hypergraph, k: int, epsilon: float, time_limit: float
) -> tuple[float | None, float | None]:
    """Proven lower bound on km1 (bytes) and the best km1 the program found, for balance ``epsilon``.

    Returns ``(None, None)`` when the hypergraph is not a count-symmetric
    coarse grain (the bound is then not computable this way). ``best`` is
    None when the column model is not the true problem (Add/depthwise) or no
    placement was found in time. Pass the imbalance a result actually reached
    (``max(eps, Max/Avg - 1)``) to bound that result fairly.
    """
    try:
        model = analyze(hg, columns=True)
        split = model.split_columns
        if split:
            model = analyze(hg, columns=False)
    except HgpartError:
        return None, None
    if k <= 1:
        return 0.0, 0.0
    sol = solve_exact(model, k, epsilon, time_limit=time_limit)
    best = sol.objective_bytes if np.isfinite(sol.objective_bytes) and not split else None
    return sol.bound_bytes, best


def run(hg: Hypergraph, *, k: int, epsilon: float, seed: int, preset: str | None, time_limit: float | None,
        bound: bool = True):
    """Backend entry point (see :mod:`hgpart.partitioners`).

    ``bound=False``: with split columns the block-model bound program is
    skipped, the whole time goes to the column model's placement and
    ``lower_bound_bytes`` is None (the block model's counts are often the
    better placement, so auto keeps ``bound=True`` for residual models).
    """
    from hgpart.metrics import km1_bytes
    from hgpart.partitioners import PartitionResult

    t0 = time.perf_counter()
    limit = float(time_limit) if time_limit else DEFAULT_TIME_LIMIT
    model = analyze(hg, columns=True)
    lb_bytes: float | None
    if model.split_columns:
        sol = solve_counts(model, k, epsilon, time_limit=limit / 2 if bound else limit)
        relaxed = analyze(hg, columns=False)
        lb = None
        if bound:
            lb = solve_counts(relaxed, k, epsilon, time_limit=max(limit - (time.perf_counter() - t0), 1.0))
        lb_bytes = lb.bound_bytes if lb is not None else None
    else:
        sol = solve_exact(model, k, epsilon, time_limit=limit)
        lb_bytes = sol.bound_bytes
    counts = sol.counts if np.isfinite(sol.objective_bytes) else even_counts(model, k)
    parts = expand_counts(hg, model, counts)
    obj = km1_bytes(hg, parts, k)
    if model.split_columns:
        from hgpart.partitioners.chain import chain_counts

        alts = []
        if lb is not None and np.isfinite(lb.objective_bytes):
            # the block model's counts, columns laid out contiguously (aligned wherever counts agree)
            alts.append(expand_counts(hg, relaxed, lb.counts))
        chain = chain_counts(model, k, epsilon, steps=CHAIN_STEPS)
        if chain is not None:
            alts.append(expand_counts(hg, model, chain[0]))
        for alt in alts:
            alt_obj = km1_bytes(hg, alt, k)
            if alt_obj < obj:
                parts, obj = alt, alt_obj
    return PartitionResult(
        parts=parts,
        backend="exact",
        seconds=time.perf_counter() - t0,
        preset="highs",
        backend_objective=obj,
        objective_scale=1.0,
        lower_bound_bytes=None if lb_bytes is None else min(lb_bytes, obj),
        info={
            "optimal": bool(sol.optimal and not model.split_columns),
            "status": sol.status,
            "program_bytes": sol.objective_bytes,
            "classes": len(model.members),
            "column_model": model.split_columns,
            **sol.info,
        },
    )


# ------------------------------------------------------------------ column generation bound


#: the pricing problem is solved by enumerating supports when there are at most this many classes (2^C rows)
ENUM_CLASSES = 18
#: cover cuts branch and price may add to its master (intervals of classes, see :func:`pattern_bound`)
MAX_CUTS = 200


class SupportPricer:
    """Exact-bound pricing for one part by enumerating which classes it holds (VGG-like models).

    Why: branch and price spends ~99% of its time in HiGHS solving the
    one-part pricing program (~0.3 s a call, hundreds of calls). Once the
    support ``u`` (which classes the part holds) is fixed, ``y``, ``z`` and
    so the whole objective are fixed functions of ``u`` and the program is
    a bounded knapsack in the counts, ``x_c`` in ``[u_c, U_c u_c]`` with
    linear cost ``g_c(u) = -pi_c - sum_{T rooted in c} w_T m_T z_T(u)``.
    Its LP relaxation (greedy by cost per weight) is a lower bound of the
    knapsack, so ``min_u`` of it bounds the pricing minimum from below (a
    valid, and with hundreds of filters per layer nearly exact, inner
    bound); flooring the one fractional item gives a whole pattern. All
    ``2^C`` supports are evaluated at once with numpy: a few milliseconds
    for VGG16's 17 classes.
    """

    def __init__(self, model: CoarseClasses, typed: list[NetType], U: np.ndarray, cap: float) -> None:
        C = len(model.members)
        S = 1 << C
        bits = ((np.arange(S, dtype=np.int64)[:, None] >> np.arange(C)[None, :]) & 1).astype(bool)
        n = model.sizes.astype(float)
        self.W = model.weight.astype(float)
        self.U = U.astype(float)
        y = {b: bits[:, cls].any(axis=1) for b, cls in model.reader_classes.items()}
        Z = np.zeros((S, len(typed)), dtype=bool)
        for j, t in enumerate(typed):
            for b in t.readers:
                Z[:, j] |= y[b]
        a = np.array([t.cost / MIB * t.per_column for t in typed])
        B = np.zeros((len(typed), C))
        for j, t in enumerate(typed):
            B[j, t.cls] = a[j]
        mand = bits.astype(float) @ self.W
        keep = mand <= cap * (1.0 + 1e-12)
        self.u = bits[keep]
        self.uf = self.u.astype(float)
        self.room = cap - mand[keep]
        self.zcost = Z[keep].astype(float) @ B  # (S', C): sum_T rooted in c of w_T m_T z_T
        self.zconst = Z[keep].astype(float) @ (a * np.array([n[t.cls] for t in typed]))
        self.extra = np.where(self.u, self.U[None, :] - 1.0, 0.0)

    def touches(self, classes: tuple[int, ...]) -> np.ndarray:
        """Per enumerated support: 1.0 when it holds a column of any of ``classes`` (a cover cut's row)."""
        return self.u[:, list(classes)].any(axis=1).astype(float)

    def __call__(self, pi: np.ndarray, du: np.ndarray,
                 dsup: np.ndarray | None = None) -> tuple[float, np.ndarray, float]:
        """(lower bound on the pricing minimum, a whole pattern, its exact reduced cost).

        ``dsup`` (one value per enumerated support) carries the duals of
        constraints that depend on the support only (cover cuts).
        """
        g = -pi[None, :] - self.zcost
        W = np.broadcast_to(self.W[None, :], g.shape)
        elig = (g < 0.0) & (self.extra > 0.0)
        paid = elig & (W > 0.0)
        base = (self.zconst - self.uf @ du + (g * self.uf).sum(axis=1)
                + np.where(elig & ~paid, g * self.extra, 0.0).sum(axis=1))
        if dsup is not None:
            base = base - dsup
        ratio = np.where(paid, g / np.where(W > 0.0, W, 1.0), 0.0)
        order = np.argsort(ratio, axis=1, kind="stable")
        r_s = np.take_along_axis(ratio, order, axis=1)
        w_s = np.take_along_axis(W, order, axis=1)
        e_s = np.take_along_axis(np.where(paid, self.extra, 0.0), order, axis=1)
        tw = e_s * w_s
        cum = np.cumsum(tw, axis=1)
        room = self.room[:, None]
        full = cum <= room
        part_w = np.minimum(np.clip(room - (cum - tw), 0.0, None) * (~full), tw)
        lp_val = base + (r_s * np.where(full, tw, part_w)).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            part_n = np.where(w_s > 0.0, np.floor(part_w / np.where(w_s > 0.0, w_s, 1.0) + 1e-9), 0.0)
        cnt_s = np.where(full, e_s, part_n)
        int_val = base + (cnt_s * r_s * w_s).sum(axis=1)
        i = int(np.argmin(int_val))
        cnt = np.zeros(len(self.W))
        cnt[order[i]] = cnt_s[i]
        free = self.u[i] & (g[i] < 0.0) & (self.W <= 0.0)
        x = self.u[i].astype(float) + cnt + np.where(free, self.extra[i], 0.0)
        return float(lp_val.min()), x, float(int_val[i])


def pattern_bound(
    model: CoarseClasses, k: int, epsilon: float, *, time_limit: float, columns: np.ndarray | None = None,
    incumbent_bytes: float = float("inf"), rel_gap: float = 1e-4, stop: Callable[[], bool] | None = None,
    cover_cuts: bool = True,
) -> tuple[float, dict[str, object]]:
    """Proven lower bound (bytes) on the count program by branch and price over one part's patterns.

    Why: the compact program's LP relaxation spreads every layer thinly over
    all parts (``y = x / n``) and proves almost nothing at K >= 8. The
    objective is a sum over parts of one part's terms
    ``sum_T w_T z[R_T,q] m_T (n - x[c_T,q])`` and the parts are identical, so
    for prices ``pi`` on ``sum_q x[c,q] = n_c`` and ``a, b >= 0`` on span
    limits ``lo_c <= #parts holding class c <= hi_c``::

        OPT >= pi.n + a.lo - b.hi + K * min_P (cost(P) - pi.x(P) - (a - b).u(P))

    where ``P`` ranges over single-part patterns (counts within balance,
    ``u_c = [x_c > 0]``, the part's own ``y``, ``z`` and cost). The inner
    minimum is a tiny integer program (one part) whose proven HiGHS dual
    bound is used, so every figure is a proof. Prices come from the LP over
    the patterns found so far (Dantzig-Wolfe master, slack-penalised so it is
    always solvable); this convexifies each part and removes part symmetry.
    Cover cuts make the root much tighter: for a run of classes ``Q`` (an
    interval in topological order) the parts touching ``Q`` hold all of its
    work, so at least ``ceil(work(Q) / cap)`` parts touch ``Q``; the master
    adds the violated ones (global, valid at every node) and pricing pays
    their duals per support (VGG16 224 b32 FLOP weights, K = 16, placement
    1,571.1 MiB: root bound 1,249.8 MiB without them, 1,481.6 MiB with them;
    after 20 s of branch and price 1,445.9 vs 1,546.7 MiB).
    The remaining gap comes from fractional parts (e.g. 0.35 of a part that
    holds a whole layer), so nodes branch on the span of a class
    (``S_c <= floor`` | ``S_c >= ceil``), then on "parts holding >= t
    columns", best bound first; a node with nothing left to branch on is
    solved again with exact (HiGHS) pricing, whose bound is tighter than the
    support pricer's relaxed knapsacks and proves nodes whose limits the
    patterns cannot meet; nodes whose bound
    reaches ``incumbent_bytes * (1 - rel_gap)`` are closed. The result is the
    least bound over open nodes (``incumbent_bytes`` when all closed).
    Only for programs whose objective separates per part (no one-to-one
    partial readers); returns ``(0.0, info)`` otherwise. ``columns`` (K x
    classes) seeds the master with a known placement (else an even split).
    Every few nodes the master is solved with whole parts over the patterns
    found so far; a placement cheaper than the incumbent is returned as
    ``info["counts"]`` (classes x K) and tightens the pruning.
    """
    import heapq

    from scipy.optimize import Bounds, LinearConstraint, linprog, milp
    from scipy.sparse import coo_matrix, csr_matrix, hstack, vstack

    t0 = time.perf_counter()
    info: dict[str, object] = {"iterations": 0, "nodes": 0}
    def elapsed_out() -> bool:
        """Out of time, or ``stop()`` says another solver proved the optimum."""
        return (stop is not None and stop()) or time.perf_counter() - t0 >= time_limit
    if any(t.partial for t in model.net_types):
        info["skipped"] = "partial readers"
        return 0.0, info
    C, K = len(model.members), int(k)
    n = model.sizes.astype(float)
    cap = (1.0 + epsilon) * model.total_weight / K
    # pricing program over one part: x[c], u[c], y[b], z[R], s[T]
    reader_blocks = sorted(model.reader_classes)
    typed = [t for t in model.net_types if t.readers]
    rsets = sorted({t.readers for t in typed})
    yi = {b: 2 * C + i for i, b in enumerate(reader_blocks)}
    zi = {r: 2 * C + len(yi) + i for i, r in enumerate(rsets)}
    s0 = 2 * C + len(yi) + len(zi)
    nvar = s0 + len(typed)
    with np.errstate(divide="ignore", invalid="ignore"):
        fit = np.where(model.weight > 0, np.floor(cap / np.where(model.weight > 0, model.weight, 1.0) + 1e-9), n)
    U = np.minimum(n, fit)
    if np.any(U < 1):
        info["skipped"] = "a filter exceeds a part"
        return 0.0, info
    lo, hi = np.zeros(nvar), np.ones(nvar)
    hi[:C] = U
    hi[s0:] = np.inf
    integ = np.ones(nvar, dtype=np.uint8)
    integ[s0:] = 0
    wcost = np.zeros(nvar)
    rows: list[tuple[list[tuple[int, float]], float, float]] = []
    rows.append(([(c, float(model.weight[c])) for c in range(C) if model.weight[c] != 0.0], -np.inf, cap))
    for c in range(C):  # u_c = [x_c > 0]
        rows.append(([(C + c, float(U[c])), (c, -1.0)], 0.0, np.inf))
        rows.append(([(c, 1.0), (C + c, -1.0)], 0.0, np.inf))
    for b in reader_blocks:
        for c in model.reader_classes[b]:
            rows.append(([(yi[b], float(U[c])), (c, -1.0)], 0.0, np.inf))
    for r in rsets:
        for b in r:
            rows.append(([(zi[r], 1.0), (yi[b], -1.0)], 0.0, np.inf))
    for j, t in enumerate(typed):
        m, nc = float(t.per_column), n[t.cls]
        rows.append(([(s0 + j, 1.0), (t.cls, m), (zi[t.readers], -m * nc)], 0.0, np.inf))
        wcost[s0 + j] = t.cost / MIB
    ri = [i for i, (ent, _, _) in enumerate(rows) for _ in ent]
    ci = [col for ent, _, _ in rows for col, _ in ent]
    vi = [val for ent, _, _ in rows for _, val in ent]
    A = coo_matrix((vi, (ri, ci)), shape=(len(rows), nvar)).tocsr()
    cons = LinearConstraint(A, np.array([r[1] for r in rows]), np.array([r[2] for r in rows]))

    pricer = SupportPricer(model, typed, U, cap) if C <= ENUM_CLASSES else None
    info["pricing"] = "supports" if pricer is not None else "highs"

    # cover cuts (global, valid at every node): the parts touching classes Q hold all of Q's weight,
    # so at least ceil(weight(Q) / cap) parts touch Q
    cuts: list[tuple[tuple[int, ...], int]] = []
    cut_rows: list[np.ndarray] = []  # per cut: the support pricer's row (1.0 where a support touches Q)
    cover_sets = [tuple(range(i, j + 1)) for i in range(C) for j in range(i, C)]
    cover_need = {q: int(np.ceil(float(model.weight[list(q)] @ n[list(q)]) / cap - 1e-9)) for q in cover_sets}
    cover_sets = [q for q in cover_sets if cover_need[q] >= 1]

    def price(pi: np.ndarray, du: np.ndarray, dthr: dict[tuple[int, int], float], dcut: np.ndarray,
              limit: float, exact: bool = False) -> tuple[float, np.ndarray | None, float]:
        """Pricing: reduced costs ``pi`` (counts), ``du`` ([x_c >= 1]), ``dthr`` ([x_c >= t], t >= 2)
        and ``dcut`` (cover cuts: [the part touches Q]). ``exact``: HiGHS even where supports would do
        (the support pricer's bound relaxes the counts, which is loose when few columns fit a part)."""
        if pricer is not None and not dthr and not exact:
            dsup = np.column_stack(cut_rows) @ dcut if cuts and np.any(dcut > 0.0) else None
            return pricer(pi, du, dsup)
        keys = sorted(dthr)
        m, mc = len(keys), len(cuts)
        obj = np.r_[wcost, np.zeros(m + mc)]
        obj[:C] -= pi
        obj[C : 2 * C] -= du
        a_all, lo_all, hi_all = A, cons.lb, cons.ub
        if m + mc:
            # v_i = [x_c >= t] exactly: t v <= x_c and x_c - (U_c - t + 1) v <= t - 1;
            # cover cut q: w_q <= sum_{c in Q} u_c (its dual rewards w_q = 1, so w_q = [touches Q])
            extra = np.zeros((2 * m + mc, nvar + m + mc))
            for i, (c, t) in enumerate(keys):
                obj[nvar + i] = -dthr[(c, t)]
                extra[2 * i, [nvar + i, c]] = [float(t), -1.0]
                extra[2 * i + 1, [c, nvar + i]] = [1.0, -float(U[c] - t + 1)]
            for q, (cls_q, _) in enumerate(cuts):
                obj[nvar + m + q] = -dcut[q]
                extra[2 * m + q, nvar + m + q] = 1.0
                extra[2 * m + q, [C + c for c in cls_q]] = -1.0
            a_all = vstack([hstack([A, csr_matrix((A.shape[0], m + mc))]), csr_matrix(extra)]).tocsr()
            lo_all = np.r_[cons.lb, np.full(2 * m + mc, -np.inf)]
            hi_all = np.r_[cons.ub, np.array([[0.0, float(t - 1)] for _, t in keys]).ravel(), np.zeros(mc)]
        res = milp(obj, constraints=LinearConstraint(a_all, lo_all, hi_all),
                   integrality=np.r_[integ, np.ones(m, dtype=np.uint8), np.zeros(mc, dtype=np.uint8)],
                   bounds=Bounds(np.r_[lo, np.zeros(m + mc)], np.r_[hi, np.ones(m + mc)]),
                   options={"time_limit": max(limit, 0.05), "mip_rel_gap": 1e-9, "disp": False})
        db = getattr(res, "mip_dual_bound", None)
        db = float(db) if db is not None and np.isfinite(db) else -np.inf
        if res.x is None:
            return db, None, np.inf
        return db, np.rint(res.x[:C]), float(res.fun)

    cost_of = PartCost.of(model)

    def part_cost(x: np.ndarray) -> float:
        return float(cost_of(x)[0])

    # how much a class's span matters: the maps its readers pull in, and the maps it is read for
    stake = np.ones(C)
    for t in typed:
        stake[t.cls] += t.cost / MIB * t.per_column * n[t.cls]
        for b in t.readers:
            for c in model.reader_classes[b]:
                stake[c] += t.cost / MIB * t.per_column * n[t.cls]
    if columns is None:
        columns = even_counts(model, K).T
    pats = [np.zeros(C)] + [np.asarray(p, dtype=float) for p in columns]
    costs = [part_cost(p) for p in pats]
    big = 10.0 * (sum(t.cost / MIB * t.per_column * n[t.cls] for t in typed) * K + 1.0)
    inc = incumbent_bytes / MIB

    Key = tuple[int, int]  # (class c, threshold t): the number of parts holding >= t columns of c

    def touching(P: np.ndarray, q: tuple[int, ...]) -> np.ndarray:
        return (P[list(q)] > 0).any(axis=0).astype(float)

    def separate(P: np.ndarray, lam: np.ndarray) -> bool:
        """Add the cover cuts the master's solution violates most (at most 30 a round); True if any."""
        have = {q for q, _ in cuts}
        viol = []
        for q in cover_sets:
            if q not in have:
                short = cover_need[q] - float(touching(P, q) @ lam)
                if short > 1e-6:
                    viol.append((short, q))
        viol.sort(reverse=True)
        for _, q in viol[:30]:
            cuts.append((q, cover_need[q]))
            if pricer is not None:
                cut_rows.append(pricer.touches(q))
        return bool(viol)

    def node_bound(lim_lo: dict[Key, int], lim_hi: dict[Key, int],
                   exact: bool = False) -> tuple[float, np.ndarray, np.ndarray, bool]:
        """Column generation at one node: (best Lagrangian bound, patterns, their LP weights, converged)."""
        best = -np.inf
        lkeys, hkeys = sorted(lim_lo), sorted(lim_hi)
        P, lam = np.array(pats).T, np.zeros(len(pats))
        while not elapsed_out():
            P = np.array(pats).T
            J = P.shape[1]
            nl, nh, mc = len(lkeys), len(hkeys), len(cuts)
            nu = nl + nh + mc
            a_eq = np.zeros((C + 1, J + 2 * C + nu))
            a_eq[:C, :J] = P
            a_eq[:C, J : J + C] = np.eye(C)
            a_eq[:C, J + C : J + 2 * C] = -np.eye(C)
            a_eq[C, :J] = 1.0
            a_ub = np.zeros((nu, a_eq.shape[1]))
            for i, (c, t) in enumerate(lkeys):
                a_ub[i, :J] = -(P[c] >= t).astype(float)
            for i, (c, t) in enumerate(hkeys):
                a_ub[nl + i, :J] = P[c] >= t
            for i, (q, _) in enumerate(cuts):
                a_ub[nl + nh + i, :J] = -touching(P, q)
            a_ub[:, J + 2 * C :] = -np.eye(nu)  # slack, penalised: the master is always solvable
            b_ub = np.r_[[-float(lim_lo[key]) for key in lkeys], [float(lim_hi[key]) for key in hkeys],
                         [-float(need) for _, need in cuts]]
            obj = np.r_[costs, np.full(2 * C + nu, big)]
            lp = linprog(obj, A_eq=a_eq, b_eq=np.r_[n, K], A_ub=a_ub if nu else None,
                         b_ub=b_ub if nu else None, bounds=(0, None), method="highs")
            if lp.status != 0:
                info["master"] = lp.message
                return best, P, lam, False
            duals = np.asarray(lp.eqlin.marginals)
            pi, mu = duals[:C], float(duals[C])
            du = np.zeros(C)
            dthr: dict[Key, float] = {}
            dcut = np.zeros(mc)
            const = float(pi @ n)
            if nu:
                mu_ub = -np.asarray(lp.ineqlin.marginals)  # >= 0
                for sign, keys, lims, off in ((1.0, lkeys, lim_lo, 0), (-1.0, hkeys, lim_hi, nl)):
                    for i, (c, t) in enumerate(keys):
                        d = sign * mu_ub[off + i]
                        const += d * lims[(c, t)]
                        if t == 1:
                            du[c] += d
                        else:
                            dthr[(c, t)] = dthr.get((c, t), 0.0) + d
                dcut = mu_ub[nl + nh :]
                const += float(dcut @ np.array([need for _, need in cuts], dtype=float))
            lam = lp.x[:J]
            db, x, val = price(pi, du, dthr, dcut, time_limit - (time.perf_counter() - t0), exact)
            info["iterations"] = int(info["iterations"]) + 1
            best = max(best, const + K * min(db, 0.0))
            if best >= inc * (1.0 - rel_gap):
                return best, P, lam, True
            if x is None or val - mu >= -1e-7 * max(1.0, abs(lp.fun)):
                if cover_cuts and len(cuts) < MAX_CUTS and separate(P, lam):
                    continue
                return max(best, min(float(lp.fun), best)), P, lam, True
            pats.append(x)
            costs.append(part_cost(x))
        return best, P, lam, False

    def branch_key(P: np.ndarray, lam: np.ndarray, lim_lo: dict[Key, int],
                   lim_hi: dict[Key, int]) -> tuple[Key, float] | None:
        """The most fractional count of parts holding >= t columns of a class (t = 1 first), or None.

        Only counts strictly inside the node's limits: a count outside them
        means the master leans on its penalised slack, and branching on it
        would give a child equal to the node (an endless loop).
        """
        for ts in ("span", "thresholds"):
            best_key, best_score, best_val = None, 0.0, 0.0
            for c in range(C):
                if ts == "span":
                    cand = [1]
                else:
                    used = np.unique(P[c, lam > 1e-9])
                    cand = [int(t) for t in used if t >= 2]
                for t in cand:
                    val = float((P[c] >= t) @ lam)
                    frac = val - np.floor(val + 1e-9)
                    if frac < 1e-6 or frac > 1.0 - 1e-6:
                        continue
                    if np.floor(val) < lim_lo.get((c, t), 0) or np.ceil(val) > lim_hi.get((c, t), K):
                        continue
                    score = min(frac, 1.0 - frac) * stake[c]
                    if score > best_score:
                        best_key, best_score, best_val = (c, t), score, val
            if best_key is not None:
                return best_key, best_val
        return None

    def master_ip(limit: float) -> None:
        """Whole parts from the patterns found so far (restricted master as an integer program)."""
        nonlocal inc
        P = np.array(pats).T
        res = milp(np.array(costs), constraints=LinearConstraint(np.vstack([P, np.ones(P.shape[1])]),
                                                                   np.r_[n, K], np.r_[n, K]),
                   integrality=np.ones(P.shape[1], dtype=np.uint8), bounds=Bounds(0, K),
                   options={"time_limit": max(limit, 0.1), "disp": False})
        if res.x is not None and float(res.fun) < inc * (1.0 - 1e-9):
            lam = np.rint(res.x).astype(np.int64)
            info["counts"] = np.repeat(P, lam, axis=1).astype(np.int64)
            inc = float(res.fun)
            info["counts_bytes"] = inc * MIB

    heap: list[tuple[float, int, dict[Key, int], dict[Key, int]]] = [(0.0, 0, {}, {})]
    stuck: list[float] = []
    serial = 1
    root = None
    while heap and not elapsed_out():
        parent, _, lim_lo, lim_hi = heapq.heappop(heap)
        if parent >= inc * (1.0 - rel_gap):
            continue
        bnd, P, lam, done = node_bound(lim_lo, lim_hi)
        bnd = max(bnd, parent)
        info["nodes"] = int(info["nodes"]) + 1
        if root is None:
            root = bnd
        if int(info["nodes"]) % 10 == 1:
            master_ip(min(5.0, time_limit - (time.perf_counter() - t0)))
        if not done:
            heapq.heappush(heap, (bnd, serial, lim_lo, lim_hi))
            break
        if bnd >= inc * (1.0 - rel_gap):
            continue
        pick = branch_key(P, lam, lim_lo, lim_hi)
        if pick is None and pricer is not None:
            # nothing left to branch on: redo the node with exact pricing, a tighter Lagrangian bound
            # (and, when the node leans on the master's slack, usually the proof that it is infeasible)
            ebnd, P, lam, done = node_bound(lim_lo, lim_hi, exact=True)
            bnd = max(bnd, ebnd)
            info["exact_pricing_nodes"] = int(info.get("exact_pricing_nodes", 0)) + 1
            if bnd >= inc * (1.0 - rel_gap):
                continue
            pick = branch_key(P, lam, lim_lo, lim_hi) if done else None
        if pick is None:
            stuck.append(bnd)
            continue
        key, val = pick
        if key[1] > 1:
            info["threshold_branches"] = int(info.get("threshold_branches", 0)) + 1
        down, up = int(np.floor(val)), int(np.ceil(val))
        heapq.heappush(heap, (bnd, serial, lim_lo, {**lim_hi, key: min(down, lim_hi.get(key, K))}))
        heapq.heappush(heap, (bnd, serial + 1, {**lim_lo, key: max(up, lim_lo.get(key, 0))}, lim_hi))
        serial += 2
    master_ip(min(5.0, max(time_limit - (time.perf_counter() - t0), 0.5)))
    open_bounds = [h[0] for h in heap if h[0] < inc * (1.0 - rel_gap)] + stuck
    lb = min(open_bounds) if open_bounds else inc
    info["root_bytes"] = max(root or 0.0, 0.0) * MIB
    info["open_nodes"] = len(open_bounds)
    info["integral_span_nodes"] = len(stuck)  # spans all whole but parts fractional: no span left to branch on
    info["patterns"] = len(pats)
    info["cover_cuts"] = len(cuts)
    info["seconds"] = time.perf_counter() - t0
    return max(min(lb, inc), 0.0) * MIB, info
