"""The import rules of docs/architecture.md, checked on the source of every module in hgpart/ and runtime/.

Every import counts: module level, inside functions, under ``if TYPE_CHECKING``, and modules named by a string in a
module that calls ``importlib.import_module`` (a registry of module paths is an import too). The rules:

1. a module imports only modules of its own stage or of earlier stages (the stage table below);
2. the runtime imports only the base, the frontend (to rebuild the Keras model), the placement and itself;
3. outside the runtime, only the gateways (:data:`RUNTIME_GATEWAYS`) import the runtime;
4. the module import graph has no cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
#: source folder -> the package it is installed as (pyproject's package-dir)
PACKAGES = {"hgpart": "hgpart", "runtime": "hgpart.runtime"}

#: the stages in pipeline order, each with its modules (a name covers the module and, for a package, its submodules)
STAGES: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("hgpart.allocator", "hgpart.errors", "hgpart.fileio", "hgpart.notes", "hgpart.quiet", "hgpart.schemas")),
    ("kinds", ("hgpart.kinds",)),
    ("frontend", ("hgpart.layergraph", "hgpart.zoo", "hgpart.frontend", "hgpart.models")),
    ("profile", ("hgpart.profile", "hgpart.profiler", "hgpart.profile_compare", "hgpart.profile_report",
                 "hgpart.timing")),
    ("hypergraph", ("hgpart.hypergraph", "hgpart.memory", "hgpart.metrics", "hgpart.tables")),
    ("partitioners", ("hgpart.partitioners", "hgpart.formats")),
    ("placement", ("hgpart.placement",)),
    ("simulate", ("hgpart.cluster", "hgpart.simulate", "hgpart.calibration", "hgpart.machine_profiles")),
    ("runtime", ("hgpart.runtime",)),
    ("compare", ("hgpart.compare",)),
    ("commands", ("hgpart.commands", "hgpart.cli")),
]
#: the stages the runtime may import: it shares only the placement file (and the model it names) with the compiler
RUNTIME_MAY_IMPORT = {"base", "kinds", "frontend", "placement", "runtime"}
#: the only modules outside the runtime that import it: the measured comparison and the commands that train
RUNTIME_GATEWAYS = {
    "hgpart.compare.measured",  # trains every strategy on the devices
    "hgpart.compare.measured_report",  # reads the strategies' fields (hgpart.runtime.strategy)
    "hgpart.commands.train_cmds",
    "hgpart.commands.quickstart_cmds",
    "hgpart.commands.compare_cmds",  # compare-run opens the devices before TensorFlow starts
    "hgpart.commands.calibrate_cmds",  # calibrate measures the link between two local workers
    "hgpart.commands.calibrate_split_cmds",  # calibrate-split times placements' steps on one local worker
}


# ------------------------------------------------------------------------------------------------ parsing
def modules() -> dict[str, Path]:
    """Module name -> source file, for every module of hgpart/ and runtime/."""
    out: dict[str, Path] = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([package, *parts])] = path
    return out


def _resolve(name: str, known: Iterable[str]) -> str | None:
    """The known module ``name`` refers to: itself, or its longest known prefix (``pkg.mod.func`` -> ``pkg.mod``)."""
    known = set(known)
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(source: str, module: str, known: Iterable[str], *, is_package: bool = False) -> set[str]:
    """Every known module that ``source`` (the module ``module``) imports, wherever the import statement is."""
    known = set(known)
    tree = ast.parse(source)
    names: set[str] = set()
    dynamic = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, one level up per extra dot
                pkg = module.split(".") if is_package else module.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join([*pkg, base] if base else pkg)
            names.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Call):
            fn = node.func
            called = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            dynamic |= called in ("import_module", "__import__")
    if dynamic:  # module paths kept as strings (a registry) and imported by name
        names.update(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                     and n.value.startswith("hgpart."))
    found = {_resolve(n, known) for n in names}
    return {m for m in found if m is not None and m != module}


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules it imports, over hgpart/ and runtime/."""
    mods = modules()
    return {m: imports_of(p.read_text(encoding="utf-8"), m, mods, is_package=p.name == "__init__.py")
            for m, p in mods.items()}


# ------------------------------------------------------------------------------------------------ rules
def stage_of(module: str) -> int:
    """Index of ``module``'s stage in :data:`STAGES` (the package ``hgpart`` itself is the base)."""
    if module == "hgpart":
        return 0
    best, index = "", -1
    for i, (_, names) in enumerate(STAGES):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > len(best):
                best, index = name, i
    if index < 0:
        raise AssertionError(f"{module} belongs to no stage: add it to STAGES in tests/test_architecture.py and to "
                             "docs/architecture.md")
    return index


