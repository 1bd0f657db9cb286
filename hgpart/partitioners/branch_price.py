"""Branch and price over one part's patterns: the proven lower bound that closes the count program's gap.

Usage::

    from hgpart.partitioners.branch_price import pattern_bound
    bound_bytes, info = pattern_bound(model, k=16, epsilon=0.1, time_limit=60)

The LP relaxation of the compact program lets every layer sit thinly on all
parts (``y = x / n``), so from K = 8 its bound stalls far below the
incumbent. The objective is a sum of per-part terms and the parts are
identical, so :func:`.exact.solve_exact` runs the compact program (it proves
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
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, linprog
from scipy.sparse import coo_matrix, csr_matrix, hstack, vstack

from hgpart.partitioners._interrupt import CANCEL, milp_interruptible
from hgpart.partitioners.counts import MIB, CoarseClasses, NetType, PartCost, even_counts

__all__ = ["ENUM_CLASSES", "MAX_CUTS", "SupportPricer", "BranchAndPrice", "pattern_bound"]

#: the pricing problem is solved by enumerating supports when there are at most this many classes (2^C rows)
ENUM_CLASSES = 18
#: cover cuts branch and price may add to its master (intervals of classes, see :func:`pattern_bound`)
MAX_CUTS = 200


class SupportPricer:
    """Exact-bound pricing for one part by enumerating which classes it holds (VGG-like models).

    Why: with HiGHS pricing, branch and price spends nearly all its time
    solving the one-part pricing program (hundreds of calls). Once the
    support ``u`` (which classes the part holds) is fixed, ``y``, ``z`` and
    so the whole objective are fixed functions of ``u`` and the program is
    a bounded knapsack in the counts, ``x_c`` in ``[u_c, U_c u_c]`` with
    linear cost ``g_c(u) = -pi_c - sum_{T rooted in c} w_T m_T z_T(u)``.
    Its LP relaxation (greedy by cost per weight) is a lower bound of the
    knapsack, so ``min_u`` of it bounds the pricing minimum from below (a
    valid, and with hundreds of filters per layer nearly exact, inner
    bound); flooring the one fractional item gives a whole pattern. All
    ``2^C`` supports are evaluated at once with numpy, which is fast up to
    :data:`ENUM_CLASSES` classes.
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
    cover_cuts: bool = True, max_iterations: int | None = None, node_limit: int | None = None,
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
    their duals per support (far tighter root bounds once layers outweigh a part).
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
    t0 = time.perf_counter()
    info: dict[str, object] = {"iterations": 0, "nodes": 0}
    if any(t.partial for t in model.net_types):
        info["skipped"] = "partial readers"
        return 0.0, info
    program = PricingProgram.of(model, int(k), epsilon)
    if np.any(program.U < 1):
        info["skipped"] = "a filter exceeds a part"
        return 0.0, info
    bp = BranchAndPrice(model, program, t0=t0, time_limit=time_limit, columns=columns,
                        incumbent_bytes=incumbent_bytes, rel_gap=rel_gap, stop=stop, cover_cuts=cover_cuts,
                        max_iterations=max_iterations, node_limit=node_limit)
    return bp.solve()


Key = tuple[int, int]  # (class c, threshold t): the number of parts holding >= t columns of c


