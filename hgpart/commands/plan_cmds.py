"""``hgpart plan``: rank single device, data parallelism and model parallelism for a model on a cluster by predicted
time per epoch among the plans that fit in memory; write the winner's placement file."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from hgpart.cluster import GIB, load_cluster
from hgpart.commands import app
from hgpart.commands.options import check_parts
from hgpart.fileio import check_outputs
from hgpart.memory import parse_size
from hgpart.models import load_graph, parse_input
from hgpart.simulate.plan import Plan, PlanOptions, plan

__all__ = ["plan_cmd", "print_plan"]


@app.command("plan")
def plan_cmd(
    model: str = typer.Option(..., "--model", "-m", help="zoo name (vgg16, resnet18, minivgg, ...) or .keras file"),
    cluster: str = typer.Option(..., "--cluster", "-c", help="preset (thesis-cluster, 8gpu-nvlink, "
                                 "this-machine after `hgpart calibrate`) or cluster file"),
    input: str | None = typer.Option(None, "--input", "-i", help="input size: 224 (=224x224x3), 32x32x1, ..."),
    batch_size: int = typer.Option(32, "--batch-size", "-b", help="mini-batch size"),
    max_k: int = typer.Option(8, "--max-k", help="the most devices a plan uses; K = 2, 4, 8, ... (model x data "
                              "parallelism: K x R)"),
    memory_limit: str | None = typer.Option(None, "--memory-limit", help="bytes per device, e.g. 16GiB "
                                            "(default: the cluster device's capacity)"),
    fine: bool = typer.Option(False, "--fine/--no-fine", help="also fine-grain hypergraph placements (slow on "
                              "large models)"),
    backend: str = typer.Option("mtkahypar", "--backend", help="partitioner of the hypergraph placements"),
    images: int = typer.Option(10_240, "--images", help="images per epoch"),
    group: int = typer.Option(8, "--group", help="filters per vertex of the hypergraphs partitioned (speed)"),
    out: Path = typer.Option(Path("partitions/plan.json"), "--out", "-o", help="the winner's placement file"),
) -> None:
    """Predict every strategy's time per epoch and memory on a cluster; keep the fastest that fits."""
    check_outputs(files={"--out": out})
    check_parts(max_k, where="--max-k")
    limit = parse_size(memory_limit) if memory_limit is not None else None
    target = load_cluster(cluster)
    graph = load_graph(model, input_shape=parse_input(input))
    opts = PlanOptions(batch_size=batch_size, max_k=max_k, memory_limit=limit, fine=fine, backend=backend,
                       images=images, group=check_parts(group, where="--group"))
    con = Console()
    result = plan(graph, target, opts)
    print_plan(con, result, f"{graph.name} {graph.input_tag}, batch {batch_size}, on {target.name}")
    win = result.winner
    if win is None:
        con.print("[red]no plan fits in memory[/]: lower the batch size, raise --max-k, or use a larger device")
    elif win.placement is not None and win.result.replicas > 1:
        con.print(f"winner: {win.name}; the placement each of its {win.result.replicas} replicas runs: "
                  f"{win.placement.save(out)} (hgpart train runs one replica; data parallelism across replicas is "
                  "not in the runtime yet)")
    elif win.placement is not None:
        con.print(f"winner: {win.name}; placement: {win.placement.save(out)}")
    else:
        con.print(f"winner: {win.name} (data parallelism: no placement file; train it with `hgpart compare-run`)")


def print_plan(con: Console, result: Plan, title: str) -> None:
    """One row per candidate, best first: time per epoch, images/s, largest device memory, why it loses."""
    tab = Table("plan", "s / epoch", "img/s", "max memory GiB", "fits", "why", title=title)
    for row in result.rows:
        r = row.result
        tab.add_row(row.name, f"{r.epoch_s:,.1f}", f"{r.images_per_s:,.1f}", f"{row.max_memory / GIB:.2f}",
                    "yes" if row.fits else "[red]no[/]", row.reason)
    con.print(tab)
