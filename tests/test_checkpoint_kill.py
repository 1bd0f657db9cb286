"""Checkpoints against real kills: a process SIGKILLed while it writes one, and a local worker SIGKILLed mid-run.

Each scenario runs in its own subprocess (one eager TensorFlow context per process) through a small harness that
only wraps the runtime's own functions; the product code has no test hook. Promises checked:

* killed mid-write (at every stage of a save, and at a random moment of a save loop): the previous checkpoint is
  still the newest complete one, with exactly the values it was saved with, and a resume loads it;
* a dead local worker: ``hgpart train`` exits 2 within 30 s of the kill with one line naming the worker and the
  newest checkpoint, no worker process is left, and ``--resume`` continues from that checkpoint (the run lost
  at most the ``--checkpoint-every`` steps since it).
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hgpart.runtime.checkpoint import list_checkpoints, newest_checkpoint, read_keras_layout
from test_checkpoint import compile_minivgg
from test_runtime_reliability import _ENV, _check_dead_worker_report, _finish

from hgpart.placement import Placement, load_placement


@pytest.fixture(scope="module")
def placement_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(compile_minivgg("coarse", 2).save(tmp_path_factory.mktemp("ckill") / "minivgg_k2.json"))


# ----------------------------------------------------------------------------------------- killed mid-write
# Builds the partitioned model on 2 logical devices, trains and saves checkpoint 1, then dies in save 2 at the
# stage named by argv[3] ("loop": saves forever, printing SAVING n / SAVED n checksum; the test kills it).
_WRITER = r"""
import json, os, signal, sys
from pathlib import Path
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
from hgpart.runtime.devices import open_devices
ds = open_devices("logical", 2)
import numpy as np
from hgpart.runtime import checkpoint as C
from hgpart.runtime.partitioned import PlacedModel
from hgpart.runtime.step import OptimizerSpec, TrainStep
from hgpart.runtime.train import build_for_placement
from hgpart.placement import load_placement

placement, folder, stage = sys.argv[1], sys.argv[2], sys.argv[3]
pl = load_placement(placement)
pm = PlacedModel(pl, build_for_placement(pl, seed=0), ds.devices)
step = TrainStep(pm, OptimizerSpec("adam", 1e-2), batch_size=8)
rng = np.random.default_rng(0)
keeper = C.Checkpointer(C.CheckpointSettings(Path(folder), every=1), pm, step, ds,
                        key=C.ResumeKey(seed=0, batch_size=8, optimizer="adam", samples=64))

def train_and_save(n):
    step(rng.normal(size=(8, 16, 16, 3)).astype(np.float32), rng.integers(0, 10, 8).astype(np.int32))
    total = sum(float(np.sum(w, dtype=np.float64)) for ws in pm.keras_weights().values() for w in ws.values())
    print(f"SAVING {n} {total!r}", flush=True)
    keeper.save(n)
    print(f"SAVED {n} {total!r}", flush=True)

def die(*a, **kw):
    os.kill(os.getpid(), signal.SIGKILL)

