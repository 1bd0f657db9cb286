"""A placement's model trained on K devices with Keras's verbs: fit, evaluate, predict, save.

Usage::

    from hgpart.runtime import PartitionedModel
    with PartitionedModel.from_placement("partitions/minivgg_coarse_k2.json", devices="local") as pm:
        hist = pm.fit(x, y, epochs=3, batch_size=32, validation_split=0.2, mode="sync")
        hist.history["val_accuracy"][-1]
        pm.evaluate(x_test, y_test)          # [loss, accuracy]
        pm.predict(x_test)                   # probabilities, as the Keras model gives them
        pm.save("trained.keras")             # plain Keras opens it: keras.saving.load_model("trained.keras")

``x`` may be an array (with ``y``), a :class:`~hgpart.runtime.data.Data` (``load_data("photos/", ...)``) or a
``--data`` value (``"digits"``, ``"x.npz"``, a folder). The devices open when the object is made and stay open
until :meth:`PartitionedModel.close` (or the end of the ``with`` block). ``hgpart train`` and
:func:`hgpart.runtime.train.train` run through :meth:`PartitionedModel.fit`: one training loop.

An epoch is ``steps_per_epoch`` steps (default: the full batches of the training data); the batch of every step
is fixed by the seed and the step index (:mod:`hgpart.runtime.data`), the epoch's steps run on the threaded
pipeline (:func:`hgpart.runtime.pipeline.run_slots`), then the validation data is evaluated in inference mode.
The returned :class:`History` has Keras's keys: ``loss`` and ``accuracy`` (means over the epoch's steps) and
``val_loss`` and ``val_accuracy``.
"""

from __future__ import annotations

import gc
import math
import os
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from hgpart.runtime.checkpoint import Checkpointer, CheckpointSettings, ResumeKey
from hgpart.runtime.cluster import guarded
from hgpart.runtime.data import ArrayData, Data, StepFeed, check_arrays, load_data
from hgpart.runtime.devices import open_devices
from hgpart.runtime.deviceset import DeviceSet
from hgpart.runtime.evaluation import Evaluator, MeteredStep, Metrics
from hgpart.runtime.heap import quiet_heap
from hgpart.runtime.modelsource import build_for_placement, check_init_weights, load_init_weights
from hgpart.runtime.multistep import STEPS_PER_CALL, MultiStep, call_sizes, run_calls
from hgpart.runtime.partitioned import PlacedModel
from hgpart.runtime.pipechoice import PipelineChoice, Runner, choose_pipeline
from hgpart.runtime.pipeline import StepRecord, run_slots
from hgpart.runtime.progress import EpochMetrics, FitProgress
from hgpart.runtime.stagepipe import run_staged
from hgpart.runtime.stages import check_pipeline
from hgpart.runtime.step import OptimizerSpec
from hgpart.runtime.strategy import Schedule

from hgpart.errors import BadOptionError, HgpartError
from hgpart.fileio import check_writable
from hgpart.notes import HgpartNote
from hgpart.placement import Placement, inter_op_threads, load_placement

__all__ = ["PartitionedModel", "History", "FitRow", "Segment", "plan_segments", "PipelineChoice", "inter_op_threads"]

#: what a data argument may be: arrays (with y), checked data, or a ``--data`` value
DataLike = Any


@dataclass(frozen=True)
class FitRow:
    """One finished training step: its pipeline record (global step index, seconds since fit started)."""

    record: StepRecord
    epoch: int
    accuracy: float


@dataclass
class History:
    """What :meth:`PartitionedModel.fit` measured, shaped like Keras's ``History``."""

    #: per metric (``loss``, ``accuracy``, ``val_loss``, ``val_accuracy``), one value per epoch
    history: dict[str, list[float]] = field(default_factory=dict)
    #: the epoch index of each entry
    epoch: list[int] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    #: every step, in finishing order
    rows: list[FitRow] = field(default_factory=list)
    #: wall seconds of the training steps (validation excluded)
    seconds: float = 0.0
    #: CPU seconds this (client) process spent over those steps, every thread: with local workers on the same
    #: cores, what the client takes from them
    client_cpu_seconds: float = 0.0

    def add(self, m: EpochMetrics) -> None:
        self.epoch.append(m.epoch)
        values = {"loss": m.loss, "accuracy": m.accuracy, "val_loss": m.val_loss, "val_accuracy": m.val_accuracy}
        for key, v in values.items():
            if v is not None:
                self.history.setdefault(key, []).append(float(v))


