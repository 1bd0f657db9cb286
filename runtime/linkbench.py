"""Micro-benchmark of the link between two local workers: seconds to move a tensor from worker 0 to worker 1.

Usage::

    from hgpart.runtime.linkbench import measure_local_link
    m = measure_local_link(sizes=[4096, 2**20, 2**25], repeats=5, cores=[0, 1], cores_per_worker=1)
    m.seconds[2**20]      # one sample per repeat: seconds of a copy of 1 MiB, the dispatch baseline taken off
    m.baseline            # seconds of the same eager call when the tensor is already on worker 1

Why this way: the runtime's local workers exchange feature maps and gradients as TensorFlow copies between
worker processes (gRPC on 127.0.0.1), so the link a simulation of ``--devices local`` needs is that copy. Each
sample is an eager ``tf.identity`` placed on worker 1 of a tensor that lives on worker 0, followed by a fetch of one
element to the client so that the copy has certainly finished. The client's own cost (dispatching the op to
worker 1, fetching the element) is measured on a tensor already on worker 1 and taken off every sample, so what is
left is the worker-to-worker copy. Every sample copies a tensor made for it, so no cached copy on worker 1 is
reused. The fit of latency and bandwidth is not done here (the runtime does not model links):
:func:`hgpart.calibration.fit_link` does it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from hgpart.runtime.cluster import guarded, open_local

from hgpart.errors import HgpartError

__all__ = ["LinkSamples", "measure_local_link"]

#: seconds one whole benchmark may take on the workers before it is called stuck
_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class LinkSamples:
    """Seconds per copy from worker 0 to worker 1, by size in bytes, with the client's dispatch cost taken off."""

    seconds: dict[int, list[float]]
    baseline: float  # median seconds of the same call on a tensor already on worker 1 (taken off every sample)
    cores: tuple[tuple[int, ...], ...]  # the cores each worker was pinned to


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
    return LinkSamples(out, base, cores)
