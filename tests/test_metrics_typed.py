"""PartitionMetrics crosses the compare stage as a dataclass; its JSON form is unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from hgtoys import toy_network, unit_work

from hgpart.compare.static import _METRIC_KEEP, StaticResult
from hgpart.errors import BadFileError, BadOptionError, ModelMismatchError
from hgpart.hypergraph import Hypergraph, build_hypergraph
from hgpart.metrics import SCALAR_COLUMNS, PartitionMetrics, partition_metrics


def toy_hypergraph() -> Hypergraph:
    g = toy_network()
    return build_hypergraph(g, unit_work(g), batch_size=2, grain="coarse")


def _metrics() -> PartitionMetrics:
    hg = toy_hypergraph()
    return partition_metrics(hg, np.arange(hg.num_vertices) % 2, 2)


def test_scalar_columns_by_name() -> None:
    m = _metrics()
    assert m.scalar("comm_volume_mib") == m.comm_volume_mib and m.scalar("cut_nets") == float(m.cut_nets)
    assert "part_work" not in SCALAR_COLUMNS and "optimizer" not in SCALAR_COLUMNS
    with pytest.raises(KeyError):
        m.scalar("part_work")


def test_dict_round_trip_and_a_bad_dict_is_a_bad_file() -> None:
    m = _metrics()
    assert PartitionMetrics.from_dict(m.to_dict()) == m
    assert list(m.to_dict(["k", "cut_nets"])) == ["k", "cut_nets"]
    with pytest.raises(BadFileError):
        PartitionMetrics.from_dict({"k": 2})


def test_static_result_json_keeps_the_same_metric_keys() -> None:
    m = _metrics()
    d = StaticResult("hypergraph", "coarse", 2, 0.1, "ok", metrics=m).to_dict()
    assert list(d["metrics"]) == list(_METRIC_KEEP) and d["metrics"]["comm_volume_mib"] == m.comm_volume_mib
    assert StaticResult("layerwise", "coarse", 9, None, "not possible").to_dict()["metrics"] is None


def test_metric_errors_are_typed() -> None:
    hg = toy_hypergraph()
    with pytest.raises(ModelMismatchError) as info:
        partition_metrics(hg, np.zeros(hg.num_vertices + 1, np.int64), 2)
    assert info.value.expected == hg.num_vertices
    with pytest.raises(BadOptionError):
        partition_metrics(hg, np.zeros(hg.num_vertices, np.int64), 2, optimizer="rmsprop")


def test_a_placement_gives_its_recorded_metrics_typed() -> None:
    from hgpart.placement import Placement

    g = toy_network()
    hg = build_hypergraph(g, unit_work(g), batch_size=2, grain="coarse")
    pl = Placement.from_vertex_parts(g, hg, np.arange(hg.num_vertices) % 2, k=2, method="hypergraph",
                                     work=unit_work(g))
    stored = pl.stored_metrics()
    assert isinstance(stored, PartitionMetrics) and stored == pl.recompute_metrics()
    pl.metrics = None
    assert pl.stored_metrics() is None
