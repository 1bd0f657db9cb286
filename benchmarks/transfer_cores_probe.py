"""Do transfers between two local workers take their cores? Compute on worker 0, alone and beside a stream of hops.

Run::

    python benchmarks/transfer_cores_probe.py [OUT]   # default: benchmarks/results/step_breakdown/

Why: the simulator has to know whether a transfer between local CPU workers is free for the workers (a network
card's DMA would be) or is the workers' own CPU work, which TensorFlow's gRPC does on the pinned cores. On 2 local
pinned workers, in one process:

* ``compute``: one client thread calls a function of 16 chained 512x512 matmuls on worker 0;
* ``hops``: another thread calls a function that passes a tensor of S bytes between worker 0 and worker 1, 8 hops
  a call, with no other work;
* each alone, then both at once. If a transfer holds both workers' cores, worker 0's compute slows by about the
  share of the time the hops spend, and the hops slow too; if it does not, both keep their speed.

Printed: ms per call of each, alone and together, the hops' share of the wall time when together, and the
compute's slowdown, for S = 4 KiB (latency) and 4 MiB (bytes).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

SECONDS = 4.0  # wall seconds per measurement
HOPS = 8


def timed(fns: list[Callable[[], None]], seconds: float = SECONDS) -> list[float]:
    """ms per call of each of ``fns``, each called from its own thread for ``seconds``."""
    counts = [0] * len(fns)
    stop = time.perf_counter() + seconds

    def loop(i: int) -> None:
        while time.perf_counter() < stop:
            fns[i]()
            counts[i] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(len(fns))]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t
    return [1000 * wall / max(c, 1) for c in counts]


def main() -> None:
    import tensorflow as tf
    from probe_calls import two_workers

    out = "benchmarks/results/step_breakdown/transfer_cores_probe.txt"
    with two_workers("transfer_cores_probe", out) as (ds, lines):
        d0, d1 = ds.devices[0], ds.devices[1]

        @tf.function
        def compute(x: tf.Tensor) -> tf.Tensor:
            with tf.device(d0):
                for _ in range(16):
                    x = tf.tanh(tf.matmul(x, x) * 1e-3)
                return tf.reduce_sum(x)

        @tf.function
        def hops(t: tf.Tensor) -> tf.Tensor:  # traced once per size
            for h in range(HOPS):
                with tf.device(d1 if h % 2 == 0 else d0):
                    t = t + 1.0
            with tf.device(d0):
                return tf.reduce_sum(t[:1])

        with tf.device(d0):
            x = tf.random.normal((512, 512))
        compute(x).numpy()
        for label, nbytes in (("4 KiB", 4096), ("4 MiB", 4 * 2**20)):
            with tf.device(d0):
                t = tf.zeros((nbytes // 4,))
            hops(t).numpy()

            def hop(t: tf.Tensor = t) -> None:
                hops(t).numpy()

            c_alone = timed([lambda: compute(x).numpy()])[0]
            h_alone = timed([hop])[0]
            c_both, h_both = timed([lambda: compute(x).numpy(), hop])
            share = min(1.0, h_alone / h_both)  # the hops' share of the wall time when together (at their own pace)
            lines.append(f"S = {label}: compute {c_alone:.2f} ms alone, {c_both:.2f} together "
                         f"(x{c_both / c_alone:.2f}, {c_alone / c_both:.0%} of its speed); {HOPS} hops "
                         f"{h_alone:.2f} ms alone, {h_both:.2f} together (x{h_both / h_alone:.2f}); the hops ran "
                         f"{share:.0%} of the time, so compute would keep {1 - share:.0%} of its speed if they "
                         "held its core whenever they ran")
        lines.append("a transfer that leaves the cores free keeps compute at 100 % of its speed")
        print("\n".join(lines))


if __name__ == "__main__":
    main()
