"""When each micro-batch's ops run on each device, from a `hgpart train --trace DIR` device trace.

Prints, per device, the runs of consecutive ops of one micro-batch (`f0`: forward of micro-batch 0, `b1`: its
backward of micro-batch 1; other ops by their name's first scope) as `tag[start-end:busy]` in ms from the first
op, for the first LIMIT ms. It shows whether a sync call's micro-batches advance together or one after another.

    python benchmarks/micro_batch_order.py DIR/devices_trace.json [LIMIT_MS]
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any


def tag(name: str) -> str:
    m = re.search(r"fwd(\d+)/", name)
    if not m:
        return name.split("/")[0][:12]
    return ("b" if "gradients" in name else "f") + m.group(1)


def runs(events: list[dict[str, Any]], pid: int, limit_us: float) -> list[list[Any]]:
    t0 = events[0]["ts"]
    out: list[list[Any]] = []
    for e in events:
        if e["pid"] != pid or e["ts"] - t0 > limit_us:
            continue
        t, end = tag(e["name"]), e["ts"] + e["dur"] - t0
        if out and out[-1][0] == t:
            out[-1][2], out[-1][3] = end, out[-1][3] + e["dur"]
        else:
            out.append([t, e["ts"] - t0, end, e["dur"]])
    return out


def main() -> None:
    doc = json.load(open(sys.argv[1]))
    limit_ms = float(sys.argv[2]) if len(sys.argv) > 2 else 12.0
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    names = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"}
    xs = sorted((e for e in ev if e.get("ph") == "X"), key=lambda e: e["ts"])
    for pid in sorted({e["pid"] for e in xs}):
        print(names.get(pid, pid))
        print("  " + " ".join(f"{t}[{a / 1e3:.1f}-{b / 1e3:.1f}:{c / 1e3:.1f}]"
                              for t, a, b, c in runs(xs, pid, limit_ms * 1e3) if c > 50))


if __name__ == "__main__":
    main()
