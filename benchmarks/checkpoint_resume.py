"""Checkpoint figures: sync resume vs an uninterrupted run, resume on another placement, save/restore cost.

Usage::

    python benchmarks/checkpoint_resume.py [--model minivgg] [--steps 8] [--out benchmarks/results/checkpoints]

On K = 3 logical devices (placement labels in one process): a coarse K = 2 and a fine K = 3 hypergraph placement
of the model, sync mode, Adam. Prints and writes ``results.json``:

* ``sync_resume_max_abs_diff``: weights and Adam slots after ``steps/2`` + ``steps/2`` resumed steps vs ``steps``
  uninterrupted steps (largest absolute difference over every Keras-layout entry);
* ``reshard_first_loss``: the first loss after resuming the coarse K = 2 checkpoint on the fine K = 3 placement,
  and the loss the coarse placement computes for the same step;
* ``save_s`` / ``restore_same_s`` / ``restore_reshard_s`` / ``checkpoint_bytes``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from hgpart.runtime.devices import open_devices  # noqa: E402

DS = open_devices("logical", 3)

import numpy as np  # noqa: E402
from hgpart.runtime.checkpoint import Checkpointer, list_checkpoints, read_keras_layout  # noqa: E402
from hgpart.runtime.train import train  # noqa: E402

from hgpart.fileio import write_json  # noqa: E402
from hgpart.hypergraph import build_hypergraph  # noqa: E402
from hgpart.models import load_graph  # noqa: E402
from hgpart.partitioners import partition  # noqa: E402
from hgpart.placement import Placement  # noqa: E402
from hgpart.profile import analytic_profile  # noqa: E402

B = 8


def placement(model: str, grain: str, k: int) -> Placement:
    graph = load_graph(model, (16, 16, 3), 10)
    prof = analytic_profile(graph, B)
    hg = build_hypergraph(graph, prof.work(), batch_size=B, grain=grain)
    res = partition(hg, k=k, backend="mtkahypar", epsilon=0.05, seed=0)
    return Placement.from_vertex_parts(graph, hg, res.parts, k=k, method="hypergraph", work=prof.work())


class _Timed:
    """Wall time of Checkpointer.save / restore calls (the run's own calls, nothing added)."""

    def __init__(self) -> None:
        self.s: dict[str, list[float]] = {"save": [], "restore": []}
        for name in self.s:
            setattr(Checkpointer, name, self._wrap(name, getattr(Checkpointer, name)))

    def _wrap(self, name: str, fn: object) -> object:
        def timed(*a: object, **kw: object) -> object:
            t = time.perf_counter()
            out = fn(*a, **kw)  # type: ignore[operator]
            self.s[name].append(time.perf_counter() - t)
            return out
        return timed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minivgg")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/checkpoints"))
    a = ap.parse_args()
    coarse, fine = placement(a.model, "coarse", 2), placement(a.model, "fine", 3)
    timer = _Timed()
    half = a.steps // 2

    def run(pl: Placement, steps: int, folder: Path, **kw: object) -> list[float]:
        return train(pl, device_set=DS, steps=steps, batch_size=B, mode="sync", inflight=2, checkpoint_dir=folder,
                     **kw).losses  # type: ignore[arg-type]

    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        run(coarse, a.steps, t / "full")
        run(coarse, half, t / "part", checkpoint_every=half)
        run(coarse, a.steps, t / "part", checkpoint_every=half, resume=True)
        x = read_keras_layout(t / "full" / f"ckpt-{a.steps}", coarse.graph)
        y = read_keras_layout(t / "part" / f"ckpt-{a.steps}", coarse.graph)
        diff = max(float(np.max(np.abs(x[k] - y[k]))) for k in x)
        restore_same = timer.s["restore"][-1]
        shutil.copytree(t / "part", t / "other")
        for d in (t / "part", t / "other"):  # keep only the half-way checkpoint
            shutil.rmtree(d / f"ckpt-{a.steps}")
        want = run(coarse, half + 1, t / "part", resume=True)[0]
        got = run(fine, half + 1, t / "other", resume=True)[0]
        restore_reshard = timer.s["restore"][-1]
        path = list_checkpoints(t / "full")[0][0]
        size = sum(f.stat().st_size for f in path.iterdir())
    res = {"model": a.model, "steps": a.steps, "batch_size": B, "devices": "3 logical CPU", "load": os.getloadavg(),
           "sync_resume_max_abs_diff": diff,
           "reshard_first_loss": {"coarse_k2": want, "fine_k3_resumed": got, "abs_diff": abs(got - want)},
           "save_s": float(np.median(timer.s["save"])), "restore_same_s": restore_same,
           "restore_reshard_s": restore_reshard, "checkpoint_bytes": size}
    print(json.dumps(res, indent=1))
    write_json(a.out / "results.json", res)


if __name__ == "__main__":
    main()
