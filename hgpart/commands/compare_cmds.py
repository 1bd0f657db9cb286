"""``hgpart compare``: every partitioning method of the thesis on one table (static comparison).

Usage::

    hgpart compare --model vgg16 --input 224 --profile profiles/vgg16_224_b32.json --k 2,4,8,16,32,64,128
    hgpart compare --model minivgg --input 32 --analytic --k 2,4,8 --methods layerwise,hypergraph \\
        --epsilon 0.03,0.1,0.15,0.2 --out reports/minivgg_compare --save-placements

Prints the thesis-style tables (Tables 5.1-5.12 and 5.14 of Eserol 2019, with
the thesis's values beside ours for VGG16 224x224x3 batch 32), beside every
coarse result the proven lower bound of the exact count program and the gap
to it (``--no-bound`` to skip), and writes
results.csv, epoch.csv, comparison.json, report.md and PNG plots into
``--out``; with ``--save-placements`` also one placement file per method,
grain, N and epsilon under ``<out>/placements``. ``--model`` also accepts a
layer-graph JSON file (``LayerGraph.to_dict``), which needs no TensorFlow.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from hgpart.commands import app, options
from hgpart.errors import HgpartError

if TYPE_CHECKING:
    from hgpart.layergraph import LayerGraph
    from hgpart.models import ModelSource

__all__ = ["compare", "parse_int_list", "parse_float_list", "parse_name_list"]

MODEL_HELP = "zoo name, keras:<Application>, .keras file or layer-graph .json"
PROFILE_HELP = "profile file (default profiles/<model>_<input>_b<B>.json)"


def parse_int_list(text: str, *, what: str) -> list[int]:
    try:
        vals = [int(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        raise HgpartError(f"cannot read {text!r} as a list of integers", where=what, fix="write e.g. 2,4,8") from None
    if not vals or min(vals) < 1:
        raise HgpartError(f"{what} needs positive integers, got {text!r}", where=what, fix="write e.g. 2,4,8")
    return vals


def parse_float_list(text: str, *, what: str) -> list[float]:
    try:
        vals = [float(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        raise HgpartError(f"cannot read {text!r} as a list of numbers", where=what, fix="write e.g. 0.03,0.1") from None
    if not vals:
        raise HgpartError(f"{what} is empty", where=what, fix="write e.g. 0.1")
    return vals


def parse_name_list(text: str) -> list[str]:
    return [v.strip().lower() for v in text.split(",") if v.strip()]


def _load_graph(model: str, input: str | None, classes: int | None) -> LayerGraph:
    from hgpart.layergraph import LayerGraph

    if model.endswith(".json"):
        from hgpart.fileio import read_json

        graph = LayerGraph.from_dict(read_json(model, what="layer graph"))
        if input is not None:
            from hgpart.models import parse_input

            if tuple(parse_input(input) or ()) != graph.input_shape:
                raise HgpartError(f"--input {input} differs from the graph file's input {list(graph.input_shape)}",
                                  where=model, fix="drop --input or export the graph at that size")
        return graph
    from hgpart.models import load_graph, parse_input

    return load_graph(model, input_shape=parse_input(input), num_classes=classes)


def _graph_from_profile(path: Path, model: str, input: str | None, classes: int | None) -> LayerGraph | None:
    """The layer graph embedded in a profile made for this model, which spares importing TensorFlow."""
    from hgpart.layergraph import LayerGraph
    from hgpart.models import model_name, parse_input
    from hgpart.profile import Profile

    if classes is not None or not Path(path).is_file() or model.endswith(".json"):
        return None
    prof = Profile.load(path)
    if not prof.graph or prof.model != model_name(model):
        return None
    if input is not None and tuple(parse_input(input) or ()) != tuple(prof.input_shape):
        return None
    return LayerGraph.from_dict(prof.graph)


def _model_source(model: str, graph: LayerGraph) -> ModelSource | None:
    """The model recorded in saved placements; a layer-graph file names no model the runtime could build."""
    from hgpart.models import ModelSource

    return None if model.endswith(".json") else ModelSource.from_spec(model, graph)


def _check_compare_options(ks: list[int], eps: list[float], methods: list[str], grains: list[str], backend: str,
                           preset: str | None, time_limit: float | None, budget: float | None,
                           bound_time_limit: float, images: int, batch_size: int, analytic: bool,
                           profile: Path | None) -> None:
    """Every option of `compare` that needs no model, checked before anything is loaded or built."""
    from hgpart.compare.static import GRAINS, METHODS
    from hgpart.partitioners import BACKENDS

    for n in ks:
        options.check_parts(n)
    for e in eps:
        options.check_epsilon(e)
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise HgpartError(f"unknown method(s) {bad}" if bad else "no method given", where="--methods",
                          fix=f"use some of {','.join(METHODS)}")
    badg = [g for g in grains if g not in GRAINS]
    if badg or not grains:
        raise HgpartError(f"unknown grain(s) {badg}" if badg else "no grain given", where="--grains",
                          fix="use coarse, fine or coarse,fine")
    options.check_backend(backend, preset,
                          allowed=tuple(b for b in BACKENDS if b not in ("layerwise", "horizontal", "incremental")))
    options.check_seconds(time_limit, "--time-limit")
    options.check_seconds(budget, "--budget")
    options.check_seconds(bound_time_limit, "--bound-time-limit")
    if images < 1:
        raise HgpartError(f"--images must be positive, got {images}", where="--images")
    options.check_at_least_one(batch_size, "--batch-size")
    if analytic and profile is not None:
        raise HgpartError("--analytic and --profile exclude each other", fix="pass one of them")


@app.command()
def compare(
    model: str = typer.Option(..., "--model", "-m", help=MODEL_HELP),
    input: str | None = typer.Option(None, "--input", "-i", help="input size: 224 (=224x224x3), 32x32x1, ..."),
    classes: int | None = typer.Option(None, "--classes", help="number of classes (default: the model's own)"),
    profile: Path | None = typer.Option(None, "--profile", "-p", help=PROFILE_HELP),
    analytic: bool = typer.Option(False, "--analytic", help="use FLOP counts (no profile file needed)"),
    batch_size: int = typer.Option(32, "--batch-size", "-b", help="batch size of the analytic profile"),
    k: str = typer.Option("2,4,8,16,32,64,128", "--k", help="numbers of parts N, comma separated"),
    methods: str = typer.Option("layerwise,horizontal,incremental,hypergraph", "--methods",
                                help="any of layerwise,horizontal,incremental,hypergraph"),
    grains: str = typer.Option("coarse,fine", "--grains", help="coarse, fine or coarse,fine"),
    backend: str = typer.Option("auto", "--backend", help="hypergraph partitioner: auto (default: exact program + "
                                "KaHyPar + Mt-KaHyPar, see `hgpart partition`), exact, mtkahypar, kahypar, block"),
    preset: str | None = typer.Option(None, "--preset", help="partitioner preset (e.g. mtkahypar default, quality)"),
    epsilon: str = typer.Option("0.1", "--epsilon", "-e", help="imbalance, or a list such as 0.03,0.1,0.15,0.2"),
    seed: int = typer.Option(1, "--seed", help="partitioner seed"),
    time_limit: float | None = typer.Option(None, "--time-limit", help="seconds per hypergraph run (backend limit)"),
    budget: float | None = typer.Option(None, "--budget", help="skip the remaining hypergraph runs after this many s"),
    bound: bool = typer.Option(True, "--bound/--no-bound", help="coarse grain: prove a lower bound on every "
                               "result's volume (exact count program) and print the optimality gap"),
    bound_time_limit: float = typer.Option(10.0, "--bound-time-limit",
                                           help="seconds per lower-bound program (one per N and imbalance reached)"),
    images: int = typer.Option(64000, "--images", help="images per epoch for the per-epoch table (Table 5.14)"),
    batch_sizes: str = typer.Option("16,32,64", "--batch-sizes", help="global batch sizes for the per-epoch table"),
    out: Path | None = typer.Option(None, "--out", "-o", help="report folder (default reports/<model>_compare)"),
    save_placements: bool = typer.Option(False, "--save-placements", help="also write a placement file per result"),
    no_plots: bool = typer.Option(False, "--no-plots", help="skip the PNG plots"),
) -> None:
    """Compare layer-wise, naive and hypergraph partitionings and data parallelism on one model."""
    from rich.console import Console

    from hgpart.compare.report import print_report, write_report
    from hgpart.compare.static import run_static
    from hgpart.fileio import check_writable
    from hgpart.profile import Profile, analytic_profile, default_profile_path

    started = time.perf_counter()
    ks = parse_int_list(k, what="--k")
    bss = parse_int_list(batch_sizes, what="--batch-sizes")
    eps = parse_float_list(epsilon, what="--epsilon")
    _check_compare_options(ks, eps, parse_name_list(methods), parse_name_list(grains), backend, preset, time_limit,
                           budget, bound_time_limit, images, batch_size, analytic, profile)
    if out is not None:
        check_writable(out, what="report folder", folder=True, where="--out")
    graph = _graph_from_profile(profile, model, input, classes) if profile is not None else None
    if graph is None:
        graph = _load_graph(model, input, classes)
    if analytic:
        prof, source = analytic_profile(graph, batch_size), "analytic"
    else:
        path = profile if profile is not None else default_profile_path(graph, batch_size)
        if not Path(path).is_file():
            raise HgpartError(f"profile {str(path)!r} does not exist", where="--profile",
                              fix=f"run `hgpart profile --model {model}` first, or pass --analytic")
        prof, source = Profile.load(path), str(path)
    folder = check_writable(out if out is not None else Path("reports") / f"{graph.name}_compare",
                            what="report folder", folder=True, where="--out")
    console = Console()
    cmp = run_static(graph, prof, ks=ks, methods=parse_name_list(methods), grains=parse_name_list(grains),
                     epsilons=eps, backend=backend, preset=preset, seed=seed, time_limit=time_limit,
                     bound_time_limit=bound_time_limit if bound else None, budget_seconds=budget,
                     placements_dir=(folder / "placements") if save_placements else None,
                     profile_source=source, model_source=_model_source(model, graph))
    print_report(cmp, images=images, batch_sizes=bss, console=console)
    paths = write_report(cmp, folder, images=images, batch_sizes=bss, plots=not no_plots)
    n_place = sum(1 for r in cmp.results if r.placement)
    console.print(f"wrote {len(paths)} report files to {folder}" + (f" and {n_place} placements" if n_place else "")
                  + f" (total {time.perf_counter() - started:.1f} s)", highlight=False)


@app.command("compare-run")
def compare_run(
    model: str = typer.Option(..., "--model", "-m", help="zoo name, keras:<Application> or .keras file"),
    input: str | None = typer.Option(None, "--input", "-i", help="input size: 32 (=32x32x3), 16x16x1, ..."),
    classes: int | None = typer.Option(None, "--classes", help="number of classes (>= 10 for digits)"),
    devices: str = typer.Option("logical", "--devices", "-d", help="logical, local, gpu or cluster:SPEC"),
    k: int = typer.Option(2, "--k", help="number of devices K (every strategy uses the same K)"),
    batch_sizes: str = typer.Option("16,32,64", "--batch-sizes", help="global batch sizes, comma separated"),
    epochs: float | None = typer.Option(None, "--epochs", help="epochs of digits per run (default 1)"),
    steps: int | None = typer.Option(None, "--steps", help="global steps per run (overrides --epochs)"),
    target: float = typer.Option(0.9, "--target", help="target training accuracy for the time-to-accuracy table"),
    methods: str = typer.Option(",".join(("single", "layerwise-async", "layerwise-sync", "coarse-async",
                                          "coarse-sync", "fine-async", "fine-sync", "sync-dp", "sync-dp-mirrored",
                                          "async-dp-1ps", "async-dp-dps")), "--methods", help="strategies to run"),
    optimizer: str = typer.Option("adam", "--optimizer", help="adam or momentum"),
    lr: float = typer.Option(1e-3, "--lr", help="learning rate"),
    seed: int = typer.Option(0, "--seed", help="seed of weights, data order and partitioner"),
    profile: Path | None = typer.Option(None, "--profile", "-p", help="profile file (default: analytic per BS)"),
    backend: str = typer.Option("mtkahypar", "--backend", help="hypergraph partitioner backend"),
    epsilon: float = typer.Option(0.05, "--epsilon", "-e", help="imbalance of the hypergraph partitions"),
    eval_n: int = typer.Option(512, "--eval-n", help="training images in the fixed evaluation subset"),
    evals_per_epoch: int = typer.Option(4, "--evals-per-epoch", help="accuracy checks per epoch"),
    out: Path | None = typer.Option(None, "--out", "-o", help="report folder (default reports/<model>_measured)"),
    no_plots: bool = typer.Option(False, "--no-plots", help="skip the PNG curves"),
    trace: bool = typer.Option(True, "--trace/--no-trace",
                               help="profile max(2, K) extra steps per run: device busy %, OUT/traces/*.json"),
    pipeline: str = typer.Option("auto", "--pipeline", help="model parallelism's steps as: stages | graph | auto "
                                 "(as hgpart train --pipeline; the report says which ran)"),
) -> None:
    """Measured comparison: train the model under every strategy on the same K devices (time and convergence)."""
    from rich.console import Console

    from hgpart.fileio import check_writable
    from hgpart.models import model_name
    from hgpart.runtime.devices import open_devices
    from hgpart.runtime.stages import check_pipeline

    bss = parse_int_list(batch_sizes, what="--batch-sizes")
    options.check_parts(k)
    options.check_epsilon(epsilon)
    options.check_backend(backend, None)
    options.check_at_least_one(steps, "--steps")
    check_pipeline(pipeline)
    if epochs is not None and not epochs > 0:
        raise HgpartError(f"--epochs {epochs} must be above 0", where="--epochs")
    folder = check_writable(out if out is not None else Path("reports") / f"{model_name(model)}_measured",
                            what="report folder", folder=True, where="--out")
    ds = open_devices(devices, k, inter_op=max(4, k + 1))  # first: TensorFlow must not be initialised yet
    try:
        from hgpart.compare.measured import run_measured
        from hgpart.compare.measured_report import print_measured, write_measured
        from hgpart.models import parse_input
        from hgpart.profile import Profile

        prof = Profile.load(profile) if profile is not None else None
        console = Console()
        cmp = run_measured(model, device_set=ds, input_shape=parse_input(input), num_classes=classes,
                           batch_sizes=bss, epochs=epochs, steps=steps, target=target,
                           methods=parse_name_list(methods), optimizer=optimizer, lr=lr, seed=seed, eval_n=eval_n,
                           evals_per_epoch=evals_per_epoch, profile=prof, backend=backend, epsilon=epsilon,
                           devices_label=devices, console=console, trace_dir=folder / "traces" if trace else None,
                           pipeline=pipeline)
        print_measured(cmp, console=console)
        paths = write_measured(cmp, folder, plots=not no_plots)
        console.print(f"wrote {len(paths)} report files to {folder} (total {cmp.seconds:.1f} s)", highlight=False)
    finally:
        ds.close()
