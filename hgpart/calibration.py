"""Calibration of ``this-machine``: the micro-benchmarks that describe it and the cluster file made from them.

Usage::

    from hgpart.calibration import compute_rate, fit_link, memory_bandwidth, machine_memory_bytes, cluster_document
    rate = compute_rate(cores=1, quick=True)            # sustained FLOP/s of conv and dense layers, pinned
    fit = fit_link(sizes, median_seconds)               # least squares t = latency + bytes / bandwidth
    doc = cluster_document(Calibration(...))            # a hgpart.cluster/1 dict, validated by cluster_from_dict

What is measured, and why so: the simulator needs a device's compute rate, memory capacity and bandwidth, and the
link between two devices. ``this-machine`` describes the machine as the runtime's local workers use it: one node,
one device per pinned worker of ``cores`` cores. The compute rate is the FLOP count of a few representative
convolution and dense layers over their measured forward and backward time, timed by :mod:`hgpart.profiler` (the
code ``hgpart profile`` uses) with the process pinned as a worker is; profiling every model would take too long.
Memory bandwidth is a numpy copy (optimizer updates are memory-bound streams). The link's samples come from
:mod:`hgpart.runtime.linkbench`; the fit is here so that it can be tested without workers. TensorFlow is imported
only inside :func:`compute_rate`.
"""

from __future__ import annotations

import datetime as _dt
import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hgpart.allocator import physical_memory_bytes
from hgpart.cluster import CLUSTER_FORMAT, GIB, THIS_MACHINE, ClientCpuCost, RingCost, cluster_from_dict
from hgpart.errors import HgpartError
from hgpart.fileio import read_json
from hgpart.profile import BACKWARD_FLOP_FACTOR

__all__ = ["LINK_SIZES", "QUICK_LINK_SIZES", "RING_POINTS", "QUICK_RING_POINTS", "Calibration", "ComputeRate",
           "LinkFit", "RingFit", "TensorFit", "cluster_document", "compute_rate", "fit_link", "fit_ring",
           "fit_step_calls", "fit_tensors",
           "human_bytes", "machine_memory_bytes", "memory_bandwidth", "repo_profiles"]

#: bytes per copy of the link benchmark: 4 KiB .. 32 MiB, a factor 4 apart (the full calibration)
LINK_SIZES = tuple(4096 * 4**i for i in range(7)) + (2**25,)
#: the --quick sizes: fewer and smaller
QUICK_LINK_SIZES = (4096, 2**16, 2**20, 2**23)
#: (parameters, tensors) of the ring all-reduce benchmark: 64 Ki .. 64 Mi float32 values (256 KiB .. 256 MiB a
#: replica: VGG16's gradients at 64 x 64 are 168 MiB, so the fit is not stretched past what it measured; its 224
#: classifier alone is more), 16 tensors, and 64 at two sizes to tell the cost per tensor
RING_POINTS = ((2**16, 16), (2**16, 64), (2**18, 16), (2**20, 16), (2**20, 64), (2**22, 16), (2**24, 16),
               (2**25, 16), (2**26, 16))
QUICK_RING_POINTS = ((2**16, 16), (2**16, 64), (2**20, 16), (2**22, 16))
#: layer kinds whose FLOP rate stands for the device's (the bulk of a CNN's work)
RATE_KINDS = ("conv2d", "dense")


@dataclass(frozen=True)
class LinkFit:
    """``t = latency + bytes / bandwidth`` fitted by least squares to the median seconds of each size."""

    latency: float  # s, clipped at 0 (a negative intercept is noise around a latency below the timer's reach)
    bandwidth: float  # bytes/s
    sizes: tuple[int, ...]
    medians: tuple[float, ...]
    intercept: float  # the fit's raw intercept, before clipping

    def seconds(self, nbytes: float) -> float:
        return self.latency + float(nbytes) / self.bandwidth


