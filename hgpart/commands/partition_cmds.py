"""``hgpart build``, ``hgpart partition`` and ``hgpart metrics``: the compiler's hypergraph half.

Usage::

    hgpart build --model vgg16 --input 224 --grain fine --format hmetis --out vgg16_fine.hgr
    hgpart partition --model vgg16 --input 224 --grain coarse --k 4          # profiles/vgg16_224_b32.json
    hgpart partition --model minivgg --input 32 --analytic --grain fine --k 2 --backend kahypar
    hgpart metrics partitions/vgg16_coarse_k4.json

``partition`` writes ``partitions/<model>_<grain>_k<K>.json`` atomically with
its provenance and the exact model source (zoo name, ``keras:<Application>``
or ``.keras`` path and SHA-256, which ``hgpart train`` rebuilds) and prints
the metrics, which are always computed by our own code (:mod:`hgpart.metrics`)
from the placement. The file's ``method`` is ``hypergraph`` for the hypergraph partitioners (auto, exact, mtkahypar,
kahypar) and the baseline's own name for layerwise, horizontal, incremental
and block, whose default file names carry that name too. Every option and
the output path are checked before the model is built, so a bad value costs
no time. ``metrics`` needs only the placement file: it never imports
TensorFlow (unless ``--model`` asks to check the file against a model).
"""

from __future__ import annotations

import hashlib
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from hgpart.commands import app, options
from hgpart.errors import HgpartError, MissingProfileError

__all__ = ["build", "partition_cmd", "metrics", "load_inputs"]

MODEL_HELP = "zoo name (vgg16, resnet18, minivgg, ...), keras:<Application>, or a .keras file"
INPUT_HELP = "input size: 224 (=224x224x3), 32x32x1, ... (default: the model's own)"
PROFILE_HELP = "profile file (default profiles/<model>_<input>_b<batch>.json, made by `hgpart profile`)"
GRAIN_HELP = "coarse (a vertex per filter) or fine (a vertex per filter x input channel plus reductions)"


# options shared by `build` and `partition` (the compiler's inputs)
ModelOpt = Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)]
InputOpt = Annotated[str | None, typer.Option("--input", "-i", help=INPUT_HELP)]
ClassesOpt = Annotated[int | None, typer.Option("--classes", help="number of classes (default: the model's own)")]
ProfileOpt = Annotated[Path | None, typer.Option("--profile", "-p", help=PROFILE_HELP)]
AnalyticOpt = Annotated[bool, typer.Option("--analytic", help="FLOP counts instead of a measured profile")]
BatchOpt = Annotated[int | None, typer.Option("--batch-size", "-b", help="batch size B (default 32)")]
GrainOpt = Annotated[str, typer.Option("--grain", "-g", help=GRAIN_HELP)]


def load_inputs(
    model: str, input: str | None, classes: int | None, profile: Path | None, analytic: bool,
    batch_size: int | None, *, cores: int | None = None,
) -> tuple[Any, Any, Path | None]:
    """(layer graph, profile, profile path or None for analytic) with every mismatch a clear error.

    ``cores`` asks for the profile of a device with that many cores (by default
    ``profiles/<model>_<input>_b<B>_c<cores>.json``, else the unpinned default
    if it was made on that many) and refuses one made for another core count.
    """
    from hgpart.models import load_graph, parse_input
    from hgpart.profile import Profile, analytic_profile

    if batch_size is not None and batch_size < 1:
        raise HgpartError(f"batch size must be positive, got {batch_size}", where="--batch-size")
    if analytic and (profile is not None or cores is not None):
        raise HgpartError(f"--analytic and {'--profile' if profile is not None else '--cores'} exclude each other",
                          fix="pass one of them")
    if cores is not None and cores < 1:
        raise HgpartError(f"--cores {cores} must be >= 1", where="--cores")
    graph = load_graph(model, input_shape=parse_input(input), num_classes=classes)
    if analytic:
        return graph, analytic_profile(graph, batch_size or 32), None
    path = profile if profile is not None else _default_profile(graph, batch_size or 32, cores)
    if not Path(path).is_file():
        b = batch_size or 32
        raise MissingProfileError(
            f"no profile {str(path)!r} for {graph.name} at input {graph.input_tag} batch {b}",
            fix=f"run `hgpart profile --model {model} --input {graph.input_tag} --batch-size {b}"
                f"{f' --cores {cores}' if cores else ''}` or pass --analytic (FLOP counts) or --profile FILE",
            path=str(path), model=graph.name, batch_size=b,
        )
    prof = Profile.load(path)
    prof.check(graph, path=str(path))
    if cores is not None and prof.setup.cores != cores:
        raise HgpartError(f"profile was made for {prof.setup.cores} core(s), not {cores}", where=str(path),
                          fix=f"profile with `hgpart profile --cores {cores}` or drop --cores")
    if batch_size is not None and prof.batch_size != batch_size:
        raise HgpartError(f"profile was made at batch size {prof.batch_size}, not {batch_size}", where=str(path),
                          fix="drop --batch-size or profile at that batch size")
    return graph, prof, Path(path)


