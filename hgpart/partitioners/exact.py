"""Exact coarse-grain partitioning: an integer program over per-layer part counts (HiGHS via scipy).

Usage::

    from hgpart.partitioners import partition
    res = partition(hg, k=4, backend="exact", epsilon=0.1, time_limit=60)
    res.objective_bytes, res.lower_bound_bytes   # placement found, proven lower bound on km1

    from hgpart.partitioners.exact import coarse_lower_bound
    bound, best = coarse_lower_bound(hg, 4, 0.1, 30.0)

The count model (which filters are interchangeable, verified on the
hypergraph) is :mod:`.counts`.

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

A device memory limit (:class:`MemoryRows`, ``hgpart partition
--memory-limit``) adds one more row per part,
``sum_c M_c x[c,p] + r sum_T w_T s[T,p] <= cap``, with ``M_c`` the memory one
column of class ``c`` brings (parameters, gradients, optimizer slots and kept
activations, :mod:`hgpart.memory`) and ``w_T s[T,p]`` the bytes of the maps
part ``p`` receives (``s`` is bounded below only, so the row holds exactly
when the true received maps fit; ``r`` scales them to the batches kept). It
also tightens ``U_c`` to the columns that fit in ``cap``. The program then
runs alone: the chain placement and branch and price know no memory.

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
brute force); they matter once a layer outweighs a part.

Closing the gap: branch and price
---------------------------------
The LP relaxation of the compact program lets every layer sit thinly on all
parts (``y = x / n``), so from K = 8 its bound stalls far below the
incumbent. :func:`solve_exact` therefore runs the compact program (it proves
K <= 4 outright) in a thread next to the branch and price of
:mod:`.branch_price` (:func:`~.branch_price.pattern_bound`, which explains
its master, cuts, pricing and branching), and keeps the better placement
and the larger proven bound. Incumbents: the best contiguous chain
placement (:mod:`.chain`, milliseconds at any K), the compact program's,
and whole-part solutions of the pattern master.

Scaling (measured figures: ``benchmarks/results/partition_quality/README.md``):
the compact program proves small K outright. Middle K are the hard part:
the balance lets a part hold several whole layers, and the cover cuts of
branch and price close most of the gap. At large K every layer must be
spread over many parts and the balance-implied cuts pin the bound down.
Branching is still not complete (a node whose counts are all whole can
remain fractional; it keeps its bound, so the result stays a proof). The
model size that matters is the number of classes (one per layer for
VGG-like models): support-enumeration pricing handles up to
:data:`.branch_price.ENUM_CLASSES` (2^C supports per pricing call); above
that HiGHS prices each pattern, which is far slower, and Add/depthwise
ties (ResNet) leave only the loose block-model bound.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, LinearConstraint
from scipy.sparse import coo_matrix

from hgpart.errors import HgpartError
from hgpart.hypergraph import Hypergraph
from hgpart.metrics import km1_bytes
from hgpart.partitioners._interrupt import cancel_on_interrupt, milp_interruptible
from hgpart.partitioners.base import MemoryCap, PartitionResult
from hgpart.partitioners.branch_price import pattern_bound
from hgpart.partitioners.chain import chain_counts
from hgpart.partitioners.counts import MIB, CoarseClasses, NetType, analyze, even_counts, expand_counts

__all__ = ["Effort", "DETERMINISTIC", "ExactSolution", "InfeasibleError", "MemoryRows", "CountProgram", "solve_counts",
           "solve_exact", "coarse_lower_bound", "resolve_preset", "run", "run_with_memory"]

DEFAULT_TIME_LIMIT = 60.0
#: cut points per part capacity of the chain placement that seeds the program (:mod:`.chain`)
CHAIN_STEPS = 160


@dataclass(frozen=True)
class Effort:
    """A fixed amount of solver work in place of a wall-clock race (the ``deterministic`` preset).

    HiGHS is deterministic for a given program and node limit, and branch and
    price for a given iteration count, so a run stopped by these counts gives
    the same placement on any machine; the time limit then only guards
    against a run far slower than expected.
    """

    nodes: int = 1_000  # branch-and-bound nodes per HiGHS program
    iterations: int = 100  # column-generation iterations of branch and price

    def stopped_by_clock(self, seconds: float, time_limit: float) -> bool:
        """Whether a stage that took ``seconds`` under ``time_limit`` was cut short by the clock."""
        return seconds >= 0.98 * time_limit


#: the ``deterministic`` preset's effort
DETERMINISTIC = Effort()


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


@dataclass(frozen=True)
class MemoryRows:
    """A per-part memory limit as the count program sees it (module docstring): the columns' memory plus
    ``received_scale`` times the bytes of the maps the part receives, at most ``cap``."""

    per_column: np.ndarray  # bytes one column of each class brings to its part
    cap: float
    received_scale: float = 0.0  # bytes kept per byte of net cost received

    @classmethod
    def of(cls, model: CoarseClasses, vertex_bytes: np.ndarray, cap: float, received_scale: float = 0.0,
           ) -> MemoryRows:
        """The rows for per-vertex ``vertex_bytes``; a class's columns may differ slightly (grouped blocks with
        a short last group are their own class), so the largest column stands for the class."""
        return cls(np.array([float(vertex_bytes[mem].sum(axis=1).max()) for mem in model.members]), float(cap),
                   float(received_scale))


class InfeasibleError(HgpartError):
    """The program proved that no placement of whole filters meets its balance (and memory) rows."""


# ------------------------------------------------------------------ program


class SparseProgram:
    """A HiGHS program being built: variables allocated in blocks, constraint rows as sparse entries."""

    def __init__(self) -> None:
        self.nvar = 0
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.rlo: list[float] = []
        self.rhi: list[float] = []

    def alloc(self, count: int) -> int:
        """Index of the first of ``count`` new variables."""
        start = self.nvar
        self.nvar += count
        return start

    def row(self, entries: list[tuple[int, float]], low: float, high: float) -> None:
        """Add ``low <= sum val * var <= high`` for ``(var, val)`` in ``entries``."""
        r = len(self.rlo)
        for col, val in entries:
            self.rows.append(r)
            self.cols.append(col)
            self.vals.append(val)
        self.rlo.append(low)
        self.rhi.append(high)

    def constraint(self) -> LinearConstraint:
        A = coo_matrix((self.vals, (self.rows, self.cols)), shape=(len(self.rlo), self.nvar)).tocsr()
        return LinearConstraint(A, np.array(self.rlo), np.array(self.rhi))


@dataclass
class CountProgram:
    """The column/block model's integer program (module docstring): variables, bounds, rows, objective."""

    model: CoarseClasses
    K: int
    cap: float
    memory: MemoryRows | None = None
    prog: SparseProgram = field(default_factory=SparseProgram)
    x0: int = 0
    yidx: dict[int, int] = field(default_factory=dict)  # full-reader block -> its K y variables
    zidx: dict[tuple[int, ...], int] = field(default_factory=dict)  # reader set -> its K z variables
    typed: list[NetType] = field(default_factory=list)  # net types with readers or partial readers
    sidx: list[int] = field(default_factory=list)  # per typed: its K s variables (-1: none)
    vidx: dict[int, int] = field(default_factory=dict)  # id(net type) -> v (partial readers)
    mmidx: dict[int, int] = field(default_factory=dict)  # id(net type) -> its K mm variables

    def X(self, c: int, p: int) -> int:
        """Index of x[c, p]."""
        return self.x0 + c * self.K + p

    @classmethod
    def build(cls, model: CoarseClasses, k: int, epsilon: float, memory: MemoryRows | None = None,
              ) -> tuple[CountProgram, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The program and its (lower bounds, upper bounds, integrality, cost) vectors."""
        K = int(k)
        self = cls(model, K, (1.0 + epsilon) * model.total_weight / K, memory)
        p = self.prog
        self.x0 = p.alloc(len(model.members) * K)
        reader_blocks = sorted(model.reader_classes)
        self.yidx = {b: p.alloc(K) for b in reader_blocks}
        rsets = sorted({t.readers for t in model.net_types if t.readers})
        self.zidx = {r: p.alloc(K) for r in rsets}
        self.typed = [t for t in model.net_types if t.readers or t.partial]
        self.sidx = [p.alloc(K) if t.readers else -1 for t in self.typed]
        mix = [t for t in self.typed if t.partial]
        self.vidx = {id(t): p.alloc(1) for t in mix}
        self.mmidx = {id(t): p.alloc(K) for t in mix}
        lo, hi, integ = self._bounds()
        cost = np.zeros(p.nvar)
        U = self._balance_rows(epsilon)
        self._span_rows(U)
        self._net_rows(U, cost)
        # symmetry: parts ordered by the counts of the heaviest class
        star = int(np.argmax(model.weight * model.sizes))
        for q in range(K - 1):
            p.row([(self.X(star, q), 1.0), (self.X(star, q + 1), -1.0)], 0.0, np.inf)
        return self, lo, hi, integ, cost

    def _bounds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        K, n, nvar = self.K, self.model.sizes, self.prog.nvar
        lo = np.zeros(nvar)
        hi = np.full(nvar, np.inf)
        integ = np.zeros(nvar, dtype=np.uint8)
        C = len(self.model.members)
        for c in range(C):
            hi[self.x0 + c * K : self.x0 + (c + 1) * K] = n[c]
        integ[self.x0 : self.x0 + C * K] = 1
        for start in [*self.yidx.values(), *self.zidx.values()]:
            hi[start : start + K] = 1
            integ[start : start + K] = 1
        return lo, hi, integ

    def _balance_rows(self, epsilon: float) -> np.ndarray:
        """Every column placed once, the balance; returns ``U`` (the most columns of a class a part holds)."""
        model, K, p, n, cap = self.model, self.K, self.prog, self.model.sizes, self.cap
        C = len(model.members)
        for c in range(C):
            p.row([(self.X(c, q), 1.0) for q in range(K)], float(n[c]), float(n[c]))
        for q in range(K):
            p.row([(self.X(c, q), float(model.weight[c])) for c in range(C) if model.weight[c] != 0.0], -np.inf, cap)
        with np.errstate(divide="ignore", invalid="ignore"):
            fit = np.where(model.weight > 0, np.floor(cap / np.where(model.weight > 0, model.weight, 1.0) + 1e-9), n)
        U = np.minimum(n, fit).astype(np.int64)
        if np.any(U < 1):
            raise HgpartError(
                f"one filter weighs more than a part may hold ((1+{epsilon})*total/{K})",
                where=f"exact backend, K={K}", fix="raise --epsilon or use fewer parts",
            )
        return U if self.memory is None else self._memory_rows(U)

    def _memory_rows(self, U: np.ndarray) -> np.ndarray:
        """``sum_c M_c x[c,q] <= cap`` per part; ``U`` tightened to the columns that fit the memory too."""
        mem, C = self.memory, len(self.model.members)
        assert mem is not None
        recv = [(s0, t.cost * mem.received_scale) for t, s0 in zip(self.typed, self.sidx, strict=True)
                 if s0 >= 0 and mem.received_scale > 0]
        for q in range(self.K):
            self.prog.row([(self.X(c, q), float(mem.per_column[c])) for c in range(C) if mem.per_column[c] > 0]
                          + [(s0 + q, w) for s0, w in recv], -np.inf, mem.cap)
        with np.errstate(divide="ignore", invalid="ignore"):
            fit = np.where(mem.per_column > 0, np.floor(mem.cap / np.where(mem.per_column > 0, mem.per_column, 1.0)
                                                        + 1e-9), U)
        if np.any(fit < 1):
            raise InfeasibleError(f"one filter needs more memory than a device holds ({mem.cap:.4g} bytes)",
                              where=f"exact backend, K={self.K}", fix="use a smaller batch or a finer grain")
        return np.minimum(U, fit).astype(np.int64)

    def _span_rows(self, U: np.ndarray) -> None:
        """y[b, q] = "block b has a vertex on q" and z[R, q] = "some reader of R is on q"."""
        model, K, p = self.model, self.K, self.prog
        need = -(-model.sizes // U)  # ceil(n / U)
        for b, y in self.yidx.items():
            for c in model.reader_classes[b]:
                for q in range(K):
                    p.row([(y + q, float(U[c])), (self.X(c, q), -1.0)], 0.0, np.inf)
            nb = int(max(need[c] for c in model.reader_classes[b]))
            if nb > 1:
                p.row([(y + q, 1.0) for q in range(K)], float(nb), np.inf)
        for r, z in self.zidx.items():
            for b in r:
                for q in range(K):
                    p.row([(z + q, 1.0), (self.yidx[b] + q, -1.0)], 0.0, np.inf)

    def _net_rows(self, U: np.ndarray, cost: np.ndarray) -> None:
        """The linearised cost of every net type (s), and the block model's partial-reader terms (v, mm)."""
        n, K, p = self.model.sizes, self.K, self.prog
        for t, s0 in zip(self.typed, self.sidx, strict=True):
            m, nc = float(t.per_column), float(n[t.cls])
            w = t.cost / MIB
            if t.readers:
                z = self.zidx[t.readers]
                # s >= m(n - x) - m n (1 - z)  <=>  s + m x - m n z >= 0
                for q in range(K):
                    p.row([(s0 + q, 1.0), (self.X(t.cls, q), m), (z + q, -m * nc)], 0.0, np.inf)
                    if U[t.cls] < n[t.cls]:
                        # a reader on q sees at least n - U roots elsewhere: s >= m (n - U) z
                        p.row([(s0 + q, 1.0), (z + q, -m * float(n[t.cls] - U[t.cls]))], 0.0, np.inf)
            if not t.partial:
                cost[s0 : s0 + K] += w
                continue
            v, mm = self.vidx[id(t)], self.mmidx[id(t)]
            cost[v] = w
            if t.readers:
                p.row([(v, 1.0)] + [(s0 + q, -1.0) for q in range(K)], 0.0, np.inf)
            d = t.partial[0]
            for q in range(K):
                p.row([(mm + q, 1.0), (self.X(t.cls, q), -1.0)], -np.inf, 0.0)
                p.row([(mm + q, 1.0), (self.X(d, q), -1.0)], -np.inf, 0.0)
            # v >= m * (n - sum mm)
            p.row([(v, 1.0)] + [(mm + q, m) for q in range(K)], m * nc, np.inf)


def solve_counts(
    model: CoarseClasses, k: int, epsilon: float, *, time_limit: float, mip_rel_gap: float = 1e-6,
    node_limit: int | None = None, memory: MemoryRows | None = None,
) -> ExactSolution:
    """Build and solve the integer program of the module docstring with HiGHS (``node_limit``: nodes at most;
    ``memory``: a per-part memory limit as well as the balance)."""
    t0 = time.perf_counter()
    C, K = len(model.members), int(k)
    cp, lo, hi, integ, cost = CountProgram.build(model, K, epsilon, memory)
    res = milp_interruptible(
        cost,
        constraints=cp.prog.constraint(),
        integrality=integ,
        bounds=Bounds(lo, hi),
        options={"time_limit": float(max(time_limit, 0.1)), "mip_rel_gap": mip_rel_gap, "disp": False,
                 **({} if node_limit is None else {"node_limit": int(node_limit)})},
    )
    secs = time.perf_counter() - t0
    bound = getattr(res, "mip_dual_bound", None)
    bound_bytes = max(float(bound), 0.0) * MIB if bound is not None and np.isfinite(bound) else 0.0
    info: dict[str, object] = {"variables": cp.prog.nvar, "constraints": len(cp.prog.rlo),
                               "nodes": int(getattr(res, "mip_node_count", 0) or 0)}
    if res.x is None:
        if res.status == 2:  # infeasible
            also = "" if memory is None else f" and the memory limit of {memory.cap:.4g} bytes"
            raise InfeasibleError(
                f"no placement of whole filters meets the balance (1+{epsilon})*total/{K}{also}",
                where=f"exact backend, K={K}", fix="raise --epsilon or use fewer parts",
            )
        return ExactSolution(np.zeros((C, K), dtype=np.int64), float("inf"), bound_bytes, False,
                             f"no incumbent ({res.message})", secs, info)
    counts = np.rint(res.x[cp.x0 : cp.x0 + C * K]).astype(np.int64).reshape(C, K)
    obj = float(res.fun) * MIB
    optimal = res.status == 0
    if optimal:
        bound_bytes = max(bound_bytes, obj * (1.0 - mip_rel_gap))
    return ExactSolution(counts, obj, min(bound_bytes, obj), optimal, str(res.message), secs, info)


def solve_exact(model: CoarseClasses, k: int, epsilon: float, *, time_limit: float,
                head_start: float = 4.0, effort: Effort | None = None) -> ExactSolution:
    """The compact program and branch and price side by side; the better placement, the larger bound.

    Why both: HiGHS on the compact program finds good placements fast and
    proves small K optimal, and its own branch and cut keeps raising the
    bound when layers are very unequal; :func:`pattern_bound` proves far more
    at larger K with FLOP-like weights. Neither dominates, so the compact
    program runs in a thread for the whole time limit (HiGHS releases the
    GIL: two cores, two solvers) while branch and price runs here after a
    short head start, stopping early when the compact program proves its
    optimum. Incumbents: the best contiguous chain placement
    (:mod:`hgpart.partitioners.chain`), the program's and the pattern master's.

    ``effort``: no race; the program runs first, limited to ``effort.nodes``,
    then (unless it proved the optimum) branch and price for
    ``effort.iterations``, so the result does not depend on the machine's speed.
    """
    t0 = time.perf_counter()
    chain = chain_counts(model, k, epsilon, steps=CHAIN_STEPS) if k > 1 else None
    rel_gap = 1e-4
    lb: float = 0.0
    info: dict[str, object] = {}
    pricing_ok = chain is not None and not any(t.partial for t in model.net_types)
    if effort is not None:
        sol = solve_counts(model, k, epsilon, time_limit=time_limit, node_limit=effort.nodes)
        rest = time_limit - (time.perf_counter() - t0)
        if not sol.optimal and pricing_ok and chain is not None and rest > 0.0:
            lb, info = pattern_bound(model, k, epsilon, time_limit=rest, columns=chain[0].T,
                                     incumbent_bytes=chain[1] * MIB, rel_gap=rel_gap,
                                     max_iterations=effort.iterations, node_limit=effort.nodes)
    else:
        sol, lb, info = _race(model, k, epsilon, time_limit, head_start, chain if pricing_ok else None, rel_gap)
    counts, obj, source = sol.counts, sol.objective_bytes, "program"
    if sol.optimal:
        return sol
    for name, cand, cand_obj in (("chain", None if chain is None else chain[0], np.inf if chain is None
                                  else chain[1] * MIB),
                                 ("patterns", info.pop("counts", None), _as_float(info.pop("counts_bytes", np.inf)))):
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


def _race(model: CoarseClasses, k: int, epsilon: float, time_limit: float, head_start: float,
          chain: tuple[np.ndarray, float] | None, rel_gap: float) -> tuple[ExactSolution, float, dict[str, object]]:
    """The compact program in a thread, branch and price here until it finishes or time runs out."""
    t0 = time.perf_counter()
    finished = threading.Event()

    def compact() -> ExactSolution:
        try:
            return solve_counts(model, k, epsilon, time_limit=time_limit)
        finally:
            finished.set()

    lb: float = 0.0
    info: dict[str, object] = {}
    with ThreadPoolExecutor(max_workers=1) as pool, cancel_on_interrupt():
        fut = pool.submit(compact)
        finished.wait(min(head_start, time_limit))
        rest = time_limit - (time.perf_counter() - t0)
        if not finished.is_set() and chain is not None and rest >= 1.0:
            lb, info = pattern_bound(model, k, epsilon, time_limit=rest, columns=chain[0].T,
                                     incumbent_bytes=chain[1] * MIB, rel_gap=rel_gap, stop=finished.is_set)
        sol = fut.result()
    return sol, lb, info


def _as_float(v: object) -> float:
    return float(v) if isinstance(v, int | float) else float("nan")


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


def resolve_preset(preset: str | None) -> Effort | None:
    """``None`` / ``"highs"``: solvers race the time limit; ``"deterministic"``: :data:`DETERMINISTIC` effort."""
    key = (preset or "highs").strip().lower()
    if key == "highs":
        return None
    if key == "deterministic":
        return DETERMINISTIC
    raise HgpartError(f"unknown exact preset {preset!r}", fix="use 'highs' (default) or 'deterministic'")


def run(hg: Hypergraph, *, k: int, epsilon: float, seed: int, preset: str | None, time_limit: float | None,
        threads: int | None = None, bound: bool = True, effort: Effort | None = None,
        memory: MemoryCap | None = None) -> PartitionResult:
    """Backend entry point (see :mod:`hgpart.partitioners`).

    ``memory``: every part also within a memory limit (the program alone, :func:`run_with_memory`).

    ``preset="deterministic"`` (or ``effort``): solvers stop after a fixed
    amount of work (:class:`Effort`), not at the time limit, so the same
    input gives the same placement on any machine unless the time limit
    cuts a stage short (``info["deterministic"]`` is then False).

    ``bound=False``: with split columns the block-model bound program is
    skipped, the whole time goes to the column model's placement and
    ``lower_bound_bytes`` is None (the block model's counts are often the
    better placement, so auto keeps ``bound=True`` for residual models).
    """
    t0 = time.perf_counter()
    effort = effort or resolve_preset(preset)
    nodes = None if effort is None else effort.nodes
    limit = float(time_limit) if time_limit else DEFAULT_TIME_LIMIT
    model = analyze(hg, columns=True)
    if memory is not None:
        return run_with_memory(hg, model, k, epsilon, memory, time_limit=limit, node_limit=nodes,
                               deterministic=effort is not None)
    lb_bytes: float | None
    if model.split_columns:
        sol = solve_counts(model, k, epsilon, time_limit=limit / 2 if bound else limit, node_limit=nodes)
        relaxed = analyze(hg, columns=False)
        lb = None
        if bound:
            lb = solve_counts(relaxed, k, epsilon, time_limit=max(limit - (time.perf_counter() - t0), 1.0),
                              node_limit=nodes)
        lb_bytes = lb.bound_bytes if lb is not None else None
    else:
        sol = solve_exact(model, k, epsilon, time_limit=limit, effort=effort)
        lb_bytes = sol.bound_bytes
    counts = sol.counts if np.isfinite(sol.objective_bytes) else even_counts(model, k)
    parts = expand_counts(hg, model, counts)
    obj = km1_bytes(hg, parts, k)
    if model.split_columns:
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
        preset="highs" if effort is None else "deterministic",
        backend_objective=obj,
        objective_scale=1.0,
        lower_bound_bytes=None if lb_bytes is None else min(lb_bytes, obj),
        info={
            "optimal": bool(sol.optimal and not model.split_columns),
            "status": sol.status,
            "program_bytes": sol.objective_bytes,
            "classes": len(model.members),
            "column_model": model.split_columns,
            "deterministic": effort is not None and not effort.stopped_by_clock(time.perf_counter() - t0, limit),
            **sol.info,
        },
    )


