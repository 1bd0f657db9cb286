"""Real parallel devices: local TensorFlow worker processes, or an existing cluster of hosts.

Usage::

    from hgpart.runtime.cluster import open_local, guarded
    with open_local(2) as ds:                  # 2 pinned worker processes on 127.0.0.1
        with tf.device(ds.devices[1]):
            y = tf.matmul(x, x)                # runs in worker process 1
        loss = guarded(ds, train_step, batch)  # bounded-time: a dead worker -> HgpartError, never a hang

Why processes: logical CPU devices in one process share one thread pool, so they are placement labels only.
Each local worker is its own process running ``tf.distribute.Server`` (see ``runtime/worker.py``), pinned to its
own core(s) with ``os.sched_setaffinity``, with ``intra_op`` = its core count and ``inter_op`` >= the batches in
flight. The client joins with ``tf.config.experimental_connect_to_cluster`` as job ``"client"``; its own CPU
(``/job:client/replica:0/task:0/device:CPU:0``) feeds batches and is ``DeviceSet.host``.

Life cycle guarantees:

* Start: free ports are reserved by binding K sockets at once (so they are distinct), released, and handed to
  the workers; a worker that loses the port race exits with a message and the whole start is retried (3 times).
  Every worker must print its ready line within ``start_timeout``; then the client has ``start_timeout`` again
  to connect and to see every worker answer a tiny op on its device (the client's own TensorFlow start-up
  falls in this second budget; a worker that dies meanwhile is reported at once, see below). Else one
  :class:`HgpartError` (with the worker's last stderr line) is raised and every started process is killed.
* Stop, by PID: on ``close()``, on leaving ``with``, at interpreter exit (``atexit``), on SIGINT/SIGTERM (the
  previous handler then runs, so Ctrl-C still raises ``KeyboardInterrupt``; a signal the process ignores, as a
  background job ignores SIGINT, stays ignored), and on any start error.
* Client death, even SIGKILL: each worker holds ``PR_SET_PDEATHSIG`` and reads a stdin pipe whose other end only
  the client holds; either one ends the worker within a second.
* A worker that dies after its ready line (while connecting, in the health check, or mid-run): a monitor thread
  notices within ~0.25 s (local: ``Popen.poll``; remote: a TCP probe of its address fails 3 times in a row),
  records one HgpartError naming that worker, and stops the other local workers.
  Measured on TF 2.21: after a worker dies, an eager op that needs a tensor from it can block *forever* in
  TensorFlow's C++ code even after every worker is gone, so no in-thread timeout can rescue it. Hence
  :func:`guarded`: it runs a call in a helper thread and returns its result, or raises the recorded failure
  within ``grace`` seconds of the death (the stuck helper thread is abandoned; it is a daemon thread).

TensorFlow allows one eager cluster connection per process at a time. Opening another cluster later in the
same process reconnects (``set_server_def``), which invalidates every tensor and variable handle that lived on
the previous cluster: build models after opening the devices. Opening a second cluster while one is still
open is refused with a clear error (close the first one). :func:`open_cluster` never starts or stops remote
processes; it validates the spec, probes every address, connects and health-checks.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

from hgpart.runtime.deviceset import DeviceSet

from hgpart.allocator import bfc_environment
from hgpart.errors import HgpartError
from hgpart.notes import HgpartNote
from hgpart.quiet import NOISE

__all__ = [
    "CLIENT_JOB",
    "WorkerInfo",
    "open_local",
    "open_cluster",
    "guarded",
    "check",
    "worker_info",
    "assign_cores",
    "parse_cluster_spec",
    "set_resume_hint",
]

CLIENT_JOB = "client"
_WORKER_SCRIPT = Path(__file__).with_name("worker.py")
_READY_TAG = "HGPART_WORKER_READY"
_POLL_S = 0.25
_T = TypeVar("_T")


@dataclass
class WorkerInfo:
    """One worker of a connected cluster (``pid`` is None for remote workers we did not start)."""

    task: int
    address: str
    device: str
    pid: int | None = None
    cores: list[int] = field(default_factory=list)


# --------------------------------------------------------------------------------------------------------------
# The cluster record, the process-wide registry and the stop paths (close / atexit / signals)
# --------------------------------------------------------------------------------------------------------------


class _Cluster:
    """Workers of one open DeviceSet: their processes (local) or addresses (remote) and a liveness monitor."""

    def __init__(self, kind: str, workers: list[WorkerInfo], procs: list[subprocess.Popen] | None,
                 stderr_files: list[Any] | None) -> None:
        self.kind = kind
        self.workers = workers
        self.procs = procs if procs is not None else []  # shared with the starter, which fills them in
        self.stderr_files = stderr_files if stderr_files is not None else []
        self.failure: HgpartError | None = None
        self.failed_at: float | None = None
        self._stopping = False
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._monitor: threading.Thread | None = None
        #: how to continue after a dead worker (e.g. the newest checkpoint); None: start the run again
        self.resume_hint: Callable[[], str] | None = None

    # -- liveness --------------------------------------------------------------------------------------------
    def start_monitor(self) -> None:
        self._monitor = threading.Thread(target=self._watch, daemon=True, name=f"hgpart-{self.kind}-monitor")
        self._monitor.start()

    def _watch(self) -> None:
        misses = [0] * len(self.workers)
        while not self._stop_event.wait(_POLL_S if self.procs else 1.0):
            if self.procs:
                for w, p in zip(self.workers, self.procs, strict=True):
                    code = p.poll()
                    if code is not None and not self._stopping:
                        self.fail(HgpartError(
                            f"local worker {w.task} (pid {w.pid}, {w.address}) died ({_describe_exit(code)})"
                            f"{_stderr_tail(self.stderr_files[w.task])}",
                            where=f"device {w.device}",
                            fix=f"check memory and the worker's message; the run was stopped: {self._next_step()}",
                        ))
                        return
            else:
                for i, w in enumerate(self.workers):
                    misses[i] = 0 if _probe(w.address, 2.0) else misses[i] + 1
                    if misses[i] >= 3 and not self._stopping:
                        self.fail(HgpartError(
                            f"cluster worker {w.task} at {w.address} stopped answering (3 TCP probes failed)",
                            where=f"device {w.device}",
                            fix=f"restart that worker's tf.distribute.Server, then {self._next_step()}",
                        ))
                        return

    def _next_step(self) -> str:
        """What the user does after a dead worker: the resume hint (newest checkpoint) or running again."""
        if self.resume_hint is not None:
            try:
                return self.resume_hint()
            except Exception:  # noqa: BLE001 - the dead worker is the error to report, not the hint's failure
                pass
        return "start it again"

    def fail(self, err: HgpartError) -> None:
        """Record the first failure and stop the remaining local workers so nothing waits on them."""
        with self._lock:
            if self.failure is None:
                self.failure = err
                self.failed_at = time.monotonic()
        self.stop(unregister=False)

    def check(self) -> None:
        if self.failure is not None:
            raise self.failure

    # -- stop ------------------------------------------------------------------------------------------------
    def stop(self, *, unregister: bool = True) -> None:
        """Stop every local worker by PID (idempotent, safe from signal handlers and atexit)."""
        self._stopping = True
        self._stop_event.set()
        _kill_procs(self.procs)
        if unregister:
            with _REG_LOCK:
                if self in _ACTIVE:
                    _ACTIVE.remove(self)
            for f in self.stderr_files:
                try:
                    f.close()
                except OSError:
                    pass


def _kill_procs(procs: list[subprocess.Popen]) -> None:
    """Close each worker's stdin (it exits at EOF), then SIGKILL by PID whatever is left, and reap."""
    for p in procs:
        if p.poll() is None and p.stdin is not None:
            try:
                p.stdin.close()
            except OSError:
                pass
    deadline = time.monotonic() + 1.0
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:
        if p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for p in procs:
        try:
            p.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass
        for stream in (p.stdin, p.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


_ACTIVE: list[_Cluster] = []
_REG_LOCK = threading.RLock()
_HOOKS_INSTALLED = False
_CONNECTED_SPEC: dict[str, list[str]] | None = None  # the cluster TF's eager context is currently joined to


def _stop_all() -> None:
    for c in list(_ACTIVE):
        c.stop()


def _install_hooks() -> None:
    """atexit + SIGINT/SIGTERM handlers, once per process; each chains to the handler it replaced."""
    global _HOOKS_INSTALLED
    if _HOOKS_INSTALLED:
        return
    _HOOKS_INSTALLED = True
    atexit.register(_stop_all)
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread; atexit + pipes still cover us
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(sig)
        if previous == signal.SIG_IGN:
            continue  # ignored (e.g. SIGINT in a background job): the workers need no stop on a signal never acted on

        def handler(signum: int, frame: Any, _previous: Any = previous) -> None:
            for c in list(_ACTIVE):
                c.fail(HgpartError(f"interrupted by signal {signal.Signals(signum).name}; workers stopped"))
            _stop_all()
            if callable(_previous):
                _previous(signum, frame)
            elif _previous == signal.SIG_DFL:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        signal.signal(sig, handler)


# --------------------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------------------


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _stderr_tail(f: Any) -> str:
    """The worker's last meaningful stderr line, for the one-line error."""
    if f is None:
        return ""
    try:
        f.flush()
        f.seek(0)
        lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except (OSError, ValueError):
        return ""
    useful = [ln for ln in lines if not NOISE.match(ln)]
    return f": {useful[-1][:300]}" if useful else ""


def _probe(address: str, timeout: float) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def _reserve_ports(k: int) -> list[int]:
    """K distinct free ports: all K sockets are bound at once, then released for the workers to bind."""
    socks = []
    try:
        for _ in range(k):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def assign_cores(k: int, cores: list[int] | None = None) -> tuple[list[list[int]], bool]:
    """Give each of K workers its own core(s): contiguous equal blocks of the allowed cores.

    Returns (per-worker core lists, oversubscribed). With more workers than cores the cores are dealt
    round-robin, so some workers share a core (``oversubscribed`` True; the caller warns). Cores left over
    by the equal split (n mod K) stay unpinned-to-workers and serve the client, which feeds the batches.
    """
    avail = sorted(set(cores)) if cores else sorted(os.sched_getaffinity(0))
    if not avail:
        raise HgpartError("no CPU cores to pin workers to", where="devices 'local'", fix="pass cores=[...]")
    n = len(avail)
    if k <= n:
        per = n // k
        return [avail[i * per:(i + 1) * per] for i in range(k)], False
    return [[avail[i % n]] for i in range(k)], True


def _connect(spec: dict[str, list[str]], cluster: _Cluster, *, inter_op: int, timeout: float) -> None:
    """Join the eager context to ``spec`` as job 'client' (once per process; a changed spec reconnects).

    The join runs in a helper thread while the cluster's monitor watches the workers: a worker that dies
    meanwhile is reported (by name) as soon as the monitor sees it, not when the timeout runs out.
    """
    global _CONNECTED_SPEC
    import tensorflow as tf

    try:
        # The workers' eager contexts take their session config from the client's (ServerDef default config).
        tf.config.threading.set_inter_op_parallelism_threads(int(inter_op))
    except RuntimeError:
        pass  # context already initialised: keep its pools
    err: list[BaseException] = []

    def run() -> None:
        try:
            tf.config.experimental_connect_to_cluster(tf.train.ClusterSpec(spec), job_name=CLIENT_JOB)
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            err.append(exc)

    t = threading.Thread(target=run, daemon=True, name="hgpart-connect")
    t.start()
    deadline = time.monotonic() + timeout
    while t.is_alive() and time.monotonic() < deadline and cluster.failure is None:
        t.join(_POLL_S)
    cluster.check()
    if t.is_alive():
        raise HgpartError(f"connecting to the cluster did not finish within {timeout:.0f} s",
                          where=f"cluster {json.dumps(spec)}", fix="check that every worker is up and reachable")
    if err:
        raise HgpartError(f"cannot connect to the cluster: {type(err[0]).__name__}: {str(err[0]).splitlines()[0]}",
                          where=f"cluster {json.dumps(spec)}", fix="check the worker addresses and that they run")
    _CONNECTED_SPEC = spec


def _health_check(workers: list[WorkerInfo], deadline: float, cluster: _Cluster) -> None:
    """Run one tiny op on every worker device from the client, each result checked, all within the deadline."""
    import tensorflow as tf

    results: dict[int, tuple[str, float] | BaseException] = {}

    def run() -> None:
        for w in workers:
            try:
                with tf.device(w.device):
                    y = tf.constant(float(w.task + 1)) * 2.0
                results[w.task] = (y.device, float(y.numpy()))
            except BaseException as exc:  # noqa: BLE001 - reported below with the worker's identity
                results[w.task] = exc
                return

    t = threading.Thread(target=run, daemon=True, name="hgpart-health")
    t.start()
    while t.is_alive() and time.monotonic() < deadline and cluster.failure is None:
        t.join(_POLL_S)
    cluster.check()
    for w in workers:
        r = results.get(w.task)
        if r is None:
            raise HgpartError(f"worker {w.task} ({w.address}) did not answer a health-check op in time",
                              where=f"device {w.device}", fix="raise start_timeout on a loaded machine, or check it")
        if isinstance(r, BaseException):
            raise HgpartError(f"worker {w.task} ({w.address}) failed its health check: {type(r).__name__}: "
                              f"{str(r).splitlines()[0] if str(r) else ''}", where=f"device {w.device}",
                              fix="check that the worker runs and is reachable from this host")
        dev, val = r
        if dev != w.device or abs(val - 2.0 * (w.task + 1)) > 1e-6:
            raise HgpartError(f"worker {w.task} health check ran on {dev} giving {val}",
                              where=f"device {w.device}", fix="the cluster spec does not match the running servers")


def _claim_connection(spec_text: str) -> None:
    with _REG_LOCK:
        if _ACTIVE:
            raise HgpartError(
                f"a {_ACTIVE[0].kind} cluster is already open in this process; TensorFlow allows one eager "
                "cluster connection at a time", where=spec_text, fix="close() the open device set first")


# --------------------------------------------------------------------------------------------------------------
# Public verbs
# --------------------------------------------------------------------------------------------------------------


def open_local(k: int, *, inter_op: int = 4, cores: list[int] | None = None,
               start_timeout: float = 60.0) -> DeviceSet:
    """Start K pinned worker processes on 127.0.0.1, connect, health-check; stop them on close()."""
    if k < 1:
        raise HgpartError(f"K = {k} local workers requested", where="devices 'local'", fix="K must be >= 1")
    _claim_connection("devices 'local'")
    groups, oversubscribed = assign_cores(k, cores)
    if oversubscribed:
        warnings.warn(HgpartNote(f"{k} local workers on {len({c for g in groups for c in g})} cores: cores are "
                                 "shared round-robin, so workers compete and throughput figures are not per-core"),
                      stacklevel=2)
    inter_op = max(int(inter_op), 1)
    _install_hooks()
    last: HgpartError | None = None
    for _attempt in range(3):
        try:
            return _start_local(k, groups, inter_op=inter_op, start_timeout=start_timeout)
        except _PortTaken as exc:
            last = exc.error
    assert last is not None
    raise last


class _PortTaken(Exception):
    def __init__(self, error: HgpartError) -> None:
        super().__init__(error.line())
        self.error = error


def _start_local(k: int, groups: list[list[int]], *, inter_op: int, start_timeout: float) -> DeviceSet:
    deadline = time.monotonic() + start_timeout
    ports = _reserve_ports(k)
    spec = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs: list[subprocess.Popen] = []
    errs: list[Any] = []
    workers: list[WorkerInfo] = []
    cluster = _Cluster("local", workers, procs, errs)
    with _REG_LOCK:
        _ACTIVE.append(cluster)
    try:
        env = bfc_environment(dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
                                   PYTHONUNBUFFERED="1"))
        for i in range(k):
            err = tempfile.TemporaryFile(prefix=f"hgpart-worker{i}-")
            errs.append(err)
            procs.append(subprocess.Popen(
                [sys.executable, str(_WORKER_SCRIPT), "--cluster", json.dumps(spec), "--task", str(i),
                 "--cores", ",".join(map(str, groups[i])), "--intra", str(len(groups[i])),
                 "--inter", str(inter_op), "--parent", str(os.getpid())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env,
                start_new_session=True,  # a terminal Ctrl-C reaches only the client, which stops us by PID
            ))
            workers.append(WorkerInfo(task=i, address=spec["worker"][i], pid=procs[-1].pid, cores=groups[i],
                                      device=f"/job:worker/replica:0/task:{i}/device:CPU:0"))
        _wait_ready(cluster, deadline, start_timeout)
    except BaseException:
        cluster.stop()
        raise
    return _join(cluster, spec, workers, kind="local", inter_op=inter_op,
                 deadline=time.monotonic() + start_timeout)


def _join(cluster: _Cluster, spec: dict[str, list[str]], workers: list[WorkerInfo], *, kind: str, inter_op: int,
          deadline: float) -> DeviceSet:
    """Start the monitor, connect the client, health-check every worker; on any failure stop the cluster.

    The monitor starts first so that a worker dying while the client connects or checks it is named at once.
    """
    try:
        cluster.start_monitor()
        _connect(spec, cluster, inter_op=inter_op, timeout=max(1.0, deadline - time.monotonic()))
        _health_check(workers, deadline, cluster)
    except BaseException:
        cluster.stop()
        raise
    return DeviceSet(kind, [w.device for w in workers], host=f"/job:{CLIENT_JOB}/replica:0/task:0/device:CPU:0",
                     workers=cluster)


def _wait_ready(cluster: _Cluster, deadline: float, start_timeout: float) -> None:
    """Read each worker's ready line; a worker that exits first or is late is one clear error."""
    sel = selectors.DefaultSelector()
    bufs: dict[int, bytes] = {}
    outs: dict[int, IO[bytes]] = {}
    for i, p in enumerate(cluster.procs):
        assert p.stdout is not None  # started with stdout=PIPE
        outs[i] = p.stdout
        os.set_blocking(p.stdout.fileno(), False)
        sel.register(p.stdout, selectors.EVENT_READ, i)
        bufs[i] = b""
    pending = set(range(len(cluster.procs)))
    try:
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                i = min(pending)
                w = cluster.workers[i]
                raise HgpartError(
                    f"local worker {i} (pid {w.pid}) was not ready within {start_timeout:.0f} s"
                    f"{_stderr_tail(cluster.stderr_files[i])}", where="devices 'local'",
                    fix="raise start_timeout on a loaded machine")
            for key, _ in sel.select(timeout=min(left, _POLL_S)):
                i = key.data
                chunk = outs[i].read()
                if chunk is None:  # non-blocking read found nothing after all: select again
                    continue
                bufs[i] += chunk
                if _READY_TAG.encode() in bufs[i]:
                    pending.discard(i)
                    sel.unregister(key.fileobj)
                elif not chunk:
                    sel.unregister(key.fileobj)  # EOF: the exit is reported below
            for i in list(pending):
                code = cluster.procs[i].poll()
                if code is not None:
                    tail = _stderr_tail(cluster.stderr_files[i])
                    err = HgpartError(
                        f"local worker {i} (pid {cluster.workers[i].pid}) exited before it was ready "
                        f"({_describe_exit(code)}){tail}", where="devices 'local'",
                        fix="read the worker's message; check that TensorFlow imports in this interpreter")
                    if code == 4 and ("address" in tail.lower() or "bind" in tail.lower() or "port" in tail.lower()):
                        raise _PortTaken(err)
                    raise err
    finally:
        sel.close()


def parse_cluster_spec(text: str, where: str) -> dict[str, list[str]]:
    """{"worker": [...]} or TF_CONFIG-style {"cluster": {"worker": [...]}, "task": ...} -> {"worker": [...]}."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HgpartError(f"cluster spec is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
                          where=where, fix='write {"worker": ["host:port", ...]} or a TF_CONFIG document') from None
    if isinstance(data, dict) and isinstance(data.get("cluster"), dict):
        data = data["cluster"]
    if not isinstance(data, dict) or "worker" not in data:
        raise HgpartError("cluster spec has no \"worker\" job", where=where,
                          fix='write {"worker": ["host:port", ...]} (other jobs such as "ps" are ignored)')
    workers = data["worker"]
    if isinstance(workers, dict):  # TF also accepts {task_index: address}
        try:
            workers = [workers[key] for key in sorted(workers, key=int)]
        except (TypeError, ValueError):
            workers = None
    if not isinstance(workers, list) or not workers:
        raise HgpartError("cluster spec \"worker\" must be a non-empty list of \"host:port\" strings", where=where,
                          fix='write {"worker": ["host:port", ...]}')
    for i, a in enumerate(workers):
        host, sep, port = a.rpartition(":") if isinstance(a, str) else ("", "", "")
        if not sep or not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
            raise HgpartError(f"worker {i} address {a!r} is not host:port", where=where,
                              fix='write addresses such as "10.0.0.5:2222"')
    if len(set(workers)) != len(workers):
        raise HgpartError("cluster spec lists the same worker address twice", where=where,
                          fix="give every worker its own host:port")
    if CLIENT_JOB in data:
        raise HgpartError(f"cluster spec uses the job name {CLIENT_JOB!r}, which hgpart's client takes",
                          where=where, fix=f"rename that job; the client joins as {CLIENT_JOB!r}")
    return {"worker": list(workers)}


def open_cluster(spec: str, k: int, *, timeout: float = 30.0, inter_op: int = 4) -> DeviceSet:
    """Join an existing cluster of ``tf.distribute.Server`` workers (``cluster:PATH``, a PATH, or TF_CONFIG).

    ``spec`` may be ``"cluster:PATH"``, a bare path, or ``""``/``"TF_CONFIG"`` for the environment variable.
    Uses the first K workers (part p on worker p). Remote processes are neither started nor stopped.
    """
    if k < 1:
        raise HgpartError(f"K = {k} devices requested", where="devices 'cluster'", fix="K must be >= 1")
    path = spec[len("cluster:"):] if spec.startswith("cluster:") else spec
    if path in ("", "TF_CONFIG"):
        text = os.environ.get("TF_CONFIG", "")
        where = "environment variable TF_CONFIG"
        if not text.strip():
            raise HgpartError("no cluster spec: TF_CONFIG is not set", where=where,
                              fix="pass --devices cluster:SPEC.json or export TF_CONFIG")
    else:
        where = f"cluster spec {path}"
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise HgpartError("cluster spec file not found", where=where, fix="check the path") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise HgpartError(f"cannot read cluster spec file ({exc})", where=where, fix="check the file") from None
    full = parse_cluster_spec(text, where)
    if len(full["worker"]) < k:
        raise HgpartError(f"the placement needs {k} workers but the cluster spec lists {len(full['worker'])}",
                          where=where, fix=f"add workers or use a placement with K <= {len(full['worker'])}")
    _claim_connection(where)
    deadline = time.monotonic() + timeout
    dead = [a for a in full["worker"] if not _probe(a, min(5.0, timeout))]
    if dead:
        raise HgpartError(f"{len(dead)} cluster worker(s) not reachable: {', '.join(dead[:4])}", where=where,
                          fix="start tf.distribute.Server on those hosts (job 'worker') or fix the addresses")
    workers = [WorkerInfo(task=i, address=a, device=f"/job:worker/replica:0/task:{i}/device:CPU:0")
               for i, a in enumerate(full["worker"][:k])]
    cluster = _Cluster("cluster", workers, None, None)
    _install_hooks()
    with _REG_LOCK:
        _ACTIVE.append(cluster)
    return _join(cluster, full, workers, kind="cluster", inter_op=inter_op, deadline=deadline)


def _cluster_of(ds: DeviceSet) -> _Cluster | None:
    """The worker group this module started or joined for ``ds`` (None for logical/gpu sets)."""
    return ds.workers if isinstance(ds.workers, _Cluster) else None


def worker_info(ds: DeviceSet) -> list[WorkerInfo]:
    """The workers behind a local/cluster DeviceSet (PIDs, addresses, cores); [] for other kinds."""
    c = _cluster_of(ds)
    return list(c.workers) if c else []


def check(ds: DeviceSet) -> None:
    """Raise the recorded HgpartError if a worker of this device set has died (no-op for other kinds)."""
    c = _cluster_of(ds)
    if c is not None:
        c.check()


def set_resume_hint(ds: DeviceSet, hint: Callable[[], str]) -> None:
    """Have a dead-worker error tell how to continue: ``hint()`` (e.g. naming the newest checkpoint) is called
    when the failure is recorded and becomes the end of its fix. No-op for logical/gpu sets."""
    c = _cluster_of(ds)
    if c is not None:
        c.resume_hint = hint


def guarded(ds: DeviceSet, fn: Callable[..., _T], *args: Any, timeout: float | None = None, grace: float = 3.0,
            **kwargs: Any) -> _T:
    """Call ``fn(*args, **kwargs)`` so that a dead worker becomes one HgpartError in bounded time, never a hang.

    For logical/gpu sets this is a plain call. For local/cluster sets the call runs in a daemon helper thread;
    the caller returns its result, re-raises its exception (as the worker failure if one was recorded within
    ``grace`` s), or raises the failure ``grace`` s after the monitor records it while the call is still stuck.
    ``timeout`` (s) bounds the whole call even without a detected failure.
    """
    c = _cluster_of(ds)
    if c is None:
        return fn(*args, **kwargs)
    c.check()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True, name="hgpart-guarded")
    start = time.monotonic()
    t.start()
    while True:
        t.join(_POLL_S)
        if not t.is_alive():
            break
        if c.failure is not None and c.failed_at is not None and time.monotonic() - c.failed_at >= grace:
            raise c.failure
        if timeout is not None and time.monotonic() - start > timeout:
            err = HgpartError(f"a step on the {c.kind} devices did not finish within {timeout:.0f} s",
                              where=", ".join(ds.devices), fix="check the workers; raise the timeout if loaded")
            c.fail(err)
            raise err
    if "error" in box:
        exc = box["error"]
        if exc is not c.failure:
            # TF (or a wrapper that rewords TF's error) may see the death a moment before the monitor does:
            # local deaths show within a poll period, remote ones need the 3 failed probes.
            wait_until = time.monotonic() + (4 * _POLL_S if c.procs else grace + 3.0)
            while c.failure is None and time.monotonic() < wait_until:
                time.sleep(_POLL_S / 2)
            if c.failure is not None:
                raise c.failure from exc
        raise exc
    return box["value"]
