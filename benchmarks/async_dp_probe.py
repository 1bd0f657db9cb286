"""Do asynchronous data-parallel calls overlap on 2 local workers, and what does a pulled and pushed tensor cost?

Run::

    python benchmarks/async_dp_probe.py    # writes benchmarks/results/step_breakdown/async_dp_probe.txt

Why: the simulator lets the runtime's async data-parallel workers take turns (``SimPipeline.GRAPH``), a rule taken
from ``overlap_probe.py`` (two calls of a two-stage chain did not overlap) that fits minivgg and minires, while on
vgg16 async data parallelism measured 1.4-1.5x the single device. This probe measures, in one process on 2 local
pinned workers:

1. **overlap**: a toy worker step shaped like the runtime's parameter-server step (read a variable held on worker
   0, a chain of ``N`` matmuls with it on the worker, an update of the variable on worker 0), one function per
   worker, called from one thread and then from two threads at once, at three matmul sizes; beside it the same
   chain with no remote variable (single-device functions). Two threads give 2x the calls per second of one if the
   workers' calls overlap, 1x if they take turns.
2. **per tensor**: a call on worker 1 that reads ``T`` variables held on worker 0 and assigns ``T`` updates back
   (small and 256 KiB tensors, T = 1, 8, 32, 64), less a call that does neither: the slope is the cost of one
   tensor pulled and pushed inside a call.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from overlap_probe import per_call_ms  # noqa: E402 - the probe next to this one: the same timing of threads

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

N = 12  # matmuls per toy step
SIZES = (512, 1024, 2048)
TENSORS = (1, 8, 32, 64)


def overlap(tf: Any, d0: str, d1: str, host: str, size: int) -> dict[str, float]:
    with tf.device(d0):
        w = tf.Variable(tf.random.normal((size, size)) * 1e-3)
    with tf.device(host):
        x = tf.random.normal((size, size))

    def ps_step(dev: str) -> Any:
        @tf.function
        def f(x: Any) -> Any:
            with tf.device(d0):
                wv = w.read_value()
            with tf.device(dev):
                a = x
                for _ in range(N):
                    a = tf.tanh(tf.matmul(a, wv))
                g = tf.reduce_mean(a, axis=0, keepdims=True) * 1e-6
            with tf.device(d0):
                w.assign_sub(tf.broadcast_to(g, w.shape))
            with tf.device(dev):
                return tf.reduce_sum(a)
        return f

    def local(dev: str) -> Any:
        @tf.function
        def f(x: Any) -> Any:
            with tf.device(dev):
                a = x
                for _ in range(N):
                    a = tf.tanh(tf.matmul(a, a) * 1e-3)
                return tf.reduce_sum(a)
        return f

    p0, p1, l0, l1 = ps_step(d0), ps_step(d1), local(d0), local(d1)
    for f in (p0, p1, l0, l1):
        f(x).numpy()
    calls = max(4, int(4 * (1024 / size) ** 2))
    return {"local, one thread": per_call_ms([lambda: l0(x).numpy()], calls),
            "local, two threads": per_call_ms([lambda: l0(x).numpy(), lambda: l1(x).numpy()], calls),
            "ps step of worker 1, one thread": per_call_ms([lambda: p1(x).numpy()], calls),
            "ps steps of both workers, two threads": per_call_ms([lambda: p0(x).numpy(), lambda: p1(x).numpy()],
                                                                 calls)}


def per_tensor(tf: Any, np: Any, d0: str, d1: str, n: int) -> dict[int, float]:
    """Extra ms of a call that pulls and pushes T tensors of ``n`` floats, by T."""
    x = np.ones(1024, np.float32)

    @tf.function
    def bare(x: Any) -> Any:
        with tf.device(d1):
            return tf.reduce_sum(x)

    def median_ms(fn: Any) -> float:
        samples = []
        for _ in range(30):
            t = time.perf_counter()
            fn(x).numpy()
            samples.append(time.perf_counter() - t)
        return 1000 * statistics.median(samples)

    out = {}
    for t in TENSORS:
        with tf.device(d0):
            vs = [tf.Variable(tf.ones((n,))) for _ in range(t)]

        @tf.function
        def pull_push(x: Any, vs: list[Any] = vs) -> Any:
            reads = []
            for v in vs:
                with tf.device(d0):
                    reads.append(v.read_value())
            with tf.device(d1):
                s = tf.reduce_sum(x)
                gs = [r * 1e-9 + s * 1e-9 for r in reads]
            for v, g in zip(vs, gs, strict=True):
                with tf.device(d0):
                    v.assign_sub(g)
            with tf.device(d1):
                return s

        for _ in range(3):
            pull_push(x).numpy()
            bare(x).numpy()
        out[t] = median_ms(pull_push) - median_ms(bare)
    return out


def main() -> None:
    import numpy as np
    import tensorflow as tf
    from hgpart.runtime.cluster import open_local

    load0 = os.getloadavg()
    lines = [f"$ python {' '.join(sys.argv)}"]
    with open_local(2, inter_op=4, start_timeout=120) as ds:
        d0, d1 = ds.devices[0], ds.devices[1]
        lines.append(f"1. overlap: {N} matmuls of SxS per call; wall ms per call (lower is better)")
        for size in SIZES:
            r = overlap(tf, d0, d1, ds.host, size)
            lines.append(f"  S={size}: " + ", ".join(f"{k} {v:.1f}" for k, v in r.items()))
            lines.append(f"    two threads give {r['local, one thread'] / r['local, two threads']:.2f}x the calls "
                         f"per second of one (single-device functions) and "
                         f"{r['ps step of worker 1, one thread'] / r['ps steps of both workers, two threads']:.2f}x "
                         "(parameter-server steps; 1.00x if they took turns, 2.00x if they overlapped fully)")
        lines.append("2. per tensor: extra ms of one call that pulls T tensors from worker 0 and pushes T back")
        for n in (256, 65536):
            r2 = per_tensor(tf, np, d0, d1, n)
            slope = (r2[TENSORS[-1]] - r2[TENSORS[1]]) / (TENSORS[-1] - TENSORS[1])
            lines.append(f"  {n * 4} B tensors: " + ", ".join(f"T={t} {v:.2f}" for t, v in r2.items())
                         + f"; {1000 * slope:.0f} us per tensor pulled and pushed")
    load1 = os.getloadavg()
    lines.insert(1, f"load average at start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, at end "
                    f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} ({os.cpu_count()} cores)")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    out = Path("benchmarks/results/step_breakdown")
    out.mkdir(parents=True, exist_ok=True)
    (out / "async_dp_probe.txt").write_text(text)


if __name__ == "__main__":
    main()
