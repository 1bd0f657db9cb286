"""Training strategies as jobs on the engine: model parallelism (async pipeline, sync micro-batches), single device,
sync data parallelism with a ring all-reduce, async data parallelism with one or distributed parameter servers.

Usage::

    wl = ModelParallel(tpl, devices, update_s, mode=Mode.ASYNC, inflight=2)
    run = run_jobs(Engine(), wl, jobs=12)       # JobRun: when each job ended and how many images it carried

A workload adds one *job* at a time (a training step, or one asynchronous worker's update) and says which slot
runs it. :func:`run_jobs` keeps ``wl.slots`` jobs in flight, as the runtime's step driver keeps one thread per slot
busy: whenever a job ends, its slot takes the next job. What a job is:

* model parallelism, async: one batch of ``B`` (forward, transfers, backward, each part's optimizer update); the
  slots share the job counter, so ``inflight`` batches are in flight;
* model parallelism, sync: ``inflight`` micro-batches of ``B / inflight`` flowing through together, then every
  part's update once their gradients are in; one slot;
* single: forward, backward, update of the whole model on device 0;
* sync DP (ring): every replica's forward and backward on ``B / N``, then a ring all-reduce of the gradient
  (``2 (N - 1)`` rounds, each sending one ``1 / N`` chunk to the next replica and waiting for the chunk from the
  previous one; or, where the cluster measured the runtime's all-reduce over ``N`` devices of this link, that
  many seconds on every replica at once), then every replica's update;
* async DP: worker ``w`` (slot ``w``) pulls the parameters it does not hold, computes ``B / N`` samples, pushes the
  gradients to their owners, who apply them; one server (device 0) or greedy shards by layer (distributed). A
  pull or push moves the shard's tensors in one function: the first pays the link's latency, each further one
  what the link's ``tensor_seconds`` says (their send/receive pairs run at once). With
  ``serial`` the workers' calls run one at a time, in turn (one slot), as a client with one step thread would run
  them; without it (hgpart's runtime: one step thread per worker) they overlap, taking turns only for the client's
  call and its work. A worker's call is a function spanning its own device and the servers it reads, and it starts
  only once the client has done that call's work (see :class:`ClientWork`).

Every job is one call of a step function by the runtime's client. With ``call_s`` > 0 it starts with a
:attr:`~hgpart.simulate.engine.TaskKind.CALL` task of that many seconds on the ``client`` resource, before any of
its work: the fixed cost of a call (dispatch, the feed, the loss fetched back) that no layer time contains. An async
data-parallel worker's call may cost differently from another's (``worker_call_s``: it spans other devices).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from hgpart.simulate.engine import Engine, Task, TaskKind
from hgpart.simulate.mpgraph import MPTemplate, add_batch

__all__ = ["INTERPRETER", "ClientWork", "Mode", "Devices", "Workload", "JobRun", "run_jobs", "ModelParallel",
           "SingleDevice", "RingDataParallel", "AsyncDataParallel", "greedy_shards", "ring_allreduce"]


class Mode(Enum):
    """``async``: batches in flight with stale weights; ``sync``: one update per step from micro-batches."""

    ASYNC = "async"
    SYNC = "sync"


class Devices(Protocol):
    """Where work runs and how data moves (a cluster with a part -> device map)."""

    def compute(self, device: int) -> str: ...

    def transfer(self, src: int, dst: int, nbytes: float) -> tuple[float, tuple[str, ...]]: ...

    def tensor_seconds(self, src: int, dst: int) -> float:
        """What each tensor beyond the first adds to a transfer of several tensors in one function."""
        ...


class Workload(Protocol):
    """Something :func:`run_jobs` can drive."""

    @property
    def slots(self) -> int:
        """How many jobs run at once."""
        ...

    def add_job(self, eng: Engine, job: int, slot: int) -> tuple[int, int]:
        """Add job ``job`` for ``slot``; (the id of its last task, images it trains on)."""
        ...


@dataclass
class JobRun:
    """What :func:`run_jobs` observed: per job, the time it ended and its images, in the order they ended."""

    ends: list[float] = field(default_factory=list)
    images: list[int] = field(default_factory=list)
    slots: int = 1

    def images_per_s(self) -> float:
        """Throughput after the first ``slots`` jobs (the pipeline filling); all jobs if there are no more."""
        w = self.slots if len(self.ends) > self.slots else 0
        t0 = self.ends[w - 1] if w else 0.0
        span = self.ends[-1] - t0
        return sum(self.images[w:]) / span if span > 0 else 0.0


class _Driver:
    """Hands out job indices to slots as their jobs end (the state :func:`run_jobs` keeps)."""

    def __init__(self, eng: Engine, wl: Workload, jobs: int) -> None:
        self.eng, self.wl, self.jobs = eng, wl, jobs
        self.next = 0
        self.out = JobRun(slots=wl.slots)

    def start(self, slot: int) -> None:
        if self.next >= self.jobs:
            return
        job, self.next = self.next, self.next + 1
        last, images = self.wl.add_job(self.eng, job, slot)
        self.eng.on_finish(last, lambda now: self.done(slot, images, now))

    def done(self, slot: int, images: int, now: float) -> None:
        self.out.ends.append(now)
        self.out.images.append(images)
        self.start(slot)


def run_jobs(eng: Engine, wl: Workload, *, jobs: int) -> JobRun:
    """Run ``jobs`` jobs of ``wl``, ``wl.slots`` at a time; see the module docstring."""
    drv = _Driver(eng, wl, jobs)
    for slot in range(min(wl.slots, jobs)):
        drv.start(slot)
    eng.run()
    return drv.out


def _update(eng: Engine, name: str, seconds: float, dev: int, res: str, job: int, deps: Sequence[int]) -> int:
    return eng.add(Task(name, TaskKind.UPDATE, seconds, (res,), device=dev, batch=job, deps=tuple(deps)))


def _mark(eng: Engine, name: str, job: int, deps: Sequence[int]) -> int:
    return eng.add(Task(name, TaskKind.MARK, 0.0, batch=job, deps=tuple(deps)))


#: the resource every step call holds while the client starts it
CLIENT = "client"
#: the client process's interpreter: held by the client's work of every call, so that two step threads' work takes
#: turns on it (Python runs one thread at a time)
INTERPRETER = "client interpreter"


@dataclass(frozen=True)
class ClientWork:
    """The client's CPU seconds per call where the client runs on the devices' own cores (local workers), and the
    cores it may run on: (resource, device) of each core of its node, a device of -1 for a core the workload does
    not use. Each call's work takes whichever of them is free first, preferring an unused core and leaving the
    calling device's own for last, as an idle core takes it on a real machine. It also holds the client's
    :data:`INTERPRETER`: the async data-parallel workers' step threads do their calls' work one at a time.

    The single device's and sync data parallelism's steps do not wait for it: their call's wall time is the
    measured step call (``call_s``), and their client's CPU only takes a core from the devices. An async
    data-parallel worker's call does wait for it (:class:`AsyncDataParallel`)."""

    step_s: float  # per call of a single device or sync data-parallel step
    async_call_s: float  # per call of an async data-parallel worker
    cores: tuple[tuple[str, int], ...]

    def add(self, eng: Engine, name: str, seconds: float, own: int, job: int, deps: Sequence[int]) -> int | None:
        """Add the client's work of one call of device ``own``'s step, ready when ``deps`` are; its task (None:
        no work)."""
        if seconds <= 0 or not self.cores:
            return None
        order = sorted(self.cores, key=lambda c: (c[1] >= 0, c[1] == own))
        return eng.add(Task(name, TaskKind.CLIENT, seconds, (INTERPRETER,), device=own, batch=job, deps=tuple(deps),
                            any_of=tuple(order)))