def fit_link(sizes: Sequence[float], seconds: Sequence[float]) -> LinkFit:
    """Least squares fit of ``seconds = latency + sizes / bandwidth`` (one point per size; at least two sizes),
    each point weighted by its own time, so that the fit minimises relative errors. A point at or below 0 carries
    no relative information and is left out.

    Why relative: a timing's noise grows with its length (the machine's speed drifts by a fraction, not by a fixed
    number of microseconds), so with plain least squares the largest sizes' noise decides the intercept, and the
    latency that every small transfer pays came out negative and was clipped to 0.
    """
    x = np.asarray(sizes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if x.shape != t.shape or x.size < 2 or len(set(x.tolist())) < 2:
        raise HgpartError(f"a link fit needs at least two distinct sizes with one time each (got {x.size} sizes, "
                          f"{t.size} times)", where="link benchmark")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(x))):
        raise HgpartError("a link fit got a time that is not finite", where="link benchmark")
    keep = t > 0  # a hop's time is a difference of two timings: at or below 0, it is below the timer's reach
    if len(set(x[keep].tolist())) < 2:
        raise HgpartError("a link fit needs at least two sizes whose hop time is above 0", where="link benchmark",
                          fix="run `hgpart calibrate` again on a quieter machine, without --quick")
    x, t = x[keep], t[keep]
    a = np.column_stack([np.ones_like(x), x]) / t[:, None]
    (intercept, slope), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    if not slope > 0:
        raise HgpartError(f"the link times do not grow with the size (slope {slope:.3g} s/byte): the benchmark "
                          "was too noisy to fit a bandwidth", where="link benchmark",
                          fix="run `hgpart calibrate` again on a quieter machine, without --quick")
    return LinkFit(latency=max(float(intercept), 0.0), bandwidth=1.0 / float(slope),
                   sizes=tuple(int(s) for s in x), medians=tuple(float(v) for v in t), intercept=float(intercept))


@dataclass(frozen=True)
class RingFit:
    """``t = fixed + bytes / bandwidth + tensors x per_tensor`` fitted to the ring all-reduce's median seconds."""

    cost: RingCost
    points: tuple[tuple[int, int], ...]  # (bytes of one replica's gradients, tensors)
    medians: tuple[float, ...]


def fit_ring(points: Sequence[tuple[int, int]], seconds: Sequence[float], *, replicas: int) -> RingFit:
    """Non-negative least squares fit of ``seconds = fixed + bytes / bandwidth + tensors x per_tensor`` over
    (bytes, tensors) ``points``, each weighted by its own time (relative errors, as :func:`fit_link`); a point at or
    below 0 is left out. Non-negative: a negative fixed or per-tensor cost is noise, not a figure."""
    from scipy.optimize import nnls

    x = np.asarray(points, dtype=float).reshape(-1, 2)
    t = np.asarray(seconds, dtype=float)
    if x.shape[0] != t.size or not np.all(np.isfinite(t)):
        raise HgpartError(f"a ring fit needs one finite time per point (got {x.shape[0]} points, {t.size} times)",
                          where="all-reduce benchmark")
    keep = t > 0
    x, t = x[keep], t[keep]
    if len(set(x[:, 0].tolist())) < 2:
        raise HgpartError("a ring fit needs at least two sizes whose all-reduce time is above 0",
                          where="all-reduce benchmark", fix="run `hgpart calibrate` again on a quieter machine")
    a = np.column_stack([np.ones(len(t)), x[:, 0], x[:, 1]]) / t[:, None]
    (fixed, per_byte, per_tensor), _ = nnls(a, np.ones(len(t)))
    if not per_byte > 0:
        raise HgpartError("the all-reduce times do not grow with the size: the benchmark was too noisy to fit a "
                          "bandwidth", where="all-reduce benchmark",
                          fix="run `hgpart calibrate` again on a quieter machine, without --quick")
    return RingFit(RingCost(replicas, float(fixed), 1.0 / float(per_byte), float(per_tensor)),
                   tuple((int(b), int(n)) for b, n in x), tuple(float(v) for v in t))


@dataclass(frozen=True)
class TensorFit:
    """``t = intercept + tensors x per_tensor`` fitted to the median seconds of pulls of several tensors in one
    function, the same bytes in all: what each further tensor of one transfer costs."""

    per_tensor: float  # s, clipped at 0 (a negative slope is noise around a cost below the timer's reach)
    intercept: float
    counts: tuple[int, ...]
    medians: tuple[float, ...]
    nbytes: int  # the bytes every pull moved, split over its tensors


