"""The compiled pipeline (several training steps per call, :mod:`hgpart.runtime.multistep`).

With one batch in flight it is exact sequential training: the same losses, accuracies and weights as one step per
call, async and sync, whatever the calls' sizes. With two in flight each step's gradient is computed at the weights
that miss the previous step's update and applied in step order, checked against a hand-made schedule of the same
updates; each part's cross-part read waits for the gradients it sent back for the previous step (1F1B); every step
makes exactly one update; the calls' sizes and a bad size are checked; ``auto`` times the compiled way too."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hgpart.runtime.api import PartitionedModel
from hgpart.runtime.multistep import MultiStep, call_sizes, fresh_pieces
from hgpart.runtime.pipechoice import choose_pipeline
from test_stages import DS, B, _data, _placement, _random

from hgpart.errors import HgpartError
from hgpart.hypergraph import build_hypergraph
from hgpart.kinds import Role
from hgpart.partitioners._units import vertex_units
from hgpart.placement import Placement
from hgpart.simulate.costs import LayerTimes
from hgpart.simulate.mpgraph import mp_template, template_fresh_pieces


def _fit(pipeline: str, inflight: int, steps: int, *, mode: str = "async", spc: int = 4, model: str = "minivgg",
         optimizer: str = "adam") -> tuple[dict, list[float], Any, PartitionedModel]:
    x, y = _data()
    pm = PartitionedModel.from_placement(_placement(model), device_set=DS, seed=3, inflight=inflight,
                                         pipeline=pipeline, steps_per_call=spc, optimizer=optimizer)
    hist = pm.fit(x, y, steps=steps, batch_size=B, mode=mode, inflight=inflight, verbose=0)
    rows = sorted(hist.rows, key=lambda r: r.record.step)
    assert [r.record.step for r in rows] == list(range(steps))
    return pm.placed.keras_weights(), [r.record.loss for r in rows], hist, pm


def _max_diff(a: dict, b: dict) -> float:
    return max(float(np.max(np.abs(a[k][n] - b[k][n]))) for k in a for n in a[k])


def test_call_sizes_are_full_calls_then_the_remainder_in_powers_of_two() -> None:
    assert call_sizes(45, 16) == [16, 16, 8, 4, 1]
    assert call_sizes(32, 16) == [16, 16]
    assert call_sizes(7, 16) == [4, 2, 1]
    assert call_sizes(0, 16) == []
    assert call_sizes(13, 5) == [5, 5, 2, 1]
    with pytest.raises(HgpartError, match="steps per call"):
        call_sizes(10, 0)


@pytest.mark.parametrize(("model", "mode", "inflight"), [("minivgg", "async", 1), ("minivgg", "sync", 2)])
def test_one_batch_in_flight_is_exactly_one_step_per_call(model: str, mode: str, inflight: int) -> None:
    """13 steps as calls of 4, 4, 4 and 1 (sync: each step 2 micro-batches): bit-equal to the whole-step function.
    (A model with dropout, as minires, draws its masks from other random ops when several steps share a call.)"""
    w1, l1, h1, _ = _fit("graph", inflight, 13, mode=mode, model=model)
    w2, l2, h2, pm = _fit("compiled", inflight, 13, mode=mode, model=model)
    assert pm.pipeline_choice is not None and pm.pipeline_choice.kind == "compiled"
    assert l1 == l2
    assert h1.history == h2.history  # per-epoch loss and accuracy
    assert _max_diff(w1, w2) == 0.0


def _by_hand(pm: PartitionedModel, step: Any, xs: np.ndarray, ys: np.ndarray, tail: set[str]) -> np.ndarray:
    """Two steps by hand with the step's own graphs: step 0's gradient g0 at w0; g0's share of the fresh pieces (the
    ``tail`` layers on the loss part) applied; step 1's gradient g1 (the other pieces still at w0); g0 applied to
    the other pieces, then g1 everywhere. The two losses."""
    import tensorflow as tf

    tv = [pv.var for pv in pm.placed.trainable]
    every = pm.placed.pieces
    fresh = {(layer, p) for layer, p in every if p == pm.placed.loss_part and layer in tail}
    ahead = every - fresh
    shared = {p for _, p in fresh} & {p for _, p in ahead}  # its counter moves with the fresh pieces' update

    @tf.function
    def grads(bx: Any, by: Any) -> Any:
        f = step.forward_loss(bx, by)
        return f.loss, tf.gradients(f.loss, tv)

    def apply(gs: Any, pieces: set, advance: set | None = None, t: float = 0.0) -> None:
        tf.function(lambda: step.update(list(gs), [], pieces=pieces, advance=advance,
                                        steps={p: tf.constant(t) for p in shared}))()

    with tf.device(pm.placed.host):
        b0 = (tf.constant(xs[:B]), tf.constant(ys[:B]))
        b1 = (tf.constant(xs[B:]), tf.constant(ys[B:]))
    l0, g0 = grads(*b0)
    apply(g0, fresh)
    l1, g1 = grads(*b1)  # the fresh pieces updated, the others not yet
    apply(g0, ahead, {p for _, p in ahead} - shared, t=1.0)  # Adam's step 1 on a part whose counter is at 1
    apply(g1, every)
    return np.array([float(l0), float(l1)])


def _wrapped(pl: Placement) -> Placement:
    """``pl`` (layer-wise, two parts) with its last two layers moved to the first part: the first part holds the
    model's first layers and its last, a stage before and a stage after the second part's."""
    graph = pl.graph
    hg = build_hypergraph(graph, pl.work, batch_size=B, grain="coarse")
    units = vertex_units(hg)
    parts = pl.vertex_parts(hg).copy()
    parts[units >= units.max() - 1] = 0
    return Placement.from_vertex_parts(graph, hg, parts, k=2, method="layerwise", work=pl.work)


@pytest.mark.parametrize(("wrapped", "optimizer"), [(False, "momentum"), (True, "adam")])
def test_two_in_flight_computes_each_gradient_at_weights_missing_the_previous_update(wrapped: bool,
                                                                                      optimizer: str) -> None:
    """One call of 2 steps (SGD with momentum or Adam, so the order and the staleness both show in the weights):
    step 1's gradient is computed at weights missing step 0's update on the pieces that run ahead, and with it on
    the last stage's; the updates land in step order. The reference applies the same gradients by hand. Wrapped:
    the loss part also holds the first layers, which run ahead, with Adam's step counted per step."""
    x, y = _data()
    xs, ys = x[: 2 * B], y[: 2 * B]
    pl = _placement("minivgg")
    if wrapped:
        pl = _wrapped(pl)
    assert pl.loss_part() == (0 if wrapped else 1)
    tail = {ly.name for ly in pl.graph.layers[-2:]} if wrapped else {ly.name for ly in pl.graph.layers}
    runs = []
    for way in ("compiled", "by hand", "sequential"):
        pm = PartitionedModel.from_placement(pl, device_set=DS, seed=3, optimizer=optimizer, lr=0.05)
        step = pm.train_step(B, "async")
        if way != "by hand":
            ms = MultiStep(step, steps_per_call=2, inflight=2 if way == "compiled" else 1)
            if way == "compiled":
                assert fresh_pieces(pm.placed) == {(layer, p) for layer, p in pm.placed.pieces
                                                   if p == pm.placed.loss_part and layer in tail}
            losses, _ = ms.run(xs, ys)
        else:
            losses = _by_hand(pm, step, xs, ys, tail)
        runs.append((pm.placed.keras_weights(), losses, [float(c.numpy()) for c in step.counters.values()]))
    (wc, lc, cc), (wh, lh, ch), (ws, ls, _) = runs
    np.testing.assert_allclose(lc, lh, rtol=1e-5)
    assert _max_diff(wc, wh) < 1e-5
    assert cc == ch == [2.0, 2.0]  # one update per step on each device
    assert ls[0] == lc[0] and abs(ls[1] - lc[1]) > 1e-6  # sequential: step 1 sees all of step 0's update
    assert _max_diff(wc, ws) > 1e-4


