"""A portfolio worker (child process): Mt-KaHyPar on one thread, jobs over stdin, answers over stdout.

Usage (what :mod:`hgpart.partitioners.portfolio` runs)::

    python -m hgpart.partitioners._portfolio_worker    # then one JSON job per line on stdin

Why a module of its own: every worker imports it at start-up, so it imports
only what a job needs (numpy, Mt-KaHyPar), not the compiler.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np


def main() -> None:
    """Serve jobs from stdin, one JSON object per line; answer one line each (km1, imbalance, seconds)."""
    import mtkahypar

    mtk = mtkahypar.initialize(1, False)
    graphs: dict[tuple[str, str], Any] = {}
    for line in sys.stdin:
        job = json.loads(line)
        t0 = time.perf_counter()
        ctx = mtk.context_from_preset(mtkahypar.PresetType.__members__[job["preset"]])
        ctx.set_partitioning_parameters(job["k"], job["epsilon"], mtkahypar.Objective.KM1)
        ctx.logging = False
        key = (job["hgr"], job["preset"])
        if key not in graphs:
            graphs[key] = mtk.hypergraph_from_file(job["hgr"], ctx, mtkahypar.FileFormat.HMETIS)
        hg = graphs[key]
        mtkahypar.set_seed(int(job["seed"]))
        if job["op"] == "refine":
            init = np.fromfile(job["init"], dtype="<i4").tolist()
            phg = hg.create_partitioned_hypergraph(ctx, job["k"], init)
            phg.improve_partition(ctx, int(job["vcycles"]))
        else:
            phg = hg.partition(ctx)
        np.asarray(phg.get_partition(), dtype="<i4").tofile(job["out"])
        print(json.dumps({"id": job["id"], "km1": int(phg.km1()), "imbalance": float(phg.imbalance(ctx)),
                          "seconds": time.perf_counter() - t0}), flush=True)


if __name__ == "__main__":
    main()
