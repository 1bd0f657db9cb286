"""Train a placement end to end, as ``hgpart train`` does: data, validation, logs, traces, the saved model.

Usage::

    from hgpart.runtime import train
    res = train("partitions/minivgg_coarse_k2.json", devices="logical", batch_size=32, epochs=3, mode="async",
                data="digits", val_split=0.2, save="minivgg.keras")
    res.images_per_s, res.losses[-1], res.history["val_accuracy"][-1], res.traffic.to_dict()

The training loop is :meth:`hgpart.runtime.api.PartitionedModel.fit`; this module checks the settings first,
opens the devices, loads the data (:mod:`hgpart.runtime.data`), measures the step's traffic and writes the
log (one row per step; the last step of each epoch carries its validation loss and accuracy) and the traces.

Modes (thesis section 4.2):

* ``async`` - a threaded pipeline with ``inflight`` batches in flight (default: one per stage when steps run as
  pipeline stages, K + 1 compiled, else K). Each worker thread takes the next
  batch as soon as it is free and runs a whole training step (forward, collocated backward, per-device update) on
  it; TensorFlow interleaves the steps' ops on the devices, so while part 1 runs batch i's forward, part 0 can run
  batch i+1's. Staleness: every variable is read when its forward op runs and updated when the batch's backward
  reaches it, so a batch's gradient may be computed against (and applied to) weights already updated by up to
  ``inflight - 1`` other batches, including batches whose forward started after this one's; different layers of one
  batch may see weights of different ages. Each variable's update is one locked kernel, the driver bounds the
  staleness (:mod:`hgpart.runtime.pipeline`), nothing orders the updates; the result is not bit-reproducible.
* ``sync`` - one mini-batch per step, split into ``inflight`` micro-batches that flow through the devices together;
  gradients are accumulated and one update is applied, so the result equals single-device training with the same
  micro-batching (equal to plain training for models without BatchNorm, or with one micro-batch).

Traces (``trace=DIR``): after the warm-up, a few extra steps (max(2, inflight); with the compiled pipeline, whole calls
of it, as the timed run makes them), not in the log or the timings (their updates are undone), run under TensorFlow's
profiler; ``DIR/devices_trace.json`` shows every device's ops in one
Chrome/Perfetto view and gives each device's busy fraction (``TrainResult.device_busy``; see
:mod:`hgpart.runtime.devtrace`). ``DIR/pipeline_trace.json`` shows the timed run's batches per in-flight slot.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from hgpart.runtime.api import FitRow, History, PartitionedModel, inter_op_threads
from hgpart.runtime.checkpoint import CheckpointSettings
from hgpart.runtime.cluster import guarded
from hgpart.runtime.data import DATASETS, Data, DataKind, DataSpec, load_data
from hgpart.runtime.devices import open_devices
from hgpart.runtime.deviceset import DeviceSet
from hgpart.runtime.modelsource import build_for_placement, check_init_weights
from hgpart.runtime.multistep import STEPS_PER_CALL, MultiStep, call_sizes
from hgpart.runtime.pipeline import StepRecord, run_slots, shuffled_batches
from hgpart.runtime.stages import check_pipeline
from hgpart.runtime.step import OptimizerSpec, restoring
from hgpart.runtime.strategy import Schedule
from hgpart.runtime.traffic import graph_devices, measure_traffic

from hgpart.errors import HgpartError
from hgpart.fileio import atomic_write_text, write_json
from hgpart.placement import Placement, load_placement

__all__ = ["train", "TrainResult", "RunSettings", "check_settings", "load_dataset", "build_for_placement",
           "DATASETS", "MODES", "run_pipeline"]

#: the training modes by name, as the CLI and :func:`train` accept them (parsed into :class:`Schedule`)
MODES = tuple(s.value for s in Schedule)


@dataclass
class TrainResult:
    """What a training run measured."""

    steps: int
    images: int
    seconds: float
    images_per_s: float
    losses: list[float]
    rows: list[StepRecord] = field(default_factory=list)
    traffic: Any = None
    predicted_fwd_bytes: float = 0.0
    #: per part: busy fraction in the --trace steps (union of its op intervals / traced wall time); [] untraced
    device_busy: list[float] = field(default_factory=list)
    #: fine placements: executed / assigned forward MACs of the fine convolutions (PlacedModel.compute_overhead)
    compute: dict[str, Any] = field(default_factory=dict)
    #: files written by --trace (devices_trace.json, pipeline_trace.json)
    trace_files: list[str] = field(default_factory=list)
    #: per epoch, as Keras's History: loss, accuracy and (with validation data) val_loss, val_accuracy
    history: dict[str, list[float]] = field(default_factory=dict)
    #: the saved .keras file (``save=``), if any
    saved: str | None = None
    #: CPU seconds the client process spent over the ``seconds`` of training (History.client_cpu_seconds)
    client_cpu_seconds: float = 0.0
    #: how the steps ran: through the stages or as one function per step, and why (PipelineChoice.describe)
    pipeline: str = ""
    #: async batches in flight or sync micro-batches the steps ran with (async: the pipeline's default if none was
    #: asked for)
    inflight: int = 0

    def loss_ends(self, window: int = 5) -> tuple[int, float, float]:
        """(n, mean loss of the first n steps to finish, of the last n): n = ``window``, fewer on short runs.

        Why: one batch's loss is noisy, more so in async mode where a batch may
        see weights up to K updates old, so one step's loss can look like
        divergence on a run that trains (see benchmarks/results/README.md).
        """
        n = max(1, min(window, len(self.losses) // 3))
        return n, float(np.mean(self.losses[:n])), float(np.mean(self.losses[-n:]))

    @property
    def validation(self) -> tuple[float, float] | None:
        """(loss, accuracy) on the validation data after the last epoch; None without validation data."""
        h = self.history
        return (h["val_loss"][-1], h["val_accuracy"][-1]) if h.get("val_loss") else None


# ------------------------------------------------------------------------------------------------ data
def load_dataset(name: str, input_shape: tuple[int, ...], num_classes: int, *, n: int = 512,
                 seed: int = 0, device: str = "/CPU:0") -> tuple[np.ndarray, np.ndarray]:
    """All samples of a ``--data`` source as arrays (``n``: how many synthetic samples); see :func:`load_data`.

    ``digits`` resizes with TensorFlow on ``device``, which initialises TensorFlow's devices: open the
    devices first (:func:`train` does).
    """
    data = load_data(name, input_shape=input_shape, num_classes=num_classes, seed=seed, n_synthetic=n, host=device)
    return data.read(np.arange(len(data)))


# -------------------------------------------------------------------------------------------- pipeline
def run_pipeline(step: Any, x: np.ndarray, y: np.ndarray, *, steps: int, batch_size: int, inflight: int,
                 on_step: Callable[[StepRecord], None] | None = None, seed: int = 0,
                 start_step: int = 0) -> list[StepRecord]:
    """Run ``steps`` steps of one partitioned ``step`` on the shared driver (:func:`hgpart.runtime.pipeline.run_slots`)
    with ``inflight`` threads, each taking the next shuffled batch of the arrays as soon as it is free; task i is
    batch ``start_step + i`` of the seeded order.

    The traced steps of ``--trace`` run here; training runs through :meth:`PartitionedModel.fit`."""
    batches = shuffled_batches(x, y, batch_size=batch_size, seed=seed)
    return run_slots([step] * max(1, inflight), steps, lambda i: batches(start_step + i),
                     images_per_task=batch_size, on_step=on_step,
                     fix="check the devices (a worker may have died) and the placement")


#: columns of a CSV step log: the pipeline's record, the step's epoch and accuracy, validation at epoch ends
LOG_COLUMNS = (*StepRecord.COLUMNS, "epoch", "accuracy", "val_loss", "val_accuracy")


def _log_rows(rows: list[FitRow], hist: History | None) -> list[dict[str, Any]]:
    """One dict per step; the last step of each epoch to finish carries that epoch's validation figures."""
    out = [{**r.record.to_dict(), "epoch": r.epoch, "accuracy": r.accuracy, "val_loss": None, "val_accuracy": None}
           for r in rows]
    if hist is not None and "val_loss" in hist.history:
        last = {r.epoch: i for i, r in enumerate(rows)}
        for e, vl, va in zip(hist.epoch, hist.history["val_loss"], hist.history["val_accuracy"], strict=True):
            if e in last:
                out[last[e]].update(val_loss=vl, val_accuracy=va)
    return out


