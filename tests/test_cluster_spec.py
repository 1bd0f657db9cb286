"""Cluster spec files and TF_CONFIG: every malformed input is one clear HgpartError before TensorFlow connects."""

from __future__ import annotations

import json
import socket

import pytest
from hgpart.runtime import cluster
from hgpart.runtime.devices import open_devices

from hgpart.errors import HgpartError


def _write(tmp_path, text: str):
    p = tmp_path / "spec.json"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"ps": ["h:1"]}', 'no "worker" job'),
        ('{"worker": []}', "non-empty list"),
        ('{"worker": ["localhost"]}', "is not host:port"),
        ('{"worker": ["h:99999"]}', "is not host:port"),
        ('{"worker": ["h:1", "h:1"]}', "same worker address twice"),
        ('{"worker": ["h:1"], "client": ["h:2"]}', "job name 'client'"),
    ],
)
def test_bad_spec_file_is_one_clear_error(tmp_path, text, message):
    p = _write(tmp_path, text)
    with pytest.raises(HgpartError, match=message) as info:
        cluster.open_cluster(f"cluster:{p}", 1)
    assert str(p) in info.value.line()
    assert not cluster._ACTIVE


def test_tf_config_style_and_index_dict_are_accepted():
    tf_config = {"cluster": {"worker": {"1": "b:2", "0": "a:1"}, "ps": ["c:3"]}, "task": {"type": "worker"}}
    assert cluster.parse_cluster_spec(json.dumps(tf_config), "x") == {"worker": ["a:1", "b:2"]}


def test_too_few_workers(tmp_path):
    p = _write(tmp_path, '{"worker": ["127.0.0.1:1"]}')
    with pytest.raises(HgpartError, match="needs 3 workers but the cluster spec lists 1"):
        open_devices(f"cluster:{p}", 3)


def test_missing_file_and_missing_tf_config(tmp_path, monkeypatch):
    with pytest.raises(HgpartError, match="not found"):
        cluster.open_cluster(f"cluster:{tmp_path / 'nope.json'}", 1)
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(HgpartError, match="TF_CONFIG is not set"):
        cluster.open_cluster("", 1)


def test_unreachable_worker_is_reported_without_connecting(tmp_path, monkeypatch):
    with socket.socket() as s:  # a port that was free a moment ago and has no listener now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": [f"127.0.0.1:{port}"]}}))
    with pytest.raises(HgpartError, match=f"not reachable: 127.0.0.1:{port}") as info:
        cluster.open_cluster("TF_CONFIG", 1, timeout=5)
    assert "TF_CONFIG" in info.value.line()
    assert not cluster._ACTIVE
