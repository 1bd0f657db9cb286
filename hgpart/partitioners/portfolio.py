"""A portfolio of Mt-KaHyPar runs (several graphs, several seeds) on a pool of one-thread workers, to a deadline.

Usage::

    from hgpart.partitioners.portfolio import Candidate, run_portfolio
    graphs = [Candidate("side16", small, vmap), Candidate("side32", mid, vmap2)]
    runs = run_portfolio(graphs, k=64, epsilon=0.1, seconds=8.0, refine_share=0.3)
    best = min(runs, key=lambda r: r.km1_bytes)    # best.parts are on graphs[best.graph].hg

Why: on CNN hypergraphs one Mt-KaHyPar QUALITY run varies a lot from seed
to seed, and the best grouping depends on K (figures in
``benchmarks/results/partition_quality/README.md``). Many short runs on
small grouped graphs, the best kept, beat one long run on the whole graph:
the ungrouped graph needs minutes per run, a small grouped graph under a
second.

How: ``workers`` child processes (default: the Mt-KaHyPar thread count, one
per core) each run Mt-KaHyPar on one thread (deterministic for a seed), load
every graph's hMetis file once and take jobs over a pipe: partition with a
seed, or V-cycles from a given partition (``improve_partition``). The parent
hands out jobs round-robin over the graphs (seed 1 on every graph first,
then seed 2, ...), starts no job its graph's slowest run so far could not
finish before the deadline, and after ``1 - refine_share`` of the time
refines the best results. At the deadline the workers are killed: a run in
flight is lost, every finished one is kept. Which runs finish depends on the
machine's speed, so two calls return the same best only when the same runs
complete; each run itself is reproducible.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hgpart.errors import HgpartError
from hgpart.formats import write_hmetis
from hgpart.hypergraph import Hypergraph
from hgpart.partitioners._subprocess import _die_with_parent
from hgpart.partitioners.mtkahypar_backend import PRESETS, resolve_preset, thread_count
from hgpart.partitioners.scaling import scale_hypergraph

__all__ = ["Candidate", "Run", "Job", "run_portfolio", "worker_count", "refine"]

#: partition runs per graph at most (a portfolio call is bounded even with a huge time limit)
MAX_SEEDS = 24
#: seconds between looks at the ``stop`` event while jobs run
STOP_POLL = 0.2


@dataclass
class Candidate:
    """One graph of the portfolio and how its vertices map to the caller's graph (None = same graph)."""

    name: str
    hg: Hypergraph
    to_full: np.ndarray | None = None
    seeds: int = 1_000_000  # at most this many partition runs of this graph


@dataclass
class Run:
    """One finished job: which graph, how, its km1 in bytes (the backend's own, exact costs) and its parts."""

    graph: int
    kind: str  # "partition" | "refine"
    seed: int
    km1_bytes: float
    imbalance: float
    seconds: float
    parts: np.ndarray = field(repr=False)
    origin: int = -1  # refine: index of the run it started from

    @property
    def label(self) -> str:
        return f"s{self.seed}" if self.kind == "partition" else f"s{self.seed}+vcycles"


def worker_count(threads: int | None = None) -> int:
    """One worker per core Mt-KaHyPar may use: ``threads``, default :data:`.mtkahypar_backend.DEFAULT_THREADS`."""
    return thread_count(threads)


