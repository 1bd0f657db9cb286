"""The measured comparison (hgpart.compare.measured): writes its report; a failing strategy is reported, not raised."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from hgpart.runtime.devices import open_devices
from hgpart.runtime.strategy import Strategy

from hgpart.compare import measured
from hgpart.compare.measured import run_measured
from hgpart.compare.measured_report import measured_tables, write_measured
from hgpart.errors import BadOptionError
from hgpart.placement import load_placement

QUICK = dict(input_shape=(16, 16, 3), steps=2, eval_n=32, evals_per_epoch=1, progress=False)


def test_quick_comparison_writes_every_report_file(tmp_path) -> None:
    ds = open_devices("logical", 2)
    methods = ["single", "coarse-async", "sync-dp", "async-dp-dps"]
    cmp = run_measured("minivgg", device_set=ds, batch_sizes=[8], methods=methods,
                       trace_dir=tmp_path / "rep" / "traces", placement_dir=tmp_path / "pl", **QUICK)
    assert [r.status for r in cmp.runs] == ["ok"] * 4, [r.reason for r in cmp.runs]
    # the placement a model-parallel run trained is kept for the simulator; the other strategies have none
    kept = {r.method: r.placement_path for r in cmp.runs}
    assert kept["coarse-async"].endswith("coarse-async_bs8.json") and not kept["single"] and not kept["sync-dp"]
    pl = load_placement(kept["coarse-async"])
    assert pl.k == 2 and pl.grain == "coarse" and pl.graph.name == "minivgg"
    for r in cmp.runs:
        assert r.steps == 2 and r.epoch_seconds > 0 and r.images_per_s > 0
        assert len(r.curve) == 2 and 0.0 <= r.curve[-1].accuracy <= 1.0
    by = {r.method: r for r in cmp.runs}
    assert by["single"].comm_bytes_per_step == 0
    assert by["coarse-async"].comm_bytes_per_step > 0 and by["sync-dp"].comm_bytes_per_step > 0
    paths = write_measured(cmp, tmp_path / "rep")
    names = {p.name for p in paths}
    assert {"report.md", "runs.csv", "curves.csv", "ratios.csv", "measured.json", "curves_bs8.png"} <= names
    rows = list(csv.DictReader((tmp_path / "rep" / "runs.csv").open()))
    assert [r["method"] for r in rows] == methods
    ratios = list(csv.DictReader((tmp_path / "rep" / "ratios.csv").open()))
    assert {r["method"] for r in ratios} == {"single", "sync-dp", "async-dp-dps"}
    data = json.loads((tmp_path / "rep" / "measured.json").read_text())
    assert data["k"] == 2 and data["machine"]["cores_available"] >= 1
    back = measured.MeasuredComparison.from_dict(data)
    assert back.runs == cmp.runs and [t.rows for t in measured_tables(back)] == [t.rows for t in measured_tables(cmp)]
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Per-epoch training time" in md and "Time to 90% training accuracy" in md
    # per-device utilisation from the profiler trace: both devices of the coarse placement ran ops
    assert "Device busy % in traced steps" in md
    coarse = next(r for r in rows if r["method"] == "coarse-async")
    busy = [float(b) for b in coarse["device_busy"].split(";")]
    assert len(busy) == 2 and all(0.0 < b <= 1.0 for b in busy), coarse
    trace = json.loads(open(coarse["trace_path"]).read())
    assert trace["otherData"]["device_busy"] == pytest.approx(busy, abs=1e-3)
    assert {e["pid"] for e in trace["traceEvents"] if e["ph"] == "X"} == {0, 1}
    # one device: device 1 idle; every traced run says what it covered
    assert by["single"].device_busy[0] > 0 and by["single"].device_busy[1] == 0
    assert all(r.trace_note for r in cmp.runs)


def test_failing_strategies_are_reported_not_raised(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = open_devices("logical", 4)
    real = measured._compile

    def broken(strategy: Strategy, *args, **kwargs):  # noqa: ANN202
        if strategy.name == "async-dp-1ps":
            raise RuntimeError("injected failure")
        return real(strategy, *args, **kwargs)

    monkeypatch.setattr(measured, "_compile", broken)
    # batch 6 over K = 4: sync DP cannot split it; the injected error stops async-dp-1ps; single still runs
    cmp = run_measured("minivgg", device_set=ds, batch_sizes=[6], methods=["single", "sync-dp", "async-dp-1ps"],
                       **QUICK)
    st = {r.method: r for r in cmp.runs}
    assert st["single"].status == "ok"
    assert st["sync-dp"].status == "failed" and "divisible" in st["sync-dp"].reason
    assert st["async-dp-1ps"].status == "failed" and "RuntimeError: injected failure" in st["async-dp-1ps"].reason
    titles = [t.title for t in measured_tables(cmp)]
    assert "Strategies that could not run" in titles
    write_measured(cmp, tmp_path / "rep", plots=False)
    assert "injected failure" in (tmp_path / "rep" / "report.md").read_text()


def test_unknown_method_is_a_clear_error() -> None:
    from hgpart.errors import HgpartError

    ds = open_devices("logical", 2)
    with pytest.raises(HgpartError, match="unknown method"):
        run_measured("minivgg", device_set=ds, batch_sizes=[8], methods=["warp-drive"], **QUICK)


def test_model_parallelism_runs_its_steps_as_hgpart_train_does(tmp_path) -> None:
    """compare-run trains model parallelism through the same pipeline choice as ``hgpart train``: with
    ``--pipeline stages`` a layer-wise placement's async and sync runs go through the stage pipeline, with ``graph``
    through one function per step; each run says which, and the report shows it."""
    ds = open_devices("logical", 2)
    methods = ["layerwise-async", "layerwise-sync"]
    staged = run_measured("minivgg", device_set=ds, batch_sizes=[8], methods=methods, pipeline="stages",
                          trace_dir=tmp_path / "traces", **QUICK)
    assert [r.status for r in staged.runs] == ["ok"] * 2, [r.reason for r in staged.runs]
    for r in staged.runs:
        assert r.pipeline.startswith("stages (") and r.pipeline.endswith("--pipeline stages"), r.pipeline
        assert r.steps == 2 and r.images_per_s > 0 and np.isfinite(r.curve[-1].train_loss)
        assert len(r.slot_busy) == 1 and r.slot_busy[0] > 0  # the stage pipeline's records, not K slot threads
        # traced as hgpart train --trace traces: the whole-step graph's ops, mapped to devices
        assert len(r.device_busy) == 2 and min(r.device_busy) > 0 and r.trace_note.startswith("as one function")
    graph = run_measured("minivgg", device_set=ds, batch_sizes=[8], methods=methods, pipeline="graph", **QUICK)
    assert graph.runs[0].status == "ok" and graph.runs[0].pipeline == \
        "graph (one function per step), 2 batches in flight: --pipeline graph"
    assert staged.pipeline == "stages" and graph.pipeline == "graph"
    # async: the runtime's default in flight (one per stage: the layer-wise placement has two; K for the graph);
    # sync: one mini-batch of K micro-batches at a time
    assert [r.inflight for r in staged.runs] == [2, 1] and [r.inflight for r in graph.runs] == [2, 1]
    assert len(graph.runs[0].slot_busy) == 2 and min(graph.runs[0].slot_busy) > 0  # async: K slot threads
    # sync: the same seed, data order and initial weights, so both ways train the same two steps
    assert staged.runs[1].curve[1].train_loss == pytest.approx(graph.runs[1].curve[1].train_loss, rel=1e-3)
    md = {t.title: t.rows for t in measured_tables(staged)}
    assert md["How model parallelism's steps ran (--pipeline stages)"][0][:2] == ["layerwise-async", "8"]
    with pytest.raises(BadOptionError, match="pipeline"):
        run_measured("minivgg", device_set=ds, batch_sizes=[8], methods=methods, pipeline="warp", **QUICK)