def _default_profile(graph: Any, batch_size: int, cores: int | None) -> Path:
    from hgpart.profile import default_profile_path

    pinned = default_profile_path(graph, batch_size, cores=cores)
    return pinned if cores is None or pinned.is_file() else default_profile_path(graph, batch_size)


def _build(graph: Any, prof: Any, grain: str, group: int, channel_group: int) -> Any:
    from hgpart.hypergraph import build_hypergraph

    return build_hypergraph(graph, prof.work(), batch_size=prof.batch_size, grain=grain,  # type: ignore[arg-type]
                            group=group, channel_group=channel_group, work_unit=prof.work_unit)


def _check_grain(grain: str) -> None:
    if grain not in ("coarse", "fine"):
        raise HgpartError(f"unknown grain {grain!r}", where="--grain", fix="use coarse or fine")


@app.command()
def build(
    model: ModelOpt,
    input: InputOpt = None,
    classes: ClassesOpt = None,
    profile: ProfileOpt = None,
    analytic: AnalyticOpt = False,
    batch_size: BatchOpt = None,
    grain: GrainOpt = "coarse",
    group: int = typer.Option(1, "--group", help="filters per vertex"),
    channel_group: int = typer.Option(1, "--channel-group", help="input channels per fine-grain vertex"),
    format: str = typer.Option("hmetis", "--format", "-f", help="hmetis (.hgr, fmt 11) or patoh"),
    out: Path | None = typer.Option(None, "--out", "-o", help="output file (default <model>_<grain>.hgr|.patoh)"),
    k: int = typer.Option(8, "--k", "-k", help="largest K the file is meant for: net costs are put in units so "
                          "that the km1 objective fits in 32 bits up to this K"),
) -> None:
    """Build the coarse- or fine-grain hypergraph and write it for other partitioners (integer weights)."""
    from rich.console import Console

    from hgpart.fileio import check_writable
    from hgpart.formats import FORMATS, write_hmetis, write_patoh
    from hgpart.models import model_name
    from hgpart.partitioners.scaling import scale_hypergraph

    _check_grain(grain)
    fmt = format.lower()
    if fmt not in FORMATS:
        raise HgpartError(f"unknown format {format!r}", where="--format", fix=f"use one of {list(FORMATS)}")
    if k < 2:
        raise HgpartError(f"--k {k} must be >= 2", where="--k", fix="a hypergraph file is meant for 2 parts or more")
    options.check_parts(k)
    options.check_at_least_one(group, "--group")
    options.check_at_least_one(channel_group, "--channel-group")
    options.check_at_least_one(batch_size, "--batch-size")
    if analytic and profile is not None:
        raise HgpartError("--analytic and --profile exclude each other", fix="pass one of them")
    suffix = "hgr" if fmt == "hmetis" else "patoh"
    path = check_writable(out or Path(f"{model_name(model)}_{grain}{f'_g{group}' if group > 1 else ''}.{suffix}"),
                          what="hypergraph file", where="--out")
    graph, prof, ppath = load_inputs(model, input, classes, profile, analytic, batch_size)
    hg = _build(graph, prof, grain, group, channel_group)
    sh = scale_hypergraph(hg, k=k, epsilon=0.1)
    t0 = time.perf_counter()
    (write_hmetis if fmt == "hmetis" else write_patoh)(sh, path)
    write_s = time.perf_counter() - t0
    c = Console()
    c.print(f"{graph.name} {graph.input_tag} {grain} grain (group {group}), batch {prof.batch_size}, "
            f"profile {ppath or 'analytic'}", highlight=False)
    c.print(f"vertices {hg.num_vertices:,}  nets {hg.num_nets:,}  pins {hg.num_pins:,}  "
            f"build {hg.build_seconds:.2f} s  write {write_s:.2f} s", highlight=False)
    c.print(f"wrote {path} ({fmt}); net cost unit = {sh.cost_scale:g} bytes"
            f"{'' if sh.cost_exact else ' (rounded)'}, vertex weight unit = {1 / sh.weight_scale:.4g} {hg.work_unit}",
            highlight=False)


