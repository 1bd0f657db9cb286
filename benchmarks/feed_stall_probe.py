"""Does reading a batch from ``tf.data`` wait for remote calls that other threads have issued? Two local workers.

Run::

    python benchmarks/feed_stall_probe.py    # writes benchmarks/results/step_breakdown/feed_stall_probe.txt

Why: the pipeline's threads each read their batch and then call the step (or stage) function on the workers. A
device trace of vgg16's two-stage pipeline showed the first stage's thread stalled for a whole call of the other
stage while it read its batch. Measured here, twice each: thread A calls a function of about 0.8 s on worker 1;
50 ms later the main thread does one of

* ``numpy``: a numpy reduction of one batch (no TensorFlow);
* ``tf.data next()``: ``next()`` on a prefetching ``tf.data`` iterator of batches (host, no Python function);
* ``constant on worker 0``: ``tf.constant`` of one batch placed on worker 0 (the feed's copy);
* ``StepFeed``: hgpart's :class:`~hgpart.runtime.data.StepFeed` (``Data.feed``) of the same data, whose reader
  thread had read ahead before A's call;

and prints how long that took, beside when A's call returned and when its result was there.
"""

from __future__ import annotations

import os
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def main() -> None:
    import numpy as np
    import tensorflow as tf
    from hgpart.runtime.data import ArrayData
    from probe_calls import long_call, two_workers

    with two_workers("feed_stall_probe", "benchmarks/results/step_breakdown/feed_stall_probe.txt") as (ds, lines):
        d0, d1 = ds.devices[0], ds.devices[1]
        heavy = long_call(d1)
        arr = np.random.default_rng(0).random((32 * 40, 64, 64, 3), dtype=np.float32)
        it = iter(tf.data.Dataset.from_tensor_slices(arr).batch(32).repeat().prefetch(2))
        next(it)
        data = ArrayData(arr, np.zeros(len(arr), np.int32), where="x")
        feed = data.feed(batch_size=32, seed=0, start_step=0, steps=20, host=ds.host)
        feed(0)
        step = 1

        def one(what: str) -> None:
            nonlocal step
            if what == "numpy":
                float(np.sum(arr[:32]))
            elif what == "tf.data next()":
                next(it)
            elif what == "constant on worker 0":
                with tf.device(d0):
                    tf.constant(arr[:32])
            else:
                feed(step)
                step += 1

        for what in ("numpy", "tf.data next()", "constant on worker 0", "StepFeed"):
            for _ in range(2):
                time.sleep(0.3)  # StepFeed's reader refills its buffer while no call is in flight
                res: dict[str, float] = {}

                def call_on_worker1(res: dict[str, float] = res) -> None:
                    t = time.perf_counter()
                    y = heavy()
                    res["returned"] = time.perf_counter() - t
                    y.numpy()
                    res["done"] = time.perf_counter() - t

                th = threading.Thread(target=call_on_worker1)
                th.start()
                time.sleep(0.05)
                t = time.perf_counter()
                one(what)
                took = time.perf_counter() - t
                th.join()
                ret, done = 1e3 * res["returned"], 1e3 * res["done"]
                lines.append(f"{what:22s} took {1e3 * took:6.1f} ms while a call on worker 1 ran (the call returned "
                             f"after {ret:.0f} ms, its result was there after {done:.0f})")
                print(lines[-1], flush=True)
        feed.close()


if __name__ == "__main__":
    main()
