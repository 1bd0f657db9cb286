"""When are both devices idle? A measured device trace beside a simulated one, and the measured trace's longest gaps.

Run (from the repository root)::

    python benchmarks/idle_gaps.py MEASURED/devices_trace.json[.gz] [SIMULATED/devices_trace.simulated.json] \\
        [--gap-us 1000] [--show 12]

Why: on minires's split placements the validation's runs are slower than simulated (issue 16), and an earlier
trace (``results/trace_vs_simulated/``) found each device's work per step about right and its waiting too long.
This says how much of a run neither device computes anything, measured and simulated, and shows the measured
trace's longest such gaps with the last ops before and the first after them, to read what each gap waited for.
It reads the traces ``hgpart train --trace`` and ``hgpart simulate --trace`` write (Chrome format, one process
per device); it runs nothing. A ``_Send`` op's span (measured) and a transfer or a call (simulated) do not count
as computing: a send op waits on the transfer, and the simulator holds the devices for a transfer.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np

#: event categories that are not computing (measured: the send op's span; simulated: transfers and client calls)
NOT_COMPUTE = {"_Send", "send", "call"}


def events(path: Path) -> list[dict[str, Any]]:
    """The complete ("X") events of a Chrome trace, in start order."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        d = json.load(f)
    return sorted((e for e in d["traceEvents"] if e.get("ph") == "X"), key=lambda e: e["ts"])


def busy_mask(ev: list[dict[str, Any]]) -> tuple[np.ndarray, float]:
    """Per device (process id) and microsecond of the trace, whether it computes; and the trace's start (us)."""
    lo = min(e["ts"] for e in ev)
    hi = max(e["ts"] + e["dur"] for e in ev)
    pids = sorted({int(e["pid"]) for e in ev})
    mask = np.zeros((len(pids), int(hi - lo) + 2), dtype=bool)
    row = {p: i for i, p in enumerate(pids)}
    for e in ev:
        if e.get("cat") in NOT_COMPUTE:
            continue
        a = int(e["ts"] - lo)
        mask[row[int(e["pid"])], a : a + int(e["dur"]) + 1] = True
    return mask, lo


def summary(label: str, path: Path) -> tuple[np.ndarray, float, list[dict[str, Any]]]:
    ev = events(path)
    mask, lo = busy_mask(ev)
    idle: np.ndarray = np.logical_not(mask.any(axis=0))
    busy = ", ".join(f"device {i} {100 * m.mean():.1f} %" for i, m in enumerate(mask))
    print(f"{label}: {mask.shape[1] / 1000:.1f} ms traced; computing: {busy}; no device computing "
          f"{100 * idle.mean():.1f} %")
    return idle, lo, ev


def by_length(idle: np.ndarray, ev: list[dict[str, Any]], steps: int) -> None:
    """The measured gaps of no computing by length: per step, and per ``_Send`` op (a message between the
    devices), to tell the executor's gaps between ops (under 100 us) from waits for a message and from the calls'
    boundaries (over 2 ms)."""
    edges = np.flatnonzero(np.diff(np.r_[0, idle.astype(np.int8), 0]))
    lengths = edges[1::2] - edges[::2]
    sends = sum(1 for e in ev if e.get("cat") == "_Send") / steps
    print(f"measured gaps of no computing by length, per step of {steps} ({sends:.1f} sends a step):")
    for lo, hi in ((0, 100), (100, 500), (500, 2000), (2000, None)):
        sel = lengths[(lengths >= lo) & (lengths < hi if hi is not None else True)]
        label = f"{lo}-{hi} us" if hi is not None else f">= {lo} us"
        print(f"  {label:>13}: {sel.size / steps:6.1f} a step, {sel.sum() / 1000 / steps:5.2f} ms a step, "
              f"{sel.sum() / 1000 / steps / sends:5.3f} ms a send")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("measured", type=Path)
    ap.add_argument("simulated", type=Path, nargs="?")
    ap.add_argument("--gap-us", type=int, default=1000)
    ap.add_argument("--show", type=int, default=12)
    ap.add_argument("--steps", type=int, default=0, help="steps in the measured trace: also print its gaps of no "
                    "computing by length, per step and per send")
    args = ap.parse_args()
    print(f"$ python benchmarks/idle_gaps.py {args.measured} {args.simulated or ''} --gap-us {args.gap_us} "
          f"--show {args.show}" + (f" --steps {args.steps}" if args.steps else ""))
    idle, lo, ev = summary("measured", args.measured)
    if args.simulated is not None:
        summary("simulated", args.simulated)
    edges = np.flatnonzero(np.diff(np.r_[0, idle.astype(np.int8), 0]))
    gaps = [(int(s), int(e)) for s, e in zip(edges[::2], edges[1::2], strict=True) if e - s > args.gap_us]
    total = sum(e - s for s, e in gaps)
    print(f"measured gaps of no computing longer than {args.gap_us} us: {len(gaps)}, {total / 1000:.1f} ms "
          f"({100 * total / idle.size:.1f} % of the trace); the {min(args.show, len(gaps))} longest:")
    if args.steps:
        by_length(idle, ev, args.steps)
    compute = [e for e in ev if e.get("cat") not in NOT_COMPUTE]
    for s, e in sorted(gaps, key=lambda g: g[0] - g[1])[: args.show]:
        before = [x for x in compute if x["ts"] - lo + x["dur"] <= s + 1][-1:]
        after = [x for x in compute if x["ts"] - lo >= e - 1][:1]
        sends = [x for x in ev if x.get("cat") == "_Send" and s - 20_000 <= x["ts"] - lo <= e]
        print(f"  {s / 1000:8.2f}-{e / 1000:8.2f} ms ({(e - s) / 1000:5.2f} ms): after "
              + ", ".join(f"device {x['pid']} {x['name']}" for x in before) + " -> "
              + ", ".join(f"device {x['pid']} {x['name']}" for x in after))
        for x in sends[-3:]:
            print(f"      send started {(x['ts'] - lo) / 1000:8.2f} ms on device {x['pid']}: {x['name']}")


if __name__ == "__main__":
    main()
