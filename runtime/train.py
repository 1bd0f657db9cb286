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
  batch may see weights of different ages. No locks order the updates; the result is not bit-reproducible.
* ``sync`` - one mini-batch per step, split into ``inflight`` micro-batches that flow through the devices together;
  gradients are accumulated and one update is applied, so the result equals single-device training with the same
  micro-batching (equal to plain training for models without BatchNorm, or with one micro-batch).

Traces (``trace=DIR``): after the warm-up, a few extra steps (max(2, inflight), not in the log or the timings; they
do update the weights) run under TensorFlow's profiler; ``DIR/devices_trace.json`` shows every device's ops in one
Chrome/Perfetto view and gives each device's busy fraction (``TrainResult.device_busy``; see
:mod:`hgpart.runtime.devtrace`). ``DIR/pipeline_trace.json`` shows the timed run's batches per in-flight slot.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from hgpart.runtime.pipeline import StepRecord, run_slots, shuffled_batches

from hgpart.errors import HgpartError
from hgpart.fileio import atomic_write_text, write_json
from hgpart.placement import Placement, load_placement

__all__ = ["train", "TrainResult", "load_dataset", "build_for_placement", "DATASETS", "MODES", "run_pipeline"]

DATASETS = ("synthetic", "digits")
MODES = ("async", "sync")


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
    #: fine placements: executed / assigned forward MACs of the fine convolutions (PartitionedModel.compute_overhead)
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
def load_dataset(name: str, input_shape: tuple[int, ...], num_classes: int, *, n: int = 512,
                 seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``synthetic``: seeded normal images and uniform labels. ``digits``: scikit-learn's 8x8 digits resized."""
    if name == "synthetic":
        rng = np.random.default_rng(seed)
        x = rng.normal(size=(n, *input_shape)).astype(np.float32)
        return x, rng.integers(0, num_classes, n).astype(np.int32)
    if name == "digits":
        if num_classes < 10:
            raise HgpartError(f"the model has {num_classes} classes; digits has 10", where="--dataset digits",
                              fix="use a model with >= 10 classes or --dataset synthetic")
        import tensorflow as tf
        from sklearn.datasets import load_digits

        d = load_digits()
        img = (d.images.astype(np.float32) / 16.0)[..., None]
        h, w, c = input_shape
        with tf.device("/CPU:0"):
            x = tf.image.resize(img, (h, w)).numpy()
        x = np.repeat(x, c, axis=-1) if c != 1 else x
        return x.astype(np.float32), d.target.astype(np.int32)
    raise HgpartError(f"unknown dataset {name!r}", where="--dataset", fix=f"use one of {DATASETS}")


# -------------------------------------------------------------------------------------------- models
def build_for_placement(pl: Placement, *, seed: int = 0) -> Any:
    """The Keras model of the placement's model name with a fixed seed, checked against the placement."""
    import keras

    from hgpart.frontend import layer_graph_from_keras
    from hgpart.models import load_keras_model

    keras.utils.set_random_seed(seed)
    g = pl.graph
    model = load_keras_model(g.name, input_shape=tuple(g.input_shape), num_classes=g.num_classes or None)
    pl.check_model(layer_graph_from_keras(model, name=g.name), where="placement vs Keras model")
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
def train(
    placement: str | Path | Placement,
    *,
    devices: str = "logical",
    batch_size: int | None = None,
    steps: int | None = None,
    epochs: float | None = None,
    mode: str = "async",
    optimizer: str = "adam",
    lr: float = 1e-3,
    dataset: str = "synthetic",
    inflight: int | None = None,
    trace: str | Path | None = None,
    log: str | Path | None = None,
    seed: int = 0,
    keras_model: Any = None,
    progress: bool = False,
    device_set: Any = None,
) -> TrainResult:
    """Train the placement's model on ``devices`` (see the module docstring); returns what was measured."""
    from hgpart.runtime.devices import open_devices
    from hgpart.runtime.step import OptimizerSpec

    pl = placement if isinstance(placement, Placement) else load_placement(placement)
    if mode not in MODES:
        raise HgpartError(f"unknown mode {mode!r}", where="--mode", fix=f"use one of {MODES}")
    opt = OptimizerSpec(optimizer, lr)
    B = int(batch_size or pl.batch_size)
    k_inflight = int(inflight or pl.k)
    if B < 1 or k_inflight < 1:
        raise HgpartError("batch size and in-flight batches must be >= 1", where="train")
    if mode == "sync" and B % k_inflight:
        raise HgpartError(f"batch size {B} is not divisible into {k_inflight} micro-batches", where="--mode sync",
                          fix="pass --inflight dividing the batch size")
    if dataset not in DATASETS:
        raise HgpartError(f"unknown dataset {dataset!r}", where="--dataset", fix=f"use one of {DATASETS}")
    g = pl.graph
    x, y = load_dataset(dataset, tuple(g.input_shape), g.num_classes or 10, n=max(512, 4 * B), seed=seed)
    if steps is None:
        steps = max(1, int(round((epochs or 1.0) * len(x) / B)))
    ds = device_set or open_devices(devices, pl.k, inter_op=max(4, k_inflight + 1))
    try:
        return _train_on(pl, ds, keras_model, opt, B, steps, mode, k_inflight, x, y, trace, log, seed, progress,
                         devices)
    finally:
        if device_set is None:
            ds.close()


def _train_on(pl: Placement, ds: Any, keras_model: Any, opt: Any, B: int, steps: int, mode: str, inflight: int,
              x: np.ndarray, y: np.ndarray, trace: Any, log: Any, seed: int, progress: bool,
              devices: str) -> TrainResult:
    import tensorflow as tf
    from hgpart.runtime.cluster import guarded  # a dead worker -> HgpartError in bounded time, not a hang
    from hgpart.runtime.partitioned import PartitionedModel
    from hgpart.runtime.step import TrainStep
    from hgpart.runtime.traffic import measure_traffic

    tf.config.set_soft_device_placement(False)
    model = keras_model if keras_model is not None else build_for_placement(pl, seed=seed)
    if keras_model is not None:
        from hgpart.frontend import layer_graph_from_keras

        pl.check_model(layer_graph_from_keras(keras_model, name=pl.graph.name), where="placement vs Keras model")
    pm = PartitionedModel(pl, model, ds.devices, host=getattr(ds, "host", None))
    step = TrainStep(pm, opt, batch_size=B, micro_batches=inflight if mode == "sync" else 1)
    traffic = measure_traffic(step)
    step(x[:B], y[:B])  # warm-up (first call allocates); not counted
    meta = {"placement_model": pl.graph.name, "grain": pl.grain, "method": pl.method, "k": pl.k,
            "devices": devices, "mode": mode, "inflight": inflight, "batch_size": B, "optimizer": opt.name,
            "lr": opt.lr, "traffic_bytes": traffic.to_dict()}
    bar = None
    if progress:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        bar = Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("loss {task.fields[loss]:.4f}  {task.fields[ips]:.1f} img/s"),
                       TimeRemainingColumn())
        task = bar.add_task("train", total=steps, loss=float("nan"), ips=0.0)
        bar.start()

    def on_step(rec: StepRecord) -> None:
        if bar is not None:
            bar.update(task, advance=1, loss=rec.loss, ips=rec.images_per_s)

    dtrace = None
    if trace is not None:  # a few extra steps under the profiler, before (and not in) the timed run
        from hgpart.runtime.devtrace import capture_device_trace

        n_trace = max(2, inflight)

        def run_traced(n: int) -> None:
            guarded(ds, run_pipeline, step, x, y, steps=n, batch_size=B,
                    inflight=inflight if mode == "async" else 1, seed=seed + 1)

        dtrace = capture_device_trace(step, ds, run_traced, Path(trace), steps=n_trace, inflight=inflight,
                                      meta=meta)
    t0 = time.perf_counter()
    try:
        if mode == "async":
            rows = guarded(ds, run_pipeline, step, x, y, steps=steps, batch_size=B, inflight=inflight,
                           on_step=on_step, seed=seed)
        else:
            rows = guarded(ds, run_pipeline, step, x, y, steps=steps, batch_size=B, inflight=1, on_step=on_step,
                           seed=seed)
    finally:
        if bar is not None:
            bar.stop()
    secs = time.perf_counter() - t0
    trace_files: list[str] = []
    if dtrace is not None:
        trace_files = [str(dtrace.path), str(_write_trace(Path(trace), rows, meta))]
    if log is not None:
        _write_log(Path(log), rows, meta)
    pred = float(pl.recompute_metrics().comm_volume_mib) * 2**20 * B / pl.batch_size
    return TrainResult(steps=len(rows), images=len(rows) * B, seconds=secs, images_per_s=len(rows) * B / secs,
                       losses=[r.loss for r in rows], rows=rows, traffic=traffic, predicted_fwd_bytes=pred,
                       device_busy=dtrace.busy if dtrace is not None else [], trace_files=trace_files,
                       compute=pm.compute_overhead())


def summary_json(res: TrainResult) -> str:
    """One JSON line with the headline figures (printed by the CLI)."""
    return json.dumps({"steps": res.steps, "images_per_s": round(res.images_per_s, 2),
                       "final_loss": res.losses[-1] if res.losses else None,
                       "traffic": res.traffic.to_dict() if res.traffic else None,
                       "predicted_fwd_bytes": res.predicted_fwd_bytes, "device_busy": res.device_busy})
