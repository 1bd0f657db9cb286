"""A seeded fuzzer of the command line: every hostile input ends in exit 0 or one line and exit 2.

It mutates valid placement files (read by ``hgpart metrics``), profile files
(read by ``hgpart partition --profile``), cluster spec files (read by
``--devices cluster:FILE``, loopback addresses only) and argument vectors of
``info``, ``build``, ``partition``, ``metrics``, ``profile --analytic`` and
``compare`` (see ``fuzz_inputs``), and asserts for every case:

* the exit code is 0 or 2, and exit 2 prints exactly one line on stderr;
* no traceback, no case longer than :data:`CASE_SECONDS`;
* no partial output: no ``*.tmp`` file anywhere, no output file after exit 2
  and a readable one after exit 0.

Most cases run the CLI in-process (``hgpart.cli.main`` with stdout and
stderr captured at the Python level). For speed, zoo models are converted to
layer graphs once and typer's command tree is built once (both memoised for
the test only): the fuzzer tests the readers and checks, not Keras or typer.
A few cases run ``hgpart`` as a subprocess to check the real stderr.
``HGPART_FUZZ_SEED`` picks another seed to explore; the default suite always
uses :data:`SEED`.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import traceback
import types
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import typer.main
from fuzz_inputs import mutate_argv, mutate_json, mutate_text
from hgpart.runtime.cluster import open_cluster, parse_cluster_spec

import hgpart.cli
import hgpart.models
from hgpart.cli import main
from hgpart.errors import HgpartError
from hgpart.hypergraph import build_hypergraph
from hgpart.partitioners import partition
from hgpart.placement import Placement, load_placement
from hgpart.profile import Profile, analytic_profile

SEED = int(os.environ.get("HGPART_FUZZ_SEED", "20261123"))
CASE_SECONDS = 30
#: cases per family (in-process); the total is above 1,000
COUNTS = {"placement": 330, "profile": 160, "cluster": 300, "argv": 240}
LOOPBACK = {"127.0.0.1", "localhost", "[::1]"}
FAST_BACKENDS = ("layerwise", "horizontal", "incremental", "block")

# ----------------------------------------------------------------------------------------------------- fixtures
@dataclass
class Seeds:
    """Valid inputs the cases start from, in one folder."""

    root: Path
    placements: dict[str, dict[str, Any]] = field(default_factory=dict)
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    cluster: dict[str, Any] = field(default_factory=dict)
    ports: set[int] = field(default_factory=set)
    placement_files: list[Path] = field(default_factory=list)


_GRAPHS: dict[tuple[Any, ...], Any] = {}
_REAL_LOAD_GRAPH = hgpart.models.load_graph


def _cached_load_graph(spec: str, input_shape: Any = None, num_classes: Any = None) -> Any:
    key = (spec, input_shape, num_classes)
    if key not in _GRAPHS:
        _GRAPHS[key] = _REAL_LOAD_GRAPH(spec, input_shape=input_shape, num_classes=num_classes)
    return _GRAPHS[key]


def _placement_dict(model: str, grain: str, k: int, backend: str) -> dict[str, Any]:
    graph = _cached_load_graph(model)
    prof = analytic_profile(graph, 8)
    hg = build_hypergraph(graph, prof.work(), batch_size=8, grain=grain, work_unit=prof.work_unit)  # type: ignore[arg-type]
    res = partition(hg, k=k, backend=backend)
    return Placement.from_vertex_parts(graph, hg, res.parts, k=k, method=backend, work=prof.work(),
                                       provenance={"backend": backend}).to_dict()


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeds]:
    root = tmp_path_factory.mktemp("fuzz")
    s = Seeds(root=root)
    s.placements = {"lenet5-coarse": _placement_dict("lenet5", "coarse", 2, "layerwise"),
                    "lenet5-fine": _placement_dict("lenet5", "fine", 3, "horizontal"),
                    "minivgg-coarse": _placement_dict("minivgg", "coarse", 3, "incremental")}
    for name, d in s.placements.items():
        p = root / f"seed_{name}.json"
        p.write_text(json.dumps(d))
        s.placement_files.append(p)
    s.profiles = {m: analytic_profile(_cached_load_graph(m), 8).to_dict() for m in ("lenet5", "minivgg")}
    # ports bound but never listening: a connection to them is refused, and no other process can take them
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(3)]
    for sk in socks:
        sk.bind(("127.0.0.1", 0))
    s.ports = {sk.getsockname()[1] for sk in socks}
    s.cluster = {"worker": [f"127.0.0.1:{p}" for p in sorted(s.ports)]}
    try:
        yield s
    finally:
        for sk in socks:
            sk.close()


# ------------------------------------------------------------------------------------------------ running a case
@dataclass
class Outcome:
    code: int | None
    out: str
    err: str
    seconds: float
    crash: str = ""


class _CaseTimeout(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _CaseTimeout(f"case ran longer than {CASE_SECONDS} s")


def run_cli(argv: list[str]) -> Outcome:
    """``hgpart ARGV`` in this process, with stdout/stderr captured and a time bound."""
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    code: int | None = None
    crash = ""
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(CASE_SECONDS)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - whatever escapes main is the defect being looked for
        crash = traceback.format_exc(limit=-6)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return Outcome(code, out.getvalue(), err.getvalue(), time.perf_counter() - t0, crash)


def _leftovers(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*.tmp")]


def problem(outcome: Outcome, *, target: Path | None, reader: Callable[[Path], Any] | None, root: Path) -> str:
    """What is wrong with one case's outcome ("" when nothing)."""
    if outcome.crash:
        return "escaped main:\n" + outcome.crash
    if outcome.code not in (0, 2):
        return f"exit {outcome.code}; stderr {outcome.err[-300:]!r}"
    if "Traceback" in outcome.err or "Traceback" in outcome.out:
        return f"traceback printed: {outcome.err[-500:]!r}"
    lines = outcome.err.strip().splitlines()
    if outcome.code == 2 and (len(lines) != 1 or not lines[0].startswith("error: ")):
        return f"exit 2 with {len(lines)} stderr lines: {outcome.err[-400:]!r}"
    left = _leftovers(root)
    if left:
        return f"temporary files left: {left[:3]}"
    if target is not None and outcome.code == 2 and target.exists():
        return f"exit 2 but the output {target} exists"
    if target is not None and outcome.code == 0 and target.exists() and reader is not None:
        try:
            reader(target)
        except HgpartError as exc:
            return f"exit 0 wrote an unreadable {target}: {exc}"
    return ""


