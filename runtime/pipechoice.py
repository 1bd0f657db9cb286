"""How a model-parallel training step runs: as pipeline stages, as one compiled function per step, or as several
steps per compiled call.

Usage::

    step = MeteredStep(placed, opt, batch_size=32)        # warmed up
    runner, choice = choose_pipeline(step, device_set, pipeline="auto", slots=None)
    choice.describe()   # "stages (2), 2 batches in flight: auto: one step takes at least 0.25 s"
    # runner is None: run the step with run_slots on choice.inflight threads; a StagedStep: with
    # stagepipe.run_staged(runner, ..., window=choice.inflight); a MultiStep: runner.run(n stacked batches)

``hgpart train`` (:meth:`hgpart.runtime.api.PartitionedModel.staged_step`) and the measured comparison
(``hgpart compare-run``) both choose here, so the comparison measures model parallelism the way training runs it.

``pipeline``: ``stages`` (one compiled function per pipeline stage, 1F1B: :mod:`hgpart.runtime.stages`; only
for placements whose layers each sit on one part), ``graph`` (one multi-device function per step), ``compiled``
(``steps_per_call`` steps per compiled call, pipelined in 1F1B order inside it: :mod:`hgpart.runtime.multistep`),
or ``auto``. ``auto`` times one warm step of the whole-step function. A step of at least :data:`STAGES_MIN_STEP_S`
runs as stages where the placement has them, else as one function (their per-call cost is small against it). A
shorter one is timed every way that applies (graph; stages; compiled), each over at least
:data:`AUTO_TIMED_STEPS` steps with its batches in flight (async, see below; sync: the step's micro-batches), on
the steps after its fill (the first window, or the first call: one-off costs of a run), and runs the way that was
fastest: per-call costs of a few hundred microseconds weigh on a short step, so which way wins depends on the
placement and the mode. No timing step's update is kept, and no full garbage collection falls inside a timed
way (:func:`hgpart.runtime.heap.quiet_heap`): one would idle every worker and could decide the choice. If a way
fails to build or run there, ``auto`` leaves it out and says why.

Batches in flight (async): ``slots``, or by default (``slots=None``) one per stage, at most K + 1, when steps run as
stages (PipeDream's rule: a batch holds its place in the window from its first stage's forward to its first stage's
backward, so with fewer batches than stages some stage always waits), K + 1 compiled (1 on one device), and K as
one function per step (:func:`hgpart.placement.default_inflight`). Which default applies is known only once the pipeline
is chosen, so the choice carries it (:attr:`PipelineChoice.inflight`); ``auto`` times each way with its own default.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
from hgpart.runtime.cluster import check, guarded
from hgpart.runtime.deviceset import DeviceSet
from hgpart.runtime.evaluation import MeteredStep
from hgpart.runtime.heap import quiet_heap
from hgpart.runtime.multistep import STEPS_PER_CALL, MultiStep, call_sizes, run_calls
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
    """How a step ran: as ``stages`` (how many), as one ``graph`` function per step, or ``compiled`` (how many steps
    per call), and why."""

    kind: str  # "stages", "graph" or "compiled"
    stages: int = 0
    why: str = ""
    #: advice for the caller to show (async stages outnumbering the batches in flight), or ""
    note: str = ""
    #: async batches in flight the steps run with (the window of the stages, or the whole-step threads); 1 in sync
    inflight: int = 1
    #: ``compiled``: training steps per call
    steps_per_call: int = 1

    def describe(self) -> str:
        """One line for the CLI, e.g. ``stages (3), 3 batches in flight: auto: one step takes at least 0.25 s``."""
        head = (f"stages ({self.stages})" if self.kind == "stages" else
                f"compiled ({self.steps_per_call} steps per call)" if self.kind == "compiled" else
                "graph (one function per step)")
        if self.inflight > 1:
            head += f", {self.inflight} batches in flight"
        return f"{head}: {self.why}" if self.why else head


#: what runs the steps: the stage pipeline, several steps per call, or None (the whole-step function)
Runner: TypeAlias = StagedStep | MultiStep | None


def inflight_note(staged: StagedStep, slots: int) -> str:
    """The note for an async stage pipeline with fewer batches in flight than stages."""
    n, devices = len(staged.stages), len({st.part for st in staged.stages})
    batches = f"{slots} batch{'es' if slots > 1 else ''}"
    advice = (f"--inflight {n} (one batch per stage, PipeDream's rule) keeps every stage busy" if n <= 2 * devices
              else f"more batches in flight keep the stages busier (up to one per stage: --inflight {n})")
    return (f"{n} pipeline stages on {devices} devices with {batches} in flight: a batch holds its place in the "
            f"window from its first stage's forward to its first stage's backward, so a stage may wait; {advice}, "
            f"at the cost of staler weights")


def choose_pipeline(step: MeteredStep, ds: DeviceSet, *, pipeline: str, slots: int | None,
                    steps_per_call: int = STEPS_PER_CALL) -> tuple[Runner, PipelineChoice]:
    """What runs the warm ``step`` (built and warmed up): a stage pipeline, a :class:`MultiStep`, or None when steps
    run as one function, and the choice with its reason (see the module docstring). ``slots``: async batches in
    flight (1 in sync mode; None: the default of the way chosen, :func:`hgpart.placement.default_inflight`).
    Nothing is printed: the choice's ``note`` is for the caller to show (``hgpart train`` warns it as a note, the
    measured comparison keeps it in the run's notes)."""
    pipeline = check_pipeline(pipeline)
    call_sizes(0, steps_per_call)  # a bad number is refused before any timing
    stages = plan_stages(step.pm) if pipeline != "graph" else None
    n_st = len(stages) if stages is not None and len(stages) > 1 else 0
    runner: Runner = None
    why = ("--pipeline graph" if pipeline == "graph" else
           "the placement has no stages (a split layer cannot run piecewise)" if stages is None else
           "one stage" if len(stages) <= 1 else "")
    B = step.batch_size
    x = np.zeros((B, *step.pm.graph.input_shape), np.float32)
    y = np.zeros(B, np.int32)

    def batch(i: int) -> tuple[Any, Any]:
        return x, y

    if pipeline == "compiled":
        runner = _build_compiled(step, ds, _window(step, slots, n_st, compiled=True), steps_per_call)
        why = "--pipeline compiled"
    elif pipeline == "stages" and n_st and stages is not None:
        runner, why = _build_stages(step, ds, stages, batch), "--pipeline stages"
    elif pipeline == "auto":
        with restoring(step.state):
            t = time.perf_counter()
            guarded(ds, step.run, x, y)
            slow = time.perf_counter() - t >= STAGES_MIN_STEP_S
        if slow and n_st and stages is not None:
            runner = _build_stages(step, ds, stages, batch)
            why = f"auto: one step takes at least {STAGES_MIN_STEP_S} s"
        elif not slow:
            runner, why = _time_all(step, ds, stages if n_st else None, batch, slots, steps_per_call)
    kind = ("stages" if isinstance(runner, StagedStep) else "compiled" if isinstance(runner, MultiStep) else "graph")
    inflight = runner.inflight if isinstance(runner, MultiStep) else _window(step, slots, n_st if runner else 0)
    # the note is for a number asked for; the default's cap is deliberate (hgpart.placement.default_inflight)
    asked = slots is not None and step.micro == 1
    note = (inflight_note(runner, inflight) if isinstance(runner, StagedStep) and asked
            and inflight < len(runner.stages) else "")
    return runner, PipelineChoice(kind, len(runner.stages) if isinstance(runner, StagedStep) else 0, why, note,
                                  inflight, runner.steps_per_call if isinstance(runner, MultiStep) else 1)


