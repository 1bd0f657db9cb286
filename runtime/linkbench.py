"""Micro-benchmark of the link between two local workers: seconds to move a tensor from worker 0 to worker 1.

Usage::

    from hgpart.runtime.linkbench import measure_local_link
    m = measure_local_link(sizes=[4096, 2**20, 2**25], repeats=5, cores=[0, 1], cores_per_worker=1)
    m.seconds[2**20]      # one sample per repeat: seconds of a copy of 1 MiB, the dispatch baseline taken off
    m.baseline            # seconds of the same eager call when the tensor is already on worker 1
    m.call                # seconds of one call of a trivial step function on worker 0 (fed and fetched)
    m.calls[(2, 2**20)]   # per repeat: seconds of a step call that feeds 1 MiB from the client, split over 2 workers
    m.hops[2**20]         # per repeat: seconds of one hop of 1 MiB inside a compiled function (w0 -> w1 or back)
    m.ring[(2**20, 16)]   # per repeat: seconds of the runtime's ring all-reduce of 2**20 values in 16 tensors
    m.pulls[16]           # per repeat: seconds of reading 16 variables of worker 0 on worker 1 in one function

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

Sync data parallelism sums the replicas' gradients with the runtime's own ring all-reduce
(:func:`hgpart.runtime.dataparallel.ring_allreduce`): it flattens every replica's tensors into one, sums chunks
around the ring and splits the sum back, all inside the step function. Its cost is the copies on the workers' cores
as much as the transfers, so it is timed as a whole (``ring_points``: parameters and tensors): a function that
makes every replica's tensors and all-reduces them, against the same function that makes them and does not; the
difference is the all-reduce's seconds.

Asynchronous data parallelism pulls a parameter server's variables into a worker's step function, and pushes the
gradients back, as many tensors in one function (:func:`hgpart.runtime.dataparallel.make_strategy`). Their
send/receive pairs run at once, so a pull of n tensors does not pay the link's latency n times: the session times a
function on worker 1 that reads ``n`` variables of worker 0 (``PULL_TENSORS``, the same ``PULL_BYTES`` in all),
against the same function that sums them on worker 0 and sends one scalar; the difference, by ``n``, gives what each
further tensor of one transfer costs (:func:`hgpart.calibration.fit_tensors`).

The same session also times the runtime's cost of one step call: a compiled function that takes an input from the
client, splits it over one or both workers, sums each shard there and returns a scalar to the client, doing next to
no work (:func:`step_call`). Every step of the single device and of data parallelism is such a call (the feed in,
split on the client, the loss back), so its wall time, by the bytes fed and the devices spanned, is a cost per call
that no layer profile contains. The smallest feed on one worker is the fixed cost of any call.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hgpart.runtime.clientbench import ClientCpu, ClientModel, client_cpu_seconds
from hgpart.runtime.cluster import guarded, open_local
from hgpart.runtime.dataparallel import ring_allreduce

from hgpart.errors import HgpartError

__all__ = ["PULL_BYTES", "PULL_TENSORS", "LinkSamples", "hop_chain", "measure_local_link", "pull_function",
           "ring_function"]

#: seconds one whole benchmark may take on the workers before it is called stuck
_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class LinkSamples:
    """Seconds per copy from worker 0 to worker 1, by size in bytes, with the client's dispatch cost taken off."""

    seconds: dict[int, list[float]]
    baseline: float  # median seconds of the same call on a tensor already on worker 1 (taken off every sample)
    cores: tuple[tuple[int, ...], ...]  # the cores each worker was pinned to
    hops: dict[int, list[float]] | None = None  # per size, per repeat: seconds of one hop inside a function
    #: per (parameters, tensors), per repeat: seconds of the runtime's ring all-reduce over the two workers
    ring: dict[tuple[int, int], list[float]] | None = None
    #: per (devices spanned, bytes fed), per repeat: wall seconds of a data-parallel-shaped step call
    calls: dict[tuple[int, int], list[float]] | None = None
    #: per (model, input shape, batch size): the client's CPU per step call (:mod:`hgpart.runtime.clientbench`)
    client: dict[tuple[str, tuple[int, ...], int], ClientCpu] | None = None
    #: per number of tensors, per repeat: seconds of pulling that many variables of worker 0 into worker 1 in one
    #: function, beyond one scalar's hop (``PULL_BYTES`` in all)
    pulls: dict[int, list[float]] | None = None

    @property
    def call(self) -> float:
        """Median seconds of the cheapest step call measured (the smallest feed, one worker): the fixed cost of
        any call (0.0: none measured)."""
        if not self.calls:
            return 0.0
        return statistics.median(self.calls[min(self.calls)])