def _write_log(path: Path, rows: list[StepRecord] | list[FitRow], meta: dict[str, Any],
               hist: History | None = None) -> None:
    """The step log: CSV (one line per step, :data:`LOG_COLUMNS`) or JSON (``meta``, the steps and the epochs)."""
    fit_rows = [r if isinstance(r, FitRow) else FitRow(r, 0, float("nan")) for r in rows]
    table = _log_rows(fit_rows, hist)
    if path.suffix == ".csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(LOG_COLUMNS))
        w.writeheader()
        w.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in table)
        atomic_write_text(path, buf.getvalue())
    else:
        epochs = [] if hist is None else [{"epoch": e, **{k: v[i] for k, v in hist.history.items()}}
                                          for i, e in enumerate(hist.epoch)]
        write_json(path, {"meta": meta, "steps": table, "epochs": epochs})


def _write_trace(folder: Path, rows: list[StepRecord], meta: dict[str, Any]) -> Path:
    """Chrome/Perfetto trace of the pipeline: one row per in-flight slot, one span per batch."""
    events: list[dict[str, Any]] = [{"ph": "M", "pid": 1, "name": "process_name",
                                     "args": {"name": f"hgpart {meta['mode']} pipeline on {meta['devices']}"}}]
    for s in sorted({r.slot for r in rows}):
        events.append({"ph": "M", "pid": 1, "tid": s, "name": "thread_name", "args": {"name": f"slot {s}"}})
    for r in rows:
        events.append({"ph": "X", "pid": 1, "tid": r.slot, "name": f"batch {r.step}",
                       "ts": r.start_s * 1e6, "dur": r.batch_s * 1e6, "args": {"loss": r.loss}})
    return write_json(folder / "pipeline_trace.json", {"traceEvents": events, "displayTimeUnit": "ms"})


