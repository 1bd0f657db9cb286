"""``hgpart info`` and ``hgpart profile``: look at a model's layer graph, measure its layers.

Usage::

    hgpart info --model vgg16 --input 224
    hgpart profile --model vgg16 --input 224 --batch-size 32          # measured
    hgpart profile --model minivgg --input 32 --batch-size 32 --analytic
    hgpart profile --model resnet18 --input 32 --cores 1     # a one-core worker: profiles/resnet18_32_b32_c1.json
    hgpart profile --compare profiles/a.json profiles/b.json

TensorFlow is imported only when a command runs, so the CLI starts quickly.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from hgpart.commands import app

__all__ = ["info", "profile"]

MODEL_HELP = "zoo name (vgg16, resnet18, minivgg, ...), keras:<Application> (e.g. keras:VGG16), or a .keras file"
INPUT_HELP = "input size: 224 (=224x224x3), 32x32x1, ... (default: the model's own)"


def _fmt_int(v: int) -> str:
    return f"{v:,}"


@app.command()
def info(
    model: str = typer.Option(..., "--model", "-m", help=MODEL_HELP),
    input: str | None = typer.Option(None, "--input", "-i", help=INPUT_HELP),
    classes: int | None = typer.Option(None, "--classes", help="number of classes (default: the model's own)"),
) -> None:
    """Print the layer graph: layers, kinds, shapes, parameters, FLOPs, totals and fingerprint."""
    from rich.console import Console
    from rich.table import Table

    from hgpart.models import load_graph, parse_input

    graph = load_graph(model, input_shape=parse_input(input), num_classes=classes)
    table = Table(title=f"{graph.name}  input {list(graph.input_shape)}  classes {graph.num_classes}")
    for col, justify in [("#", "right"), ("layer", "left"), ("kind", "left"), ("inputs", "left"),
                         ("output", "left"), ("params", "right"), ("MFLOP", "right")]:
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for i, layer in enumerate(graph.layers):
        table.add_row(
            str(i), layer.name, layer.kind, ", ".join(layer.inputs), "x".join(map(str, layer.output_shape)),
            _fmt_int(layer.params), f"{layer.flops / 1e6:,.2f}",
        )
    total_flops = sum(layer.flops for layer in graph.layers)
    table.add_section()
    table.add_row("", "total", f"{len(graph.layers)} layers", "", "", _fmt_int(graph.total_params),
                  f"{total_flops / 1e6:,.2f}")
    console = Console()
    console.print(table)
    console.print(
        f"vertex layers: {len(graph.vertex_layers)}   forward GFLOP/sample: {total_flops / 1e9:.3f}   "
        f"fingerprint: {graph.fingerprint()}",
        highlight=False,
    )


def _graph_and_model(model: str, input: str | None, classes: int | None) -> tuple[Any, Any]:
    """(layer graph, Keras model) of a model spec: the output path depends on the graph's name and input."""
    from hgpart.frontend import layer_graph_from_keras
    from hgpart.models import load_keras_model, model_name, parse_input

    keras_model = load_keras_model(model, input_shape=parse_input(input), num_classes=classes)
    return layer_graph_from_keras(keras_model, name=model_name(model)), keras_model


def _measure(graph: Any, keras_model: Any, *, batch_size: int, options: Any, analytic: bool) -> Any:
    """The measured profile, or the analytic one (FLOP counts) with the graph and machine recorded."""
    from hgpart.profile import analytic_profile
    from hgpart.profiler import machine_info, measure_profile

    if not analytic:
        return measure_profile(keras_model, graph, batch_size=batch_size, options=options)
    prof = analytic_profile(graph, batch_size)
    prof.graph = graph.to_dict()
    prof.machine = machine_info()
    return prof


