"""Local worker processes: real ops on each worker, pinning, stop by PID, a dead worker, a killed client.

TensorFlow joins one eager cluster per process, so every scenario that connects runs in its own client
subprocess (started together by one module fixture, to share the ~10-20 s TensorFlow import time on a loaded
machine); this pytest process only parses what they print and checks the operating system's view of the PIDs.
Scenarios that fail before connecting (bad cores, a start deadline) run in-process: they never touch TensorFlow.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from hgpart.runtime import cluster

from hgpart.errors import HgpartError

# (without TF_CPU_ALLOCATOR_USE_BFC: the workers must get hgpart's default, BFC)
_ENV = {k: v for k, v in os.environ.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"} | {"TF_CPP_MIN_LOG_LEVEL": "3",
                                                                                  "CUDA_VISIBLE_DEVICES": ""}

# Opens 2 workers, runs a matmul on each, closes; re-opens (reconnect in one process), kills worker 1
# mid-way and lets guarded() turn the hang into an HgpartError; prints one JSON line per phase.
_SCRIPT_OPS = r"""
import json, os, time
import numpy as np
from hgpart.errors import HgpartError
from hgpart.runtime.cluster import open_local, worker_info, guarded
import tensorflow as tf

def emit(**kw):
    print("RESULT " + json.dumps(kw), flush=True)

with open_local(2, inter_op=2, start_timeout=120) as ds:
    infos = worker_info(ds)
    a = np.arange(9, dtype=np.float32).reshape(3, 3)
    out = []
    for i, dev in enumerate(ds.devices):
        with tf.device(dev):
            y = tf.matmul(tf.constant(a), tf.constant(a) * float(i + 1))
        out.append({"device": y.device, "value": y.numpy().tolist()})
    emit(phase="ops", devices=ds.devices, host=ds.host, pids=[w.pid for w in infos],
         cores=[w.cores for w in infos], out=out,
         allowed=[open(f"/proc/{w.pid}/status").read().split("Cpus_allowed_list:")[1].split()[0] for w in infos],
         bfc=[dict(kv.split("=", 1) for kv in open(f"/proc/{w.pid}/environ").read().split("\0") if "=" in kv)
              .get("TF_CPU_ALLOCATOR_USE_BFC") for w in infos])
emit(phase="closed", pids=[w.pid for w in infos])

ds = open_local(2, inter_op=2, start_timeout=120)
pids = [w.pid for w in worker_info(ds)]
with tf.device(ds.devices[1]):
    x = tf.ones((4, 4))
with tf.device(ds.devices[0]):
    ok = float(tf.reduce_sum(tf.matmul(x, x)).numpy())
with tf.device(ds.devices[1]):
    z = tf.ones((4, 4)) * 2.0  # lives only on worker 1 (x has a cached copy on worker 0 by now)
os.kill(pids[1], 9)

def step():  # worker 0 must fetch z from the dead worker: measured to block forever inside TensorFlow
    with tf.device(ds.devices[0]):
        return tf.matmul(z, z).numpy()

t0 = time.monotonic()
try:
    guarded(ds, step, timeout=60)
    err = None
except HgpartError as exc:
    err = exc.line()
emit(phase="killed", pids=pids, ok=ok, error=err, seconds=time.monotonic() - t0)
ds.close()
emit(phase="done")
"""

# Ctrl-C during a guarded call, then joining existing servers with open_cluster.
_SCRIPT_MORE = r"""
import json, os, signal, threading, time
from hgpart.runtime.cluster import open_local, worker_info, guarded
import tensorflow as tf

def emit(**kw):
    print("RESULT " + json.dumps(kw), flush=True)

ds = open_local(2, inter_op=2, start_timeout=120)  # Ctrl-C while a guarded call runs: workers stopped by PID
pids = [w.pid for w in worker_info(ds)]

def forever():
    while True:
        with tf.device(ds.devices[0]):
            tf.reduce_sum(tf.ones((64, 64))).numpy()

t0 = time.monotonic()
threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
try:
    guarded(ds, forever)
    interrupted = False
except KeyboardInterrupt:
    interrupted = True
time.sleep(0.2)
emit(phase="sigint", pids=pids, interrupted=interrupted, seconds=time.monotonic() - t0,
     alive=[os.path.exists(f"/proc/{p}") for p in pids])
ds.close()

# An existing cluster: servers we start here by hand stand in for remote hosts; open_cluster must join them,
# run ops, and leave them running on close (it does not own them).
import subprocess, sys, tempfile
from hgpart.runtime import cluster as C
from hgpart.runtime.cluster import open_cluster
ports = C._reserve_ports(2)
spec = {"worker": [f"127.0.0.1:{p}" for p in ports]}
servers = [subprocess.Popen([sys.executable, str(C._WORKER_SCRIPT), "--cluster", json.dumps(spec), "--task", str(i),
                             "--parent", str(os.getpid())], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL) for i in range(2)]
