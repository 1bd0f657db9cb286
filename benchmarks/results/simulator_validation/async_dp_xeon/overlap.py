"""How much two devices' ops overlap in a devices_trace.json: ``python overlap.py TRACE...``.

Per trace: its span, each device's busy fraction (union of its ops), the fraction of the span with both busy and
with either busy, and per device the op time of each worker's scope (``worker0``, ``worker1``: an async
data-parallel worker's forward and backward) and of the rest (the parameter reads and updates).
"""
import json
import sys

import numpy as np


def intervals(path: str) -> dict:
    by: dict = {}
    for e in json.load(open(path))["traceEvents"]:
        if e.get("ph") == "X":
            by.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    return by


for p in sys.argv[1:]:
    by = intervals(p)
    t0 = min(s for v in by.values() for s, _, _ in v)
    t1 = max(e for v in by.values() for _, e, _ in v)
    grid = np.zeros((len(by), int(t1 - t0) + 1), bool)
    for i, (_, v) in enumerate(sorted(by.items())):
        for s, e, _ in v:
            grid[i, int(s - t0):int(e - t0)] = True
    busy = [round(float(g.mean()), 3) for g in grid]
    both, either = grid.all(0).mean(), grid.any(0).mean()
    print(p, f"span {(t1 - t0) / 1e3:.1f} ms, busy {busy}, both {both:.3f}, either {either:.3f}")
    for pid, v in sorted(by.items()):
        w = [sum(e - s for s, e, n in v if f"worker{i}" in n) / 1e3 for i in (0, 1)]
        rest = sum(e - s for s, e, n in v if "worker" not in n) / 1e3
        print(f"  device {pid}: worker0 ops {w[0]:.1f} ms, worker1 {w[1]:.1f} ms, other {rest:.1f} ms")
