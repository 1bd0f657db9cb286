"""A static result's thesis cells and certificate are dataclasses in memory and the same JSON objects on disk."""

from __future__ import annotations

import math

from hgpart.compare.report import _bound_cells
from hgpart.compare.static import StaticResult, ThesisCell
from hgpart.partitioners.certificate import Certificate


def test_thesis_cells_and_certificate_are_written_as_plain_objects() -> None:
    cert = Certificate(status="ok", lower_bound_bytes=2.0 * 2**20, gap=0.25, epsilon=0.1, seconds=0.5, time_limit=10.0)
    r = StaticResult("hypergraph", "coarse", 2, 0.1, "ok",
                     thesis={"comm_volume_mib": ThesisCell(value=12.5, citation="Eserol 2019, Table 5.3")},
                     certificate=cert)
    d = r.to_dict()
    assert d["thesis"] == {"comm_volume_mib": {"value": 12.5, "citation": "Eserol 2019, Table 5.3"}}
    assert d["certificate"] == {"status": "ok", "reason": "", "lower_bound_bytes": 2.0 * 2**20, "gap": 0.25,
                                "epsilon": 0.1, "seconds": 0.5, "time_limit": 10.0}
    assert _bound_cells(r) == ["2.0", "25.0%"]


def test_no_certificate_is_an_empty_object_and_an_infinite_gap_reads_inf() -> None:
    fine = StaticResult("hypergraph", "fine", 2, 0.1, "ok")
    assert fine.certificate is None and fine.to_dict()["certificate"] == {} and fine.to_dict()["thesis"] == {}
    assert _bound_cells(fine) == ["-", "-"]
    zero = StaticResult("horizontal", "coarse", 2, None, "ok",
                        certificate=Certificate(status="ok", lower_bound_bytes=0.0, gap=math.inf))
    assert zero.to_dict()["certificate"]["gap"] is None  # JSON has no infinity
    assert _bound_cells(zero) == ["0.0", "inf"]