for srv in servers:
    srv.stdout.readline()
path = os.path.join(tempfile.mkdtemp(), "spec.json")
with open(path, "w") as f:
    json.dump({"cluster": spec, "task": {"type": "worker", "index": 0}}, f)
with open_cluster("cluster:" + path, 2) as ds:
    devs = []
    for i, dev in enumerate(ds.devices):
        with tf.device(dev):
            y = tf.reduce_sum(tf.ones((3, 3)) * float(i + 1))
        devs.append([y.device, float(y.numpy())])
still = [srv.poll() is None for srv in servers]
for srv in servers:
    srv.kill()
    srv.wait()
emit(phase="remote", devices=ds.devices, out=devs, still_running=still)
emit(phase="more_done")
"""

# Opens 2 workers, prints their PIDs and waits to be SIGKILLed by the test.
_SCRIPT_CLIENT = r"""
import json, time
from hgpart.runtime.cluster import open_local, worker_info
ds = open_local(2, inter_op=2, start_timeout=120)
print("RESULT " + json.dumps({"pids": [w.pid for w in worker_info(ds)]}), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """True if pid exists and is not a zombie (a zombie worker has exited; only its reaping is pending)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _results(text: str) -> list[dict]:
    return [json.loads(ln[len("RESULT "):]) for ln in text.splitlines() if ln.startswith("RESULT ")]


@pytest.fixture(scope="module")
def runs():
    """Start both client subprocesses at once; collect the ops run and the SIGKILL run."""
    ops = subprocess.Popen([sys.executable, "-c", _SCRIPT_OPS], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=_ENV)
    more = subprocess.Popen([sys.executable, "-c", _SCRIPT_MORE], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_ENV)
    client = subprocess.Popen([sys.executable, "-c", _SCRIPT_CLIENT], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, env=_ENV)
    try:
        line = ""
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not line.startswith("RESULT "):
            line = client.stdout.readline()
            if not line and client.poll() is not None:
                break
        pids = json.loads(line[len("RESULT "):])["pids"] if line.startswith("RESULT ") else []
        client.kill()  # SIGKILL: no atexit, no signal handler, nothing in the client runs
        client.wait()
        killed_at = time.monotonic()
        gone_after = None
        while pids and time.monotonic() - killed_at < 10:
            if not any(_alive(p) for p in pids):
                gone_after = time.monotonic() - killed_at
                break
            time.sleep(0.1)
        out, err = ops.communicate(timeout=300)
        more_out, more_err = more.communicate(timeout=300)
    finally:
        for p in (ops, more, client):
            if p.poll() is None:
                p.kill()
                p.wait()
    return {"ops": _results(out) + _results(more_out), "ops_rc": ops.returncode, "more_rc": more.returncode,
            "ops_err": err[-3000:] + more_err[-3000:], "client_pids": pids,
            "gone_after": gone_after}


def test_matmul_runs_on_each_pinned_worker_and_close_stops_them(runs):
    res = {r["phase"]: r for r in runs["ops"]}
    assert "ops" in res, runs["ops_err"]
    r = res["ops"]
    assert r["devices"] == [f"/job:worker/replica:0/task:{i}/device:CPU:0" for i in range(2)]
    assert r["host"] == "/job:client/replica:0/task:0/device:CPU:0"
    import numpy as np

    a = np.arange(9, dtype=np.float32).reshape(3, 3)
    for i, o in enumerate(r["out"]):
        assert o["device"] == r["devices"][i]  # the op ran on worker i, not on the client
        np.testing.assert_allclose(o["value"], a @ (a * (i + 1)), rtol=1e-6)
    assert len(set(r["pids"])) == 2
    expected = cluster.assign_cores(2)[0]
    assert r["cores"] == expected
    for allowed, cores in zip(r["allowed"], expected, strict=True):  # the kernel's view of each worker's pinning
        assert allowed == ",".join(map(str, cores)) or (len(cores) > 1 and allowed == f"{cores[0]}-{cores[-1]}")
    assert r["bfc"] == ["true", "true"]  # each worker runs TensorFlow's BFC CPU allocator (hgpart.allocator)
    assert "closed" in res
    assert not any(_alive(p) for p in res["closed"]["pids"])


def test_worker_killed_midway_is_one_clear_error_in_bounded_time(runs):
    res = {r["phase"]: r for r in runs["ops"]}
    assert "killed" in res, runs["ops_err"]
    r = res["killed"]
    assert r["ok"] == 64.0  # the reconnected cluster worked before the kill
    assert r["error"] is not None and "local worker 1" in r["error"] and "died" in r["error"]
    assert r["seconds"] < 15.0
    assert "done" in res and runs["ops_rc"] == 0
    assert not any(_alive(p) for p in r["pids"])


def test_sigint_stops_workers_and_still_raises_keyboardinterrupt(runs):
    res = {r["phase"]: r for r in runs["ops"]}
    assert "sigint" in res, runs["ops_err"]
    r = res["sigint"]
    assert r["interrupted"] and r["seconds"] < 10.0
    assert r["alive"] == [False, False]  # reaped by the handler, so not even zombies remain


def test_open_cluster_joins_existing_servers_and_leaves_them_running(runs):
    res = {r["phase"]: r for r in runs["ops"]}
    assert "remote" in res, runs["ops_err"]
    r = res["remote"]
    assert r["out"] == [[r["devices"][0], 9.0], [r["devices"][1], 18.0]]
    assert r["still_running"] == [True, True]
    assert "more_done" in res and runs["more_rc"] == 0


def test_workers_exit_when_the_client_is_sigkilled(runs):
    assert len(runs["client_pids"]) == 2
    assert runs["gone_after"] is not None and runs["gone_after"] < 5.0


def test_assign_cores_splits_and_round_robins():
    assert cluster.assign_cores(2, [0, 1, 2, 3]) == ([[0, 1], [2, 3]], False)
    assert cluster.assign_cores(3, [4, 5, 6, 7]) == ([[4], [5], [6]], False)
    assert cluster.assign_cores(3, [0, 1]) == ([[0], [1], [0]], True)


def test_worker_that_cannot_start_is_one_clear_error_and_nothing_is_left():
    before = set(_children())
    with pytest.raises(HgpartError, match="exited before it was ready.*cannot pin worker"):
        cluster.open_local(1, cores=[4095], start_timeout=60)
    assert not cluster._ACTIVE
    assert not [p for p in set(_children()) - before if _alive(p)]


def test_worker_not_ready_in_time_is_killed():
    before = set(_children())
    t0 = time.monotonic()
    with pytest.raises(HgpartError, match="not ready within"):
        cluster.open_local(2, start_timeout=0.3)
    assert time.monotonic() - t0 < 10
    assert not cluster._ACTIVE
    assert not [p for p in set(_children()) - before if _alive(p)]


def test_second_open_while_one_is_open_is_refused():
    fake = cluster._Cluster("local", [], [], [])
    cluster._ACTIVE.append(fake)
    try:
        with pytest.raises(HgpartError, match="already open"):
            cluster.open_local(1)
    finally:
        fake.stop()
    assert not cluster._ACTIVE


def _children() -> list[int]:
    me = os.getpid()
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                        out.append(int(d))
            except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                pass
    return out


def test_sigterm_handler_chains(monkeypatch):
    """The SIGTERM hook stops workers, then runs the handler it replaced."""
    calls = []
    monkeypatch.setattr(cluster, "_HOOKS_INSTALLED", False)
    old_int, old_term = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda s, f: calls.append(s))
    try:
        monkeypatch.setattr(cluster.atexit, "register", lambda fn: None)
        cluster._install_hooks()
        fake = cluster._Cluster("local", [], [], [])
        cluster._ACTIVE.append(fake)
        signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)
        assert calls == [signal.SIGTERM]
        assert fake.failure is not None and "SIGTERM" in fake.failure.line()
        assert not cluster._ACTIVE
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


def _imports(module: object) -> set[str]:
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    out = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    return out | {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}


def test_device_set_holds_its_workers_and_the_modules_form_no_cycle():
    """devices imports cluster and deviceset; cluster imports deviceset only; deviceset imports neither."""
    from hgpart.runtime import devices, deviceset

    assert "hgpart.runtime.devices" not in _imports(cluster)
    assert not {m for m in _imports(deviceset) if m.startswith("hgpart.runtime")}
    assert "hgpart.runtime.deviceset" in _imports(devices) and devices.DeviceSet is deviceset.DeviceSet
    group = cluster._Cluster("local", [], [], [])
    group.failure = HgpartError("local worker 1 died")
    ds = deviceset.DeviceSet("local", ["/job:worker/replica:0/task:0/device:CPU:0"], workers=group)
    assert cluster._cluster_of(ds) is group
    with pytest.raises(HgpartError, match="local worker 1 died"):
        ds.check()
    with pytest.raises(HgpartError, match="local worker 1 died"):
        cluster.check(ds)
    ds.close()
    assert group._stopping
