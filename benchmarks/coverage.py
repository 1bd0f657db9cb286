"""Which keras.applications families hgpart compiles, partitions and trains: the README's coverage table.

Usage::

    python benchmarks/coverage.py                       # every family, prints the Markdown table
    python benchmarks/coverage.py MobileNet Xception    # some families
    python benchmarks/coverage.py --jobs 3 --out benchmarks/results/coverage.md   # 3 families at a time
    python benchmarks/coverage.py --table-from run1.err run2.err   # the table from the rows runs logged

The load average of the (shared) machine is printed before and after the table.

For every family (one model, ``weights=None``, its smallest accepted input, 10 classes), in a fresh process:

1. **compiles**: ``hgpart info -m keras:<App> --input N --classes 10`` exits 0;
2. **partitions**: ``hgpart partition ... --analytic --grain coarse --k 4 --no-bound --time-limit 20`` exits 0
   (the default backend, ``auto``, within that time limit);
3. **trains**: the K = 4 placement folded onto 2 logical devices (parts 0, 1 -> device 0; 2, 3 -> device 1)
   runs in the partitioned runtime: its inference logits (before a final softmax, which is near uniform at
   initialisation; both forwards run in a ``tf.function``) equal Keras's within 1e-4 of the largest logit
   (absolute when the logits are below 1) on a batch of 4: float32 rounding through 50 to 200 layers in
   another summation order stays well inside that, a wrong channel or weight does not; and 2 synchronous
   Adam steps give finite losses.

A step that fails prints its one-line error in the table's last column.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: family -> (keras.applications model, smallest accepted input side)
FAMILIES: dict[str, tuple[str, int]] = {
    "VGG": ("VGG16", 32),
    "ResNet": ("ResNet50", 32),
    "ResNetV2": ("ResNet50V2", 32),
    "InceptionV3": ("InceptionV3", 75),
    "InceptionResNetV2": ("InceptionResNetV2", 75),
    "Xception": ("Xception", 71),
    "MobileNet": ("MobileNet", 32),
    "MobileNetV2": ("MobileNetV2", 32),
    "MobileNetV3": ("MobileNetV3Small", 32),
    "DenseNet": ("DenseNet121", 32),
    "NASNet": ("NASNetMobile", 32),
    "EfficientNet": ("EfficientNetB0", 32),
    "EfficientNetV2": ("EfficientNetV2B0", 32),
    "ConvNeXt": ("ConvNeXtTiny", 32),
}
BATCH = 4
TOLERANCE = 1e-4
PARTITION_SECONDS = 20  # the default backend's time limit for these small graphs


@dataclass
class Row:
    """One family's outcome."""

    family: str
    model: str
    input: int
    compiles: bool = False
    partitions: bool = False
    trains: bool = False
    km1_mib: float | None = None
    max_abs_diff: float | None = None
    logit_scale: float | None = None
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""
    ran: bool = True


def _hgpart(*args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("hgpart")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})