def _spawn(err: Path) -> subprocess.Popen[str]:
    """One worker; its stderr goes to a file (a pipe nobody reads could fill up and block it)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with open(err, "w", encoding="utf-8") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "hgpart.partitioners._portfolio_worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=fh, text=True, bufsize=1, env=env,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )


@dataclass
class Job:
    """One unit of work for a worker: a partition run with a seed, or V-cycles from a given partition."""

    op: str  # "partition" | "refine"
    graph: int
    seed: int
    init: str = ""  # refine: file of the starting parts
    vcycles: int = 0
    origin: int = -1  # refine: index of the run it starts from, or -2 - j for starts[j]

    @property
    def slot(self) -> int:
        """Key of the slowest-run estimate: (graph, op)."""
        return (self.graph << 1) | (self.op == "refine")

    def wire(self, job_id: int, d: Path, base: dict[str, object]) -> dict[str, object]:
        """The JSON object a worker reads."""
        out: dict[str, object] = {"op": self.op, "graph": self.graph, "seed": self.seed, "id": job_id,
                                  "hgr": str(d / f"g{self.graph}.hgr"), "out": str(d / f"out{job_id}.bin"), **base}
        if self.op == "refine":
            out.update(init=self.init, vcycles=self.vcycles, origin=self.origin)
        return out


class _Workers:
    """The worker processes, their pipes and a selector over their answers."""

    def __init__(self, d: Path, n: int) -> None:
        self.d = d
        self.procs = [_spawn(d / f"worker{w}.err") for w in range(n)]
        self.sel = selectors.DefaultSelector()
        for w, p in enumerate(self.procs):
            assert p.stdout is not None
            self.sel.register(p.stdout, selectors.EVENT_READ, w)

    def send(self, w: int, job: dict[str, object]) -> None:
        stdin = self.procs[w].stdin
        assert stdin is not None
        stdin.write(json.dumps(job) + "\n")
        stdin.flush()

    def answer(self, w: int, k: int) -> dict[str, float]:
        """The next answer line of worker ``w``; HgpartError when it died."""
        stdout = self.procs[w].stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            self.procs[w].wait(timeout=5)
            err = (self.d / f"worker{w}.err").read_text()[-300:].strip().splitlines() or ["no output"]
            raise HgpartError(f"Mt-KaHyPar worker stopped: {err[-1]}", where=f"K = {k}",
                              fix="report this with the model")
        ans: dict[str, float] = json.loads(line)
        return ans

    def close(self) -> None:
        """Kill what still runs and reap every worker."""
        self.sel.close()
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait()
            for s in (p.stdin, p.stdout):
                if s is not None:
                    s.close()


@dataclass
class _Schedule:
    """What the parent decides: each worker's queue, the phase (partition, then refine) and run-time estimates.

    Static queues: job j goes to worker j % n, so each worker's sequence of
    runs is fixed up to the jobs skipped for time (a worker's runs depend on
    what it ran before: Mt-KaHyPar keeps state between runs that set_seed
    does not reset).
    """

    d: Path
    queues: list[deque[Job]]
    base: dict[str, object]
    deadline: float
    refine_at: float
    epsilon: float
    vcycles: int
    seed0: int
    starts: list[tuple[int, np.ndarray, float]]
    runs: list[Run] = field(default_factory=list)
    slowest: dict[int, float] = field(default_factory=dict)
    running: dict[int, tuple[Job, dict[str, object], float]] = field(default_factory=dict)
    refining: bool = False
    n_jobs: int = 0
    skip_for_time: bool = True  # False: every planned job runs (the deterministic mode); only the deadline stops

    @classmethod
    def plan(cls, graphs: list[Candidate], n_workers: int, seed0: int, **kw: object) -> _Schedule:
        """Partition jobs round-robin over the graphs: every graph's first seed, then the second, ..."""
        queues: list[deque[Job]] = [deque() for _ in range(n_workers)]
        j = 0
        for seed in range(seed0, seed0 + min(max((c.seeds for c in graphs), default=0), MAX_SEEDS)):
            for i, c in enumerate(graphs):
                if seed - seed0 < c.seeds:
                    queues[j % n_workers].append(Job("partition", i, seed))
                    j += 1
        return cls(queues=queues, seed0=seed0, **kw)  # type: ignore[arg-type]

    def start_refining(self) -> None:
        """Refinements go first; what is left of the partition runs follows if time remains."""
        self.refining = True
        n = len(self.queues)
        refine = _refine_jobs(self.runs, self.starts, self.d, self.vcycles, n, self.epsilon, self.seed0)
        for i, job in reversed(list(enumerate(refine))):
            self.queues[i % n].appendleft(job)

    def next_job(self, w: int, now: float) -> tuple[Job, dict[str, object]] | None:
        """Worker ``w``'s next job that can finish in its phase (by its graph's slowest run so far)."""
        if not self.refining and now >= self.refine_at:
            self.start_refining()
        limit = self.deadline if self.refining else self.refine_at
        while self.queues[w]:
            job = self.queues[w].popleft()
            est = self.slowest.get(job.slot)
            if self.skip_for_time and est is not None and now + est > limit + (0.0 if self.refining else 0.5 * est):
                continue
            self.n_jobs += 1
            return job, job.wire(self.n_jobs, self.d, self.base)
        return None

    def finish(self, w: int, ans: dict[str, float], scales: list[float]) -> None:
        """Record worker ``w``'s answer to its running job as a :class:`Run`."""
        job, wire, started = self.running.pop(w)
        took = time.perf_counter() - started
        self.slowest[job.slot] = max(self.slowest.get(job.slot, 0.0), took)
        parts = np.fromfile(str(wire["out"]), dtype="<i4").astype(np.int64)
        self.runs.append(Run(graph=job.graph, kind=job.op, seed=job.seed, km1_bytes=ans["km1"] * scales[job.graph],
                             imbalance=ans["imbalance"], seconds=took, parts=parts, origin=job.origin))