@dataclass
class PricingProgram:
    """The one-part pricing program as a HiGHS model: variables x[c], u[c], y[b], z[R], s[T]."""

    K: int
    cap: float  # the most weight a part may hold
    n: np.ndarray  # columns per class (float)
    U: np.ndarray  # the most columns of a class one part holds (balance)
    typed: list[NetType]  # net types with full readers
    A: csr_matrix
    cons: LinearConstraint
    lo: np.ndarray
    hi: np.ndarray
    integ: np.ndarray
    wcost: np.ndarray  # objective without prices: the nets' cost
    nvar: int

    @classmethod
    def of(cls, model: CoarseClasses, K: int, epsilon: float) -> PricingProgram:
        C = len(model.members)
        n = model.sizes.astype(float)
        cap = (1.0 + epsilon) * model.total_weight / K
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
        return cls(K, cap, n, U, typed, A, cons, lo, hi, integ, wcost, nvar)

    def solve(self, pi: np.ndarray, du: np.ndarray, dthr: dict[Key, float], cuts: list[tuple[int, ...]],
              dcut: np.ndarray, limit: float) -> tuple[float, np.ndarray | None, float]:
        """HiGHS on the program with prices: (proven dual bound, a pattern or None, its reduced cost).

        ``dthr`` prices ``[x_c >= t]`` (t >= 2) and ``dcut`` the cover cuts
        ``[the part touches Q]`` for ``Q`` in ``cuts``: each adds a variable
        and its linking rows.
        """
        C, nvar, A, cons, U = len(pi), self.nvar, self.A, self.cons, self.U
        keys = sorted(dthr)
        m, mc = len(keys), len(cuts)
        obj = np.r_[self.wcost, np.zeros(m + mc)]
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
            for q, cls_q in enumerate(cuts):
                obj[nvar + m + q] = -dcut[q]
                extra[2 * m + q, nvar + m + q] = 1.0
                extra[2 * m + q, [C + c for c in cls_q]] = -1.0
            a_all = vstack([hstack([A, csr_matrix((A.shape[0], m + mc))]), csr_matrix(extra)]).tocsr()
            lo_all = np.r_[cons.lb, np.full(2 * m + mc, -np.inf)]
            hi_all = np.r_[cons.ub, np.array([[0.0, float(t - 1)] for _, t in keys]).ravel(), np.zeros(mc)]
        res = milp_interruptible(obj, constraints=LinearConstraint(a_all, lo_all, hi_all),
                   integrality=np.r_[self.integ, np.ones(m, dtype=np.uint8), np.zeros(mc, dtype=np.uint8)],
                   bounds=Bounds(np.r_[self.lo, np.zeros(m + mc)], np.r_[self.hi, np.ones(m + mc)]),
                   options={"time_limit": max(limit, 0.05), "mip_rel_gap": 1e-9, "disp": False})
        db = getattr(res, "mip_dual_bound", None)
        db = float(db) if db is not None and np.isfinite(db) else -np.inf
        if res.x is None:
            return db, None, np.inf
        return db, np.rint(res.x[:C]), float(res.fun)


@dataclass
class MasterDuals:
    """Prices from one solve of the restricted master LP and the constant of its Lagrangian bound."""

    pi: np.ndarray  # per class: price of sum_q x[c,q] = n_c
    mu: float  # price of the part count
    du: np.ndarray  # per class: price of [x_c >= 1] (span limits)
    dthr: dict[Key, float]  # price of [x_c >= t], t >= 2
    dcut: np.ndarray  # per cover cut
    const: float
    lam: np.ndarray  # the patterns' LP weights
    fun: float  # LP value


@dataclass
class NodeResult:
    """Column generation at one node: best Lagrangian bound, patterns, their LP weights, converged."""

    bound: float
    P: np.ndarray
    lam: np.ndarray
    done: bool


@dataclass(order=True)
class Node:
    """An open node of the branch-and-price tree, ordered by its parent's bound (best first)."""

    parent_bound: float
    serial: int
    lim_lo: dict[Key, int] = field(compare=False)
    lim_hi: dict[Key, int] = field(compare=False)