# ----------------------------------------------------------------------------------------------- train
@dataclass(frozen=True)
class RunSettings:
    """The checked settings of one training run: everything but the placement, the model, devices and data."""

    opt: OptimizerSpec
    batch_size: int
    #: training steps; None until the dataset's size turns ``epochs`` into steps
    steps: int | None
    epochs: float
    mode: Schedule
    #: async batches in flight or sync micro-batches (K when not given)
    inflight: int
    data: DataSpec
    seed: int = 0
    trace: Path | None = None
    log: Path | None = None
    progress: bool = False
    devices: str = "logical"
    init_weights: Path | None = None
    #: the last fraction of the training data kept for validation (0: none)
    val_split: float = 0.0
    #: separate validation data (overrides ``val_split``)
    val_data: DataSpec | None = None
    #: where to save the trained model (.keras)
    save: Path | None = None
    #: whether ``inflight`` was asked for; else async runs the pipeline's default (one batch per stage, or K)
    inflight_given: bool = False

    @property
    def asked_inflight(self) -> int | None:
        """``inflight`` as asked for: None lets the runtime pick its default."""
        return self.inflight if self.inflight_given else None


def check_settings(pl: Placement, *, batch_size: int | None, steps: int | None, epochs: float | None,
                   mode: str | Schedule, optimizer: str, lr: float, dataset: str | None = None,
                   inflight: int | None, seed: int = 0, trace: str | Path | None = None,
                   log: str | Path | None = None, progress: bool = False, devices: str = "logical",
                   data: str | Path | None = None, val_split: float = 0.0, val_data: str | Path | None = None,
                   save: str | Path | None = None) -> RunSettings:
    """Check every setting against the placement, before any TensorFlow work; one HgpartError if one is wrong.

    ``None`` means the default: the placement's batch size, K micro-batches (sync) or the pipeline's default batches
    in flight (async: :func:`hgpart.placement.default_inflight`), one epoch, synthetic data.
    ``dataset`` is the former name of ``data``.
    """
    schedule = Schedule.parse(mode, where="--mode")
    opt = OptimizerSpec(optimizer, lr)
    if steps is not None and steps < 1:
        raise HgpartError(f"{steps} training steps requested", where="--steps",
                          fix="pass a number of steps >= 1 (or 0 to train for --epochs)")
    if epochs is not None and not (math.isfinite(epochs) and epochs > 0):
        raise HgpartError(f"{epochs} epochs requested", where="--epochs", fix="pass a number of epochs > 0")
    if batch_size is not None and batch_size < 1:
        raise HgpartError(f"batch size {batch_size} requested", where="--batch-size",
                          fix="pass a batch size >= 1 (or 0 for the placement's)")
    if inflight is not None and inflight < 1:
        raise HgpartError(f"{inflight} batches in flight requested", where="--inflight",
                          fix="pass a number >= 1 (or 0 for the default)")
    if not (math.isfinite(val_split) and 0.0 <= val_split < 1.0):
        raise HgpartError(f"validation split {val_split} is not in [0, 1)", where="--val-split",
                          fix="pass a fraction such as 0.2")
    if save is not None and Path(save).suffix != ".keras":
        raise HgpartError(f"cannot save a model as {str(save)!r}", where="--save",
                          fix="give the file the .keras suffix")
    B = int(batch_size or pl.batch_size)
    k_inflight = int(inflight or pl.k)
    if schedule is Schedule.SYNC and B % k_inflight:
        raise HgpartError(f"batch size {B} is not divisible into {k_inflight} micro-batches", where="--mode sync",
                          fix="pass --inflight dividing the batch size")
    spec = DataSpec.parse(data or dataset or "synthetic", where="--data")
    classes = pl.graph.num_classes or 10
    if spec.kind is DataKind.DIGITS and classes < 10:
        raise HgpartError(f"the model has {classes} classes; digits has 10", where="--data digits",
                          fix="use a model with >= 10 classes or --data synthetic")
    return RunSettings(opt=opt, batch_size=B, steps=steps, epochs=float(epochs or 1.0), mode=schedule,
                       inflight=k_inflight, data=spec, seed=seed, trace=Path(trace) if trace else None,
                       log=Path(log) if log else None, progress=progress, devices=devices, val_split=float(val_split),
                       val_data=DataSpec.parse(val_data, where="--val-data") if val_data is not None else None,
                       save=Path(save) if save else None, inflight_given=inflight is not None)


