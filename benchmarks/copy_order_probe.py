"""Does a copy to a busy worker hold up the client thread that issued it? Two local pinned workers, one process.

Run::

    python benchmarks/copy_order_probe.py    # writes benchmarks/results/step_breakdown/copy_order_probe.txt

Why: the stage pipeline (``runtime/stagepipe.py``) moves each stage's outputs to the next stage's worker with an
eager copy from the stage's own client thread, then issues that stage's next call. Worker 1 may be in a long call
at that moment. If the copy made the thread wait for worker 1's call, worker 0 would go idle, and two workers
could not beat one. Measured here, three times: thread A calls a function of about 0.7 s on worker 1. 100 ms
later, thread B copies a small tensor from worker 0 to worker 1, then calls a small function on worker 0. Printed:
when B's worker-0 result arrives, when the copy's value is there, and when A's call ends.
"""

from __future__ import annotations

import os
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def main() -> None:
    import tensorflow as tf
    from probe_calls import long_call, two_workers

    with two_workers("copy_order_probe", "benchmarks/results/step_breakdown/copy_order_probe.txt") as (ds, lines):
        d0, d1 = ds.devices[0], ds.devices[1]
        heavy = long_call(d1)
        with tf.device(d0):
            small = tf.random.normal([64, 64, 64])

        @tf.function
        def light(x: tf.Tensor) -> tf.Tensor:
            return tf.reduce_sum(x)

        with tf.device(d1):  # warm the copy and the light function
            tf.identity(small).numpy()
        with tf.device(d0):
            light(small).numpy()
        for trial in range(3):
            done: dict[str, float] = {}

            def call_on_worker1(done: dict[str, float] = done) -> None:
                heavy().numpy()
                done["a"] = time.perf_counter()

            th = threading.Thread(target=call_on_worker1)
            t0 = time.perf_counter()
            th.start()
            time.sleep(0.1)
            s = time.perf_counter()
            with tf.device(d1):
                copied = tf.identity(small)
            issued = time.perf_counter() - s
            with tf.device(d0):
                z = light(small)
            z.numpy()
            w0 = time.perf_counter() - s
            copied.numpy()
            cp = time.perf_counter() - s
            th.join()
            lines.append(f"trial {trial + 1}: A's call on worker 1 ends {1e3 * (done['a'] - t0):.0f} ms after it "
                         f"starts; B (from 100 ms): the copy to worker 1 returns in {1e3 * issued:.0f} ms, B's "
                         f"worker-0 result is there after {1e3 * w0:.0f} ms, the copy's value after {1e3 * cp:.0f} ms")
            print(lines[-1], flush=True)


if __name__ == "__main__":
    main()
