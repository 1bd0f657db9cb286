"""The committed measured profiles still match the zoo models they were made for."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from pathlib import Path

import pytest

from hgpart.layergraph import LayerGraph
from hgpart.models import load_graph, parse_input
from hgpart.profile import Profile, default_profile_path

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = [("vgg16", "224"), ("vgg16", "32"), ("resnet18", "32"), ("minivgg", "32"), ("minires", "32"),
             ("lenet5", "32x32x1")]


@pytest.mark.parametrize(("model", "size"), COMMITTED)
def test_committed_profile_matches_zoo_model(model: str, size: str) -> None:
    graph = load_graph(model, input_shape=parse_input(size))
    path = ROOT / default_profile_path(graph, 32)
    prof = Profile.load(path)
    prof.check(graph, path=str(path))
    assert prof.mode == "measured" and prof.batch_size == 32 and prof.repeats >= 3
    assert LayerGraph.from_dict(prof.graph).fingerprint() == graph.fingerprint()
    assert [c.name for c in prof.layers] == [x.name for x in graph.layers]
    work = prof.work()
    assert all(work[x.name] > 0 for x in graph.layers if x.kind in ("conv2d", "dense"))
    assert prof.machine["cpu_model"] and prof.machine["tensorflow"]
