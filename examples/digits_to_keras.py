"""Your data in, a trained Keras model out: digits -> .npz -> placement -> 3 epochs on 2 local workers -> .keras.

Run:  python examples/digits_to_keras.py [FOLDER]      (default FOLDER: a new temporary folder)

The README's user workflow, step by step, with the same commands:

1. scikit-learn's 8x8 digits, upscaled to 32x32x1 in [0, 1], shuffled once with a fixed seed (Keras's
   ``validation_split``, like ``--val-split``, keeps the *last* samples for validation), saved as
   ``digits.npz`` with arrays ``x`` and ``y``;
2. ``hgpart partition --model lenet5 --input 32x32x1 --k 2`` writes the placement file;
3. ``hgpart train --data digits.npz --val-split 0.2 --epochs 3 --devices local --save lenet5.keras``
   trains it on 2 local worker processes and prints the validation loss and accuracy after every epoch;
4. a fresh Python process that never imports hgpart opens ``lenet5.keras`` with ``keras.saving.load_model``
   and evaluates it on the same validation samples: the accuracy equals the one ``train`` printed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

#: runs the hgpart console command with this Python (as the installed ``hgpart`` script does)
HGPART = [sys.executable, "-c", "import sys; from hgpart.cli import main; main(sys.argv[1:])"]

#: step 4, in a process with no hgpart import: Keras alone opens the file and evaluates the validation samples
KERAS_ONLY = """
import sys
import numpy as np
import keras
model = keras.saving.load_model(sys.argv[1])
d = np.load(sys.argv[2])
n_val = int(len(d["x"]) * 0.2)
loss, acc = model.evaluate(d["x"][-n_val:], d["y"][-n_val:], verbose=0)
print(f"keras: loss {loss:.4f} accuracy {acc:.4f}; hgpart imported: {'hgpart' in sys.modules}")
"""


def write_digits(path: Path, *, seed: int = 0) -> Path:
    """Step 1: digits as ``x`` (N, 32, 32, 1) float32 in [0, 1] and ``y`` (N,) int labels, shuffled once."""
    d = load_digits()
    x = np.kron(d.images / 16.0, np.ones((4, 4)))[..., None].astype(np.float32)  # 8x8 -> 32x32, nearest
    order = np.random.default_rng(seed).permutation(len(x))
    np.savez(path, x=x[order], y=d.target[order].astype(np.int32))
    return path


def run(cmd: list[str]) -> str:
    """Run one step, echoing its output; stop the example if it fails."""
    print("$", " ".join(cmd[3:] if cmd[:3] == HGPART else cmd[1:2] + ["..."]), flush=True)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    print(proc.stdout, end="")
    if proc.returncode != 0:
        sys.exit(f"step failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return proc.stdout


def main(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    data = write_digits(folder / "digits.npz")
    placement, model = folder / "lenet5_k2.json", folder / "lenet5.keras"
    run([*HGPART, "partition", "--model", "lenet5", "--input", "32x32x1", "--k", "2", "--backend", "mtkahypar",
         "--analytic", "--out", str(placement)])
    out = run([*HGPART, "train", "--placement", str(placement), "--data", str(data), "--val-split", "0.2",
               "--epochs", "3", "--batch-size", "32", "--devices", "local", "--mode", "sync", "--save", str(model)])
    printed = re.search(r"validation after the last epoch: loss ([0-9.]+) accuracy ([0-9.]+)", out)
    keras_out = run([sys.executable, "-c", KERAS_ONLY, str(model), str(data)])
    reloaded = re.search(r"keras: loss ([0-9.]+) accuracy ([0-9.]+)", keras_out)
    assert printed and reloaded
    print(f"validation accuracy: hgpart train printed {printed.group(2)}, plain Keras gives {reloaded.group(2)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="hgpart_digits_")))
