"""``hgpart calibrate``: measure this machine with micro-benchmarks and write the ``this-machine`` cluster file."""

from __future__ import annotations

import os
import statistics
from functools import partial
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from hgpart.calibration import (
    LINK_SIZES,
    QUICK_LINK_SIZES,
    QUICK_RING_POINTS,
    RING_POINTS,
    Calibration,
    LinkFit,
    RingFit,
    TensorFit,
    cluster_document,
    compute_rate,
    fit_link,
    fit_ring,
    fit_step_calls,
    fit_tensors,
    foreign_profiles,
    human_bytes,
    machine_memory_bytes,
    memory_bandwidth,
    repo_profiles,
)
from hgpart.cluster import GIB, ClientCpuCost, this_machine_path
from hgpart.commands import app
from hgpart.commands.compare_cmds import parse_int_list
from hgpart.errors import BadOptionError
from hgpart.fileio import check_outputs, write_json
from hgpart.machine_profiles import ProfileRequest, make_profiles, profile_requests
from hgpart.models import load_keras_model

__all__ = ["calibrate_cmd", "print_calibration", "note_foreign_profiles"]


@app.command("calibrate")
def calibrate_cmd(
    out: Path | None = typer.Option(None, "--out", "-o", help="cluster file to write (default: "
                                    "$XDG_CONFIG_HOME/hgpart/cluster_this-machine.json, read by "
                                    "--cluster this-machine)"),
    cores: int = typer.Option(1, "--cores", help="cores per device: each device is one pinned local worker of "
                              "N cores"),
    quick: bool = typer.Option(False, "--quick", help="fewer repeats and smaller benchmarks (seconds, rough)"),
    profile: list[str] = typer.Option([], "--profile", help="also profile MODEL[:INPUT] on this machine (e.g. "
                                      "vgg16:64; repeatable) into profiles/ beside the cluster file, and point the "
                                      "cluster file there instead of at the source checkout's profiles"),
    batch_sizes: str = typer.Option("32", "--batch-sizes", help="with --profile: the batch sizes to profile, "
                                    "comma-separated (the simulator scales a profile to other batch sizes)"),
) -> None:
    """Measure compute rate, memory and the link between two local workers; write this machine's cluster file."""
    target = out if out is not None else this_machine_path()
    check_outputs(files={"--out": target})
    usable = sorted(os.sched_getaffinity(0))
    if cores < 1 or cores > len(usable):
        raise BadOptionError(f"--cores {cores} is not between 1 and the {len(usable)} usable cores", where="--cores",
                             option="--cores", value=cores, fix=f"pass --cores between 1 and {len(usable)}")
    requests = profile_requests(profile, parse_int_list(batch_sizes, what="--batch-sizes")) if profile else []
    folder = target.parent / "profiles" if requests else None
    check_outputs(folders={"--profile": folder})
    devices = len(usable) // cores
    con = Console()
    con.print(f"calibrating {devices} device(s) of {cores} core(s){' (quick)' if quick else ''} ...")
    mem_bw, copy_bytes = memory_bandwidth(quick=quick)
    rate = compute_rate(cores=cores, quick=quick)  # pins this process: before TensorFlow starts anything else
    made: list[Path] = []
    models: list[tuple[str, tuple[int, ...], ProfileRequest]] = []
    if folder is not None:  # while pinned as a worker, as `hgpart profile --cores N` pins itself
        made = make_profiles(requests, cores=cores, folder=folder, quick=quick,
                             report=lambda line: con.print(line, highlight=False), built=models)
    os.sched_setaffinity(0, set(usable))  # the client of the link benchmark runs unpinned, as in training
    link: LinkFit | None = None
    eager: LinkFit | None = None
    call: float | None = None
    ring: RingFit | None = None
    calls: dict[int, LinkFit] = {}
    client: tuple[ClientCpuCost, ...] = ()
    tensors: TensorFit | None = None
    repeats = 3 if quick else 15
    if devices >= 2:
        from hgpart.runtime.clientbench import ClientModel
        from hgpart.runtime.linkbench import PULL_BYTES, measure_local_link

        points = QUICK_RING_POINTS if quick else RING_POINTS
        samples = measure_local_link(QUICK_LINK_SIZES if quick else LINK_SIZES, repeats=repeats, cores=usable,
                                     cores_per_worker=cores, ring_points=points,
                                     client_models=[ClientModel(name, shape, partial(load_keras_model, req.spec,
                                                                                     input_shape=req.input_shape),
                                                                req.batch_sizes) for name, shape, req in models])
        sizes = sorted(samples.seconds)
        eager = fit_link(sizes, [statistics.median(samples.seconds[s]) for s in sizes])
        hops = samples.hops or {}
        # the step functions' transfers are send/receive pairs inside one function: that link, if it was measured
        link = fit_link(sorted(hops), [statistics.median(hops[s]) for s in sorted(hops)]) if hops else eager
        call = samples.call
        calls = fit_step_calls(samples.calls or {})
        client = tuple(ClientCpuCost(name, shape, b, c.step, c.async_call)
                       for (name, shape, b), c in sorted((samples.client or {}).items()))
        if samples.pulls:
            tensors = fit_tensors(sorted(samples.pulls), [statistics.median(samples.pulls[n]) for n in
                                                         sorted(samples.pulls)], nbytes=PULL_BYTES)
        if samples.ring:
            ring = fit_ring([(4 * p, n) for p, n in samples.ring], [statistics.median(v) for v in
                                                                   samples.ring.values()], replicas=2)
    else:
        con.print(f"one device of {cores} core(s) fills the {len(usable)} usable cores: no link to measure")
    cal = Calibration(cores_per_device=cores, devices=devices, usable_cores=len(usable), compute=rate,
                      memory_bytes=machine_memory_bytes(), memory_bandwidth=mem_bw, memory_copy_bytes=copy_bytes,
                      link=link, link_repeats=repeats, quick=quick, profiles=folder or repo_profiles(),
                      profiled=tuple(p.name for p in made),
                      call_seconds=call, eager_link=eager if eager is not link else None, ring=ring, calls=calls,
                      client_cpu=client, tensors=tensors)
    doc = cluster_document(cal, base=target.parent)
    write_json(target, doc, what="cluster file")
    print_calibration(con, cal)
    con.print(f"wrote {target}" + ("  (--cluster this-machine reads it)" if out is None else ""), highlight=False)
    if cal.profiles is not None:
        note_foreign_profiles(con, cal.profiles, cores, rate.cpu_model)


