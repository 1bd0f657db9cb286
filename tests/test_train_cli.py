"""``hgpart train`` as a user runs it (a subprocess of the console entry point): exit codes, the per-step log, the
per-device Chrome trace, the fine-grain compute line; bad placement files -> exit 2 and one error line."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hgpart.hypergraph import build_hypergraph
from hgpart.models import load_graph
from hgpart.partitioners import partition
from hgpart.placement import Placement
from hgpart.profile import analytic_profile

B = 8
_CLI = "import sys; from hgpart.cli import main; main(sys.argv[1:])"
#: TensorFlow's own start-up notices (absl/oneDNN), printed before hgpart runs and not controllable by it
_TF_NOISE = re.compile(r"^(WARNING: All log messages before absl|[IW]\d{4} |To enable the following instructions)")


def hgpart(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS="1", COLUMNS="200")
    return subprocess.run([sys.executable, "-c", _CLI, *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def our_stderr(proc: subprocess.CompletedProcess) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if ln.strip() and not _TF_NOISE.match(ln)]


def compile_minivgg(tmp: Path, grain: str, k: int = 2) -> tuple[Path, Placement]:
    graph = load_graph("minivgg", (16, 16, 3), 10)
    prof = analytic_profile(graph, B)
    hg = build_hypergraph(graph, prof.work(), batch_size=B, grain=grain)
    res = partition(hg, k=k, backend="mtkahypar", epsilon=0.05, seed=0)
    pl = Placement.from_vertex_parts(graph, hg, res.parts, k=k, method="hypergraph", work=prof.work())
    return Path(pl.save(tmp / f"minivgg_{grain}_k{k}.json")), pl


def device_ops(trace: dict) -> dict[int, list[tuple[str, str]]]:
    """Per process row: (node name, op type) of every op span."""
    out: dict[int, list[tuple[str, str]]] = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            out.setdefault(e["pid"], []).append((e["name"], e["cat"]))
    return out


def check_trace(folder: Path, pl: Placement) -> None:
    trace = json.loads((folder / "devices_trace.json").read_text())
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert sorted(names) == list(range(pl.k))
    ops = device_ops(trace)
    assert len(ops) >= 2 and all(len(v) > 0 for v in ops.values())
    busy = trace["otherData"]["device_busy"]
    assert len(busy) == pl.k and all(0.0 < b <= 1.0 for b in busy)
    # the convolutions (forward, both backward ones) of a layer that sits wholly on one part run in that part's row
    checked = 0
    for layer in pl.graph.vertex_layers:
        f = pl.layer_parts[layer.name]["filters"]
        if layer.kind != "conv2d" or len(set(f.tolist())) != 1:
            continue
        if pl.grain == "fine" and len(set(pl.layer_parts[layer.name]["channels"].ravel().tolist())) != 1:
            continue
        p = int(f[0])
        def convs(q: int, name: str = layer.name) -> set[str]:
            return {t for n, t in ops.get(q, []) if f"fwd0/{name}/" in n and "Conv2D" in t}

        assert any("Backprop" in t for t in convs(p)) and any("Backprop" not in t for t in convs(p)), layer.name
        assert not any(convs(q) for q in ops if q != p), layer.name
        checked += 1
    assert checked >= 2
    assert json.loads((folder / "pipeline_trace.json").read_text())["traceEvents"]


def test_train_cli_fine_log_trace(tmp_path):
    path, pl = compile_minivgg(tmp_path, "fine")
    log, tr = tmp_path / "log.csv", tmp_path / "trace"
    proc = hgpart("train", "--placement", str(path), "--steps", "3", "--batch-size", str(B), "--inflight", "2",
                  "--log", str(log), "--trace", str(tr))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert our_stderr(proc) == []
    rows = list(csv.DictReader(log.open()))
    assert sorted(int(r["step"]) for r in rows) == [0, 1, 2]
    assert all(np.isfinite(float(r["loss"])) and float(r["batch_s"]) > 0 for r in rows)
    check_trace(tr, pl)
    # the loss line averages the first / last steps to finish (1 step each at 3 steps): the log's rows, which are
    # in finishing order (async: batch 1 may finish before batch 0)
    m = re.search(r"loss ([0-9.]+) -> ([0-9.]+) \(mean of the first / last 1 steps\)", proc.stdout)
    assert m and float(m.group(1)) == pytest.approx(float(rows[0]["loss"]), abs=1e-4)
    assert float(m.group(2)) == pytest.approx(float(rows[-1]["loss"]), abs=1e-4)
    assert "device busy" in proc.stdout
    assert re.search(r"^pipeline: (graph|stages|compiled)", proc.stdout, re.M)  # how the steps ran, and why
    m = re.search(r"executed / assigned MACs ([0-9.]+)", proc.stdout)
    assert m and float(m.group(1)) >= 1.0


def test_loss_ends_average_the_first_and_last_steps():
    from hgpart.runtime.train import TrainResult

    res = TrainResult(steps=30, images=0, seconds=1.0, images_per_s=0.0, losses=[float(i) for i in range(30)])
    assert res.loss_ends() == (5, 2.0, 27.0)
    short = TrainResult(steps=2, images=0, seconds=1.0, images_per_s=0.0, losses=[3.0, 1.0])
    assert short.loss_ends() == (1, 3.0, 1.0)


@pytest.mark.slow
def test_train_cli_local_workers_json_log(tmp_path):
    path, pl = compile_minivgg(tmp_path, "coarse")
    log, tr = tmp_path / "log.json", tmp_path / "trace"
    proc = hgpart("train", "--placement", str(path), "--devices", "local", "--steps", "4", "--batch-size", str(B),
                  "--mode", "sync", "--log", str(log), "--trace", str(tr))
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(log.read_text())
    assert doc["meta"]["devices"] == "local" and len(doc["steps"]) == 4
    check_trace(tr, pl)
    assert "fine-grain compute" not in proc.stdout


def test_train_cli_placement_for_another_model(tmp_path):
    path, _ = compile_minivgg(tmp_path, "coarse")
    doc = json.loads(path.read_text())
    doc["model"]["name"] = "minires"  # a zoo model with the same input, different layers
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc))
    proc = hgpart("train", "--placement", str(other), "--steps", "2")
    assert proc.returncode == 2
    lines = our_stderr(proc)
    assert len(lines) == 1 and lines[0].startswith("error:") and "minires" in lines[0], proc.stderr
    assert "not 'minires'" not in lines[0]  # one model, two layer sets: not "for 'minires' ... not 'minires'"
    assert "Traceback" not in proc.stderr


def test_train_cli_garbage_file(tmp_path):
    bad = tmp_path / "garbage.json"
    bad.write_text("not json{")
    proc = hgpart("train", "--placement", str(bad), "--steps", "2")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and proc.stderr.startswith("error:"), proc.stderr
    assert "garbage.json" in proc.stderr
