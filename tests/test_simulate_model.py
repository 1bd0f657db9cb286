"""The simulator on real placements of hand-built networks (no TensorFlow): what it charges adds up to the cost
model, one part equals one device, sync DP equals ParaDL's closed form, and the command line works end to end."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hgtoys import branching_network, toy_network, unit_work

from hgpart.cli import main
from hgpart.cluster import Cluster, SplitCost, cluster_from_dict, split_cost_to_dict
from hgpart.commands.calibrate_split_cmds import merge_split_costs, split_micro_batches
from hgpart.errors import HgpartError
from hgpart.hypergraph import build_hypergraph
from hgpart.memory import placement_memory
from hgpart.placement import Placement
from hgpart.simulate import Mode, SimOptions, SimPipeline, SimStrategy, simulate
from hgpart.simulate.costs import layer_times, layer_update_seconds
from hgpart.simulate.engine import TaskKind
from hgpart.simulate.paradl import data_parallel_epoch, paradl_inputs

CLUSTER: dict[str, Any] = {
    "format": "hgpart.cluster/1", "name": "toy", "nodes": 2, "devices_per_node": 2,
    "device": {"kind": "toy", "peak_TFLOPs": 1e-6, "efficiency": 0.5, "memory_GiB": 1, "memory_bandwidth_GBps": 0.01},
    "links": {"intra_node": {"bandwidth_GBps": 1e-3, "latency_us": 10},
              "inter_node": {"bandwidth_GBps": 1e-4, "latency_us": 50}},
}


def _cluster(**device: Any) -> Cluster:
    d = copy.deepcopy(CLUSTER)
    d["device"].update(device)
    return cluster_from_dict(d)


def _placement(graph_fn: Any = toy_network, k: int = 2, grain: str = "coarse", seed: int = 0) -> Placement:
    graph = graph_fn()
    hg = build_hypergraph(graph, unit_work(graph), batch_size=8, grain=grain)  # type: ignore[arg-type]
    parts = np.random.default_rng(seed).integers(0, k, hg.num_vertices) if k > 1 else np.zeros(hg.num_vertices,
                                                                                                   np.int64)
    return Placement.from_vertex_parts(graph, hg, parts, k=k, method="random", work=unit_work(graph))


@pytest.mark.parametrize(("graph_fn", "grain"), [(toy_network, "coarse"), (toy_network, "fine"),
                                                 (branching_network, "coarse")])
def test_a_batch_charges_the_model_work_and_the_cut_bytes(graph_fn: Any, grain: str) -> None:
    pl = _placement(graph_fn, k=3, grain=grain, seed=1)
    cluster = _cluster()
    res = simulate(pl, cluster, SimOptions(batch_size=8, inflight=1, jobs=1, mode=Mode.ASYNC))
    times = layer_times(pl.graph, cluster.device, batch=8)
    compute = sum(t.end - t.start for t in res.tasks if t.kind is TaskKind.COMPUTE)
    assert compute == pytest.approx(times.total(), rel=1e-12)
    sent_fwd = sum(t.nbytes for t in res.tasks if t.kind is TaskKind.SEND and t.name.startswith("map"))
    sent_bwd = sum(t.nbytes for t in res.tasks if t.kind is TaskKind.SEND and t.name.startswith("grad"))
    km1 = pl.recompute_metrics().comm_volume_mib * 2**20  # forward bytes at the placement's batch 8
    assert sent_fwd == pytest.approx(km1, rel=1e-12)
    assert 0 < sent_bwd <= sent_fwd  # the same maps back, except those from the input (no input gradient)


def test_one_part_is_one_device() -> None:
    pl = _placement(k=1)
    cluster = _cluster()
    mp = simulate(pl, cluster, SimOptions(batch_size=8, inflight=1))
    single = simulate(pl, cluster, SimOptions(batch_size=8, strategy=SimStrategy.SINGLE))
    assert mp.step_s == pytest.approx(single.step_s, rel=1e-12)
    assert mp.memory[0].total == pytest.approx(single.memory[0].total)


def test_more_batches_in_flight_never_slow_the_pipeline_and_memory_grows() -> None:
    pl = _placement(k=2)
    cluster = _cluster()
    one, two = (simulate(pl, cluster, SimOptions(batch_size=8, inflight=n)) for n in (1, 2))
    assert two.images_per_s >= one.images_per_s
    assert [m.total for m in two.memory] == pytest.approx(
        [p.total for p in placement_memory(pl, batch_size=8, inflight=2)])
    assert two.memory[0].activations > one.memory[0].activations


def test_async_model_parallelism_defaults_to_one_batch_per_stage_as_the_runtime() -> None:
    """No --inflight: async stages keep one batch per pipeline stage in flight, at most K + 1 (the runtime's default,
    and its activations in memory), the graph pipeline one, sync K micro-batches."""
    from hgpart.placement import default_inflight

    assert [default_inflight(2, s) for s in (0, 2, 3, 4, 9)] == [2, 2, 3, 3, 3]
    assert [default_inflight(8, s) for s in (0, 8, 30)] == [8, 8, 9]
    for seed in range(3):
        pl = _placement(k=2, seed=seed)
        n = default_inflight(2, pl.pipeline_stages())
        cluster = _cluster()
        default = simulate(pl, cluster, SimOptions(batch_size=8))
        assert default.inflight == n
        assert default.step_s == simulate(pl, cluster, SimOptions(batch_size=8, inflight=n)).step_s
        assert [m.total for m in default.memory] == pytest.approx(
            [p.total for p in placement_memory(pl, batch_size=8, inflight=n)])
        assert simulate(pl, cluster, SimOptions(batch_size=8, pipeline=SimPipeline.GRAPH)).inflight == 1
        assert simulate(pl, cluster, SimOptions(batch_size=8, mode=Mode.SYNC)).inflight == 2
    layerwise = _placement(k=1)  # one part: one stage, K = 1
    assert simulate(layerwise, _cluster(), SimOptions(batch_size=8)).inflight == 1


def test_the_graph_pipeline_runs_one_batch_at_a_time_whatever_is_queued() -> None:
    pl = _placement(k=2)
    cluster = _cluster()
    one = simulate(pl, cluster, SimOptions(batch_size=8, inflight=1))
    stages = simulate(pl, cluster, SimOptions(batch_size=8, inflight=2))
    graph = simulate(pl, cluster, SimOptions(batch_size=8, inflight=2, pipeline=SimPipeline.GRAPH))
    assert graph.images_per_s == pytest.approx(one.images_per_s, rel=1e-12)
    assert graph.inflight == 1 and stages.images_per_s > one.images_per_s
    # sync: the micro-batches of the one function advance together (they share each worker's cores), so at a
    # FLOP rate (the same cost per sample at every batch) it is one micro-batch of B, slower than the stages'
    sync = SimOptions(batch_size=8, inflight=2, mode=Mode.SYNC)
    together = simulate(pl, cluster, dataclasses.replace(sync, pipeline=SimPipeline.GRAPH))
    assert together.step_s == simulate(pl, cluster, dataclasses.replace(sync, inflight=1)).step_s
    assert together.step_s > simulate(pl, cluster, sync).step_s
    # the compiled pipeline runs a sync call's micro-batches one after another on each worker, so they pipeline
    # across the parts, faster than advancing together
    compiled = simulate(pl, cluster, dataclasses.replace(sync, pipeline=SimPipeline.COMPILED, steps_per_call=1))
    assert compiled.step_s < together.step_s
    assert compiled.inflight == 2


@pytest.mark.parametrize(("pipeline", "per_call", "jobs", "calls"),
                         [(SimPipeline.GRAPH, 1, 3, 3), (SimPipeline.COMPILED, 4, 8, 2)])
def test_a_model_parallel_call_feeds_its_steps_images_at_the_measured_call_cost(
        pipeline: SimPipeline, per_call: int, jobs: int, calls: int) -> None:
    # the runtime's client feeds every step of a call (its images and labels) to the worker holding the input, as
    # the single device's call feeds its batch: a call costs the measured step call of those bytes to one worker
    pl = _placement(k=2)
    cluster = _cluster(call_overhead_us=1000.0, step_calls=[{"devices": 1, "fixed_us": 500.0, "feed_GBps": 1e-3},
                                                            {"devices": 2, "fixed_us": 9000.0, "feed_GBps": 1.0}])
    feed = 8 * (math.prod(pl.graph.input_shape) + 1) * 4  # bytes of one step's float32 images and int32 labels
    res = simulate(pl, cluster, SimOptions(batch_size=8, pipeline=pipeline, steps_per_call=per_call, jobs=jobs))
    got = [t.end - t.start for t in res.tasks if t.kind is TaskKind.CALL]
    assert got == pytest.approx([500e-6 + per_call * feed / 1e6] * calls, rel=1e-12)


def test_sync_data_parallelism_equals_paradl() -> None:
    # ParaDL's equations 5-6 are a ring all-reduce after an unoverlapped step: the simulator must agree exactly
    pl = _placement(k=2)
    cluster = _cluster()
    for n in (2, 4):
        res = simulate(pl, cluster, SimOptions(batch_size=8, strategy=SimStrategy.SYNC_DP, devices=n, images=64))
        inp = paradl_inputs(pl.graph, layer_times(pl.graph, cluster.device, batch=8), cluster, optimizer="adam")
        if n == 4:  # devices 0..3 span two nodes: the ring's slowest hop is inter-node; ParaDL takes device 0 -> 1
            assert res.epoch_s > data_parallel_epoch(inp, p=n, batch=8, images=64)
        else:
            assert res.epoch_s == pytest.approx(data_parallel_epoch(inp, p=n, batch=8, images=64), rel=1e-9)


def test_memory_against_capacity() -> None:
    pl = _placement(k=2)
    tiny = _cluster(memory_GiB=1e-9)  # about one byte
    res = simulate(pl, tiny, SimOptions(batch_size=8))
    assert not res.fits and not any(m.fits for m in res.memory)
    dp = simulate(pl, _cluster(), SimOptions(batch_size=8, strategy=SimStrategy.ASYNC_DP_1PS))
    assert dp.fits and dp.memory[0].optimizer > 0 and dp.memory[1].optimizer == 0  # slots live on the server


def test_async_data_parallel_workers_overlap_whatever_the_pipeline() -> None:
    # the runtime calls each worker's step function from its own thread: the workers' computations overlap, so two
    # workers beat one taking turns, and --pipeline graph (one model-parallel batch on the devices at a time) does
    # not make them take turns
    pl = _placement(k=2)
    for strategy in (SimStrategy.ASYNC_DP_1PS, SimStrategy.ASYNC_DP_DPS):
        runs = {pipe: simulate(pl, _cluster(), SimOptions(batch_size=8, strategy=strategy, pipeline=pipe))
                for pipe in (SimPipeline.STAGES, SimPipeline.GRAPH)}
        assert len({r.images_per_s for r in runs.values()}) == 1
        compute = [t for t in runs[SimPipeline.GRAPH].tasks if t.kind is TaskKind.COMPUTE]
        starts = sorted((t.start, t.end, t.device) for t in compute)
        assert any(a[1] > b[0] and a[2] != b[2] for a, b in zip(starts, starts[1:], strict=False))


def test_a_clusters_measured_client_cpu_slows_data_parallelism_only_where_no_core_is_spare() -> None:
    # the toy cluster has 2 devices per node: single device leaves one spare for the client; data parallelism on
    # both does not. A model the cluster has no client figure for is simulated as before.
    pl = _placement(k=2)
    g = pl.graph
    entry = {"model": g.name, "input": list(g.input_shape), "batch_size": 8, "step_us": 5e4, "async_call_us": 8e4}
    plain, measured = _cluster(), _cluster(client_cpu=[entry])
    other = _cluster(client_cpu=[{**entry, "model": "another"}])
    for strategy in (SimStrategy.SINGLE, SimStrategy.SYNC_DP, SimStrategy.ASYNC_DP_1PS, SimStrategy.ASYNC_DP_DPS):
        opts = SimOptions(batch_size=8, strategy=strategy)
        base, slow = simulate(pl, plain, opts), simulate(pl, measured, opts)
        assert simulate(pl, other, opts).images_per_s == base.images_per_s
        client = [t for t in slow.tasks if t.kind is TaskKind.CLIENT]
        assert client and all(t.duration == pytest.approx(0.08 if "async" in strategy.value else 0.05) for t in client)
        if strategy is SimStrategy.SINGLE:
            assert slow.images_per_s == base.images_per_s and {t.device for t in client} == {-1}
        else:
            assert slow.images_per_s < base.images_per_s and sum(t.client_s for t in slow.times) > 0


def test_epoch_counts_whole_steps() -> None:
    pl = _placement(k=2)
    res = simulate(pl, _cluster(), SimOptions(batch_size=8, images=100, mode=Mode.SYNC))
    assert res.epoch_s == pytest.approx(math.ceil(100 / 8) * res.step_s)  # sync: no pipeline fill


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_command_line_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pl_path = _placement(k=2).save(tmp_path / "toy.json")
    cfile = tmp_path / "c.json"
    cfile.write_text(json.dumps(CLUSTER))
    code, out, _ = _cli(["simulate", "-p", str(pl_path), "-c", str(cfile), "--trace", str(tmp_path / "tr"),
                         "--json", str(tmp_path / "r.json")], capsys)
    assert code == 0 and "img/s" in out and "critical path" in out
    trace = json.loads((tmp_path / "tr" / "devices_trace.simulated.json").read_text())
    pids = {e["pid"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert pids == {0, 1} and trace["otherData"]["simulated"] is True
    assert all({"name", "cat", "ts", "dur", "tid"} <= set(e) for e in trace["traceEvents"] if e["ph"] == "X")
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["images_per_s"] > 0 and len(result["memory"]) == 2
    path = result["critical_path"]
    assert path and all(a["end_s"] <= b["start_s"] + 1e-12 for a, b in zip(path, path[1:], strict=False))
    code, out, _ = _cli(["simulate", "-p", str(pl_path), "-c", str(cfile), "--mode", "sync", "--inflight", "2",
                         "--replicas", "2", "--json", str(tmp_path / "h.json")], capsys)
    hybrid = json.loads((tmp_path / "h.json").read_text())
    assert code == 0 and "x 2 data-parallel replicas" in out and hybrid["replicas"] == 2 and len(hybrid["memory"]) == 4
    for argv, needle in ((["--mode", "pipelined"], "unknown mode"), (["-s", "hybrid"], "unknown strategy"),
                         (["--devices", "8", "-s", "sync-dp"], "needs 8 devices"),
                         (["--replicas", "2"], "sync mode only"), (["--replicas", "0"], "--replicas = 0")):
        code, _, err = _cli(["simulate", "-p", str(pl_path), "-c", str(cfile), *argv], capsys)
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_a_measured_profile_of_the_device_kind_replaces_the_flop_rate(tmp_path: Path) -> None:
    from hgpart.profile import LayerCost, Profile

    graph = toy_network()
    costs = [LayerCost(layer.name, 1.0 + i, 3.0 + 2 * i, layer.flops, layer.params, 0)
             for i, layer in enumerate(graph.layers)]  # backward / forward differs by layer: two builds
    Profile(graph.name, graph.input_shape, 16, "measured", graph.fingerprint(), costs).save(tmp_path / "p.json")
    cluster = _cluster(profiles=str(tmp_path))
    times = layer_times(graph, cluster.device, batch=8)
    assert times.forward["input"] == pytest.approx(0.5e-3) and times.backward["conv1"] == pytest.approx(2.5e-3)
    pl = _placement(k=2)
    res = simulate(pl, cluster, SimOptions(batch_size=8, inflight=1, jobs=1))
    compute = sum(t.end - t.start for t in res.tasks if t.kind is TaskKind.COMPUTE)
    # the cost model gives the input layer no work (its vertices weigh nothing): all other layers are charged
    assert compute == pytest.approx(times.total() - times.forward["input"] - times.backward["input"], rel=1e-12)
    assert "measured profile" in res.compute_source
    # a folder without this model (here: the profile's fingerprint of another model) falls back to the FLOP rate,
    # and says so (a profile of another class count is otherwise easy to miss)
    other = _cluster(profiles=str(tmp_path / "none"))
    (tmp_path / "none").mkdir()
    flops = layer_times(graph, other.device, batch=8)
    assert flops.source.startswith("FLOPs / (") and "no measured profile of this model" in flops.source
    assert "no measured profile" not in layer_times(graph, _cluster().device, batch=8).source


@pytest.mark.parametrize("grain", ["coarse", "fine"])
def test_a_profiles_measured_updates_are_what_each_part_and_replica_applies(tmp_path: Path, grain: str) -> None:
    from hgpart.profile import LayerCost, Profile
    from hgpart.simulate.costs import update_seconds

    graph = toy_network()
    measured = {layer.name: 0.5 + i for i, layer in enumerate(graph.layers) if layer.params}
    costs = [LayerCost(layer.name, 1.0, 2.0, layer.flops, layer.params, 0, update_ms=measured.get(layer.name))
             for layer in graph.layers]
    Profile(graph.name, graph.input_shape, 8, "measured", graph.fingerprint(), costs).save(tmp_path / "p.json")
    cluster = _cluster(profiles=str(tmp_path))
    total = sum(measured.values()) / 1000.0
    bandwidth = update_seconds(sum(layer.params for layer in graph.layers), cluster.device, "adam")
    assert total != pytest.approx(bandwidth, rel=0.1)  # the two models differ, so the test tells them apart

    def updates(res: Any) -> list[float]:
        return [t.end - t.start for t in res.tasks if t.kind is TaskKind.UPDATE]

    pl = _placement(k=3, grain=grain, seed=2)
    mp = updates(simulate(pl, cluster, SimOptions(batch_size=8, inflight=1, jobs=1)))
    assert len(mp) == 3 and sum(mp) == pytest.approx(total, rel=1e-9)
    single = updates(simulate(pl, cluster, SimOptions(batch_size=8, strategy=SimStrategy.SINGLE, jobs=1)))
    assert single == [pytest.approx(total, rel=1e-9)]
    ps = simulate(pl, cluster, SimOptions(batch_size=8, strategy=SimStrategy.ASYNC_DP_DPS, devices=2, jobs=2))
    assert sum(updates(ps)) == pytest.approx(2 * total, rel=1e-9)  # each of the 2 jobs updates every shard once
    sgd = updates(simulate(pl, cluster, SimOptions(batch_size=8, strategy=SimStrategy.SINGLE, jobs=1,
                                                   optimizer="sgd")))
    assert sgd == [pytest.approx(total * 12 / 28, rel=1e-9)]  # Adam's measured kernel, scaled by the bytes
    without = _cluster()  # the FLOP rate and no profile: the bandwidth model
    assert updates(simulate(pl, without, SimOptions(batch_size=8, strategy=SimStrategy.SINGLE, jobs=1))) == [
        pytest.approx(bandwidth, rel=1e-9)]


def test_plan_ranks_fitting_plans_by_epoch_time_and_says_why_losers_lose() -> None:
    from hgpart.simulate.plan import PlanOptions, plan

    graph = toy_network()
    p = plan(graph, _cluster(), PlanOptions(batch_size=8, max_k=4, backend="layerwise"))
    names = [r.name for r in p.rows]
    assert p.winner is not None and names[0] == p.winner.name
    assert {"single device", "sync-dp K=2", "async-dp-1ps K=4", "layer-wise K=4 async", "layer-wise K=4 sync",
            "coarse hypergraph K=2 async", "coarse hypergraph K=2 sync", "coarse hypergraph K=2 x DP 2"} <= set(names)
    # max_k bounds the devices of every plan: 2 x 2 is the only hybrid, and it runs on 4 devices
    hybrids = [r for r in p.rows if "x DP" in r.name]
    assert [(r.name, r.k, len(r.result.memory), r.result.replicas) for r in hybrids] == [
        ("coarse hypergraph K=2 x DP 2", 4, 4, 2)]
    epochs = [r.result.epoch_s for r in p.rows if r.fits]
    assert epochs == sorted(epochs)
    assert all(r.reason for r in p.rows) and p.rows[0].reason == "fastest that fits"
    assert all("slower" in r.reason for r in p.rows[1:])
    # a limit below what one device needs: the single device is out, and every plan is judged on its own memory
    # (on this toy the activations dominate: a pipeline keeping K batches in flight can need more than one device)
    single = next(r for r in p.rows if r.name == "single device")
    limit = single.max_memory * 0.9
    q = plan(graph, _cluster(), PlanOptions(batch_size=8, max_k=4, backend="layerwise", memory_limit=limit))
    assert "single device" in {r.name for r in q.rows if not r.fits}
    assert all(r.reason.startswith("does not fit") and r.max_memory > limit for r in q.rows if not r.fits)
    assert all(r.max_memory <= limit for r in q.rows if r.fits)
    assert q.winner is not None and q.rows.index(q.winner) == 0


def test_plan_partitions_a_hypergraph_plan_again_to_fit_the_memory_limit() -> None:
    from hgpart.simulate.plan import PlanOptions, plan

    graph = toy_network()
    free = plan(graph, _cluster(), PlanOptions(batch_size=8, max_k=4, backend="layerwise"))
    single = next(r for r in free.rows if r.name == "single device")
    limit = single.max_memory * 0.7
    q = plan(graph, _cluster(), PlanOptions(batch_size=8, max_k=4, backend="mtkahypar", memory_limit=limit))
    rows = {r.name: r for r in q.rows}
    # the layer-wise split of K = 2 (sync) does not fit; the hypergraph plan was partitioned again, with memory
    # as the vertex weight, and its placement's every part now fits
    assert not rows["layer-wise K=2 sync"].fits
    fitted = rows["coarse hypergraph K=2 sync"]
    assert fitted.fits and "memory" in fitted.fitted and "partitioned to fit" in fitted.reason
    assert fitted.placement is not None and fitted.placement.provenance.get("memory_limit_bytes") == limit
    mem = placement_memory(fitted.placement, batch_size=8, inflight=1)
    assert max(m.total for m in mem) <= limit
    # where nothing fits at K, the row says why and stays out of the ranking
    hopeless = rows["coarse hypergraph K=2 async"]
    assert not hopeless.fits and "does not fit" in hopeless.reason and "no placement" in hopeless.fitted
    fits = [r.fits for r in q.rows]
    assert q.winner is not None and fits == sorted(fits, reverse=True)


def test_model_times_data_parallelism_runs_each_replica_on_its_share_and_all_reduces_the_parts() -> None:
    pl = _placement(k=2)
    cluster = _cluster()
    one = simulate(pl, cluster, SimOptions(batch_size=4, mode=Mode.SYNC, inflight=2, jobs=4))
    two = simulate(pl, cluster, SimOptions(batch_size=8, mode=Mode.SYNC, inflight=2, replicas=2, jobs=4))
    assert two.replicas == 2 and len(two.memory) == len(two.times) == 4
    # every device holds its part of one replica at B / R, as the replica alone at that batch
    assert [m.total for m in two.memory] == [m.total for m in one.memory] * 2
    sends = [t for t in two.tasks if t.kind is TaskKind.SEND and "all-gather" in t.name]
    assert sends and {(t.device % 2, t.peer % 2) for t in sends} == {(0, 0), (1, 1)}  # part p to part p only
    # the replicas compute at once; the all-reduce of the parts' gradients makes the step longer than one alone
    assert two.step_s > one.step_s
    assert two.images_per_s > one.images_per_s
    with pytest.raises(HgpartError, match="sync mode only"):
        simulate(pl, cluster, SimOptions(batch_size=8, mode=Mode.ASYNC, replicas=2))
    with pytest.raises(HgpartError, match="needs 6 devices"):
        simulate(pl, cluster, SimOptions(batch_size=6, mode=Mode.SYNC, inflight=1, replicas=3))


@pytest.mark.parametrize(("step", "factor"), [(None, 1.0), (0.1, 1.0), (2.0, 2.0)])
@pytest.mark.parametrize("measured_update", [True, False])
def test_a_profiles_layers_are_lifted_to_its_own_whole_step_never_lowered(tmp_path: Path, step: float | None,
                                                                          factor: float, measured_update: bool
                                                                          ) -> None:
    """Layers timed alone that add up to less than the profile's measured whole step, less the step's SGD
    update, are scaled up to it (the step pays for something no layer alone does); layers that add up to more
    are kept as measured. The SGD update is the profile's Adam updates scaled to SGD's bytes, or the parameters
    through the memory bandwidth where the profile has no update."""
    from hgpart.profile import LayerCost, Profile, ProfileQuality
    from hgpart.simulate.costs import UPDATE_BYTES, step_without_update_ms

    graph = toy_network()
    costs = [LayerCost(layer.name, 1.0 + i, 3.0 + 2 * i, layer.flops, layer.params, 0,
                       update_ms=(0.5 + i if layer.params else None) if measured_update else None)
             for i, layer in enumerate(graph.layers)]
    cluster = _cluster(profiles=str(tmp_path))
    if measured_update:
        sgd_ms = sum(c.update_ms or 0.0 for c in costs) * UPDATE_BYTES["sgd"] / UPDATE_BYTES["adam"]
    else:
        sgd_ms = 1000.0 * sum(layer.params for layer in graph.layers) * UPDATE_BYTES["sgd"] / \
            cluster.device.memory_bandwidth
    assert sgd_ms > 0
    layers_ms = sum(c.forward_ms + c.backward_ms for c in costs)  # the whole step: `step` times the layers + SGD
    Profile(graph.name, graph.input_shape, 8, "measured", graph.fingerprint(), costs,
            quality=ProfileQuality(step_ms=None if step is None else step * layers_ms + sgd_ms)
            ).save(tmp_path / "p.json")
    rest = step_without_update_ms(Profile.load(tmp_path / "p.json"), cluster.device)
    assert rest is None if step is None else rest == pytest.approx(step * layers_ms, rel=1e-9)
    times = layer_times(graph, cluster.device, batch=8)
    assert times.total() == pytest.approx(factor * layers_ms / 1000.0, rel=1e-9)
    assert times.backward["conv1"] == pytest.approx(factor * costs[1].backward_ms / 1000.0, rel=1e-9)
    assert ("to its whole step" in times.source) == (factor > 1.0)


def test_a_device_whose_ops_share_its_cores_runs_a_parts_ready_tasks_at_once() -> None:
    """``device.ops_share_cores``: a part's ready tasks run at once on its device, each at its share of the speed,
    so their intervals overlap and no work is added; without it a device runs one task at a time."""
    pl = _placement(branching_network, k=2, grain="fine", seed=2)
    opts = SimOptions(batch_size=8, inflight=3, mode=Mode.ASYNC, jobs=12)

    def most_at_once(res: Any) -> int:
        most = 0
        for d in range(2):
            ends = sorted((t.start, t.end) for t in res.tasks if t.kind is TaskKind.COMPUTE and t.device == d)
            most = max([most] + [sum(1 for s, e in ends if s < a < e) + 1 for a, _ in ends])
        return most

    alone, shared = (simulate(pl, _cluster(ops_share_cores=flag), opts) for flag in (False, True))
    assert most_at_once(alone) == 1
    assert 2 <= most_at_once(shared) <= 4  # the runtime's inter-op threads: 4
    work = [sum(t.duration for t in r.tasks if t.kind is TaskKind.COMPUTE) for r in (alone, shared)]
    assert work[0] == pytest.approx(work[1], rel=1e-12)


@pytest.mark.parametrize(("mode", "micro"), [(Mode.ASYNC, 1), (Mode.SYNC, 2)])
def test_a_placements_measured_split_cost_scales_its_compute_and_no_other_placements(mode: Mode, micro: int
                                                                                     ) -> None:
    # `hgpart calibrate-split` timed the placement's step with every part on one device against the unsplit
    # model's: the simulator charges that factor on the placement's forward and backward work, at the matching
    # micro-batches and the nearest batch size, and leaves other placements, other micro-batches and updates alone
    pl, other = _placement(k=2, seed=1), _placement(k=2, seed=2)
    base = _cluster()
    # an unsplit step faster than the layers adds no cost of its own per call (that cost is tested below)
    entry = {"placement": pl.content_hash(), "model": pl.graph.name, "micro_batches": micro, "whole_ms": 1e-6}
    cluster = _cluster(split_costs=[{**entry, "batch_size": 64, "split_ms": 3e-6},   # nearer 8: this one
                                    {**entry, "batch_size": 2, "split_ms": 1.5e-6},
                                    {**entry, "micro_batches": micro + 1, "batch_size": 8, "split_ms": 99e-6}])
    opts = SimOptions(batch_size=8, mode=mode, inflight=2, jobs=1)

    def work(p: Placement, c: Cluster) -> tuple[float, float]:
        tasks = simulate(p, c, opts).tasks
        return (sum(t.end - t.start for t in tasks if t.kind is TaskKind.COMPUTE),
                sum(t.end - t.start for t in tasks if t.kind is TaskKind.UPDATE))

    (plain, plain_up), (charged, charged_up) = work(pl, base), work(pl, cluster)
    assert charged == pytest.approx(1.5 * plain, rel=1e-12)  # 15 / 10: batch 2 is nearer 8 than 64 by ratio
    assert charged_up == pytest.approx(plain_up, rel=1e-12)
    assert work(other, cluster) == pytest.approx(work(other, base), rel=1e-12)
    assert "x1.500 for the split op structure" in simulate(pl, cluster, opts).compute_source


def test_the_unsplit_steps_time_beyond_its_layers_is_charged_once_per_call_of_the_step() -> None:
    # `hgpart calibrate-split` timed the unsplit model's step on one device at 5 ms more than its layers and update:
    # every strategy's device pays those 5 ms per call, spread over its layers; the compiled pipeline's call of 4
    # steps pays them once; a sync step's two micro-batches are one call; another input of the model pays nothing
    pl = _placement(k=2, seed=1)
    base = _cluster()
    at8 = layer_times(pl.graph, base.device, batch=8)
    update = sum(layer_update_seconds(pl.graph, at8, base.device, "adam").values())
    extra = 0.005
    entry = {"placement": pl.content_hash(), "model": pl.graph.name, "micro_batches": 1, "batch_size": 8,
             "whole_ms": 1000.0 * (at8.total() + update + extra)}
    entry["split_ms"] = entry["whole_ms"]  # the placement's split costs nothing more: only the call cost is seen
    cluster = _cluster(split_costs=[entry])

    def compute(c: Cluster, opts: SimOptions) -> float:
        return sum(t.end - t.start for t in simulate(pl, c, opts).tasks if t.kind is TaskKind.COMPUTE)

    single = SimOptions(batch_size=8, strategy=SimStrategy.SINGLE, jobs=1)
    assert compute(cluster, single) == pytest.approx(at8.total() + extra, rel=1e-9)
    assert compute(base, single) == pytest.approx(at8.total(), rel=1e-9)
    compiled = dataclasses.replace(single, pipeline=SimPipeline.COMPILED, steps_per_call=4, jobs=4)
    assert compute(cluster, compiled) == pytest.approx(4 * at8.total() + extra, rel=1e-9)
    ring = SimOptions(batch_size=16, strategy=SimStrategy.SYNC_DP, devices=2, jobs=1)  # two replicas of 8
    assert compute(cluster, ring) == pytest.approx(2 * (at8.total() + extra), rel=1e-9)
    mp_async = SimOptions(batch_size=8, mode=Mode.ASYNC, inflight=1, jobs=1)
    assert compute(cluster, mp_async) == pytest.approx(at8.total() + extra, rel=1e-9)
    at4 = layer_times(pl.graph, base.device, batch=4)
    mp_sync = SimOptions(batch_size=8, mode=Mode.SYNC, inflight=2, jobs=1)  # one call of two micro-batches of 4
    assert compute(cluster, mp_sync) == pytest.approx(2 * at4.total() + extra, rel=1e-9)
    other_input = _cluster(split_costs=[{**entry, "input": [i + 1 for i in pl.graph.input_shape]}])
    assert compute(other_input, single) == pytest.approx(at8.total(), rel=1e-9)
    assert "5.00 ms per call of 1 step(s)" in simulate(pl, cluster, single).compute_source


def test_a_cluster_files_split_costs_are_checked_and_merged_by_placement_batch_and_micro_batches() -> None:
    a = SplitCost("0123456789abcdef", "toy", 32, 2, 10.0, 12.5)
    d = copy.deepcopy(CLUSTER)
    d["device"]["split_costs"] = [split_cost_to_dict(a)]
    assert cluster_from_dict(d).device.split_costs == (a,)
    assert cluster_from_dict(d).device.split_cost(a.placement, 16, 1) is None  # measured at 2 micro-batches only
    bad = copy.deepcopy(d)
    bad["device"]["split_costs"][0]["placement"] = "not-a-hash"
    with pytest.raises(HgpartError, match="split_costs"):
        cluster_from_dict(bad)
    again = dataclasses.replace(a, split_ms=20.0)
    b = dataclasses.replace(a, batch_size=64)
    merged = merge_split_costs(d, [again, b])
    assert cluster_from_dict(merged).device.split_costs == (again, b)  # a replaced, b added
    assert d["device"]["split_costs"] == [split_cost_to_dict(a)]  # the document given is not changed
    pl = _placement(k=4)
    assert split_micro_batches(pl, "both", 0) == [1, 4]
    assert split_micro_batches(pl, "sync", 2) == [2]
    assert split_micro_batches(pl, "async", 0) == [1]