def test_each_part_reads_across_parts_only_after_sending_back_the_previous_steps_gradients() -> None:
    """The traced 3-step function of a layer-wise placement: the second part's cross-part reads of steps 1 and 2
    carry control inputs (its gradients of the previous step's read); step 0's does not."""
    pm = PartitionedModel.from_placement(_placement("minivgg"), device_set=DS, seed=0)
    ms = MultiStep(pm.train_step(B, "async"), steps_per_call=3, inflight=2)
    ops = ms.function(3).graph.get_operations()
    gated = [op for op in ops if op.type == "Identity" and op.control_inputs and "/fwd" in op.name]
    assert sorted({op.name.split("/")[0] for op in gated}) == ["step1", "step2"]
    assert all(op.device.endswith(pm.placed.devices[1].split("/")[-1]) for op in gated)
    assert all("gradients" in c.name for op in gated for c in op.control_inputs)


def test_two_in_flight_trains_with_one_update_per_step() -> None:
    _, losses, hist, pm = _fit("compiled", 2, 40, spc=16)
    assert pm.pipeline_choice is not None and pm.pipeline_choice.inflight == 2
    # 64 images of batch 8: an epoch is 8 steps, and a call never spans an epoch's end
    assert pm.pipeline_choice.describe().startswith("compiled (8 steps per call), 2 batches in flight")
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5
    step = pm.train_step(B, "async", 2)
    assert sorted({float(c.numpy()) for c in step.counters.values()}) == [40.0]
    assert hist.params["inflight"] == 2