def _file_sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _versions(backend: str, tool_version: str | None) -> dict[str, str]:
    from importlib import metadata

    import numpy

    out = {"python": platform.python_version(), "numpy": numpy.__version__}
    for pkg in ("hgpart",):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "unknown"
    if tool_version:
        out[backend] = tool_version
    return out


@dataclass(frozen=True)
class _Run:
    """What `partition` produced, for the provenance and the summary lines."""

    backend: str
    k: int
    seconds: float
    preset: str
    km1_bytes: float
    backend_bytes: float | None


def _provenance(backend: str, res: Any, prof: Any, ppath: Path | None, hg: Any, epsilon: float, seed: int,
                group: int, channel_group: int) -> dict[str, Any]:
    backend_bytes = (res.backend_objective * res.objective_scale) if res.backend_objective is not None else None
    return {
        "command": "hgpart " + " ".join(sys.argv[1:]) if sys.argv and "hgpart" in Path(sys.argv[0]).name else "",
        "backend": backend,
        "preset": res.preset,
        "epsilon": epsilon,
        "seed": seed,
        "group": group,
        "channel_group": channel_group,
        "tool_versions": _versions(backend, res.info.get("tool_version")),
        "profile": {
            "path": str(ppath) if ppath else None,
            "sha256": _file_sha(ppath) if ppath else None,
            "mode": prof.mode,
            "fingerprint": prof.fingerprint,
            "work_unit": prof.work_unit,
        },
        "hypergraph": {"vertices": hg.num_vertices, "nets": hg.num_nets, "pins": hg.num_pins,
                       "build_seconds": round(hg.build_seconds, 4)},
        "partition_seconds": round(res.seconds, 4),
        "backend_objective": res.backend_objective,
        "backend_objective_scale_bytes": res.objective_scale,
        "backend_objective_bytes": backend_bytes,
        "km1_bytes": res.objective_bytes,
        "backend_info": {key: v for key, v in res.info.items() if key != "tool_version"},
    }


def _summary(run: _Run, path: Path) -> str:
    """The closing line; K = 1 ran no partitioner, so it has no preset and no backend figure."""
    if run.k == 1:
        return f"K = 1: every vertex on part 0, no partitioner ran; km1 0.000 MiB; wrote {path}"
    own = "" if run.backend_bytes is None else f" (backend's own figure {run.backend_bytes / 2**20:,.3f} MiB)"
    preset = f" (preset {run.preset})" if run.preset else ""
    return (f"partitioned in {run.seconds:.2f} s{preset}; km1 {run.km1_bytes / 2**20:,.3f} MiB{own}; "
            f"wrote {path}")


def _check_partition_options(grain: str, k: int, epsilon: float, backend: str, preset: str | None, group: int,
                             channel_group: int, threads: int | None, time_limit: float | None,
                             bound_time_limit: float, batch_size: int | None, analytic: bool,
                             profile: Path | None) -> None:
    """Every option of `partition` that needs no model, checked before anything is built."""
    _check_grain(grain)
    options.check_parts(k)
    options.check_epsilon(epsilon)
    options.check_backend(backend, preset)
    options.check_at_least_one(group, "--group")
    options.check_at_least_one(channel_group, "--channel-group")
    options.check_at_least_one(threads, "--threads")
    options.check_at_least_one(batch_size, "--batch-size")
    options.check_seconds(time_limit, "--time-limit")
    options.check_seconds(bound_time_limit, "--bound-time-limit")
    if analytic and profile is not None:
        raise HgpartError("--analytic and --profile exclude each other", fix="pass one of them")


