"""One local TensorFlow worker process, started and owned by :func:`hgpart.runtime.cluster.open_local`.

Usage (the client runs this; a user never needs to)::

    python runtime/worker.py --cluster '{"worker": ["127.0.0.1:5001", ...]}' --task 0 \\
        --cores 0 --intra 1 --inter 4 --parent 1234

Why a separate script run by path (not ``python -m hgpart.runtime.worker``): the worker must start even when the
rest of the runtime package fails to import, and it must import nothing but the standard library and TensorFlow
so that start-up is as fast as TensorFlow allows.

Life cycle, designed so a worker is never left behind:

1. ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills this process when its parent (the client) dies, even
   by SIGKILL. Then the parent PID is compared with ``--parent`` to close the race where the client died first.
2. Pin to ``--cores`` with ``os.sched_setaffinity`` and size TensorFlow's pools (``intra_op`` = cores,
   ``inter_op`` >= batches in flight) before TensorFlow is imported, so no pool is created larger.
3. Start ``tf.distribute.Server(job "worker", task --task)`` and print one line
   ``HGPART_WORKER_READY <task> <pid>`` on stdout; the client waits for that line with a deadline.
4. Block reading stdin. The client holds the write end of that pipe; when the client exits for any reason the
   pipe reaches EOF and this process exits at once. A watchdog thread also polls the parent PID every 0.5 s
   (belt and braces for platforms without ``prctl``).

Exit codes: 0 normal (pipe closed / parent gone), 3 bad arguments or pinning failed, 4 server failed to start
(e.g. port already in use, the message is on stderr).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import threading
import time

__all__ = ["main", "READY_TAG"]

READY_TAG = "HGPART_WORKER_READY"
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """Ask the kernel to SIGKILL us when the parent dies; exit now if it already has."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except OSError:
        pass  # not Linux/glibc: the stdin pipe and the watchdog thread still cover us
    if os.getppid() != parent:
        os._exit(0)


def _watchdog(parent: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(0)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="hgpart local TensorFlow worker (started by the client)")
    ap.add_argument("--cluster", required=True, help="JSON cluster spec, e.g. {\"worker\": [\"127.0.0.1:5001\"]}")
    ap.add_argument("--task", type=int, required=True)
    ap.add_argument("--cores", default="", help="comma-separated CPU ids to pin to (empty: no pinning)")
    ap.add_argument("--intra", type=int, default=1)
    ap.add_argument("--inter", type=int, default=4)
    ap.add_argument("--parent", type=int, required=True)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    _die_with_parent(args.parent)
    threading.Thread(target=_watchdog, args=(args.parent,), daemon=True, name="hgpart-parent-watchdog").start()
    # SIGINT belongs to the client (which stops us by PID); a terminal Ctrl-C must not kill us half-way.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if args.cores:
        try:
            os.sched_setaffinity(0, {int(c) for c in args.cores.split(",")})
        except (OSError, ValueError) as exc:
            print(f"cannot pin worker {args.task} to cores {args.cores}: {exc}", file=sys.stderr, flush=True)
            return 3
    for var, val in (("TF_NUM_INTRAOP_THREADS", args.intra), ("TF_NUM_INTEROP_THREADS", args.inter),
                     ("OMP_NUM_THREADS", args.intra)):
        os.environ[var] = str(val)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    cluster = json.loads(args.cluster)

    import tensorflow as tf  # noqa: PLC0415 - after pinning, so TF sizes nothing beyond our cores

    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=args.intra,
        inter_op_parallelism_threads=args.inter,
        allow_soft_placement=False,
    )
    try:
        server = tf.distribute.Server(
            tf.train.ClusterSpec(cluster), job_name="worker", task_index=args.task, protocol="grpc",
            config=config, start=True,
        )
    except Exception as exc:  # noqa: BLE001 - any start failure is reported to the client via stderr + exit 4
        print(f"worker {args.task} failed to start: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 4
    print(f"{READY_TAG} {args.task} {os.getpid()} {server.target}", flush=True)
    # Block until the client closes our stdin (normal stop, or the client died).
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except OSError:
        pass
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
