"""Simulate training a model with one strategy on a cluster: the public entry point of :mod:`hgpart.simulate`.

Usage::

    from hgpart.simulate import SimOptions, SimStrategy, simulate
    pl = load_placement("partitions/vgg16_coarse_k4.json")
    res = simulate(pl, load_cluster("thesis-cluster"), SimOptions(batch_size=32, inflight=4))
    res.step_s, res.images_per_s, res.epoch_s, res.memory[0].fits
    res.write_trace("sim_trace/")              # devices_trace.simulated.json, Chrome/Perfetto
    simulate(pl, cluster, SimOptions(batch_size=32, strategy=SimStrategy.SYNC_DP, devices=4))

The placement gives the model (its embedded layer graph) and, for model parallelism, the part of every filter;
part ``p`` runs on device ``p`` of the cluster. The data-parallel strategies and the single device use only the
model. Layer times come from the cluster's device (:mod:`hgpart.simulate.costs`), memory from
:mod:`hgpart.memory`. An epoch is ``ceil(images / B)`` steps at the steady-state step time plus the time the
first step takes beyond it (the pipeline filling).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from hgpart.cluster import Cluster, SplitCost
from hgpart.errors import BadOptionError, parse_enum
from hgpart.fileio import write_json
from hgpart.hypergraph import Hypergraph
from hgpart.layergraph import LayerGraph
from hgpart.memory import MemorySettings, Optimizer, PartMemory, part_memory
from hgpart.placement import STEPS_PER_CALL, Placement, default_inflight, inter_op_threads
from hgpart.simulate.costs import LayerTimes, layer_times, layer_update_seconds, worker_call_cost
from hgpart.simulate.engine import Engine, Task
from hgpart.simulate.mpgraph import MPTemplate, mp_template
from hgpart.simulate.timeline import DeviceTime, PathStep, chrome_trace, critical_path, device_times
from hgpart.simulate.workloads import (
    AsyncDataParallel,
    ClientWork,
    JobRun,
    Mode,
    ModelParallel,
    RingDataParallel,
    SingleDevice,
    Workload,
    greedy_shards,
    run_jobs,
)

__all__ = ["SimPipeline", "SimStrategy", "SimOptions", "SimResult", "DeviceMemory", "ClusterDevices", "simulate",
           "model_memory_settings", "TRACE_NAME"]

TRACE_NAME = "devices_trace.simulated.json"
DTYPE_BYTES = 4
#: jobs simulated of asynchronous data parallelism: its workers' calls, pulls, pushes and the client's turns fall
#: into a repeating pattern only after tens of jobs, and eight overstated its throughput against that pattern
#: (``benchmarks/results/simulator_validation/2026-12-06-eve/README.md``)
ASYNC_DP_JOBS = 64


class SimPipeline(Enum):
    """How the runtime executes async model parallelism (``hgpart train --pipeline``).

    ``stages``: one function per pipeline stage, so batches in flight overlap on the devices (the simulator's
    pipeline). ``graph``: one multi-device function per step (async, and sync: there the micro-batches of the one
    call run their ops at once on each worker's inter-op threads, sharing its cores, so they advance together
    instead of as a pipeline); TensorFlow runs two calls of it one after the other on
    the workers (``benchmarks/results/step_breakdown/overlap_probe.txt``), so however many batches are queued,
    one is on the devices at a time: the parts of one batch still overlap where its dependencies allow. The
    runtime's asynchronous data parallelism is not one function: each worker has its own, called from its own
    thread, and those calls overlap on the devices whatever ``pipeline`` says (the runs that once looked like
    turn-taking were slowed by garbage collections in a step thread, ``benchmarks/results/gc_pauses/``). On small
    models they overlap only in part: each call also costs the client CPU on the workers' own cores, which the
    cluster's ``client_cpu`` charges where it was measured (:class:`~hgpart.simulate.workloads.ClientWork`).
    ``compiled``: ``steps_per_call`` steps per call
    (:mod:`hgpart.runtime.multistep`): within a call its batches in flight overlap as with ``stages``; a call
    waits for the previous call's steps (the window drains at every call) and costs one call; sync micro-batches
    run one after another on each worker (a device trace of minivgg's layer-wise sync call shows the second
    stage's first micro-batch beside the first stage's second), so they pipeline as with ``stages``. The single
    device runs one call per ``steps_per_call`` steps.
    """

    STAGES = "stages"
    GRAPH = "graph"
    COMPILED = "compiled"

    @staticmethod
    def parse(value: str | SimPipeline, *, where: str = "--pipeline") -> SimPipeline:
        return parse_enum(SimPipeline, value, what="pipeline", where=where)


class SimStrategy(Enum):
    """What to simulate: the placement's model parallelism, or a baseline on the placement's model."""

    MODEL = "model"
    SINGLE = "single"
    SYNC_DP = "sync-dp"
    ASYNC_DP_1PS = "async-dp-1ps"
    ASYNC_DP_DPS = "async-dp-dps"

    @staticmethod
    def parse(value: str | SimStrategy, *, where: str = "--strategy") -> SimStrategy:
        return parse_enum(SimStrategy, value, what="strategy", where=where)


@dataclass(frozen=True)
class SimOptions:
    """How to simulate: batch size (0: the placement's), mode and batches in flight (0: the runtime's default,
    :func:`_in_flight`), images per epoch."""

    batch_size: int = 0
    strategy: SimStrategy = SimStrategy.MODEL
    mode: Mode = Mode.ASYNC
    inflight: int = 0
    devices: int = 0  # data parallelism: replicas (0: the placement's K)
    optimizer: str = "adam"
    images: int = 10_240
    jobs: int = 0  # jobs to simulate (0: enough for a steady state)
    pipeline: SimPipeline = SimPipeline.STAGES  # async MP (and async DP): overlapping calls or one at a time
    steps_per_call: int = STEPS_PER_CALL  # pipeline COMPILED: training steps per call
    replicas: int = 1  # model parallelism x data parallelism (sync mode): copies of the placement, K devices each


@dataclass(frozen=True)
class DeviceMemory:
    """Bytes a device holds against its capacity (the breakdown of :class:`hgpart.memory.PartMemory`)."""

    device: int
    params: float
    gradients: float
    optimizer: float
    activations: float
    received: float
    capacity: float

    @property
    def total(self) -> float:
        return self.params + self.gradients + self.optimizer + self.activations + self.received

    @property
    def fits(self) -> bool:
        return self.total <= self.capacity

    @staticmethod
    def of(device: int, pm: PartMemory, capacity: float, *, optimizer: float | None = None) -> DeviceMemory:
        opt = pm.optimizer if optimizer is None else optimizer
        return DeviceMemory(device, pm.params, pm.gradients, opt, pm.activations, pm.received, capacity)


@dataclass
class SimResult:
    """A simulated run: throughput, time per epoch, per-device time and memory, critical path."""

    strategy: SimStrategy
    mode: Mode
    cluster: str
    model: str
    batch_size: int
    inflight: int
    devices: list[str]
    step_s: float
    images_per_s: float
    epoch_s: float
    images: int
    jobs: int
    times: list[DeviceTime]
    memory: list[DeviceMemory]
    path: list[PathStep]
    compute_source: str
    node_of: list[int] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list, repr=False)
    replicas: int = 1  # model x data parallelism: copies of the placement

    @property
    def fits(self) -> bool:
        return all(m.fits for m in self.memory)

    def path_seconds(self) -> dict[str, float]:
        """Seconds of the critical path by task kind (compute, send, update)."""
        out: dict[str, float] = {}
        for s in self.path:
            out[s.kind] = out.get(s.kind, 0.0) + s.end_s - s.start_s
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy.value, "mode": self.mode.value, "cluster": self.cluster,
                "model": self.model, "batch_size": self.batch_size, "inflight": self.inflight,
                "replicas": self.replicas,
                "devices": self.devices, "step_s": self.step_s, "images_per_s": self.images_per_s,
                "epoch_s": self.epoch_s, "images": self.images, "jobs": self.jobs,
                "times": [t.to_dict() for t in self.times],
                "memory": [{**m.__dict__, "total": m.total, "fits": m.fits} for m in self.memory],
                "critical_path_seconds": self.path_seconds(),
                "critical_path": [dataclasses.asdict(step) for step in self.path],
                "compute_source": self.compute_source}

    def write_trace(self, folder: str | Path) -> Path:
        """Write ``folder/devices_trace.simulated.json`` (the runtime's trace format)."""
        meta = {"strategy": self.strategy.value, "mode": self.mode.value, "cluster": self.cluster,
                "model": self.model, "batch_size": self.batch_size, "step_s": self.step_s}
        trace = chrome_trace(self.tasks, self.devices, self.times, meta)
        return write_json(Path(folder) / TRACE_NAME, trace, indent=None, what="simulated trace")


@dataclass(frozen=True)
class ClusterDevices:
    """The :class:`hgpart.simulate.workloads.Devices` of a cluster: one compute resource per device, routed ports."""

    cluster: Cluster

    def compute(self, device: int) -> str:
        return f"dev{device}"

    def transfer(self, src: int, dst: int, nbytes: float) -> tuple[float, tuple[str, ...]]:
        route = self.cluster.route(src, dst)
        held = (self.compute(src), self.compute(dst)) if route.link.holds_devices else ()
        return route.seconds(nbytes), route.ports + held

    def tensor_seconds(self, src: int, dst: int) -> float:
        return self.cluster.route(src, dst).link.tensor_seconds


def _check(n: int, cluster: Cluster, what: str) -> None:
    if n > cluster.num_devices:
        raise BadOptionError(f"{what} needs {n} devices, cluster {cluster.name} has {cluster.num_devices}",
                             where="--cluster", fix="use a smaller K or a larger cluster")


@dataclass(frozen=True)
class _Built:
    """A strategy made into a workload: its memory per device, batches in flight, and where its times came from."""

    workload: Workload
    memory: list[DeviceMemory]
    inflight: int
    source: str
    #: the engine's processor-sharing resources: a device's compute, by how many tasks it runs at once
    shared: dict[str, int] = field(default_factory=dict)
    #: the fewest jobs that reach a steady state (0: the default rule of :func:`simulate`)
    min_jobs: int = 0


def model_memory_settings(opts: SimOptions, batch: int, pl: Placement) -> MemorySettings:
    """What a device of model parallelism holds activations for: its replica's share ``B / R`` of the batch, with
    the batches in flight in async mode (:func:`_in_flight`) and one batch's micro-batches in sync mode."""
    kept = _in_flight(opts, pl) if opts.mode is Mode.ASYNC else 1
    return MemorySettings(batch_size=batch // max(1, opts.replicas), inflight=kept,
                          optimizer=Optimizer.parse(opts.optimizer))


def _in_flight(opts: SimOptions, pl: Placement) -> int:
    """Batches in flight (async) or micro-batches (sync), as the runtime runs them: ``--inflight``; by default K
    micro-batches, and async one batch per pipeline stage (:meth:`Placement.pipeline_stages`), at most K + 1: the
    runtime's default for a stage pipeline, and K + 1 for the compiled one (:func:`hgpart.placement.default_inflight`).
    Async with ``pipeline=graph`` has one, as calls of one multi-device function do not overlap (SimPipeline)."""
    if opts.mode is Mode.ASYNC and opts.pipeline is SimPipeline.GRAPH:
        return 1
    if opts.inflight:
        return opts.inflight
    if opts.mode is not Mode.ASYNC:
        return pl.k
    return default_inflight(pl.k, pl.pipeline_stages(), compiled=opts.pipeline is SimPipeline.COMPILED)


def _per_call(opts: SimOptions) -> int:
    """Steps per call of the compiled pipeline; 0 (a call per step) for the others."""
    if opts.pipeline is not SimPipeline.COMPILED:
        return 0
    if opts.steps_per_call < 1:
        raise BadOptionError(f"{opts.steps_per_call} steps per call requested", where="--steps-per-call",
                             option="--steps-per-call", value=opts.steps_per_call, fix="pass a number >= 1")
    return opts.steps_per_call


def _model_parallel(pl: Placement, cluster: Cluster, opts: SimOptions, batch: int, times: LayerTimes) -> _Built:
    k, n, reps = pl.k, _in_flight(opts, pl), opts.replicas
    if reps < 1:
        raise BadOptionError(f"replicas must be >= 1, not {reps}", where="--replicas", option="--replicas",
                             value=reps, fix="use 1 (model parallelism alone) or more")
    if reps > 1 and opts.mode is not Mode.SYNC:
        raise BadOptionError("model x data parallelism (--replicas > 1) runs in sync mode only", where="--replicas",
                             option="--replicas", value=reps, fix="add --mode sync, or use --replicas 1")
    _check(k * reps, cluster, f"a {k}-part placement" + (f" x {reps} replicas" if reps > 1 else ""))
    if batch % reps:
        raise BadOptionError(f"batch size {batch} is not divisible by {reps} replicas", where="--batch-size",
                             option="--batch-size", value=batch, fix="use a multiple of --replicas")
    share = batch // reps  # each replica's part of the mini-batch
    if opts.mode is Mode.SYNC and share % n:
        raise BadOptionError(f"batch size {share} is not divisible into {n} micro-batches", where="--inflight",
                             option="--inflight", value=n, fix="use a batch size divisible by --inflight")
    micro = share if opts.mode is Mode.ASYNC else share // n
    if micro != times.batch:  # a layer's time per sample depends on the batch it runs at: the profile nearest it
        times = layer_times(pl.graph, cluster.device, batch=micro)
    split = _split_cost(pl, cluster, share, n if opts.mode is Mode.SYNC else 1)
    if split is not None:
        times = times.scaled(split.factor, f"x{split.factor:.3f} for the split op structure (measured by "
                                           f"`hgpart calibrate-split` at B={split.batch_size}, "
                                           f"{split.micro_batches} micro-batch(es))")
    times = _with_call_cost(pl.graph, cluster, times, steps=share // micro, per_call=max(_per_call(opts), 1))
    together = opts.mode is Mode.SYNC and opts.pipeline is SimPipeline.GRAPH
    # graph + sync: the micro-batches' ops, all in one call, share each worker's cores and advance together
    # (docs/simulator.md), so they run as one batch of B at the micro-batch's cost per sample; the compiled
    # pipeline's sync micro-batches pipeline instead (see SimPipeline)
    tpl = mp_template(pl, times, micro_batch=share if together else micro)
    ups = _part_updates(tpl, pl.graph, layer_update_seconds(pl.graph, times, cluster.device, opts.optimizer))
    # a call feeds its steps' images from the client to the worker that holds the input, as the single device's
    # call feeds its batch: the measured step call of that many bytes to one worker
    per_call = _per_call(opts)
    feed = _feed_bytes(pl.graph, batch) * max(per_call, 1)
    wl = ModelParallel(tpl, list(range(k)), ClusterDevices(cluster), ups, opts.mode, 1 if together else n,
                       call_s=cluster.device.call_seconds(feed, 1), replicas=reps,
                       grad_bytes=[p * DTYPE_BYTES for p in tpl.part_params], steps_per_call=per_call,
                       gated=True)
    settings = model_memory_settings(opts, batch, pl)
    mem = part_memory(tpl.hg, tpl.parts, k, settings) if tpl.hg is not None and tpl.parts is not None else []
    cap = cluster.device.memory_bytes
    # a CPU worker runs as many of a part's ready tasks at once as the runtime gives it inter-op threads
    threads = inter_op_threads(k, opts.inflight or None)
    shared = {wl.where.compute(d): threads for d in range(k * reps)} if cluster.device.ops_share_cores else {}
    return _Built(wl, [DeviceMemory.of(r * k + p, m, cap) for r in range(reps) for p, m in enumerate(mem)], n,
                  times.source, shared)


def _with_call_cost(graph: LayerGraph, cluster: Cluster, times: LayerTimes, *, steps: int, per_call: int
                    ) -> LayerTimes:
    """``times`` with the device's measured cost of a step call beyond its layers
    (:func:`hgpart.simulate.costs.worker_call_cost`) spread over them: a device's layers of one step (``steps``
    x ``times``, its micro-batches) take that cost longer per call of ``per_call`` steps, shared out by each
    layer's time (a model-parallel part pays its share of the layers). Unchanged where it was not measured."""
    cost = worker_call_cost(graph, cluster.device, times.batch * steps)
    step = times.total() * steps
    if cost is None or cost.seconds <= 0 or step <= 0:
        return times
    factor = 1.0 + cost.seconds / per_call / step
    return times.scaled(factor, f"x{factor:.3f}: {1000 * cost.seconds:.2f} ms per call of {per_call} step(s) "
                                f"beyond the layers (the unsplit step of {cost.whole_ms:.2f} ms at "
                                f"B={cost.batch_size}, `hgpart calibrate-split`)")


def _split_cost(pl: Placement, cluster: Cluster, batch: int, micro: int) -> SplitCost | None:
    """The cluster's measured cost of ``pl``'s split op structure at ``micro`` micro-batches and the batch nearest
    ``batch`` (None: not measured, or the placement does not split anything)."""
    if not cluster.device.split_costs or pl.k < 2:
        return None
    return cluster.device.split_cost(pl.content_hash(), batch, micro)


def _part_updates(tpl: MPTemplate, graph: LayerGraph, per_layer: dict[str, float]) -> list[float]:
    """Seconds of each part's update: every layer's update shared out by the parameters each part holds."""
    assert tpl.hg is not None and tpl.parts is not None  # mp_template builds both
    params = {layer.name: layer.params for layer in graph.layers}
    rate = np.zeros(tpl.hg.num_vertices)
    for b in tpl.hg.blocks:
        if params.get(b.layer):
            rate[b.start : b.stop] = per_layer[b.layer] / params[b.layer]
    return [float(s) for s in np.bincount(tpl.parts, weights=tpl.hg.vertex_params * rate, minlength=tpl.k)]


def _replica_memory(pl: Placement, batch: int, optimizer: str, hg: Hypergraph | None) -> PartMemory:
    hg = hg if hg is not None else pl.hypergraph()
    settings = MemorySettings(batch_size=batch, inflight=1, optimizer=Optimizer.parse(optimizer))
    return part_memory(hg, np.zeros(hg.num_vertices, dtype=np.int64), 1, settings)[0]


def _data_parallel(pl: Placement, cluster: Cluster, opts: SimOptions, batch: int, times: LayerTimes,
                   hg: Hypergraph | None) -> _Built:
    graph = pl.graph
    n = 1 if opts.strategy is SimStrategy.SINGLE else opts.devices or pl.k
    _check(n, cluster, f"{opts.strategy.value} on {n} devices")
    if batch % n:
        raise BadOptionError(f"batch size {batch} is not divisible by {n} replicas", where="--batch-size",
                             option="--batch-size", value=batch, fix="use a multiple of the device count")
    share = batch // n
    if share != times.batch:  # each replica runs at B / N: the profile nearest that batch
        times = layer_times(graph, cluster.device, batch=share)
    single_calls = _per_call(opts) if opts.strategy is SimStrategy.SINGLE else 0
    times = _with_call_cost(graph, cluster, times, steps=1, per_call=max(single_calls, 1))
    fwd = sum(times.forward.values()) * share / times.batch
    bwd = sum(times.backward.values()) * share / times.batch
    params = float(sum(layer.params for layer in graph.layers))
    where = ClusterDevices(cluster)
    cap = cluster.device.memory_bytes
    rep = _replica_memory(pl, share, opts.optimizer, hg)
    per_layer = layer_update_seconds(graph, times, cluster.device, opts.optimizer)
    full_update = sum(per_layer.values())
    dev = cluster.device
    client = _client_work(cluster, where, graph, batch, n)
    if opts.strategy is SimStrategy.SINGLE:
        per_call = _per_call(opts)  # the compiled pipeline's calls read their batches on the worker
        call = dev.call_seconds(_feed_bytes(graph, batch), 1) if per_call == 0 else dev.call_overhead
        return _Built(SingleDevice(fwd, bwd, full_update, batch, where, call_s=call, steps_per_call=per_call,
                                   client=client if per_call == 0 else None),
                      [DeviceMemory.of(0, rep, cap)], 1, times.source)
    if opts.strategy is SimStrategy.SYNC_DP:
        wl = RingDataParallel(n, fwd, bwd, full_update, params * DTYPE_BYTES, batch, where,
                              call_s=dev.call_seconds(_feed_bytes(graph, batch), n),
                              allreduce_s=_measured_allreduce(cluster, n, params * DTYPE_BYTES, _tensors(graph)),
                              client=client)
        return _Built(wl, [DeviceMemory.of(d, rep, cap) for d in range(n)], 1, times.source)
    shards, ups, tensors = _shards(graph, n, opts.strategy, per_layer)
    slots = Optimizer.parse(opts.optimizer).slots
    mem = [DeviceMemory.of(d, rep, cap, optimizer=slots * shards[d] * DTYPE_BYTES) for d in range(n)]
    # a worker's call spans its own device and every other parameter server it reads
    spans = [len({w} | {o for o in range(n) if shards[o] > 0}) for w in range(n)]
    calls = [dev.call_seconds(_feed_bytes(graph, share), k) for k in spans]
    return _Built(AsyncDataParallel(n, fwd, bwd, shards, ups, share, where, call_s=dev.call_overhead,
                                    shard_tensors=tensors, worker_call_s=calls, client=client),
                  mem, n, times.source, min_jobs=ASYNC_DP_JOBS)


def _client_work(cluster: Cluster, where: ClusterDevices, graph: LayerGraph, batch: int, used: int
                 ) -> ClientWork | None:
    """The client's CPU work per call where the cluster measured it for this model (local workers, whose client
    runs on their cores), on the cores of node 0: the ``used`` devices' and the node's others as spare cores."""
    got = cluster.device.client_seconds(graph.name, graph.input_shape, batch)
    if got is None:
        return None
    cores = tuple((where.compute(d), d if d < used else -1) for d in range(cluster.devices_per_node))
    return ClientWork(got.step, got.async_call, cores)


def _feed_bytes(graph: LayerGraph, batch: int) -> int:
    """Bytes a step call feeds from the client: ``batch`` float32 images and their int32 labels."""
    return batch * (int(np.prod(graph.input_shape)) + 1) * DTYPE_BYTES


def _tensors(graph: LayerGraph) -> int:
    """How many variables the model's weighted layers hold (a replica's gradient tensors)."""
    return sum(max(1, layer.definition.variables(layer)) for layer in graph.layers if layer.params)


def _measured_allreduce(cluster: Cluster, n: int, nbytes: float, tensors: int) -> float | None:
    """Seconds of the all-reduce the cluster measured over ``n`` devices of one node (None: not measured there)."""
    ring = cluster.intra.allreduce if cluster.intra is not None else None
    if ring is None or ring.replicas != n or n > cluster.devices_per_node:
        return None
    return ring.seconds(nbytes, tensors)


def _shards(graph: LayerGraph, n: int, strategy: SimStrategy, per_layer: dict[str, float]
            ) -> tuple[list[float], list[float], list[int]]:
    """Parameters held by each device acting as a parameter server (layer by layer, greedily for distributed),
    the seconds of its update of them, and how many tensors they are."""
    weighted = [layer for layer in graph.layers if layer.params]
    sizes = [float(layer.params) for layer in weighted]
    out, ups, tensors = [0.0] * n, [0.0] * n, [0] * n
    owners = [0] * len(sizes) if strategy is SimStrategy.ASYNC_DP_1PS else greedy_shards(sizes, n)
    for layer, size, o in zip(weighted, sizes, owners, strict=True):
        out[o] += size
        ups[o] += per_layer[layer.name]
        tensors[o] += max(1, layer.definition.variables(layer))
    return out, ups, tensors


def simulate(pl: Placement, cluster: Cluster, opts: SimOptions, *, hypergraph: Hypergraph | None = None
             ) -> SimResult:
    """Simulate ``opts.strategy`` for the model of ``pl`` on ``cluster``; see the module docstring.

    ``hypergraph``: ``pl.hypergraph()`` when the caller has it already (the data-parallel strategies read the
    memory of a whole replica from it; building VGG16's takes tens of seconds).
    """
    batch = opts.batch_size or pl.batch_size
    if batch < 1 or opts.inflight < 0 or opts.images < 1:
        raise BadOptionError("batch size, in-flight count and images must be positive", where="simulate",
                             value=(batch, opts.inflight, opts.images))
    times = layer_times(pl.graph, cluster.device, batch=batch)
    if opts.strategy is SimStrategy.MODEL:
        built = _model_parallel(pl, cluster, opts, batch, times)
    else:
        built = _data_parallel(pl, cluster, opts, batch, times, hypergraph)
    wl, mem, inflight = built.workload, built.memory, built.inflight
    # enough for a steady state; the compiled pipeline's calls drain the window, so at least four calls
    jobs = opts.jobs or max(8, 4 * wl.slots, 4 * _per_call(opts), built.min_jobs)
    # a worker's shared core runs one (micro-)batch's ready ops at once; another batch's wait (docs/simulator.md)
    eng = Engine(shared=built.shared, one_flow=bool(built.shared))
    run = run_jobs(eng, wl, jobs=jobs)
    ips = run.images_per_s()
    step = batch / ips if ips > 0 else math.inf
    used = len(mem)
    return SimResult(
        strategy=opts.strategy, mode=opts.mode if opts.strategy is SimStrategy.MODEL else _dp_mode(opts.strategy),
        cluster=cluster.name, model=pl.graph.name, batch_size=batch, inflight=inflight,
        devices=[f"{cluster.device.kind} {d}" for d in range(used)], step_s=step, images_per_s=ips,
        epoch_s=_epoch(run, opts.images, batch, step), images=opts.images, jobs=jobs,
        times=device_times(eng.tasks, used), memory=mem, path=critical_path(eng.tasks),
        compute_source=built.source, node_of=[cluster.node_of(d) for d in range(used)], tasks=eng.tasks,
        replicas=opts.replicas if opts.strategy is SimStrategy.MODEL else 1)


def _dp_mode(strategy: SimStrategy) -> Mode:
    return Mode.ASYNC if strategy in (SimStrategy.ASYNC_DP_1PS, SimStrategy.ASYNC_DP_DPS) else Mode.SYNC


def _epoch(run: JobRun, images: int, batch: int, step: float) -> float:
    """``ceil(images / B)`` steady steps plus the fill: how much longer than a steady step the first job took
    to end (per image)."""
    steps = math.ceil(images / batch)
    first = run.ends[0] if run.ends else 0.0
    fill = max(0.0, first - step * run.images[0] / batch) if run.ends else 0.0
    return steps * step + fill