class BranchAndPrice:
    """The state of :func:`pattern_bound`'s search: pricing program, pattern master, cover cuts and tree.

    ``pats`` / ``costs`` are the master's patterns (one part's counts) and
    their cost, ``cuts`` the cover cuts added so far (global), ``inc`` the
    incumbent in MiB, ``info`` what :func:`pattern_bound` reports.
    """

    def __init__(self, model: CoarseClasses, program: PricingProgram, *, t0: float, time_limit: float,
                 columns: np.ndarray | None, incumbent_bytes: float, rel_gap: float,
                 stop: Callable[[], bool] | None, cover_cuts: bool, max_iterations: int | None = None,
                 node_limit: int | None = None) -> None:
        self.model, self.prog = model, program
        self.max_iterations, self.node_limit = max_iterations, node_limit
        self.t0, self.time_limit, self.rel_gap, self.stop, self.cover_cuts = t0, time_limit, rel_gap, stop, cover_cuts
        self.C, self.K, self.n = len(model.members), program.K, program.n
        self.info: dict[str, object] = {"iterations": 0, "nodes": 0}
        self.pricer = (SupportPricer(model, program.typed, program.U, program.cap)
                       if self.C <= ENUM_CLASSES else None)
        self.info["pricing"] = "supports" if self.pricer is not None else "highs"
        # cover cuts (global, valid at every node): the parts touching classes Q hold all of Q's weight,
        # so at least ceil(weight(Q) / cap) parts touch Q
        self.cuts: list[tuple[tuple[int, ...], int]] = []
        self.cut_rows: list[np.ndarray] = []  # per cut: the support pricer's row (1.0 where a support touches Q)
        C, n, cap = self.C, self.n, program.cap
        cover_sets = [tuple(range(i, j + 1)) for i in range(C) for j in range(i, C)]
        self.cover_need = {q: int(np.ceil(float(model.weight[list(q)] @ n[list(q)]) / cap - 1e-9))
                           for q in cover_sets}
        self.cover_sets = [q for q in cover_sets if self.cover_need[q] >= 1]
        self.cost_of = PartCost.of(model)
        # how much a class's span matters: the maps its readers pull in, and the maps it is read for
        self.stake = np.ones(C)
        for t in program.typed:
            self.stake[t.cls] += t.cost / MIB * t.per_column * n[t.cls]
            for b in t.readers:
                for c in model.reader_classes[b]:
                    self.stake[c] += t.cost / MIB * t.per_column * n[t.cls]
        if columns is None:
            columns = even_counts(model, self.K).T
        self.pats = [np.zeros(C)] + [np.asarray(p, dtype=float) for p in columns]
        self.costs = [self.part_cost(p) for p in self.pats]
        self.big = 10.0 * (sum(t.cost / MIB * t.per_column * n[t.cls] for t in program.typed) * self.K + 1.0)
        self.inc = incumbent_bytes / MIB
        self.root: float | None = None  # the root node's bound
        self.serial = 1  # tie-breaker of equal bounds in the tree

    def out_of_time(self) -> bool:
        """Out of time, interrupted, or ``stop()`` says another solver proved the optimum."""
        return ((self.stop is not None and self.stop()) or time.perf_counter() - self.t0 >= self.time_limit
                or CANCEL.is_set()
                or (self.max_iterations is not None
                    and int(self.info["iterations"]) >= self.max_iterations))  # type: ignore[call-overload]

    def left(self) -> float:
        return self.time_limit - (time.perf_counter() - self.t0)

    def part_cost(self, x: np.ndarray) -> float:
        return float(self.cost_of(x)[0])

    def closed(self, bound: float) -> bool:
        """A node with this bound cannot hold a placement better than the incumbent."""
        return bound >= self.inc * (1.0 - self.rel_gap)

    def price(self, duals: MasterDuals, limit: float, exact: bool = False) -> tuple[float, np.ndarray | None, float]:
        """Pricing: (lower bound on the minimum reduced cost, a pattern, its reduced cost).

        ``exact``: HiGHS even where supports would do (the support pricer's
        bound relaxes the counts, which is loose when few columns fit a part).
        """
        if self.pricer is not None and not duals.dthr and not exact:
            dsup = (np.column_stack(self.cut_rows) @ duals.dcut
                    if self.cuts and np.any(duals.dcut > 0.0) else None)
            return self.pricer(duals.pi, duals.du, dsup)
        return self.prog.solve(duals.pi, duals.du, duals.dthr, [q for q, _ in self.cuts], duals.dcut, limit)

    def separate(self, P: np.ndarray, lam: np.ndarray) -> bool:
        """Add the cover cuts the master's solution violates most (at most 30 a round); True if any."""
        have = {q for q, _ in self.cuts}
        viol = []
        for q in self.cover_sets:
            if q not in have:
                short = self.cover_need[q] - float(_touching(P, q) @ lam)
                if short > 1e-6:
                    viol.append((short, q))
        viol.sort(reverse=True)
        for _, q in viol[:30]:
            self.cuts.append((q, self.cover_need[q]))
            if self.pricer is not None:
                self.cut_rows.append(self.pricer.touches(q))
        return bool(viol)

    def master_lp(self, P: np.ndarray, lkeys: list[Key], hkeys: list[Key], lim_lo: dict[Key, int],
                  lim_hi: dict[Key, int]) -> MasterDuals | None:
        """Solve the restricted master LP over patterns ``P`` at a node; its duals, or None when it fails."""
        C, K, n = self.C, self.K, self.n
        J = P.shape[1]
        nl, nh, mc = len(lkeys), len(hkeys), len(self.cuts)
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
        for i, (q, _) in enumerate(self.cuts):
            a_ub[nl + nh + i, :J] = -_touching(P, q)
        a_ub[:, J + 2 * C :] = -np.eye(nu)  # slack, penalised: the master is always solvable
        b_ub = np.r_[[-float(lim_lo[key]) for key in lkeys], [float(lim_hi[key]) for key in hkeys],
                     [-float(need) for _, need in self.cuts]]
        obj = np.r_[self.costs, np.full(2 * C + nu, self.big)]
        lp = linprog(obj, A_eq=a_eq, b_eq=np.r_[n, K], A_ub=a_ub if nu else None,
                     b_ub=b_ub if nu else None, bounds=(0, None), method="highs")
        if lp.status != 0:
            self.info["master"] = lp.message
            return None
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
            const += float(dcut @ np.array([need for _, need in self.cuts], dtype=float))
        return MasterDuals(pi, mu, du, dthr, dcut, const, lp.x[:J], float(lp.fun))

    def node_bound(self, lim_lo: dict[Key, int], lim_hi: dict[Key, int], exact: bool = False) -> NodeResult:
        """Column generation at one node: (best Lagrangian bound, patterns, their LP weights, converged)."""
        best = -np.inf
        lkeys, hkeys = sorted(lim_lo), sorted(lim_hi)
        P, lam = np.array(self.pats).T, np.zeros(len(self.pats))
        while not self.out_of_time():
            P = np.array(self.pats).T
            duals = self.master_lp(P, lkeys, hkeys, lim_lo, lim_hi)
            if duals is None:
                return NodeResult(best, P, lam, False)
            lam = duals.lam
            db, x, val = self.price(duals, self.left(), exact)
            self.info["iterations"] = int(self.info["iterations"]) + 1  # type: ignore[call-overload]
            best = max(best, duals.const + self.K * min(db, 0.0))
            if self.closed(best):
                return NodeResult(best, P, lam, True)
            if x is None or val - duals.mu >= -1e-7 * max(1.0, abs(duals.fun)):
                if self.cover_cuts and len(self.cuts) < MAX_CUTS and self.separate(P, lam):
                    continue
                return NodeResult(max(best, min(duals.fun, best)), P, lam, True)
            self.pats.append(x)
            self.costs.append(self.part_cost(x))
        return NodeResult(best, P, lam, False)

    def branch_key(self, P: np.ndarray, lam: np.ndarray, lim_lo: dict[Key, int],
                   lim_hi: dict[Key, int]) -> tuple[Key, float] | None:
        """The most fractional count of parts holding >= t columns of a class (t = 1 first), or None.

        Only counts strictly inside the node's limits: a count outside them
        means the master leans on its penalised slack, and branching on it
        would give a child equal to the node (an endless loop).
        """
        for ts in ("span", "thresholds"):
            best_key, best_score, best_val = None, 0.0, 0.0
            for c in range(self.C):
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
                    if np.floor(val) < lim_lo.get((c, t), 0) or np.ceil(val) > lim_hi.get((c, t), self.K):
                        continue
                    score = min(frac, 1.0 - frac) * self.stake[c]
                    if score > best_score:
                        best_key, best_score, best_val = (c, t), score, val
            if best_key is not None:
                return best_key, best_val
        return None

    def master_ip(self, limit: float) -> None:
        """Whole parts from the patterns found so far (restricted master as an integer program)."""
        n, K = self.n, self.K
        P = np.array(self.pats).T
        res = milp_interruptible(np.array(self.costs), constraints=LinearConstraint(np.vstack([P, np.ones(P.shape[1])]),
                                                                        np.r_[n, K], np.r_[n, K]),
                   integrality=np.ones(P.shape[1], dtype=np.uint8), bounds=Bounds(0, K),
                   options={"time_limit": max(limit, 0.1), "disp": False,
                            **({} if self.node_limit is None else {"node_limit": self.node_limit})})
        if res.x is not None and float(res.fun) < self.inc * (1.0 - 1e-9):
            lam = np.rint(res.x).astype(np.int64)
            self.info["counts"] = np.repeat(P, lam, axis=1).astype(np.int64)
            self.inc = float(res.fun)
            self.info["counts_bytes"] = self.inc * MIB

    def _count(self, key: str) -> None:
        self.info[key] = int(self.info.get(key, 0)) + 1  # type: ignore[call-overload]

    def visit(self, node: Node, heap: list[Node], stuck: list[float]) -> bool:
        """Bound one node, then close it, branch (children onto ``heap``) or mark it ``stuck``; False: out of time."""
        lim_lo, lim_hi = node.lim_lo, node.lim_hi
        res = self.node_bound(lim_lo, lim_hi)
        bnd = max(res.bound, node.parent_bound)
        self._count("nodes")
        if self.root is None:
            self.root = bnd
        if int(self.info["nodes"]) % 10 == 1:  # type: ignore[call-overload]
            self.master_ip(min(5.0, self.left()))
        if not res.done:
            heapq.heappush(heap, Node(bnd, self.serial, lim_lo, lim_hi))
            return False
        if self.closed(bnd):
            return True
        pick = self.branch_key(res.P, res.lam, lim_lo, lim_hi)
        if pick is None and self.pricer is not None:
            # nothing left to branch on: redo the node with exact pricing, a tighter Lagrangian bound
            # (and, when the node leans on the master's slack, usually the proof that it is infeasible)
            ex = self.node_bound(lim_lo, lim_hi, exact=True)
            bnd = max(bnd, ex.bound)
            self._count("exact_pricing_nodes")
            if self.closed(bnd):
                return True
            pick = self.branch_key(ex.P, ex.lam, lim_lo, lim_hi) if ex.done else None
        if pick is None:
            stuck.append(bnd)
            return True
        key, val = pick
        if key[1] > 1:
            self._count("threshold_branches")
        down, up = int(np.floor(val)), int(np.ceil(val))
        heapq.heappush(heap, Node(bnd, self.serial, lim_lo, {**lim_hi, key: min(down, lim_hi.get(key, self.K))}))
        heapq.heappush(heap, Node(bnd, self.serial + 1, {**lim_lo, key: max(up, lim_lo.get(key, 0))}, lim_hi))
        self.serial += 2
        return True

    def solve(self) -> tuple[float, dict[str, object]]:
        """Best-bound search until every node is closed or time runs out; (bound in bytes, info)."""
        heap: list[Node] = [Node(0.0, 0, {}, {})]
        stuck: list[float] = []
        while heap and not self.out_of_time():
            node = heapq.heappop(heap)
            if self.closed(node.parent_bound):
                continue
            if not self.visit(node, heap, stuck):
                break
        self.master_ip(min(5.0, max(self.left(), 0.5)))
        open_bounds = [h.parent_bound for h in heap if not self.closed(h.parent_bound)] + stuck
        lb = min(open_bounds) if open_bounds else self.inc
        info = self.info
        info["root_bytes"] = max(self.root or 0.0, 0.0) * MIB
        info["open_nodes"] = len(open_bounds)
        info["integral_span_nodes"] = len(stuck)  # spans all whole but parts fractional: no span left to branch on
        info["patterns"] = len(self.pats)
        info["cover_cuts"] = len(self.cuts)
        info["seconds"] = time.perf_counter() - self.t0
        return max(min(lb, self.inc), 0.0) * MIB, info


def _touching(P: np.ndarray, q: tuple[int, ...]) -> np.ndarray:
    """Per pattern (column of ``P``): 1.0 when it holds a column of any class in ``q``."""
    return (P[list(q)] > 0).any(axis=0).astype(float)
