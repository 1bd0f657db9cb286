"""How long one hop of 1 MiB between two pinned local workers takes inside a compiled function, idle and under load.

Run (from the repository root)::

    python benchmarks/hop_under_load_probe.py [--reps 15]

Why: in minivgg's compiled two-stage pipeline (``benchmarks/steps_per_call_probe.py --mode pipe``) each worker idles
3.8-5.4 ms on average before the first op that needs the other worker's tensor, on a 10.6 ms batch. This times the
exchange itself: a function that makes 1 MiB on worker 0 and passes it 20 times between the workers (each hop adds
1 on the receiving worker), against the same function with no hop (:mod:`hgpart.runtime.linkbench`'s method),
with both workers idle, with worker 1 busy and with both busy running a convolution loop called from other client
threads, as during training. Prints the per-hop milliseconds of each (median of ``--reps`` calls) and the load
average at start and end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

HOPS = 20
MIB = 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    from hgpart.runtime.cluster import open_local
    from hgpart.runtime.linkbench import hop_chain

    print(f"$ python benchmarks/hop_under_load_probe.py --reps {args.reps}   # "
          f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load average at start "
          f"{[round(v, 2) for v in os.getloadavg()]}", flush=True)
    with open_local(2, inter_op=4, start_timeout=180) as ds:
        import tensorflow as tf

        d0, d1 = ds.devices[0], ds.devices[1]

        def conv_loop(dev: str) -> Any:
            with tf.device(dev):
                w = tf.Variable(tf.random.normal([3, 3, 64, 64]))
                x = tf.random.normal([32, 32, 32, 64])

            @tf.function
            def g() -> Any:
                with tf.device(dev):
                    y = x
                    for _ in range(4):
                        y = tf.nn.relu(tf.nn.conv2d(y, w, 1, "SAME"))
                    return tf.reduce_sum(y)
            return g

        none, some = hop_chain(d0, d1, MIB // 4, 0), hop_chain(d0, d1, MIB // 4, HOPS)
        seed = tf.constant(1.0)
        loads = [conv_loop(d0), conv_loop(d1)]
        for f in (none, some, *loads):
            for _ in range(2):  # trace, place and warm
                (f(seed) if f in (none, some) else f()).numpy()

        def per_hop_ms() -> tuple[float, float]:
            def timed(f: Any) -> float:
                t0 = time.perf_counter()
                f(seed).numpy()
                return time.perf_counter() - t0
            base = statistics.median(timed(none) for _ in range(args.reps))
            hops = statistics.median(timed(some) for _ in range(args.reps))
            return base * 1e3, (hops - base) / HOPS * 1e3

        for label, busy in (("both idle", []), ("worker 1 busy", [loads[1]]), ("both busy", loads)):
            stop = threading.Event()

            def spin(g: Any, stop: threading.Event = stop) -> None:
                while not stop.is_set():
                    g().numpy()

            threads = [threading.Thread(target=spin, args=(g,), daemon=True) for g in busy]
            for th in threads:
                th.start()
            time.sleep(1.0 if busy else 0.0)
            base, hop = per_hop_ms()
            stop.set()
            for th in threads:
                th.join()
            print(f"{label:>14}: one hop of 1 MiB {hop:.3f} ms (the call without hops {base:.2f} ms)", flush=True)
    print(f"load average at end {[round(v, 2) for v in os.getloadavg()]}")


if __name__ == "__main__":
    main()
