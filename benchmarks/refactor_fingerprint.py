"""Deterministic outputs of the partitioners' count analysis, exact program, branch and price and portfolio.

Usage::

    python benchmarks/refactor_fingerprint.py > before.json    # on the old code
    python benchmarks/refactor_fingerprint.py > after.json     # on the new code
    diff before.json after.json                                 # a refactoring must print nothing

Why: a refactoring of these solvers must not change a single result. Every
run here is stopped by a count (branch-and-price iterations, a portfolio
that finishes all its jobs, programs that reach proven optimality), never by
the wall clock, so two runs of the same code print the same digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from hgpart.hypergraph import Hypergraph, build_hypergraph  # noqa: E402
from hgpart.models import load_graph  # noqa: E402
from hgpart.partitioners.branch_price import pattern_bound  # noqa: E402
from hgpart.partitioners.chain import chain_counts  # noqa: E402
from hgpart.partitioners.counts import MIB, analyze  # noqa: E402
from hgpart.partitioners.exact import solve_counts  # noqa: E402
from hgpart.partitioners.portfolio import Candidate, run_portfolio  # noqa: E402
from hgpart.profile import analytic_profile  # noqa: E402


def digest(a: object) -> str:
    return hashlib.sha256(np.ascontiguousarray(np.asarray(a)).tobytes()).hexdigest()[:16]


def graph(name: str, shape: tuple[int, int, int], grain: str) -> Hypergraph:
    g = load_graph(name, input_shape=shape)
    prof = analytic_profile(g, 32)
    return build_hypergraph(g, prof.work(), batch_size=32, grain=grain, work_unit=prof.work_unit)


class CountStop:
    """``stop`` for pattern_bound: True after ``n`` calls (a deterministic budget instead of seconds)."""

    def __init__(self, n: int) -> None:
        self.n, self.calls = n, 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.calls > self.n


def model_summary(hg: Hypergraph, columns: bool) -> dict[str, object]:
    m = analyze(hg, columns=columns)
    return {"classes": len(m.members), "members": digest(np.concatenate([x.ravel() for x in m.members])),
            "weight": digest(m.weight), "split": m.split_columns,
            "net_types": [[t.cls, t.per_column, t.cost, list(t.readers), list(t.partial)] for t in m.net_types],
            "reader_classes": {str(b): v for b, v in m.reader_classes.items()}}


def main() -> None:
    out: dict[str, object] = {}
    vgg = graph("vgg16", (224, 224, 3), "coarse")
    res = graph("resnet18", (32, 32, 3), "coarse")
    out["vgg16 analyze"] = model_summary(vgg, True)
    out["resnet18 analyze columns"] = model_summary(res, True)
    out["resnet18 analyze blocks"] = model_summary(res, False)
    for name, hg, k, columns in (("vgg16", vgg, 2, True), ("vgg16", vgg, 4, True), ("resnet18", res, 4, True),
                                 ("resnet18", res, 4, False)):
        sol = solve_counts(analyze(hg, columns=columns), k, 0.1, time_limit=300.0)
        out[f"{name} solve_counts K={k} columns={columns}"] = {
            "counts": sol.counts.tolist(), "objective": round(sol.objective_bytes, 3), "optimal": sol.optimal,
            "status": sol.status}
        print(name, k, sol.status, f"{sol.seconds:.1f}s", file=sys.stderr, flush=True)
    model = analyze(vgg)
    for k, iters in ((8, 60), (16, 60), (32, 40)):
        chain = chain_counts(model, k, 0.1, steps=160)
        assert chain is not None
        lb, info = pattern_bound(model, k, 0.1, time_limit=1e6, columns=chain[0].T, incumbent_bytes=chain[1] * MIB,
                                 stop=CountStop(iters))
        out[f"vgg16 pattern_bound K={k}"] = {
            "bound": round(lb, 3), "chain": round(chain[1] * MIB, 3),
            "counts": None if "counts" not in info else np.asarray(info["counts"]).tolist(),
            **{key: (round(v, 3) if isinstance(v, float) else v) for key, v in info.items()
               if key not in ("counts", "seconds")}}
        print("pattern_bound", k, lb / MIB, file=sys.stderr, flush=True)
    fine = graph("resnet18", (32, 32, 3), "fine")
    from hgpart.partitioners.block import grouped_family

    fam = grouped_family(fine, (8, 16), min_1d=128)
    cands = [Candidate("8x8", *fam[8], seeds=3), Candidate("16x16", *fam[16], seeds=2)]
    runs = run_portfolio(cands, k=4, epsilon=0.1, seconds=600.0, workers=2, refine_share=0.3, seed0=1)
    # a refine run's origin is an index into runs, whose order depends on which worker answered first: name it
    origin = {i: f"{r.graph}/{r.seed}" for i, r in enumerate(runs)}
    out["resnet18 fine portfolio K=4"] = sorted(
        [r.graph, r.kind, r.seed, r.km1_bytes, round(r.imbalance, 6), origin.get(r.origin, str(r.origin)),
         digest(r.parts)] for r in runs)
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
