"""The measured comparison's records are typed (CurvePoint) and the committed measured.json files still load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hgpart.compare.measured import CurvePoint, MeasuredComparison
from hgpart.compare.measured_report import measured_tables
from hgpart.errors import BadFileError

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


@pytest.mark.parametrize("folder", ["compare_runtime_logical", "compare_runtime_local"])
def test_committed_reports_load_as_typed_records_and_round_trip(folder: str) -> None:
    d = json.loads((RESULTS / folder / "measured.json").read_text())
    cmp = MeasuredComparison.from_dict(d)
    ok = [r for r in cmp.runs if r.status == "ok"]
    assert ok and all(isinstance(p, CurvePoint) for r in ok for p in r.curve)
    assert all(r.curve[0].step == 0 and r.curve[0].train_loss is None for r in ok)
    again = cmp.to_dict()  # the file format is unchanged (older files lack fields added since: they get defaults)
    assert [{k: r[k] for k in old} for r, old in zip(again["runs"], d["runs"], strict=True)] == d["runs"]
    assert {k: again[k] for k in d if k != "runs"} == {k: v for k, v in d.items() if k != "runs"}
    assert MeasuredComparison.from_dict(cmp.to_dict()) == cmp
    assert measured_tables(cmp)


def test_a_file_that_is_not_a_comparison_is_a_bad_file() -> None:
    with pytest.raises(BadFileError):
        MeasuredComparison.from_dict({"runs": [{"method": "single"}]})
