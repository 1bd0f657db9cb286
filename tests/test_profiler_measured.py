"""Profiler: measured times are positive, files are named and checked, mismatching profiles are refused."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import json

import pytest

from hgpart.errors import HgpartError
from hgpart.layergraph import LayerGraph
from hgpart.models import load_graph
from hgpart.profile import Profile, analytic_profile, default_profile_path
from hgpart.profiler import MeasureOptions, _RoundBar, _Rounds, _Timed, machine_info, profile_model
from hgpart.timing import Clock

QUICK = MeasureOptions(min_rounds=2, max_rounds=3, warmup=1)


def _profile_keras(model, *, rounds: int, warmup: int) -> Profile:
    """A measured profile of a small Keras model built in the test (``rounds`` rounds, no whole step)."""
    from hgpart.frontend import layer_graph_from_keras
    from hgpart.profiler import measure_profile

    graph = layer_graph_from_keras(model, name=model.name)
    return measure_profile(model, graph, batch_size=2, progress=False,
                           options=MeasureOptions(min_rounds=rounds, max_rounds=rounds, warmup=warmup,
                                                  whole_step=False))


def test_measured_profile_minivgg(tmp_path) -> None:
    prof = profile_model("minivgg", batch_size=4, options=QUICK, progress=False)
    graph = load_graph("minivgg")
    prof.check(graph)
    assert prof.mode == "measured" and prof.work_unit == "ms" and prof.batch_size == 4
    assert [c.name for c in prof.layers] == [x.name for x in graph.layers]
    for cost, layer in zip(prof.layers, graph.layers, strict=True):
        if layer.kind == "input":
            assert cost.forward_ms == 0 and cost.backward_ms == 0
        else:
            assert cost.forward_ms > 0, layer.name
            assert cost.backward_ms >= 0, layer.name
        assert cost.params == layer.params and cost.flops == layer.flops
        assert cost.activation_bytes == 4 * 4 * int(__import__("math").prod(layer.output_shape))
    convs = [c for c in prof.layers if c.name.endswith(("conv1", "conv2"))]
    assert sum(c.backward_ms for c in convs) > 0
    # every layer with weights has its optimizer update timed; the others have none; work() adds it
    for cost in prof.layers:
        assert (cost.update_ms is not None and cost.update_ms > 0) == (cost.params > 0), cost.name
    assert prof.work() == pytest.approx({c.name: c.total_ms + (c.update_ms or 0.0) for c in prof.layers})
    assert prof.machine["cpu_model"] and prof.machine["tensorflow"] and prof.machine["usable_cores"] >= 1
    # the setup and quality are recorded: every timed layer has a spread and 2..3 samples, a whole step was timed
    assert prof.recorded_setup is not None and prof.setup.interleaved and prof.setup.clock == "process_cpu"
    assert prof.setup.cores == prof.machine["usable_cores"] and (prof.setup.min_rounds, prof.setup.max_rounds) == (2, 3)
    timed = [c for c, x in zip(prof.layers, graph.layers, strict=True) if x.kind != "input"]
    assert all(c.spread is not None and c.spread >= 0 and c.samples in (2, 3) for c in timed)
    assert prof.quality is not None and prof.quality.step_ms and prof.quality.step_ms > 0
    assert 2 <= prof.quality.rounds <= 3
    # saved and loaded, with the embedded graph that downstream tools can check against
    path = prof.save(default_profile_path(graph, 4, folder=tmp_path))
    assert path.name == "minivgg_32_b4.json"
    loaded = Profile.load(path)
    assert loaded.graph is not None
    assert LayerGraph.from_dict(loaded.graph).fingerprint() == graph.fingerprint() == loaded.fingerprint
    assert loaded.work() == pytest.approx(prof.work())
    assert loaded.setup == prof.setup and loaded.quality == prof.quality


def test_branching_layers_get_one_tensor_per_input() -> None:
    prof = profile_model("minires", batch_size=2, options=MeasureOptions(min_rounds=1, max_rounds=1, warmup=0,
                                                                         whole_step=False), progress=False)
    costs = {c.name: c for c in prof.layers}
    assert costs["res_add"].forward_ms > 0 and costs["mix_concat"].forward_ms > 0
    assert prof.quality is not None and prof.quality.step_ms is None and prof.quality.rounds == 1


def test_a_layer_reading_the_images_is_timed_without_their_gradient() -> None:
    """Training never needs the images' gradient: the first convolution's timed backward computes its kernel and
    bias gradients only, the second's its input gradient too, as in the runtime's step."""
    import keras

    from hgpart.frontend import layer_graph_from_keras
    from hgpart.profiler import _layer_timer

    model = keras.Sequential([keras.Input((16, 16, 3)), keras.layers.Conv2D(4, 3, padding="same"),
                              keras.layers.Conv2D(4, 3, padding="same")], name="two_convs")
    graph = layer_graph_from_keras(model, name="two_convs")
    images = frozenset(layer.name for layer in graph.layers if not layer.inputs)
    grads = []
    for layer, kl in zip(graph.layers[1:], model.layers, strict=True):
        _, fwd_bwd, weights = _layer_timer(kl, layer, 2, images)
        _, g = fwd_bwd()
        grads.append([tuple(t.shape) for t in g])
        assert len(weights) == 2
    assert grads[0] == [(3, 3, 3, 4), (4,)]
    assert grads[1] == [(2, 16, 16, 4), (3, 3, 4, 4), (4,)]


def test_mismatching_profile_is_refused(tmp_path) -> None:
    graph = load_graph("minivgg")
    prof = analytic_profile(graph, 8)
    path = prof.save(tmp_path / "p.json")
    loaded = Profile.load(path)
    loaded.check(graph)
    bigger = (64, 64, 3)
    others = [load_graph("lenet5"), load_graph("minivgg", num_classes=5), load_graph("minivgg", input_shape=bigger)]
    for other in others:
        with pytest.raises(HgpartError, match="fingerprint"):
            loaded.check(other, path=str(path))


def test_analytic_profile_is_flops_times_three(tmp_path) -> None:
    prof = profile_model("lenet5", batch_size=8, analytic=True, progress=False)
    graph = load_graph("lenet5")
    assert prof.mode == "analytic" and prof.graph["fingerprint"] == graph.fingerprint()
    work = prof.work()
    assert work["conv1"] == pytest.approx(graph.layer("conv1").flops * 3 * 8 / 1e6)


def test_cli_profile_and_info(tmp_path, capsys) -> None:
    from hgpart.cli import main

    out = tmp_path / "prof.json"
    with pytest.raises(SystemExit) as exc:
        main(["profile", "--model", "lenet5", "--batch-size", "2", "--repeats", "1", "--max-rounds", "2",
              "--warmup", "0", "--out", str(out)])
    assert exc.value.code == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "timed layers above the 5% target" in printed and "/ whole training step" in printed
    data = json.loads(out.read_text())
    assert data["format"] == "hgpart.profile/1" and data["model"] == "lenet5" and data["mode"] == "measured"
    assert data["graph"]["fingerprint"] == data["fingerprint"]
    assert data["setup"]["max_rounds"] == 2 and data["quality"]["step_ms"] > 0
    with pytest.raises(SystemExit) as exc:
        main(["info", "--model", "minires"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert "mix_concat" in text and load_graph("minires").fingerprint() in text
    with pytest.raises(SystemExit) as exc:
        main(["info", "--model", "nosuchnet"])
    assert exc.value.code == 2


def test_machine_info_fields() -> None:
    info = machine_info()
    assert set(info) >= {"cpu_model", "logical_cores", "tensorflow", "python", "date"}


def test_separable_conv_halves_are_timed_separately() -> None:
    """The front end makes a SeparableConv2D two layers; each is timed as its own op on its own input (the
    pointwise half reads the depthwise output's 6 channels, which the whole Keras layer would refuse)."""
    import keras

    x = inp = keras.Input((8, 8, 3))
    x = keras.layers.SeparableConv2D(5, 3, padding="same", depth_multiplier=2, activation="relu", name="sep")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    prof = _profile_keras(keras.Model(inp, keras.layers.Dense(4, name="fc")(x), name="sepnet"), rounds=1, warmup=0)
    costs = {c.name: c for c in prof.layers}
    assert costs["sep.depthwise"].forward_ms > 0 and costs["sep"].forward_ms > 0
    assert costs["sep.depthwise"].backward_ms >= 0 and costs["sep"].backward_ms >= 0


def test_every_layer_is_sampled_in_every_round_until_all_are_pinned_down() -> None:
    """A layer pinned down early keeps being sampled, so all costs come from the same rounds."""
    class Scripted(_Timed):
        def __init__(self, name: str, values: list[float]) -> None:
            super().__init__(name, None, lambda: None)
            self.values = values

        def sample(self) -> None:
            v = self.values[len(self.fb[Clock.PROCESS_CPU]) % len(self.values)]
            for clock in Clock:
                self.fb[clock].add(v)

    opts = MeasureOptions(min_rounds=2, max_rounds=6, warmup=0)
    steady, noisy = Scripted("steady", [1.0]), Scripted("noisy", [1.0, 2.0, 1.2, 3.0, 1.5, 2.5])
    rounds = _Rounds(None, None, 1, opts)  # type: ignore[arg-type]  # run() reads only the items
    rounds.items = [steady, noisy]
    rounds.run(_RoundBar(opts, False))
    assert rounds.rounds == 6  # the noisy item never gets within 5 %
    assert len(steady.fb[Clock.PROCESS_CPU]) == len(noisy.fb[Clock.PROCESS_CPU]) == 6
    # once every item is within the target, the rounds stop at the minimum
    calm = [Scripted("a", [1.0]), Scripted("b", [2.0])]
    rounds.items, rounds.rounds = calm, 0
    rounds.run(_RoundBar(opts, False))
    assert rounds.rounds == 2 and all(len(c.fb[Clock.PROCESS_CPU]) == 2 for c in calm)


def test_a_layers_update_cost_grows_with_its_weights_and_moves_the_balance() -> None:
    """The update of a large fully connected layer is timed with the runtime's fused Adam kernel and counts in
    the layer's work, so the partitioner sees it; a profile without it (files before it was recorded) reads
    as before."""
    import keras

    from hgpart.profile import LayerCost

    inp = keras.Input((4, 4, 8))
    x = keras.layers.Conv2D(8, 1, name="small")(inp)
    x = keras.layers.Flatten(name="flat")(x)
    prof = _profile_keras(keras.Model(inp, keras.layers.Dense(4096, name="big")(x), name="fcnet"), rounds=3, warmup=1)
    costs = {c.name: c for c in prof.layers}
    assert costs["flat"].update_ms is None and costs["flat"].params == 0
    # 128 x 4096 weights against 8 x 8: the big layer's update takes far longer
    assert costs["big"].update_ms is not None and costs["small"].update_ms is not None
    assert costs["big"].update_ms > 5 * costs["small"].update_ms
    assert prof.work()["big"] == pytest.approx(costs["big"].total_ms + costs["big"].update_ms)
    # written and read back; an entry without it is work = forward + backward
    again = Profile.from_dict(json.loads(json.dumps(prof.to_dict())))
    assert again.layers == prof.layers
    old = LayerCost("a", 1.0, 2.0, 0, 10, 0)
    assert "update_ms" not in old.to_dict() and old.update_ms is None
