"""``hgpart calibrate-split``: measure what placements' split op structure costs, and record it in a cluster file.

The simulator charges a part the profiled layers' work in proportion to the vertices it holds; the runtime runs a
split layer as several smaller ops plus channel selections, concatenations and partial sums. This command times
each placement's training step with every part on one pinned local worker against the unsplit model's
(:mod:`hgpart.runtime.splitbench`) and adds the ratio to ``device.split_costs`` of the cluster file, which
``hgpart simulate`` then applies to that placement (matched by its content hash).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from hgpart.cluster import (
    SplitCost,
    cluster_from_dict,
    preset_path,
    split_cost_to_dict,
)
from hgpart.commands import app
from hgpart.commands.compare_cmds import parse_int_list
from hgpart.errors import BadOptionError
from hgpart.fileio import check_outputs, read_json, write_json
from hgpart.placement import Placement, load_placement

__all__ = ["calibrate_split_cmd", "merge_split_costs", "split_micro_batches"]

MODES = ("async", "sync", "both")


def split_micro_batches(pl: Placement, mode: str, sync_micro: int) -> list[int]:
    """The micro-batches to time ``pl`` at: 1 (async: a batch at a time) and/or the sync micro-batches (``0``: K,
    as ``hgpart train --mode sync`` runs)."""
    out = []
    if mode in ("async", "both"):
        out.append(1)
    if mode in ("sync", "both"):
        out.append(sync_micro or pl.k)
    return sorted(set(out))


def merge_split_costs(doc: dict[str, Any], costs: list[SplitCost]) -> dict[str, Any]:
    """The cluster document with ``costs`` in ``device.split_costs``, each replacing an entry of the same
    placement, batch size and micro-batches."""
    device = dict(doc["device"])
    new = {(c.placement, c.batch_size, c.micro_batches) for c in costs}
    kept = [e for e in device.get("split_costs", [])
            if (e["placement"], e["batch_size"], e["micro_batches"]) not in new]
    device["split_costs"] = kept + [split_cost_to_dict(c) for c in costs]
    return {**doc, "device": device}


@app.command("calibrate-split")
def calibrate_split_cmd(
    placements: list[Path] = typer.Argument(..., help="placement files to measure (one model or several)"),
    cluster: Path = typer.Option(..., "--cluster", "-c", help="the cluster file `hgpart calibrate` wrote for this "
                                 "machine; the measured costs are added to its device.split_costs"),
    batch_sizes: str = typer.Option("32", "--batch-sizes", help="batch sizes to time, comma-separated (the "
                                    "simulator uses the one nearest the batch it simulates)"),
    mode: str = typer.Option("both", "--mode", help="async (1 micro-batch), sync (the sync micro-batches) or both"),
    micro_batches: int = typer.Option(0, "--micro-batches", help="sync: micro-batches per step (0: K, as "
                                      "`hgpart train --mode sync`)"),
    reps: int = typer.Option(15, "--reps", help="timed rounds (each 5 calls of every step, interleaved)"),
) -> None:
    """Time placements' training steps with every part on one worker against the unsplit model's; record the
    ratio in the cluster file for `hgpart simulate`."""
    if mode not in MODES:
        raise BadOptionError(f"unknown --mode {mode!r}", where="--mode", option="--mode", value=mode,
                             fix=f"use one of {', '.join(MODES)}")
    if reps < 1 or micro_batches < 0:
        raise BadOptionError(f"--reps {reps} / --micro-batches {micro_batches} out of range", where="--reps",
                             option="--reps", value=reps, fix="pass --reps >= 1 and --micro-batches >= 0")
    if preset_path(str(cluster)) is not None or not cluster.is_file():
        raise BadOptionError(f"{str(cluster)!r} is not a cluster file", where="--cluster", option="--cluster",
                             value=str(cluster), fix="pass the file `hgpart calibrate --out F` wrote on this "
                                                     "machine (a preset describes other hardware)")
    doc = read_json(cluster, what="cluster file")
    spec = cluster_from_dict(doc, where=str(cluster), base=cluster.parent)
    check_outputs(files={"--cluster": cluster})
    batches = parse_int_list(batch_sizes, what="--batch-sizes")
    pls = [(path, load_placement(path)) for path in placements]
    for b in batches:
        for path, pl in pls:
            for m in split_micro_batches(pl, mode, micro_batches):
                if b % m:
                    raise BadOptionError(f"batch size {b} does not split into {m} micro-batches for {path}",
                                         where="--batch-sizes", option="--batch-sizes", value=b,
                                         fix="use batch sizes divisible by the micro-batches")
    cores = spec.device.profile_cores or 1
    usable = sorted(os.sched_getaffinity(0))
    if cores > len(usable):
        raise BadOptionError(f"the cluster's devices have {cores} cores, {len(usable)} are usable here",
                             where="--cluster", option="--cluster", value=str(cluster),
                             fix="run on the machine the cluster file was calibrated on")
    con = Console()
    from hgpart.runtime.cluster import open_local
    from hgpart.runtime.splitbench import SplitRequest, measure_split_costs

    reqs = [SplitRequest(pl, m) for _, pl in pls for m in split_micro_batches(pl, mode, micro_batches)]
    names = [str(path) for path, pl in pls for _ in split_micro_batches(pl, mode, micro_batches)]
    costs: list[SplitCost] = []
    with open_local(1, cores=usable[:cores], inter_op=4, start_timeout=180) as ds:
        for b in batches:
            con.print(f"timing {len(reqs)} step(s) at batch {b} on one worker of {cores} core(s), {reps} rounds ...")
            costs += [SplitCost(t.placement, t.model, t.batch_size, t.micro_batches, t.whole_ms, t.split_ms,
                                t.input_shape or None)
                      for t in measure_split_costs(reqs, ds, batch_size=b, reps=reps)]
    merged = merge_split_costs(doc, costs)
    cluster_from_dict(merged, where=str(cluster), base=cluster.parent)  # what is written must load
    write_json(cluster, merged, what="cluster file")
    tab = Table("placement", "K", "B", "micro-batches", "unsplit ms", "split ms", "factor",
                title="split op structure, every part on one worker")
    for i, c in enumerate(costs):
        name = names[i % len(reqs)]
        tab.add_row(name, str(reqs[i % len(reqs)].placement.k), str(c.batch_size), str(c.micro_batches),
                    f"{c.whole_ms:.2f}", f"{c.split_ms:.2f}", f"x{c.factor:.3f}")
    con.print(tab)
    con.print(f"added {len(costs)} split cost(s) to {cluster} ({len(merged['device']['split_costs'])} in all)",
              highlight=False)