def fit_tensors(counts: Sequence[int], seconds: Sequence[float], *, nbytes: int) -> TensorFit:
    """Least squares line of ``seconds`` over tensor ``counts`` (at least two distinct counts, finite times).

    Why a plain least squares: the times are differences of two functions' times (a pull against one scalar's hop)
    and a few hundred microseconds each, with noise of the same size at every count, and the figure wanted is the
    slope."""
    x = np.asarray(counts, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if x.shape != t.shape or len(set(x.tolist())) < 2 or not np.all(np.isfinite(t)):
        raise HgpartError(f"a tensor-count fit needs at least two distinct counts with one finite time each (got "
                          f"{x.size} counts, {t.size} times)", where="pull benchmark")
    slope, intercept = np.polyfit(x, t, 1)
    return TensorFit(max(float(slope), 0.0), float(intercept), tuple(int(c) for c in x), tuple(float(v) for v in t),
                     int(nbytes))


def fit_step_calls(samples: dict[tuple[int, int], list[float]]) -> dict[int, LinkFit]:
    """Per devices spanned, :func:`fit_link` of a step call's median wall seconds to the bytes it feeds, from
    samples keyed by (devices spanned, bytes fed)."""
    out: dict[int, LinkFit] = {}
    for k in sorted({k for k, _ in samples}):
        feeds = sorted(f for kk, f in samples if kk == k)
        out[k] = fit_link(feeds, [statistics.median(samples[(k, f)]) for f in feeds])
    return out


@dataclass(frozen=True)
class ComputeRate:
    """Sustained FLOP/s over the timed layers (forward + backward FLOPs over forward + backward seconds)."""

    flops_per_s: float
    layers: tuple[str, ...]  # "name (kind, output shape)" of each layer that counts
    batch_size: int
    clock: str
    seconds: float  # forward + backward seconds of one batch through the counted layers
    cpu_model: str = "unknown CPU"


def _benchmark_model(quick: bool) -> Any:
    """A small CNN whose convolutions and dense layers are of the sizes the zoo's models spend their time in."""
    import keras

    size = 16 if quick else 32
    return keras.Sequential([
        keras.Input((size, size, 32)),
        keras.layers.Conv2D(64, 3, padding="same", activation="relu", name="conv3x3_32to64"),
        keras.layers.Conv2D(128, 3, strides=2, padding="same", activation="relu", name="conv3x3_64to128_s2"),
        keras.layers.Flatten(name="flatten"),
        keras.layers.Dense(256, activation="relu", name="dense_to256"),
        keras.layers.Dense(10, name="dense_to10"),
    ], name="calibration")


def compute_rate(*, cores: int, quick: bool, batch_size: int = 32) -> ComputeRate:
    """Pin this process as a worker of ``cores`` cores is pinned and time the benchmark layers with the profiler.

    Must run before anything else starts TensorFlow in this process (the thread pools are sized here). One core is
    timed by process CPU time, as ``hgpart profile`` does (load on other cores does not inflate it); several cores
    by wall time, because CPU time adds up the cores' time.
    """
    from hgpart.frontend import layer_graph_from_keras
    from hgpart.profiler import MeasureOptions, measure_profile, pin_cores
    from hgpart.timing import Clock

    pin_cores(cores)
    model = _benchmark_model(quick)
    graph = layer_graph_from_keras(model, name="calibration")
    clock = Clock.PROCESS_CPU if cores == 1 else Clock.WALL
    rounds = (2, 3) if quick else (5, 15)
    opts = MeasureOptions(clock=clock, min_rounds=rounds[0], max_rounds=rounds[1], warmup=1, whole_step=False)
    prof = measure_profile(model, graph, batch_size=batch_size, options=opts, progress=False)
    kinds = {layer.name: layer for layer in graph.layers}
    flops = seconds = 0.0
    names = []
    for cost in prof.layers:
        layer = kinds[cost.name]
        if layer.kind not in RATE_KINDS:
            continue
        flops += float(layer.flops) * batch_size * (1.0 + BACKWARD_FLOP_FACTOR)
        seconds += (cost.forward_ms + cost.backward_ms) / 1000.0
        names.append(f"{layer.name} ({layer.kind}, {'x'.join(map(str, layer.output_shape))})")
    if not (seconds > 0 and math.isfinite(flops / seconds)):
        raise HgpartError("the benchmark layers took no measurable time", where="compute benchmark",
                          fix="run `hgpart calibrate` again without --quick")
    return ComputeRate(flops / seconds, tuple(names), batch_size, clock.value, seconds,
                       str(prof.machine.get("cpu_model") or "unknown CPU"))


def machine_memory_bytes() -> int:
    """The machine's RAM in bytes (:func:`hgpart.allocator.physical_memory_bytes`); an error where it is unknown."""
    got = physical_memory_bytes()
    if got is None:
        raise HgpartError("cannot read this machine's memory size", where="/proc/meminfo",
                          fix="write the cluster file by hand (docs/simulator.md)")
    return got


def memory_bandwidth(*, quick: bool) -> tuple[float, int]:
    """Bytes/s of a numpy copy (bytes read + bytes written over the median time), and the array's bytes.

    Read and written bytes both count because an optimizer update's bytes (:data:`hgpart.simulate.costs.UPDATE_BYTES`)
    count reads and writes alike. The array is far larger than any cache.
    """
    nbytes = (32 if quick else 128) * 2**20
    repeats = 3 if quick else 9
    src = np.ones(nbytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # first touch of the destination pages
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t0)
    return 2.0 * nbytes / statistics.median(times), nbytes


def repo_profiles() -> Path | None:
    """The source checkout's ``profiles/`` folder (measured profiles, ``*_c1.json`` of one-core workers), if any."""
    folder = Path(__file__).resolve().parents[1] / "profiles"
    return folder if folder.is_dir() else None


def foreign_profiles(folder: Path, cores: int, cpu_model: str) -> list[tuple[str, str]]:
    """The profiles of ``cores`` core(s) in ``folder`` (``*_c<cores>.json``) that another CPU made: (file name,
    that CPU), by name. Why: the simulator times a model from its profile as it is, and another machine's layer
    times are off by its speed (``benchmarks/results/simulator_validation/2026-11-29-amx/``: median error 29.5 %
    with them, 14.2 % with this machine's). An unreadable file counts as foreign (its CPU: ``unreadable``)."""
    out = []
    for path in sorted(folder.glob(f"*_c{cores}.json")):
        try:
            cpu = str(read_json(path, what="profile").get("machine", {}).get("cpu_model") or "unknown CPU")
        except (HgpartError, AttributeError):  # not JSON, or not a profile's object
            cpu = "unreadable"
        if cpu != cpu_model:
            out.append((path.name, cpu))
    return out


@dataclass(frozen=True)
class Calibration:
    """Everything measured, with how it was measured."""

    cores_per_device: int
    devices: int
    usable_cores: int
    compute: ComputeRate
    memory_bytes: int
    memory_bandwidth: float
    memory_copy_bytes: int
    link: LinkFit | None
    link_repeats: int
    quick: bool
    profiles: Path | None = None
    #: the profiles this calibration made in ``profiles`` (``hgpart calibrate --profile``); empty: the source
    #: checkout's, made before
    profiled: tuple[str, ...] = ()
    call_seconds: float | None = None  # one call of a trivial step function on a worker (None: not measured)
    #: the eager-copy fit when ``link`` is the fit of hops inside a function (None: ``link`` is the eager one)
    eager_link: LinkFit | None = None
    ring: RingFit | None = None  # the runtime's ring all-reduce over the workers (None: not measured)
    #: by devices spanned, the fit of a step call's wall time to the bytes fed from the client (empty: not measured)
    calls: dict[int, LinkFit] = field(default_factory=dict)
    #: the client's CPU per step call of each profiled model (``hgpart calibrate --profile``; empty: not measured)
    client_cpu: tuple[ClientCpuCost, ...] = ()
    #: what each further tensor of one many-tensor transfer costs (None: not measured; the latency then)
    tensors: TensorFit | None = None
    date: str = field(default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))


