"""Each device's idle gaps in a devices_trace.json: ``python gaps.py TRACE MIN_MS``.

Prints per device (trace pid) its span, the total of its gaps of at least MIN_MS, and each such gap: when it began
(ms from the trace's first op), how long it was and the op that ended it.
"""
import json
import sys

ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
by: dict = {}
for e in ev:
    by.setdefault(e["pid"], []).append(e)
t0 = min(e["ts"] for e in ev)
for pid, ops in sorted(by.items()):
    ops.sort(key=lambda e: e["ts"])
    end, gaps = ops[0]["ts"], []
    for e in ops:
        if e["ts"] > end + float(sys.argv[2]) * 1000:
            gaps.append(((end - t0) / 1e3, (e["ts"] - end) / 1e3, e["name"][:60]))
        end = max(end, e["ts"] + e["dur"])
    print("pid", pid, f"span {(end - ops[0]['ts']) / 1e3:.0f} ms", f"gaps total {sum(g[1] for g in gaps):.1f}")
    for at, gap, name in gaps:
        print(f"   at {at:7.1f} gap {gap:5.1f} before {name}")