@dataclass(frozen=True)
class Segment:
    """The steps of one epoch that a run covers: global steps ``start .. start + steps - 1``."""

    epoch: int
    start: int
    steps: int


def plan_segments(*, total_steps: int, steps_per_epoch: int, start_step: int = 0) -> list[Segment]:
    """Steps ``start_step .. total_steps - 1`` cut at every multiple of ``steps_per_epoch`` (validation points)."""
    out: list[Segment] = []
    s = int(start_step)
    while s < total_steps:
        epoch = s // steps_per_epoch
        end = min(total_steps, (epoch + 1) * steps_per_epoch)
        out.append(Segment(epoch, s, end - s))
        s = end
    return out


@dataclass(frozen=True)
class _FitPlan:
    """The checked settings of one fit."""

    batch_size: int
    schedule: Schedule
    inflight: int
    segments: list[Segment]
    epochs: int
    verbose: int
    #: whether ``inflight`` was asked for (else async runs the pipeline's default: one batch per stage or K)
    inflight_given: bool = False

    @property
    def longest(self) -> int:
        """The most steps one segment of the fit makes (0 when it makes none)."""
        return max((seg.steps for seg in self.segments), default=0)

    @property
    def window(self) -> int | None:
        """The batches in flight to ask the pipeline for: async the given number or None (its default); sync 1."""
        if self.schedule is Schedule.SYNC:
            return 1
        return self.inflight if self.inflight_given else None


