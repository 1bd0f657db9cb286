"""Each device's idle gaps in a devices_trace.json: ``python gaps.py TRACE MIN_MS``.

Prints per device (trace pid) its span, the total of its gaps of at least MIN_MS, and each such gap: when it began
(ms from the trace's first op), how long it was and the op that ended it. The gaps are found by
``benchmarks/steps_per_call_probe.py``'s :func:`idle_gaps`.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # benchmarks/
from steps_per_call_probe import device_ops, idle_gaps  # noqa: E402

by = device_ops(Path(sys.argv[1]))
t0 = min(ops[0]["ts"] for ops in by.values())
for pid, ops in by.items():
    gaps, end = idle_gaps(ops, float(sys.argv[2]) * 1000)
    print("pid", pid, f"span {(end - ops[0]['ts']) / 1e3:.0f} ms", f"gaps total {sum(g for _, g, _ in gaps) / 1e3:.1f}")
    for at, gap, e in gaps:
        print(f"   at {(at - t0) / 1e3:7.1f} gap {gap / 1e3:5.1f} before {e['name'][:60]}")