def half_manifest(path, data):  # a manifest write torn half-way (as if the file system were not atomic)
    text = json.dumps(data)
    Path(path).write_text(text[: len(text) // 2])
    die()

train_and_save(1)
if stage == "state":      # the tensors are written, the layout and manifest are not
    C.atomic_write_bytes = die
elif stage == "manifest":
    C.write_json = half_manifest
elif stage == "rename":   # complete in tmp-2, killed before the rename
    C._fsync_dir = die
n = 2
while True:
    train_and_save(n)
    n += 1
"""


def _writer(placement: Path, folder: Path, stage: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _WRITER, str(placement), str(folder), stage],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_ENV)


def _saved_sums(out: str) -> dict[int, float]:
    # the checksum is printed before the save starts too: a kill can land after the checkpoint is complete and
    # before SAVED is printed, and that checkpoint must still hold exactly these weights
    return {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"^SAV(?:ING|ED) (\d+) (\S+)$", out, re.M)}


def _check_newest_is_intact(folder: Path, pl: Placement, sums: dict[int, float]) -> int:
    """The newest complete checkpoint holds exactly the weights it was saved with; returns its step."""
    newest = newest_checkpoint(folder)
    assert newest is not None, sorted(p.name for p in folder.iterdir())
    path, man = newest
    weights = read_keras_layout(path, pl.graph, man)
    total = sum(float(np.sum(w, dtype=np.float64)) for (_, _, s), w in weights.items() if s == -1)
    assert total == pytest.approx(sums[man.step], rel=1e-12, abs=1e-9)
    return man.step


def test_killed_at_every_stage_of_a_save_leaves_the_previous_checkpoint(placement_path: Path,
                                                                        tmp_path: Path) -> None:
    pl = load_placement(placement_path)
    procs = {stage: _writer(placement_path, tmp_path / stage, stage) for stage in ("state", "manifest", "rename")}
    for stage, p in procs.items():
        out, err = p.communicate(timeout=300)
        assert p.returncode == -signal.SIGKILL, (stage, err[-2000:])
        assert "SAVING 2" in out and "SAVED 2" not in out, (stage, out)
        folder = tmp_path / stage
        assert (folder / "tmp-2").is_dir()  # the killed write's leftovers ...
        assert [m.step for _, m in list_checkpoints(folder)] == [1]  # ... are not a checkpoint
        assert _check_newest_is_intact(folder, pl, _saved_sums(out)) == 1


def test_killed_at_a_random_moment_of_a_save(placement_path: Path, tmp_path: Path) -> None:
    """SIGKILL lands somewhere inside the 4th save (timed from the previous saves' duration)."""
    pl = load_placement(placement_path)
    p = _writer(placement_path, tmp_path, "loop")
    assert p.stdout is not None
    started: dict[int, float] = {}
    took: list[float] = []
    lines: list[str] = []
    try:
        for line in p.stdout:
            lines.append(line)
            words = line.split() or [""]
            if words[0] == "SAVING":
                started[int(words[1])] = time.monotonic()
                if int(words[1]) == 4:
                    time.sleep(random.Random(os.getpid()).uniform(0.0, min(took)))
                    p.send_signal(signal.SIGKILL)
                    break
            elif words[0] == "SAVED":
                took.append(time.monotonic() - started[int(words[1])])
    finally:
        if p.poll() is None:
            p.kill()
        rest, _ = p.communicate(timeout=60)
    step = _check_newest_is_intact(tmp_path, pl, _saved_sums("".join(lines) + rest))
    assert step in (3, 4)  # 4 only if the kill came after its rename
    assert len(list_checkpoints(tmp_path)) >= 2


# ----------------------------------------------------------------------------------------- dead worker
# `hgpart train --devices local` with checkpoints every 4 steps; worker 1 is SIGKILLed right after the
# checkpoint of step 8 is written, while the run goes on to step 40.
_DEAD = r"""
import os, signal, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
from hgpart import quiet
with quiet.StderrFilter():  # the import's own lines (the tensorflow wheel's CUDA stub), as the CLI filters them
    import tensorflow  # imported up front, so the time from the kill to the report excludes TensorFlow's import
from hgpart.runtime import checkpoint, cluster
from hgpart.cli import main

placement, folder = sys.argv[1], sys.argv[2]
save = checkpoint.Checkpointer.save

def save_then_kill(self, done):
    out = save(self, done)
    if done == 8:
        c = cluster._ACTIVE[0]
        print("PIDS", os.getpid(), *[w.pid for w in c.workers], flush=True)  # the client, then its workers
        os.kill(c.workers[1].pid, signal.SIGKILL)
        c.procs[1].wait(30)
        print(f"KILLED {time.time()}", flush=True)
    return out

checkpoint.Checkpointer.save = save_then_kill
try:
    main(["train", "-p", placement, "--devices", "local", "--steps", "40", "-b", "8", "--mode", "sync",
          "--checkpoint-dir", folder, "--checkpoint-every", "4"])
finally:
    print(f"RETURNED {time.time()}", flush=True)
"""


def _running(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie waiting to be reaped has stopped running)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return not re.search(r"^State:\s+Z", status, re.M)


def _workers_of(client: int) -> list[int]:
    """PIDs of running hgpart worker processes started by the client process ``client``."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                argv = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(a.endswith(b"worker.py") for a in argv) and str(client).encode() in argv and _running(int(d.name)):
                found.append(int(d.name))
    return found


def test_dead_worker_names_newest_checkpoint_and_resume_continues(placement_path: Path, tmp_path: Path) -> None:
    folder = tmp_path / "ck"
    run = _finish(subprocess.Popen([sys.executable, "-c", _DEAD, str(placement_path), str(folder)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_ENV))
    _check_dead_worker_report(run)  # exit 2, one line naming worker 1, within 30 s of the kill
    line = run["err"].strip()
    newest = folder / "ckpt-8"
    assert f"--resume (newest checkpoint {newest}, step 8)" in line, line
    client, *workers = [int(w) for ln in run["out"].splitlines() if ln.startswith("PIDS") for w in ln.split()[1:]]
    assert len(workers) == 2
    time.sleep(1.0)
    assert not [w for w in workers if _running(w)] and not _workers_of(client)
    assert [m.step for _, m in list_checkpoints(folder)] == [8, 4]
    # the run lost the steps after 8 only (< --checkpoint-every); --resume continues from 8 to the end
    res = subprocess.run([sys.executable, "-c", "import sys; from hgpart.cli import main; main(sys.argv[1:])",
                          "train", "-p", str(placement_path), "--devices", "local", "--steps", "12", "-b", "8",
                          "--mode", "sync", "--checkpoint-dir", str(folder), "--checkpoint-every", "4", "--resume"],
                         capture_output=True, text=True, timeout=300, env=_ENV)
    assert res.returncode == 0 and res.stderr == "", res.stderr[-3000:]
    assert "\n4 steps, 32 images" in "\n" + res.stdout, res.stdout  # steps 8..11 only
    assert "12/12" in res.stdout  # the progress bar counts the run's steps from the checkpoint on
    assert f"checkpoint: {folder / 'ckpt-12'} (step 12" in res.stdout
