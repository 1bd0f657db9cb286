"""The stage pipeline: a placement whose layers each sit on one part is cut into stages; training through the
stages one batch at a time equals the whole-step function's training, on a chain and on a branching model; with
two batches in flight it makes exactly one update per batch and learns; ``graph`` keeps the whole-step function."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hgpart.runtime.api import PartitionedModel
from hgpart.runtime.devices import open_devices
from hgpart.runtime.stages import plan_stages
from toydata import band_images
from toyplacements import B
from toyplacements import two_part_placement as _placement

from hgpart.errors import BadOptionError
from hgpart.hypergraph import build_hypergraph
from hgpart.models import load_graph
from hgpart.placement import Placement
from hgpart.profile import analytic_profile

DS = open_devices("logical", 2)  # the session's logical devices (tests/conftest.py)


def _data(n: int = 64) -> tuple[np.ndarray, np.ndarray]:
    return band_images(n)


def _fit(pl: Placement, pipeline: str, inflight: int, steps: int,
         mode: str = "async") -> tuple[dict, list[float], PartitionedModel]:
    x, y = _data()
    pm = PartitionedModel.from_placement(pl, device_set=DS, seed=3, inflight=inflight, pipeline=pipeline)
    hist = pm.fit(x, y, steps=steps, batch_size=B, mode=mode, inflight=inflight, verbose=0)
    return pm.placed.keras_weights(), [r.record.loss for r in sorted(hist.rows, key=lambda r: r.record.step)], pm


def _random(model: str, grain: str) -> Placement:
    """Every layer's filters (fine: pairs) spread over both parts at random."""
    graph = load_graph(model, (16, 16, 3), 10)
    work = analytic_profile(graph, B).work()
    hg = build_hypergraph(graph, work, batch_size=B, grain=grain)
    parts = np.random.default_rng(0).integers(0, 2, hg.num_vertices)
    return Placement.from_vertex_parts(graph, hg, parts, k=2, method="random", work=work)


@pytest.mark.parametrize("model", ["minivgg", "minires"])
def test_stages_cover_every_layer_piece_once_and_read_only_earlier_pieces(model: str) -> None:
    for pl in (_placement(model), _random(model, "coarse")):
        pm = PartitionedModel.from_placement(pl, device_set=DS, seed=0)
        stages = plan_stages(pm.placed)
        assert stages is not None and len(stages) >= 2
        pieces = [(n, s.part) for s in stages for n in s.layers]
        assert len(pieces) == len(set(pieces))
        assert sorted(pieces) == sorted((name, q) for name, lay in pm.placed.layout.items()
                                        if name != "input" for q in lay)
        assert all(a.part != b.part for a, b in zip(stages, stages[1:], strict=False))
        assert [s.loss for s in stages].count(True) == 1 and stages[-1].loss
        made = {pc: s.index for s in stages for pc in ((n, s.part) for n in s.layers)}
        for s in stages:  # every input is the model input or made by an earlier stage, which lists it as an output
            for pc in s.inputs:
                assert pc == ("input", -1) or (made[pc] < s.index and pc in stages[made[pc]].outputs)


def test_a_fine_grain_placement_with_a_split_convolution_has_no_stages() -> None:
    pl = _random("minivgg", "fine")
    pm = PartitionedModel.from_placement(pl, device_set=DS, seed=0)
    assert plan_stages(pm.placed) is None
    assert pl.pipeline_stages() == 0  # so the simulator's default in flight is K, as the runtime's


def test_a_placement_splitting_every_layer_trains_through_its_pieces_as_the_whole_step_function() -> None:
    """Random coarse placement: every layer is cut in two pieces, each stage holds one part's pieces."""
    pl = _random("minivgg", "coarse")
    w_stages, loss_stages, pm = _fit(pl, "stages", 1, 4)
    assert pm._staged is not None and pm._staged[1] is not None
    w_graph, loss_graph, _ = _fit(pl, "graph", 1, 4)
    np.testing.assert_allclose(loss_stages, loss_graph, rtol=1e-5, atol=1e-6)
    for layer, ws in w_graph.items():
        for name, w in ws.items():
            np.testing.assert_allclose(w_stages[layer][name], w, rtol=1e-4, atol=1e-5, err_msg=f"{layer}/{name}")


