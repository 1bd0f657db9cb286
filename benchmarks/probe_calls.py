"""What the probes of how remote calls interact share: two local workers with a report, and a long call.

Usage (from a benchmark run as ``python benchmarks/<probe>.py [OUT]``)::

    from probe_calls import long_call, two_workers
    with two_workers("copy_order_probe", "benchmarks/results/step_breakdown/copy_order_probe.txt") as (ds, lines):
        call = long_call(ds.devices[1])   # traced and run once; call() issues it again, returns its remote result
        lines.append(...)                 # written with the command and the load average at start and end
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def two_workers(name: str, default_out: str) -> Iterator[tuple[Any, list[str]]]:
    """Two local pinned workers (``open_local``) and the probe's report lines, which start with the command and
    the load average; when the block ends they get the load average at the end and are written to the path given
    as the probe's first argument, or to ``default_out``."""
    from hgpart.runtime.cluster import open_local

    lines = [f"$ python benchmarks/{name}.py   # load average {os.getloadavg()}"]
    with open_local(2, inter_op=4, start_timeout=120) as ds:
        yield ds, lines
    lines.append(f"load average at end {os.getloadavg()}")
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(default_out)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


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
