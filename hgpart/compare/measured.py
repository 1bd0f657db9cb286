"""The measured comparison: train one model under every strategy on the same K devices and report time and convergence.

Usage::

    from hgpart.runtime import open_devices
    ds = open_devices("logical", 2)              # before anything initialises TensorFlow
    from hgpart.compare.measured import run_measured, write_measured
    cmp = run_measured("minivgg", input_shape=(32, 32, 3), device_set=ds, batch_sizes=[16, 32, 64], epochs=3)
    write_measured(cmp, "reports/minivgg_measured")

Strategies (:data:`METHODS`, the names of :data:`hgpart.runtime.strategy.STRATEGIES`; each run reads its
:class:`~hgpart.runtime.strategy.Strategy`'s fields), all with the same data order, initial weights (seed),
optimizer and global batch size:

* ``single`` - one device; ``layerwise-*``, ``coarse-*``, ``fine-*`` - model parallelism from a placement compiled
  on the fly (layer-wise backend; coarse/fine hypergraph with the chosen backend) with the hgpart runtime, in its
  ``async`` pipeline (the runtime's default batches in flight, ``MeasuredRun.inflight``) and ``sync`` (K
  micro-batches, one update) modes, its steps run as ``hgpart train`` runs them (``pipeline``, default ``auto``:
  as pipeline stages or one function per step, chosen by :func:`hgpart.runtime.pipechoice.choose_pipeline` after
  the warm-up; ``MeasuredRun.pipeline`` says which and why);
* ``sync-dp``, ``sync-dp-mirrored``, ``async-dp-1ps``, ``async-dp-dps`` - :mod:`hgpart.runtime.dataparallel`.

Data: scikit-learn's digits (1,797 images, 10 classes) resized to the model input; an epoch is
``floor(1797 / B)`` global steps over a per-epoch permutation (seeded; the same for every strategy). Accuracy is
*training* accuracy on a fixed subset of ``eval_n`` training images (the thesis's Figure 5.2 also reports training
accuracy), measured ``evals_per_epoch`` times per epoch with the clock stopped: the pipeline drains at each
evaluation point. Wall time counts training only. Every strategy first runs one untimed warm-up step (its updates
are undone).

A strategy that cannot run (a batch size not divisible by K, MirroredStrategy on worker processes, a partitioner
or runtime error) is recorded with status ``failed`` and the reason; the comparison goes on.

Utilisation: ``cpu_cores`` is this process's CPU time over wall time during training (2.0 = both cores busy;
on worker processes the workers' CPU is not included); ``slot_busy`` is the share of wall time each driver slot
(an async pipeline slot, an async-DP worker) had a step in flight; a run through the stage pipeline has one
entry, the time its batches were in flight summed over them and over wall time (so it may exceed 1).
``compile_seconds`` includes, for model parallelism, ``--pipeline auto``'s timing of both ways on a short step.
The model-parallel step is the one ``hgpart train`` runs (:class:`hgpart.runtime.evaluation.MeteredStep`: the
loss and the batch's accuracy come back from each call).

Per-device utilisation (``trace_dir`` given): after the timed run and its last evaluation (so the curves and timings
are untouched), ``max(2, K)`` more global steps of the same step functions and driver (a run through the stages:
of its whole-step function, as ``hgpart train --trace`` traces; its ``trace_note`` says so) run under TensorFlow's
profiler (:func:`hgpart.runtime.devtrace.capture_device_trace`, as ``train(..., trace=DIR)`` does for the
model-parallel runtime; the data-parallel step graphs are mapped to devices by
:func:`hgpart.runtime.dataparallel.node_devices`). ``device_busy[p]`` is the union of device p's op intervals over
the traced wall time, in (0, 1] for a device that ran anything; the Chrome/Perfetto view is
``trace_dir/<method>_bs<B>/devices_trace.json`` (the raw profiler files are deleted). On logical devices the
devices share one thread pool, so the fractions show how the work was spread over the device labels (their sum can
exceed the cores); on worker processes they are each process's real busy time. A trace that fails leaves
``device_busy`` empty and says why in ``trace_note``; the run itself still counts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hgpart.errors import BadFileError, BadOptionError, HgpartError
from hgpart.placement import STEPS_PER_CALL
from hgpart.runtime.heap import quiet_heap
from hgpart.runtime.pipeline import StepRecord
from hgpart.runtime.strategy import STRATEGIES, Parallelism, PlacementKind, Strategy

__all__ = ["METHODS", "MP_METHODS", "DP_METHODS", "CurvePoint", "MeasuredRun", "MeasuredComparison", "run_measured",
           "REFERENCE_METHOD"]

#: the strategies' names (:data:`hgpart.runtime.strategy.STRATEGIES`), as the CLI and the JSON spell them
METHODS = tuple(STRATEGIES)
MP_METHODS = tuple(n for n, s in STRATEGIES.items() if s.parallelism is Parallelism.MODEL)
DP_METHODS = tuple(n for n, s in STRATEGIES.items() if s.parallelism is Parallelism.DATA)
#: the hypergraph model parallelism the ratios are taken against (the thesis's choice, §5.2.2)
REFERENCE_METHOD = "coarse-async"


@dataclass(frozen=True)
class CurvePoint:
    """One evaluation point of a run (the clock stopped): where training got to and how well it does."""

    wall_s: float  # training wall time so far
    step: int  # global steps so far
    epoch: float
    train_loss: float | None  # mean loss of the steps since the previous point (None at step 0)
    accuracy: float  # on the fixed evaluation subset
    loss: float  # on the fixed evaluation subset


@dataclass
class MeasuredRun:
    """One strategy at one batch size."""

    method: str
    batch_size: int
    status: str  # "ok" | "failed"
    reason: str = ""
    steps: int = 0
    epochs: float = 0.0
    train_seconds: float = 0.0
    epoch_seconds: float | None = None
    images_per_s: float | None = None
    compile_seconds: float = 0.0
    comm_bytes_per_step: float | None = None
    feed_bytes_per_step: float | None = None
    bytes_source: str = ""
    time_to_target_s: float | None = None
    epochs_to_target: float | None = None
    final_accuracy: float | None = None
    final_loss: float | None = None
    cpu_cores: float | None = None
    slot_busy: list[float] = field(default_factory=list)
    device_busy: list[float] = field(default_factory=list)  # per device, in the traced steps; [] if not traced
    trace_path: str = ""  # devices_trace.json of those steps
    trace_note: str = ""  # why there is no trace, or what it covered
    placement_path: str = ""  # the placement a model-parallel run trained (run_measured's placement_dir given)
    #: model parallelism: how its steps ran (``PipelineChoice.describe()``: stages or one function, and why)
    pipeline: str = ""
    #: model parallelism: async batches in flight (1 in sync mode; 0: not recorded, runs before it ran K)
    inflight: int = 0
    curve: list[CurvePoint] = field(default_factory=list)
    notes: str = ""


@dataclass
class MeasuredComparison:
    """Everything a measured comparison produced (see :func:`run_measured`)."""

    model: str
    spec: str
    input_shape: list[int]
    num_classes: int
    k: int
    devices: str
    batch_sizes: list[int]
    epochs: float
    target: float
    optimizer: str
    lr: float
    seed: int
    eval_n: int
    images: int
    profile: str
    backend: str
    methods: list[str]
    runs: list[MeasuredRun] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    #: ``--pipeline`` of the model-parallel runs (comparisons written before it existed ran ``graph``)
    pipeline: str = "graph"

    def run(self, method: str, batch_size: int) -> MeasuredRun | None:
        for r in self.runs:
            if r.method == method and r.batch_size == batch_size:
                return r
        return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> MeasuredComparison:
        """Read back ``measured.json`` (e.g. to re-render a report without re-training)."""
        try:
            runs = [MeasuredRun(**{**r, "curve": [CurvePoint(**p) for p in r.get("curve", [])]}) for r in d["runs"]]
            return MeasuredComparison(**{**d, "runs": runs})
        except (KeyError, TypeError) as exc:
            raise BadFileError(f"not a measured comparison: {exc}", where="measured.json",
                               fix="pass a measured.json written by hgpart compare-run") from None


# --------------------------------------------------------------------------------------------- setup
def _placement(graph: Any, kind: PlacementKind, k: int, batch_size: int, *, profile: Any, backend: str,
               epsilon: float, seed: int) -> Any:
    """Compile the placement of a model-parallel strategy (layer-wise backend, or the hypergraph backend)."""
    from hgpart.hypergraph import build_hypergraph
    from hgpart.partitioners import partition
    from hgpart.placement import Placement
    from hgpart.profile import analytic_profile

    prof = profile if profile is not None else analytic_profile(graph, batch_size)
    hg = build_hypergraph(graph, prof.work(), batch_size=batch_size, grain=kind.grain)
    be = "layerwise" if kind is PlacementKind.LAYERWISE else backend
    res = partition(hg, k=k, backend=be, epsilon=epsilon, seed=seed)
    return Placement.from_vertex_parts(graph, hg, res.parts, k=k, method="layerwise" if be == "layerwise"
                                       else "hypergraph", work=prof.work(),
                                       provenance={"backend": be, "epsilon": epsilon, "seed": seed})


@dataclass
class _Compiled:
    fns: list[Callable[[np.ndarray, np.ndarray], float]]
    task_batch: int
    comm: float | None
    feed: float | None
    source: str
    evaluate: Callable[[np.ndarray, np.ndarray], tuple[float, float]]
    notes: str = ""
    #: for the device trace: the step the runtime traces (model parallelism) or the node -> device map (DP)
    step: Any = None
    node_devices: Callable[[], dict[str, str]] | None = None
    #: runs each distinct step function once and undoes its updates (TrainStep / DataParallel ``warm_up``)
    warm_up: Callable[[np.ndarray, np.ndarray], Any] | None = None
    placement: Any = None  # model parallelism: the hgpart.placement.Placement trained
    #: model parallelism: the stage pipeline the steps run through (None: the slot functions ``fns``)
    staged: Any = None

    def train(self, xs: np.ndarray, ys: np.ndarray,
              on_step: Callable[[StepRecord], None] | None = None) -> list[StepRecord]:
        """Train on the stacked tasks ``xs[i], ys[i]``: through the stage pipeline (``len(fns)`` batches in
        flight, the step's micro-batches) or the compiled calls when one was chosen, else on one thread per slot
        function."""
        from hgpart.runtime.dataparallel import run_slots
        from hgpart.runtime.multistep import MultiStep, run_calls
        from hgpart.runtime.pipeline import stacked_tasks
        from hgpart.runtime.stagepipe import run_staged

        if self.staged is None:
            return run_slots(self.fns, xs, ys, on_step=on_step)
        if isinstance(self.staged, MultiStep):
            return run_calls(self.staged, len(xs), stacked_tasks(xs, ys), images_per_task=self.task_batch,
                             on_step=on_step, block=lambda i, n: (xs[i:i + n], ys[i:i + n]))
        return run_staged(self.staged, len(xs), stacked_tasks(xs, ys), images_per_task=self.task_batch,
                          window=len(self.fns), micro=self.step.micro, on_step=on_step)


def _compile(strategy: Strategy, spec: str, graph: Any, ds: Any, opt: Any, B: int, *, seed: int, profile: Any,
             backend: str, epsilon: float) -> _Compiled:
    import keras

    from hgpart.models import load_keras_model
    from hgpart.runtime.dataparallel import make_strategy, node_devices

    k = ds.k
    keras.utils.set_random_seed(seed)  # the same initial weights for every strategy
    model = load_keras_model(spec, input_shape=tuple(graph.input_shape), num_classes=graph.num_classes)
    if not strategy.is_model_parallel:
        s = make_strategy(strategy, model, ds, opt, batch_size=B)
        return _Compiled(s.slot_fns, s.task_batch, s.comm_bytes_per_step, s.feed_bytes_per_step, s.bytes_source,
                         s.evaluate, s.notes, node_devices=lambda: node_devices(s), warm_up=s.warm_up)
    from hgpart.frontend import layer_graph_from_keras
    from hgpart.runtime.evaluation import MeteredStep
    from hgpart.runtime.partitioned import PlacedModel
    from hgpart.runtime.traffic import measure_traffic

    method = strategy.name
    if not strategy.is_async and B % k:
        raise BadOptionError(f"batch size {B} is not divisible into K = {k} micro-batches", where=method,
                             option="batch_size", value=B)
    assert strategy.placement is not None  # every model-parallel strategy has one (runtime.strategy)
    pl = _placement(graph, strategy.placement, k, B, profile=profile, backend=backend, epsilon=epsilon, seed=seed)
    pl.check_model(layer_graph_from_keras(model, name=graph.name), where=f"{method} placement vs Keras model")
    pm = PlacedModel(pl, model, ds.devices, host=ds.host)
    step = MeteredStep(pm, opt, batch_size=B, micro_batches=1 if strategy.is_async else k)
    t = measure_traffic(step)

    def evaluate(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        p = pm.predict(x)
        if not pm.final_softmax:
            e = np.exp(p - p.max(axis=1, keepdims=True))
            p = e / e.sum(axis=1, keepdims=True)
        loss = float(np.mean(-np.log(np.clip(p[np.arange(len(y)), y], 1e-7, 1.0))))
        return float(np.mean(np.argmax(p, axis=1) == y)), loss

    m = pl.recompute_metrics()
    fns = [step] * (k if strategy.is_async else 1)
    notes = (f"{pl.method} {pl.grain} placement, Comm. Vol {m.comm_volume_mib:.3f} MiB/forward, "
             f"Max/Avg work {m.max_over_avg:.3f}; measured fwd {t.forward} B, bwd {t.backward} B, loss {t.loss} B"
             + ("" if strategy.is_async else "; K micro-batches per step"))  # async: MeasuredRun.inflight
    return _Compiled(fns, B, float(t.total - t.feed), float(t.feed), "graph", evaluate, notes, step=step,
                     warm_up=step.warm_up, placement=pl)


def machine_info() -> dict[str, Any]:
    from hgpart.compare.static import machine_info as static_info

    info = dict(static_info())
    try:
        import tensorflow as tf

        info["tensorflow"] = tf.__version__
    except ImportError:  # pragma: no cover - the runtime needs TensorFlow anyway
        pass
    info["cores_available"] = len(os.sched_getaffinity(0))
    info["loadavg_at_start"] = [round(v, 2) for v in os.getloadavg()]  # the machine is shared: say how busy it was
    return info


# ---------------------------------------------------------------------------------------------- run
@dataclass
class _Session:
    """What every run of one comparison shares: the devices, the data and the settings."""

    cmp: MeasuredComparison
    graph: Any
    ds: Any
    opt: Any
    x: np.ndarray
    y: np.ndarray
    ev: tuple[np.ndarray, np.ndarray]  # the fixed evaluation subset
    profile: Any
    epsilon: float
    evals_per_epoch: int
    trace_dir: Path | None
    placement_dir: Path | None = None


@dataclass(frozen=True)
class _Plan:
    """The global steps of the runs at one batch size."""

    batch_size: int
    steps_per_epoch: int
    total_steps: int


def _trace(c: _Compiled, ds: Any, x: np.ndarray, y: np.ndarray, B: int, folder: Path, *, seed: int,
           meta: dict[str, Any]) -> tuple[list[float], str, str]:
    """Device busy fractions of ``max(2, K)`` extra global steps under the profiler (see the module docstring)."""
    import shutil

    from hgpart.runtime.dataparallel import run_slots
    from hgpart.runtime.devtrace import capture_device_trace

    per = B // c.task_batch
    order = np.random.default_rng(seed).permutation(len(x))
    ran: list[int] = []  # on worker processes the profiler traces for a fixed time; steps run in rounds till it ends

    def run(n: int) -> None:
        ran.append(n)
        idx = np.take(order, np.arange(n * B), mode="wrap").reshape(n * per, c.task_batch)
        run_slots(c.fns, x[idx], y[idx])  # guarded by _attempt; the step functions, as hgpart train --trace

    nodes = c.node_devices() if c.node_devices is not None else None
    try:
        dt = capture_device_trace(c.step, ds, run, folder, steps=max(2, ds.k), inflight=max(1, len(c.fns) // per),
                                  meta=meta, devices=list(ds.devices) if nodes is not None else None,
                                  node_devices=nodes)
    finally:
        shutil.rmtree(folder / "tf_profile", ignore_errors=True)  # raw XSpace files: large, already read
    note = ("as one function per step (hgpart train --trace does the same: the profiler maps the whole-step "
            "graph's ops to devices, not the stage functions'), " if c.staged is not None else "") + \
        f"{sum(ran)} extra steps after the timed run, {dt.wall_s * 1000:.0f} ms traced, ops per device " \
           f"{dt.ops_per_device}" + (f", {dt.unmatched} kernel events not attributed" if dt.unmatched else "")
    return [float(b) for b in dt.busy], str(dt.path), note


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _summary(exc: BaseException, *, last: bool = True) -> str:
    """A one-line summary of an unexpected exception: its first non-empty line, and (``last``) its last one, since
    TensorFlow puts "in user code:" first and the actual error last."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()] or [""]
    return lines[0] if len(lines) == 1 or not last else f"{lines[0]} ... {lines[-1]}"


def _warm_up(c: _Compiled, x: np.ndarray, y: np.ndarray) -> None:
    """One untimed call of each distinct step function, its updates undone (no strategy trains on it)."""
    assert c.warm_up is not None  # _compile sets it for every strategy
    c.warm_up(x[: c.task_batch], y[: c.task_batch])


def _batches(s: _Session, plan: _Plan, orders: dict[int, np.ndarray], done: int, n: int,
             task_batch: int) -> tuple[np.ndarray, np.ndarray]:
    """Global steps ``done..done+n-1`` as tasks of ``task_batch`` images (one seeded permutation per epoch)."""
    B, spe = plan.batch_size, plan.steps_per_epoch
    idx = []
    for step in range(done, done + n):
        e, j = divmod(step, spe)
        if e not in orders:
            orders[e] = np.random.default_rng(s.cmp.seed + 1000 + e).permutation(len(s.x))
        idx.append(orders[e][j * B:(j + 1) * B])
    ib = np.concatenate(idx).reshape(n * (B // task_batch), task_batch)
    return s.x[ib], s.y[ib]


def _chunks(s: _Session, plan: _Plan) -> list[int]:
    """The steps of each timed stretch of a run: ``eval_every`` global steps, cut at epoch ends (see :func:`_timed`)."""
    spe = plan.steps_per_epoch
    eval_every = max(1, spe // max(1, s.evals_per_epoch))
    out, done = [], 0
    while done < plan.total_steps:
        out.append(min(eval_every, plan.total_steps - done, spe - done % spe))
        done += out[-1]
    return out


def _timed(s: _Session, c: _Compiled, plan: _Plan, run: MeasuredRun, on_steps: Callable[[int], None]) -> None:
    """The timed training of one run, evaluated (clock stopped) after every stretch of :func:`_chunks`."""
    spe, per = plan.steps_per_epoch, plan.batch_size // c.task_batch
    acc, loss = c.evaluate(*s.ev)
    run.curve.append(CurvePoint(wall_s=0.0, step=0, epoch=0.0, train_loss=None, accuracy=acc, loss=loss))
    wall = cpu = 0.0
    busy = np.zeros(1 if c.staged is not None else len(c.fns))  # stage records all say slot 0
    done = 0
    orders: dict[int, np.ndarray] = {}

    def on_step(r: StepRecord) -> None:
        if (r.step + 1) % per == 0:
            on_steps(1)

    with quiet_heap():  # no full collection of the earlier strategies' garbage inside a timed stretch
        for n in _chunks(s, plan):
            xs, ys = _batches(s, plan, orders, done, n, c.task_batch)
            c0, w0 = _cpu(), time.perf_counter()
            records = c.train(xs, ys, on_step)  # guarded by _attempt
            wall += time.perf_counter() - w0
            cpu += _cpu() - c0
            np.add.at(busy, [r.slot for r in records], [r.batch_s for r in records])
            done += n
            acc, loss = c.evaluate(*s.ev)
            run.curve.append(CurvePoint(wall_s=wall, step=done, epoch=done / spe,
                                        train_loss=float(np.mean([r.loss for r in records])), accuracy=acc,
                                        loss=loss))
            if run.time_to_target_s is None and acc >= s.cmp.target:
                run.time_to_target_s, run.epochs_to_target = wall, done / spe
    run.steps, run.epochs, run.train_seconds = done, done / spe, wall
    run.epoch_seconds = wall / done * spe
    run.images_per_s = done * plan.batch_size / wall
    run.final_accuracy, run.final_loss = acc, loss
    run.cpu_cores = cpu / wall
    run.slot_busy = [float(b / wall) for b in busy]


def _one(s: _Session, strategy: Strategy, plan: _Plan, on_steps: Callable[[int], None]) -> MeasuredRun:
    """Compile, warm up, train and (with a trace folder) trace one strategy at one batch size."""
    B, cmp = plan.batch_size, s.cmp
    run = MeasuredRun(strategy.name, B, "ok")
    t0 = time.perf_counter()
    c = _compile(strategy, cmp.spec, s.graph, s.ds, s.opt, B, seed=cmp.seed, profile=s.profile, backend=cmp.backend,
                 epsilon=s.epsilon)
    _warm_up(c, s.x, s.y)
    if c.step is not None:  # model parallelism runs as hgpart train runs it: stages, compiled or one function
        from hgpart.runtime.multistep import MultiStep
        from hgpart.runtime.pipechoice import choose_pipeline

        chunks = _chunks(s, plan)
        # async: the runtime's default batches in flight (one per stage, K + 1 compiled, or K), as hgpart train;
        # sync: 1. A compiled call never spans a timed stretch (as hgpart train's never spans an epoch).
        c.staged, choice = choose_pipeline(c.step, s.ds, pipeline=cmp.pipeline,
                                           slots=None if strategy.is_async else 1,
                                           steps_per_call=min(STEPS_PER_CALL, max(chunks, default=1)))
        if isinstance(c.staged, MultiStep):  # every call size the stretches make, traced and placed untimed
            c.staged.warm(chunks)
        c.fns = [c.fns[0]] * choice.inflight
        run.pipeline, run.inflight = choice.describe(), choice.inflight
        if choice.note:
            c.notes = f"{c.notes}; {choice.note}" if c.notes else choice.note
    run.compile_seconds = time.perf_counter() - t0
    run.comm_bytes_per_step, run.feed_bytes_per_step, run.bytes_source, run.notes = c.comm, c.feed, c.source, c.notes
    if s.placement_dir is not None and c.placement is not None:
        run.placement_path = str(c.placement.save(s.placement_dir / f"{strategy.name}_bs{B}.json"))
    _timed(s, c, plan, run, on_steps)
    if s.trace_dir is not None:  # after the timed run and its last evaluation: the curves are not affected
        try:
            run.device_busy, run.trace_path, run.trace_note = _trace(
                c, s.ds, s.x, s.y, B, s.trace_dir / f"{strategy.name}_bs{B}", seed=cmp.seed + 2000,
                meta={"method": strategy.name, "batch_size": B, "k": s.ds.k, "devices": cmp.devices})
        except Exception as exc:  # noqa: BLE001 - a failed trace must not lose the measured run
            run.trace_note = f"not traced: {type(exc).__name__}: {_summary(exc, last=False)[:300]}"
    return run


def _attempt(s: _Session, strategy: Strategy, plan: _Plan, on_steps: Callable[[int], None]) -> MeasuredRun:
    """:func:`_one`, or a ``failed`` run saying why: one strategy failing must not stop the comparison.

    The whole run is guarded, not only its steps: a worker process that dies while the strategy compiles, warms
    up, evaluates or traces is one failed run in bounded time, not a hang (TensorFlow waits forever on a dead
    worker), and every later strategy fails at once on the same recorded failure."""
    from hgpart.runtime.cluster import guarded

    try:
        return guarded(s.ds, _one, s, strategy, plan, on_steps)
    except HgpartError as exc:
        return MeasuredRun(strategy.name, plan.batch_size, "failed", reason=str(exc))
    except Exception as exc:  # noqa: BLE001 - recorded with its type and message, the comparison goes on
        return MeasuredRun(strategy.name, plan.batch_size, "failed",
                           reason=f"{type(exc).__name__}: {_summary(exc)[:400]}")


class _Bar:
    """A rich progress bar: one line for all strategies, one per run while it trains; nothing if disabled."""

    def __init__(self, enabled: bool, console: Any, total: int) -> None:
        self.bar: Any = None
        self.task: Any = None
        if enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("[bold]{task.description:<28}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=console, transient=False)
            self.overall = self.bar.add_task("all strategies", total=total)
            self.bar.start()

    def begin(self, label: str, total: int) -> None:
        if self.bar is not None:
            self.task = self.bar.add_task(label, total=total)

    def steps(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, advance=n)

    def end(self) -> None:
        if self.bar is not None:
            self.bar.update(self.task, visible=False)
            self.bar.update(self.overall, advance=1)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _plans(batch_sizes: Sequence[int], images: int, steps: int | None, epochs: float) -> list[_Plan]:
    """Steps per epoch and total global steps at each batch size (``steps`` overrides ``epochs``)."""
    plans = []
    for B in batch_sizes:
        spe = images // B
        if spe < 1:
            raise BadOptionError(f"batch size {B} exceeds the {images} digits images", where="--batch-sizes",
                                 option="--batch-sizes", value=B)
        total = int(steps) if steps is not None else max(1, int(round(epochs * spe)))
        plans.append(_Plan(B, spe, total))
    return plans


def _strategies(methods: Sequence[str], target: float) -> list[Strategy]:
    bad = [m for m in methods if m not in STRATEGIES]
    if bad:
        raise BadOptionError(f"unknown method(s) {bad}", where="--methods", fix=f"use any of {', '.join(METHODS)}",
                             value=bad)
    if not 0 < target <= 1:
        raise BadOptionError(f"target accuracy {target} is not in (0, 1]", where="--target", value=target)
    return [Strategy.parse(m) for m in methods]


def run_measured(
    model: str,
    *,
    device_set: Any,
    input_shape: tuple[int, ...] | None = None,
    num_classes: int | None = None,
    batch_sizes: Sequence[int] = (16, 32, 64),
    epochs: float | None = None,
    steps: int | None = None,
    target: float = 0.9,
    methods: Sequence[str] = METHODS,
    optimizer: str = "adam",
    lr: float = 1e-3,
    seed: int = 0,
    eval_n: int = 512,
    evals_per_epoch: int = 4,
    profile: Any = None,
    backend: str = "mtkahypar",
    epsilon: float = 0.05,
    devices_label: str = "logical",
    progress: bool = True,
    console: Any = None,
    trace_dir: str | os.PathLike[str] | None = None,
    placement_dir: str | os.PathLike[str] | None = None,
    pipeline: str = "auto",
) -> MeasuredComparison:
    """Train ``model`` under every method at every batch size on ``device_set`` (see the module docstring).

    ``steps`` (global steps per run) overrides ``epochs``; ``profile`` is a :class:`hgpart.profile.Profile` used for
    every placement (default: an analytic profile at each batch size). ``trace_dir``: trace each run's devices
    into ``trace_dir/<method>_bs<B>/`` (module docstring); ``None``: no trace. ``placement_dir``: save each
    model-parallel run's placement as ``placement_dir/<method>_bs<B>.json`` (``MeasuredRun.placement_path``), so a
    simulation can replay exactly what was measured. ``pipeline``: how the model-parallel strategies run their
    steps, as ``hgpart train --pipeline`` (:mod:`hgpart.runtime.pipechoice`; ``auto`` by default, as training).

    Raises:
        BadOptionError: an unknown method or pipeline, a target outside (0, 1], a batch size above the dataset's
            size.
    """
    from hgpart.models import load_graph
    from hgpart.runtime.stages import check_pipeline
    from hgpart.runtime.step import OptimizerSpec
    from hgpart.runtime.train import load_dataset

    started = time.perf_counter()
    strategies = _strategies(methods, target)
    check_pipeline(pipeline)
    if steps is None and epochs is None:
        epochs = 1.0
    graph = load_graph(model, input_shape=input_shape, num_classes=num_classes)
    ncls = graph.num_classes or 10
    x, y = load_dataset("digits", tuple(graph.input_shape), ncls, seed=seed)
    ev_idx = np.sort(np.random.default_rng(seed).choice(len(x), size=min(eval_n, len(x)), replace=False))
    cmp = MeasuredComparison(
        model=graph.name, spec=model, input_shape=list(graph.input_shape), num_classes=ncls, k=device_set.k,
        devices=devices_label, batch_sizes=[int(b) for b in batch_sizes], epochs=float(epochs or 0.0),
        target=float(target), optimizer=optimizer, lr=float(lr), seed=seed, eval_n=len(ev_idx), images=len(x),
        profile="analytic (FLOPs) at each batch size" if profile is None else "given profile file",
        backend=backend, methods=[st.name for st in strategies], machine=machine_info(), pipeline=pipeline)
    plans = _plans(cmp.batch_sizes, len(x), steps, float(epochs or 0.0))
    if steps is not None:
        cmp.epochs = float(np.mean([p.total_steps / p.steps_per_epoch for p in plans]))
    session = _Session(cmp, graph, device_set, OptimizerSpec(optimizer, lr), x, y, (x[ev_idx], y[ev_idx]), profile,
                       epsilon, evals_per_epoch, Path(trace_dir) if trace_dir is not None else None,
                       Path(placement_dir) if placement_dir is not None else None)
    bar = _Bar(progress, console, len(plans) * len(strategies))
    try:
        for plan in plans:
            for strategy in strategies:
                bar.begin(f"{strategy.name} B={plan.batch_size}", plan.total_steps)
                cmp.runs.append(_attempt(session, strategy, plan, bar.steps))
                bar.end()
    finally:
        bar.stop()
    cmp.seconds = time.perf_counter() - started
    cmp.machine["loadavg_at_end"] = [round(v, 2) for v in os.getloadavg()]
    return cmp