def _call(eng: Engine, name: str, seconds: float, device: int, job: int, deps: Sequence[int] = ()) -> tuple[int, ...]:
    """The call that starts job ``job`` once ``deps`` are done (nothing when calls are free and nothing is
    awaited): what its first tasks wait for."""
    if seconds <= 0 and not deps:
        return ()
    return (eng.add(Task(name, TaskKind.CALL, max(seconds, 0.0), (CLIENT,), device=device, batch=job,
                         deps=tuple(deps))),)


@dataclass
class ModelParallel:
    """A placement's parts on ``devices[p]``; ``update_s[p]`` is part p's optimizer update.

    ``steps_per_call`` N > 0: the runtime's compiled pipeline (:mod:`hgpart.runtime.multistep`). Jobs ``cN ..
    cN + N - 1`` are one call: one call task (``call_s``) that waits for every job of the previous call to end (a
    call applies its pending updates before it returns, so the window drains at every call), and the call's jobs
    start after it, ``inflight`` at a time. 0: every job is a call of its own.

    ``replicas`` R > 1 (sync mode only): model parallelism x data parallelism. Replica ``r`` runs the placement on
    devices ``r K .. r K + K - 1`` (``devices`` shifted by ``r K``) on its ``B / R`` share of the batch, as
    ``inflight`` micro-batches; then, for every part ``p``, a ring all-reduce of part p's gradient
    (``grad_bytes[p]``) among the R devices holding part ``p``; then every device's update.
    """

    tpl: MPTemplate
    devices: Sequence[int]
    where: Devices
    update_s: Sequence[float]
    mode: Mode
    inflight: int
    call_s: float = 0.0
    replicas: int = 1
    grad_bytes: Sequence[float] = ()
    steps_per_call: int = 0
    #: compiled and async: each part reads from another part only after the previous step's backward of the
    #: units that read so (the runtime's 1F1B :class:`~hgpart.runtime.partitioned.CrossGate`, within a call)
    gated: bool = False
    #: the compiled pipeline's calls so far: call index -> (its call task, the last task of each of its jobs)
    _calls: dict[int, tuple[tuple[int, ...], list[int]]] = field(default_factory=dict, repr=False)
    #: the gate of the next job: (its call, per part the tasks its cross-part reads wait for)
    _gate: tuple[int, dict[int, list[int]]] = field(default=(-1, {}), repr=False)
    #: the last job's backward of the template's fresh units: (its call, unit -> task)
    _fresh: tuple[int, dict[int, int]] = field(default=(-1, {}), repr=False)

    def __post_init__(self) -> None:
        if self.replicas > 1 and self.mode is not Mode.SYNC:
            raise ValueError("model x data parallelism is simulated in sync mode only")
        if self.replicas > 1 and len(self.grad_bytes) != self.tpl.k:
            raise ValueError("model x data parallelism needs every part's gradient bytes")

    @property
    def slots(self) -> int:
        return self.inflight if self.mode is Mode.ASYNC else 1

    def _placer(self, replica: int) -> Callable[[int], tuple[int, str]]:
        shift = replica * self.tpl.k

        def place(part: int) -> tuple[int, str]:
            d = self.devices[part] + shift
            return d, self.where.compute(d)

        return place

    def add_job(self, eng: Engine, job: int, slot: int) -> tuple[int, int]:
        micro = 1 if self.mode is Mode.ASYNC else self.inflight
        k = self.tpl.k
        back: dict[tuple[int, int], list[int]] = {}  # (replica, part) -> its backward tasks
        after = self._start(eng, job)
        # compiled async with steps overlapping: the loss part's fresh pieces read the weights the last step updated
        freshness = self.steps_per_call > 0 and self.mode is Mode.ASYNC and self.inflight > 1 and k > 1
        gating = self.gated and freshness
        call = job // max(1, self.steps_per_call)
        gate = self._gate[1] if gating and self._gate[0] == call else {}  # a call starts with no gate
        fresh_after = self._fresh[1] if freshness and self._fresh[0] == call else {}
        for r in range(self.replicas):
            place = self._placer(r)
            for m in range(micro):
                tag = (f" r{r}" if self.replicas > 1 else "") + f" b{job}" + (f".{m}" if micro > 1 else "")
                bt = add_batch(eng, self.tpl, place, self.where.transfer, batch=job, tag=tag, after=after,
                               gate=gate, fresh_after=fresh_after, micro=m)
                if gating:
                    self._gate = (call, bt.cross_backward)
                if freshness:
                    self._fresh = (call, {u: bt.backward[u] for u in self.tpl.fresh if bt.backward[u] >= 0})
                for p, ids in bt.backward_of_part.items():
                    back.setdefault((r, p), []).extend(ids)
        ups = []
        for p in range(k):
            devs = [self.devices[p] + r * k for r in range(self.replicas)]
            deps = [tuple(back.get((r, p), [])) for r in range(self.replicas)]
            if self.replicas > 1:  # every copy of part p waits for the sum of its R gradients
                marks = [_mark(eng, f"grads part {p} r{r} b{job}", job, deps[r]) for r in range(self.replicas)]
                deps = [(g,) for g in ring_allreduce(eng, self.where, devs, self.grad_bytes[p], marks, job,
                                                     tag=f"part {p} ")]
            for r, d in enumerate(devs):
                name = f"update part {p}" + (f" r{r}" if self.replicas > 1 else "") + f" b{job}"
                ups.append(_update(eng, name, self.update_s[p], d, self.where.compute(d), job, deps[r]))
        end = _mark(eng, f"step b{job}", job, ups)
        if self.steps_per_call > 0:
            self._calls[job // self.steps_per_call][1].append(end)
        return end, self.tpl.micro_batch * micro * self.replicas

    def _start(self, eng: Engine, job: int) -> tuple[int, ...]:
        """What job ``job``'s first tasks wait for: its own call, or (compiled) the call of its group of jobs."""
        if self.steps_per_call <= 0:
            return _call(eng, f"call b{job}", self.call_s, self.devices[0], job)
        if job == 0:  # a new run
            self._calls.clear()
            self._gate = (-1, {})
            self._fresh = (-1, {})
        c = job // self.steps_per_call
        if c not in self._calls:  # the first job of call c: the call waits for every job of call c - 1
            prev = self._calls.pop(c - 1, ((), []))[1]
            self._calls[c] = (_call(eng, f"call {c} (b{job}..)", self.call_s, self.devices[0], job, prev), [])
        return self._calls[c][0]


def ring_allreduce(eng: Engine, where: Devices, devices: Sequence[int], nbytes: float, got: Sequence[int], job: int,
                   *, tag: str = "") -> list[int]:
    """A ring all-reduce of ``nbytes`` over ``devices``: ``2 (n - 1)`` rounds, in each of which every device sends
    one ``1 / n`` chunk to the next and waits for the chunk from the previous one. ``got[i]``: the task device
    ``i`` waits for before its first send (its gradient is ready); returns, per device, the task after which it
    holds the sum."""
    n = len(devices)
    got = list(got)
    chunk = nbytes / n
    for r in range(2 * (n - 1)):
        phase = "reduce-scatter" if r < n - 1 else "all-gather"
        sent = []
        for i in range(n):
            j = (i + 1) % n
            a, b = devices[i], devices[j]
            seconds, ports = where.transfer(a, b, chunk)
            sent.append(eng.add(Task(f"{tag}{phase} {r} r{i}->r{j} b{job}", TaskKind.SEND, seconds, ports, device=a,
                                     peer=b, batch=job, deps=(got[i],), nbytes=chunk)))
        got = [sent[(i - 1) % n] for i in range(n)]
    return got


@dataclass
class SingleDevice:
    """The whole model on one device: forward, backward and update seconds of one batch."""

    forward_s: float
    backward_s: float
    update_s: float
    batch: int
    where: Devices
    slots: int = 1
    call_s: float = 0.0
    #: the runtime's compiled pipeline: one call per ``steps_per_call`` steps (0: one per step)
    steps_per_call: int = 0
    client: ClientWork | None = None  # the client's CPU work per call, where it shares the devices' cores

    def add_job(self, eng: Engine, job: int, slot: int) -> tuple[int, int]:
        res = self.where.compute(0)
        first = self.steps_per_call <= 0 or job % self.steps_per_call == 0
        if self.client is not None and first:
            self.client.add(eng, f"client b{job}", self.client.step_s, 0, job, ())
        after = _call(eng, f"call b{job}", self.call_s if first else 0.0, 0, job)
        f = eng.add(Task(f"fwd b{job}", TaskKind.COMPUTE, self.forward_s, (res,), device=0, batch=job, deps=after))
        b = eng.add(Task(f"bwd b{job}", TaskKind.COMPUTE, self.backward_s, (res,), device=0, batch=job, deps=(f,)))
        return _update(eng, f"update b{job}", self.update_s, 0, res, job, (b,)), self.batch


@dataclass
class RingDataParallel:
    """Sync DP on ``n`` replicas (devices 0..n-1): per replica forward/backward seconds of ``B / n`` samples."""

    n: int
    forward_s: float
    backward_s: float
    update_s: float
    grad_bytes: float
    batch: int
    where: Devices
    slots: int = 1
    call_s: float = 0.0
    #: seconds of the whole all-reduce where the cluster measured it (None: the ring's transfers, one by one)
    allreduce_s: float | None = None
    client: ClientWork | None = None  # the client's CPU work per call, where it shares the devices' cores

    def add_job(self, eng: Engine, job: int, slot: int) -> tuple[int, int]:
        n = self.n
        back = []
        if self.client is not None:
            self.client.add(eng, f"client b{job}", self.client.step_s, 0, job, ())
        after = _call(eng, f"call b{job}", self.call_s, 0, job)
        for i in range(n):
            res = self.where.compute(i)
            f = eng.add(Task(f"fwd r{i} b{job}", TaskKind.COMPUTE, self.forward_s, (res,), device=i, batch=job,
                             deps=after))
            back.append(eng.add(Task(f"bwd r{i} b{job}", TaskKind.COMPUTE, self.backward_s, (res,), device=i,
                                     batch=job, deps=(f,))))
        if self.allreduce_s is None:
            got = ring_allreduce(eng, self.where, list(range(n)), self.grad_bytes, back, job)
        else:  # the measured collective: every replica busy with it (its copies are on its own core) until it ends
            sends = [eng.add(Task(f"all-reduce r{i}->r{(i + 1) % n} b{job}", TaskKind.SEND, self.allreduce_s,
                                  (self.where.compute(i),), device=i, peer=(i + 1) % n, batch=job, deps=tuple(back),
                                  nbytes=self.grad_bytes * 2 * (n - 1) / n)) for i in range(n)]
            got = [_mark(eng, f"all-reduced b{job}", job, sends)] * n
        ups = [_update(eng, f"update r{i} b{job}", self.update_s, i, self.where.compute(i), job, (got[i],))
               for i in range(n)]
        return _mark(eng, f"step b{job}", job, ups), self.batch


def greedy_shards(sizes: Sequence[float], n: int) -> list[int]:
    """Owner of each size: largest first, to the owner with the fewest so far (the thesis's greedy distribution)."""
    load = [0.0] * n
    owner = [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        o = min(range(n), key=lambda d: (load[d], d))
        owner[i] = o
        load[o] += sizes[i]
    return owner


@dataclass
class AsyncDataParallel:
    """Async DP: ``n`` workers of ``B / n`` samples; ``shard_params[o]`` parameters live on device ``o``."""

    n: int
    forward_s: float
    backward_s: float
    shard_params: Sequence[float]
    shard_update_s: Sequence[float]
    worker_batch: int
    where: Devices
    dtype_bytes: int = 4
    call_s: float = 0.0
    serial: bool = False
    #: tensors (variables) each owner holds: a pull or push moves them in one function, each beyond the first
    #: adding the link's ``tensor_seconds``
    shard_tensors: Sequence[int] = ()
    #: seconds of each worker's call, where they differ (empty: ``call_s`` for every worker)
    worker_call_s: Sequence[float] = ()
    client: ClientWork | None = None  # the client's CPU work per call, where it shares the devices' cores

    @property
    def slots(self) -> int:
        return 1 if self.serial else self.n

    def add_job(self, eng: Engine, job: int, slot: int) -> tuple[int, int]:
        w = job % self.n if self.serial else slot
        res = self.where.compute(w)
        # the call starts once the client has done its work: a device trace of two workers shows both idle together
        # between their calls, which a client working beside them would not leave (docs/simulator.md)
        work = None if self.client is None else self.client.add(eng, f"client w{w} j{job}",
                                                                   self.client.async_call_s, w, job, ())
        after = _call(eng, f"call w{w} j{job}", self.worker_call_s[w] if self.worker_call_s else self.call_s, w, job,
                      () if work is None else (work,))
        owners = [o for o in range(self.n) if self.shard_params[o] > 0]
        pulls = [self._send(eng, f"pull p{o}->w{w} j{job}", o, w, o, job, after) for o in owners if o != w]
        f = eng.add(Task(f"fwd w{w} j{job}", TaskKind.COMPUTE, self.forward_s, (res,), device=w, batch=job,
                         deps=tuple(pulls) or after))
        b = eng.add(Task(f"bwd w{w} j{job}", TaskKind.COMPUTE, self.backward_s, (res,), device=w, batch=job,
                         deps=(f,)))
        ups = []
        for o in owners:
            push = (self._send(eng, f"push w{w}->p{o} j{job}", w, o, o, job, (b,)),) if o != w else (b,)
            ups.append(_update(eng, f"update p{o} from w{w} j{job}", self.shard_update_s[o], o,
                               self.where.compute(o), job, push))
        return _mark(eng, f"worker {w} j{job}", job, ups), self.worker_batch

    def _send(self, eng: Engine, name: str, src: int, dst: int, owner: int, job: int, deps: tuple[int, ...]) -> int:
        nbytes = self.shard_params[owner] * self.dtype_bytes
        seconds, ports = self.where.transfer(src, dst, nbytes)
        tensors = self.shard_tensors[owner] if self.shard_tensors else 1
        if tensors > 1:  # one transfer of the shard's bytes; each further tensor adds its own cost
            seconds += (tensors - 1) * self.where.tensor_seconds(src, dst)
        return eng.add(Task(name, TaskKind.SEND, seconds, ports, device=src, peer=dst, batch=job, deps=deps,
                            nbytes=nbytes))