@app.command("partition")
def partition_cmd(
    model: ModelOpt,
    input: InputOpt = None,
    classes: ClassesOpt = None,
    profile: ProfileOpt = None,
    analytic: AnalyticOpt = False,
    batch_size: BatchOpt = None,
    grain: GrainOpt = "coarse",
    k: int = typer.Option(..., "--k", "-k", help="number of parts (devices)"),
    epsilon: float = typer.Option(0.1, "--epsilon", "-e", help="allowed imbalance: max part work <= (1+eps) avg"),
    seed: int = typer.Option(1, "--seed", help="random seed: same seed, same placement, except auto and exact "
                             "(only with --preset deterministic, the same --threads and no stage cut by --time-limit) "
                             "and Mt-KaHyPar's non-deterministic presets with --threads above 1"),
    backend: str = typer.Option("auto", "--backend", help="partitioner: auto (default), exact, mtkahypar, kahypar, "
                                "block, layerwise, horizontal, incremental"),
    preset: str | None = typer.Option(None, "--preset", help="backend preset (mtkahypar: deterministic, quality, "
                                      "highest_quality, default, large_k...; kahypar: km1 or an .ini path; "
                                      "auto: race or deterministic; exact: highs or deterministic)"),
    group: int = typer.Option(1, "--group", help="filters per vertex (smaller hypergraph)"),
    channel_group: int = typer.Option(1, "--channel-group", help="input channels per fine-grain vertex"),
    time_limit: float | None = typer.Option(None, "--time-limit", help="seconds before the backend is stopped"),
    threads: int | None = typer.Option(None, "--threads", help="Mt-KaHyPar threads (default 2)"),
    cores: int | None = typer.Option(None, "--cores", help="use the profile of a device with N cores "
                                     "(profiles/..._b<B>_c<N>.json, made by `hgpart profile --cores N`)"),
    out: Path | None = typer.Option(None, "--out", "-o",
                                    help="placement file (default partitions/<model>_<grain>_k<K>.json; the "
                                    "baseline backends add their name, e.g. <model>_layerwise_k<K>.json)"),
    bound: bool = typer.Option(True, "--bound/--no-bound", help="coarse grain: prove a lower bound on the volume "
                               "(exact integer program) and print the optimality gap"),
    bound_time_limit: float = typer.Option(30.0, "--bound-time-limit", help="seconds for the lower-bound program"),
    memory_limit: str | None = typer.Option(None, "--memory-limit", help="device memory, e.g. 16GiB or 512MB: every "
                                            "part must hold its parameters, gradients, Adam slots and the "
                                            "activations of the batches in flight (docs/cost-model.md)"),
    inflight: int = typer.Option(1, "--inflight", help="batches in flight whose activations a device keeps, for "
                                 "--memory-limit (the async pipeline's n; 1 for a synchronous step)"),
) -> None:
    """Partition the hypergraph into K parts, write the placement file, print the metrics."""
    from rich.console import Console

    from hgpart.fileio import check_writable
    from hgpart.models import ModelSource, model_name
    from hgpart.partitioners import partition
    from hgpart.partitioners.certificate import certify, not_computed
    from hgpart.partitioners.memory_fit import Job, fitting_metrics, limit_from_options, partition_fitting
    from hgpart.placement import Placement, default_placement_path
    from hgpart.tables import part_memory_table, print_metrics

    _check_partition_options(grain, k, epsilon, backend, preset, group, channel_group, threads, time_limit,
                             bound_time_limit, batch_size, analytic, profile)
    method = options.method_of_backend(backend)
    path = check_writable(out or default_placement_path(model_name(model), grain, k, method=method),
                          what="placement file", where="--out")
    options.check_at_least_one(cores, "--cores")
    limit_from_options(memory_limit, inflight=inflight)  # a bad size or count costs no build
    graph, prof, ppath = load_inputs(model, input, classes, profile, analytic, batch_size, cores=cores)
    hg = _build(graph, prof, grain, group, channel_group)
    c = Console()
    doing = f"partitioning into {k} with {backend}..." if k > 1 else "K = 1: no partitioning needed"
    c.print(f"{graph.name} {graph.input_tag} {grain} grain: {hg.num_vertices:,} vertices, {hg.num_nets:,} nets, "
            f"{hg.num_pins:,} pins (built in {hg.build_seconds:.2f} s); {doing}", highlight=False)
    limit = limit_from_options(memory_limit, inflight=inflight, batch_size=prof.batch_size)
    res = partition_fitting(hg, Job(k, backend, epsilon, seed, preset, time_limit, threads, partition), limit)
    provenance = _provenance(backend, res, prof, ppath, hg, epsilon, seed, group, channel_group)
    pl = Placement.from_vertex_parts(graph, hg, res.parts, k=k, method=method, work=prof.work(),
                                     provenance=provenance, source=ModelSource.from_spec(model, graph))
    m = pl.stored_metrics() or pl.recompute_metrics()
    if limit is not None:
        m = fitting_metrics(hg, res.parts, k, limit)
        pl.metrics = m.to_dict()
    if not bound or k == 1:
        cert = not_computed("--no-bound" if not bound else "K = 1 has no communication")
    else:
        cert = certify(hg, k=k, epsilon=epsilon, volume_bytes=res.objective_bytes,
                       max_over_avg=m.max_over_avg,
                       known_bound=res.lower_bound_bytes, time_limit=bound_time_limit)
    pl.provenance["lower_bound"] = cert.to_dict()
    pl.save(path)
    print_metrics([(f"{backend} K={k}", m)], work_unit=prof.work_unit, batch_size=prof.batch_size, console=c)
    if limit is not None:
        c.print(part_memory_table(m))
    c.print(_summary(_Run(backend, k, res.seconds, res.preset, res.objective_bytes,
                          provenance["backend_objective_bytes"]), path), highlight=False)
    if k > 1:
        c.print(cert.line(res.objective_bytes), highlight=False)