def run_portfolio(
    graphs: list[Candidate],
    *,
    k: int,
    epsilon: float,
    seconds: float,
    preset: str = "quality",
    workers: int | None = None,
    refine_share: float = 0.3,
    vcycles: int = 2,
    starts: list[tuple[int, np.ndarray, float]] | None = None,
    seed0: int = 1,
    stop: threading.Event | None = None,
    deterministic: bool = False,
) -> list[Run]:
    """Every run that finished within ``seconds`` (see the module docstring).

    ``deterministic``: no job is skipped because its graph's runs so far
    suggest it would not finish in time; with ``refine_share=0`` the
    refinements start once every partition run is done. If nothing is cut
    off by ``seconds``, the runs are then the same on any machine (for the
    same ``workers``).

    ``stop``: once it is set and one partition run has finished, the portfolio
    ends early like at its deadline (the caller no longer needs more seeds,
    e.g. a partitioner it ran beside has finished).

    ``starts`` are extra (graph index, parts, km1 bytes) the refinement phase
    may start from (e.g. a lifted exact placement); they compete with the
    portfolio's own results by km1. A refine run's ``origin`` is the index of
    the run it started from, or ``-2 - j`` for ``starts[j]``.
    """
    t0 = time.perf_counter()
    n_workers = max(1, workers or worker_count())
    with tempfile.TemporaryDirectory(prefix="hgpart-portfolio-") as tmp:
        d = Path(tmp)
        pool = _Workers(d, n_workers)  # they import while files are written
        try:
            scales = []
            for i, c in enumerate(graphs):
                sh = scale_hypergraph(c.hg, k=k, epsilon=epsilon)
                write_hmetis(sh, d / f"g{i}.hgr")
                scales.append(sh.cost_scale)
            base = {"k": k, "epsilon": float(epsilon), "preset": PRESETS[resolve_preset(preset)]}
            sched = _Schedule.plan(graphs, n_workers, seed0, d=d, base=base, deadline=t0 + max(seconds, 0.0),
                                   refine_at=t0 + max(seconds, 0.0) * (1.0 - refine_share), epsilon=epsilon,
                                   vcycles=vcycles, starts=starts or [], skip_for_time=not deterministic)
            _drive(sched, pool, scales, k, stop)
        finally:
            pool.close()
    return sched.runs


def _drive(sched: _Schedule, pool: _Workers, scales: list[float], k: int, stop: threading.Event | None) -> None:
    """Hand out jobs and collect answers until the deadline, ``stop`` or no work is left."""

    def assign(w: int) -> None:
        nxt = sched.next_job(w, time.perf_counter())
        if nxt is not None:
            pool.send(w, nxt[1])
            sched.running[w] = (nxt[0], nxt[1], time.perf_counter())

    n_workers = len(pool.procs)
    for w in range(n_workers):
        assign(w)
    while sched.running or not sched.refining:
        now = time.perf_counter()
        if now >= sched.deadline or (stop is not None and stop.is_set()
                                     and any(r.kind == "partition" for r in sched.runs)):
            break
        if not sched.refining and (now >= sched.refine_at or not sched.running):
            # refinement starts on time, or early when every worker has run out of partition jobs
            sched.refine_at = min(sched.refine_at, now)
            for w in range(n_workers):
                if w not in sched.running:
                    assign(w)
            if not sched.running:
                break
            continue
        wake = max(min(sched.deadline, sched.refine_at if not sched.refining else sched.deadline) - now, 0.0)
        for key, _ in pool.sel.select(timeout=wake if stop is None else min(wake, STOP_POLL)):
            w = key.data
            sched.finish(w, pool.answer(w, k), scales)
            assign(w)


def _refine_jobs(runs: list[Run], starts: list[tuple[int, np.ndarray, float]], d: Path, vcycles: int,
                 n: int, epsilon: float, seed0: int) -> list[Job]:
    """V-cycle jobs from the ``n`` best starting points: balanced portfolio results and the given starts by km1."""
    pool = [(r.imbalance > epsilon + 1e-3, r.km1_bytes, r.graph, r.parts, r.seed, i)
            for i, r in enumerate(runs) if r.kind == "partition"]
    pool += [(False, km1, g, parts, seed0, -2 - j) for j, (g, parts, km1) in enumerate(starts)]
    pool.sort(key=lambda t: (t[0], t[1], t[2], t[4], t[5]))  # ties by graph, seed: not by finishing order
    jobs = []
    for j, (_, _, g, parts, seed, origin) in enumerate(pool[:n]):
        path = d / f"init{j}.bin"
        parts.astype("<i4").tofile(path)
        jobs.append(Job("refine", g, seed, init=str(path), vcycles=vcycles, origin=origin))
    return jobs


def refine(hg: Hypergraph, parts: np.ndarray, *, k: int, epsilon: float, seed: int = 1, preset: str = "quality",
           vcycles: int = 2, time_limit: float | None = None) -> np.ndarray:
    """Parts after ``vcycles`` Mt-KaHyPar V-cycles (``improve_partition``) from ``parts``; ``parts`` on a timeout.

    Why: a general-purpose partitioner started from scratch misses the layer
    structure the exact program found; V-cycles from that solution keep it
    and move single vertices the count model cannot express. Callers keep the
    result only when our own km1 improves and the balance holds.
    """
    parts = np.asarray(parts, dtype=np.int64)
    runs = run_portfolio([Candidate("graph", hg, None, seeds=0)], k=k, epsilon=epsilon, preset=preset, workers=1,
                         seconds=1e9 if time_limit is None else time_limit, refine_share=1.0, vcycles=vcycles,
                         starts=[(0, parts, 0.0)], seed0=seed)
    done = [r.parts for r in runs if r.kind == "refine"]
    if done and (done[0].shape != parts.shape or done[0].min() < 0 or done[0].max() >= k):
        raise HgpartError("Mt-KaHyPar refinement returned a malformed partition", fix="report this with the model")
    return done[0] if done else parts