def cluster_document(cal: Calibration, *, base: Path | None = None) -> dict[str, Any]:
    """The ``hgpart.cluster/1`` document of a calibration, checked by :func:`hgpart.cluster.cluster_from_dict`.

    ``base``: the folder the document is written to. A profiles folder inside it is written relative to it, as
    :func:`hgpart.cluster.load_cluster` reads a relative one, so that the two can move together; any other is
    written absolute."""
    by = f"measured by `hgpart calibrate{' --quick' if cal.quick else ''}` on {cal.date}"
    doc = {
        "format": CLUSTER_FORMAT,
        "name": THIS_MACHINE,
        "description": f"This machine as hgpart's local workers use it: {cal.devices} pinned worker(s) of "
                       f"{cal.cores_per_device} core(s) of its {cal.usable_cores} usable cores "
                       f"({cal.compute.cpu_model}), "
                       "joined by TensorFlow's gRPC on 127.0.0.1.",
        "nodes": 1,
        "devices_per_node": cal.devices,
        "device": _device_entry(cal, by, base),
        "links": _links_entry(cal, by),
        "sources": {"calibration": by + (" with fewer repeats (--quick): a rough figure" if cal.quick else "")},
    }
    cluster_from_dict(doc, where="calibration", base=base)
    return doc


