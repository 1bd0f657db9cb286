"""Train a placement with Keras's verbs: PartitionedModel.fit / evaluate / predict / save, on 2 logical devices.

Run:  python examples/fit_keras_style.py

Compiles minivgg (analytic profile, Mt-KaHyPar, K = 2), then trains the partitioned model on scikit-learn's
digits as a Keras user would train the Keras model: ``fit`` with a validation split returns a History,
``evaluate`` gives ``[loss, accuracy]``, ``to_keras`` / ``save`` give the Keras model with the trained weights.
"""

from __future__ import annotations

import numpy as np
from hgpart.runtime import PartitionedModel, open_devices

K, B = 2, 32
devices = open_devices("logical", K)  # first: TensorFlow must not be initialised yet

from sklearn.datasets import load_digits  # noqa: E402

from hgpart.hypergraph import build_hypergraph  # noqa: E402
from hgpart.models import load_graph  # noqa: E402
from hgpart.partitioners import partition  # noqa: E402
from hgpart.placement import Placement  # noqa: E402
from hgpart.profile import analytic_profile  # noqa: E402

graph = load_graph("minivgg", (32, 32, 3), 10)
profile = analytic_profile(graph, B)
hg = build_hypergraph(graph, profile.work(), batch_size=B, grain="coarse")
parts = partition(hg, k=K, backend="mtkahypar", epsilon=0.05, seed=0).parts
placement = Placement.from_vertex_parts(graph, hg, parts, k=K, method="hypergraph", work=profile.work())

digits = load_digits()
order = np.random.default_rng(0).permutation(len(digits.target))  # validation_split keeps the last samples
x = np.repeat(np.kron(digits.images / 16.0, np.ones((4, 4)))[..., None], 3, axis=-1).astype(np.float32)[order]
y = digits.target.astype(np.int32)[order]

with PartitionedModel.from_placement(placement, device_set=devices, seed=0) as pm:
    history = pm.fit(x, y, epochs=3, batch_size=B, validation_split=0.2, mode="async")
    print({k: [round(v, 4) for v in vals] for k, vals in history.history.items()})
    loss, acc = pm.evaluate(x[-359:], y[-359:])
    print(f"evaluate: loss {loss:.4f} accuracy {acc:.4f}; predict: {pm.predict(x[:3]).argmax(-1)} vs labels {y[:3]}")
    print(f"saved {pm.save('/tmp/minivgg_digits.keras')}")
devices.close()
