"""Runtime reliability as a user meets it: a worker dying in every phase, Ctrl-C, bad settings, TensorFlow's noise.

Each dead-worker scenario runs ``hgpart train --devices local`` in its own client subprocess (one eager cluster
per process) through a small harness that SIGKILLs worker 1 at the start of one phase: connecting, the health
check, building the model on the workers, or the warm-up step. The harness only wraps the runtime's own
functions; the product code has no test hook. The promise checked: exit 2, exactly one line on stderr naming
the dead worker, within 30 s of the kill (generous: the machine is shared).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from hgpart.runtime import cluster

from hgpart.cli import main
from hgpart.hypergraph import build_hypergraph
from hgpart.models import load_graph
from hgpart.notes import HgpartNote
from hgpart.partitioners import partition
from hgpart.placement import Placement
from hgpart.profile import analytic_profile
from hgpart.quiet import NOISE, show_notes

B = 8
#: no TF_CPP_MIN_LOG_LEVEL: hgpart must be quiet by itself
_ENV = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"} | {
    "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "COLUMNS": "200"}

# Runs `hgpart train --devices local` and SIGKILLs worker 1 when the named phase starts (argv[1]).
_HARNESS = r"""
import os, signal, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"  # as hgpart's main sets it, but before this early import:
from hgpart import quiet
with quiet.StderrFilter():  # the import's own lines (the tensorflow wheel's CUDA stub), as the CLI filters them
    import tensorflow  # imported up front, so the time from the kill to the report excludes TensorFlow's import
import importlib
from hgpart.runtime import cluster
T = importlib.import_module("hgpart.runtime.train")  # the module (the package exports the function train)
from hgpart.runtime.step import TrainStep
from hgpart.cli import main

phase, placement = sys.argv[1], sys.argv[2]

def kill_worker_1():
    c = cluster._ACTIVE[0]
    os.kill(c.workers[1].pid, signal.SIGKILL)
    c.procs[1].wait(30)  # dead (and reaped) before the phase goes on: the phase cannot finish without it
    print(f"KILLED {time.time()}", flush=True)

def before(fn):
    def wrapped(*a, **kw):
        if not getattr(wrapped, "done", False):
            wrapped.done = True
            kill_worker_1()
        return fn(*a, **kw)
    return wrapped

if phase == "connect":
    cluster._connect = before(cluster._connect)
elif phase == "health":
    cluster._health_check = before(cluster._health_check)
elif phase == "build":
    import hgpart.runtime.api as A  # the model is placed by PartitionedModel.from_placement
    A.PlacedModel = before(A.PlacedModel)
elif phase == "warmup":
    from hgpart.runtime.evaluation import MeteredStep  # the step train warms up
    MeteredStep.warm_up = before(MeteredStep.warm_up)
try:
    main(["train", "-p", placement, "--devices", "local", "--steps", "2", "--batch-size", "8"])
finally:
    print(f"RETURNED {time.time()}", flush=True)  # the report is printed; only the interpreter's exit is left
"""


@pytest.fixture(scope="module")
def placement_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    graph = load_graph("minivgg", (16, 16, 3), 10)
    prof = analytic_profile(graph, B)
    hg = build_hypergraph(graph, prof.work(), batch_size=B, grain="coarse")
    res = partition(hg, k=2, backend="mtkahypar", epsilon=0.05, seed=0)
    pl = Placement.from_vertex_parts(graph, hg, res.parts, k=2, method="hypergraph", work=prof.work())
    return Path(pl.save(tmp_path_factory.mktemp("rel") / "minivgg_k2.json"))


def _start(phase: str, placement: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _HARNESS, phase, str(placement)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_ENV)


def _finish(proc: subprocess.Popen) -> dict:
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stamps = {ln.split()[0]: float(ln.split()[1]) for ln in out.splitlines() if ln.startswith(("KILLED ", "RETURNED "))}
    after = stamps["RETURNED"] - stamps["KILLED"] if len(stamps) == 2 else None
    return {"rc": proc.returncode, "err": err, "out": out, "after_kill": after}


def _check_dead_worker_report(run: dict) -> None:
    assert run["after_kill"] is not None, run["err"][-3000:]
    lines = run["err"].splitlines()
    assert run["rc"] == 2 and len(lines) == 1, run["err"][-3000:]
    assert lines[0].startswith("error: local worker 1 ") and "died (killed by SIGKILL)" in lines[0], lines
    assert "start_timeout" not in lines[0]
    assert run["after_kill"] < 30.0


@pytest.fixture(scope="module")
def dead_worker_runs(placement_path: Path) -> dict[str, dict]:
    """The warm-up and the connect scenarios, run at once to share the machine's TensorFlow start-up time."""
    procs = {phase: _start(phase, placement_path) for phase in ("warmup", "connect")}
    return {phase: _finish(p) for phase, p in procs.items()}


def test_worker_killed_in_warmup_is_one_line_exit_2(dead_worker_runs: dict[str, dict]) -> None:
    _check_dead_worker_report(dead_worker_runs["warmup"])


def test_worker_killed_while_connecting_is_named_within_seconds(dead_worker_runs: dict[str, dict]) -> None:
    _check_dead_worker_report(dead_worker_runs["connect"])


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["health", "build"])
def test_worker_killed_in_health_check_or_model_build(placement_path: Path, phase: str) -> None:
    _check_dead_worker_report(_finish(_start(phase, placement_path)))


