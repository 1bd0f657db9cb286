"""The partitioners package's contracts: no import cycle, typed public functions, arguments not environment."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
from hgtoys import branching_network, unit_work

from hgpart.errors import HgpartError
from hgpart.hypergraph import build_hypergraph
from hgpart.partitioners import BACKENDS, PartitionResult, available_backends, load_backend, partition

PKG = Path(__file__).resolve().parents[1] / "hgpart" / "partitioners"
#: function-level imports allowed: third-party solvers loaded only when a backend runs
LAZY_OK = ("scipy", "mtkahypar", "kahypar", "ctypes", "signal")


def _modules() -> list[Path]:
    return sorted(p for p in PKG.glob("*.py"))


def _hg():
    g = branching_network()
    return build_hypergraph(g, unit_work(g), batch_size=2, grain="fine")


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_no_module_imports_the_package_init_or_hides_an_import(path: Path) -> None:
    # backends import PartitionResult from .base; importing the package's __init__ (which loads backends
    # by name) from a backend would be a cycle, and an import inside a function would hide one
    tree = ast.parse(path.read_text())
    top = set(id(n) for n in tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "hgpart.partitioners" and path.name != "__init__.py":
            pytest.fail(f"{path.name}:{node.lineno} imports the package __init__")
        if isinstance(node, ast.ImportFrom | ast.Import) and id(node) not in top:
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            assert all(n.split(".")[0] in LAZY_OK for n in names), f"{path.name}:{node.lineno} imports {names}"


def test_base_imports_no_backend() -> None:
    tree = ast.parse((PKG / "base.py").read_text())
    mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for m in mods if m and m.startswith("hgpart.partitioners")}


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_public_functions_have_return_types(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            assert node.returns is not None, f"{path.name}:{node.lineno} {node.name} has no return type"


def test_every_backend_loads_and_has_run() -> None:
    assert available_backends() == sorted(BACKENDS)
    for name in BACKENDS:
        assert callable(load_backend(name).run)


@pytest.mark.parametrize("limit", [-5.0, 0.0, math.nan])
def test_time_limit_must_be_positive(limit: float) -> None:
    with pytest.raises(HgpartError, match="time limit"):
        partition(_hg(), k=2, backend="auto", time_limit=limit)


def test_positive_time_limit_is_accepted() -> None:
    res = partition(_hg(), k=2, backend="incremental", time_limit=0.5)
    assert isinstance(res, PartitionResult)


def test_threads_is_an_argument_not_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HGPART_MTKAHYPAR_THREADS", "1")  # no longer read
    hg = _hg()
    assert partition(hg, k=2, backend="mtkahypar", seed=3).info["threads"] == 2
    one = partition(hg, k=2, backend="mtkahypar", seed=3, threads=1)
    assert one.info["threads"] == 1
    quality = partition(hg, k=2, backend="mtkahypar", seed=3, preset="quality", threads=2)
    assert quality.info["threads"] == 2 and not quality.info["deterministic"]
    with pytest.raises(HgpartError, match="threads"):
        partition(hg, k=2, backend="mtkahypar", threads=0)
    np.testing.assert_array_equal(one.parts, partition(hg, k=2, backend="mtkahypar", seed=3, threads=2).parts)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_no_function_over_100_lines(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            assert length <= 100, f"{path.name}:{node.lineno} {node.name} has {length} lines"


def test_an_ordinary_error_does_not_cancel_later_solves() -> None:
    from hgpart.partitioners._interrupt import CANCEL

    with pytest.raises(HgpartError, match="preset"):
        partition(_hg(), k=2, backend="mtkahypar", preset="fastest")
    assert not CANCEL.is_set()