#: resnet18 (BatchNorm, residuals crossing stages) is slow: marked; minires has Dropout, whose masks differ
MODELS = ["minivgg", pytest.param("resnet18", marks=pytest.mark.slow)]


@pytest.mark.parametrize("model", MODELS)
def test_one_batch_at_a_time_the_stages_train_as_the_whole_step_function(model: str) -> None:
    pl = _placement(model)
    w_stages, loss_stages, pm = _fit(pl, "stages", 1, 6)
    assert pm._staged is not None and pm._staged[1] is not None  # the stages ran
    w_graph, loss_graph, pm2 = _fit(pl, "graph", 1, 6)
    assert pm2._staged is not None and pm2._staged[1] is None
    np.testing.assert_allclose(loss_stages, loss_graph, rtol=1e-5, atol=1e-6)
    for layer, ws in w_graph.items():
        for name, w in ws.items():
            np.testing.assert_allclose(w_stages[layer][name], w, rtol=1e-4, atol=1e-5, err_msg=f"{layer}/{name}")


@pytest.mark.parametrize("model", MODELS)
def test_sync_micro_batches_through_the_stages_train_as_the_whole_step_function(model: str) -> None:
    """Four micro-batches per step, each stage applying the mean gradient once per step: the whole-step
    function's sync mode (BatchNorm statistics per micro-batch in both)."""
    pl = _placement(model)
    w_stages, loss_stages, pm = _fit(pl, "stages", 4, 5, mode="sync")
    assert pm._staged is not None and pm._staged[1] is not None
    w_graph, loss_graph, _ = _fit(pl, "graph", 4, 5, mode="sync")
    np.testing.assert_allclose(loss_stages, loss_graph, rtol=1e-5, atol=1e-6)
    for layer, ws in w_graph.items():
        for name, w in ws.items():
            np.testing.assert_allclose(w_stages[layer][name], w, rtol=1e-4, atol=1e-5, err_msg=f"{layer}/{name}")


def test_two_in_flight_make_one_update_per_batch_and_learn() -> None:
    pl = _placement("minivgg")
    _, losses, pm = _fit(pl, "stages", 2, 24)
    assert len(losses) == 24
    counters = [float(c.numpy()) for c in pm._step.counters.values()]  # type: ignore[union-attr]
    assert counters == [24.0] * len(counters)
    assert np.mean(losses[-4:]) < np.mean(losses[:4]) - 0.3


