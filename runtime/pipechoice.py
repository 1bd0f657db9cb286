"""How a model-parallel training step runs: as pipeline stages or as one compiled function per step.

Usage::

    step = MeteredStep(placed, opt, batch_size=32)        # warmed up
    staged, choice = choose_pipeline(step, device_set, pipeline="auto", slots=None)
    choice.describe()   # "stages (2), 2 batches in flight: auto: one step takes at least 0.25 s"
    # staged is None: run the step with run_slots on choice.inflight threads;
    # else with stagepipe.run_staged(staged, ..., window=choice.inflight)

``hgpart train`` (:meth:`hgpart.runtime.api.PartitionedModel.staged_step`) and the measured comparison
(``hgpart compare-run``) both choose here, so the comparison measures model parallelism the way training runs it.

``pipeline``: ``stages`` (one compiled function per pipeline stage, 1F1B: :mod:`hgpart.runtime.stages`; only
for placements whose layers each sit on one part), ``graph`` (one multi-device function per step), or ``auto``.
``auto`` times one warm step of the whole-step function. A step of at least :data:`STAGES_MIN_STEP_S` runs as
stages (their per-call cost is small against it). A shorter one is timed both ways, each over
:data:`AUTO_TIMED_STEPS` steps (at least three windows) with its batches in flight (async, see below; sync: the
step's micro-batches), on the steps after the first window (the pipeline's fill is a one-off cost of a run), and
runs the way that was faster: per-stage calls cost the client a few hundred microseconds each, so which way wins
on a short step depends on the placement and the mode. No timing step's update is kept. If the stages fail to
build or run there, ``auto`` runs the whole-step function and says why.

Batches in flight (async): ``slots``, or by default (``slots=None``) one per stage, at most K + 1, when steps run as
stages (PipeDream's rule: a batch holds its place in the window from its first stage's forward to its first
stage's backward, so with fewer batches than stages some stage always waits) and K when they run as one function
per step (:func:`hgpart.placement.default_inflight`). Which default applies is known only once the pipeline is
chosen, so the choice carries it (:attr:`PipelineChoice.inflight`); ``auto`` times each way with its own default.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from hgpart.runtime.cluster import check, guarded
from hgpart.runtime.deviceset import DeviceSet
from hgpart.runtime.evaluation import MeteredStep
from hgpart.runtime.pipeline import run_slots, steady_rate
from hgpart.runtime.stagepipe import run_staged
from hgpart.runtime.stages import StagedStep, check_pipeline, plan_stages
from hgpart.runtime.step import restoring

from hgpart.errors import DeviceError, HgpartError
from hgpart.placement import default_inflight

__all__ = ["PipelineChoice", "choose_pipeline", "STAGES_MIN_STEP_S", "AUTO_TIMED_STEPS"]

#: ``pipeline="auto"`` runs steps as stages when one whole-step call takes at least this long (seconds)
STAGES_MIN_STEP_S = 0.25
#: ``pipeline="auto"``: a shorter step is timed over this many steps both as stages and as one function
AUTO_TIMED_STEPS = 8


@dataclass(frozen=True)
class PipelineChoice:
    """How a step ran: as ``stages`` (how many) or as one ``graph`` function per step, and why."""

    kind: str  # "stages" or "graph"
    stages: int = 0
    why: str = ""
    #: advice for the caller to show (async stages outnumbering the batches in flight), or ""
    note: str = ""
    #: async batches in flight the steps run with (the window of the stages, or the whole-step threads); 1 in sync
    inflight: int = 1

    def describe(self) -> str:
        """One line for the CLI, e.g. ``stages (3), 3 batches in flight: auto: one step takes at least 0.25 s``."""
        head = f"stages ({self.stages})" if self.kind == "stages" else "graph (one function per step)"
        if self.inflight > 1:
            head += f", {self.inflight} batches in flight"
        return f"{head}: {self.why}" if self.why else head


def inflight_note(staged: StagedStep, slots: int) -> str:
    """The note for an async stage pipeline with fewer batches in flight than stages."""
    n, devices = len(staged.stages), len({st.part for st in staged.stages})
    batches = f"{slots} batch{'es' if slots > 1 else ''}"
    advice = (f"--inflight {n} (one batch per stage, PipeDream's rule) keeps every stage busy" if n <= 2 * devices
              else f"more batches in flight keep the stages busier (up to one per stage: --inflight {n})")
    return (f"{n} pipeline stages on {devices} devices with {batches} in flight: a batch holds its place in the "
            f"window from its first stage's forward to its first stage's backward, so a stage may wait; {advice}, "
            f"at the cost of staler weights")


def choose_pipeline(step: MeteredStep, ds: DeviceSet, *, pipeline: str, slots: int | None
                    ) -> tuple[StagedStep | None, PipelineChoice]:
    """The stage pipeline of the warm ``step`` (built and warmed up), or None when steps run as one function, and
    the choice with its reason (see the module docstring). ``slots``: async batches in flight (1 in sync mode;
    None: the default of the way chosen, :func:`hgpart.placement.default_inflight`).
    Nothing is printed: the choice's ``note`` is for the caller to show (``hgpart train`` warns it as a note, the
    measured comparison keeps it in the run's notes)."""
    pipeline = check_pipeline(pipeline)
    staged = None
    stages = plan_stages(step.pm) if pipeline != "graph" else None
    why = ("--pipeline graph" if pipeline == "graph" else
           "the placement has no stages (a split layer cannot run piecewise)" if stages is None else
           "one stage" if len(stages) <= 1 else "")
    if stages is not None and len(stages) > 1:
        B = step.batch_size
        x = np.zeros((B, *step.pm.graph.input_shape), np.float32)
        y = np.zeros(B, np.int32)

        def batch(i: int) -> tuple[Any, Any]:
            return x, y

        with restoring(step.state):
            t = time.perf_counter()
            guarded(ds, step.run, x, y)
            slow = time.perf_counter() - t >= STAGES_MIN_STEP_S
        if pipeline == "stages" or slow:
            staged = _build_stages(step, ds, stages, batch)
            why = "--pipeline stages" if pipeline == "stages" else \
                f"auto: one step takes at least {STAGES_MIN_STEP_S} s"
        else:
            staged, why = _time_both(step, ds, stages, batch, slots)
    n = len(staged.stages) if staged is not None else 0
    inflight = _window(step, slots, n)
    # the note is for a number asked for; the default's cap is deliberate (hgpart.placement.default_inflight)
    asked = slots is not None and step.micro == 1
    note = inflight_note(staged, inflight) if staged is not None and asked and inflight < n else ""
    return staged, PipelineChoice("stages" if staged is not None else "graph", n, why, note, inflight)


