"""Run a (Mt-)KaHyPar child process on a scaled hypergraph and read its partition back.

Usage::

    parts, info = run_child("kahypar", sh, k=4, epsilon=0.1, seed=1, config=ini_path)

Shared by both backends: writes the hMetis file to a private temporary
folder, starts ``python -m hgpart.partitioners._kahypar_child``, enforces the
time limit by killing the child, and turns any failure (crash, ``exit()``,
timeout, unreadable output) into one :class:`HgpartError`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from hgpart.errors import HgpartError
from hgpart.formats import write_hmetis
from hgpart.hypergraph import Hypergraph
from hgpart.partitioners._interrupt import CANCEL, POLL
from hgpart.partitioners.base import PartitionResult
from hgpart.partitioners.scaling import ScaledHypergraph, scale_hypergraph

__all__ = ["run_child", "partition_in_child"]


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGTERM it when the parent dies, so no orphan keeps running."""
    import ctypes
    import signal

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG = 1
    except OSError:
        pass


def _run_until_done(cmd: list[str], env: dict[str, str], d: Path,
                    time_limit: float | None) -> tuple[int | None, str, str]:
    """Run ``cmd``; (exit code or None on the time limit, stdout, stderr). Killed at once when interrupted.

    The wait is sliced (:data:`._interrupt.POLL`) so that a signal reaches
    the caller and a cancelled run does not leave the child working.
    """
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    with open(d / "stdout.txt", "w", encoding="utf-8") as out, open(d / "stderr.txt", "w", encoding="utf-8") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env,
                                preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        try:
            while proc.poll() is None:
                if CANCEL.is_set():
                    raise HgpartError("the partitioner child process was interrupted", fix="run the command again")
                if deadline is not None and time.perf_counter() >= deadline:
                    return None, "", ""
                try:
                    proc.wait(timeout=POLL)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return (proc.returncode, (d / "stdout.txt").read_text(errors="replace"),
            (d / "stderr.txt").read_text(errors="replace"))


def run_child(
    tool: str,
    sh: ScaledHypergraph,
    *,
    k: int,
    epsilon: float,
    seed: int,
    config: str,
    threads: int = 1,
    time_limit: float | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Partition ``sh`` with ``tool`` in a child process; returns (parts, child info incl. ``km1``)."""
    with tempfile.TemporaryDirectory(prefix="hgpart-") as tmp:
        d = Path(tmp)
        t0 = time.perf_counter()
        write_hmetis(sh, d / "graph.hgr")
        write_seconds = time.perf_counter() - t0
        cmd = [
            sys.executable, "-m", "hgpart.partitioners._kahypar_child",
            "--tool", tool, "--hgr", str(d / "graph.hgr"), "--k", str(k), "--epsilon", repr(float(epsilon)),
            "--seed", str(int(seed)), "--config", config, "--threads", str(int(threads)),
            "--parts", str(d / "parts.bin"), "--result", str(d / "result.json"),
        ]
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", str(threads))
        returncode, stdout, stderr = _run_until_done(cmd, env, d, time_limit)
        if returncode is None:
            raise HgpartError(
                f"{tool} did not finish within the time limit of {time_limit:g} s",
                where=f"{sh.num_vertices}-vertex hypergraph, K = {k}",
                fix="raise --time-limit, use a coarser grain or --group, or use --backend mtkahypar",
            )
        if returncode != 0 or not (d / "result.json").is_file():
            tail = (stderr.strip().splitlines() or stdout.strip().splitlines() or ["no output"])[-1]
            raise HgpartError(
                f"{tool} failed (exit code {returncode}): {tail[:200]}",
                where=f"{sh.num_vertices}-vertex hypergraph, K = {k}, epsilon = {epsilon}",
                fix="check the hypergraph with `hgpart build`; report the model if it persists",
            )
        info = json.loads((d / "result.json").read_text())
        parts = np.fromfile(d / "parts.bin", dtype="<i4").astype(np.int64)
    if parts.shape != (sh.num_vertices,) or (parts.size and (parts.min() < 0 or parts.max() >= k)):
        raise HgpartError(f"{tool} returned a malformed partition ({parts.size} entries)",
                          fix="report this with the model and K")
    info["write_seconds"] = write_seconds
    return parts, info


def partition_in_child(
    tool: str, hg: Hypergraph, *, k: int, epsilon: float, seed: int, config: str, preset: str, threads: int,
    deterministic: bool, time_limit: float | None,
) -> PartitionResult:
    """Scale ``hg``, run ``tool`` in a child process and wrap its answer as a PartitionResult.

    Both KaHyPar and Mt-KaHyPar go through here, so their provenance (tool
    version, scaling, threads, determinism, file hand-off times) is recorded alike.
    """
    sh = scale_hypergraph(hg, k=k, epsilon=epsilon)
    parts, info = run_child(tool, sh, k=k, epsilon=epsilon, seed=seed, config=config, threads=threads,
                            time_limit=time_limit)
    return PartitionResult(
        parts=parts,
        backend=tool,
        seconds=float(info["seconds"]),
        preset=preset,
        backend_objective=float(info["km1"]),
        objective_scale=sh.cost_scale,
        info={
            "tool_version": info["version"],
            "cost_exact": sh.cost_exact,
            "weight_scale": sh.weight_scale,
            "threads": threads,
            "deterministic": deterministic,
            "hmetis_write_seconds": info["write_seconds"],
            "hmetis_read_seconds": info["read_seconds"],
        },
    )
