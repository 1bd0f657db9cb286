"""Micro-benchmark of the link between two local workers: seconds to move a tensor from worker 0 to worker 1.

Usage::

    from hgpart.runtime.linkbench import measure_local_link
    m = measure_local_link(sizes=[4096, 2**20, 2**25], repeats=5, cores=[0, 1], cores_per_worker=1)
    m.seconds[2**20]      # one sample per repeat: seconds of a copy of 1 MiB, the dispatch baseline taken off
    m.baseline            # seconds of the same eager call when the tensor is already on worker 1
    m.call                # seconds of one call of a trivial step function on worker 0 (fed and fetched)
    m.hops[2**20]         # per repeat: seconds of one hop of 1 MiB inside a compiled function (w0 -> w1 or back)

Why this way: the runtime's local workers exchange feature maps and gradients as TensorFlow copies between
worker processes (gRPC on 127.0.0.1), so the link a simulation of ``--devices local`` needs is that copy. Each
sample is an eager ``tf.identity`` placed on worker 1 of a tensor that lives on worker 0, followed by a fetch of one
element to the client so that the copy has certainly finished. The client's own cost (dispatching the op to
worker 1, fetching the element) is measured on a tensor already on worker 1 and taken off every sample, so what is
left is the worker-to-worker copy. Every sample copies a tensor made for it, so no cached copy on worker 1 is
reused. The fit of latency and bandwidth is not done here (the runtime does not model links):
:func:`hgpart.calibration.fit_link` does it.

Inside the runtime's step functions a transfer is not an eager copy but a send/receive pair of one compiled
multi-device function, so the same session also times that: a function that makes a tensor on worker 0 and passes
it ``HOPS`` times between the workers (each hop adds 1 on the receiving worker, so nothing can be folded away),
against the same function with no hop; the difference over ``HOPS`` is the seconds of one hop of that size.

The same session also times the runtime's fixed cost of one step call: a compiled function placed on worker 0 that
takes a small input from the client and returns a scalar to it, doing next to no work. Every training step the
runtime drives is such a call (the feed in, the loss back), so its wall time is a cost per call that no layer
profile contains.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hgpart.runtime.cluster import guarded, open_local

from hgpart.errors import HgpartError

__all__ = ["LinkSamples", "hop_chain", "measure_local_link"]

#: seconds one whole benchmark may take on the workers before it is called stuck
_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class LinkSamples:
    """Seconds per copy from worker 0 to worker 1, by size in bytes, with the client's dispatch cost taken off."""

    seconds: dict[int, list[float]]
    baseline: float  # median seconds of the same call on a tensor already on worker 1 (taken off every sample)
    cores: tuple[tuple[int, ...], ...]  # the cores each worker was pinned to
    call: float = 0.0  # median seconds of one call of a trivial step function on worker 0, fed and fetched
    hops: dict[int, list[float]] | None = None  # per size, per repeat: seconds of one hop inside a function


def measure_local_link(sizes: Sequence[int], *, repeats: int, cores: Sequence[int],
                       cores_per_worker: int = 1) -> LinkSamples:
    """Start two local workers of ``cores_per_worker`` cores each (from ``cores``) and time copies between them."""
    if repeats < 1 or not sizes or min(sizes) < 4:
        raise HgpartError(f"need repeats >= 1 and sizes >= 4 bytes (got {repeats}, {list(sizes)})",
                          where="link benchmark")
    if len(cores) < 2 * cores_per_worker:
        raise HgpartError(f"two workers of {cores_per_worker} core(s) need {2 * cores_per_worker} cores, "
                          f"{len(cores)} are usable", where="link benchmark", fix="use fewer cores per worker")
    chosen = list(cores)[: 2 * cores_per_worker]
    with open_local(2, cores=chosen) as ds:
        return guarded(ds, _measure, ds.devices[0], ds.devices[1], list(sizes), repeats,
                       tuple((tuple(chosen[:cores_per_worker]), tuple(chosen[cores_per_worker:]))),
                       timeout=_TIMEOUT_S)


def _measure(src: str, dst: str, sizes: list[int], repeats: int,
             cores: tuple[tuple[int, ...], ...]) -> LinkSamples:
    import tensorflow as tf

    def fresh(device: str, nbytes: int, seed: int) -> tf.Tensor:
        """A tensor of ``nbytes`` made on ``device``, finished before it is returned."""
        with tf.device(device):
            x = tf.fill([max(nbytes // 4, 1)], tf.constant(float(seed), tf.float32))
            _ = x[0].numpy()
        return x

    def copy_seconds(x: tf.Tensor) -> float:
        t0 = time.perf_counter()
        with tf.device(dst):
            y = tf.identity(x)
            _ = y[0].numpy()
        return time.perf_counter() - t0

    copy_seconds(fresh(src, 4096, -1))  # warm-up: the first remote copy sets up the channel between the workers
    base = statistics.median(copy_seconds(fresh(dst, 4096, -2 - r)) for r in range(max(repeats, 3)))
    out: dict[int, list[float]] = {}
    for size in sorted(set(int(s) for s in sizes)):
        samples = []
        for r in range(repeats):
            x = fresh(src, size, r)
            samples.append(max(copy_seconds(x) - base, 0.0))
            del x
        out[size] = samples
    return LinkSamples(out, base, cores, _call_seconds(src, max(repeats, 5)),
                       {size: _hop_seconds(src, dst, size, repeats) for size in sorted(set(int(s) for s in sizes))})


#: hops of the in-function benchmark (even: the tensor ends where it started)
HOPS = 8


def hop_chain(src: str, dst: str, elements: int, hops: int) -> Any:
    """A compiled function that makes ``elements`` floats on ``src`` and passes them ``hops`` times between ``src``
    and ``dst`` (each hop adds 1 on the receiving device, so nothing can be folded away); returns one element."""
    import tensorflow as tf

    @tf.function
    def f(seed: tf.Tensor) -> tf.Tensor:
        with tf.device(src):
            t = tf.fill([elements], seed)
        for h in range(hops):
            with tf.device(dst if h % 2 == 0 else src):
                t = t + 1.0
        with tf.device(src):
            return t[0]
    return f


def _hop_seconds(src: str, dst: str, nbytes: int, repeats: int) -> list[float]:
    """Per repeat, seconds of one hop of ``nbytes`` inside a compiled function (see the module docstring)."""
    import tensorflow as tf

    n = max(nbytes // 4, 1)
    none, some = hop_chain(src, dst, n, 0), hop_chain(src, dst, n, HOPS)
    seed = tf.constant(1.0)
    for f in (none, some):
        for _ in range(2):  # trace, place and warm
            f(seed).numpy()

    def timed(f: Any) -> float:
        t0 = time.perf_counter()
        f(seed).numpy()
        return time.perf_counter() - t0

    base = statistics.median(timed(none) for _ in range(max(repeats, 3)))
    return [max(timed(some) - base, 0.0) / HOPS for _ in range(repeats)]


#: elements of the trivial step function's input (a few KiB: the feed's fixed cost, not its bandwidth)
_CALL_INPUT = 1024


def _call_seconds(device: str, repeats: int) -> float:
    """Median wall seconds of one call of a compiled function on ``device``: fed from the client, a scalar back."""
    import numpy as np
    import tensorflow as tf

    @tf.function
    def step(x: tf.Tensor) -> tf.Tensor:
        with tf.device(device):
            return tf.reduce_sum(x)

    x = np.ones(_CALL_INPUT, np.float32)
    for _ in range(3):  # trace, place and warm the function
        step(x).numpy()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step(x).numpy()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)