class PartitionedModel:
    """A placement's model on its K devices, trained and used like a Keras model (see the module docstring)."""

    def __init__(self, placement: Placement, keras_model: Any, placed: PlacedModel, device_set: DeviceSet, *,
                 optimizer: OptimizerSpec, seed: int = 0, inflight: int | None = None,
                 owns_devices: bool = False, pipeline: str = "auto", steps_per_call: int = STEPS_PER_CALL) -> None:
        self.placement = placement
        self.keras_model = keras_model
        self.placed = placed
        self.device_set = device_set
        self.optimizer = optimizer
        self.seed = int(seed)
        self.inflight = int(inflight or placement.k)
        self._inflight_given = bool(inflight)
        self._owns_devices = owns_devices
        self._step: MeteredStep | None = None
        self._evaluator: Evaluator | None = None
        self.pipeline = check_pipeline(pipeline)
        call_sizes(0, steps_per_call)
        self.steps_per_call = int(steps_per_call)
        self._staged: tuple[tuple[MeteredStep, int | None, int], Runner] | None = None
        #: how the last step given to :meth:`staged_step` runs (None before the first)
        self.pipeline_choice: PipelineChoice | None = None

    @classmethod
    def from_placement(cls, placement: str | Path | Placement, keras_model: Any = None, *, devices: str = "logical",
                       device_set: DeviceSet | None = None, optimizer: str = "adam", lr: float = 1e-3, seed: int = 0,
                       inflight: int | None = None, init_weights: str | Path | None = None,
                       pipeline: str = "auto", steps_per_call: int = STEPS_PER_CALL) -> PartitionedModel:
        """Open the devices and place the model's weights on them.

        Args:
            placement: a placement file (``hgpart partition``) or a loaded :class:`Placement`.
            keras_model: the Keras model to start from; None rebuilds the placement's model with ``seed``.
            devices: ``logical``, ``local``, ``gpu`` or ``cluster:SPEC`` (ignored when ``device_set`` is given).
            device_set: devices already open (the caller closes them); None opens ``devices``.
            optimizer: ``adam`` or ``momentum``; ``lr`` its learning rate.
            seed: the seed of the rebuilt model's weights and of the data order.
            inflight: batches in flight (async) or micro-batches (sync); None: K micro-batches, and async one batch
                per stage when steps run as stages, else K (:func:`hgpart.placement.default_inflight`).
            init_weights: a ``.keras`` or ``.weights.h5`` file of the same model whose weights replace the
                starting ones (checked before the devices open).
            pipeline: how steps run: ``stages`` (one compiled function per pipeline stage, 1F1B across stages,
                async or sync: :mod:`hgpart.runtime.stages`; only for placements whose layers each sit on one
                part), ``graph`` (one compiled multi-device function per step), ``compiled`` (``steps_per_call``
                steps per compiled call, pipelined inside it: :mod:`hgpart.runtime.multistep`), or ``auto``
                (``stages`` where they apply when a step takes at least
                :data:`~hgpart.runtime.pipechoice.STAGES_MIN_STEP_S`; on a shorter step, the way that ran fastest
                when every way was timed: :meth:`staged_step`).
            steps_per_call: training steps per call of the ``compiled`` pipeline.

        Raises:
            HgpartError: the placement, the model or the devices cannot be used.
        """
        import tensorflow as tf

        pl = placement if isinstance(placement, Placement) else load_placement(placement)
        opt = OptimizerSpec(optimizer, lr)
        if inflight is not None and inflight < 1:
            raise HgpartError(f"{inflight} batches in flight requested", where="--inflight",
                              fix="pass a number >= 1, or None for the default")
        init = check_init_weights(init_weights)
        check_pipeline(pipeline)
        call_sizes(0, steps_per_call)
        ds = device_set or open_devices(devices, pl.k, inter_op=inter_op_threads(pl.k, inflight))
        try:
            tf.config.set_soft_device_placement(False)
            model = keras_model if keras_model is not None else build_for_placement(pl, seed=seed)
            if init is not None:
                load_init_weights(model, init)
            placed = guarded(ds, PlacedModel, pl, model, ds.devices, host=ds.host)
        except BaseException:
            if device_set is None:
                ds.close()
            raise
        return cls(pl, model, placed, ds, optimizer=opt, seed=seed, inflight=inflight,
                   owns_devices=device_set is None, pipeline=pipeline, steps_per_call=steps_per_call)

    # ------------------------------------------------------------------------------------------- data
    def data(self, x: DataLike, y: np.ndarray | None = None, *, where: str = "x") -> Data:
        """``x`` (and ``y``) as checked :class:`Data` for this model."""
        g = self.placement.graph
        if isinstance(x, Data):
            return x
        if isinstance(x, np.ndarray):
            if y is None:
                raise HgpartError("images given without labels", where=where, fix="pass y with x")
            xa, ya = check_arrays(x, np.asarray(y), tuple(g.input_shape), g.num_classes or 10, where=where)
            return ArrayData(xa, ya, where=where)
        return load_data(x, input_shape=tuple(g.input_shape), num_classes=g.num_classes or 10, seed=self.seed,
                         host=self.device_set.host, where=where)

    def _validation(self, data: Data, validation_data: Any, validation_split: float) -> tuple[Data, Data | None]:
        """(training, validation) data; ``validation_data`` overrides ``validation_split``, as in Keras."""
        if validation_data is not None:
            if isinstance(validation_data, tuple):
                return data, self.data(*validation_data, where="validation_data")
            return data, self.data(validation_data, where="--val-data")
        if validation_split:
            return data.split(validation_split)
        return data, None

    # -------------------------------------------------------------------------------------------- fit
    def fit(self, x: DataLike, y: np.ndarray | None = None, *, epochs: int = 1, batch_size: int | None = None,
            validation_data: Any = None, validation_split: float = 0.0, mode: str | Schedule = "async",
            steps_per_epoch: int | None = None, verbose: int = 1, inflight: int | None = None,
            steps: int | None = None, initial_step: int = 0,
            on_step: Callable[[FitRow], None] | None = None,
            checkpoint: CheckpointSettings | None = None) -> History:
        """Train on ``x, y``, validating after every epoch; returns the :class:`History`.

        Args:
            x, y: the training data (see the module docstring).
            epochs: passes of ``steps_per_epoch`` steps.
            batch_size: None = the placement's batch size.
            validation_data: ``(x_val, y_val)``, a :class:`Data` or a ``--data`` value; overrides the split.
            validation_split: fraction of ``x`` (its last samples, as in Keras) kept for validation.
            mode: ``async`` (``inflight`` batches in flight) or ``sync`` (``inflight`` micro-batches per step).
            steps_per_epoch: None = the full batches of the training data.
            verbose: 0 silent, 1 a progress bar and one line per epoch.
            steps: train this many steps in total instead of ``epochs`` epochs (the last epoch may be partial).
            initial_step: the first step to run (to continue a run; its batches follow from the seed).
            on_step: called with every finished step.
            checkpoint: partitioned checkpoints every N steps into a folder, and resuming from its newest one
                (:mod:`hgpart.runtime.checkpoint`); a resumed fit continues at the checkpoint's step.

        Raises:
            HgpartError: a setting or the data does not fit the model, or a device failed.
        """
        train_data, val = self._validation(self.data(x, y), validation_data, validation_split)
        plan = self._plan(train_data, epochs=epochs, batch_size=batch_size, mode=mode, inflight=inflight,
                          steps_per_epoch=steps_per_epoch, steps=steps, initial_step=initial_step, verbose=verbose)
        return self._run(train_data, val, plan, on_step, checkpoint)

    def _plan(self, data: Data, *, epochs: int, batch_size: int | None, mode: str | Schedule,
              inflight: int | None, steps_per_epoch: int | None, steps: int | None, initial_step: int,
              verbose: int) -> _FitPlan:
        schedule = Schedule.parse(mode, where="mode")
        B = int(batch_size or self.placement.batch_size)
        k_in = int(inflight or self.inflight)
        if B < 1 or k_in < 1 or (schedule is Schedule.SYNC and B % k_in):
            raise HgpartError(f"batch size {B} cannot be split into {k_in} micro-batches", where="batch_size",
                              fix="pass a batch size divisible by inflight")
        spe = int(steps_per_epoch or data.steps_per_epoch(B))
        if epochs < 1 or spe < 1 or (steps is not None and steps < 1) or initial_step < 0:
            raise HgpartError(f"{epochs} epochs of {spe} steps ({steps} steps from step {initial_step}) requested",
                              where="fit", fix="pass epochs >= 1, steps >= 1 and initial_step >= 0")
        total = int(steps if steps is not None else epochs * spe)
        segments = plan_segments(total_steps=total, steps_per_epoch=spe, start_step=initial_step)
        return _FitPlan(B, schedule, k_in, segments, max(1, math.ceil(total / spe)), verbose,
                        bool(inflight) or self._inflight_given)

    def train_step(self, batch_size: int, mode: str | Schedule = "async", inflight: int | None = None) -> MeteredStep:
        """The compiled training step for this batch size and mode (made once, warmed up, optimizer kept)."""
        schedule = Schedule.parse(mode, where="mode")
        micro = int(inflight or self.inflight) if schedule is Schedule.SYNC else 1
        old = self._step
        if old is not None and old.batch_size == batch_size and old.micro == micro:
            return old
        ds = self.device_set
        step = guarded(ds, MeteredStep, self.placed, self.optimizer, batch_size=batch_size, micro_batches=micro)
        if old is not None:
            guarded(ds, step.adopt, old)
        zeros = np.zeros((batch_size, *self.placement.graph.input_shape), np.float32)
        guarded(ds, step.warm_up, zeros, np.zeros(batch_size, np.int32))
        self._step = step
        return step

    def staged_step(self, step: MeteredStep, window: int | None = None, *, longest: int | None = None) -> Runner:
        """What runs ``step`` (made once per step and window, warmed up): its stage pipeline, a
        :class:`~hgpart.runtime.multistep.MultiStep`, or None when steps run as one function:
        :func:`hgpart.runtime.pipechoice.choose_pipeline` with this model's ``pipeline``, its
        choice kept in :attr:`pipeline_choice` (whose ``inflight`` is the batches in flight to run with).
        ``window``: async batches in flight; None: the model's ``inflight`` if one was given, else the default of
        the way chosen. ``longest``: the most steps the run makes without a break (an epoch, or the whole run if
        shorter): a call of the compiled pipeline never has more, so a short run traces no longer call than it
        makes (tracing a call of N steps builds N steps' graphs)."""
        slots = 1 if step.micro > 1 else (window or (self.inflight if self._inflight_given else None))
        per_call = min(self.steps_per_call, longest) if longest else self.steps_per_call
        if self._staged is not None and self._staged[0] == (step, slots, per_call):
            return self._staged[1]
        staged, self.pipeline_choice = choose_pipeline(step, self.device_set, pipeline=self.pipeline, slots=slots,
                                                       steps_per_call=per_call)
        if self.pipeline_choice.note:
            warnings.warn(HgpartNote(self.pipeline_choice.note), stacklevel=2)
        self._staged = ((step, slots, per_call), staged)
        return staged

    def _run(self, data: Data, val: Data | None, plan: _FitPlan, on_step: Callable[[FitRow], None] | None,
             checkpoint: CheckpointSettings | None = None) -> History:
        step = self.train_step(plan.batch_size, plan.schedule, plan.inflight)
        keeper = None
        if checkpoint is not None and (checkpoint.enabled or checkpoint.resume):
            keeper = Checkpointer(checkpoint, self.placed, step, self.device_set, key=ResumeKey(
                seed=self.seed, batch_size=plan.batch_size, optimizer=self.optimizer.name, samples=len(data),
                mode=plan.schedule.value))
            plan = self._resumed(plan, guarded(self.device_set, keeper.restore))
        hist = History(params={"epochs": plan.epochs, "batch_size": plan.batch_size, "mode": plan.schedule.value,
                               "inflight": plan.inflight, "steps": sum(s.steps for s in plan.segments)})
        if plan.schedule is Schedule.ASYNC and plan.segments:  # the pipeline's default may differ from K
            self.staged_step(step, plan.window, longest=plan.longest)
            assert self.pipeline_choice is not None
            hist.params["inflight"] = self.pipeline_choice.inflight
        bar = None
        if plan.verbose and plan.segments:  # a resumed run's bar starts at the checkpoint's step
            first, last = plan.segments[0], plan.segments[-1]
            bar = FitProgress(last.start + last.steps, plan.epochs, done=first.start, epoch=first.epoch)
        loop = _EpochLoop(self, step, data, plan, bar, on_step, keeper)
        try:
            with quiet_heap():  # no full collection of the tracing's garbage in the middle of the steps
                for seg in plan.segments:
                    rows = loop.run(seg)
                    hist.rows.extend(rows)
                    m = self._epoch_metrics(seg.epoch, rows, val, plan.batch_size)
                    hist.add(m)
                    if bar is not None:
                        bar.epoch_end(m)
        finally:
            if bar is not None:
                bar.stop()
        hist.seconds = loop.seconds
        hist.client_cpu_seconds = loop.cpu_seconds
        return hist

    @staticmethod
    def _resumed(plan: _FitPlan, start: int) -> _FitPlan:
        """The plan's steps from ``start`` on (a restored checkpoint's step); refuses a plan already finished."""
        if not start:
            return plan
        total = plan.segments[-1].start + plan.segments[-1].steps if plan.segments else 0
        if start >= total:
            raise BadOptionError(f"the checkpoint is at step {start}, not before the run's last step {total}",
                                 where="--steps", fix=f"pass --steps greater than {start} to train further",
                                 option="--steps", value=total)
        segments = [Segment(seg.epoch, max(seg.start, start), seg.start + seg.steps - max(seg.start, start))
                    for seg in plan.segments if seg.start + seg.steps > start]
        return replace(plan, segments=segments)

    def _epoch_metrics(self, epoch: int, rows: list[FitRow], val: Data | None, batch_size: int) -> EpochMetrics:
        loss = float(np.mean([r.record.loss for r in rows]))
        acc = float(np.mean([r.accuracy for r in rows]))
        if val is None:
            return EpochMetrics(epoch, loss, acc)
        v = self._evaluate(val, batch_size)
        return EpochMetrics(epoch, loss, acc, v.loss, v.accuracy)

    # ----------------------------------------------------------------------------------- inference
    def _eval(self) -> Evaluator:
        if self._evaluator is None:
            self._evaluator = guarded(self.device_set, Evaluator, self.placed)
        return self._evaluator

    def _evaluate(self, data: Data, batch_size: int) -> Metrics:
        ev = self._eval()
        return guarded(self.device_set, ev.evaluate, data.eval_batches(batch_size))

    def evaluate(self, x: DataLike, y: np.ndarray | None = None, *, batch_size: int | None = None,
                 return_dict: bool = False, verbose: int = 0) -> list[float] | dict[str, float]:
        """Inference-mode ``[loss, accuracy]`` over ``x, y`` (``{"loss": ..., "accuracy": ...}`` with return_dict)."""
        m = self._evaluate(self.data(x, y), int(batch_size or self.placement.batch_size))
        if verbose:
            print(f"loss {m.loss:.4f} accuracy {m.accuracy:.4f}")
        return {"loss": m.loss, "accuracy": m.accuracy} if return_dict else [m.loss, m.accuracy]

    def predict(self, x: DataLike, *, batch_size: int | None = None, verbose: int = 0) -> np.ndarray:
        """The model's outputs (probabilities when it ends in softmax) for every sample of ``x``, in order."""
        B = int(batch_size or self.placement.batch_size)
        if isinstance(x, np.ndarray):
            xa = np.asarray(x, np.float32)
            batches = (xa[i:i + B] for i in range(0, len(xa), B))
        else:
            batches = (bx for bx, _ in self.data(x).eval_batches(B))
        ev = self._eval()
        return guarded(self.device_set, ev.predict, batches)

    # ------------------------------------------------------------------------------------- export
    def to_keras(self) -> Any:
        """The Keras model holding the trained weights (the model this object was made from, updated in place)."""
        weights = guarded(self.device_set, self.placed.keras_weights)
        model = self.keras_model
        for layer in self.placement.graph.layers:
            if layer.name not in weights:
                continue
            kl = model.get_layer(layer.config.get("keras_name", layer.name))
            rename = layer.config.get("weight_names", {})
            for name, value in weights[layer.name].items():
                getattr(kl, rename.get(name, name)).assign(value)
        return model

    def save(self, path: str | Path) -> Path:
        """Save the trained model as a ``.keras`` file that plain Keras loads (compiled with the loss and accuracy).

        The file is written under a temporary name and renamed, so an interrupted save leaves no partial file.
        """
        target = Path(path)
        if target.suffix != ".keras":
            raise HgpartError(f"cannot save a model as {str(target)!r}", where="--save",
                              fix="give the file the .keras suffix")
        check_writable(target, what="saved model", where="--save")
        model = self.to_keras()
        model.compile(optimizer=self.optimizer.keras(),
                      loss=_keras_loss(from_logits=not self.placed.final_softmax), metrics=["accuracy"])
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".keras", dir=target.parent)
        os.close(fd)
        try:
            model.save(tmp)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return target

    # ------------------------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Free the compiled functions and close the devices this object opened (idempotent)."""
        self._step = None
        self._evaluator = None
        if self.device_set.workers is not None:
            # Free the functions while the workers still run: TensorFlow deletes them on every worker, and after
            # the workers stop each deletion fails with an error line on stderr.
            gc.collect()
        if self._owns_devices:
            self.device_set.close()

    def __enter__(self) -> PartitionedModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _keras_loss(*, from_logits: bool) -> Any:
    import keras

    return keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits)


