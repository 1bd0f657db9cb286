"""Compile a placement for the zoo's minivgg (analytic profile, Mt-KaHyPar) and train it on 2 logical devices.

Run:  python examples/train_placement.py
"""

from __future__ import annotations

from hgpart.runtime import open_devices

K, B = 2, 16
devices = open_devices("logical", K)  # first: TensorFlow must not be initialised yet

from hgpart.runtime.train import train  # noqa: E402

from hgpart.hypergraph import build_hypergraph  # noqa: E402
from hgpart.models import load_graph  # noqa: E402
from hgpart.partitioners import partition  # noqa: E402
from hgpart.placement import Placement  # noqa: E402
from hgpart.profile import analytic_profile  # noqa: E402

graph = load_graph("minivgg", (16, 16, 3), 10)
profile = analytic_profile(graph, B)
hg = build_hypergraph(graph, profile.work(), batch_size=B, grain="coarse")
result = partition(hg, k=K, backend="mtkahypar", epsilon=0.05, seed=0)
pl = Placement.from_vertex_parts(graph, hg, result.parts, k=K, method="hypergraph", work=profile.work())
path = pl.save("/tmp/minivgg_coarse_k2.json")
print(f"placement {path}: Comm. Vol {pl.recompute_metrics().comm_volume_mib:.4f} MiB per forward pass")

for mode in ("async", "sync"):
    res = train(path, device_set=devices, batch_size=B, steps=40, mode=mode, data="digits", lr=1e-3)
    c = res.traffic.check(res.predicted_fwd_bytes)
    print(f"{mode}: {res.images_per_s:.0f} img/s, loss {res.losses[0]:.3f} -> {res.losses[-1]:.3f}, "
          f"bytes/step measured {c['model']} vs predicted {c['predicted_forward'] + c['predicted_backward']:.0f}")
devices.close()
