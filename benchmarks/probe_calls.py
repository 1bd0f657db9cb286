"""A function call of about a second on one worker, shared by the probes of how remote calls interact.

Usage (from a benchmark run as ``python benchmarks/<probe>.py``)::

    from probe_calls import long_call
    call = long_call(device)      # traced and run once; call() issues it again and returns its (remote) result
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def long_call(device: str, *, matmuls: int = 60) -> Callable[[], Any]:
    """A ``tf.function`` of ``matmuls`` chained 1024x1024 products on ``device``, warmed up; calling the returned
    function issues one call of it there."""
    import tensorflow as tf

    with tf.device(device):
        big = tf.random.normal([1024, 1024])

    @tf.function
    def heavy(x: tf.Tensor) -> tf.Tensor:
        for _ in range(matmuls):
            x = tf.linalg.matmul(x, x) * 1e-3
        return x

    def call() -> Any:
        with tf.device(device):
            return heavy(big)

    call().numpy()
    return call
