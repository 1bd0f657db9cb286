"""TensorFlow's CPU allocators side by side: malloc (TensorFlow's default) vs BFC (hgpart's, :mod:`hgpart.allocator`).

Run::

    python benchmarks/cpu_allocator.py                      # vgg16 at 64x64, B=8, and minires at 32x32, B=32
    python benchmarks/cpu_allocator.py --runs vgg16:64:8:8:single,sync-dp --repeats 5

For each run spec ``model:input:batch:steps:method,method,...`` and each repeat, ``hgpart compare-run --devices
local --k 2`` trains those strategies twice, once with ``TF_CPU_ALLOCATOR_USE_BFC=false`` and once with ``=true``
(in alternating order from repeat to repeat, so drift of the shared machine's speed does not favour one), each in
its own process. Printed: images/s per strategy and allocator (the median over repeats), each repeat's ratio BFC /
malloc (the two runs of one repeat are back to back) and their median. A second part times the runtime's ring
all-reduce on two local workers (``runtime.linkbench``, as ``hgpart calibrate`` does) at VGG16's gradient size, in
one process per allocator, because that is where the allocator's page faults were found: the flattened copies of
every gradient, made fresh in each step.
Everything is measured in this run; the load average is printed at start and end.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ALLOCATORS = ("malloc", "bfc")
DEFAULT_RUNS = ("vgg16:64:8:8:single,sync-dp,async-dp-dps",
                "minires:32:32:48:single,sync-dp,async-dp-dps,coarse-async,layerwise-sync")
#: the ring all-reduce points: (parameters per replica, tensors): 64 MiB in 16, and VGG16 at 64x64 (32 tensors)
RING_POINTS = ((2**24, 16), (44_000_000, 32))


def loadavg() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def env_for(alloc: str) -> dict[str, str]:
    return dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC="true" if alloc == "bfc" else "false")


def compare_run(spec: str, alloc: str) -> dict[str, float]:
    """Images/s per strategy of one ``hgpart compare-run`` child under ``alloc``."""
    model, size, batch, steps, methods = spec.split(":")
    with tempfile.TemporaryDirectory(prefix="hgpart-alloc-") as out:
        cmd = ["hgpart", "compare-run", "-m", model, "-i", size, "--classes", "1000" if model.startswith("vgg")
               else "10", "-d", "local", "--k", "2", "--batch-sizes", batch, "--steps", steps, "--methods", methods,
               "--out", out, "--no-plots", "--no-trace"]
        subprocess.run(cmd, check=True, env=env_for(alloc), stdout=subprocess.DEVNULL)
        with open(Path(out) / "runs.csv", newline="") as f:
            return {row["method"]: float(row["images_per_s"]) for row in csv.DictReader(f) if row["status"] == "ok"}


def ring_child(alloc: str) -> dict[str, list[float]]:
    """Seconds of the ring all-reduce at each of ``RING_POINTS`` (5 repeats each) in a child under ``alloc``."""
    code = ("import json\n"
            "from hgpart.runtime.linkbench import measure_local_link\n"
            f"got = measure_local_link([4096], repeats=5, cores=[0, 1], ring_points={list(RING_POINTS)!r})\n"
            "print(json.dumps({f'{p}:{t}': s for (p, t), s in (got.ring or {}).items()}))\n")
    res = subprocess.run([sys.executable, "-c", code], check=True, env=env_for(alloc), capture_output=True,
                         text=True)
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--runs", default=";".join(DEFAULT_RUNS), help="run specs model:input:batch:steps:methods, "
                    "separated by ';'")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/results/cpu_allocator")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = loadavg()
    print(f"load average at start: {start}", flush=True)
    rows: list[dict[str, Any]] = []
    for spec in args.runs.split(";"):
        for rep in range(args.repeats):
            order = ALLOCATORS if rep % 2 == 0 else ALLOCATORS[::-1]
            got = {}
            for alloc in order:
                got[alloc] = compare_run(spec, alloc)
                print(f"{spec.split(':')[0]} repeat {rep} {alloc}: "
                      + ", ".join(f"{m} {v:.2f}" for m, v in got[alloc].items()) + f"  (load {loadavg()})",
                      flush=True)
            for method in got["malloc"]:
                if method in got["bfc"]:
                    rows.append({"run": spec.rsplit(":", 1)[0], "method": method, "repeat": rep,
                                 "malloc_ips": got["malloc"][method], "bfc_ips": got["bfc"][method],
                                 "ratio": got["bfc"][method] / got["malloc"][method]})
    ring: dict[str, dict[str, list[float]]] = {}
    for alloc in ALLOCATORS:
        ring[alloc] = ring_child(alloc)
    end = loadavg()
    lines = ["| run | strategy | malloc img/s | BFC img/s | BFC / malloc per repeat | median ratio |",
             "|---|---|---:|---:|---|---:|"]
    for key in dict.fromkeys((r["run"], r["method"]) for r in rows):
        rs = [r for r in rows if (r["run"], r["method"]) == key]
        lines.append(f"| {key[0]} | {key[1]} | {statistics.median(r['malloc_ips'] for r in rs):.2f} | "
                     f"{statistics.median(r['bfc_ips'] for r in rs):.2f} | "
                     + " ".join(f"{r['ratio']:.2f}" for r in rs)
                     + f" | {statistics.median(r['ratio'] for r in rs):.2f} |")
    lines += ["", "| ring all-reduce (params:tensors per replica) | MiB | malloc s (median) | BFC s (median) | ratio |",
              "|---|---:|---:|---:|---:|"]
    for point in ring["malloc"]:
        m, b = statistics.median(ring["malloc"][point]), statistics.median(ring["bfc"][point])
        mib = int(point.split(":")[0]) * 4 / 2**20
        lines.append(f"| {point} | {mib:.0f} | {m:.3f} | {b:.3f} | {b / m:.2f} |")
    report = "\n".join(lines)
    print(report)
    print(f"load average at end: {end}")
    cmd = "python benchmarks/cpu_allocator.py " + " ".join(f"'{a}'" if ";" in a else a for a in sys.argv[1:])
    (out / "results.json").write_text(json.dumps({"command": cmd.strip(), "load_start": start, "load_end": end,
                                                  "rows": rows, "ring_seconds": ring}, indent=1) + "\n")
    (out / "report.md").write_text(f"# CPU allocators: malloc vs BFC\n\n`{cmd.strip()}`, load average {start} at "
                                   f"start, {end} at end.\n\n{report}\n")


if __name__ == "__main__":
    main()
