"""`hgpart calibrate` and the `this-machine` preset: the link fit recovers known figures, a quick calibration writes
a cluster file the simulator accepts, bad outputs and a missing calibration are one-line errors."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hgtoys import toy_network, unit_work
from rich.console import Console

from hgpart.calibration import (
    Calibration,
    ComputeRate,
    LinkFit,
    cluster_document,
    fit_link,
    fit_ring,
    fit_tensors,
    foreign_profiles,
)
from hgpart.cli import main
from hgpart.cluster import THIS_MACHINE, ClientCpuCost, PortOwner, cluster_from_dict, load_cluster, this_machine_path
from hgpart.commands.calibrate_cmds import note_foreign_profiles
from hgpart.errors import BadOptionError, HgpartError
from hgpart.hypergraph import build_hypergraph
from hgpart.models import load_graph
from hgpart.placement import Placement
from hgpart.profile import Profile
from hgpart.simulate.costs import layer_times
from hgpart.simulate.run import ClusterDevices

SIZES = [4096 * 4**i for i in range(7)] + [2**25]


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_the_least_squares_fit_recovers_a_known_link() -> None:
    latency, bandwidth = 80e-6, 1.5e9
    exact = fit_link(SIZES, [latency + s / bandwidth for s in SIZES])
    assert exact.latency == pytest.approx(latency, rel=1e-6) and exact.bandwidth == pytest.approx(bandwidth, rel=1e-9)
    assert exact.seconds(2**20) == pytest.approx(latency + 2**20 / bandwidth)
    rng = np.random.default_rng(0)  # 1 % multiplicative noise: still within a few percent
    noisy = fit_link(SIZES, [(latency + s / bandwidth) * (1 + 0.01 * rng.standard_normal()) for s in SIZES])
    assert noisy.bandwidth == pytest.approx(bandwidth, rel=0.03)
    zero = fit_link(SIZES, [s / bandwidth - 1e-7 for s in SIZES])  # a negative intercept is clipped, and said
    assert zero.latency == 0.0 and zero.intercept < 0


def test_a_few_percent_off_the_largest_size_does_not_wipe_out_the_latency() -> None:
    """Noise proportional to a timing: 10 % off the two largest hops (a few ms) must not decide the latency that
    every small transfer pays; plain least squares lose most of it here."""
    latency, bandwidth = 400e-6, 0.93e9
    seconds = [latency + s / bandwidth for s in SIZES]
    seconds[-2] *= 0.9
    seconds[-1] *= 1.1
    a = np.column_stack([np.ones(len(SIZES)), SIZES])
    assert np.linalg.lstsq(a, np.asarray(seconds), rcond=None)[0][0] < latency / 4  # the unweighted fit's intercept
    fit = fit_link(SIZES, seconds)
    assert fit.latency == pytest.approx(latency, rel=0.05) and fit.bandwidth == pytest.approx(bandwidth, rel=0.05)
    seconds[0] = -1e-6  # the smallest hop fell below the timer's reach: left out, the rest still fit
    assert fit_link(SIZES, seconds).latency == pytest.approx(latency, rel=0.05)


@pytest.mark.parametrize(("sizes", "seconds", "says"), [([4096], [1e-3], "two distinct sizes"),
                                                        ([4096, 4096], [1e-3, 2e-3], "two distinct sizes"),
                                                        ([4096, 8192], [2e-3, 1e-3], "do not grow"),
                                                        ([4096, 8192], [1e-3, math.inf], "not finite"),
                                                        ([4096, 8192, 16384], [-1e-6, 0.0, 1e-3], "above 0")])
def test_a_fit_that_cannot_be_made_is_one_error(sizes: list[int], seconds: list[float], says: str) -> None:
    with pytest.raises(HgpartError, match=says) as err:
        fit_link(sizes, seconds)
    assert "\n" not in err.value.line()


def _calibration(link: LinkFit | None, devices: int = 2, call: float | None = None) -> Calibration:
    rate = ComputeRate(40e9, ("conv (conv2d, 16x16x64)", "fc (dense, 256)"), 32, "process_cpu", 0.5, "test CPU")
    return Calibration(cores_per_device=1, devices=devices, usable_cores=2, compute=rate,
                       memory_bytes=16 * 2**30, memory_bandwidth=10e9, memory_copy_bytes=2**25, link=link,
                       link_repeats=3, quick=True, profiles=None, call_seconds=call)


def test_the_document_describes_pinned_workers_and_cites_every_figure() -> None:
    doc = cluster_document(_calibration(fit_link(SIZES, [50e-6 + s / 2e9 for s in SIZES])))
    c = cluster_from_dict(doc)
    assert (c.name, c.nodes, c.devices_per_node) == (THIS_MACHINE, 1, 2)
    assert c.device.rate_flops == pytest.approx(40e9) and c.device.memory_bytes == pytest.approx(8 * 2**30)
    assert c.intra is not None and c.intra.bandwidth == pytest.approx(2e9) and c.intra.port_per is PortOwner.DEVICE
    assert c.intra.latency == pytest.approx(50e-6, rel=1e-6)
    assert c.device.ops_share_cores and "inter-op threads" in doc["device"]["sources"]["ops_share_cores"]
    assert set(doc["device"]["sources"]) >= {"peak_TFLOPs", "efficiency", "memory_GiB", "memory_bandwidth_GBps"}
    assert "hgpart calibrate" in doc["device"]["sources"]["peak_TFLOPs"] and "fc (dense" in \
        doc["device"]["sources"]["peak_TFLOPs"]
    assert "32 MiB" in c.intra.sources["bandwidth_GBps"] and "4 KiB" in c.intra.sources["bandwidth_GBps"]
    one = cluster_from_dict(cluster_document(_calibration(None, devices=1)))  # one device: no link to describe
    assert one.devices_per_node == 1 and one.intra is None
    assert c.device.call_overhead == 0.0 and "call_overhead_us" not in doc["device"]  # not measured: free calls
    called = cluster_document(_calibration(None, devices=1, call=3.5e-3))
    assert cluster_from_dict(called).device.call_overhead == pytest.approx(3.5e-3)
    assert "step call" in called["device"]["sources"]["call_overhead_us"]
    hops = dataclasses.replace(_calibration(fit_link(SIZES, [3e-4 + s / 2e9 for s in SIZES])),
                               eager_link=fit_link(SIZES, [50e-6 + s / 1e9 for s in SIZES]))
    inside = cluster_from_dict(cluster_document(hops)).intra
    assert inside is not None and inside.latency == pytest.approx(3e-4, rel=1e-6)  # the in-function link is used
    assert "inside one compiled function" in inside.sources["latency_us"] and "1.000 GB/s" in \
        inside.sources["latency_us"]


def test_profiles_another_cpu_made_are_named_in_one_note(tmp_path: Path) -> None:
    def profile(name: str, cpu: str) -> None:
        (tmp_path / name).write_text(json.dumps({"machine": {"cpu_model": cpu}, "layers": []}))

    profile("minivgg_32_b32_c1.json", "This CPU")
    profile("minires_32_b32_c1.json", "Other CPU @ 2.80GHz")
    profile("vgg16_64_b32_c2.json", "Other CPU @ 2.80GHz")  # two cores: not this cluster's profiles
    (tmp_path / "lenet_32_b32_c1.json").write_text("{not json")
    assert foreign_profiles(tmp_path, 1, "This CPU") == [("lenet_32_b32_c1.json", "unreadable"),
                                                         ("minires_32_b32_c1.json", "Other CPU @ 2.80GHz")]
    assert foreign_profiles(tmp_path, 2, "Other CPU @ 2.80GHz") == []
    con = Console(record=True, width=400)
    note_foreign_profiles(con, tmp_path, 1, "This CPU")
    text = con.export_text()
    assert text.count("note:") == 1 and "2 profile(s) of 1 core(s)" in text and "Other CPU @ 2.80GHz" in text
    assert "hgpart profile --model M" in text and "--cores 1" in text
    quiet = Console(record=True, width=400)
    note_foreign_profiles(quiet, tmp_path, 2, "Other CPU @ 2.80GHz")
    assert quiet.export_text() == ""


def test_the_ring_fit_recovers_a_known_all_reduce_and_the_document_carries_it_and_the_step_calls() -> None:
    pts = [(2**18, 16), (2**18, 64), (2**22, 16), (2**24, 16), (2**26, 16)]
    secs = [2e-4 + b / 1.5e9 + n * 3e-6 for b, n in pts]
    fit = fit_ring(pts, secs, replicas=2)
    assert fit.cost.fixed == pytest.approx(2e-4, rel=1e-6) and fit.cost.bandwidth == pytest.approx(1.5e9, rel=1e-6)
    assert fit.cost.per_tensor == pytest.approx(3e-6, rel=1e-6) and fit.cost.replicas == 2
    below = fit_ring(pts, [b / 1.5e9 - 1e-4 + n * 1e-9 for b, n in pts], replicas=2)  # no negative fixed cost
    assert below.cost.fixed == 0.0
    with pytest.raises(HgpartError, match="two sizes"):
        fit_ring([(2**20, 16), (2**20, 64)], [1e-3, 2e-3], replicas=2)
    calls = {1: fit_link(SIZES, [1e-3 + s / 1e9 for s in SIZES]), 2: fit_link(SIZES, [3e-3 + s / 5e8 for s in SIZES])}
    cal = dataclasses.replace(_calibration(fit_link(SIZES, [50e-6 + s / 2e9 for s in SIZES])), ring=fit, calls=calls)
    doc = cluster_document(cal)
    c = cluster_from_dict(doc)
    assert c.intra is not None and c.intra.allreduce == fit.cost
    assert c.device.call_seconds(2**20, 2) == pytest.approx(3e-3 + 2**20 / 5e8, rel=1e-6)
    assert "ring_allreduce" in doc["links"]["intra_node"]["allreduce"]["sources"]["fit"]
    assert "step_call" in doc["device"]["sources"]["step_calls"]


def test_the_tensor_fit_recovers_a_known_cost_per_tensor_and_the_simulated_link_uses_it() -> None:
    counts = [1, 4, 16, 64]
    fit = fit_tensors(counts, [40e-6 + n * 55e-6 for n in counts], nbytes=2**16)
    assert fit.per_tensor == pytest.approx(55e-6, rel=1e-6) and fit.intercept == pytest.approx(40e-6, rel=1e-6)
    assert fit_tensors(counts, [3e-4 - n * 1e-7 for n in counts], nbytes=2**16).per_tensor == 0.0  # no negative cost
    with pytest.raises(HgpartError, match="two distinct counts"):
        fit_tensors([16, 16], [1e-3, 2e-3], nbytes=2**16)
    link = fit_link(SIZES, [2e-4 + s / 2e9 for s in SIZES])
    doc = cluster_document(dataclasses.replace(_calibration(link), tensors=fit))
    c = cluster_from_dict(doc)
    assert c.intra is not None and c.intra.per_tensor == pytest.approx(55e-6, rel=1e-6)
    assert c.intra.tensor_seconds == pytest.approx(55e-6, rel=1e-6)
    assert "64 KiB in all" in c.intra.sources["per_tensor_us"] and "1, 4, 16, 64" in c.intra.sources["per_tensor_us"]
    assert ClusterDevices(c).tensor_seconds(0, 1) == pytest.approx(55e-6, rel=1e-6)
    before = cluster_from_dict(cluster_document(_calibration(link)))  # not measured: each tensor pays the latency
    assert before.intra is not None and before.intra.per_tensor is None
    assert ClusterDevices(before).tensor_seconds(1, 0) == pytest.approx(2e-4, rel=1e-6)


def test_the_client_cpu_per_call_goes_into_the_document_and_the_nearest_batch_is_used() -> None:
    costs = (ClientCpuCost("minivgg", (32, 32, 3), 16, 3e-3, 6e-3), ClientCpuCost("minivgg", (32, 32, 3), 64, 5e-3,
                                                                                  7e-3))
    doc = cluster_document(dataclasses.replace(_calibration(None, devices=1), client_cpu=costs))
    dev = cluster_from_dict(doc).device
    assert [(k.model, k.input_shape, k.batch_size) for k in dev.client_cpu] == [(k.model, k.input_shape, k.batch_size)
                                                                               for k in costs]
    assert [v for k in dev.client_cpu for v in (k.step, k.async_call)] == pytest.approx([3e-3, 6e-3, 5e-3, 7e-3])
    assert "process_time" in doc["device"]["sources"]["client_cpu"]
    near = dev.client_seconds("minivgg", [32, 32, 3], 40)  # nearest by ratio: 40/16 > 64/40
    tie = dev.client_seconds("minivgg", (32, 32, 3), 32)  # a tie goes to the smaller batch
    assert near is not None and near.batch_size == 64 and tie is not None and tie.batch_size == 16
    assert dev.client_seconds("minivgg", (64, 64, 3), 16) is None and dev.client_seconds("vgg16", (32, 32, 3), 16) \
        is None
    assert "client_cpu" not in cluster_document(_calibration(None, devices=1))["device"]  # not measured


def test_without_a_calibration_this_machine_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert this_machine_path() == tmp_path / "hgpart" / "cluster_this-machine.json"
    with pytest.raises(BadOptionError, match="run `hgpart calibrate` first") as err:
        load_cluster("this-machine")
    assert "\n" not in err.value.line() and str(tmp_path) in err.value.line()
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/not/used")  # the XDG rule: only an absolute path counts
    assert this_machine_path() == Path.home() / ".config" / "hgpart" / "cluster_this-machine.json"


def test_an_unwritable_out_is_refused_before_measuring(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "profiles").write_text("x")  # where --profile would write its profiles
    before = os.sched_getaffinity(0)
    for argv, says in ((["--out", str(afile / "c.json")], "is a file, not a folder"),
                       (["--out", str(tmp_path)], "is a directory"),
                       (["--out", str(tmp_path / "c.json"), "--cores", "0"], "--cores 0"),
                       (["--out", str(tmp_path / "c.json"), "--cores", "999"], "--cores 999"),
                       (["--out", str(tmp_path / "c.json"), "--profile", "vgg16:64", "--profile", "nosuch:32"],
                        "unknown model 'nosuch'"),
                       (["--out", str(tmp_path / "c.json"), "--profile", "x/m.keras"], "does not exist"),
                       (["--out", str(tmp_path / "c.json"), "--profile", "vgg16", "--batch-sizes", "0"],
                        "--batch-sizes"),
                       (["--out", str(tmp_path / "d" / "c.json"), "--profile", "vgg16"], "--profile")):
        code, out, err = _cli(["calibrate", "--quick", *argv], capsys)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and "Traceback" not in err and says in lines[0], (argv, err)
        assert "calibrating" not in out
    assert os.sched_getaffinity(0) == before and not (tmp_path / "c.json").exists()


def test_a_quick_calibration_is_a_cluster_the_simulator_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cfg" / "hgpart" / "cluster_this-machine.json"
    # its own process: calibrate pins the process and sizes TensorFlow's pools, which this one has started already
    # --out relative to the working folder: the profiles folder beside it must be found from the cluster file
    run = subprocess.run([sys.executable, "-c", "from hgpart.cli import main; main()", "calibrate", "--quick",
                          "--out", str(out.relative_to(tmp_path)), "--profile", "lenet5:28x28x1", "--batch-sizes",
                          "8,3,8"], capture_output=True, text=True, timeout=240, env=dict(os.environ, COLUMNS="200"),
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "compute rate" in run.stdout and f"wrote {out.relative_to(tmp_path)}" in run.stdout
    c = load_cluster(out)
    # --profile: this machine's profiles beside the cluster file, pinned as a worker, and the cluster reads them
    made = sorted(p.name for p in (out.parent / "profiles").iterdir())
    assert made == ["lenet5_28x28x1_b3_c1.json", "lenet5_28x28x1_b8_c1.json"], made
    assert c.device.profiles == out.parent / "profiles" and c.device.profile_cores == 1
    assert json.loads(out.read_text())["device"]["profiles"] == "profiles"  # moves with the cluster file
    assert run.stdout.count("profiled lenet5 at 28x28x1") == 2 and "note:" not in run.stdout
    lenet = load_graph("lenet5", input_shape=(28, 28, 1))
    prof = Profile.load(out.parent / "profiles" / "lenet5_28x28x1_b8_c1.json")
    assert prof.mode == "measured" and prof.setup.cores == 1 and prof.fingerprint == lenet.fingerprint()
    assert layer_times(lenet, c.device, batch=8).source.startswith("measured profile")
    assert "lenet5_28x28x1_b3_c1.json" in json.loads(out.read_text())["device"]["sources"]["profiles"]
    rate = c.device.rate_flops
    assert rate is not None and math.isfinite(rate) and rate > 0
    assert c.name == THIS_MACHINE and c.nodes == 1 and c.device.efficiency == 1.0
    assert c.devices_per_node == len(os.sched_getaffinity(0))  # one device per core (--cores 1)
    if c.devices_per_node > 1:
        assert c.intra is not None and c.intra.bandwidth > 0 and math.isfinite(c.intra.latency)
        assert 0 < c.device.call_overhead < 1.0 and "step call" in run.stdout  # measured: a call costs something
        assert [k.devices for k in c.device.step_calls] == [1, 2] and "ring all-reduce" in run.stdout
        assert c.intra.allreduce is not None and c.intra.allreduce.replicas == 2 and c.intra.allreduce.bandwidth > 0
        # the client's CPU per call of the profiled model's own steps, at each batch size (an odd one too: its
        # async call is timed at the even batch below it)
        got = [(k.model, k.input_shape, k.batch_size) for k in c.device.client_cpu]
        assert got == [("lenet5", (28, 28, 1), 3), ("lenet5", (28, 28, 1), 8)], got
        assert all(0 < k.step < 1.0 and 0 < k.async_call < 1.0 for k in c.device.client_cpu)
        assert "client CPU, lenet5" in run.stdout and "runtime.clientbench" in \
            json.loads(out.read_text())["device"]["sources"]["client_cpu"]
    assert not list(out.parent.glob("*.tmp")) and "measured by `hgpart calibrate --quick`" in \
        json.loads(out.read_text())["sources"]["calibration"]
    # the preset name finds it in the configuration folder, and `hgpart simulate --cluster this-machine` runs
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    mine = load_cluster("this-machine")
    assert (mine.path, mine.device, mine.intra) == (str(out), c.device, c.intra)
    graph = toy_network()
    hg = build_hypergraph(graph, unit_work(graph), batch_size=8, grain="coarse")  # type: ignore[arg-type]
    parts = np.arange(hg.num_vertices) % min(2, c.num_devices)
    pl_path = Placement.from_vertex_parts(graph, hg, parts, k=min(2, c.num_devices), method="test",
                                          work=unit_work(graph)).save(tmp_path / "toy.json")
    code, stdout, err = _cli(["simulate", "-p", str(pl_path), "-c", "this-machine"], capsys)
    assert code == 0 and "img/s" in stdout and "this-machine" in stdout, err


def test_profile_cores_picks_the_profiles_of_the_worker_kind(tmp_path: Path) -> None:
    from hgpart.profile import LayerCost, Profile, ProfileSetup
    from hgpart.simulate.costs import layer_times

    graph = toy_network()
    for cores, ms in ((1, 2.0), (2, 1.0)):  # the whole machine is faster: it must not stand for a one-core worker
        costs = [LayerCost(layer.name, ms, 2 * ms, layer.flops, layer.params, 0) for layer in graph.layers]
        Profile(graph.name, graph.input_shape, 8, "measured", graph.fingerprint(), costs,
                recorded_setup=ProfileSetup(cores=cores, pinned=cores == 1)).save(tmp_path / f"p_c{cores}.json")
    doc = cluster_document(dataclasses.replace(_calibration(None, devices=1), profiles=tmp_path))
    assert (doc["device"]["profiles"], doc["device"]["profile_cores"]) == (str(tmp_path), 1)
    device = cluster_from_dict(doc).device
    assert layer_times(graph, device, batch=8).forward["conv1"] == pytest.approx(2e-3)
    doc["device"]["profile_cores"] = 4  # no profile of a 4-core worker: the measured FLOP rate
    times = layer_times(graph, cluster_from_dict(doc).device, batch=8)
    assert "FLOPs" in times.source and times.forward["conv1"] == pytest.approx(
        graph.layer("conv1").flops * 8 / 40e9)
