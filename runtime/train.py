"""Train a placement end to end: datasets, the threaded asynchronous pipeline, sync mode, logs and traces.

Usage::

    from hgpart.runtime import train
    res = train("partitions/minivgg_coarse_k2.json", devices="logical", batch_size=32, steps=20, mode="async")
    res.images_per_s, res.losses[-1], res.traffic.to_dict()

Modes (thesis section 4.2):

* ``async`` - a threaded pipeline with ``inflight`` batches in flight (default K). Each worker thread takes the next
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

Traces (``trace=DIR``): after the warm-up, a few extra steps (max(2, inflight), not in the log or the timings; their
updates are undone) run under TensorFlow's profiler; ``DIR/devices_trace.json`` shows every device's ops in one
Chrome/Perfetto view and gives each device's busy fraction (``TrainResult.device_busy``; see
:mod:`hgpart.runtime.devtrace`). ``DIR/pipeline_trace.json`` shows the timed run's batches per in-flight slot.
"""

from __future__ import annotations

import csv
import gc
import io
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from hgpart.runtime.cluster import guarded
from hgpart.runtime.devices import open_devices
from hgpart.runtime.deviceset import DeviceSet
from hgpart.runtime.partitioned import PlacedModel, check_keras_model
from hgpart.runtime.pipeline import StepRecord, run_slots, shuffled_batches
from hgpart.runtime.step import OptimizerSpec, TrainStep, restoring
from hgpart.runtime.strategy import Schedule
from hgpart.runtime.traffic import measure_traffic

from hgpart.errors import HgpartError
from hgpart.fileio import atomic_write_text, write_json
from hgpart.placement import Placement, load_placement

__all__ = ["train", "TrainResult", "RunSettings", "check_settings", "check_dataset", "load_dataset",
           "build_for_placement", "DATASETS", "MODES", "run_pipeline"]

