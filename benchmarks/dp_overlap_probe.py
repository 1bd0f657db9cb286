"""Do transfers between two local workers take their cores? Compute on worker 0, alone and beside a stream of hops.

Run::

    python benchmarks/dp_overlap_probe.py     # writes benchmarks/results/step_breakdown/dp_overlap_probe.txt

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

import json
import os
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

SECONDS = 4.0  # wall seconds per measurement
HOPS = 8


def main() -> None:
    import tensorflow as tf
    from hgpart.runtime.cluster import open_local

    def timed(fns: list, seconds: float = SECONDS) -> list[float]:
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

    load0 = os.getloadavg()
    lines = [f"$ python {' '.join(sys.argv)}"]
    rows: dict[str, dict[str, float]] = {}
    with open_local(2, inter_op=4, start_timeout=120) as ds:
        d0, d1 = ds.devices[0], ds.devices[1]

        @tf.function
        def compute(x: tf.Tensor) -> tf.Tensor:
            with tf.device(d0):
                for _ in range(16):
                    x = tf.tanh(tf.matmul(x, x) * 1e-3)
                return tf.reduce_sum(x)

        def hopper() -> tf.types.experimental.PolymorphicFunction:
            @tf.function
            def hops(t: tf.Tensor) -> tf.Tensor:
                for h in range(HOPS):
                    with tf.device(d1 if h % 2 == 0 else d0):
                        t = t + 1.0
                with tf.device(d0):
                    return tf.reduce_sum(t[:1])
            return hops

        with tf.device(d0):
            x = tf.random.normal((512, 512))
        compute(x).numpy()
        for label, nbytes in (("4 KiB", 4096), ("4 MiB", 4 * 2**20)):
            with tf.device(d0):
                t = tf.zeros((nbytes // 4,))
            hops = hopper()
            hops(t).numpy()
            c_alone = timed([lambda: compute(x).numpy()])[0]
            def hop(hops: tf.types.experimental.PolymorphicFunction = hops, t: tf.Tensor = t) -> None:
                hops(t).numpy()

            h_alone = timed([hop])[0]
            c_both, h_both = timed([lambda: compute(x).numpy(), hop])
            share = min(1.0, h_alone / h_both)  # the hops' share of the wall time when together (at their own pace)
            rows[label] = {"compute_alone_ms": c_alone, "hops_alone_ms": h_alone, "compute_together_ms": c_both,
                           "hops_together_ms": h_both}
            lines.append(f"S = {label}: compute {c_alone:.2f} ms alone, {c_both:.2f} together "
                         f"(x{c_both / c_alone:.2f}); {HOPS} hops {h_alone:.2f} ms alone, {h_both:.2f} together "
                         f"(x{h_both / h_alone:.2f}); the hops' share of the time together {share:.2f}")
    load1 = os.getloadavg()
    lines.insert(1, f"load average at start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, at end "
                    f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} ({os.cpu_count()} cores)")
    lines.append("a free transfer leaves compute at x1.00; a transfer that holds worker 0's core slows compute by "
                 "about 1 / (1 - the hops' share)")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    out = Path("benchmarks/results/step_breakdown")
    out.mkdir(parents=True, exist_ok=True)
    (out / "dp_overlap_probe.txt").write_text(text)
    (out / "dp_overlap_probe.json").write_text(json.dumps({"rows": rows, "loadavg_start": load0,
                                                           "loadavg_end": load1}, indent=1))


if __name__ == "__main__":
    main()
