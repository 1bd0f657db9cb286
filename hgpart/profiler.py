"""Profiler: measure every layer's forward and backward time at one batch size.

Usage::

    from hgpart.profiler import pin_cores, profile_model
    pin_cores(1)                                   # the profile of a one-core local worker
    prof = profile_model("vgg16", input_shape=(64, 64, 3), batch_size=32)
    prof.save(default_profile_path(graph, 32, cores=1))

Why per layer: the hypergraph needs a cost per layer (split evenly over the
layer's vertices), so each layer is timed on its own, on random inputs of the
right shape, inside a ``tf.function`` (graph mode, as training runs), after
``warmup`` untimed calls. Forward = the layer's call in training mode;
forward+backward adds the gradients w.r.t. the layer's inputs and weights
for a random upstream gradient; backward is the difference. A layer with
several inputs (Add, Concatenate) gets one random tensor per input. Quick
layers are called several times per sample so that the timer's resolution
and the call overhead do not dominate. A layer with trainable weights also
has one optimizer update of them timed (the runtime's fused Adam kernel, on
variables of the same shapes) as an item of its own in the same rounds:
each device updates the weights it holds, so the update is part of the
layer's work (:meth:`hgpart.profile.Profile.work`).

Why robust: the machine is shared, so another process can take a core at any
moment. Samples are taken in rounds over all layers, in a fresh random order
each round, so a change of load hits every layer alike; a layer's cost is a
statistic of its samples that leaves delayed samples out (the low half by
default, see :mod:`hgpart.timing`), and rounds go on for a layer until that
cost's 95 % confidence half-width is within the target (5 %), up to
``max_rounds``. One training step of the whole model is sampled in the same
rounds, so the sum of the layers can be checked against it. The profile
records its setup (cores, pinning, threads, clock, statistic) and its quality
(each layer's spread, the whole step).

Analytic mode (:func:`hgpart.profile.analytic_profile`) needs no timing.
Every profile records the machine (CPU model, cores, TensorFlow, Python, date),
the layer graph's fingerprint and the graph itself.
"""

from __future__ import annotations

import datetime as _dt
import functools
import logging
import math
import os
import platform
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hgpart.errors import HgpartError
from hgpart.kinds import keras_layer, tfops
from hgpart.layergraph import Layer, LayerGraph
from hgpart.profile import SPREAD_TARGET, LayerCost, Profile, ProfileQuality, ProfileSetup, analytic_profile
from hgpart.timing import Clock, SampleSet, Statistic

__all__ = ["MeasureOptions", "configure_threads", "machine_info", "measure_profile", "pin_cores", "profile_model",
           "MIN_TIMING_S"]

MIN_TIMING_S = 0.02  # a sample of a quick layer repeats its call until it lasts at least this long
_MAX_INNER = 64
STEP_NAME = "<whole step>"
_UPDATE_MARK = " <update>"


def _update_name(layer: str) -> str:
    """The name under which a layer's optimizer update is sampled (and kept in ``samples_out``)."""
    return layer + _UPDATE_MARK


def configure_threads(threads: int | None, *, inter: int | None = None) -> None:
    """Set TensorFlow's intra-op (and inter-op, default the same) threads; must run before TensorFlow executes."""
    if not threads:
        return
    if threads < 1:
        raise HgpartError(f"thread count must be positive, got {threads}", where="--threads")
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(int(threads))
        tf.config.threading.set_inter_op_parallelism_threads(int(inter or threads))
    except RuntimeError as exc:  # TF already initialised: keep going with its settings, but say so
        raise HgpartError(
            f"cannot set TensorFlow threads now ({exc})", where="--threads",
            fix="set threads before anything else runs TensorFlow in this process",
        ) from None


