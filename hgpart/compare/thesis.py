"""The thesis's published VGG16 numbers, shipped as data (``hgpart/data/thesis_vgg16.json``).

Usage::

    from hgpart.compare.thesis import thesis_value, load_thesis
    thesis_value("hypergraph", "coarse", 0.1, 4, "comm_volume_mib")   # -> (61, "Eserol 2019, Table 5.10")

Values are as printed in Eserol (2019), Tables 5.1-5.14 and Appendix A; tables
or cells lost in the markdown source are marked missing / null and simply
yield ``None`` here. They apply only to VGG16 at 224x224x3, batch 32.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["load_thesis", "thesis_value", "thesis_applies", "THESIS_PATH"]

THESIS_PATH = Path(__file__).resolve().parent.parent / "data" / "thesis_vgg16.json"


@lru_cache(maxsize=1)
def load_thesis() -> dict[str, Any]:
    return json.loads(THESIS_PATH.read_text(encoding="utf-8"))


def thesis_applies(model: str, input_shape: tuple[int, ...] | list[int], batch_size: int) -> bool:
    """True only for the configuration the thesis measured: VGG16, 224x224x3, batch 32."""
    doc = load_thesis()
    return model == doc["model"] and list(input_shape) == doc["input_shape"] and batch_size == doc["batch_size"]


def _eps_match(table_eps: float | None, method: str, eps: float | None) -> bool:
    if method != "hypergraph":
        return True  # the naive methods and layer-wise have no balance parameter
    return table_eps is not None and eps is not None and abs(table_eps - eps) < 1e-9


def thesis_value(method: str, grain: str, epsilon: float | None, n: int, column: str) -> tuple[float, str] | None:
    """The thesis's printed value for one cell, with its citation, or None when it has none."""
    doc = load_thesis()
    for tab in doc["tables"].values():
        if tab.get("missing") or "rows" not in tab or not isinstance(tab["rows"], dict):
            continue
        if tab.get("method") != method or tab.get("grain") != grain:
            continue
        if not _eps_match(tab.get("epsilon"), method, epsilon):
            continue
        row = tab["rows"].get(str(n))
        if row is None or row.get(column) is None:
            continue
        return float(row[column]), tab["citation"]
    # the thesis states horizontal partitioning is identical for both grains (§5.1.4)
    if method == "horizontal" and grain == "fine":
        return thesis_value(method, "coarse", epsilon, n, column)
    return None
