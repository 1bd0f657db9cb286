"""Child process that runs KaHyPar or Mt-KaHyPar on an hMetis file (never imported by the parent).

Usage (what :mod:`hgpart.partitioners._subprocess` runs)::

    python -m hgpart.partitioners._kahypar_child --tool kahypar --hgr g.hgr --k 4 --epsilon 0.1 \
        --seed 1 --config hgpart/data/kahypar_km1.ini --parts parts.bin --result result.json

Why a child: the ``kahypar`` wheel calls ``exit()`` on bad input and is not
thread-safe, and Mt-KaHyPar's thread pool is initialised once per process;
a separate process isolates both from the caller and lets the parent enforce
a time limit by killing it. The child writes the block of every vertex as
little-endian int32 to ``--parts`` and a small JSON (backend km1, partition
seconds without reading the file, read seconds, version) to ``--result``.
"""

from __future__ import annotations

import argparse
import json
import time
from importlib import metadata

import numpy as np


def _kahypar(args: argparse.Namespace) -> tuple[np.ndarray, int, float]:
    import kahypar

    t0 = time.perf_counter()
    hg = kahypar.createHypergraphFromFile(args.hgr, args.k)
    read = time.perf_counter() - t0
    ctx = kahypar.Context()
    ctx.loadINIconfiguration(args.config)
    ctx.setK(args.k)
    ctx.setEpsilon(args.epsilon)
    ctx.setSeed(args.seed)
    ctx.suppressOutput(True)
    kahypar.partition(hg, ctx)
    parts = np.fromiter((hg.blockID(v) for v in hg.nodes()), dtype=np.int32, count=hg.numNodes())
    return parts, int(kahypar.connectivityMinusOne(hg)), read


def _mtkahypar(args: argparse.Namespace) -> tuple[np.ndarray, int, float]:
    import mtkahypar

    mtk = mtkahypar.initialize(args.threads, False)
    ctx = mtk.context_from_preset(mtkahypar.PresetType.__members__[args.config])
    ctx.set_partitioning_parameters(args.k, args.epsilon, mtkahypar.Objective.KM1)
    ctx.logging = False
    mtkahypar.set_seed(args.seed)
    t0 = time.perf_counter()
    hg = mtk.hypergraph_from_file(args.hgr, ctx, mtkahypar.FileFormat.HMETIS)
    read = time.perf_counter() - t0
    phg = hg.partition(ctx)
    parts = np.asarray(phg.get_partition(), dtype=np.int32)
    return parts, int(phg.km1()), read


def main() -> None:
    ap = argparse.ArgumentParser(prog="hgpart.partitioners._kahypar_child")
    ap.add_argument("--tool", choices=["kahypar", "mtkahypar"], required=True)
    ap.add_argument("--hgr", required=True)
    ap.add_argument("--k", type=int, required=True)
    ap.add_argument("--epsilon", type=float, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--config", required=True, help="KaHyPar .ini path or Mt-KaHyPar preset name")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--parts", required=True)
    ap.add_argument("--result", required=True)
    args = ap.parse_args()
    t0 = time.perf_counter()
    parts, km1, read = (_kahypar if args.tool == "kahypar" else _mtkahypar)(args)
    seconds = time.perf_counter() - t0 - read
    parts.astype("<i4").tofile(args.parts)
    with open(args.result, "w", encoding="utf-8") as fh:
        json.dump({"km1": km1, "seconds": seconds, "read_seconds": read, "version": metadata.version(args.tool)}, fh)


if __name__ == "__main__":
    main()
