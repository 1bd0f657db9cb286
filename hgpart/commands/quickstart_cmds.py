"""``hgpart quickstart``: the whole product on an embedded default, in one command.

Compiles the zoo's small ``minivgg`` (32x32x3) with its committed measured
profile (analytic FLOPs if that profile is absent), partitions its coarse
hypergraph over K logical devices with Mt-KaHyPar, writes the placement file,
prints the thesis's metric tables, then trains the partitioned model on the
bundled digits data with the asynchronous pipeline and reports images/s and
the bytes that actually crossed devices beside the placement's prediction.
"""

from __future__ import annotations

from pathlib import Path

import typer

from hgpart.commands import app

__all__ = ["quickstart"]


@app.command()
def quickstart(
    model: str = typer.Option("minivgg", "--model", "-m", help="zoo model to compile and train"),
    input: str = typer.Option("32", "--input", "-i", help="input size (32 = 32x32x3)"),
    k: int = typer.Option(2, "--k", "-k", help="number of logical devices / parts"),
    grain: str = typer.Option("coarse", "--grain", "-g", help="coarse or fine"),
    steps: int = typer.Option(30, "--steps", help="training steps"),
    mode: str = typer.Option("async", "--mode", help="async (threaded pipeline) or sync (micro-batches)"),
    out: Path = typer.Option(Path("partitions"), "--out", "-o", help="folder for the placement file"),
) -> None:
    """Profile -> hypergraph -> Mt-KaHyPar -> placement file -> train on K logical devices."""
    from rich.console import Console

    from hgpart.commands import options
    from hgpart.fileio import check_outputs
    from hgpart.runtime.devices import open_devices

    options.check_parts(k)
    options.check_at_least_one(steps, "--steps")
    check_outputs(folders={"--out": out})  # before any long work
    con = Console()
    devices = open_devices("logical", k)  # before anything initialises TensorFlow
    try:
        from hgpart.commands.partition_cmds import _build, load_inputs
        from hgpart.errors import MissingProfileError
        from hgpart.models import ModelSource
        from hgpart.partitioners import partition
        from hgpart.placement import Placement, default_placement_path
        from hgpart.runtime.train import train
        from hgpart.tables import print_metrics

        try:
            graph, prof, prof_path = load_inputs(model, input, None, None, False, 32)
        except MissingProfileError:  # no committed profile for this model: fall back to FLOP counts
            graph, prof, prof_path = load_inputs(model, input, None, None, True, 32)
        source = f"measured profile {prof_path}" if prof_path else "analytic FLOP counts"
        con.print(f"[bold]1. model[/] {graph.name} {list(graph.input_shape)}: {len(graph.layers)} layers, "
                  f"{graph.total_params:,} parameters; work from {source}")
        hg = _build(graph, prof, grain, 1, 1)
        con.print(f"[bold]2. hypergraph[/] {grain}: {hg.num_vertices:,} vertices, {hg.num_nets:,} nets, "
                  f"{hg.num_pins:,} pins, built in {hg.build_seconds:.2f} s")
        res = partition(hg, k=k, backend="mtkahypar", epsilon=0.1, seed=1)
        pl = Placement.from_vertex_parts(
            graph, hg, res.parts, k=k, method="hypergraph", work=prof.work(),
            provenance={"backend": "mtkahypar", "preset": res.preset, "epsilon": 0.1, "seed": 1,
                        "profile": str(prof_path) if prof_path else "analytic", "seconds": res.seconds},
            source=ModelSource.from_spec(model, graph),
        )
        path = pl.save(default_placement_path(graph.name, grain, k, folder=out))
        con.print(f"[bold]3. partition[/] Mt-KaHyPar K={k} in {res.seconds:.2f} s -> {path}")
        m = pl.recompute_metrics()
        print_metrics([(f"{grain} K={k}", m)], work_unit=prof.work_unit, batch_size=prof.batch_size, console=con)
        con.print(f"[bold]4. train[/] {steps} steps, mode {mode}, digits, on {k} logical devices")
        tr = train(pl, device_set=devices, batch_size=prof.batch_size, steps=steps, mode=mode,
                   data="digits", progress=True)
        check = tr.traffic.check(tr.predicted_fwd_bytes)
        n, first, last = tr.loss_ends()
        con.print(f"loss (mean of the first / last {n} steps) {first:.3f} -> {last:.3f}; "
                  f"{tr.images_per_s:.1f} images/s")
        con.print(f"bytes across devices per step: measured {check['model']:,.0f} "
                  f"(forward {check['forward']:,.0f} + backward {check['backward']:,.0f}); placement predicts "
                  f"2 x {check['predicted_forward']:,.0f} = {check['predicted_x2']:,.0f}, less "
                  f"{check['predicted_forward'] - check['predicted_backward']:,.0f} of input maps that need no "
                  f"gradient; relative error {check['rel_err']:.2%}")
    finally:
        devices.close()