# ---------------------------------------------------------------------------------------------------- the families
@dataclass
class Case:
    family: str
    argv: list[str]
    target: Path | None = None
    reader: Callable[[Path], Any] | None = None
    api: Callable[[], Any] | None = None  # a direct call instead of argv (cluster specs)


def _write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return path


def placement_cases(rng: random.Random, s: Seeds) -> Iterator[Case]:
    docs = list(s.placements.values())
    for i in range(COUNTS["placement"]):
        base = rng.choice(docs)
        text = mutate_text(rng, json.dumps(base)) if rng.random() < 0.2 else \
            mutate_json(rng, base, donors=[d for d in docs if d is not base])
        path = _write(s.root / f"placement_{i}.json", text)
        argv = ["metrics", str(path)]
        if rng.random() < 0.2:
            argv += ["--model", rng.choice(["lenet5", "minivgg", "nosuchnet"])]
        if rng.random() < 0.1:
            argv += ["--optimizer", rng.choice(["sgd", "momentum", "adam", "rmsprop", ""])]
        yield Case("placement", argv)


def profile_cases(rng: random.Random, s: Seeds) -> Iterator[Case]:
    names = list(s.profiles)
    for i in range(COUNTS["profile"]):
        own = rng.choice(names)
        base = s.profiles[own]
        donors = [s.profiles[n] for n in names if n != own]
        text = mutate_text(rng, json.dumps(base)) if rng.random() < 0.2 else mutate_json(rng, base, donors=donors)
        path = _write(s.root / f"profile_{i}.json", text)
        model = own if rng.random() < 0.85 else rng.choice(names)  # sometimes another model's profile
        target = s.root / "out" / f"from_profile_{i}.json"
        argv = ["partition", "-m", model, "--profile", str(path), "--k", rng.choice(["2", "3"]),
                "--backend", rng.choice(FAST_BACKENDS[:3]), "--no-bound", "--out", str(target)]
        yield Case("profile", argv, target=target, reader=load_placement)


def _open_spec(path: Path, k: int, ports: set[int]) -> None:
    """What ``--devices cluster:PATH`` does, but only against the reserved, refusing loopback ports."""
    try:
        spec = parse_cluster_spec(path.read_bytes().decode("utf-8"), str(path))
    except UnicodeDecodeError:
        spec = None  # open_cluster's own reader refuses these
    if spec is not None:
        for addr in spec["worker"]:
            host, _, port = addr.rpartition(":")
            if host not in LOOPBACK or int(port) not in ports:
                return  # parsed; never probe an address the fuzzer does not own
    open_cluster(f"cluster:{path}", k, timeout=5.0)