def pin_cores(cores: int) -> tuple[int, ...]:
    """Pin this process to ``cores`` of its allowed cores and size TensorFlow's pools to them.

    This is how a local runtime worker runs (its own cores, intra-op threads =
    its core count), so a profile made after it is that worker's profile.
    The last cores are taken: pinned local workers fill the first cores.
    Returns the cores pinned to.
    """
    allowed = sorted(os.sched_getaffinity(0))
    if cores < 1 or cores > len(allowed):
        raise HgpartError(f"cannot pin to {cores} core(s): this process may use {len(allowed)} ({allowed})",
                          where="--cores", fix=f"pass --cores between 1 and {len(allowed)}")
    chosen = tuple(allowed[-cores:])
    os.sched_setaffinity(0, set(chosen))
    configure_threads(cores)
    return chosen


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _load1() -> float | None:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def machine_info() -> dict[str, Any]:
    """Where a measured profile was made: CPU, cores, thread settings, library versions, date."""
    import keras
    import tensorflow as tf

    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    return {
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count() or 0,
        "usable_cores": usable,
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_1min": _load1(),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


@dataclass(frozen=True)
class MeasureOptions:
    """How to sample: clock, statistic, rounds (at least ``min_rounds``; more, up to ``max_rounds``, for
    layers whose confidence half-width is above ``target``), warm-up calls, and whether to time a whole step."""

    clock: Clock = Clock.PROCESS_CPU
    statistic: Statistic = Statistic.LOW_HALF
    min_rounds: int = 5
    max_rounds: int = 15
    target: float = SPREAD_TARGET
    warmup: int = 1
    whole_step: bool = True
    seed: int = 0

    def check(self) -> None:
        if self.min_rounds < 1 or self.max_rounds < self.min_rounds or self.warmup < 0 or self.target <= 0:
            raise HgpartError(
                f"need 1 <= repeats <= max rounds, warm-up >= 0 and a positive target (got {self.min_rounds}, "
                f"{self.max_rounds}, {self.warmup}, {self.target})", where="hgpart profile")


def _inner_calls(fn: Callable[[], Any], warmup: int) -> int:
    """Warm ``fn`` up (the first call also traces) and choose how many calls make one sample."""
    for _ in range(max(1, warmup)):
        fn()
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    return 1 if first >= MIN_TIMING_S else min(_MAX_INNER, math.ceil(MIN_TIMING_S / max(first, 1e-7)))


@dataclass
class _Timed:
    """One thing sampled in every round: a layer (forward, and forward+backward) or the whole step (``fwd`` None).

    Each sample is read on both clocks, so the profile can be made with either.
    """

    name: str
    fwd: Callable[[], Any] | None
    fwd_bwd: Callable[[], Any]
    calls_f: int = 1
    calls_fb: int = 1
    work_per_call: int = 1  # times one call does the work (updates applied per call); costs are per one
    f: dict[Clock, SampleSet] = field(default_factory=lambda: {c: SampleSet() for c in Clock})
    fb: dict[Clock, SampleSet] = field(default_factory=lambda: {c: SampleSet() for c in Clock})

    def warm_up(self, warmup: int) -> None:
        if self.fwd is not None:
            self.calls_f = _inner_calls(self.fwd, warmup)
        self.calls_fb = _inner_calls(self.fwd_bwd, warmup)

    def sample(self) -> None:
        if self.fwd is not None:
            _sample_both(self.fwd, self.calls_f, self.f)
        _sample_both(self.fwd_bwd, self.calls_fb, self.fb)

    def converged(self, opts: MeasureOptions) -> bool:
        s = self.fb[opts.clock]
        return len(s) >= opts.min_rounds and s.rel_ci(opts.statistic) <= opts.target

    def cost_ms(self, opts: MeasureOptions) -> tuple[float, float]:
        """(forward, backward) milliseconds: backward = forward+backward minus forward, never negative."""
        total = self.fb[opts.clock].estimate(opts.statistic) * 1e3 / self.work_per_call
        fwd = min(total, self.f[opts.clock].estimate(opts.statistic) * 1e3) if self.fwd is not None else 0.0
        return fwd, total - fwd


def _sample_both(fn: Callable[[], Any], calls: int, out: dict[Clock, SampleSet]) -> None:
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(calls):
        fn()
    w1, c1 = time.perf_counter(), time.process_time()
    out[Clock.WALL].add((w1 - w0) / calls)
    out[Clock.PROCESS_CPU].add((c1 - c0) / calls)


def _separable_half(keras_layer: Any, layer: Layer) -> tuple[Callable[[list[Any]], Any], list[Any]]:
    """The op of one half of a SeparableConv2D (the front end makes it two layers, ``<name>.depthwise``
    and ``<name>``, which read its ``depthwise_kernel`` and ``pointwise_kernel``) and that half's weights,
    so each half is timed on its own input rather than the whole Keras layer twice."""
    cfg = layer.config
    if cfg["weight_names"]["kernel"] == "depthwise_kernel":
        dw = keras_layer.depthwise_kernel
        return (lambda xs: tfops.depthwise(xs[0], dw, cfg)), [dw]
    pw = keras_layer.pointwise_kernel
    bias = keras_layer.bias if cfg.get("use_bias") else None
    return (lambda xs: tfops.bias_act(tfops.conv(xs[0], pw, cfg), bias, cfg)), [pw] + ([bias] if bias is not None
                                                                                       else [])


def _layer_timer(keras_layer: Any, layer: Layer, batch_size: int, model_inputs: frozenset[str] = frozenset()
                 ) -> tuple[Callable[[], Any], Callable[[], Any], list[Any]]:
    """Forward and forward+backward callables for one layer on random inputs, and the weights they train.

    The backward computes the gradients of the weights and of every input but the model's own (``model_inputs``):
    training never needs the gradient of the images, so a first convolution's backward is its filter gradient
    alone, as in the runtime's step (``benchmarks/image_gradient_probe.py`` measures what it changed).
    """
    import tensorflow as tf

    xs = [tf.random.normal((batch_size, *shape), seed=i) for i, shape in enumerate(layer.input_shapes)]
    dy = tf.random.normal((batch_size, *layer.output_shape), seed=99)
    multi = len(xs) > 1
    if "weight_names" in layer.config:  # one half of a Keras layer the front end split
        call, weights = _separable_half(keras_layer, layer)
    else:
        weights = list(keras_layer.trainable_weights)

        def call(inputs: list[Any]) -> Any:
            return keras_layer(inputs if multi else inputs[0], training=True)

    @tf.function(reduce_retracing=True, autograph=False)
    def forward(*inputs: Any) -> Any:
        return call(list(inputs))

    needed = [i for i, name in enumerate(layer.inputs) if name not in model_inputs]

    @tf.function(reduce_retracing=True, autograph=False)
    def forward_backward(*inputs: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch([inputs[i] for i in needed])
            y = call(list(inputs))
        grads = tape.gradient(y, [inputs[i] for i in needed] + weights, output_gradients=dy)
        return y, [g for g in grads if g is not None]

    return (lambda: forward(*xs)), (lambda: forward_backward(*xs)), weights


#: a layer's update is applied this many times in one timed call when it has fewer parameters than
#: UPDATE_PARAMS_PER_CALL / repeats, up to _MAX_INNER: the call's own dispatch would dominate a small update,
#: which inside the runtime's step costs no dispatch of its own
UPDATE_PARAMS_PER_CALL = 1_000_000


def _update_timer(weights: list[Any]) -> tuple[Callable[[], Any], int]:
    """Adam updates of variables shaped like ``weights``, with the fused kernel the runtime's per-device
    optimizer uses (:func:`hgpart.kinds.tfops.fused_adam`), on a random gradient, and how many updates one call
    applies. Its own variables, so the model's weights stay as they are. The update is memory-bound, so what it
    costs depends on the layer's size (whether its weights and slots fit in cache), which is why it is timed per
    layer rather than modelled from a rate."""
    import tensorflow as tf

    params = sum(int(math.prod(w.shape)) for w in weights)
    repeats = min(_MAX_INNER, max(1, math.ceil(UPDATE_PARAMS_PER_CALL / max(params, 1))))
    slots = [(tf.Variable(tf.zeros(w.shape, w.dtype)), tf.Variable(tf.zeros(w.shape, w.dtype)),
              tf.Variable(tf.zeros(w.shape, w.dtype)), tf.random.normal(w.shape, dtype=w.dtype, seed=5))
             for w in weights]

    @tf.function(autograph=False)
    def update() -> None:
        for _ in range(repeats):  # unrolled: the updates of one variable run in order (they share it)
            for var, m, v, g in slots:
                tfops.fused_adam(var, m, v, g, t=1.0, lr=1e-9, beta_1=0.9, beta_2=0.999, epsilon=1e-7)

    return update, repeats


def _step_timer(model: Any, batch_size: int) -> Callable[[], Any]:
    """One training step of the whole model on random data: forward, loss, gradients, SGD update.

    The loss is the mean squared error against a random target of the
    output's shape (it works whatever the output activation is); SGD keeps
    the update, which the layer timings do not include, as small as it gets.
    """
    import keras
    import tensorflow as tf

    x = tf.random.normal((batch_size, *model.input_shape[1:]), seed=7)
    y = tf.random.uniform((batch_size, *model.output_shape[1:]), seed=8)
    opt = keras.optimizers.SGD(learning_rate=1e-6)
    variables = model.trainable_variables

    @tf.function(autograph=False)
    def step() -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
        return loss

    return step


class _RoundBar:
    """A rich progress line: one tick per round, with the number of items still being sampled."""

    def __init__(self, opts: MeasureOptions, enabled: bool) -> None:
        self.enabled = enabled
        self.opts = opts
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> _RoundBar:
        if self.enabled:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("[bold]profiling[/] {task.fields[what]:<34}"), BarColumn(),
                TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(), transient=False)
            self._progress.__enter__()
            self._task = self._progress.add_task("profile", total=1, what="")
        return self

    def phase(self, what: str, total: int) -> None:
        if self._progress is not None:
            self._progress.update(self._task, what=what, total=total, completed=0)

    def tick(self, what: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, what=what, advance=1)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)


