"""How much two devices' ops overlap in a devices_trace.json: ``python overlap.py TRACE...``.

Per trace: its span, each device's busy fraction (union of its ops, :func:`hgpart.runtime.devtrace.union_ns`), the
fraction of the span with both busy (the two unions less the union of all) and with either busy, and per device
the op time of each worker's scope (``worker0``, ``worker1``: an async data-parallel worker's forward and backward)
and of the rest (the parameter reads and updates).
"""
import json
import sys

import numpy as np
from hgpart.runtime.devtrace import union_ns

for p in sys.argv[1:]:
    ops = [e for e in json.load(open(p))["traceEvents"] if e.get("ph") == "X"]
    pid = np.array([e["pid"] for e in ops])
    start = np.array([e["ts"] for e in ops], np.float64)
    end = start + np.array([e["dur"] for e in ops], np.float64)
    span = float(end.max() - start.min())
    pids = sorted(set(pid.tolist()))
    busy = [union_ns(start[pid == d], end[pid == d]) / span for d in pids]
    either = union_ns(start, end) / span
    print(p, f"span {span / 1e3:.1f} ms, busy {[round(b, 3) for b in busy]}, both {sum(busy) - either:.3f}, "
          f"either {either:.3f}")
    for d in pids:
        mine = [e for e in ops if e["pid"] == d]
        w = [sum(e["dur"] for e in mine if f"worker{i}" in e["name"]) / 1e3 for i in (0, 1)]
        rest = sum(e["dur"] for e in mine if "worker" not in e["name"]) / 1e3
        print(f"  device {d}: worker0 ops {w[0]:.1f} ms, worker1 {w[1]:.1f} ms, other {rest:.1f} ms")