@app.command()
def profile(
    model: str | None = typer.Option(None, "--model", "-m", help=MODEL_HELP),
    input: str | None = typer.Option(None, "--input", "-i", help=INPUT_HELP),
    classes: int | None = typer.Option(None, "--classes", help="number of classes (default: the model's own)"),
    batch_size: int = typer.Option(32, "--batch-size", "-b", help="batch size B"),
    repeats: int = typer.Option(5, "--repeats", help="sampling rounds at least (every layer is sampled once a round)"),
    max_rounds: int | None = typer.Option(None, "--max-rounds", help="rounds at most, for layers above the "
                                          "--target spread (default 9 x --repeats)"),
    target: float = typer.Option(0.05, "--target", help="relative 95 % confidence half-width a layer is sampled to"),
    clock: str = typer.Option("process_cpu", "--clock", help="process_cpu (CPU time of the process: time other "
                              "processes take is not counted) or wall"),
    statistic: str = typer.Option("low_half", "--statistic", help="low_half (mean of the lower half of the "
                                  "samples), min or median"),
    warmup: int = typer.Option(1, "--warmup", help="untimed calls per layer before timing (the first traces)"),
    analytic: bool = typer.Option(False, "--analytic", help="FLOP counts instead of timing (no measurement)"),
    out: Path | None = typer.Option(None, "--out", "-o", help="output (default profiles/<model>_<input>_b<B>.json, "
                                    "..._b<B>_c<N>.json with --cores N)"),
    threads: int | None = typer.Option(None, "--threads", help="TensorFlow intra/inter-op threads (default: TF's)"),
    cores: int | None = typer.Option(None, "--cores", help="pin to N cores with N intra-op threads, as a local "
                                     "worker with N cores runs (the profile `partition --cores N` reads)"),
    compare: tuple[Path, Path] | None = typer.Option(None, "--compare", help="print per-layer ratios between two "
                                                     "profile files P1 P2 (nothing is measured)"),
    min_share: float = typer.Option(0.02, "--min-share", help="with --compare: layers of at least this share of "
                                    "the step"),
) -> None:
    """Measure each layer's forward and backward time (or count FLOPs) and write a profile file."""
    from rich.console import Console

    from hgpart.commands import options
    from hgpart.errors import HgpartError
    from hgpart.fileio import check_writable
    from hgpart.profile import default_profile_path
    from hgpart.profile_report import print_quality
    from hgpart.profiler import configure_threads, options_from, pin_cores

    if compare:
        _compare(*compare, min_share=min_share)
        return
    if model is None:
        raise HgpartError("no model to profile", where="hgpart profile", fix="pass --model, or --compare P1 P2")
    if batch_size < 1:
        raise HgpartError(f"batch size must be positive, got {batch_size}", where="--batch-size")
    options.check_at_least_one(repeats, "--repeats")
    options.check_at_least_one(threads, "--threads")
    options.check_at_least_one(cores, "--cores")
    if warmup < 0:
        raise HgpartError(f"--warmup {warmup} must be >= 0", where="--warmup")
    if cores is not None and threads is not None:
        raise HgpartError("--cores and --threads exclude each other", fix="--cores N sets N threads itself")
    opts = options_from(repeats=repeats, max_rounds=max_rounds, warmup=warmup, target=target, statistic=statistic,
                        clock=clock)
    path = check_writable(out, what="profile", where="--out") if out is not None else None
    if cores is not None:
        pin_cores(cores)
    else:
        configure_threads(threads)
    started = time.perf_counter()
    graph, keras_model = _graph_and_model(model, input, classes)
    path = path or check_writable(default_profile_path(graph, batch_size, cores=cores), what="profile",
                                  where="--out")
    prof = _measure(graph, keras_model, batch_size=batch_size, options=opts, analytic=analytic)
    prof.save(path)
    wall = time.perf_counter() - started
    console = Console()
    if prof.mode == "measured":
        fwd = sum(c.forward_ms for c in prof.layers)
        bwd = sum(c.backward_ms for c in prof.layers)
        console.print(
            f"{prof.model} input {list(prof.input_shape)} batch {batch_size}: forward {fwd:,.1f} ms + "
            f"backward {bwd:,.1f} ms = {fwd + bwd:,.1f} ms per step (sum of layers)", highlight=False)
        upd = [c.update_ms for c in prof.layers if c.update_ms is not None]
        if upd:
            heavy = max(prof.layers, key=lambda c: c.update_ms or 0.0)
            console.print(f"optimizer update (Adam, fused): {sum(upd):,.1f} ms per step over {len(upd)} layers with "
                          f"weights; largest {heavy.name} {heavy.update_ms:,.1f} ms; partitioning weighs "
                          "forward + backward + update", highlight=False)
        print_quality(prof, console=console)
    else:
        total = sum(prof.work().values())
        console.print(f"{prof.model} batch {batch_size}: analytic work {total:,.1f} MFLOP per step", highlight=False)
    console.print(f"wrote {path}  (fingerprint {prof.fingerprint}, wall {wall:.1f} s)", highlight=False)


def _compare(a: Path, b: Path, *, min_share: float) -> None:
    """``hgpart profile --compare A B``: per-layer ratios, never TensorFlow."""
    from rich.console import Console

    from hgpart.profile import Profile
    from hgpart.profile_compare import compare_profiles
    from hgpart.profile_report import print_comparison

    pa, pb = Profile.load(a), Profile.load(b)
    cmp = compare_profiles(pa, pb, min_share=min_share)
    free = compare_profiles(pa, pb, min_share=min_share, scale_free=True)
    print_comparison(cmp, str(a), str(b), console=Console(), scale_free=free)