def run_with_memory(hg: Hypergraph, model: CoarseClasses, k: int, epsilon: float, memory: MemoryCap, *,
                    time_limit: float, node_limit: int | None, deterministic: bool) -> PartitionResult:
    """The count program with a memory row per part (module docstring); its dual bound is a proven lower
    bound on km1 among placements that meet the balance and the memory rows when columns are not split.

    Raises:
        HgpartError: no placement of whole filters meets the balance and the memory rows (HiGHS proved it),
            or one filter alone needs more than the cap.
    """
    t0 = time.perf_counter()
    sol = solve_counts(model, k, epsilon, time_limit=time_limit, node_limit=node_limit,
                       memory=MemoryRows.of(model, memory.vertex_bytes, memory.cap, memory.received_scale))
    if not np.isfinite(sol.objective_bytes):
        raise HgpartError(f"the exact program found no placement within the memory limit in {time_limit:g} s "
                          f"({sol.status})", where=f"exact backend, K={k}", fix="raise --time-limit")
    parts = expand_counts(hg, model, sol.counts)
    obj = km1_bytes(hg, parts, k)
    return PartitionResult(
        parts=parts, backend="exact", seconds=time.perf_counter() - t0,
        preset="deterministic" if deterministic else "highs", backend_objective=obj, objective_scale=1.0,
        lower_bound_bytes=None if model.split_columns else min(sol.bound_bytes, obj),
        info={"optimal": bool(sol.optimal and not model.split_columns), "status": sol.status,
              "program_bytes": sol.objective_bytes, "classes": len(model.members),
              "column_model": model.split_columns, "memory_cap_bytes": memory.cap, **sol.info},
    )