def train(
    placement: str | Path | Placement,
    *,
    devices: str = "logical",
    batch_size: int | None = None,
    steps: int | None = None,
    epochs: float | None = None,
    mode: str | Schedule = "async",
    optimizer: str = "adam",
    lr: float = 1e-3,
    data: str | Path | None = None,
    dataset: str | None = None,
    val_split: float = 0.0,
    val_data: str | Path | None = None,
    save: str | Path | None = None,
    inflight: int | None = None,
    trace: str | Path | None = None,
    log: str | Path | None = None,
    seed: int = 0,
    keras_model: Any = None,
    progress: bool = False,
    device_set: DeviceSet | None = None,
    init_weights: str | Path | None = None,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 0,
    resume: bool = False,
    pipeline: str = "auto",
    steps_per_call: int = STEPS_PER_CALL,
) -> TrainResult:
    """Train the placement's model on ``devices`` (see the module docstring); returns what was measured.

    Every setting is checked first; then the devices are opened (before anything else touches TensorFlow,
    so K logical devices can still be made); then the data is loaded and checked, the model built on the
    devices and trained with :meth:`PartitionedModel.fit`. ``dataset`` is the former name of ``data``.
    ``checkpoint_dir`` / ``checkpoint_every`` / ``resume``: partitioned checkpoints and resuming, also under
    another placement of the model (:mod:`hgpart.runtime.checkpoint`; sync resumes are bit-exact, async ones
    are correct but not bit-reproducible).
    """
    pl = placement if isinstance(placement, Placement) else load_placement(placement)
    run = check_settings(pl, batch_size=batch_size, steps=steps, epochs=epochs, mode=mode, optimizer=optimizer,
                         lr=lr, data=data, dataset=dataset, inflight=inflight, seed=seed, trace=trace, log=log,
                         progress=progress, devices=devices, val_split=val_split, val_data=val_data, save=save)
    run = replace(run, init_weights=check_init_weights(init_weights))
    ckpt = CheckpointSettings.make(checkpoint_dir, every=checkpoint_every, resume=resume)
    check_pipeline(pipeline)
    call_sizes(0, steps_per_call)
    ds = device_set or open_devices(devices, pl.k, inter_op=inter_op_threads(pl.k, run.asked_inflight))
    try:
        train_data, val = _load(pl, run, ds.host)
        with PartitionedModel.from_placement(pl, keras_model, device_set=ds, optimizer=run.opt.name, lr=run.opt.lr,
                                             seed=run.seed, inflight=run.asked_inflight,
                                             init_weights=run.init_weights, pipeline=pipeline,
                                             steps_per_call=steps_per_call) as pm:
            return _train_on(pm, run, train_data, val, ckpt)
    finally:
        if device_set is None:
            ds.close()


def _load(pl: Placement, run: RunSettings, host: str) -> tuple[Data, Data | None]:
    """The checked training and validation data of a run."""
    g = pl.graph
    shape, classes = tuple(g.input_shape), g.num_classes or 10
    data = load_data(run.data, input_shape=shape, num_classes=classes, seed=run.seed,
                     n_synthetic=max(512, 4 * run.batch_size), host=host)
    if run.val_data is not None:
        val = load_data(run.val_data, input_shape=shape, num_classes=classes, seed=run.seed + 1, host=host,
                        where="--val-data")
        return data, val
    if run.val_split:
        return data.split(run.val_split)
    return data, None