def note_foreign_profiles(con: Console, folder: Path, cores: int, cpu_model: str) -> None:
    """One note when profiles the cluster file points at were made on another CPU (the simulator uses them as
    they are): which, and how to make this machine's."""
    foreign = foreign_profiles(folder, cores, cpu_model)
    if not foreign:
        return
    cpus = sorted({cpu for _, cpu in foreign})
    con.print(f"note: {len(foreign)} profile(s) of {cores} core(s) in {folder} were made on another CPU "
              f"({'; '.join(cpus)}), not this {cpu_model}; the simulator times their models from them as they "
              f"are. Make this machine's with `hgpart profile --model M --input S --batch-size B --cores {cores} "
              f"--out <folder>/<model>_<input>_b<B>_c{cores}.json` and point device.profiles in the cluster file "
              "at that folder.", highlight=False)


def print_calibration(con: Console, cal: Calibration) -> None:
    """One row per measured figure: its value and how it was measured."""
    tab = Table("figure", "value", "how", title=f"this machine: {cal.devices} device(s) of {cal.cores_per_device} "
                f"core(s), {cal.compute.cpu_model}")
    c = cal.compute
    tab.add_row("compute rate", f"{c.flops_per_s / 1e9:.2f} GFLOP/s",
                f"{len(c.layers)} conv/dense layers, batch {c.batch_size}, forward + backward, {c.clock} clock")
    tab.add_row("memory per device", f"{cal.memory_bytes / cal.devices / GIB:.2f} GiB",
                f"{cal.memory_bytes / GIB:.2f} GiB RAM / {cal.devices}")
    tab.add_row("memory bandwidth", f"{cal.memory_bandwidth / 1e9:.2f} GB/s",
                f"numpy copy of {cal.memory_copy_bytes // 2**20} MiB (read + write)")
    if cal.link is not None:
        lk = cal.link
        tab.add_row("link bandwidth", f"{lk.bandwidth / 1e9:.3f} GB/s",
                    f"{'hops inside one function' if cal.eager_link is not None else 'eager copies'}, worker 0 "
                    f"<-> worker 1, {len(lk.sizes)} sizes {lk.sizes[0]} .. {lk.sizes[-1]} B, "
                    f"{cal.link_repeats} samples each")
        tab.add_row("link latency", f"{lk.latency * 1e6:.1f} us", "intercept of the fit (least squares on "
                    "relative error)")
    if cal.tensors is not None:
        pt = cal.tensors
        tab.add_row("link, each further tensor", f"{pt.per_tensor * 1e6:.1f} us",
                    f"pulls of {', '.join(map(str, pt.counts))} tensors ({human_bytes(pt.nbytes)} in all) in one "
                    "function, against one hop of their sum: the slope")
    if cal.eager_link is not None:
        ek = cal.eager_link
        tab.add_row("link, eager copies", f"{ek.bandwidth / 1e9:.3f} GB/s, {ek.latency * 1e6:.1f} us",
                    "tf.identity of a tensor on the other worker, the call's own cost taken off (not used)")
    if cal.ring is not None:
        rc = cal.ring.cost
        tab.add_row("ring all-reduce", f"{rc.fixed * 1e3:.2f} ms + bytes / {rc.bandwidth / 1e9:.3f} GB/s + "
                    f"{rc.per_tensor * 1e6:.1f} us a tensor", f"the runtime's all-reduce over {rc.replicas} workers, "
                    f"{len(cal.ring.points)} sizes {human_bytes(cal.ring.points[0][0])} .. "
                    f"{human_bytes(cal.ring.points[-1][0])} a replica, 16-64 tensors")
    for k, f in sorted(cal.calls.items()):
        tab.add_row(f"step call, {k} device(s)", f"{f.latency * 1e3:.2f} ms + bytes / {f.bandwidth / 1e9:.3f} GB/s",
                    f"the input fed from the client and split over {k} worker(s), {len(f.sizes)} sizes "
                    f"{human_bytes(f.sizes[0])} .. {human_bytes(f.sizes[-1])}")
    for cc in cal.client_cpu:
        tab.add_row(f"client CPU, {cc.model} {'x'.join(map(str, cc.input_shape))} B={cc.batch_size}",
                    f"{cc.step * 1e3:.2f} ms a step, {cc.async_call * 1e3:.2f} ms an async call",
                    "the client process's CPU per call of the model's own step functions on the workers")
    if cal.call_seconds is not None:
        tab.add_row("step call", f"{cal.call_seconds * 1e3:.2f} ms",
                    "one call of a trivial compiled function on worker 0, fed and fetched by the client")
    tab.add_row("profiles", str(cal.profiles) if cal.profiles else "-",
                (f"{len(cal.profiled)} made now; " if cal.profiled else "") +
                f"profiles made on {cal.cores_per_device} core(s) replace the FLOP rate for their models")
    con.print(tab)