def _timing_error(name: str, kind: str, graph_name: str, exc: Exception) -> HgpartError:
    first = str(exc).splitlines()[0][:200] if str(exc) else ""
    return HgpartError(f"timing {name!r} ({kind}) failed: {exc.__class__.__name__}: {first}",
                       where=f"model {graph_name}", fix="try a smaller --batch-size")


class _Rounds:
    """Build the timed items, warm them up, and sample them in interleaved rounds until they converge."""

    def __init__(self, model: Any, graph: LayerGraph, batch_size: int, opts: MeasureOptions) -> None:
        self.model, self.graph, self.batch_size, self.opts = model, graph, batch_size, opts
        self.items: list[_Timed] = []
        self.rounds = 0

    def prepare(self, bar: _RoundBar) -> None:
        """Trace and warm up every item; TensorFlow's warning that many functions were traced is expected here."""
        logger = logging.getLogger("tensorflow")
        level = logger.level
        logger.setLevel(logging.ERROR)
        try:
            self._prepare(bar)
        finally:
            logger.setLevel(level)

    def _prepare(self, bar: _RoundBar) -> None:
        layers = [layer for layer in self.graph.layers if layer.inputs]
        images = frozenset(layer.name for layer in self.graph.layers if not layer.inputs)
        bar.phase("warming up", len(layers) + int(self.opts.whole_step))
        for layer in layers:
            fwd, fwd_bwd, weights = _layer_timer(keras_layer(self.model, layer), layer, self.batch_size, images)
            item = _Timed(layer.name, fwd, fwd_bwd)
            self._guard(item, layer.keras_class, functools.partial(item.warm_up, self.opts.warmup))
            self.items.append(item)
            if weights:
                fn, repeats = _update_timer(weights)
                upd = _Timed(_update_name(layer.name), None, fn, work_per_call=repeats)
                self._guard(upd, f"{layer.keras_class} update", functools.partial(upd.warm_up, self.opts.warmup))
                self.items.append(upd)
            bar.tick(layer.name)
        if self.opts.whole_step:
            step = _Timed(STEP_NAME, None, _step_timer(self.model, self.batch_size))
            self._guard(step, "training step", functools.partial(step.warm_up, self.opts.warmup))
            self.items.append(step)
            bar.tick(STEP_NAME)

    def _guard(self, item: _Timed, kind: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - e.g. out of memory: name the layer, keep no traceback
            raise _timing_error(item.name, kind, self.graph.name, exc) from None

    def run(self, bar: _RoundBar) -> None:
        """Sample every item once a round, in a fresh random order, until all are within the target.

        Every item is sampled in every round, converged or not: a layer that stopped early would keep only the
        samples of the first rounds, taken under other conditions than the rest, and its cost would no longer be
        comparable with theirs (the point of interleaving).
        """
        rng = random.Random(self.opts.seed)
        bar.phase("sampling rounds", self.opts.max_rounds)
        for r in range(self.opts.max_rounds):
            order = list(self.items)
            rng.shuffle(order)
            for it in order:
                self._guard(it, "sample", it.sample)
            self.rounds = r + 1
            left = sum(not it.converged(self.opts) for it in self.items)  # converged() needs min_rounds samples
            bar.tick(f"round {r + 1}: {left} of {len(self.items)} above the target")
            if not left:
                break

    def item(self, name: str) -> _Timed | None:
        return next((it for it in self.items if it.name == name), None)


def _layer_cost(layer: Layer, item: _Timed | None, update: _Timed | None, batch_size: int,
                opts: MeasureOptions) -> LayerCost:
    fwd, bwd = item.cost_ms(opts) if item is not None else (0.0, 0.0)
    s = item.fb[opts.clock] if item is not None else None
    spread = None if s is None else round(min(s.rel_ci(opts.statistic), 99.0), 4)
    return LayerCost(name=layer.name, forward_ms=round(fwd, 4), backward_ms=round(bwd, 4), flops=int(layer.flops),
                     params=int(layer.params), activation_bytes=int(batch_size * 4 * math.prod(layer.output_shape)),
                     spread=spread, samples=len(s) if s is not None else None,
                     update_ms=round(update.cost_ms(opts)[1], 4) if update is not None else None)


def _setup(opts: MeasureOptions, machine: dict[str, Any]) -> ProfileSetup:
    affinity = tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else ()
    cores = len(affinity) or int(machine.get("logical_cores") or 0)
    pinned = bool(affinity) and len(affinity) < int(machine.get("logical_cores") or 0)
    return ProfileSetup(cores=cores, pinned=pinned, affinity=affinity if pinned else (),
                        intra_op_threads=int(machine.get("intra_op_threads") or 0),
                        inter_op_threads=int(machine.get("inter_op_threads") or 0), clock=opts.clock.value,
                        statistic=opts.statistic.value, interleaved=True, min_rounds=opts.min_rounds,
                        max_rounds=opts.max_rounds)


def measure_profile(
    model: Any,
    graph: LayerGraph,
    *,
    batch_size: int,
    options: MeasureOptions | None = None,
    progress: bool = True,
    samples_out: dict[str, Any] | None = None,
) -> Profile:
    """Time every layer of ``model`` (whose layer graph is ``graph``) and one whole step at ``batch_size``.

    ``samples_out``, when given, receives every raw sample (seconds per call,
    per item, per clock) for studies of the estimators.
    """
    opts = options or MeasureOptions()
    opts.check()
    if batch_size < 1:
        raise HgpartError(f"batch size must be >= 1 (got {batch_size})", where="hgpart profile")
    load_at_start, started = _load1(), time.perf_counter()
    rounds = _Rounds(model, graph, batch_size, opts)
    with _RoundBar(opts, progress) as bar:
        rounds.prepare(bar)
        rounds.run(bar)
    layers = [_layer_cost(layer, rounds.item(layer.name), rounds.item(_update_name(layer.name)), batch_size, opts)
              for layer in graph.layers]
    step = rounds.item(STEP_NAME)
    machine = machine_info()
    machine["load_average_1min_at_start"] = load_at_start
    quality = ProfileQuality(
        step_ms=round(step.cost_ms(opts)[1], 4) if step else None,
        step_spread=round(min(step.fb[opts.clock].rel_ci(opts.statistic), 99.0), 4) if step else None,
        target=opts.target, rounds=rounds.rounds, seconds=round(time.perf_counter() - started, 2))
    if samples_out is not None:
        samples_out.update({it.name: {"f": {c.value: s.samples for c, s in it.f.items()},
                                      "fb": {c.value: s.samples for c, s in it.fb.items()}} for it in rounds.items})
    return Profile(model=graph.name, input_shape=graph.input_shape, batch_size=batch_size, mode="measured",
                   fingerprint=graph.fingerprint(), layers=layers, machine=machine, created=machine["date"],
                   repeats=opts.min_rounds, graph=graph.to_dict(), recorded_setup=_setup(opts, machine),
                   quality=quality)


def profile_model(
    spec: str,
    *,
    input_shape: tuple[int, ...] | None = None,
    num_classes: int | None = None,
    batch_size: int = 32,
    options: MeasureOptions | None = None,
    analytic: bool = False,
    progress: bool = True,
    samples_out: dict[str, Any] | None = None,
) -> Profile:
    """Load model ``spec`` and profile it (measured by default, analytic on request)."""
    from hgpart.frontend import layer_graph_from_keras
    from hgpart.models import load_keras_model, model_name

    model = load_keras_model(spec, input_shape=input_shape, num_classes=num_classes)
    graph = layer_graph_from_keras(model, name=model_name(spec))
    if analytic:
        prof = analytic_profile(graph, batch_size)
        prof.graph = graph.to_dict()
        prof.machine = machine_info()
        return prof
    return measure_profile(model, graph, batch_size=batch_size, options=options, progress=progress,
                           samples_out=samples_out)


#: the CLI's default --max-rounds is this many times --repeats: a profile that cannot pin a layer down samples
#: for longer, so it averages over more of a shared machine's drift (benchmarks/results/profile_stability/)
MAX_ROUNDS_PER_REPEAT = 9


def rounds_for(repeats: int, max_rounds: int | None) -> tuple[int, int]:
    """(min, max) rounds from the CLI's --repeats and --max-rounds (default :data:`MAX_ROUNDS_PER_REPEAT` times
    the repeats)."""
    return repeats, max_rounds if max_rounds is not None else max(repeats, MAX_ROUNDS_PER_REPEAT * repeats)


def options_from(
    *, repeats: int, max_rounds: int | None, warmup: int, clock: str, statistic: str, target: float,
    whole_step: bool = True,
) -> MeasureOptions:
    """MeasureOptions from the CLI's strings, each unknown value a one-line error."""
    lo, hi = rounds_for(repeats, max_rounds)
    return MeasureOptions(clock=_enum(Clock, clock, "--clock"), statistic=_enum(Statistic, statistic, "--statistic"),
                          min_rounds=lo, max_rounds=hi, target=target, warmup=warmup, whole_step=whole_step)


def _enum(kind: Any, value: str, where: str) -> Any:
    choices: Sequence[str] = [m.value for m in kind]
    if value not in choices:
        raise HgpartError(f"unknown value {value!r}", where=where, fix=f"use one of {', '.join(choices)}")
    return kind(value)
