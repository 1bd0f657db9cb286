"""The compiled pipeline on two local worker processes, as it runs for real (the other tests of
:mod:`hgpart.runtime.multistep` use logical devices in one process): with one batch in flight, several steps per
call should be exact sequential training there too, bit for bit against one step per call on the same workers.

This failed in about one run of three until the runtime settled its eager writes before a compiled call
(:mod:`hgpart.runtime.settle`): on worker processes a call is not ordered after eager ops sent before it. The
second test checks that barrier directly: compiled calls made right after eager assigns of the same values, and
:func:`~hgpart.runtime.settle.settle`, compute the same thing every time (without it they do not:
``benchmarks/results/eager_order/``).

One eager cluster per process: the training runs in a child process, which prints one RESULT line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")

_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from toydata import band_images
from toyplacements import B, two_part_placement
from hgpart.runtime.api import PartitionedModel
from hgpart.runtime.cluster import open_local
from hgpart.runtime.multistep import MultiStep
from hgpart.runtime.settle import settle

pl = two_part_placement("minivgg")
x, y = band_images(64)
out = {}
with open_local(2, inter_op=2, start_timeout=120) as ds:
    for pipeline in ("graph", "compiled"):
        pm = PartitionedModel.from_placement(pl, device_set=ds, seed=3, inflight=1, pipeline=pipeline,
                                             steps_per_call=4)
        hist = pm.fit(x, y, steps=13, batch_size=B, mode="async", inflight=1, verbose=0)
        rows = sorted(hist.rows, key=lambda r: r.record.step)
        w = pm.placed.keras_weights()
        choice = pm.pipeline_choice
        out[pipeline] = {"losses": [r.record.loss for r in rows], "kind": choice.kind if choice else pipeline,
                         "weights": {f"{k}/{n}": np.asarray(v).tolist() for k in w for n, v in w[k].items()}}
    # the barrier: the same values assigned eagerly, settled, then one compiled call of 2 steps, 10 times
    step = pm.train_step(B, "async", 1)
    ms = MultiStep(step, steps_per_call=2, inflight=1)
    ms.warm([2])
    snap = [v.numpy() for v in step.state]
    seen = set()
    for _ in range(10):
        for v, s in zip(step.state, snap):
            v.assign(s)
        settle()
        losses, _ = ms.run(x[: 2 * B], y[: 2 * B])
        seen.add((tuple(losses.tolist()), tuple(float(c.numpy()) for c in step.counters.values())))
    out["repeat"] = [list(map(list, k)) for k in seen]
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def out() -> dict:
    """The child's results: both pipelines' training, and the repeated settled calls."""
    tests = str(Path(__file__).parent)
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, tests], capture_output=True, text=True, timeout=600,
                          env=_ENV)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, proc.stderr[-3000:]
    return json.loads(lines[0][len("RESULT "):])


def test_compiled_steps_on_local_workers_are_exact_with_one_batch_in_flight(out: dict) -> None:
    graph, compiled = out["graph"], out["compiled"]
    assert compiled["kind"] == "compiled" and graph["kind"] == "graph"
    assert len(compiled["losses"]) == 13
    assert compiled["losses"] == graph["losses"]
    assert compiled["weights"] == graph["weights"]


def test_settled_eager_writes_come_before_the_next_compiled_call(out: dict) -> None:
    (losses, counters), *others = out["repeat"]
    assert not others, f"{len(others) + 1} different outcomes of the same call from the same values"
    assert len(losses) == 2 and all(c == counters[0] for c in counters)