def measure_local_link(sizes: Sequence[int], *, repeats: int, cores: Sequence[int],
                       cores_per_worker: int = 1, ring_points: Sequence[tuple[int, int]] = (),
                       client_models: Sequence[ClientModel] = ()) -> LinkSamples:
    """Start two local workers of ``cores_per_worker`` cores each (from ``cores``) and time copies between them,
    the ring all-reduce of each (parameters, tensors) in ``ring_points``, and the client's CPU per step call of each
    of ``client_models`` (:mod:`hgpart.runtime.clientbench`), all in one session of the workers."""
    if repeats < 1 or not sizes or min(sizes) < 4:
        raise HgpartError(f"need repeats >= 1 and sizes >= 4 bytes (got {repeats}, {list(sizes)})",
                          where="link benchmark")
    if len(cores) < 2 * cores_per_worker:
        raise HgpartError(f"two workers of {cores_per_worker} core(s) need {2 * cores_per_worker} cores, "
                          f"{len(cores)} are usable", where="link benchmark", fix="use fewer cores per worker")
    chosen = list(cores)[: 2 * cores_per_worker]
    with open_local(2, cores=chosen) as ds:
        samples = guarded(ds, _measure, ds.devices[0], ds.devices[1], ds.host, list(sizes), repeats,
                          tuple((tuple(chosen[:cores_per_worker]), tuple(chosen[cores_per_worker:]))),
                          list(ring_points), timeout=_TIMEOUT_S)
        if client_models:
            # no time bound: a large model's calls take as long as its steps (a dead worker still ends it)
            got = guarded(ds, client_cpu_seconds, ds, list(client_models), repeats=max(3, repeats // 3))
            samples = replace(samples, client=got)
        return samples


def _measure(src: str, dst: str, host: str, sizes: list[int], repeats: int,
             cores: tuple[tuple[int, ...], ...], ring_points: list[tuple[int, int]]) -> LinkSamples:
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
    calls = _call_seconds([src, dst], host, CALL_FEEDS, max(repeats, 5))
    return LinkSamples(out, base, cores,
                       {size: _hop_seconds(src, dst, size, repeats) for size in sorted(set(int(s) for s in sizes))},
                       {pt: _ring_seconds([src, dst], *pt, repeats) for pt in ring_points} if ring_points else None,
                       calls, pulls={n: _pull_seconds(src, dst, n, repeats) for n in PULL_TENSORS})


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


def _warm_timer(functions: tuple[Any, ...], seed: Any) -> Callable[[Any], float]:
    """Trace, place and warm each compiled function on ``seed`` (two calls), then return a clock of one call."""
    for f in functions:
        for _ in range(2):
            f(seed).numpy()

    def timed(f: Any) -> float:
        t0 = time.perf_counter()
        f(seed).numpy()
        return time.perf_counter() - t0
    return timed


def _hop_seconds(src: str, dst: str, nbytes: int, repeats: int) -> list[float]:
    """Per repeat, seconds of one hop of ``nbytes`` inside a compiled function (see the module docstring)."""
    import tensorflow as tf

    n = max(nbytes // 4, 1)
    none, some = hop_chain(src, dst, n, 0), hop_chain(src, dst, n, HOPS)
    timed = _warm_timer((none, some), tf.constant(1.0))
    base = statistics.median(timed(none) for _ in range(max(repeats, 3)))
    return [max(timed(some) - base, 0.0) / HOPS for _ in range(repeats)]


def ring_function(devices: list[str], params: int, tensors: int, *, reduce: bool) -> Any:
    """A compiled function that makes ``tensors`` tensors of ``params / tensors`` floats on every device (a replica's
    gradients) and, with ``reduce``, sums them with the runtime's ring all-reduce; returns one float that reads every
    replica's result, so nothing can be folded away."""
    import tensorflow as tf

    n = max(params // tensors, 1)

    @tf.function
    def f(seed: tf.Tensor) -> tf.Tensor:
        grads = []
        for r, d in enumerate(devices):
            with tf.device(d):
                grads.append([tf.fill([n], seed + float(r * tensors + i)) for i in range(tensors)])
        out = ring_allreduce(grads, devices) if reduce else grads
        firsts = []
        for r, d in enumerate(devices):
            with tf.device(d):
                firsts.append(tf.add_n([g[0] for g in out[r]]))
        with tf.device(devices[0]):
            return tf.add_n(firsts)
    return f


def _ring_seconds(devices: list[str], params: int, tensors: int, repeats: int) -> list[float]:
    """Per repeat, seconds of the ring all-reduce of ``params`` values in ``tensors`` tensors per replica: the
    function with it minus the function without it (medians of 3 alternating calls each)."""
    import tensorflow as tf

    none, some = (ring_function(devices, params, tensors, reduce=r) for r in (False, True))
    timed = _warm_timer((none, some), tf.constant(1.0))
    out = []
    for _ in range(repeats):
        pairs = [(timed(none), timed(some)) for _ in range(3)]
        out.append(max(statistics.median(b for _, b in pairs) - statistics.median(a for a, _ in pairs), 0.0))
    return out


#: tensors per pull of the many-tensor benchmark, and the bytes they hold together (a small model's shard: the cost
#: is the tensors', not the bytes')
PULL_TENSORS = (1, 4, 16, 64)
PULL_BYTES = 2**16


def pull_function(src: str, dst: str, variables: Sequence[Any], *, remote: bool) -> Any:
    """A compiled function of a seed that reads ``variables`` (on ``src``) as an async data-parallel worker on
    ``dst`` pulls them: with ``remote`` each read value goes to ``dst`` and is summed there; without, they are
    summed on ``src`` and only the sum goes to ``dst``. Returns one float on ``dst``."""
    import tensorflow as tf

    @tf.function
    def f(seed: tf.Tensor) -> tf.Tensor:
        reads = []
        for v in variables:
            with tf.device(src):
                reads.append(v.read_value())
        with tf.device(dst if remote else src):
            total = tf.add_n([tf.reduce_sum(r) for r in reads])
        with tf.device(dst):
            return total + seed
    return f


def _pull_seconds(src: str, dst: str, tensors: int, repeats: int) -> list[float]:
    """Per repeat, seconds of pulling ``tensors`` variables of ``PULL_BYTES`` in all from ``src`` into a function
    on ``dst``, beyond sending their sum (medians of 5 alternating calls each: a few hundred microseconds apart
    on a shared machine, so more than :func:`_ring_seconds` takes)."""
    import tensorflow as tf

    with tf.device(src):
        variables = [tf.Variable(tf.fill([max(PULL_BYTES // 4 // tensors, 1)], float(i))) for i in range(tensors)]
    none, some = pull_function(src, dst, variables, remote=False), pull_function(src, dst, variables, remote=True)
    timed = _warm_timer((none, some), tf.constant(1.0))
    out = []
    for _ in range(repeats):
        pairs = [(timed(none), timed(some)) for _ in range(5)]
        out.append(statistics.median(b for _, b in pairs) - statistics.median(a for a, _ in pairs))
    return out


#: bytes fed to the step-call benchmark's function: from a trivial call's few KiB to a batch of 32 images of 96 x 96
CALL_FEEDS = (4096, 2**16, 2**18, 2**20, 2**22)


def step_call(devices: list[str], host: str) -> Any:
    """A compiled function shaped like the data-parallel strategies' step call, without the model: the input, on
    the client (``host``), is split into one shard per device, each device sums its shard, the client adds the
    sums and returns one float. With one device it is the single device's call."""
    import tensorflow as tf

    @tf.function
    def step(x: tf.Tensor) -> tf.Tensor:
        with tf.device(host):
            shards = tf.split(x, len(devices))
        sums = []
        for shard, d in zip(shards, devices, strict=True):
            with tf.device(d):
                sums.append(tf.reduce_sum(shard))
        with tf.device(host):
            return tf.add_n(sums)
    return step


def _call_seconds(devices: list[str], host: str, feeds: Sequence[int], repeats: int
                  ) -> dict[tuple[int, int], list[float]]:
    """Per (devices the call spans, bytes fed), per repeat: wall seconds of one call of :func:`step_call` on the
    first 1 .. ``len(devices)`` devices, the input made on the client from numpy as the runtime's caller does."""
    import numpy as np

    out: dict[tuple[int, int], list[float]] = {}
    for spans in range(1, len(devices) + 1):
        step = step_call(devices[:spans], host)
        for feed in feeds:
            x = np.ones(max(feed // 4 // spans, 1) * spans, np.float32)
            for _ in range(3):  # trace, place and warm the function
                _one_call(step, x, host)
            out[(spans, feed)] = [_one_call(step, x, host) for _ in range(repeats)]
    return out


def _one_call(step: Any, x: Any, host: str) -> float:
    """Wall seconds of one call of ``step`` on ``x``, made into a tensor on the client as the runtime's caller does."""
    import tensorflow as tf

    t0 = time.perf_counter()
    with tf.device(host):
        xt = tf.constant(x)
    step(xt).numpy()
    return time.perf_counter() - t0
