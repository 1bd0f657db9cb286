"""Is a coverage forward mismatch float32 rounding or a wrong rule? Per-layer errors against a float64 Keras.

Usage::

    python benchmarks/coverage_precision.py EfficientNetV2      # a family of benchmarks/coverage.py

Builds the family's model exactly as ``benchmarks/coverage.py`` does (same seed, calibration, K = 4 coarse
placement folded onto 2 logical devices), then the same model in float64 with the same weights. For every
layer it prints the largest difference to the float64 Keras output, relative to that output's largest
magnitude, of (a) the partitioned float32 model and (b) Keras float32. Rounding shows as (a) tracking (b)
smoothly with depth; a wrong channel, weight or rule shows as (a) jumping far above (b) at one layer.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import coverage  # noqa: E402 - the sibling benchmark script, not the coverage.py package


@dataclass
class LayerError:
    """One layer's errors against float64 Keras, relative to the float64 output's largest magnitude."""

    name: str
    scale: float
    partitioned: float
    keras32: float


class Recorder:
    """Wraps the partitioned model's per-layer builder to keep each layer's full output (channels in order)."""

    def __init__(self, pm: Any) -> None:
        self.outputs: dict[str, np.ndarray] = {}
        self._inner = pm._layer
        pm._layer = self

    def __call__(self, layer: Any, *args: Any) -> Any:
        split = self._inner(layer, *args)
        qs = sorted(split.tensors)
        full = np.concatenate([np.asarray(split.tensors[q]) for q in qs], axis=-1)
        idx = np.concatenate([split.index[q] for q in qs])
        self.outputs[layer.name] = full[..., np.argsort(idx)]
        return split


def _placement(app: str, size: int, out: Path) -> None:
    proc = coverage._hgpart("partition", "-m", f"keras:{app}", "--input", str(size), "--classes", "10",
                            "--analytic", "--batch-size", str(coverage.BATCH), "--grain", "coarse", "--k", "4",
                            "--no-bound", "--time-limit", str(coverage.PARTITION_SECONDS), "--out", str(out))
    if proc.returncode != 0:
        raise SystemExit(coverage._last_line(proc))


def folded_placement(app: str, size: int) -> Any:
    """The coverage check's placement: K = 4 coarse, folded onto 2 parts (0, 1 -> 0; 2, 3 -> 1)."""
    from hgpart.placement import Placement, load_placement

    with tempfile.TemporaryDirectory() as tmp:
        _placement(app, size, Path(tmp) / "p.json")
        pl4 = load_placement(Path(tmp) / "p.json")
    folded = {n: {k: np.asarray(a) // 2 for k, a in parts.items()} for n, parts in pl4.layer_parts.items()}
    return Placement(graph=pl4.graph, grain=pl4.grain, method="folded", k=2, devices=["part:0", "part:1"],
                     layer_parts=folded, work=pl4.work, work_unit=pl4.work_unit, batch_size=coverage.BATCH)


def _keras_outputs(model: Any, names: list[str], positions: list[int], x: np.ndarray) -> dict[str, np.ndarray]:
    """The outputs of the layers at the positions the names have in the float32 model (a second build of the
    model auto-numbers some names differently, its layer order is the same)."""
    import keras

    last = model.layers[-1]
    act = getattr(last, "activation", None)
    if act is keras.activations.softmax:
        last.activation = keras.activations.linear
    probe = keras.Model(model.inputs, [model.layers[i].output for i in positions])
    try:
        outs = probe(x, training=False)
    finally:
        if act is not None:
            last.activation = act
    return {n: np.asarray(o, np.float64) for n, o in zip(names, outs, strict=True)}


def errors(family: str) -> list[LayerError]:
    """Per-layer relative errors of the partitioned and the Keras float32 forwards against float64 Keras."""
    import keras
    from hgpart.runtime.devices import open_devices

    ds = open_devices("logical", 2, inter_op=2)
    from hgpart.runtime.partitioned import PlacedModel

    from hgpart.models import load_keras_model

    app, size = coverage.FAMILIES[family]
    pl = folded_placement(app, size)
    keras.utils.set_random_seed(0)
    model = load_keras_model(f"keras:{app}", input_shape=(size, size, 3), num_classes=10)
    x = np.random.default_rng(0).normal(size=(coverage.BATCH, size, size, 3)).astype(np.float32)
    coverage._calibrate(model, x.shape[1:])
    pm = PlacedModel(pl, model, ds.devices)
    rec = Recorder(pm)
    pm.forward(x, training=False)  # eager: every layer's output is a concrete tensor
    pm._layer = rec._inner
    graph_logits = np.asarray(coverage._logits(pm, x), np.float64)  # as benchmarks/coverage.py runs it
    keras_pos = {layer.name: i for i, layer in enumerate(model.layers)}
    names = [layer.name for layer in pl.graph.layers if layer.inputs and layer.name in keras_pos]
    positions = [keras_pos[n] for n in names]
    k32 = _keras_outputs(model, names, positions, x)
    keras.config.set_floatx("float64")
    keras.config.set_dtype_policy("float64")
    model64 = load_keras_model(f"keras:{app}", input_shape=(size, size, 3), num_classes=10)
    model64.set_weights([np.asarray(w, np.float64) for w in model.get_weights()])
    k64 = _keras_outputs(model64, names, positions, x.astype(np.float64))
    if any(w.dtype != np.float64 for w in model64.get_weights()):
        raise SystemExit("the reference model did not build in float64")
    rows = []
    for n in names:
        ref = k64[n]
        scale = max(float(np.max(np.abs(ref))), 1e-30)
        rows.append(LayerError(n, scale, float(np.max(np.abs(rec.outputs[n] - ref))) / scale,
                               float(np.max(np.abs(k32[n] - ref))) / scale))
    last = rows[-1]
    rows.append(LayerError(f"{last.name} (tf.function)", last.scale,
                           float(np.max(np.abs(graph_logits - k64[last.name]))) / last.scale, last.keras32))
    return rows


def main(argv: list[str]) -> None:
    rows = errors(argv[0] if argv else "EfficientNetV2")
    print(f"{'#':>4} {'layer':<32} {'max |out|':>10} {'partitioned':>12} {'keras f32':>10}  (relative to float64)")
    worst = 0.0
    for i, r in enumerate(rows):
        jump = r.partitioned > 10 * max(worst, 1e-7)
        worst = max(worst, r.partitioned)
        if jump or i % 10 == 0 or i >= len(rows) - 2:
            print(f"{i:>4} {r.name:<32} {r.scale:>10.3g} {r.partitioned:>12.2e} {r.keras32:>10.2e}"
                  + ("   <- largest so far x10" if jump and i else ""))
    p = np.array([r.partitioned for r in rows])
    k = np.array([r.keras32 for r in rows])
    seen = k > 1e-7  # layers where float32 rounding is visible at all
    if not seen.any():
        raise SystemExit("Keras float32 equals float64 everywhere: the reference is not float64")
    print(f"layers {len(rows)}; largest partitioned/keras-f32 error ratio {np.max(p[seen] / k[seen]):.1f} "
          f"(median {np.median(p[seen] / k[seen]):.1f}, over {int(seen.sum())} layers with keras f32 error > 1e-7); "
          f"logits: partitioned {p[-1]:.2e}, keras f32 {k[-1]:.2e} of max |logit| {rows[-1].scale:.3g}")


if __name__ == "__main__":
    main(sys.argv[1:])