def _window(step: MeteredStep, slots: int | None, stages: int) -> int:
    """Batches in flight of ``step`` run through ``stages`` stages (0: as one function): 1 in sync mode (its
    micro-batches flow together), else ``slots``, else the default."""
    return 1 if step.micro > 1 else slots or default_inflight(step.pm.k, stages)


def _build_stages(step: MeteredStep, ds: DeviceSet, stages: list[Any], batch: Callable[[int], Any]) -> StagedStep:
    """The stage functions of ``step``, traced and placed by 4 warm-up batches whose updates are undone."""
    staged = guarded(ds, StagedStep, step, stages)
    with restoring(step.state):
        guarded(ds, run_staged, staged, 4, batch, images_per_task=step.batch_size, window=2, micro=step.micro)
    return staged


def _time_both(step: MeteredStep, ds: DeviceSet, stages: list[Any], batch: Callable[[int], Any],
               slots: int | None) -> tuple[StagedStep | None, str]:
    """``auto`` on a short step: the stages if they ran faster than the whole-step function, and why. Each way
    runs ``slots`` batches in flight, or its own default."""
    B = step.batch_size
    g_slots, s_slots = _window(step, slots, 0), _window(step, slots, len(stages))
    n = max(AUTO_TIMED_STEPS, 3 * max(g_slots, s_slots))
    fix = "run with --pipeline graph"
    try:
        staged = _build_stages(step, ds, stages, batch)
        with restoring(step.state):
            graph = guarded(ds, run_slots, [lambda i: step.run(*batch(i))[0]] * g_slots, n, lambda i: (i,),
                            images_per_task=B, fix=fix)
            staged_recs = guarded(ds, run_staged, staged, n, batch, images_per_task=B, window=s_slots,
                                  micro=step.micro, fix=fix)
    except Exception as exc:  # noqa: BLE001 - a failure of the stage path: the whole-step function runs
        if isinstance(exc, HgpartError) and not isinstance(exc, DeviceError):
            raise  # a bad setting: the whole-step function would fail the same way
        check(ds)  # a worker that died is reported as such, not taken for a failure of the stages
        cause = exc.cause if isinstance(exc, DeviceError) and exc.cause else type(exc).__name__
        return None, f"auto: the stages failed ({cause}), one function per step runs"
    t_graph = steady_rate([r.end_s for r in graph], g_slots)
    t_stages = steady_rate([r.end_s for r in staged_recs], s_slots)
    warm = f"{g_slots}" if g_slots == s_slots else f"{s_slots} and {g_slots}"
    why = (f"auto timed {n} steps: stages {t_stages * B:.0f} images/s, graph {t_graph * B:.0f} images/s "
           f"after the first {warm}")
    return (staged if t_stages > t_graph else None), why
