"""The model source a placement records, and the runtime rebuilding exactly that model.

A placement compiled from ``keras:<Application>`` or from a ``.keras`` file must train that model (the runtime
once rebuilt the zoo model of the graph's short name, so neither could train); a ``.keras`` file's weights are
where training starts; ``--init-weights`` replaces the weights of any source; a wrong weights file, a missing or
changed model file are one line each. Training runs in this process on the session's logical devices.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from hgpart.runtime.devices import open_devices

from hgpart.cli import main
from hgpart.errors import HgpartError
from hgpart.models import ModelSource, SourceKind, load_graph, load_keras_model
from hgpart.notes import HgpartNote
from hgpart.placement import Placement, load_placement

DS = open_devices("logical", 2, inter_op=4)
B = 8
#: the loss of a model whose every weight is zero: all logits equal, so the softmax is uniform over 10 classes
UNIFORM_LOSS = math.log(10.0)


def _partition(capsys: pytest.CaptureFixture[str], model: str, out: Path, *extra: str) -> Placement:
    with pytest.raises(SystemExit) as exc:
        main(["partition", "--model", model, "--analytic", "--k", "2", "--backend", "layerwise", "--out", str(out),
              *extra])
    err = capsys.readouterr().err
    assert exc.value.code in (0, None), err
    return load_placement(out)


def _zero_lenet(path: Path) -> Path:
    """A LeNet-5 whose every weight is zero, saved as ``path`` (.keras or .weights.h5)."""
    model = load_keras_model("lenet5")
    model.set_weights([np.zeros_like(w) for w in model.get_weights()])
    if path.name.endswith(".weights.h5"):
        model.save_weights(path)
    else:
        model.save(path)
    return path


def _random_lenet(path: Path, seed: int) -> list[np.ndarray]:
    """A LeNet-5 with seeded weights (not the zoo's seed-0 ones) saved as ``path``; returns its weights."""
    import keras

    keras.utils.set_random_seed(seed)
    model = load_keras_model("lenet5")
    model.save(path)
    return model.get_weights()


def _first_loss(placement: Path | Placement, **kw: object) -> float:
    from hgpart.runtime.train import train

    # a learning rate of ~0: the untimed warm-up step leaves the weights as they were
    res = train(placement, device_set=DS, steps=1, batch_size=B, mode="sync", lr=1e-9, **kw)  # type: ignore[arg-type]
    return float(res.losses[0])


# ----------------------------------------------------------------------------------------- the placement file
def test_partition_records_each_kind_of_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = _zero_lenet(tmp_path / "net.keras")
    zoo = _partition(capsys, "lenet5", tmp_path / "zoo.json").source
    fil = _partition(capsys, str(file), tmp_path / "file.json").source
    assert zoo == ModelSource(SourceKind.ZOO, "lenet5", (32, 32, 1), 10)
    assert fil is not None and fil.kind is SourceKind.FILE and fil.name == "net"
    assert fil.path == str(file.resolve()) and fil.sha256 is not None and len(fil.sha256) == 64
    # the file records it where the schema says, and it survives a save / load
    doc = json.loads((tmp_path / "file.json").read_text())
    assert doc["model"]["source"] == {"kind": "file", "name": "net", "input_shape": [32, 32, 1], "num_classes": 10,
                                      "path": str(file.resolve()), "sha256": fil.sha256}


def test_a_model_file_gone_before_it_is_recorded_is_one_error(tmp_path: Path) -> None:
    graph = load_graph("lenet5")  # e.g. `compare` read the graph from a profile, and the file was moved since
    with pytest.raises(HgpartError, match="cannot read model file"):
        ModelSource.from_spec(str(tmp_path / "gone.keras"), graph)


def test_old_placement_without_source_means_the_zoo_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "zoo.json"
    _partition(capsys, "lenet5", path)
    doc = json.loads(path.read_text())
    del doc["model"]["source"]  # as written before sources were recorded
    path.write_text(json.dumps(doc))
    pl = load_placement(path)
    assert pl.source is None and pl.model_source() == ModelSource(SourceKind.ZOO, "lenet5", (32, 32, 1), 10)
    assert "source" not in pl.to_dict()["model"]


@pytest.mark.parametrize("edit,words", [
    (lambda s: s.pop("sha256"), "malformed at model/source"),
    (lambda s: s.update(kind="hub"), "malformed at model/source/kind"),
    (lambda s: s.update(input_shape=[28, 28, 1]), "does not match the layers' input"),
])
def test_a_bad_recorded_source_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: object,
                                            words: str) -> None:
    path = tmp_path / "file.json"
    _partition(capsys, str(_zero_lenet(tmp_path / "net.keras")), path)
    doc = json.loads(path.read_text())
    edit(doc["model"]["source"])  # type: ignore[operator]
    path.write_text(json.dumps(doc))
    with pytest.raises(HgpartError, match=words):
        load_placement(path)