def _last_line(proc: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
    return lines[-1].strip()[:200] if lines else f"exit {proc.returncode}"


def _logits(pm: Any, x: Any) -> Any:
    """The partitioned model's inference logits (before a final softmax)."""
    import numpy as np
    import tensorflow as tf

    with tf.device(pm.host):
        xt = tf.constant(x)
    return np.asarray(tf.function(lambda v: pm.forward(v, training=False))(xt))


def _keras_logits(model: Any, x: Any) -> Any:
    """Keras's logits: the model run with its final softmax switched to linear (a softmax at init is ~uniform).

    Run in a ``tf.function``, as the partitioned forward is: graph mode rewrites ops (Grappler fuses a
    convolution with its bias and activation, for one), which changes float32 rounding, so an eager Keras
    forward differs from Keras's own graph-mode forward by as much as a partitioned one may (the comparison
    is of partitioning, not of execution modes).
    """
    import keras
    import numpy as np
    import tensorflow as tf

    last = model.layers[-1]
    act = getattr(last, "activation", None)
    if act is keras.activations.softmax:
        last.activation = keras.activations.linear
    try:
        return np.asarray(tf.function(lambda v: model(v, training=False))(tf.constant(x)))
    finally:
        if act is not None:
            last.activation = act


def _calibrate(model: Any, shape: tuple[int, ...]) -> None:
    """Set every BatchNormalization's moving statistics to those of a calibration batch of 16 other images.

    With ``weights=None`` and the initial statistics (mean 0, variance 1) the activations of deep
    applications fade to ~1e-20 by the logits, which would make any forward comparison vacuous. One
    training-mode call with momentum 0 stores each layer's batch statistics; variances are then floored at
    a tenth of the layer's mean, so a channel that is (nearly) constant on the batch is not amplified
    by 1/sqrt(epsilon), which would turn rounding differences into large ones.
    """
    import numpy as np

    bns = [layer for layer in model.layers if type(layer).__name__ == "BatchNormalization"]
    saved = [bn.momentum for bn in bns]
    for bn in bns:
        bn.momentum = 0.0
    model(np.random.default_rng(1).normal(size=(16, *shape)).astype(np.float32), training=True)
    for bn, m in zip(bns, saved, strict=True):
        bn.momentum = m
        v = np.asarray(bn.moving_variance)
        bn.moving_variance.assign(np.maximum(v, 0.1 * float(v.mean())))


def _train(row: Row, placement: Path) -> None:
    """Fold the placement onto 2 logical devices, compare the forward with Keras, run 2 sync steps."""
    import numpy as np
    from hgpart.runtime.devices import open_devices

    ds = open_devices("logical", 2, inter_op=2)
    import keras
    from hgpart.runtime.partitioned import PlacedModel
    from hgpart.runtime.step import OptimizerSpec, TrainStep

    from hgpart.models import load_keras_model
    from hgpart.placement import Placement, load_placement

    pl4 = load_placement(placement)
    folded = {name: {key: np.asarray(arr) // 2 for key, arr in parts.items()}
              for name, parts in pl4.layer_parts.items()}
    pl = Placement(graph=pl4.graph, grain=pl4.grain, method="folded", k=2, devices=["part:0", "part:1"],
                   layer_parts=folded, work=pl4.work, work_unit=pl4.work_unit, batch_size=BATCH)
    pl.validate()
    keras.utils.set_random_seed(0)
    model = load_keras_model(f"keras:{row.model}", input_shape=(row.input, row.input, 3), num_classes=10)
    x = np.random.default_rng(0).normal(size=(BATCH, row.input, row.input, 3)).astype(np.float32)
    _calibrate(model, x.shape[1:])
    pm = PlacedModel(pl, model, ds.devices)
    ours, theirs = _logits(pm, x), _keras_logits(model, x)
    row.max_abs_diff = float(np.max(np.abs(ours - theirs)))
    row.logit_scale = float(np.max(np.abs(theirs)))
    forward_ok = row.max_abs_diff <= TOLERANCE * max(1.0, row.logit_scale)
    step = TrainStep(pm, OptimizerSpec("adam"), batch_size=BATCH)
    y = np.arange(BATCH, dtype=np.int32) % 10
    row.losses = [step(x, y) for _ in range(2)]
    finite = bool(np.all(np.isfinite(row.losses)))
    row.trains = forward_ok and finite
    if not forward_ok:
        row.error = f"forward differs from Keras by {row.max_abs_diff:.2e} (max logit {row.logit_scale:.2g})"
    elif not finite:
        row.error = f"non-finite loss {row.losses}"


def run_one(family: str) -> Row:
    """Compile, partition and train one family (call in a fresh process: one TensorFlow runtime each)."""
    app, size = FAMILIES[family]
    row = Row(family, app, size)
    t0 = time.perf_counter()
    common = ["-m", f"keras:{app}", "--input", str(size), "--classes", "10"]
    proc = _hgpart("info", *common)
    row.compiles = proc.returncode == 0
    if not row.compiles:
        row.error = _last_line(proc)
        return row
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "p.json"
        proc = _hgpart("partition", *common, "--analytic", "--batch-size", str(BATCH), "--grain", "coarse",
                       "--k", "4", "--no-bound", "--time-limit", str(PARTITION_SECONDS), "--out", str(out))
        row.partitions = proc.returncode == 0 and out.is_file()
        if not row.partitions:
            row.error = _last_line(proc)
            return row
        row.km1_mib = float(json.loads(out.read_text())["metrics"]["comm_volume_mib"])
        try:
            _train(row, out)
        except Exception as exc:  # noqa: BLE001 - the table reports any failure of the runtime in one line
            row.error = f"{exc.__class__.__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
    row.seconds = time.perf_counter() - t0
    return row


def table(rows: list[Row]) -> str:
    """The README's Markdown table."""
    yes = {True: "yes", False: "**no**"}
    lines = ["| family | model (input) | compiles | partitions (coarse, K = 4) | trains (2 devices) | note |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if not r.ran:
            lines.append(f"| {r.family} | {r.model} ({r.input}) | not run | not run | not run | {r.error} |")
            continue
        note = r.error or (f"logits max diff {r.max_abs_diff:.1e} (max logit {r.logit_scale:.2g}), losses "
                           + ", ".join(f"{v:.3f}" for v in r.losses) if r.max_abs_diff is not None else "")
        lines.append(f"| {r.family} | {r.model} ({r.input}) | {yes[r.compiles]} | {yes[r.partitions]} | "
                     f"{yes[r.trains]} | {note} |")
    return "\n".join(lines)


def _run_child(family: str) -> Row:
    """One family in a fresh process (one TensorFlow runtime each)."""
    proc = subprocess.run([sys.executable, __file__, "--one", family], capture_output=True, text=True)
    try:
        row = Row(**json.loads(proc.stdout.strip().splitlines()[-1]))
    except (IndexError, json.JSONDecodeError, TypeError):
        app, size = FAMILIES[family]
        row = Row(family, app, size, error=f"crashed: {_last_line(proc)}")
    print(f"{family}: {asdict(row)}", file=sys.stderr, flush=True)
    return row


def rows_from_logs(paths: list[str]) -> list[Row]:
    """Rows logged on stderr (``Family: {...}``) by earlier runs, the latest per family, in FAMILIES order."""
    import ast

    found: dict[str, Row] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            family, _, rest = line.partition(": ")
            if family in FAMILIES and rest.startswith("{"):
                row = Row(**ast.literal_eval(rest))
                if not row.error.startswith("crashed: exit -"):  # a run stopped by a signal is no result
                    found[family] = row
    return [found.get(f) or Row(f, *FAMILIES[f], ran=False, error="not run in the logged runs") for f in FAMILIES]


def load_line(when: str) -> str:
    """The machine's load average (1, 5 and 15 minutes), to read the timings against."""
    one, five, fifteen = os.getloadavg()
    return f"load average at {when} ({os.cpu_count()} cores): {one:.2f} {five:.2f} {fifteen:.2f}"


def main(argv: list[str]) -> None:
    if argv[:1] == ["--one"]:
        print(json.dumps(asdict(run_one(argv[1]))), flush=True)
        return
    if argv[:1] == ["--table-from"]:
        print(table(rows_from_logs(argv[1:])))
        return
    out = None
    if "--out" in argv:
        i = argv.index("--out")
        out, argv = Path(argv[i + 1]), argv[:i] + argv[i + 2:]
    jobs = 1
    if "--jobs" in argv:
        i = argv.index("--jobs")
        jobs, argv = int(argv[i + 1]), argv[:i] + argv[i + 2:]
    families = argv or list(FAMILIES)
    print(load_line("start"), flush=True)  # the machine is shared: the seconds column depends on its load
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        rows = list(pool.map(_run_child, families))
    text = table(rows)
    print(text)
    print(load_line("end"), flush=True)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