class _EpochLoop:
    """Runs the steps of one epoch segment on the pipeline and keeps the clock across segments."""

    def __init__(self, pm: PartitionedModel, step: MeteredStep, data: Data, plan: _FitPlan,
                 bar: FitProgress | None, on_step: Callable[[FitRow], None] | None,
                 keeper: Checkpointer | None = None) -> None:
        self.pm, self.step, self.data, self.plan, self.keeper = pm, step, data, plan, keeper
        self.bar, self.on_step = bar, on_step
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        self.done = 0
        self.accuracy: dict[int, float] = {}
        self.segment = Segment(0, 0, 0)
        self.feed: StepFeed | None = None

    def _slot(self, i: int) -> float:
        """One step in a pipeline thread: its batch (a failure to read it stops the run), then the training step."""
        assert self.feed is not None
        x, y = self.feed(i)
        loss, acc = self.step.run(x, y)
        self.accuracy[i] = acc
        return loss

    def _finished(self, rec: StepRecord) -> None:
        """Called by the driver (under its lock) for every finished step."""
        i = self.segment.start + rec.step
        if self.bar is not None:
            self.bar.step(loss=rec.loss, accuracy=self.accuracy[i], images_per_s=rec.images_per_s)
        if self.on_step is not None:
            self.on_step(self._row(rec))

    def _row(self, rec: StepRecord) -> FitRow:
        """``rec`` with its global step index, on the clock of the whole fit."""
        i = self.segment.start + rec.step
        B = self.plan.batch_size
        done_here = round(rec.images_per_s * rec.end_s / B)  # the driver's count of finished steps
        end_s = rec.end_s + self.seconds
        g = replace(rec, step=i, start_s=rec.start_s + self.seconds, end_s=end_s,
                    images_per_s=(self.done + done_here) * B / max(end_s, 1e-9))
        return FitRow(g, self.segment.epoch, self.accuracy[i])

    def run(self, seg: Segment) -> list[FitRow]:
        """The epoch segment's steps, cut at every checkpoint step; a checkpoint is saved after each cut."""
        keeper = self.keeper
        every = keeper.settings.every if keeper is not None and keeper.settings.enabled else 0
        rows: list[FitRow] = []
        at, end = seg.start, seg.start + seg.steps
        while at < end:
            stop = min(end, (at // every + 1) * every) if every else end
            rows += self._run_part(Segment(seg.epoch, at, stop - at))
            at = stop
            if keeper is not None and keeper.settings.enabled and (at == self.last or (every and at % every == 0)):
                guarded(self.pm.device_set, keeper.save, at)
        return rows

    @property
    def last(self) -> int:
        """The step after the plan's last one."""
        s = self.plan.segments[-1]
        return s.start + s.steps

    def _run_part(self, seg: Segment) -> list[FitRow]:
        ds, plan = self.pm.device_set, self.plan
        self.segment = seg
        staged = self.pm.staged_step(self.step, plan.window, longest=plan.longest)
        group = staged.steps_per_call if isinstance(staged, MultiStep) else 1  # read as the calls take them
        self.feed = self.data.feed(batch_size=plan.batch_size, seed=self.pm.seed, start_step=seg.start,
                                   steps=seg.steps, host=ds.host, group=group)
        assert self.pm.pipeline_choice is not None
        slots = self.pm.pipeline_choice.inflight
        micro = plan.inflight if plan.schedule is Schedule.SYNC else 1
        fix = "check the devices (a worker may have died) and the placement"
        if isinstance(staged, MultiStep):  # each size of call this part makes is traced and placed untimed
            self.feed.ready(seg.start)  # the first call's batches read before, not after, the warm-up
            guarded(ds, staged.warm, [seg.steps])
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            recs = self._drive(seg, staged, slots, micro, fix)
        finally:
            self.feed.close()
        rows = [self._row(r) for r in recs]
        self.seconds += time.perf_counter() - t0
        self.cpu_seconds += time.process_time() - c0
        self.done += len(recs)
        return rows

    def _drive(self, seg: Segment, staged: Runner, slots: int, micro: int, fix: str) -> list[StepRecord]:
        """Run the segment's steps through the stages, the compiled calls or the step-function slots; one record
        per step."""
        ds, plan, feed = self.pm.device_set, self.plan, self.feed
        assert feed is not None

        def task(i: int) -> tuple[Any, Any]:
            return feed(seg.start + i)

        def metric(i: int, acc: float) -> None:
            self.accuracy[seg.start + i] = acc

        if isinstance(staged, MultiStep):
            return guarded(ds, run_calls, staged, seg.steps, task, images_per_task=plan.batch_size,
                           on_step=self._finished, on_metrics=metric, fix=fix,
                           block=lambda i, n: feed.block(seg.start + i, n))
        if staged is None:
            return guarded(ds, run_slots, [self._slot] * slots, seg.steps, lambda i: (seg.start + i,),
                           images_per_task=plan.batch_size, on_step=self._finished, fix=fix)
        return guarded(ds, run_staged, staged, seg.steps, task, images_per_task=plan.batch_size, window=slots,
                       micro=micro, on_step=self._finished, on_metrics=metric, fix=fix)