@app.command()
def metrics(
    file: Path = typer.Argument(..., help="placement file (hgpart.placement/1)"),
    model: str | None = typer.Option(None, "--model", "-m", help="also check the file is for this model"),
    input: InputOpt = None,
    classes: int | None = typer.Option(None, "--classes", help="number of classes (with --model)"),
    optimizer: str = typer.Option("adam", "--optimizer", help="optimizer for the memory columns: sgd, momentum, adam"),
) -> None:
    """Load a placement file (fully validated) and recompute and print its metrics."""
    from rich.console import Console

    from hgpart.placement import load_placement
    from hgpart.tables import print_metrics

    pl = load_placement(file)
    if model is not None:
        from hgpart.models import load_graph, parse_input

        pl.check_model(load_graph(model, input_shape=parse_input(input), num_classes=classes), where=str(file))
    m = pl.recompute_metrics(optimizer=optimizer)
    c = Console()
    prov = pl.provenance
    c.print(f"{file}: {pl.graph.name} {list(pl.graph.input_shape)} {pl.grain} grain, K = {pl.k}, method {pl.method}"
            f"{', backend ' + str(prov.get('backend')) if prov.get('backend') else ''}, batch {pl.batch_size}",
            highlight=False)
    print_metrics([(f"{pl.method} K={pl.k}", m)], work_unit=pl.work_unit, batch_size=pl.batch_size, console=c)
    stored = (pl.metrics or {}).get("comm_volume_mib")
    if isinstance(stored, bool) or not isinstance(stored, (int, float, type(None))):
        c.print(f"[yellow]note:[/] the file's recorded Comm. Vol {stored!r} is not a number; recomputed "
                f"{m.comm_volume_mib:,.3f} MiB", highlight=False)
    elif stored is not None and abs(float(stored) - m.comm_volume_mib) > 1e-6 * max(1.0, m.comm_volume_mib):
        c.print(f"[yellow]note:[/] the file records Comm. Vol {float(stored):,.3f} MiB; recomputed "
                f"{m.comm_volume_mib:,.3f} MiB", highlight=False)