# ------------------------------------------------------------------------------------- whole runs, quiet
def _hgpart(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    code = "import sys; from hgpart.cli import main; main(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                          env=env or _ENV)


@pytest.fixture(scope="module")
def quiet_runs(placement_path: Path) -> dict[str, subprocess.CompletedProcess]:
    """A local-worker run alone (its start has a deadline), then a digits run on 2 logical devices and `info`
    quiet and verbose, together."""
    code = "import sys; from hgpart.cli import main; main(sys.argv[1:])"
    loud = _ENV | {"TF_CPP_MIN_LOG_LEVEL": "0"}  # a user's setting that lets every TensorFlow line through
    jobs = {
        "local": (["train", "-p", str(placement_path), "--devices", "local", "--steps", "2", "-b", "8"], _ENV),
        "digits": (["train", "-p", str(placement_path), "--steps", "2", "-b", "8", "--dataset", "digits"], _ENV),
        "info": (["info", "--model", "lenet5"], loud),
        "info_verbose": (["--verbose", "info", "--model", "lenet5"], loud),
    }
    out = {}
    for batch in (["local"], ["digits", "info", "info_verbose"]):
        procs = {name: subprocess.Popen([sys.executable, "-c", code, *jobs[name][0]], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, env=jobs[name][1]) for name in batch}
        for name, p in procs.items():
            try:
                so, se = p.communicate(timeout=300)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            out[name] = subprocess.CompletedProcess(p.args, p.returncode, so, se)
    return out


def test_local_workers_run_writes_nothing_to_stderr(quiet_runs: dict[str, subprocess.CompletedProcess]) -> None:
    run = quiet_runs["local"]
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stderr == ""  # no "Failed to remove function remotely", no absl preamble
    assert "2 steps" in run.stdout


def test_digits_on_two_logical_devices_trains(quiet_runs: dict[str, subprocess.CompletedProcess]) -> None:
    run = quiet_runs["digits"]
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stderr == "" and "2 steps" in run.stdout


def test_tensorflow_quiet_by_default_and_verbose_restores_it(
        quiet_runs: dict[str, subprocess.CompletedProcess]) -> None:
    quiet, verbose = quiet_runs["info"], quiet_runs["info_verbose"]
    assert quiet.returncode == verbose.returncode == 0, quiet.stderr + verbose.stderr
    assert quiet.stderr == ""
    assert quiet.stdout == verbose.stdout
    assert any(NOISE.match(ln) for ln in verbose.stderr.splitlines()), verbose.stderr


# ------------------------------------------------------------------------------------- Ctrl-C
_INTERRUPT = r"""
import os, signal, sys
from hgpart.runtime.step import TrainStep
from hgpart.cli import main

def ctrl_c(self, x, y):
    os.kill(os.getpid(), signal.SIGINT)  # as a terminal's Ctrl-C would, in the warm-up step
    return 0.0

TrainStep.warm_up = ctrl_c
main(["train", "-p", sys.argv[1], "--steps", "2", "--batch-size", "8"])
"""


def test_ctrl_c_prints_one_line_and_exits_130(placement_path: Path) -> None:
    run = subprocess.run([sys.executable, "-c", _INTERRUPT, str(placement_path)], capture_output=True, text=True,
                         timeout=300, env=_ENV)
    assert run.returncode == 130, run.stderr[-3000:]
    assert run.stderr.splitlines() == ["interrupted (Ctrl-C); stopped"]


def test_ignored_sigint_stays_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """A background job inherits SIGINT ignored: opening workers must not start acting on it."""
    monkeypatch.setattr(cluster, "_HOOKS_INSTALLED", False)
    monkeypatch.setattr(cluster.atexit, "register", lambda fn: None)
    old_int, old_term = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        cluster._install_hooks()
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) != old_term  # SIGTERM (not ignored) is still hooked
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


# ------------------------------------------------------------------------------------- notes
def test_core_sharing_is_a_typed_note(monkeypatch: pytest.MonkeyPatch) -> None:
    class Stop(Exception):
        pass

    def no_start(*a: object, **kw: object) -> None:
        raise Stop

    monkeypatch.setattr(cluster, "_start_local", no_start)
    monkeypatch.setattr(cluster, "_install_hooks", lambda: None)
    with pytest.warns(HgpartNote, match="3 local workers on 1 cores"), pytest.raises(Stop):
        cluster.open_local(3, cores=[0])


def test_note_prints_as_one_line_without_source_path() -> None:
    import io

    buf = io.StringIO()
    saved = warnings.showwarning
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            show_notes(buf)
            warnings.warn(HgpartNote("2 local workers on 1 cores: cores are shared"), stacklevel=1)
    finally:
        warnings.showwarning = saved
    assert buf.getvalue() == "note: 2 local workers on 1 cores: cores are shared\n"


# ------------------------------------------------------------------------------------- bad settings
@pytest.mark.parametrize(("args", "where"), [
    (["--steps", "-3"], "--steps"),
    (["--epochs", "0"], "--epochs"),
    (["--epochs", "-1"], "--epochs"),
    (["--epochs", "nan"], "--epochs"),
    (["--inflight", "-1"], "--inflight"),
    (["--batch-size", "-4"], "--batch-size"),
    (["--lr", "0"], "--lr"),
    (["--lr", "-0.1"], "--lr"),
])
def test_bad_train_settings_are_one_line_exit_2(placement_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch, args: list[str], where: str) -> None:
    import importlib

    def no_devices(*a: object, **kw: object) -> None:
        raise AssertionError("devices opened before the settings were checked")

    monkeypatch.setattr(importlib.import_module("hgpart.runtime.train"), "open_devices", no_devices)
    with pytest.raises(SystemExit) as exc:
        main(["train", "-p", str(placement_path), *args])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and f"in {where}" in lines[0], err

