"""The training mode and the optimizer are parsed once into enums at the boundary; code below compares members."""

from __future__ import annotations

import pytest
from hgpart.runtime.step import OPTIMIZERS, Optimizer, OptimizerSpec
from hgpart.runtime.strategy import Schedule
from hgpart.runtime.train import MODES, check_settings

from hgpart.errors import BadOptionError, HgpartError
from hgpart.hypergraph import build_hypergraph
from hgpart.models import load_graph
from hgpart.partitioners import partition
from hgpart.placement import Placement
from hgpart.profile import analytic_profile


def _placement() -> Placement:
    graph = load_graph("minivgg", (16, 16, 3), 10)
    prof = analytic_profile(graph, 8)
    hg = build_hypergraph(graph, prof.work(), batch_size=8, grain="coarse")
    res = partition(hg, k=2, backend="layerwise", seed=0)
    return Placement.from_vertex_parts(graph, hg, res.parts, k=2, method="layerwise", work=prof.work())


def _settings(pl: Placement, mode: str | Schedule, batch_size: int = 8, inflight: int | None = None) -> Schedule:
    run = check_settings(pl, batch_size=batch_size, steps=1, epochs=None, mode=mode, optimizer="adam", lr=1e-3,
                         dataset="synthetic", inflight=inflight)
    return run.mode


def test_mode_strings_are_parsed_into_the_schedule_enum() -> None:
    pl = _placement()
    assert _settings(pl, "async") is Schedule.ASYNC
    assert _settings(pl, "sync") is Schedule.SYNC
    assert _settings(pl, Schedule.SYNC) is Schedule.SYNC
    assert MODES == ("async", "sync")


def test_an_unknown_mode_is_a_bad_option_naming_the_choices() -> None:
    with pytest.raises(BadOptionError) as info:
        _settings(_placement(), "pipelined")
    assert info.value.option == "--mode" and info.value.value == "pipelined"
    assert "async" in (info.value.fix or "") and "sync" in (info.value.fix or "")


def test_sync_mode_checks_the_micro_batches_divide_the_batch() -> None:
    pl = _placement()
    assert _settings(pl, "async", batch_size=9, inflight=2) is Schedule.ASYNC  # async: no micro-batches
    with pytest.raises(HgpartError, match="micro-batches"):
        _settings(pl, "sync", batch_size=9, inflight=2)


def test_optimizer_names_map_to_one_enum_with_its_slot_count() -> None:
    assert OPTIMIZERS == ("momentum", "adam")
    assert OptimizerSpec("momentum", 0.1).kind is Optimizer.MOMENTUM
    assert OptimizerSpec("adam", 1e-3).kind is Optimizer.ADAM
    assert [o.slot_count for o in Optimizer] == [1, 2]
    assert OptimizerSpec("adam").name == "adam"  # the name the logs and JSON files carry stays a string
    with pytest.raises(HgpartError, match="unknown optimizer"):
        OptimizerSpec("rmsprop")
