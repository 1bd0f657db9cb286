"""The Keras-shaped API: fit returns Keras's History keys with validation after every epoch, evaluate and predict
equal the exported Keras model's, the saved .keras opens in plain Keras with equal predictions, a fit continued from
a step equals the uninterrupted fit, and ``train`` runs through the same fit."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hgpart.runtime import api
from hgpart.runtime.api import PartitionedModel, plan_segments
from hgpart.runtime.devices import open_devices
from toydata import band_images

from hgpart.errors import HgpartError
from hgpart.hypergraph import build_hypergraph
from hgpart.models import load_graph
from hgpart.partitioners import partition
from hgpart.placement import Placement
from hgpart.profile import analytic_profile

B = 8
DS = open_devices("logical", 2)  # the session's logical devices (tests/conftest.py)


def _placement() -> Placement:
    graph = load_graph("minivgg", (16, 16, 3), 10)
    prof = analytic_profile(graph, B)
    hg = build_hypergraph(graph, prof.work(), batch_size=B, grain="coarse")
    res = partition(hg, k=2, backend="mtkahypar", epsilon=0.05, seed=0)
    return Placement.from_vertex_parts(graph, hg, res.parts, k=2, method="hypergraph", work=prof.work())


def _data(n: int = 64) -> tuple[np.ndarray, np.ndarray]:
    return band_images(n)


@pytest.fixture(scope="module")
def pl() -> Placement:
    return _placement()


def test_plan_segments_cut_at_epoch_boundaries() -> None:
    segs = plan_segments(total_steps=10, steps_per_epoch=4, start_step=3)
    assert [(s.epoch, s.start, s.steps) for s in segs] == [(0, 3, 1), (1, 4, 4), (2, 8, 2)]


def test_fit_history_validation_evaluate_predict_and_to_keras(pl: Placement) -> None:
    x, y = _data()
    with PartitionedModel.from_placement(pl, device_set=DS, seed=1) as pm:
        hist = pm.fit(x, y, epochs=2, batch_size=B, validation_split=0.25, mode="sync", steps_per_epoch=3, verbose=0)
        assert sorted(hist.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
        assert all(len(v) == 2 for v in hist.history.values()) and hist.epoch == [0, 1]
        assert sorted(r.record.step for r in hist.rows) == list(range(6))
        assert [r.epoch for r in sorted(hist.rows, key=lambda r: r.record.step)] == [0, 0, 0, 1, 1, 1]
        last = [r for r in hist.rows if r.epoch == 1]
        assert hist.history["accuracy"][1] == pytest.approx(np.mean([r.accuracy for r in last]))
        assert hist.history["loss"][1] == pytest.approx(np.mean([r.record.loss for r in last]))
        # the validation figures are the model's own evaluation of the last 25 % after the epoch
        xv, yv = x[48:], y[48:]
        loss, acc = pm.evaluate(xv, yv)
        assert (loss, acc) == pytest.approx((hist.history["val_loss"][1], hist.history["val_accuracy"][1]))
        assert pm.evaluate(xv, yv, return_dict=True) == {"loss": loss, "accuracy": acc}
        probs = pm.predict(xv, batch_size=5)  # a last batch of 1: any batch size
        model = pm.to_keras()
        np.testing.assert_allclose(probs, model.predict(xv, verbose=0), atol=1e-5)
        assert acc == pytest.approx(float(np.mean(np.argmax(probs, -1) == yv)))
        # validation_data (arrays) overrides the split; the step count goes on from where the last fit ended
        more = pm.fit(x[:48], y[:48], steps=7, initial_step=6, batch_size=B, validation_data=(xv, yv),
                      validation_split=0.5, mode="sync", verbose=0)
        assert [r.record.step for r in more.rows] == [6] and more.epoch == [1]
        assert more.history["val_accuracy"] == pytest.approx([pm.evaluate(xv, yv)[1]])


def test_the_metered_step_counts_hits_before_its_update(pl: Placement) -> None:
    x, y = _data(B)
    with PartitionedModel.from_placement(pl, device_set=DS, seed=2) as pm:
        step = pm.train_step(B, "async")
        before = {k: {n: w.copy() for n, w in v.items()} for k, v in pm.placed.keras_weights().items()}
        want = float(np.mean(np.argmax(pm.predict(x), -1) == y))
        _, acc = step.run(x, y)
        assert acc == pytest.approx(want)
        assert any(not np.array_equal(w, pm.placed.keras_weights()[k][n]) for k, v in before.items()
                   for n, w in v.items())


def test_a_fit_continued_from_a_step_equals_the_uninterrupted_fit(pl: Placement) -> None:
    """Batches follow from (seed, step) and the warm-up restores every variable: 2 + 3 steps = 5 steps."""
    x, y = _data()
    with PartitionedModel.from_placement(pl, device_set=DS, seed=3) as one:
        one.fit(x, y, steps=5, batch_size=B, mode="sync", verbose=0)
        whole = one.placed.keras_weights()
    with PartitionedModel.from_placement(pl, device_set=DS, seed=3) as two:
        first = two.fit(x, y, steps=2, batch_size=B, mode="sync", verbose=0)
        rest = two.fit(x, y, steps=5, initial_step=2, batch_size=B, mode="sync", verbose=0)
        assert sorted(r.record.step for r in first.rows + rest.rows) == list(range(5))
        parts = two.placed.keras_weights()
    for layer, ws in whole.items():
        for name, w in ws.items():
            np.testing.assert_allclose(parts[layer][name], w, atol=1e-6, err_msg=f"{layer}.{name}")


def test_save_opens_in_plain_keras_with_equal_predictions(pl: Placement, tmp_path: Path) -> None:
    x, y = _data()
    with PartitionedModel.from_placement(pl, device_set=DS, seed=4) as pm:
        pm.fit(x, y, epochs=1, batch_size=B, validation_split=0.25, verbose=0)
        path = pm.save(tmp_path / "m.keras")
        ours = pm.predict(x[48:])
        val_acc = pm.evaluate(x[48:], y[48:])[1]
        with pytest.raises(HgpartError, match=".keras suffix"):
            pm.save(tmp_path / "m.h5")
    np.save(tmp_path / "xv.npy", x[48:])
    np.save(tmp_path / "yv.npy", y[48:])
    code = ("import sys, numpy as np, keras\n"
            "m = keras.saving.load_model(sys.argv[1])\n"
            "assert not any(k.startswith('hgpart') for k in sys.modules)\n"
            "np.save(sys.argv[2], m.predict(np.load(sys.argv[3]), verbose=0))\n"
            "print(m.evaluate(np.load(sys.argv[3]), np.load(sys.argv[4]), verbose=0)[1])\n")
    proc = subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "p.npy"), str(tmp_path / "xv.npy"),
                           str(tmp_path / "yv.npy")], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    np.testing.assert_allclose(np.load(tmp_path / "p.npy"), ours, atol=1e-5)
    assert float(proc.stdout.split()[-1]) == pytest.approx(val_acc, abs=1e-6)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_train_runs_through_fit_and_logs_validation(pl: Placement, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from hgpart.runtime.train import LOG_COLUMNS, train

    calls: list[dict] = []
    real = api.PartitionedModel.fit

    def spy(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls.append(kwargs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(api.PartitionedModel, "fit", spy)
    x, y = _data()
    np.savez(tmp_path / "d.npz", x=x, y=y)
    log = tmp_path / "log.csv"
    res = train(pl, device_set=DS, batch_size=B, epochs=2, data=tmp_path / "d.npz", val_split=0.25, mode="sync",
                log=log)
    assert len(calls) == 1 and calls[0]["steps"] == 12  # 2 epochs of 48 // 8 steps
    assert res.steps == 12 and len(res.history["val_accuracy"]) == 2 and res.validation is not None
    rows = list(csv.DictReader(log.open()))
    assert list(rows[0]) == list(LOG_COLUMNS) and len(rows) == 12
    ends = [r for r in rows if r["val_loss"]]
    assert [int(r["epoch"]) for r in ends] == [0, 1]
    assert float(ends[-1]["val_accuracy"]) == pytest.approx(res.validation[1])
