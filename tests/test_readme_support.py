"""The README's supported-layers table is the registry's, and its coverage table lists every family."""

from __future__ import annotations

import re
from pathlib import Path

from coverage_bench import COVERAGE

from hgpart.kinds.docs import layers_table

ROOT = Path(__file__).resolve().parents[1]


def _block(name: str) -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"<!-- {name}:start -->\n(.*?)<!-- {name}:end -->", text, re.S)
    assert m, f"README.md has no {name} block"
    return m.group(1).strip()


def test_readme_layer_table_matches_the_registry():
    assert _block("layers") == layers_table(), "regenerate the README table with hgpart.kinds.docs.layers_table()"


def test_readme_coverage_table_lists_every_family():
    rows = [line for line in _block("coverage").splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert sorted(r.split("|")[1].strip() for r in rows) == sorted(COVERAGE.FAMILIES)
