"""The one step driver (hgpart.runtime.pipeline.run_slots) and its StepRecord, with plain-Python step functions.

Model parallelism (train.run_pipeline) and data parallelism (dataparallel.run_slots) both go through it, so the
records, the error handling and the step logs are the same for every strategy.
"""

from __future__ import annotations

import csv
import importlib
import json
import threading
import time

import numpy as np
import pytest
from hgpart.runtime import dataparallel
from hgpart.runtime.pipeline import StepRecord, run_slots, shuffled_batches, stacked_tasks

from hgpart.errors import BadOptionError, DeviceError

train = importlib.import_module("hgpart.runtime.train")  # the module (the package attribute is the function)


def _sleepy(loss: float, seconds: float = 0.002):  # noqa: ANN202 - a step function
    def step(x: np.ndarray, y: np.ndarray) -> float:
        time.sleep(seconds)
        return loss + float(np.sum(y)) * 0.0

    return step


def test_every_task_runs_once_and_records_are_in_finishing_order() -> None:
    xs, ys = np.zeros((10, 4, 2)), np.zeros((10, 4), np.int32)
    recs = run_slots([_sleepy(1.0), _sleepy(2.0)], 10, stacked_tasks(xs, ys), images_per_task=4)
    assert all(isinstance(r, StepRecord) for r in recs)
    assert sorted(r.step for r in recs) == list(range(10))
    assert [r.end_s for r in recs] == sorted(r.end_s for r in recs)
    assert {r.slot for r in recs} <= {0, 1} and all(r.loss == (1.0 if r.slot == 0 else 2.0) for r in recs)
    for done, r in enumerate(recs, start=1):  # images of the tasks finished so far over the time since start
        assert r.batch_s == pytest.approx(r.end_s - r.start_s) and r.batch_s > 0
        assert r.images_per_s == pytest.approx(done * 4 / r.end_s)


def test_on_step_sees_each_record_under_the_lock() -> None:
    seen: list[StepRecord] = []
    recs = run_slots([_sleepy(0.5)] * 3, 7, lambda i: (np.zeros(1), np.zeros(1)), on_step=seen.append)
    assert sorted(seen, key=lambda r: r.end_s) == recs


def test_a_failing_step_stops_the_run_as_one_device_error() -> None:
    calls = []
    lock = threading.Lock()

    def step(x: np.ndarray, y: np.ndarray) -> float:
        with lock:
            calls.append(1)
        raise RuntimeError("")  # an exception without a message must not turn into an IndexError

    with pytest.raises(DeviceError) as info:
        run_slots([step, step], 50, lambda i: (np.zeros(1), np.zeros(1)), fix="check the workers")
    assert info.value.cause == "RuntimeError" and info.value.fix == "check the workers"
    assert len(calls) <= 2  # the first failure stops every thread


def test_an_hgpart_error_in_a_step_passes_through_with_its_type() -> None:
    def step(x: np.ndarray, y: np.ndarray) -> float:
        raise BadOptionError("bad batch", value=3)

    with pytest.raises(BadOptionError) as info:
        run_slots([step], 2, lambda i: (np.zeros(1), np.zeros(1)))
    assert info.value.value == 3


@pytest.mark.parametrize("where", ["loss", "on_step"])
def test_a_failure_after_the_step_stops_the_run_too(where: str) -> None:
    """A step whose result is no number, or an on_step callback that raises, fails the run; before, the slot's
    thread died with a traceback on stderr and run_slots returned the records it had, as if the run had ended."""
    def step(x: np.ndarray, y: np.ndarray) -> object:
        return (1.0, 0.5) if where == "loss" else 1.0

    def on_step(rec: StepRecord) -> None:
        if rec.step >= 1:
            raise KeyError("callback")

    with pytest.raises(DeviceError) as info:
        run_slots([step, step], 6, lambda i: (np.zeros(1), np.zeros(1)), on_step=on_step)
    assert info.value.cause == ("TypeError" if where == "loss" else "KeyError")


def test_shuffled_batches_wrap_one_seeded_permutation() -> None:
    x, y = np.arange(10.0), np.arange(10)
    task = shuffled_batches(x, y, batch_size=4, seed=3)
    seen = np.concatenate([task(i)[1] for i in range(5)])  # 20 images: the permutation twice
    assert sorted(seen[:10]) == list(range(10)) and list(seen[:10]) == list(seen[10:])


def test_model_and_data_parallel_entry_points_share_the_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    from hgpart.runtime import pipeline

    used: list[str] = []
    real = pipeline.run_slots

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        used.append(kwargs.get("thread_name", "hgpart-slot"))
        return real(*args, **kwargs)

    monkeypatch.setattr(train, "run_slots", spy)
    monkeypatch.setattr(dataparallel, "drive", spy)
    x, y = np.zeros((12, 3), np.float32), np.zeros(12, np.int32)
    mp = train.run_pipeline(_sleepy(1.0), x, y, steps=5, batch_size=3, inflight=2)
    dp = dataparallel.run_slots([_sleepy(1.0)] * 2, x.reshape(4, 3, 3), y.reshape(4, 3))
    assert used == ["hgpart-slot", "hgpart-dp"]
    assert [type(r) for r in mp + dp] == [StepRecord] * 9
    assert mp[-1].images_per_s == pytest.approx(5 * 3 / mp[-1].end_s)
    assert dp[-1].images_per_s == pytest.approx(4 * 3 / dp[-1].end_s)


def test_step_logs_and_pipeline_trace_are_written_from_records(tmp_path) -> None:
    recs = [StepRecord(step=i, slot=i % 2, loss=1.0 / (i + 1), start_s=0.1 * i, end_s=0.1 * i + 0.05,
                       batch_s=0.05, images_per_s=100.0) for i in range(3)]
    train._write_log(tmp_path / "log.csv", recs, {"mode": "async"})
    rows = list(csv.DictReader((tmp_path / "log.csv").open()))
    assert list(rows[0]) == list(train.LOG_COLUMNS) and list(rows[0])[:7] == list(StepRecord.COLUMNS)
    assert [float(r["loss"]) for r in rows] == [r.loss for r in recs]
    train._write_log(tmp_path / "log.json", recs, {"mode": "async"})
    steps = json.loads((tmp_path / "log.json").read_text())["steps"]
    assert [{k: s[k] for k in StepRecord.COLUMNS} for s in steps] == [r.to_dict() for r in recs]
    path = train._write_trace(tmp_path, recs, {"mode": "async", "devices": "logical"})
    spans = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
    assert [(e["tid"], e["name"], e["ts"]) for e in spans] == [(r.slot, f"batch {r.step}", r.start_s * 1e6)
                                                                for r in recs]