def _device_entry(cal: Calibration, by: str, base: Path | None) -> dict[str, Any]:
    """The document's ``device``: compute rate, memory, step calls and profiles, each with its source."""
    worker = f"{cal.cores_per_device}-core pinned local worker ({cal.compute.cpu_model})"
    c = cal.compute
    device: dict[str, Any] = {
        "kind": worker,
        "peak_TFLOPs": c.flops_per_s / 1e12,
        "efficiency": 1.0,
        "memory_GiB": cal.memory_bytes / cal.devices / GIB,
        "memory_bandwidth_GBps": cal.memory_bandwidth / 1e9,
        "sources": {
            "peak_TFLOPs": f"{by}: forward + backward FLOPs (backward = {BACKWARD_FLOP_FACTOR:g} x forward) over "
                           f"the {c.clock} seconds of {', '.join(c.layers)} at batch {c.batch_size}, timed by "
                           f"hgpart.profiler pinned to {cal.cores_per_device} core(s) with as many intra-op threads",
            "efficiency": "1.0: peak_TFLOPs is already the sustained rate measured on training layers",
            "memory_GiB": f"{by}: MemTotal of /proc/meminfo ({cal.memory_bytes / GIB:.2f} GiB) / {cal.devices} "
                          "device(s)",
            "memory_bandwidth_GBps": f"{by}: numpy copy of {cal.memory_copy_bytes // 2**20} MiB, read + written "
                                     "bytes over the median time",
        },
    }
    device["ops_share_cores"] = True
    device["sources"]["ops_share_cores"] = (
        f"the runtime: each local worker runs up to its inter-op threads' ops at once (at least 4, "
        f"hgpart.placement.inter_op_threads) on its {cal.cores_per_device} pinned core(s), which they share; a traced "
        "worker runs several ops at once (benchmarks/results/trace_vs_simulated/)")
    if cal.call_seconds is not None:
        device["call_overhead_us"] = cal.call_seconds * 1e6
        device["sources"]["call_overhead_us"] = (
            f"{by}: median wall time of one call of a compiled function on worker 0 that is fed a "
            "small input from the client and returns a scalar to it (runtime.linkbench): the fixed cost of "
            "every step call the runtime makes")
    if cal.calls:
        device["step_calls"] = [{"devices": k, "fixed_us": f.latency * 1e6, "feed_GBps": f.bandwidth / 1e9}
                                for k, f in sorted(cal.calls.items())]
        sizes = ", ".join(human_bytes(s) for s in next(iter(cal.calls.values())).sizes)
        device["sources"]["step_calls"] = (
            f"{by}: wall time of one call of a compiled function fed from the client (its input made from numpy "
            "there, as the runtime's caller does), split over 1 .. N workers, each summing its shard, the sum "
            f"returned to the client (runtime.linkbench.step_call), feeds of {sizes}; least squares fit of "
            "t = fixed + bytes / feed bandwidth over the medians, weighted to relative error. The single device's "
            "and data parallelism's steps are such calls")
    if cal.client_cpu:
        device["client_cpu"] = [{"model": c.model, "input": list(c.input_shape), "batch_size": c.batch_size,
                                 "step_us": c.step * 1e6, "async_call_us": c.async_call * 1e6}
                                for c in cal.client_cpu]
        device["sources"]["client_cpu"] = (
            f"{by}: the client process's CPU time (time.process_time, every thread) per call of each profiled "
            "model's own step functions on the local workers (runtime.clientbench): the single device's step of "
            "batch_size images on worker 0 and async-dp-1ps's workers' steps of batch_size / 2, the median of "
            "the calls after two that trace and place them. The client runs on the workers' cores")
    if cal.profiles is not None:
        where, root = cal.profiles.resolve(), base.resolve() if base is not None else None
        device["profiles"] = str(where.relative_to(root) if root and where.is_relative_to(root) else where)
        device["profile_cores"] = cal.cores_per_device
        made = (f"made by `hgpart calibrate{' --quick' if cal.quick else ''} --profile` on {cal.date}: "
                f"{', '.join(cal.profiled)}, each as `hgpart profile --cores "
                f"{cal.cores_per_device}` makes it, in this calibration's pinned process"
                if cal.profiled else "the source checkout's measured profiles")
        device["sources"]["profiles"] = (f"{made}; a model with one made on {cal.cores_per_device} core(s) "
                                         f"(`hgpart profile --cores {cal.cores_per_device}`, "
                                         f"*_c{cal.cores_per_device}.json) is simulated from it instead of the FLOP "
                                         "rate")
    return device


