"""Refine a given partition with Mt-KaHyPar's V-cycles (``PartitionedHypergraph.improve_partition``).

Usage::

    from hgpart.partitioners.refine import mtk_refine
    better = mtk_refine(hg, parts, k=16, epsilon=0.1, seed=1, preset="quality", vcycles=2)

Why: the exact count program may not close its gap at large K, and a
general-purpose partitioner started from scratch misses the layer structure.
Starting Mt-KaHyPar's multilevel refinement *from* the exact (or structured)
solution keeps what the program found and lets the partitioner move single
vertices the count model cannot express. The result is only kept by callers
when our own km1 (:func:`hgpart.metrics.km1_bytes`) improves and the balance
holds. Runs in a child process, like the Mt-KaHyPar backend (its thread pool
is initialised once per process); this module is also that child's entry
point (``python -m hgpart.partitioners.refine``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hgpart.errors import HgpartError
from hgpart.hypergraph import Hypergraph

__all__ = ["mtk_refine"]


def mtk_refine(
    hg: Hypergraph,
    parts: np.ndarray,
    *,
    k: int,
    epsilon: float,
    seed: int = 1,
    preset: str = "quality",
    vcycles: int = 2,
    threads: int = 1,
    time_limit: float | None = None,
) -> np.ndarray:
    """Parts after ``vcycles`` Mt-KaHyPar V-cycles from ``parts`` (on a timeout: ``parts`` unchanged)."""
    from hgpart.formats import write_hmetis
    from hgpart.partitioners.mtkahypar_backend import PRESETS, resolve_preset
    from hgpart.partitioners.scaling import scale_hypergraph

    parts = np.asarray(parts, dtype=np.int64)
    sh = scale_hypergraph(hg, k=k, epsilon=epsilon)
    with tempfile.TemporaryDirectory(prefix="hgpart-refine-") as tmp:
        d = Path(tmp)
        write_hmetis(sh, d / "graph.hgr")
        parts.astype("<i4").tofile(d / "init.bin")
        cmd = [
            sys.executable, "-m", "hgpart.partitioners.refine", "--hgr", str(d / "graph.hgr"),
            "--init", str(d / "init.bin"), "--k", str(k), "--epsilon", repr(float(epsilon)),
            "--seed", str(int(seed)), "--preset", PRESETS[resolve_preset(preset)], "--vcycles", str(int(vcycles)),
            "--threads", str(int(threads)), "--out", str(d / "out.bin"),
        ]
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", str(threads))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=time_limit, env=env)
        except subprocess.TimeoutExpired:
            return parts
        if proc.returncode != 0 or not (d / "out.bin").is_file():
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise HgpartError(f"Mt-KaHyPar refinement failed (exit code {proc.returncode}): {tail[:200]}",
                              where=f"{hg.num_vertices}-vertex hypergraph, K = {k}")
        out = np.fromfile(d / "out.bin", dtype="<i4").astype(np.int64)
    if out.shape != parts.shape or out.min() < 0 or out.max() >= k:
        raise HgpartError("Mt-KaHyPar refinement returned a malformed partition", fix="report this with the model")
    return out


def _child() -> None:
    ap = argparse.ArgumentParser(prog="hgpart.partitioners.refine")
    ap.add_argument("--hgr", required=True)
    ap.add_argument("--init", required=True)
    ap.add_argument("--k", type=int, required=True)
    ap.add_argument("--epsilon", type=float, required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--preset", default="QUALITY")
    ap.add_argument("--vcycles", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import mtkahypar

    t0 = time.perf_counter()
    mtk = mtkahypar.initialize(args.threads, False)
    ctx = mtk.context_from_preset(mtkahypar.PresetType.__members__[args.preset])
    ctx.set_partitioning_parameters(args.k, args.epsilon, mtkahypar.Objective.KM1)
    ctx.logging = False
    mtkahypar.set_seed(args.seed)
    hg = mtk.hypergraph_from_file(args.hgr, ctx, mtkahypar.FileFormat.HMETIS)
    init = np.fromfile(args.init, dtype="<i4").tolist()
    phg = hg.create_partitioned_hypergraph(ctx, args.k, init)
    phg.improve_partition(ctx, args.vcycles)
    np.asarray(phg.get_partition(), dtype="<i4").tofile(args.out)
    print(json.dumps({"km1": int(phg.km1()), "seconds": time.perf_counter() - t0}))


if __name__ == "__main__":
    _child()