def test_auto_on_a_short_step_times_the_compiled_way_too() -> None:
    pm = PartitionedModel.from_placement(_placement("minivgg"), device_set=DS, seed=0)
    step = pm.train_step(B, "async")
    runner, choice = choose_pipeline(step, DS, pipeline="auto", slots=None, steps_per_call=4)
    assert "compiled" in choice.why and "graph" in choice.why and "stages" in choice.why
    assert choice.kind == ("compiled" if isinstance(runner, MultiStep) else "stages" if runner is not None
                           else "graph")
    assert choice.why.split(": ")[1].split(" ")[0] == choice.kind  # the fastest timed is the one run


def test_the_compiled_default_is_one_batch_more_than_the_devices_and_the_simulator_agrees() -> None:
    from hgpart.cluster import load_cluster
    from hgpart.placement import default_inflight
    from hgpart.simulate import SimOptions, SimPipeline, simulate

    pl = _placement("minivgg")
    pm = PartitionedModel.from_placement(pl, device_set=DS, seed=0, pipeline="compiled", steps_per_call=2)
    _, choice = choose_pipeline(pm.train_step(B, "async"), DS, pipeline="compiled", slots=None, steps_per_call=2)
    assert choice.inflight == 3 == default_inflight(2, pl.pipeline_stages(), compiled=True)
    assert default_inflight(1, 0, compiled=True) == 1  # one device: exact sequential training
    sim = simulate(pl, load_cluster("thesis-cluster"), SimOptions(batch_size=B, pipeline=SimPipeline.COMPILED,
                                                                  steps_per_call=2))
    assert sim.inflight == 3 and sim.jobs == 12  # 4 x (K + 1) jobs: at least four calls of 2


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_a_compiled_runs_trace_shows_the_compiled_calls_it_times(tmp_path, mode: str) -> None:
    """hgpart train --trace with the compiled pipeline, async or sync, traces whole calls of it (ops of every step
    of a call, named by their step), not the one-function-per-step pipeline the run does not use; every op is on
    one of the parts."""
    import json
    import re

    from hgpart.runtime.train import train

    res = train(_placement("minivgg"), device_set=DS, steps=4, batch_size=B, pipeline="compiled", steps_per_call=2,
                mode=mode, trace=tmp_path / "tr")
    assert res.pipeline.startswith("compiled (2 steps per call)"), res.pipeline
    trace = json.loads((tmp_path / "tr" / "devices_trace.json").read_text())
    assert trace["otherData"]["pipeline"] == "compiled (2 steps per call)"
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    steps = {m.group() for e in spans if (m := re.match(r"step\d+(?=/)", e["name"]))}
    assert steps == {"step0", "step1"}, steps  # both steps of a call, each under its own scope
    assert {e["pid"] for e in spans} == {0, 1}
    assert len(res.device_busy) == 2 and all(0 < b <= 1 for b in res.device_busy)


