"""Two-part placements of the zoo's small models at 16x16, from their analytic profile: what the runtime tests train.

Kept apart from the test modules because it opens no devices: a child process that opens its own local workers
(``tests/test_multistep_local.py``) can import it before any eager context exists.
"""

from __future__ import annotations

from hgpart.hypergraph import build_hypergraph
from hgpart.models import load_graph
from hgpart.partitioners import partition
from hgpart.placement import Placement
from hgpart.profile import analytic_profile

B = 8


def two_part_placement(model: str, backend: str = "layerwise", grain: str = "coarse") -> Placement:
    """``model`` (16x16x3, 10 classes) partitioned over 2 parts by ``backend`` at batch ``B``."""
    graph = load_graph(model, (16, 16, 3), 10)
    prof = analytic_profile(graph, B)
    hg = build_hypergraph(graph, prof.work(), batch_size=B, grain=grain)
    res = partition(hg, k=2, backend=backend, epsilon=0.05, seed=0)
    method = "layerwise" if backend == "layerwise" else "hypergraph"
    return Placement.from_vertex_parts(graph, hg, res.parts, k=2, method=method, work=prof.work())
