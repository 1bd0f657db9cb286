"""``hgpart simulate``: predict the step time, throughput, time per epoch and memory of a placement on a cluster."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from hgpart.cluster import GIB, load_cluster
from hgpart.commands import app
from hgpart.errors import BadOptionError
from hgpart.fileio import check_outputs, write_json
from hgpart.placement import STEPS_PER_CALL, load_placement
from hgpart.simulate import Mode, SimOptions, SimPipeline, SimResult, SimStrategy, simulate

__all__ = ["simulate_cmd", "print_result"]


@app.command("simulate")
def simulate_cmd(
    placement: Path = typer.Option(..., "--placement", "-p", help="placement file (hgpart partition output)"),
    cluster: str = typer.Option(..., "--cluster", "-c", help="preset (thesis-cluster, 8gpu-nvlink, "
                                 "this-machine after `hgpart calibrate`) or cluster file"),
    strategy: str = typer.Option("model", "--strategy", "-s", help="model (the placement's parts) | single | "
                                 "sync-dp | async-dp-1ps | async-dp-dps (on the placement's model)"),
    mode: str = typer.Option("async", "--mode", help="async (batches in flight) | sync (micro-batches)"),
    inflight: int = typer.Option(0, "--inflight", help="async batches in flight / sync micro-batches (0: "
                                 "async model parallelism one per pipeline stage, at most K + 1, with --pipeline "
                                 "stages, one with graph; sync K)"),
    pipeline: str = typer.Option("stages", "--pipeline", help="async model parallelism as the runtime runs it: "
                                 "stages (batches in flight overlap) | graph (one function per step: one batch "
                                 "on the devices at a time) | compiled "
                                 "(--steps-per-call steps per call, overlapping within a call)"),
    steps_per_call: int = typer.Option(STEPS_PER_CALL, "--steps-per-call",
                                       help="training steps per call with --pipeline compiled"),
    batch_size: int = typer.Option(0, "--batch-size", "-b", help="mini-batch size (0 = the placement's)"),
    devices: int = typer.Option(0, "--devices", help="data-parallel replicas (0 = the placement's K)"),
    replicas: int = typer.Option(1, "--replicas", help="model x data parallelism (--mode sync): R copies of the "
                                 "placement on K devices each, every part's gradient all-reduced over its R copies"),
    optimizer: str = typer.Option("adam", "--optimizer", help="sgd | momentum | adam"),
    images: int = typer.Option(10_240, "--images", help="images per epoch (default: the thesis's 10,240)"),
    trace: Path | None = typer.Option(None, "--trace", help="folder for devices_trace.simulated.json "
                                      "(Chrome/Perfetto, the runtime's trace format)"),
    out: Path | None = typer.Option(None, "--json", help="write the result as JSON"),
) -> None:
    """Simulate training steps on a cluster: compute, transfers with contention, pipeline, updates."""
    check_outputs(files={"--json": out}, folders={"--trace": trace})
    opts = SimOptions(batch_size=_at_least(batch_size, 0, "--batch-size"), strategy=SimStrategy.parse(strategy),
                      mode=_mode(mode), inflight=_at_least(inflight, 0, "--inflight"),
                      devices=_at_least(devices, 0, "--devices"), optimizer=optimizer,
                      images=_at_least(images, 1, "--images"), pipeline=SimPipeline.parse(pipeline),
                      replicas=_at_least(replicas, 1, "--replicas"),
                      steps_per_call=_at_least(steps_per_call, 1, "--steps-per-call"))
    res = simulate(load_placement(placement), load_cluster(cluster), opts)
    con = Console()
    print_result(con, res)
    if trace is not None:
        con.print(f"trace: {res.write_trace(trace)}")
    if out is not None:
        write_json(out, res.to_dict(), what="simulation result")
        con.print(f"result: {out}")


def _mode(value: str) -> Mode:
    try:
        return Mode(value)
    except ValueError:
        raise BadOptionError(f"unknown mode {value!r}", where="--mode", option="--mode", value=value,
                             fix="use async or sync") from None


def _at_least(value: int, low: int, where: str) -> int:
    if value < low:
        raise BadOptionError(f"{where} = {value} must be >= {low}", where=where, option=where, value=value)
    return value


def print_result(con: Console, res: SimResult) -> None:
    """The headline figures, one row per device (time shares and memory), and the critical path by kind."""
    flight = "in flight" if res.mode is Mode.ASYNC else "micro-batches"
    how = f"{res.mode.value}, {res.inflight} {flight}" if res.strategy is SimStrategy.MODEL else res.mode.value
    if res.replicas > 1:
        how += f", x {res.replicas} data-parallel replicas"
    con.print(f"{res.model} {res.strategy.value} ({how}) on {res.cluster}, batch {res.batch_size}: "
              f"[bold]{res.step_s * 1e3:.1f} ms/step, {res.images_per_s:.1f} img/s, {res.epoch_s:.1f} s per epoch[/] "
              f"of {res.images} images ({res.jobs} jobs simulated)")
    con.print(f"compute: {res.compute_source}")
    tab = Table("device", "compute", "update", "comm", "idle", "memory GiB", "of GiB", "fits",
                title="share of the simulated run; memory against capacity")
    for t, m in zip(res.times, res.memory, strict=True):
        span = t.span_s or 1.0
        tab.add_row(f"{t.device} (node {res.node_of[t.device]})", f"{100 * t.compute_s / span:.1f}%",
                    f"{100 * t.update_s / span:.1f}%", f"{100 * t.comm_s / span:.1f}%",
                    f"{100 * t.idle_s / span:.1f}%", f"{m.total / GIB:.2f}", f"{m.capacity / GIB:.0f}",
                    "yes" if m.fits else "[red]NO[/]")
    con.print(tab)
    parts = ", ".join(f"{kind} {1e3 * sec:.2f} ms" for kind, sec in sorted(res.path_seconds().items()))
    first, last = (res.path[0].name, res.path[-1].name) if res.path else ("-", "-")
    con.print(f"critical path of the last job: {parts}; {len(res.path)} tasks from {first!r} to {last!r}")
