"""A worker process that dies outside the training steps of a measured comparison (here: while the strategy is
between its warm-up and its timed steps) is one failed run in bounded time, not a hang.

Found on this machine: a worker segfaulted inside TensorFlow while ``benchmarks/simulator_validation.py`` ran
``run_measured`` on 2 local workers, and the client waited on it for 20 minutes. TensorFlow blocks forever on a
tensor held by a dead worker, so every phase of a run must be guarded, not only the steps. The scenario runs in
its own client subprocess (one eager cluster per process), with a deadline so that a regression fails instead
of hanging the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

_ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")

_SCRIPT = r"""
import json, os, time
import tensorflow as tf
from hgpart.compare import measured
from hgpart.runtime.cluster import open_local, worker_info

def killing_timed(s, c, plan, run, on_steps):
    # what a worker crash between steps looks like to the client: a tensor on worker 1, worker 1 dies, worker 0
    # needs the tensor (without a guard this blocks forever inside TensorFlow)
    with tf.device(s.ds.devices[1]):
        x = tf.ones((4, 4))
    with tf.device(s.ds.devices[0]):
        tf.reduce_sum(tf.matmul(x, x)).numpy()  # worker 0 now holds a channel to worker 1
    with tf.device(s.ds.devices[1]):
        z = tf.ones((4, 4)) * 2.0  # only on worker 1
    os.kill(worker_info(s.ds)[1].pid, 9)
    with tf.device(s.ds.devices[0]):
        tf.reduce_sum(z).numpy()

measured._timed = killing_timed
with open_local(2, inter_op=2, start_timeout=120) as ds:
    t = time.monotonic()
    cmp = measured.run_measured("minivgg", device_set=ds, input_shape=(16, 16, 3), batch_sizes=[8], steps=2,
                                methods=["single", "sync-dp"], eval_n=16, evals_per_epoch=1, devices_label="local",
                                progress=False)
    print("RESULT " + json.dumps({"runs": [[r.method, r.status, r.reason] for r in cmp.runs],
                                  "seconds": time.monotonic() - t}), flush=True)
"""


def test_a_worker_dying_between_steps_is_a_failed_run_not_a_hang() -> None:
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=_ENV, timeout=420)
    lines = [ln[7:] for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, proc.stderr[-3000:]
    res = json.loads(lines[-1])
    (m1, s1, r1), (m2, s2, r2) = res["runs"]
    assert (m1, s1) == ("single", "failed") and "local worker 1" in r1 and "died" in r1
    assert (m2, s2) == ("sync-dp", "failed") and "died" in r2  # the next strategy fails at once, same cause
    assert res["seconds"] < 120.0