DATASETS = ("synthetic", "digits")
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

    def loss_ends(self, window: int = 5) -> tuple[int, float, float]:
        """(n, mean loss of the first n steps to finish, of the last n): n = ``window``, fewer on short runs.

        Why: one batch's loss is noisy, more so in async mode where a batch may
        see weights up to K updates old, so one step's loss can look like
        divergence on a run that trains (see benchmarks/results/README.md).
        """
        n = max(1, min(window, len(self.losses) // 3))
        return n, float(np.mean(self.losses[:n])), float(np.mean(self.losses[-n:]))


# ------------------------------------------------------------------------------------------------ data
def check_dataset(name: str, num_classes: int) -> None:
    """Refuse an unknown dataset, or one with more classes than the model has, before any TensorFlow work."""
    if name not in DATASETS:
        raise HgpartError(f"unknown dataset {name!r}", where="--dataset", fix=f"use one of {DATASETS}")
    if name == "digits" and num_classes < 10:
        raise HgpartError(f"the model has {num_classes} classes; digits has 10", where="--dataset digits",
                          fix="use a model with >= 10 classes or --dataset synthetic")


def load_dataset(name: str, input_shape: tuple[int, ...], num_classes: int, *, n: int = 512,
                 seed: int = 0, device: str = "/CPU:0") -> tuple[np.ndarray, np.ndarray]:
    """``synthetic``: seeded normal images and uniform labels. ``digits``: scikit-learn's 8x8 digits resized.

    ``digits`` resizes with TensorFlow on ``device``, which initialises TensorFlow's devices: open the
    devices first (:func:`train` does).
    """
    check_dataset(name, num_classes)
    if name == "synthetic":
        rng = np.random.default_rng(seed)
        x = rng.normal(size=(n, *input_shape)).astype(np.float32)
        return x, rng.integers(0, num_classes, n).astype(np.int32)
    if name == "digits":
        import tensorflow as tf
        from sklearn.datasets import load_digits

        d = load_digits()
        img = (d.images.astype(np.float32) / 16.0)[..., None]
        h, w, c = input_shape
        with tf.device(device):
            x = tf.image.resize(img, (h, w)).numpy()
        x = np.repeat(x, c, axis=-1) if c != 1 else x
        return x.astype(np.float32), d.target.astype(np.int32)
    raise AssertionError(name)  # check_dataset refused every other name


# -------------------------------------------------------------------------------------------- models
def build_for_placement(pl: Placement, *, seed: int = 0) -> Any:
    """The Keras model of the placement's model name with a fixed seed, checked against the placement."""
    import keras

    from hgpart.models import load_keras_model

    keras.utils.set_random_seed(seed)
    g = pl.graph
    model = load_keras_model(g.name, input_shape=tuple(g.input_shape), num_classes=g.num_classes or None)
    check_keras_model(pl, model, where="placement vs Keras model")
    return model


# -------------------------------------------------------------------------------------------- pipeline
def run_pipeline(step: Any, x: np.ndarray, y: np.ndarray, *, steps: int, batch_size: int, inflight: int,
                 on_step: Callable[[StepRecord], None] | None = None, seed: int = 0) -> list[StepRecord]:
    """Run ``steps`` steps of one partitioned ``step`` on the shared driver (:func:`hgpart.runtime.pipeline.run_slots`)
    with ``inflight`` threads, each taking the next shuffled batch as soon as it is free."""
    return run_slots([step] * max(1, inflight), steps, shuffled_batches(x, y, batch_size=batch_size, seed=seed),
                     images_per_task=batch_size, on_step=on_step,
                     fix="check the devices (a worker may have died) and the placement")


def _write_log(path: Path, rows: list[StepRecord], meta: dict[str, Any]) -> None:
    """The step log: CSV (one line per step) or JSON (``meta`` and the steps)."""
    if path.suffix == ".csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(StepRecord.COLUMNS))
        w.writeheader()
        w.writerows(r.to_dict() for r in rows)
        atomic_write_text(path, buf.getvalue())
    else:
        write_json(path, {"meta": meta, "steps": [r.to_dict() for r in rows]})


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
    inflight: int
    dataset: str
    seed: int = 0
    trace: Path | None = None
    log: Path | None = None
    progress: bool = False
    devices: str = "logical"


def check_settings(pl: Placement, *, batch_size: int | None, steps: int | None, epochs: float | None,
                   mode: str | Schedule, optimizer: str, lr: float, dataset: str, inflight: int | None,
                   seed: int = 0, trace: str | Path | None = None, log: str | Path | None = None,
                   progress: bool = False, devices: str = "logical") -> RunSettings:
    """Check every setting against the placement, before any TensorFlow work; one HgpartError if one is wrong.

    ``None`` means the default: the placement's batch size, K batches in flight, one epoch.
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
                          fix="pass a number >= 1 (or 0 for K)")
    B = int(batch_size or pl.batch_size)
    k_inflight = int(inflight or pl.k)
    if schedule is Schedule.SYNC and B % k_inflight:
        raise HgpartError(f"batch size {B} is not divisible into {k_inflight} micro-batches", where="--mode sync",
                          fix="pass --inflight dividing the batch size")
    check_dataset(dataset, pl.graph.num_classes or 10)
    return RunSettings(opt=opt, batch_size=B, steps=steps, epochs=float(epochs or 1.0), mode=schedule,
                       inflight=k_inflight, dataset=dataset, seed=seed, trace=Path(trace) if trace else None,
                       log=Path(log) if log else None, progress=progress, devices=devices)


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
    dataset: str = "synthetic",
    inflight: int | None = None,
    trace: str | Path | None = None,
    log: str | Path | None = None,
    seed: int = 0,
    keras_model: Any = None,
    progress: bool = False,
    device_set: DeviceSet | None = None,
) -> TrainResult:
    """Train the placement's model on ``devices`` (see the module docstring); returns what was measured.

    Every setting is checked first; then the devices are opened (before anything else touches TensorFlow,
    so K logical devices can still be made); then the data is loaded and the model built on them.
    """
    pl = placement if isinstance(placement, Placement) else load_placement(placement)
    run = check_settings(pl, batch_size=batch_size, steps=steps, epochs=epochs, mode=mode, optimizer=optimizer,
                         lr=lr, dataset=dataset, inflight=inflight, seed=seed, trace=trace, log=log,
                         progress=progress, devices=devices)
    ds = device_set or open_devices(devices, pl.k, inter_op=max(4, run.inflight + 1))
    try:
        g = pl.graph
        x, y = load_dataset(dataset, tuple(g.input_shape), g.num_classes or 10, n=max(512, 4 * run.batch_size),
                            seed=seed, device=ds.host)
        if run.steps is None:
            run = replace(run, steps=max(1, int(round(run.epochs * len(x) / run.batch_size))))
        return _train_on(pl, ds, keras_model, run, x, y)
    finally:
        if device_set is None:
            if ds.workers is not None:
                # Free the step's functions while the workers still run: TensorFlow deletes them on every
                # worker, and after the workers stop each deletion fails with an error line on stderr.
                gc.collect()
            ds.close()


def _build_step(pl: Placement, ds: DeviceSet, keras_model: Any, run: RunSettings) -> tuple[PlacedModel, TrainStep]:
    """The partitioned model and its compiled step, built on the workers under :func:`guarded`."""
    import tensorflow as tf

    tf.config.set_soft_device_placement(False)
    model = keras_model if keras_model is not None else build_for_placement(pl, seed=run.seed)
    pm = guarded(ds, PlacedModel, pl, model, ds.devices, host=ds.host)
    step = guarded(ds, TrainStep, pm, run.opt, batch_size=run.batch_size,
                   micro_batches=run.inflight if run.mode is Schedule.SYNC else 1)
    return pm, step


def _train_on(pl: Placement, ds: DeviceSet, keras_model: Any, run: RunSettings, x: np.ndarray,
              y: np.ndarray) -> TrainResult:
    assert run.steps is not None
    B, seed = run.batch_size, run.seed
    inflight = run.inflight
    pipeline_inflight = inflight if run.mode is Schedule.ASYNC else 1
    pm, step = _build_step(pl, ds, keras_model, run)
    traffic = measure_traffic(step)
    guarded(ds, step.warm_up, x[:B], y[:B])  # first call allocates; makes no update, not counted
    meta = {"placement_model": pl.graph.name, "grain": pl.grain, "method": pl.method, "k": pl.k,
            "devices": run.devices, "mode": run.mode.value, "inflight": inflight, "batch_size": B,
            "optimizer": run.opt.name, "lr": run.opt.lr, "traffic_bytes": traffic.to_dict()}
    bar = _Bar(run.steps) if run.progress else None
    dtrace = None
    trace = run.trace
    if trace is not None:  # a few extra steps under the profiler, before (and not in) the timed run
        from hgpart.runtime.devtrace import capture_device_trace

        def run_traced(n: int) -> None:
            guarded(ds, run_pipeline, step, x, y, steps=n, batch_size=B,
                    inflight=pipeline_inflight, seed=seed + 1)

        with restoring(step.state):  # the traced steps make no update either
            dtrace = capture_device_trace(step, ds, run_traced, trace, steps=max(2, inflight), inflight=inflight,
                                          meta=meta)
    t0 = time.perf_counter()
    try:
        rows = guarded(ds, run_pipeline, step, x, y, steps=run.steps, batch_size=B,
                       inflight=pipeline_inflight, on_step=bar.update if bar else None, seed=seed)
    finally:
        if bar is not None:
            bar.stop()
    secs = time.perf_counter() - t0
    trace_files: list[str] = []
    if dtrace is not None and trace is not None:
        trace_files = [str(dtrace.path), str(_write_trace(trace, rows, meta))]
    if run.log is not None:
        _write_log(run.log, rows, meta)
    pred = float(pl.recompute_metrics().comm_volume_mib) * 2**20 * B / pl.batch_size
    return TrainResult(steps=len(rows), images=len(rows) * B, seconds=secs, images_per_s=len(rows) * B / secs,
                       losses=[r.loss for r in rows], rows=rows, traffic=traffic, predicted_fwd_bytes=pred,
                       device_busy=dtrace.busy if dtrace is not None else [], trace_files=trace_files,
                       compute=pm.compute_overhead())


class _Bar:
    """The rich progress bar of a run: steps done, last loss, images per second."""

    def __init__(self, steps: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("loss {task.fields[loss]:.4f}  {task.fields[ips]:.1f} img/s"),
                                 TimeRemainingColumn())
        self.task = self.progress.add_task("train", total=steps, loss=float("nan"), ips=0.0)
        self.progress.start()

    def update(self, rec: StepRecord) -> None:
        self.progress.update(self.task, advance=1, loss=rec.loss, ips=rec.images_per_s)

    def stop(self) -> None:
        self.progress.stop()


def summary_json(res: TrainResult) -> str:
    """One JSON line with the headline figures (printed by the CLI)."""
    return json.dumps({"steps": res.steps, "images_per_s": round(res.images_per_s, 2),
                       "final_loss": res.losses[-1] if res.losses else None,
                       "traffic": res.traffic.to_dict() if res.traffic else None,
                       "predicted_fwd_bytes": res.predicted_fwd_bytes, "device_busy": res.device_busy})
