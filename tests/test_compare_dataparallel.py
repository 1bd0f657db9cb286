"""Data-parallel cost model against the thesis's Table 5.14, and the thesis data transcription."""

from __future__ import annotations

import math

import pytest

from hgpart.compare.dataparallel import GIB, data_parallel, dp_step_bytes, mp_epoch_bytes
from hgpart.compare.thesis import load_thesis, thesis_applies, thesis_value
from hgpart.errors import HgpartError

P_VGG16 = 138_357_544


@pytest.mark.parametrize("row", load_thesis()["tables"]["5.14"]["rows"], ids=lambda r: f"N{r['n']}-BS{r['batch_size']}")
def test_data_parallel_reproduces_table_5_14(row: dict) -> None:
    dp = data_parallel(params=P_VGG16, n=row["n"], batch_size=row["batch_size"], images=64000)
    # the thesis prints GiB (2**30 bytes) as "GB", truncated
    assert math.floor(dp.epoch_gib) == row["data_parallelism_gb"]


def test_data_parallel_step_and_example() -> None:
    assert dp_step_bytes(P_VGG16, 2) == 2 * 1 * P_VGG16 * 4
    dp = data_parallel(params=P_VGG16, n=2, batch_size=32, images=64000)
    assert dp.steps == 2000 and dp.epoch_gib == pytest.approx(2061.688, abs=1e-3)


def test_hypergraph_epoch_volume_matches_thesis_and_is_batch_independent() -> None:
    mib = 2**20
    # Table A.7/A.8 coarse N=2: 27.5 MiB forward at batch 32 -> Table 5.14's 107 GB per epoch
    v = mp_epoch_bytes(27.5 * mib, at_batch=32, batch_size=32, images=64000) / GIB
    assert math.floor(v) == 107
    for bs in (16, 64):
        assert mp_epoch_bytes(27.5 * mib, at_batch=32, batch_size=bs, images=64000) / GIB == pytest.approx(v)


def test_memory_convention_is_replica_at_b_over_n() -> None:
    dp = data_parallel(params=1000, n=4, batch_size=32, images=100, activation_bytes=3200.0, activation_batch=32,
                       optimizer="adam")
    assert dp.param_bytes == 4000 and dp.optimizer_bytes == 8000
    assert dp.activation_bytes == pytest.approx(3200.0 / 4)  # 8 samples per replica
    assert dp.memory_bytes == pytest.approx(4000 + 8000 + 800)
    with pytest.raises(HgpartError, match="smaller than N"):
        data_parallel(params=1000, n=64, batch_size=32, images=100)


def test_thesis_transcription_spot_checks() -> None:
    t = load_thesis()["tables"]
    assert t["5.10"]["rows"]["4"]["comm_volume_mib"] == 61
    assert t["5.4"]["rows"]["128"]["comm_volume_mib"] == 35707
    assert t["5.11"]["rows"]["32"]["max_work"] == 1552
    assert t["A.11"]["rows"]["2"]["comm_volume_mib"] == 15.3
    assert t["A.3"]["rows"]["128"]["max_times_n"] == 77634
    assert t["5.13"]["total_parameters"] == P_VGG16
    biases = 2 * 64 + 2 * 128 + 3 * 256 + 6 * 512 + 2 * 4096 + 1000
    assert sum(r["parameters"] for r in t["5.13"]["layers"]) + biases == P_VGG16  # rows printed without biases
    for key in ("5.7", "5.9", "A.1", "A.2"):
        assert t[key]["missing"] is True and "rows" not in t[key]
    for tab in t.values():
        assert tab["citation"].startswith("Eserol 2019, Table ")


def test_thesis_lookup() -> None:
    assert thesis_value("hypergraph", "coarse", 0.1, 8, "comm_volume_mib") == (298.0, "Eserol 2019, Table 5.10")
    assert thesis_value("hypergraph", "fine", 0.2, 2, "comm_volume_mib") == (24.5, "Eserol 2019, Table A.12")
    assert thesis_value("hypergraph", "coarse", 0.1, 8, "max_work") is None  # Table 5.9 is lost
    assert thesis_value("layerwise", "coarse", None, 32, "comm_volume_mib") is None
    assert thesis_value("layerwise", "coarse", None, 2, "max_over_avg") is None  # lost cell stays None
    assert thesis_applies("vgg16", (224, 224, 3), 32)
    assert not thesis_applies("vgg16", (224, 224, 3), 64) and not thesis_applies("vgg16", (32, 32, 3), 32)
