"""Layer-wise minivgg placement with m filters of block2_conv2 moved to part 0 (the balance probe in ../README.md).

Run from the repository root: python benchmarks/results/steps_per_call/placements_split/make_split.py OUT_FOLDER
"""
import shutil
import sys

from hgpart.hypergraph import build_hypergraph
from hgpart.models import load_graph
from hgpart.partitioners import partition
from hgpart.placement import Placement
from hgpart.profile import Profile

out = sys.argv[1]
graph = load_graph("minivgg", (32, 32, 3), 10)
prof = Profile.load("profiles/minivgg_32_b32_c1.json")
work = prof.work()
hg = build_hypergraph(graph, work, batch_size=32, grain="coarse")
base = partition(hg, k=2, backend="layerwise", epsilon=0.05, seed=0).parts
for layer, m in [("block2_conv2", 8), ("block2_conv2", 12), ("block2_conv2", 16)]:
    parts = base.copy()
    for b in hg.blocks:
        if b.layer == layer:
            print(b, b.stop - b.start)
            parts[b.start:b.start + m] = 0
    pl = Placement.from_vertex_parts(graph, hg, parts, k=2, method="manual", work=work)
    print(m, pl.recompute_metrics().part_work, pl.recompute_metrics().comm_volume_mib)
    pl.save(f"{out}/minivgg_lw{m}_k2.json")
shutil.copy("benchmarks/results/runtime_throughput_vgg16/epyc_minivgg_compiled/minivgg_single_k1.json", out)
shutil.copy("benchmarks/results/runtime_throughput_vgg16/epyc_minivgg_compiled/minivgg_layerwise_k2.json", out)
