"""``hgpart train --data / --val-split / --val-data / --save`` as a user runs them: every kind of bad data or bad
setting gives exit 2 and one error line before any training step, ``--dataset`` still works, and the CLI prints the
validation figures it saves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_train_cli import B, compile_minivgg, hgpart, our_stderr

#: runs each command line of argv[1] (a JSON list) through the CLI in one process; prints one JSON line per case
_DRIVER = """
import contextlib, io, json, sys
from hgpart.cli import _register, _run
_register()
for args in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = _run(args)
    print(json.dumps({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}), flush=True)
"""


def _png(path: Path) -> None:
    import tensorflow as tf

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tf.io.encode_png(np.zeros((4, 4, 3), np.uint8)).numpy())


def _bad_data(tmp: Path) -> dict[str, list[str]]:
    """Case name -> the train options giving it (the placement is minivgg 16x16x3, 10 classes)."""
    good_x = np.zeros((40, 16, 16, 3), np.float32)
    files = {
        "shape": {"x": np.zeros((40, 16, 16, 1), np.float32), "y": np.zeros(40, np.int32)},
        "labels": {"x": good_x, "y": np.full(40, 10, np.int32)},
        "lengths": {"x": good_x, "y": np.zeros(39, np.int32)},
        "tiny": {"x": good_x[:4], "y": np.zeros(4, np.int32)},
        "good": {"x": good_x, "y": np.zeros(40, np.int32)},
    }
    for name, arrays in files.items():
        np.savez(tmp / f"{name}.npz", **arrays)
    (tmp / "empty").mkdir()
    (tmp / "noimages" / "a").mkdir(parents=True)
    _png(tmp / "broken" / "a" / "ok.png")
    (tmp / "broken" / "b").mkdir()
    (tmp / "broken" / "b" / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    good = str(tmp / "good.npz")
    return {
        "wrong image shape": ["--data", str(tmp / "shape.npz")],
        "labels >= classes": ["--data", str(tmp / "labels.npz")],
        "x and y lengths": ["--data", str(tmp / "lengths.npz")],
        "fewer samples than a batch": ["--data", str(tmp / "tiny.npz")],
        "missing file": ["--data", str(tmp / "missing.npz")],
        "unknown kind": ["--data", str(tmp / "data.csv")],
        "empty folder": ["--data", str(tmp / "empty")],
        "folder without images": ["--data", str(tmp / "noimages")],
        "unreadable image": ["--data", str(tmp / "broken")],
        "validation split": ["--data", good, "--val-split", "1.5"],
        "validation data shape": ["--data", good, "--val-data", str(tmp / "shape.npz")],
        "save suffix": ["--data", good, "--save", str(tmp / "model.h5")],
        "save into a file": ["--data", good, "--save", str(tmp / "good.npz" / "m.keras")],
    }


EXPECT = {  # what each error line names
    "wrong image shape": "[16, 16, 1] do not fit", "labels >= classes": "10 classes",
    "x and y lengths": "40 images but 39 labels", "fewer samples than a batch": "fewer than one batch",
    "missing file": "missing.npz", "unknown kind": "neither", "empty folder": "no class subfolders",
    "folder without images": "no images", "unreadable image": "bad.png", "validation split": "--val-split",
    "validation data shape": "--val-data", "save suffix": ".keras suffix", "save into a file": "--save",
}


def test_bad_data_is_exit_2_and_one_line_before_training(tmp_path: Path) -> None:
    path, _ = compile_minivgg(tmp_path, "coarse")
    cases = _bad_data(tmp_path)
    base = ["train", "--placement", str(path), "--steps", "2", "--batch-size", str(B)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS="1", COLUMNS="200")
    proc = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps([base + a for a in cases.values()])],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert len(results) == len(cases)
    for (name, _), res in zip(cases.items(), results, strict=True):
        lines = [ln for ln in res["stderr"].splitlines() if ln.strip()]
        assert res["code"] == 2, (name, res)
        assert len(lines) == 1 and lines[0].startswith("error:") and EXPECT[name] in lines[0], (name, lines)
        assert "epoch" not in res["stdout"] and "steps," not in res["stdout"], (name, res["stdout"])


def test_the_entry_point_exits_2_on_bad_data_and_dataset_is_an_alias(tmp_path: Path) -> None:
    path, _ = compile_minivgg(tmp_path, "coarse")
    np.savez(tmp_path / "bad.npz", x=np.zeros((20, 16, 16, 3), np.float32), y=np.full(20, 12))
    proc = hgpart("train", "--placement", str(path), "--data", str(tmp_path / "bad.npz"), "--steps", "2")
    assert proc.returncode == 2
    assert len(our_stderr(proc)) == 1 and "12..12" in our_stderr(proc)[0], proc.stderr
    proc = hgpart("train", "--placement", str(path), "--dataset", "digits", "--steps", "2", "--batch-size", str(B),
                  "--val-split", "0.2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "epoch 1/1: loss" in proc.stdout and "val_accuracy" in proc.stdout
    assert "validation after the last epoch: loss" in proc.stdout


@pytest.mark.slow
def test_the_digits_example_reloads_with_the_printed_accuracy(tmp_path: Path) -> None:
    """The user workflow: digits -> .npz -> lenet5 3 epochs on 2 local workers -> .keras -> plain Keras >= 0.9."""
    script = Path(__file__).resolve().parents[1] / "examples" / "digits_to_keras.py"
    proc = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS="1", COLUMNS="200"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    printed, reloaded = (float(v) for v in
                         last.removeprefix("validation accuracy: hgpart train printed ").split(", plain Keras gives "))
    assert printed == reloaded >= 0.9
    assert "hgpart imported: False" in proc.stdout
