"""How many cores each process of a training run uses, in its steady state: the client and each local worker.

Run (from the repository root)::

    python benchmarks/process_cores.py -- hgpart train -p PLACEMENT.json --devices local ... --steps 1500

Why: a traced worker's op timeline cannot tell a worker that waits from one whose core is taken by other threads
(gRPC copies, the client). This reads every process's CPU time (``/proc/<pid>/stat``, all its threads) every
``--every`` seconds while the command runs, and prints each window's cores per process (the command's process
first, then its children, by process id). The steady state is the median per process over the windows where
every worker used at least ``--busy`` cores (set-up and tracing run on the client alone). It also prints the
machine's busy cores in those windows (``/proc/stat``) and the load average at the start and end. Linux only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The direct children of ``pid``, by process id."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if parent == pid:
                out.append(int(name))
    return sorted(out)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` (every thread), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


def machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of every core, from ``/proc/stat``."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7], sum(v)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=float, default=2.0, help="seconds per window")
    ap.add_argument("--busy", type=float, default=0.2, help="a worker's cores for a window to be steady")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("give the command after --")
    print(f"$ python benchmarks/process_cores.py -- {' '.join(cmd)}")
    print(f"load average at start {os.getloadavg()}", flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, COLUMNS="250"))
    last: tuple[dict[int, float], float, tuple[int, int]] | None = None
    steady: dict[str, list[float]] = {}
    machine: list[float] = []
    while proc.poll() is None:
        pids = [proc.pid, *children(proc.pid)]
        now = {p: c for p in pids if (c := cpu_seconds(p)) is not None}
        t, m = time.perf_counter(), machine_busy()
        if last is not None and len(now) > 1:
            dt = t - last[1]
            cores = {p: (c - last[0].get(p, c)) / dt for p, c in now.items()}
            names = ["client"] + [f"worker {i}" for i in range(len(now) - 1)]
            row = dict(zip(names, [cores[p] for p in sorted(now, key=lambda p: (p != proc.pid, p))], strict=True))
            mb = (m[0] - last[2][0]) / max(1, m[1] - last[2][1]) * (os.cpu_count() or 1)
            print("  " + ", ".join(f"{n} {c:.2f}" for n, c in row.items()) + f"; machine {mb:.2f}", flush=True)
            if len(row) > 1 and all(c >= args.busy for n, c in row.items() if n != "client"):
                for n, c in row.items():
                    steady.setdefault(n, []).append(c)
                machine.append(mb)
        last = (now, t, m)
        time.sleep(args.every)
    out = proc.stdout.read() if proc.stdout is not None else ""
    print("\n".join(ln for ln in out.splitlines() if "img/s" in ln and "steps" in ln))
    if steady:
        print(f"steady state ({len(machine)} windows of {args.every:g} s, median cores): "
              + ", ".join(f"{n} {statistics.median(v):.2f}" for n, v in steady.items())
              + f"; machine {statistics.median(machine):.2f} of {os.cpu_count()}")
    print(f"load average at end {os.getloadavg()}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