def rule_violations(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Rules 1-3 of the module docstring: one line per offending import."""
    runtime = next(i for i, (name, _) in enumerate(STAGES) if name == "runtime")
    allowed = {i for i, (name, _) in enumerate(STAGES) if name in RUNTIME_MAY_IMPORT}
    out = []
    for src, targets in sorted(graph.items()):
        s = stage_of(src)
        for dst in sorted(targets):
            d = stage_of(dst)
            if d > s:
                out.append(f"{src} ({STAGES[s][0]}) imports the later stage {STAGES[d][0]}: {dst}")
            elif s == runtime and d not in allowed:
                out.append(f"{src} (runtime) imports {dst} ({STAGES[d][0]}); the runtime shares only the placement")
            elif d == runtime and s != runtime and src not in RUNTIME_GATEWAYS:
                out.append(f"{src} imports the runtime ({dst}) but is not one of RUNTIME_GATEWAYS")
    return out


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Rule 4: the import cycles (each a list of modules)."""
    g = nx.DiGraph()
    g.add_edges_from((a, b) for a, bs in graph.items() for b in bs)
    return [sorted(c) for c in nx.simple_cycles(g)]


# ------------------------------------------------------------------------------------------------ tests
def test_every_module_is_in_a_stage_and_imports_by_the_rules() -> None:
    assert rule_violations(import_graph()) == []


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


# the checker itself: each rule catches what it is for
KNOWN = {"hgpart.errors", "hgpart.hypergraph", "hgpart.placement", "hgpart.partitioners", "hgpart.partitioners.auto",
         "hgpart.runtime", "hgpart.runtime.train", "hgpart.compare.static", "hgpart.compare.measured",
         "hgpart.profile"}


def test_function_level_relative_and_importlib_imports_are_seen() -> None:
    src = ("import importlib\nfrom hgpart.errors import HgpartError\n"
           "def f():\n    from hgpart.hypergraph import build_hypergraph\n    return build_hypergraph\n"
           "def g():\n    from . import auto\n"
           "BACKENDS = {'auto': 'hgpart.partitioners.auto'}\n"
           "def h(name):\n    return importlib.import_module(BACKENDS[name])\n")
    found = imports_of(src, "hgpart.partitioners", KNOWN, is_package=True)
    assert found == {"hgpart.errors", "hgpart.hypergraph", "hgpart.partitioners.auto"}
    no_dynamic = src.replace("importlib.import_module(BACKENDS[name])", "BACKENDS[name]")
    assert "hgpart.partitioners.auto" in imports_of(no_dynamic, "hgpart.partitioners", KNOWN, is_package=True)
    assert imports_of("X = 'hgpart.partitioners.auto'\n", "hgpart.partitioners", KNOWN, is_package=True) == set()


@pytest.mark.parametrize(("edge", "why"), [
    (("hgpart.hypergraph", "hgpart.placement"), "later stage"),
    (("hgpart.runtime.train", "hgpart.hypergraph"), "shares only the placement"),
    (("hgpart.compare.static", "hgpart.runtime.train"), "RUNTIME_GATEWAYS"),
    (("hgpart.runtime.train", "hgpart.compare.measured"), "later stage"),
])
def test_each_rule_catches_its_violation(edge: tuple[str, str], why: str) -> None:
    ok = {"hgpart.compare.measured": {"hgpart.runtime.train", "hgpart.placement"}, "hgpart.placement":
          {"hgpart.hypergraph", "hgpart.errors"}, "hgpart.runtime.train": {"hgpart.placement", "hgpart.errors"}}
    assert rule_violations(ok) == []
    bad = {**ok, edge[0]: {*ok.get(edge[0], set()), edge[1]}}
    found = rule_violations(bad)
    assert len(found) == 1 and why in found[0]


def test_a_cycle_through_a_registry_is_found() -> None:
    graph = {"hgpart.partitioners": {"hgpart.partitioners.auto"},
             "hgpart.partitioners.auto": {"hgpart.partitioners", "hgpart.errors"}}
    assert cycles(graph) == [["hgpart.partitioners", "hgpart.partitioners.auto"]]
    graph["hgpart.partitioners.auto"].discard("hgpart.partitioners")
    assert cycles(graph) == []