# ----------------------------------------------------------------------------------------- rebuilding the model
def test_keras_application_rebuilds_with_the_same_layer_names(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from hgpart.runtime.modelsource import build_for_placement

    pl = _partition(capsys, "keras:MobileNetV2", tmp_path / "app.json", "--input", "32", "--classes", "10")
    assert pl.source == ModelSource(SourceKind.KERAS_APP, "MobileNetV2", (32, 32, 3), 10)
    load_graph("keras:MobileNetV2", input_shape=(32, 32, 3), num_classes=10)  # Keras numbers unnamed layers
    model = build_for_placement(pl, seed=0)  # refuses a model whose fingerprint differs
    assert model.name.startswith("mobilenetv2") and int(model.outputs[0].shape[-1]) == 10


def test_keras_file_placement_starts_from_the_file_weights(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from hgpart.runtime.modelsource import build_for_placement

    file = tmp_path / "seeded.keras"
    saved = _random_lenet(file, seed=7)
    pl = _partition(capsys, str(file), tmp_path / "file.json")
    got = build_for_placement(pl, seed=0).get_weights()
    assert len(got) == len(saved) and all(np.array_equal(a, b) for a, b in zip(got, saved, strict=True))
    # and the partitioned runtime trains from them: all-zero weights give the uniform loss on any batch
    zero = _partition(capsys, str(_zero_lenet(tmp_path / "zero.keras")), tmp_path / "zero.json")
    assert abs(_first_loss(zero) - UNIFORM_LOSS) < 1e-5
    assert abs(_first_loss(pl) - UNIFORM_LOSS) > 1e-3  # other weights


def test_init_weights_replace_the_weights_of_any_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "zoo.json"
    _partition(capsys, "lenet5", path)
    assert abs(_first_loss(path) - UNIFORM_LOSS) > 1e-3  # the zoo's seeded weights
    for suffix in (".weights.h5", ".keras"):
        init = _zero_lenet(tmp_path / f"zero{suffix}")
        assert abs(_first_loss(path, init_weights=init) - UNIFORM_LOSS) < 1e-5, suffix


def test_a_wrong_weights_file_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hgpart.runtime.modelsource import build_for_placement

    pl = _partition(capsys, "lenet5", tmp_path / "zoo.json")
    other = load_keras_model("minivgg", input_shape=(32, 32, 1), num_classes=10)
    other.save(tmp_path / "other.keras")
    other.save_weights(tmp_path / "other.weights.h5")
    (tmp_path / "junk.weights.h5").write_text("not hdf5")
    cases = {"other.keras": "does not fit model", "other.weights.h5": "cannot load weights file",
             "junk.weights.h5": "cannot load weights file", "missing.keras": "does not exist",
             "notes.txt": "neither a .keras nor a .weights.h5"}
    for name, words in cases.items():
        with pytest.raises(HgpartError, match=words) as exc:
            build_for_placement(pl, init_weights=tmp_path / name)
        assert "\n" not in exc.value.line() and "--init-weights" in exc.value.line()


def test_a_changed_model_file_gives_a_note_and_a_missing_one_an_error(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from hgpart.runtime.modelsource import build_for_placement

    file = tmp_path / "net.keras"
    _random_lenet(file, seed=1)
    pl = _partition(capsys, str(file), tmp_path / "file.json")
    saved = _random_lenet(file, seed=2)  # trained further and re-saved: same layers, new weights
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = build_for_placement(pl).get_weights()
    notes = [w for w in seen if issubclass(w.category, HgpartNote)]
    assert len(notes) == 1 and "changed since the placement was made" in str(notes[0].message)
    assert all(np.array_equal(a, b) for a, b in zip(got, saved, strict=True))
    load_keras_model("minivgg", input_shape=(32, 32, 1), num_classes=10).save(file)  # other layers: refused
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(HgpartError, match="placement is for"):
            build_for_placement(pl)
    file.unlink()
    with pytest.raises(HgpartError, match="recorded in the placement does not exist"):
        build_for_placement(pl)


@pytest.mark.slow
def test_keras_mobilenetv2_placement_at_96_trains_two_steps(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from hgpart.runtime.train import train

    path = tmp_path / "mnv2.json"
    _partition(capsys, "keras:MobileNetV2", path, "--input", "96", "--classes", "10")
    res = train(path, device_set=DS, steps=2, batch_size=B, mode="async")
    assert res.steps == 2 and all(math.isfinite(v) for v in res.losses)