def cluster_cases(rng: random.Random, s: Seeds) -> Iterator[Case]:
    tf_config = {"cluster": s.cluster, "task": {"type": "worker", "index": 0}}
    for i in range(COUNTS["cluster"]):
        base = rng.choice([s.cluster, tf_config, {"worker": dict(enumerate(s.cluster["worker"]))}])
        text = mutate_text(rng, json.dumps(base)) if rng.random() < 0.2 else mutate_json(rng, base)
        path = _write(s.root / f"cluster_{i}.json", text)
        k = rng.choice([1, 2, 3, 4, 0, -1])
        yield Case("cluster", [f"cluster:{path}", str(k)], api=functools.partial(_open_spec, path, k, s.ports))


_SLOW_BACKENDS = {"auto", "exact", "mtkahypar", "kahypar"}


def _last(argv: list[str], opt: str) -> str | None:
    idx = [i for i, a in enumerate(argv) if a == opt]
    return argv[idx[-1] + 1] if idx and idx[-1] + 1 < len(argv) else None


def _keep_fast(argv: list[str]) -> list[str]:
    """Append options that keep a mutated command quick (a fast backend, no bound, analytic work)."""
    cmd = argv[0] if argv else ""
    extra: list[str] = []
    if cmd == "partition":
        if _last(argv, "--backend") in _SLOW_BACKENDS or "--backend" not in argv:
            extra += ["--backend", "layerwise"]
        extra += ["--no-bound", "--time-limit", "5"]
    elif cmd == "compare":
        methods = _last(argv, "--methods")
        if methods is None or "hypergraph" in methods:
            extra += ["--methods", "layerwise"]
        extra += ["--no-bound", "--no-plots"] + ([] if "--k" in argv else ["--k", "2"])
    elif cmd in ("profile", "build") and "--analytic" not in argv:
        extra += ["--analytic"]
    return argv + extra


def argv_cases(rng: random.Random, s: Seeds) -> Iterator[Case]:
    values = ["lenet5", "minivgg", "keras:NoSuchNet", "nosuch", "missing.keras", "fine", "coarse", "patoh",
              "hmetis", "sgd", *FAST_BACKENDS, "32", "28x28x1", "16x16", str(s.placement_files[0]),
              str(s.root), str(s.placement_files[0] / "x.json")]
    for i in range(COUNTS["argv"]):
        out = s.root / "argv" / f"case_{i}"
        bases: list[tuple[list[str], Path | None, Callable[[Path], Any] | None]] = [
            (["info", "-m", "lenet5", "--input", "32x32x1"], None, None),
            (["build", "-m", "lenet5", "--analytic", "--grain", "coarse", "--k", "4", "--format", "hmetis",
              "--out", f"{out}.hgr"], Path(f"{out}.hgr"), None),
            (["partition", "-m", "lenet5", "--analytic", "--k", "2", "--backend", "layerwise", "--epsilon", "0.1",
              "--grain", "coarse", "--group", "1", "--seed", "1", "--batch-size", "8", "--out", f"{out}.json"],
             Path(f"{out}.json"), load_placement),
            (["metrics", str(rng.choice(s.placement_files)), "--optimizer", "adam"], None, None),
            (["profile", "-m", "lenet5", "--analytic", "--batch-size", "8", "--out", f"{out}.json"],
             Path(f"{out}.json"), Profile.load),
            (["compare", "-m", "lenet5", "--analytic", "--k", "2", "--methods", "layerwise", "--grains", "coarse",
              "--epsilon", "0.1", "--batch-sizes", "16", "--images", "64", "--out", str(out)], None, None),
        ]
        argv, target, reader = rng.choice(bases)
        mutated = mutate_argv(rng, argv, values=values)
        yield Case("argv", _keep_fast(mutated), target=target if target and str(target) in mutated else None,
                   reader=reader)


