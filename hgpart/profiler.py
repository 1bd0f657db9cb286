"""Profiler: measure every layer's forward and backward time at one batch size.

Usage::

    from hgpart.profiler import profile_model
    prof = profile_model("vgg16", input_shape=(224, 224, 3), batch_size=32)
    prof.save(default_profile_path(...))

Why in isolation: the hypergraph needs a cost per layer (split evenly over the
layer's vertices), so each layer is timed on its own, on random inputs of the
right shape, inside a ``tf.function`` (graph mode, as training runs), after
``warmup`` untimed calls. Forward = the layer's call in training mode.
Backward = (forward + gradients w.r.t. the layer's inputs and weights, with a
random upstream gradient) minus forward, each the median of ``repeats``
timings taken alternately (so load from other processes hits both alike).
A layer with several inputs (Add, Concatenate) gets one random tensor per
input. Very quick layers are called several times per timing so that the
timer's resolution and the call overhead do not dominate.

Analytic mode (:func:`hgpart.profile.analytic_profile`) needs no timing.
Every profile records the machine (CPU model, cores, TensorFlow, Python, date),
the layer graph's fingerprint and the graph itself.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

from hgpart.errors import HgpartError
from hgpart.layergraph import Layer, LayerGraph
from hgpart.profile import LayerCost, Profile, analytic_profile

__all__ = ["configure_threads", "machine_info", "measure_profile", "profile_model", "MIN_TIMING_S"]

MIN_TIMING_S = 0.02  # a timing of a quick layer repeats its call until it lasts at least this long
_MAX_INNER = 64


def configure_threads(threads: int | None) -> None:
    """Set TensorFlow's intra/inter-op thread counts; must run before TensorFlow executes anything."""
    if not threads:
        return
    if threads < 1:
        raise HgpartError(f"thread count must be positive, got {threads}", where="--threads")
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(int(threads))
        tf.config.threading.set_inter_op_parallelism_threads(int(threads))
    except RuntimeError as exc:  # TF already initialised: keep going with its settings, but say so
        raise HgpartError(
            f"cannot set TensorFlow threads now ({exc})", where="--threads",
            fix="set threads before anything else runs TensorFlow in this process",
        ) from None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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
        "load_average_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def _activation_bytes(layer: Layer, batch_size: int) -> int:
    n = 1
    for v in layer.output_shape:
        n *= int(v)
    return int(batch_size * 4 * n)


def _inner_calls(fn: Callable[[], Any], warmup: int) -> int:
    """Warm ``fn`` up (the first call also traces) and choose how many calls make one timing."""
    for _ in range(max(1, warmup)):
        fn()
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    return 1 if first >= MIN_TIMING_S else min(_MAX_INNER, math.ceil(MIN_TIMING_S / max(first, 1e-7)))


def _time_pair(
    fwd: Callable[[], Any], fwd_bwd: Callable[[], Any], *, warmup: int, repeats: int
) -> tuple[float, float]:
    """Median seconds per call of ``fwd`` and of ``fwd_bwd``.

    The two are timed alternately within each repeat, so a burst of load from
    other processes hits both and their difference (the backward time) stays
    meaningful on a shared machine.
    """
    n_f = _inner_calls(fwd, warmup)
    n_fb = _inner_calls(fwd_bwd, warmup)
    t_f: list[float] = []
    t_fb: list[float] = []
    for _ in range(max(1, repeats)):
        for fn, n, out in ((fwd, n_f, t_f), (fwd_bwd, n_fb, t_fb)):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            out.append((time.perf_counter() - t0) / n)
    return float(statistics.median(t_f)), float(statistics.median(t_fb))


