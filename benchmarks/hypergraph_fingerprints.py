"""Structural fingerprints of the hypergraphs of a fixed set of models, to prove a refactor changes nothing.

Usage::

    python benchmarks/hypergraph_fingerprints.py > before.txt   # on the old code
    python benchmarks/hypergraph_fingerprints.py > after.txt    # on the new code
    diff before.txt after.txt                                   # empty: byte-identical hypergraphs

Per (model, grain): vertices, nets, pins, a SHA-256 of every array of the hypergraph (pins, costs, roots,
kinds, weights, parameters, activation bytes) and the km1 bytes of the layer-wise placement at K = 4.
"""

from __future__ import annotations

import hashlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from hgpart.hypergraph import Hypergraph, build_hypergraph  # noqa: E402
from hgpart.metrics import km1_bytes  # noqa: E402
from hgpart.models import load_graph, parse_input  # noqa: E402
from hgpart.partitioners import partition  # noqa: E402
from hgpart.profile import analytic_profile  # noqa: E402

MODELS = [("vgg16", "224"), ("resnet18", "224"), ("minires", "32"), ("minivgg", "32"),
          ("keras:MobileNetV2", "32"), ("keras:DenseNet121", "32"), ("keras:InceptionV3", "75")]


def digest(hg: Hypergraph) -> str:
    h = hashlib.sha256()
    for arr in (hg.net_ptr, hg.net_pins, hg.net_cost, hg.net_root, hg.net_kind, hg.vertex_weight,
                hg.vertex_params, hg.vertex_act_bytes):
        h.update(arr.tobytes())
    for b in hg.blocks:
        h.update(repr((b.layer, b.role, b.start, b.extent, b.group)).encode())
    return h.hexdigest()[:16]


def main(models: list[tuple[str, str]]) -> None:
    for spec, size in models:
        graph = load_graph(spec, input_shape=parse_input(size))
        work = analytic_profile(graph, 32).work()
        for grain in ("coarse", "fine"):
            hg = build_hypergraph(graph, work, batch_size=32, grain=grain)  # type: ignore[arg-type]
            res = partition(hg, k=4, backend="layerwise", seed=0)
            print(f"{spec:20s} {size:>4s} {grain:6s} V={hg.num_vertices} N={hg.num_nets} P={hg.num_pins} "
                  f"sha={digest(hg)} km1_layerwise_k4={km1_bytes(hg, res.parts, 4):.1f}", flush=True)


if __name__ == "__main__":
    main([m for m in MODELS if len(sys.argv) < 2 or m[0] in sys.argv[1:]])