def run_case(case: Case, root: Path) -> tuple[str, str]:
    """(what is wrong or "", how the case ended: "exit 0", "exit 2", "refused", "accepted")."""
    if case.api is None:
        outcome = run_cli(case.argv)
        return problem(outcome, target=case.target, reader=case.reader, root=root), f"exit {outcome.code}"
    t0 = time.perf_counter()
    try:
        case.api()
    except HgpartError as exc:
        return (f"HgpartError over several lines: {str(exc)!r}" if "\n" in str(exc) else ""), "refused"
    except Exception:  # noqa: BLE001 - the defect being looked for
        return "escaped:\n" + traceback.format_exc(limit=-6), "crashed"
    if time.perf_counter() - t0 > CASE_SECONDS:
        return f"took {time.perf_counter() - t0:.1f} s", "slow"
    return "", "accepted"


# --------------------------------------------------------------------------------------------------------- tests
def test_fuzz_cli_in_process(seeds: Seeds, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(seeds.root)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(hgpart.models, "load_graph", _cached_load_graph)
    # typer rebuilds the click command tree on every call; the tree of one app never changes within the test
    monkeypatch.setattr(typer.main, "get_command", functools.cache(typer.main.get_command))
    # hgpart.cli.main ends with a full gc.collect(), to free TensorFlow's remote functions while its stderr filter is
    # up; no case here opens a worker, and a full collection of this test process's heap per case was most of the
    # test's time
    monkeypatch.setattr(hgpart.cli, "gc", types.SimpleNamespace(collect=lambda: 0))
    rng = random.Random(SEED)
    families = [placement_cases, profile_cases, cluster_cases, argv_cases]
    failures: list[str] = []
    counts: dict[str, dict[str, int]] = {}  # family -> how the cases ended -> number
    started = time.perf_counter()
    for family in families:
        for case in family(rng, seeds):
            msg, how = run_case(case, seeds.root)
            tally = counts.setdefault(case.family, {})
            tally[how] = tally.get(how, 0) + 1
            if msg:
                failures.append(f"[{case.family}] hgpart {' '.join(case.argv)[:300]}\n  {msg}")
                for p in seeds.root.rglob("*.tmp"):
                    p.unlink()  # report each case's own leftovers once
    total = sum(sum(c.values()) for c in counts.values())
    print(f"fuzz seed {SEED}: {total} cases in {time.perf_counter() - started:.1f} s, {counts}")
    assert total >= 1000
    assert not failures, f"{len(failures)} of {total} cases failed (seed {SEED}):\n" + "\n".join(failures[:8])


def _subprocess_cases(s: Seeds) -> list[list[str]]:
    afile = s.placement_files[0]
    broken = _write(s.root / "sub_truncated.json", json.dumps(s.placements["lenet5-coarse"])[:500])
    other = dict(s.placements["lenet5-coarse"], k="two")
    wrong = _write(s.root / "sub_wrongtype.json", json.dumps(other))
    return [
        ["metrics", str(broken)], ["metrics", str(wrong)], ["metrics", str(s.root)],
        ["metrics", str(afile), "--bogus"], ["partition", "-m", "lenet5"], ["nosuchcommand"],
        ["partition", "-m", "lenet5", "--analytic", "--k", "2", "--out", "/proc/hgpart_fuzz.json"],
        ["partition", "-m", "lenet5", "--analytic", "--k", "2", "--out", str(s.root)],
        ["profile", "-m", "lenet5", "--analytic", "--out", str(afile / "p.json")],
        ["partition", "-m", "lenet5", "--analytic", "--k", "2", "--time-limit", "-5"],
        ["compare", "-m", "lenet5", "--analytic", "--k", "0"],
        ["train", "-p", str(afile), "--log", "/proc/hgpart_fuzz.csv"],
    ]


def _run_subprocess(argv: list[str], cwd: Path) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    exe = Path(sys.executable).with_name("hgpart")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-c", "from hgpart.cli import main; main()"]
    return argv, subprocess.run(cmd + argv, capture_output=True, text=True, timeout=120, cwd=cwd)


def test_fuzz_cli_real_stderr_is_one_line(seeds: Seeds) -> None:
    """The same promise through a real process: exit 2, one stderr line (every case stops before TensorFlow loads)."""
    cases = _subprocess_cases(seeds)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda a: _run_subprocess(a, seeds.root), cases))
    bad = []
    for argv, proc in results:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        if proc.returncode != 2 or len(lines) != 1 or "Traceback" in proc.stderr:
            bad.append(f"hgpart {' '.join(argv)} -> exit {proc.returncode}, stderr {proc.stderr[-400:]!r}")
    assert not bad, "\n".join(bad)
    assert not _leftovers(seeds.root)