def _layer_timer(keras_layer: Any, layer: Layer, batch_size: int) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """Forward and forward+backward callables for one layer on random inputs."""
    import tensorflow as tf

    xs = [tf.random.normal((batch_size, *shape), seed=i) for i, shape in enumerate(layer.input_shapes)]
    dy = tf.random.normal((batch_size, *layer.output_shape), seed=99)
    weights = list(keras_layer.trainable_weights)
    multi = len(xs) > 1

    def call(inputs: list[Any]) -> Any:
        return keras_layer(inputs if multi else inputs[0], training=True)

    @tf.function(reduce_retracing=True)
    def forward(*inputs: Any) -> Any:
        return call(list(inputs))

    @tf.function(reduce_retracing=True)
    def forward_backward(*inputs: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(list(inputs))
            y = call(list(inputs))
        grads = tape.gradient(y, list(inputs) + weights, output_gradients=dy)
        return y, [g for g in grads if g is not None]

    return (lambda: forward(*xs)), (lambda: forward_backward(*xs))


def measure_profile(
    model: Any,
    graph: LayerGraph,
    *,
    batch_size: int,
    repeats: int = 5,
    warmup: int = 2,
    progress: bool = True,
) -> Profile:
    """Time every layer of ``model`` (whose layer graph is ``graph``) at ``batch_size``."""
    if batch_size < 1 or repeats < 1 or warmup < 0:
        raise HgpartError(
            f"batch size and repeats must be >= 1 and warm-up >= 0 (got {batch_size}, {repeats}, {warmup})",
            where="hgpart profile",
        )
    timed = [layer for layer in graph.layers if layer.inputs]  # every layer but the input
    load_at_start = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    results: dict[str, tuple[float, float]] = {}

    def run(advance: Callable[[str], None]) -> None:
        for layer in timed:
            advance(layer.name)
            keras_layer = model.get_layer(layer.config.get("keras_name", layer.name))
            fwd, fwd_bwd = _layer_timer(keras_layer, layer, batch_size)
            try:
                t_f, t_fb = _time_pair(fwd, fwd_bwd, warmup=warmup, repeats=repeats)
            except Exception as exc:  # noqa: BLE001 - e.g. out of memory: name the layer, keep no traceback
                raise HgpartError(
                    f"timing layer {layer.name!r} ({layer.keras_class}) failed: {exc.__class__.__name__}: "
                    f"{str(exc).splitlines()[0][:200] if str(exc) else ''}",
                    where=f"model {graph.name}", fix="try a smaller --batch-size",
                ) from None
            results[layer.name] = (t_f * 1e3, max(0.0, t_fb - t_f) * 1e3)

    if progress:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn("[bold]profiling[/] {task.fields[layer]:<28}"), BarColumn(),
            TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(), transient=False,
        ) as bar:
            task = bar.add_task("profile", total=len(timed), layer="")
            started = [False]

            def advance(name: str) -> None:
                if started[0]:
                    bar.advance(task)
                started[0] = True
                bar.update(task, layer=name)

            run(advance)
            bar.update(task, completed=len(timed), layer="done")
    else:
        run(lambda name: None)

    layers = [
        LayerCost(
            name=layer.name,
            forward_ms=round(results.get(layer.name, (0.0, 0.0))[0], 4),
            backward_ms=round(results.get(layer.name, (0.0, 0.0))[1], 4),
            flops=int(layer.flops),
            params=int(layer.params),
            activation_bytes=_activation_bytes(layer, batch_size),
        )
        for layer in graph.layers
    ]
    machine = machine_info()
    machine["load_average_1min_at_start"] = load_at_start
    return Profile(
        model=graph.name,
        input_shape=graph.input_shape,
        batch_size=batch_size,
        mode="measured",
        fingerprint=graph.fingerprint(),
        layers=layers,
        machine=machine,
        created=machine["date"],
        repeats=repeats,
        graph=graph.to_dict(),
    )


def profile_model(
    spec: str,
    *,
    input_shape: tuple[int, ...] | None = None,
    num_classes: int | None = None,
    batch_size: int = 32,
    repeats: int = 5,
    warmup: int = 2,
    analytic: bool = False,
    progress: bool = True,
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
    return measure_profile(model, graph, batch_size=batch_size, repeats=repeats, warmup=warmup, progress=progress)
