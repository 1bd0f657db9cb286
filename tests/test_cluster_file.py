"""Cluster files: presets load and cite every figure; a defect is one typed error with what, where and fix."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from hgpart.cluster import PRESETS, PortOwner, cluster_from_dict, load_cluster, preset_path
from hgpart.errors import BadFileError, BadOptionError, HgpartError

TOY: dict[str, Any] = {
    "format": "hgpart.cluster/1", "name": "toy", "nodes": 2, "devices_per_node": 2,
    "device": {"kind": "toy", "peak_TFLOPs": 2.0, "efficiency": 0.5, "memory_GiB": 4, "memory_bandwidth_GBps": 10},
    "links": {"intra_node": {"bandwidth_GBps": 100, "latency_us": 1},
              "inter_node": {"bandwidth_GBps": 10, "latency_us": 5}},
}


@pytest.mark.parametrize("name", PRESETS)
def test_presets_load_and_cite_every_figure(name: str) -> None:
    c = load_cluster(name)
    assert c.num_devices >= 4 and c.device.rate_flops
    raw = json.loads(preset_path(name).read_text())  # type: ignore[union-attr]
    for section in [raw["device"], *raw["links"].values()]:
        figures = {k for k, v in section.items() if isinstance(v, (int, float))}
        assert figures <= set(section["sources"]), f"{name}: uncited {figures - set(section['sources'])}"


def test_routes_inside_and_between_nodes() -> None:
    c = cluster_from_dict(copy.deepcopy(TOY))
    inside, across = c.route(0, 1), c.route(1, 2)
    assert inside.ports == ("intra-out:d0", "intra-in:d1") and inside.link.bandwidth == 100e9
    assert across.ports == ("inter-out:n0", "inter-in:n1") and across.link.port_per is PortOwner.NODE
    assert across.seconds(10e9) == pytest.approx(5e-6 + 1.0)
    assert c.device.rate_flops == pytest.approx(1e12)


def _broken(edit: str) -> dict[str, Any]:
    d = copy.deepcopy(TOY)
    if edit == "format":
        d["format"] = "hgpart.cluster/9"
    elif edit == "negative":
        d["links"]["inter_node"]["bandwidth_GBps"] = -1
    elif edit == "no-rate":
        del d["device"]["peak_TFLOPs"], d["device"]["efficiency"]
    elif edit == "half-rate":
        del d["device"]["efficiency"]
    elif edit == "no-intra":
        del d["links"]["intra_node"]
    elif edit == "unknown-key":
        d["device"]["cores"] = 8
    return d


@pytest.mark.parametrize(("edit", "says"), [
    ("format", "not an hgpart cluster file"), ("negative", "malformed at links/inter_node/bandwidth_GBps"),
    ("no-rate", "neither peak_TFLOPs"), ("half-rate", "go together"), ("no-intra", "no links.intra_node"),
    ("unknown-key", "malformed at device"),
])
def test_a_defect_is_one_line(edit: str, says: str) -> None:
    with pytest.raises(BadFileError) as err:
        cluster_from_dict(_broken(edit), where="c.json")
    line = err.value.line()
    assert says in line and "\n" not in line and "c.json" in line and err.value.fix


def test_files_by_path_and_unknown_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no calibration there
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(TOY))
    assert load_cluster(path).name == "toy"
    with pytest.raises(BadOptionError, match="unknown cluster 'dgx9'"):
        load_cluster("dgx9")
    with pytest.raises(BadOptionError, match="run `hgpart calibrate` first"):
        load_cluster("this-machine")
    with pytest.raises(HgpartError, match="does not exist"):
        load_cluster(tmp_path / "missing.json")
