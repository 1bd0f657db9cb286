"""Micro-benchmark of the client's CPU per step call: the CPU seconds the runtime's own client process spends on
one call of a model's step function, for the single device's step and an asynchronous data-parallel worker's.

Usage::

    from hgpart.runtime.clientbench import ClientModel, client_cpu_seconds
    got = client_cpu_seconds(ds, [ClientModel("minivgg", (32, 32, 3), build_minivgg, (16, 32))], repeats=5)
    got[("minivgg", (32, 32, 3), 16)]   # ClientCpu: seconds of client CPU per single-device step, per async call

Why: with local workers the client is a third process on the workers' own cores. Each call costs it CPU time (the
feed made into a tensor and sent, the call's dispatch to every worker, the loss fetched), several milliseconds for
the zoo's small models. While one worker computes alone that time runs on an idle core; when every worker
computes, as in data parallelism, it is taken from them. No layer profile holds it, and the trivial step call of
:mod:`hgpart.runtime.linkbench` costs the client much less than a model's step does, so it is measured on the
model's own step functions, built by :func:`hgpart.runtime.dataparallel.make_strategy`: the single device's step
of B images on worker 0, and ``async-dp-1ps``'s workers' steps of B / 2 images (worker 1's reads and updates the
parameters on worker 0). Each sample is the client process's CPU time (every thread of it, as
``time.process_time`` counts) over one call. Nothing here is compared with a training run's speed.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from hgpart.runtime.dataparallel import make_strategy
from hgpart.runtime.step import OptimizerSpec

__all__ = ["ClientCpu", "ClientModel", "client_cpu_seconds"]


@dataclass(frozen=True)
class ClientModel:
    """A model to measure: its name and input (as the simulator finds it), a function that builds the Keras model
    (called once the workers are connected: variables made before belong to a context that no longer exists),
    and the batch sizes."""

    name: str
    input_shape: tuple[int, ...]
    build: Callable[[], Any]
    batch_sizes: tuple[int, ...]


@dataclass(frozen=True)
class ClientCpu:
    """Median client CPU seconds per call: the single device's step of B images, an async worker's of B / 2."""

    step: float
    async_call: float


def client_cpu_seconds(ds: Any, models: Sequence[ClientModel], *, repeats: int, warmup: int = 2
                       ) -> dict[tuple[str, tuple[int, ...], int], ClientCpu]:
    """Per (model name, input shape, batch size): :class:`ClientCpu` over ``repeats`` calls each, after
    ``warmup`` calls that trace and place the functions. ``ds``: an open device set of at least two workers. A batch
    of one has no async call: its entry repeats the single device's figure."""
    rng = np.random.default_rng(0)
    out: dict[tuple[str, tuple[int, ...], int], ClientCpu] = {}
    for m in models:
        model = m.build()
        classes = int(model.outputs[0].shape[-1])
        for batch in m.batch_sizes:
            per = {}
            # an odd batch cannot be split over two workers: its async call is timed at the even batch below it
            for strategy, whole in (("single", batch), ("async-dp-1ps", batch - batch % 2)):
                if strategy != "single" and whole < 2:
                    continue
                fns = make_strategy(strategy, model, ds, OptimizerSpec("adam", 1e-3), batch_size=whole).slot_fns
                share = whole // len(fns)
                x = rng.random((share, *m.input_shape), dtype=np.float32)
                y = rng.integers(0, classes, share).astype(np.int32)
                per[strategy] = statistics.median(_samples(fns, x, y, repeats, warmup))
            out[(m.name, m.input_shape, batch)] = ClientCpu(per["single"], per.get("async-dp-1ps", per["single"]))
    return out


def _samples(fns: Sequence[Any], x: np.ndarray, y: np.ndarray, repeats: int, warmup: int) -> list[float]:
    """Client CPU seconds of each of ``repeats`` calls, taken in turn from ``fns`` (each warmed first)."""
    for f in fns:
        for _ in range(warmup):
            f(x, y)
    out = []
    for r in range(max(repeats, 1) * len(fns)):
        t0 = time.process_time()
        fns[r % len(fns)](x, y)
        out.append(time.process_time() - t0)
    return out