def _window(step: MeteredStep, slots: int | None, stages: int, *, compiled: bool = False) -> int:
    """Batches in flight of ``step`` run through ``stages`` stages (0: as one function) or ``compiled``: 1 in sync
    mode (its micro-batches flow together), else ``slots``, else the default."""
    return 1 if step.micro > 1 else slots or default_inflight(step.pm.k, stages, compiled=compiled)


def _build_stages(step: MeteredStep, ds: DeviceSet, stages: list[Any], batch: Callable[[int], Any]) -> StagedStep:
    """The stage functions of ``step``, traced and placed by 4 warm-up batches whose updates are undone."""
    staged = guarded(ds, StagedStep, step, stages)
    with restoring(step.state):
        guarded(ds, run_staged, staged, 4, batch, images_per_task=step.batch_size, window=2, micro=step.micro)
    return staged


def _build_compiled(step: MeteredStep, ds: DeviceSet, inflight: int, steps_per_call: int) -> MultiStep:
    """The ``steps_per_call``-step function of ``step``, traced and placed by one call whose updates are undone."""
    ms = MultiStep(step, steps_per_call=steps_per_call, inflight=inflight)
    guarded(ds, ms.warm, [steps_per_call])
    return ms


def _time_all(step: MeteredStep, ds: DeviceSet, stages: list[Any] | None, batch: Callable[[int], Any],
              slots: int | None, steps_per_call: int) -> tuple[Runner, str]:
    """``auto`` on a short step: whichever of the whole-step function, the stages (if any) and the compiled steps
    ran fastest, and why. Each way runs ``slots`` batches in flight, or its own default."""
    B = step.batch_size
    n_st = len(stages) if stages is not None else 0
    g_slots, s_slots = _window(step, slots, 0), _window(step, slots, n_st)
    n = max(AUTO_TIMED_STEPS, 3 * max(g_slots, s_slots))
    fix = "run with --pipeline graph"
    rates: dict[str, float] = {}
    runners: dict[str, Runner] = {"graph": None}
    failed: list[str] = []
    with restoring(step.state), quiet_heap():
        graph = guarded(ds, run_slots, [lambda i: step.run(*batch(i))[0]] * g_slots, n, lambda i: (i,),
                        images_per_task=B, fix=fix)
        rates["graph"] = steady_rate([r.end_s for r in graph], g_slots) * B
    if stages is not None:
        try:
            staged = _build_stages(step, ds, stages, batch)
            with restoring(step.state), quiet_heap():
                recs = guarded(ds, run_staged, staged, n, batch, images_per_task=B, window=s_slots,
                               micro=step.micro, fix=fix)
            rates["stages"], runners["stages"] = steady_rate([r.end_s for r in recs], s_slots) * B, staged
        except Exception as exc:  # noqa: BLE001 - a failure of the stage path: the other ways run
            failed.append(f"stages ({_cause(exc, ds)})")
    try:
        ms = _build_compiled(step, ds, _window(step, slots, n_st, compiled=True), steps_per_call)
        with restoring(step.state), quiet_heap():  # whole calls, on the driver the run uses
            recs = guarded(ds, run_calls, ms, -(-n // steps_per_call) * steps_per_call, batch, images_per_task=B,
                           fix=fix)
        rates["compiled"], runners["compiled"] = recs[-1].images_per_s, ms
    except Exception as exc:  # noqa: BLE001 - a failure of the compiled path: the other ways run
        failed.append(f"compiled ({_cause(exc, ds)})")
    best = max(rates, key=lambda k: rates[k])
    timed = ", ".join(f"{k} {v:.0f} images/s" for k, v in sorted(rates.items(), key=lambda kv: -kv[1]))
    why = f"auto timed at least {n} steps each way: {timed}" + (f"; failed: {', '.join(failed)}" if failed else "")
    return runners[best], why


def _cause(exc: Exception, ds: DeviceSet) -> str:
    """Why a way failed while ``auto`` timed it; a bad setting or a dead worker is raised instead."""
    if isinstance(exc, HgpartError) and not isinstance(exc, DeviceError):
        raise exc  # a bad setting: the whole-step function would fail the same way
    check(ds)  # a worker that died is reported as such, not taken for a failure of one way
    return exc.cause if isinstance(exc, DeviceError) and exc.cause else type(exc).__name__
