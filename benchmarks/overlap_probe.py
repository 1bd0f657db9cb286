"""Do two calls overlap on 2 local workers? A multi-device function vs single-device functions, two client threads.

Run::

    python benchmarks/overlap_probe.py            # writes benchmarks/results/step_breakdown/overlap_probe.txt

Why: the runtime's async pipeline used to run every step as one multi-device ``tf.function`` from several client
threads, and two workers trained no faster than one. This probe isolates the cause with a toy workload (a chain of
512x512 matmuls, about the same time on each worker), measured in one process on 2 local pinned workers:

* ``single-device, one thread``: a function on worker 0 only (the unit time);
* ``single-device, two threads, two workers``: one thread calls a function on worker 0, the other on worker 1;
* ``two-stage chain, one thread`` / ``two threads``: one function whose first half runs on worker 1 and second half
  on worker 0 (a forward-only pipeline), called from one thread, then from two threads at once.

If calls overlap on the workers, two threads give about twice the throughput of one (ms per call halves).
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

N = 12  # matmuls per half
CALLS = 8  # calls per thread


def per_call_ms(fns: list, calls: int = CALLS) -> float:
    """Wall ms per call when each of ``fns`` is called ``calls`` times from its own thread, all at once."""
    threads = [threading.Thread(target=lambda f=f: [f() for _ in range(calls)]) for f in fns]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return 1000 * (time.perf_counter() - t) / (calls * len(fns))


def main() -> None:
    import tensorflow as tf
    from hgpart.runtime.cluster import open_local

    def heavy(x: tf.Tensor) -> tf.Tensor:
        for _ in range(N):
            x = tf.tanh(tf.matmul(x, x) * 1e-3)
        return x

    load0 = os.getloadavg()
    with open_local(2, inter_op=4, start_timeout=120) as ds:
        d0, d1 = ds.devices[0], ds.devices[1]

        def on(dev: str) -> tf.types.experimental.PolymorphicFunction:
            @tf.function
            def f(x: tf.Tensor) -> tf.Tensor:
                with tf.device(dev):
                    return tf.reduce_sum(heavy(x))
            return f

        @tf.function
        def chain(x: tf.Tensor) -> tf.Tensor:
            with tf.device(d1):
                a = heavy(x)
            with tf.device(d0):
                return tf.reduce_sum(heavy(a))

        f0, f1 = on(d0), on(d1)
        with tf.device(ds.host):
            x = tf.random.normal((512, 512))
        for f in (f0, f1, chain):
            f(x).numpy()
        rows = {
            "single-device, one thread": per_call_ms([lambda: f0(x).numpy()]),
            "single-device, two threads, two workers": per_call_ms([lambda: f0(x).numpy(), lambda: f1(x).numpy()]),
            "two-stage chain, one thread": per_call_ms([lambda: chain(x).numpy()]),
            "two-stage chain, two threads": per_call_ms([lambda: chain(x).numpy(), lambda: chain(x).numpy()]),
        }
    lines = [f"$ python {' '.join(sys.argv)}",
             f"load average at start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, at end "
             + " ".join(f"{v:.2f}" for v in os.getloadavg()) + f" ({os.cpu_count()} cores)",
             f"toy: {N} matmuls of 512x512 per half, {CALLS} calls per thread; wall ms per call (lower is better)"]
    lines += [f"  {k:45s} {v:8.1f}" for k, v in rows.items()]
    one, two = rows["single-device, one thread"], rows["single-device, two threads, two workers"]
    c1, c2 = rows["two-stage chain, one thread"], rows["two-stage chain, two threads"]
    lines += [f"single-device functions on two workers: two threads give {one / two:.2f}x the calls per second of one",
              f"two-stage multi-device function: two threads give {c1 / c2:.2f}x the calls per second of one "
              f"(2.00x if the workers overlapped the calls)"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    out = Path("benchmarks/results/step_breakdown")
    out.mkdir(parents=True, exist_ok=True)
    (out / "overlap_probe.txt").write_text(text)
    (out / "overlap_probe.json").write_text(json.dumps({"ms_per_call": rows, "loadavg_start": load0,
                                                        "loadavg_end": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
