"""Images/s of every strategy in several folders of measured comparisons, side by side, and each strategy's spread.

Run (from the repository root)::

    python benchmarks/measured_table.py LABEL=FOLDER [LABEL=FOLDER ...]    # FOLDER may also be one file

Why: the simulator validation (issue 16) judges each row by the median of a few short measured runs. Whether a
row's miss is the prediction or the measurement needs the same configuration measured several ways (all
strategies in one process against each in its own, short runs against long ones, one hour against the next). Each
``FOLDER`` holds ``measured/*.json`` (or ``*.json``) files written by ``benchmarks/simulator_validation.py --child``
(:func:`hgpart.compare.measured.run_measured`); this reads them, measures nothing, and prints one line per
(model, batch size, strategy): the images/s of each file under its folder's label (folders given one label form one
column; ``c`` after a value: the run's steps ran as one compiled call per several steps, ``g``: one call per step),
then max / min over all of them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def runs(folder: Path) -> dict[tuple[str, int, str], list[tuple[float, str]]]:
    """(model, batch size, strategy) -> [(images/s, how its steps ran)] over the folder's measured files (or the
    one file ``folder`` names)."""
    files = [folder] if folder.is_file() else sorted(folder.glob("measured/*.json")) or sorted(folder.glob("*.json"))
    out: dict[tuple[str, int, str], list[tuple[float, str]]] = {}
    for path in files:
        d = json.loads(path.read_text())
        for r in d.get("runs", []):
            if r.get("status") != "ok":
                continue
            how = str(r.get("pipeline", ""))
            tag = "c" if how.startswith("compiled") else "g" if how.startswith("graph") else ""
            key = (f"{d['model']}_{d['input_shape'][0]}", int(r["batch_size"]), str(r["method"]))
            out.setdefault(key, []).append((float(r["images_per_s"]), tag))
    return out


def main(argv: list[str]) -> int:
    if not argv or any("=" not in a for a in argv):
        print("usage: python benchmarks/measured_table.py LABEL=FOLDER [LABEL=FOLDER ...]", file=sys.stderr)
        return 2
    cols: list[tuple[str, dict[tuple[str, int, str], list[tuple[float, str]]]]] = []
    for a in argv:  # folders under one label are read as one column
        label, folder = a.split("=", 1)
        got = runs(Path(folder))
        same = next((c for lab, c in cols if lab == label), None)
        if same is None:
            cols.append((label, got))
        else:
            for k, v in got.items():
                same.setdefault(k, []).extend(v)
    keys = sorted({k for _, got in cols for k in got})
    print("$ python benchmarks/measured_table.py " + " ".join(argv))
    for key in keys:
        cells, values = [], []
        for label, got in cols:
            vals = got.get(key, [])
            values += [v for v, _ in vals]
            cells.append(f"{label} " + (" ".join(f"{v:7.1f}{t or ' '}" for v, t in vals) or "      -"))
        spread = max(values) / min(values) if values else float("nan")
        print(f"{key[0]} B={key[1]:<3d} {key[2]:16s} " + " | ".join(cells) + f" | max/min {spread:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