def _links_entry(cal: Calibration, by: str) -> dict[str, Any]:
    """The document's ``links``: the fitted link between the workers and its measured all-reduce, if any."""
    links: dict[str, Any] = {}
    if cal.link is not None:
        sizes = ", ".join(human_bytes(s) for s in cal.link.sizes)
        if cal.eager_link is not None:
            how = (f"{by}: hops of a tensor between worker 0 and worker 1 inside one compiled function "
                   f"(open_local(2); runtime.linkbench), {cal.link_repeats} samples per size of {sizes}, each the "
                   "time of a function with N hops minus one with none, over N; least squares fit of "
                   "t = latency + bytes / bandwidth over the medians, weighted to relative error. The step "
                   "functions move feature maps so. "
                   f"Eager copies measured {cal.eager_link.bandwidth / 1e9:.3f} GB/s and "
                   f"{cal.eager_link.latency * 1e6:.1f} us")
        else:
            how = (f"{by}: eager tf.identity on worker 1 of a tensor on worker 0 (open_local(2)), "
                   f"{cal.link_repeats} copies per size of {sizes}, least squares fit of t = latency + "
                   "bytes / bandwidth over the medians, the client's dispatch cost taken off")
        links["intra_node"] = {
            "bandwidth_GBps": cal.link.bandwidth / 1e9,
            "latency_us": cal.link.latency * 1e6,
            "port_per": "device",
            "holds_devices": True,
            "sources": {"bandwidth_GBps": how, "latency_us": how + (
                f" (raw intercept {cal.link.intercept * 1e6:.1f} us, clipped at 0)" if cal.link.intercept < 0
                else ""),
                "holds_devices": "the local workers are CPU processes: TensorFlow's gRPC copies a tensor out of "
                                 "one worker and into the other on their own pinned cores, taking about half a "
                                 "core while it runs (benchmarks/results/step_breakdown/transfer_cores_probe.txt); "
                                 "the simulator holds both workers for the transfer"},
        }
        if cal.tensors is not None:
            pulls = cal.tensors
            links["intra_node"]["per_tensor_us"] = pulls.per_tensor * 1e6
            links["intra_node"]["sources"]["per_tensor_us"] = (
                f"{by}: a compiled function on worker 1 reading {', '.join(map(str, pulls.counts))} variables of "
                f"worker 0 ({human_bytes(pulls.nbytes)} in all), as an async data-parallel worker pulls a parameter "
                "server's, minus the same function summing them on worker 0 and sending the sum "
                f"(runtime.linkbench), {cal.link_repeats} samples each; slope of the least squares line over the "
                f"medians (intercept {pulls.intercept * 1e6:.1f} us): one function's send/receive pairs run at once, "
                "so each further tensor of a transfer costs this, not the latency")
        if cal.ring is not None:
            rc = cal.ring.cost
            pts = ", ".join(f"{human_bytes(b)} in {n}" for b, n in cal.ring.points)
            links["intra_node"]["allreduce"] = {
                "replicas": rc.replicas, "fixed_us": rc.fixed * 1e6, "bandwidth_GBps": rc.bandwidth / 1e9,
                "per_tensor_us": rc.per_tensor * 1e6,
                "sources": {"fit": f"{by}: the runtime's ring all-reduce (runtime.dataparallel.ring_allreduce) over "
                                   f"{rc.replicas} workers inside one compiled function (runtime.linkbench), a "
                                   "function that makes each replica's gradients and all-reduces them minus one "
                                   f"that only makes them, {cal.link_repeats} samples each of {pts} tensors per "
                                   "replica; non-negative least squares fit of t = fixed + bytes / bandwidth + "
                                   "tensors x per_tensor over the medians, weighted to relative error"},
            }
    return links


def human_bytes(n: int) -> str:
    """A byte count as a reader writes it: 4 KiB, 32 MiB, else plain bytes."""
    for unit, size in (("MiB", 2**20), ("KiB", 2**10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"