@pytest.mark.parametrize("case", ["minires layerwise", "minires fine kahypar", "minires fine random",
                                  "minivgg coarse random"])
def test_the_simulator_holds_the_same_pieces_fresh_as_the_compiled_pipeline(case: str) -> None:
    """The units whose forward the simulator makes wait for the last step's backward of the same piece are exactly
    the pieces the runtime's compiled pipeline updates right after each step's gradients."""
    model, how = case.split(" ", 1)
    pl = {"layerwise": lambda: _placement(model), "fine kahypar": lambda: _placement(model, "kahypar", "fine"),
          "fine random": lambda: _random(model, "fine"), "coarse random": lambda: _random(model, "coarse")}[how]()
    placed = PartitionedModel.from_placement(pl, device_set=DS, seed=0).placed
    runtime = fresh_pieces(placed)
    names = [layer.name for layer in pl.graph.layers]
    tpl = mp_template(pl, LayerTimes({n: 1e-3 for n in names}, {n: 2e-3 for n in names}, B, "test"),
                      micro_batch=B)
    assert template_fresh_pieces(pl, tpl.units) == runtime
    vertex = {layer.name for layer in pl.graph.layers if layer.definition.role is Role.VERTEX}
    held = {(tpl.units[u].layer, tpl.units[u].part) for u in tpl.fresh}  # the units that wait
    assert {piece for piece in runtime if piece[0] in vertex} <= held <= {(u.layer, u.part) for u in tpl.units}
    assert runtime and runtime < placed.pieces  # some pieces run ahead, some do not


def test_gradients_through_one_steps_reads_equal_the_variables_gradients() -> None:
    """:func:`read_gradients` (what each compiled step's backward is traced with) gives ``tf.gradients`` of the
    variables: a variable read twice gets both reads' sum, one read before ``first_op`` (an earlier step's) counts
    for nothing, an unread one gets None, and the extra tensors come after."""
    import tensorflow as tf
    from hgpart.runtime.step import read_gradients

    v = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
    w = tf.Variable(np.ones(3, np.float32))
    unread = tf.Variable(np.ones(2, np.float32))

    @tf.function(autograph=False)
    def both(x: Any) -> tuple[Any, Any]:
        graph = tf.compat.v1.get_default_graph()
        earlier = tf.reduce_sum(tf.matmul(x, v))  # an earlier step: its read is not this step's
        first = len(graph.get_operations())
        h = tf.matmul(x, v) * w
        loss = tf.reduce_sum(h * h) + tf.reduce_sum(v * v)
        got = read_gradients(loss + earlier, [v, w, unread], first, [h])  # earlier: not through this step
        return (got[:2] + [tf.zeros(2) if got[2] is None else got[2] + 100.0] + got[3:],
                tf.gradients(loss, [v, w, h]))

    got, want = both(tf.constant(np.arange(4, dtype=np.float32).reshape(2, 2)))
    for g, e in zip([got[0], got[1], got[3]], want, strict=True):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(got[2].numpy(), np.zeros(2, np.float32))  # None: the unread variable


def test_a_gathered_variable_keeps_its_gradient() -> None:
    """A step that gathers rows of a variable (``ResourceGather``, not a whole read) still gets that variable's
    gradient from :func:`read_gradients`, equal to ``tf.gradients``'."""
    import tensorflow as tf
    from hgpart.runtime.step import read_gradients

    table = tf.Variable(np.arange(12, dtype=np.float32).reshape(4, 3))
    w = tf.Variable(np.ones(3, np.float32))

    @tf.function(autograph=False)
    def both() -> tuple[Any, Any]:
        first = len(tf.compat.v1.get_default_graph().get_operations())
        loss = tf.reduce_sum(tf.gather(table, [0, 2, 2]) * w)
        return read_gradients(loss, [table, w], first), tf.gradients(loss, [table, w])

    got, want = both()
    assert got[0] is not None
    for g, e in zip(got, want, strict=True):
        np.testing.assert_allclose(tf.convert_to_tensor(g).numpy(), tf.convert_to_tensor(e).numpy())
