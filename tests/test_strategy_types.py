"""Strategies as typed values (hgpart.runtime.strategy): one table, read by field, never by splitting names."""

from __future__ import annotations

import pytest
from hgpart.runtime.strategy import STRATEGIES, Parallelism, ParamSync, PlacementKind, Schedule, Strategy

from hgpart.errors import BadOptionError

#: the names the CLI, measured.json and the committed reports use (unchanged)
LEGACY = ("single", "layerwise-async", "layerwise-sync", "coarse-async", "coarse-sync", "fine-async", "fine-sync",
          "sync-dp", "sync-dp-mirrored", "async-dp-1ps", "async-dp-dps")


def test_the_table_keeps_every_name_and_its_order() -> None:
    from hgpart.compare.measured import DP_METHODS, METHODS, MP_METHODS, REFERENCE_METHOD

    assert METHODS == LEGACY and tuple(STRATEGIES) == LEGACY
    assert MP_METHODS == LEGACY[1:7] and DP_METHODS == LEGACY[7:]
    assert Strategy.parse(REFERENCE_METHOD).placement is PlacementKind.COARSE


@pytest.mark.parametrize("name", LEGACY)
def test_fields_agree_with_what_each_strategy_is(name: str) -> None:
    s = Strategy.parse(name)
    assert s.name == name and Strategy.parse(s) is s
    if s.parallelism is Parallelism.MODEL:
        assert s.placement is not None and s.param_sync is None
        assert s.schedule is (Schedule.ASYNC if name.endswith("async") else Schedule.SYNC)
        assert s.placement.grain == ("fine" if name.startswith("fine") else "coarse")
    else:
        assert s.placement is None and s.param_sync is not None
        assert s.is_async == name.startswith("async")


def test_unknown_names_are_a_bad_option_carrying_the_value() -> None:
    # "coarse-async-x" would have compiled as coarse-async when the name was split at "-"
    for bad in ("coarse-async-x", "coarse", "dp"):
        with pytest.raises(BadOptionError) as info:
            Strategy.parse(bad)
        assert info.value.value == bad and info.value.option == "--methods"


def test_data_parallel_dispatch_reads_the_fields() -> None:
    assert Strategy.parse("async-dp-1ps").param_sync is ParamSync.ONE_PS
    assert Strategy.parse("async-dp-dps").param_sync is ParamSync.DISTRIBUTED_PS
    assert Strategy.parse("sync-dp-mirrored").param_sync is ParamSync.MIRRORED
    assert Strategy.parse("single").parallelism is Parallelism.SINGLE


def test_make_strategy_refuses_model_parallelism_before_building_anything() -> None:
    from hgpart.runtime.dataparallel import DP_STRATEGIES, make_strategy

    assert DP_STRATEGIES == ("single", *LEGACY[7:])

    class _Devices:
        devices = ["/job:localhost/replica:0/task:0/device:CPU:0"]
        host = devices[0]

    with pytest.raises(BadOptionError, match="model parallelism"):
        make_strategy("coarse-async", None, _Devices(), None, batch_size=8)
    with pytest.raises(BadOptionError):
        make_strategy("sync-dp-ring", None, _Devices(), None, batch_size=8)