@pytest.mark.parametrize("mode,inflight", [("async", 2), ("sync", 2)])
def test_the_first_stage_runs_ahead_by_the_window_before_its_first_backward(mode: str, inflight: int) -> None:
    """1F1B: with two in flight (or two micro-batches) the first stage forwards two batches before its first
    backward, then alternates forward and backward; in sync mode no stage starts a step's forwards before its
    backward of the step before."""
    from hgpart.runtime.pipeline import shuffled_batches
    from hgpart.runtime.stagepipe import run_staged

    pl = _placement("minivgg")
    pm = PartitionedModel.from_placement(pl, device_set=DS, seed=3, inflight=inflight, pipeline="stages")
    step = pm.train_step(B, mode, inflight)
    staged = pm.staged_step(step)
    assert staged is not None
    x, y = _data()
    events: list = []
    micro = inflight if mode == "sync" else 1
    run_staged(staged, 3, shuffled_batches(x, y, batch_size=B, seed=0), images_per_task=B, window=inflight,
               micro=micro, events=events)
    first = [(a, i) for s, a, i, _, _ in events if s == 0]
    assert first[:3] == [("f", 0), ("f", 1), ("b", 0)]
    if mode == "async":  # then one forward, one backward (not both backwards first), and the drain
        assert first == [("f", 0), ("f", 1), ("b", 0), ("f", 2), ("b", 1), ("b", 2)]
    else:  # each step fills the window, then drains it before the next step's forwards
        assert first == [(a, 2 * n + j) for n in range(3) for a, j in (("f", 0), ("f", 1), ("b", 0), ("b", 1))]
    last = len(staged.stages) - 1
    assert {a for t, a, _, _, _ in events if t == last} == {"fb"}  # the loss stage: one call per batch
    for s in range(len(staged.stages)):
        mine = [(a, i) for t, a, i, _, _ in events if t == s]
        assert sorted(i for a, i in mine if a in ("f", "fb")) == list(range(3 * micro))
        if mode == "sync":  # forwards of step n+1 only after every backward of step n on this stage
            for k, (a, i) in enumerate(mine):
                if a in ("f", "fb") and i >= micro:
                    done = {j for b, j in mine[:k] if b in ("b", "fb")}
                    assert set(range(i // micro * micro)) <= done


def test_after_a_backward_a_stage_forwards_before_its_next_backward() -> None:
    """The choice itself: with the next backward ready and the next forward possible, a stage that just ran a
    backward forwards (or feeds the batch it forwards), and one that just ran a forward runs the backward."""
    from hgpart.runtime.stagepipe import _Run

    pm = PartitionedModel.from_placement(_placement("minivgg"), device_set=DS, seed=3, inflight=2, pipeline="stages")
    staged = pm.staged_step(pm.train_step(B, "async", 2))
    assert staged is not None
    run = _Run(staged, 4, lambda i: _data(), B, 2, 1, None, None)
    run._ready_bwd = lambda s, i: True  # type: ignore[method-assign]
    ready_fwd = {"now": False}
    run._ready_fwd = lambda s, i: ready_fwd["now"]  # type: ignore[method-assign]
    run.fed[0] = 2  # batches 0 and 1 fed; batch 2 is not
    assert run._next_action(0, 2, 1, "b") == "feed"
    assert run._next_action(0, 2, 1, "f") == "b"
    ready_fwd["now"] = True
    assert run._next_action(0, 2, 1, "b") == "f"
    assert run._next_action(0, 2, 0, "b") == "b"  # the window is full: the backward goes


def test_an_unknown_pipeline_is_refused_before_the_devices_open() -> None:
    with pytest.raises(BadOptionError, match="pipeline"):
        PartitionedModel.from_placement(_placement("minivgg"), devices="local", pipeline="fast")


def test_auto_times_a_short_step_every_way_and_runs_the_fastest(monkeypatch: pytest.MonkeyPatch) -> None:
    """``auto`` on a step shorter than STAGES_MIN_STEP_S: the whole-step function, the stages and the compiled calls
    are timed, the fastest runs, the choice and its timings are reported, and no timing step's update is kept;
    ways made slow on purpose lose."""
    import time

    from hgpart.runtime import pipechoice

    monkeypatch.setattr(pipechoice, "STAGES_MIN_STEP_S", 1e9)  # every step counts as short, however loaded the machine
    pl = _placement("minivgg")
    _, losses, pm = _fit(pl, "auto", 2, 4)
    choice = pm.pipeline_choice
    assert choice is not None and "auto timed at least 8 steps each way: " in choice.why
    assert all(f"{way} " in choice.why for way in ("stages", "graph", "compiled"))
    assert choice.why.split(": ")[1].split(" ")[0] == choice.kind  # the fastest timed is the one that runs
    assert len(losses) == 4
    counters = [float(c.numpy()) for c in pm._step.counters.values()]  # type: ignore[union-attr]
    assert counters == [4.0] * len(counters)  # the timing steps' updates were undone

    lag_s = 0.2  # seconds a deliberately slowed way loses per step: well beyond a loaded machine's noise

    def slow_slots(fns: list, *args: object, **kwargs: object) -> object:  # every whole-step call slower
        return real_slots([lambda *a, f=f: (time.sleep(lag_s), f(*a))[1] for f in fns], *args, **kwargs)

    def slow_stages(staged: object, n: int, task: object, **kwargs: object) -> object:  # every batch later
        return real_stages(staged, n, lambda i: (time.sleep(lag_s), task(i))[1], **kwargs)  # type: ignore[operator]

    def slow_calls(self: Any, x: object, y: Any) -> object:  # every call slower by a step's
        time.sleep(lag_s * len(y) / self.step.batch_size)
        return real_run(self, x, y)

    real_slots, real_stages, real_run = pipechoice.run_slots, pipechoice.run_staged, pipechoice.MultiStep.run
    slowed = {"run_slots": slow_slots, "run_staged": slow_stages, "run": slow_calls}
    for fast, winner in (("run_slots", "graph"), ("run_staged", "stages"), ("run", "compiled")):
        with monkeypatch.context() as m:
            for name, slow in slowed.items():
                if name != fast:
                    m.setattr(pipechoice.MultiStep if name == "run" else pipechoice, name, slow)
            _, losses, pm = _fit(pl, "auto", 2, 2)
        assert pm.pipeline_choice is not None and pm.pipeline_choice.kind == winner, pm.pipeline_choice
        assert (pm._staged[1] is None) == (winner == "graph")  # type: ignore[index]
        assert len(losses) == 2
        counters = [float(c.numpy()) for c in pm._step.counters.values()]  # type: ignore[union-attr]
        assert counters == [2.0] * len(counters)
        if winner == "stages":
            assert pm.pipeline_choice.describe().startswith("stages (2), 2 batches in flight: auto timed at least "
                                                            "8 steps each way: stages ")
    _, _, pm = _fit(pl, "graph", 2, 2)
    assert pm.pipeline_choice is not None and pm.pipeline_choice.describe().endswith("--pipeline graph")


def test_auto_falls_back_to_one_function_when_the_other_ways_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    from hgpart.runtime import pipechoice

    def broken(*args: object, **kwargs: object) -> object:
        raise ValueError("no stages here")

    monkeypatch.setattr(pipechoice, "STAGES_MIN_STEP_S", 1e9)
    monkeypatch.setattr(pipechoice, "_build_stages", broken)
    monkeypatch.setattr(pipechoice, "_build_compiled", broken)
    _, losses, pm = _fit(_placement("minivgg"), "auto", 2, 2)
    assert pm.pipeline_choice is not None and pm.pipeline_choice.kind == "graph"
    assert "failed: stages (ValueError), compiled (ValueError)" in pm.pipeline_choice.why and len(losses) == 2


def test_a_failing_callback_stops_the_stage_pipeline() -> None:
    """An on_step callback that raises fails the run as one DeviceError (before, the reporting thread died and
    run_staged returned the records it had)."""
    from hgpart.runtime.pipeline import shuffled_batches
    from hgpart.runtime.stagepipe import run_staged

    from hgpart.errors import DeviceError

    pm = PartitionedModel.from_placement(_placement("minivgg"), device_set=DS, seed=3, inflight=2, pipeline="stages")
    staged = pm.staged_step(pm.train_step(B, "async", 2))
    assert staged is not None
    x, y = _data()

    def on_step(rec: object) -> None:
        raise KeyError("callback")

    with pytest.raises(DeviceError) as info:
        run_staged(staged, 4, shuffled_batches(x, y, batch_size=B, seed=0), images_per_task=B, window=2,
                   on_step=on_step)
    assert info.value.cause == "KeyError"


@pytest.mark.parametrize("inflight", [1, 2])
def test_fewer_batches_in_flight_than_stages_is_a_note(inflight: int) -> None:
    """Async through S stages with fewer than S batches in flight leaves a stage waiting: one note says so and
    what to pass; with one batch per stage there is none."""
    import warnings

    from hgpart.notes import HgpartNote

    pl = _placement("minivgg")  # two stages
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _fit(pl, "stages", inflight, 2)
    notes = [str(w.message) for w in seen if issubclass(w.category, HgpartNote)]
    if inflight < 2:
        assert len(notes) == 1 and "2 pipeline stages on 2 devices with 1 batch in flight" in notes[0]
        assert "--inflight 2" in notes[0]
    else:
        assert notes == []


def _three_stages(model: str = "minivgg") -> Placement:
    """The first and last thirds of the layers on part 0, the middle third on part 1: three stages on two parts."""
    graph = load_graph(model, (16, 16, 3), 10)
    work = analytic_profile(graph, B).work()
    hg = build_hypergraph(graph, work, batch_size=B, grain="coarse")
    order = {layer.name: i for i, layer in enumerate(graph.layers)}
    parts = np.zeros(hg.num_vertices, dtype=np.int64)
    n = len(graph.layers)
    for b in hg.blocks:
        parts[b.start:b.stop] = 1 if n // 3 <= order[b.layer] < 2 * n // 3 else 0
    return Placement.from_vertex_parts(graph, hg, parts, k=2, method="manual", work=work)


@pytest.mark.parametrize("model", ["minivgg", "minires"])
def test_the_placement_counts_the_stages_the_runtime_cuts(model: str) -> None:
    """The simulator's stage count (from the placement file alone) is the runtime's, on layer-wise, three-stage and
    random placements (whose split layers each start a stage on the other part)."""
    for pl in (_placement(model), _three_stages(model), _random(model, "coarse")):
        pm = PartitionedModel.from_placement(pl, device_set=DS, seed=0)
        stages = plan_stages(pm.placed)
        assert stages is not None and pl.pipeline_stages() == len(stages)
    assert _three_stages("minivgg").pipeline_stages() == 3  # a chain: three runs of layers


@pytest.mark.parametrize("pipeline,inflight,expected,split", [("stages", None, 3, False), ("stages", 2, 2, False),
                                                              ("graph", None, 2, False), ("stages", None, 3, True)])
def test_async_runs_one_batch_per_stage_unless_told(monkeypatch: pytest.MonkeyPatch, pipeline: str,
                                                     inflight: int | None, expected: int, split: bool) -> None:
    """With no --inflight, async steps through S stages run S batches in flight (PipeDream's rule; with fewer, a
    stage waits), at most K + 1 (a random placement splits every layer: many stages), and one function per step
    runs K; a given --inflight wins. The window the stage driver gets and the threads the whole-step driver starts
    are that number, and the history records it. The default's cap is no reason for a note; asking for fewer than
    the stages is."""
    import warnings

    from hgpart.runtime import api

    from hgpart.notes import HgpartNote

    seen: list[int] = []
    real_staged, real_slots = api.run_staged, api.run_slots

    def spy_staged(*args: object, **kwargs: object) -> object:
        seen.append(int(kwargs["window"]))  # type: ignore[call-overload]
        return real_staged(*args, **kwargs)  # type: ignore[arg-type]

    def spy_slots(fns: list, *args: object, **kwargs: object) -> object:
        seen.append(len(fns))
        return real_slots(fns, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(api, "run_staged", spy_staged)
    monkeypatch.setattr(api, "run_slots", spy_slots)
    x, y = _data()
    pl = _random("minivgg", "coarse") if split else _three_stages()
    assert pl.pipeline_stages() > 3 if split else pl.pipeline_stages() == 3
    pm = PartitionedModel.from_placement(pl, device_set=DS, seed=3, pipeline=pipeline)
    with warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always")
        hist = pm.fit(x, y, steps=4, batch_size=B, inflight=inflight, verbose=0)
    said = [w for w in notes if issubclass(w.category, HgpartNote)]
    assert len(said) == (1 if inflight is not None and inflight < 3 else 0)  # 2 asked for 3 stages: one note
    assert pm.pipeline_choice is not None and pm.pipeline_choice.inflight == expected
    assert seen == [expected] and hist.params["inflight"] == expected and len(hist.rows) == 4
    assert f"{expected} batches in flight" in pm.pipeline_choice.describe()
    counters = [float(c.numpy()) for c in pm._step.counters.values()]  # type: ignore[union-attr]
    assert counters == [4.0] * len(counters)


def test_train_traces_and_logs_the_batches_in_flight_it_runs(tmp_path) -> None:
    """hgpart train with no --inflight on a three-stage placement: the run, its log, its result and the device
    trace's metadata all say 3 batches in flight (the trace steps run before fit, so the choice is made first)."""
    import json

    from hgpart.runtime.train import train

    res = train(_three_stages(), device_set=DS, steps=3, batch_size=B, pipeline="stages", trace=tmp_path / "tr",
                log=tmp_path / "log.csv")
    assert res.inflight == 3 and "3 batches in flight" in res.pipeline and res.steps == 3
    meta = json.loads((tmp_path / "tr" / "devices_trace.json").read_text())["otherData"]
    assert meta.get("inflight") == 3, meta
