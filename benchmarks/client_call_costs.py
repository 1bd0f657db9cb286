"""What one call from the client costs on 2 local pinned workers: wall time and the client's CPU time per call.

Run (from the repository root)::

    python benchmarks/client_call_costs.py [--calls 300]

Why: in a K = 2 run on this 2-core machine the client (the process that feeds batches and issues every call to
the workers) runs on the same two cores as the workers, while the K = 1 baseline's client has the second core to
itself. Every millisecond of client CPU per batch is therefore taken from the workers' compute. This measures
the client CPU of each kind of call the runtime makes per batch (a compiled function's call, a host feed, a
worker-to-worker copy, a forward under a tape with its ``tape.gradient``, a value fetched back), so that the
client CPU of a whole step can be read against the step's compute.

Each kind is called ``--calls`` times back to back after two warm calls; wall and ``time.process_time`` (every
thread of the client) are divided by the calls. Prints one line per kind and the load average at start and end.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
    import numpy as np
    from hgpart.runtime.cluster import open_local

    l0 = [round(v, 2) for v in os.getloadavg()]
    print(f"$ python benchmarks/client_call_costs.py --calls {args.calls}   # "
          f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load average at start {l0}", flush=True)
    with open_local(2, inter_op=4, start_timeout=180) as ds:
        import tensorflow as tf

        d0, d1 = ds.devices[0], ds.devices[1]
        with tf.device(d0):
            w = tf.Variable(tf.random.normal([3, 3, 32, 32]))
            x0 = tf.random.normal([32, 16, 16, 32])  # 1 MiB, a minivgg-sized feature map at batch 32
            one = tf.constant(1.0)

        @tf.function
        def trivial(a: Any) -> Any:
            return a + 1.0

        @tf.function
        def conv(a: Any) -> Any:
            return tf.nn.relu(tf.nn.conv2d(a, w, 1, "SAME"))

        host = np.random.default_rng(0).random((32, 32, 32, 3), dtype=np.float32)  # a minivgg batch, 393 KB

        def on(dev: str, f: Callable[[], Any]) -> Any:
            with tf.device(dev):
                return f()

        def fwd_bwd_tape() -> Any:
            with tf.GradientTape() as tape:
                y = on(d0, lambda: conv(x0))
            return on(d0, lambda: tape.gradient(y, [w])[0])

        kinds: list[tuple[str, Callable[[], Any]]] = [
            ("trivial compiled function on worker 0", lambda: on(d0, lambda: trivial(one))),
            ("conv compiled function on worker 0", lambda: on(d0, lambda: conv(x0))),
            ("conv forward under a tape + tape.gradient", fwd_bwd_tape),
            ("host batch (393 KB) fed to worker 0", lambda: on(d0, lambda: tf.constant(host))),
            ("1 MiB copied worker 0 -> worker 1", lambda: on(d1, lambda: tf.identity(x0))),
            ("scalar fetched to the client (.numpy())", lambda: on(d0, lambda: trivial(one)).numpy()),
        ]
        print(f"{'call':45s} {'wall ms':>8s} {'client CPU ms':>14s}")
        for name, fn in kinds:
            fn()
            fn()
            c0, t0 = time.process_time(), time.perf_counter()
            r = None
            for _ in range(args.calls):
                r = fn()
            if hasattr(r, "numpy"):
                r.numpy()  # the last call has finished on its worker
            c1, t1 = time.process_time(), time.perf_counter()
            print(f"{name:45s} {1e3 * (t1 - t0) / args.calls:8.3f} {1e3 * (c1 - c0) / args.calls:14.3f}", flush=True)
    print(f"load average at end {[round(v, 2) for v in os.getloadavg()]}")


if __name__ == "__main__":
    main()