def _train_on(pm: PartitionedModel, run: RunSettings, data: Data, val: Data | None,
              ckpt: CheckpointSettings | None = None) -> TrainResult:
    pl, B = pm.placement, run.batch_size
    steps = run.steps or max(1, int(round(run.epochs * data.steps_per_epoch(B))))
    step = pm.train_step(B, run.mode, run.inflight)
    # how the steps will run (and async, with how many batches in flight), before the trace; made once: fit asks
    # for the same (sync: one window; its longest segment: an epoch, or the whole run if shorter)
    asked = run.asked_inflight if run.mode is Schedule.ASYNC else 1
    runner = pm.staged_step(step, asked, longest=min(steps, data.steps_per_epoch(B)))
    if run.mode is Schedule.ASYNC:
        assert pm.pipeline_choice is not None
        run = replace(run, inflight=pm.pipeline_choice.inflight)
    traffic = measure_traffic(step)
    meta = {"placement_model": pl.graph.name, "grain": pl.grain, "method": pl.method, "k": pl.k,
            "devices": run.devices, "mode": run.mode.value, "inflight": run.inflight, "batch_size": B,
            "optimizer": run.opt.name, "lr": run.opt.lr, "traffic_bytes": traffic.to_dict(),
            "data": str(run.data.path or run.data.kind.value), "val_split": run.val_split}
    dtrace = _capture_trace(pm, step, runner, data, run, meta) if run.trace is not None else None
    hist = pm.fit(data, steps=steps, batch_size=B, validation_data=val, mode=run.mode, inflight=run.asked_inflight,
                  verbose=1 if run.progress else 0, checkpoint=ckpt)
    rows = [r.record for r in hist.rows]
    trace_files: list[str] = []
    if dtrace is not None and run.trace is not None:
        trace_files = [str(dtrace.path), str(_write_trace(run.trace, rows, meta))]
    if run.log is not None:
        _write_log(run.log, hist.rows, meta, hist)
    saved = str(pm.save(run.save)) if run.save is not None else None
    pred = float(pl.recompute_metrics().comm_volume_mib) * 2**20 * B / pl.batch_size
    secs = max(hist.seconds, 1e-9)
    return TrainResult(steps=len(rows), images=len(rows) * B, seconds=secs, images_per_s=len(rows) * B / secs,
                       losses=[r.loss for r in rows], rows=rows, traffic=traffic, predicted_fwd_bytes=pred,
                       device_busy=dtrace.busy if dtrace is not None else [], trace_files=trace_files,
                       compute=pm.placed.compute_overhead(), history=hist.history, saved=saved,
                       client_cpu_seconds=hist.client_cpu_seconds,
                       pipeline=pm.pipeline_choice.describe() if pm.pipeline_choice is not None else "",
                       inflight=run.inflight)


def _capture_trace(pm: PartitionedModel, step: Any, runner: Any, data: Data, run: RunSettings,
                   meta: dict[str, Any]) -> Any:
    """A few extra steps under the profiler, before (and not in) the timed run; they make no update either. They run
    the way the timed run will: whole calls of the compiled pipeline's ``runner`` (a :class:`MultiStep`), or else
    the step function with its batches in flight."""
    from hgpart.runtime.devtrace import capture_device_trace

    assert run.trace is not None
    ds, B = pm.device_set, run.batch_size
    if isinstance(runner, MultiStep):
        per_call = runner.steps_per_call  # the size the run's calls have, traced and placed when it was built
        x, y = data.read(np.arange(per_call * B) % len(data))
        nodes = graph_devices(runner.function(per_call).graph, pm.placed.host)

        def run_call(_: int) -> None:
            guarded(ds, runner.run, x, y)

        with restoring(step.state):
            return capture_device_trace(step, ds, run_call, run.trace, steps=1, inflight=1, node_devices=nodes,
                                        meta=dict(meta, pipeline=f"compiled ({per_call} steps per call)"))
    n = max(2, run.inflight)
    x, y = data.read(np.arange(min(len(data), n * B)))
    pipeline_inflight = run.inflight if run.mode is Schedule.ASYNC else 1

    def run_traced(k: int) -> None:
        guarded(ds, run_pipeline, step, x, y, steps=k, batch_size=B, inflight=pipeline_inflight, seed=run.seed + 1)

    with restoring(step.state):
        return capture_device_trace(step, ds, run_traced, run.trace, steps=n, inflight=run.inflight, meta=meta)


def summary_json(res: TrainResult) -> str:
    """One JSON line with the headline figures (printed by the CLI)."""
    return json.dumps({"steps": res.steps, "images_per_s": round(res.images_per_s, 2),
                       "final_loss": res.losses[-1] if res.losses else None,
                       "traffic": res.traffic.to_dict() if res.traffic else None,
                       "predicted_fwd_bytes": res.predicted_fwd_bytes, "device_busy": res.device_busy,
                       "history": res.history, "saved": res.saved})
