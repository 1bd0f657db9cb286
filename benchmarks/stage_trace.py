"""Where a K=2 stage pipeline step's time goes: each worker's kernels and each stage thread's client calls.

Run::

    python benchmarks/stage_trace.py PLACEMENT.json OUT_DIR [--mode async|sync] [--inflight 2] [--ms 9000]

Two local pinned workers train the placement through the stage pipeline (``--pipeline stages``, batch = the
placement's, synthetic data). After a warm-up fit, TensorFlow's profiler traces both workers for ``--ms`` while
a fit of 12 steps runs; meanwhile every stage thread's client-side calls (feed, data read, stage forward and
backward, optimizer update, copies) are timed by wrapping the pipeline's methods. Printed and written to
``OUT_DIR/trace.txt``:

* per worker: the busy fraction (union of its kernels over the traced span; RPC-service events left out) and
  its timeline of forward (F), backward (B) and update (U) runs, per stage;
* the client calls of every stage thread over the same steps, on their own clock (the workers' trace clock is
  not the client's, so the two are printed separately).

``OUT_DIR/events.json`` and ``OUT_DIR/calls.json`` keep the raw rows. Why: the issue asks for a step broken down
by cause; ``--trace`` of ``hgpart train`` traces the whole-step function, not the stages.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def wrap_calls(calls: list[tuple[str, str, int, int]]) -> None:
    """Time the stage pipeline's client-side steps (those this version of the code has) into ``calls``."""
    import hgpart.runtime.stagepipe as sp
    import hgpart.runtime.stages as sg

    def wrap(obj: Any, name: str, label: str) -> None:
        orig = getattr(obj, name, None)
        if orig is None:
            return

        def timed(*a: Any, **k: Any) -> Any:
            t = time.time_ns()
            try:
                return orig(*a, **k)
            finally:
                calls.append((threading.current_thread().name, label, t, time.time_ns()))

        setattr(obj, name, timed)

    for obj, name, label in ((sp, "_move", "copy"), (sp._Run, "_feed", "feed"), (sp._Run, "_data", "read data"),
                             (sg.StagedStep, "forward", "forward"), (sg.StagedStep, "backward", "backward"),
                             (sg.StagedStep, "fused", "forward+backward"), (sg.StagedStep, "apply", "update")):
        wrap(obj, name, label)


def worker_timelines(rows: list[list[Any]]) -> list[str]:
    """Per trace file: busy fraction and runs of F/B/U kernels per stage (RPC events left out)."""
    import numpy as np
    from hgpart.runtime.devtrace import union_ns

    rows = [r for r in rows if r[3] != "Enqueue" and not r[2].startswith("EagerService")]
    out: list[str] = []
    for w, f in enumerate(sorted({r[0] for r in rows})):
        ev = sorted((r for r in rows if r[0] == f), key=lambda r: r[4])
        t0 = ev[0][4]
        s = np.array([(r[4] - t0) / 1e6 for r in ev])
        e = s + np.array([r[5] / 1e6 for r in ev])
        busy = union_ns(s, e)  # in ms here
        span = float(e.max() - s.min())
        out.append(f"worker {w} ({f}): busy {busy:.0f} of {span:.0f} ms = {busy / span:.3f}")
        segs: list[list[Any]] = []
        for r, a, b in zip(ev, s, e, strict=True):
            kind = "B" if r[2].startswith("gradients") else ("U" if ("Adam" in r[3] or "Assign" in r[3]) else "F")
            m = re.search(r"stage(\d+)", r[2])
            lab = kind + (m.group(1) if m else "")
            if segs and segs[-1][0] == lab and a - segs[-1][2] < 3:
                segs[-1][2] = max(segs[-1][2], b)
            else:
                segs.append([lab, a, b])
        out += [f"    {lab:4s} {a:8.1f} -> {b:8.1f} ms ({b - a:6.1f})" for lab, a, b in segs if b - a > 1]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("placement")
    ap.add_argument("out", type=Path)
    ap.add_argument("--mode", default="async")
    ap.add_argument("--inflight", type=int, default=2)
    ap.add_argument("--ms", type=int, default=9000)
    args = ap.parse_args()
    import numpy as np
    import tensorflow as tf
    from hgpart.runtime.api import PartitionedModel
    from hgpart.runtime.cluster import open_local, worker_info
    from hgpart.runtime.devtrace import xspace_kernels

    args.out.mkdir(parents=True, exist_ok=True)
    calls: list[tuple[str, str, int, int]] = []
    wrap_calls(calls)
    lines = [f"$ python benchmarks/stage_trace.py {args.placement} OUT --mode {args.mode} --inflight {args.inflight} "
             f"--ms {args.ms}   # load average at start {os.getloadavg()}"]
    with open_local(2, inter_op=4, start_timeout=180) as ds:
        pm = PartitionedModel.from_placement(args.placement, device_set=ds, pipeline="stages", inflight=args.inflight)
        B = pm.placement.batch_size
        shape = tuple(pm.placement.graph.input_shape)
        rng = np.random.default_rng(0)
        x = rng.random((B * 40, *shape), dtype=np.float32)
        y = rng.integers(0, 10, B * 40)
        fit = dict(batch_size=B, mode=args.mode, inflight=args.inflight, verbose=0)
        pm.fit(x, y, steps=3, **fit)
        t = time.perf_counter()
        pm.fit(x, y, steps=4, **fit)
        lines.append(f"4 untraced steps: {time.perf_counter() - t:.2f} s")
        addrs = ",".join(f"grpc://{w.address}" for w in worker_info(ds))
        prof = args.out / "tf_profile"
        tracer = threading.Thread(target=lambda: tf.profiler.experimental.client.trace(
            addrs, str(prof), args.ms, num_tracing_attempts=1))
        calls.clear()
        runner = threading.Thread(target=lambda: pm.fit(x, y, steps=12, **fit))
        runner.start()
        time.sleep(3.0)
        t_trace = time.time_ns()
        tracer.start()
        tracer.join()
        t_end = time.time_ns()
        runner.join()
        rows = [[f.stem, e.thread, e.name, e.op_type, e.start_ns, e.dur_ns]
                for f in sorted(prof.rglob("*.xplane.pb")) for e in xspace_kernels([f])]
    (args.out / "events.json").write_text(json.dumps(rows))
    (args.out / "calls.json").write_text(json.dumps(calls))
    lines += worker_timelines(rows)
    lines.append("client calls while the workers were traced (ms from the trace's start, client clock):")
    for th, lab, a, b in sorted(calls, key=lambda c: c[2]):
        if t_trace <= a <= t_end:
            lines.append(f"    {th.replace('hgpart-', ''):7s} {lab:10s} {(a - t_trace) / 1e6:8.1f} -> "
                         f"{(b - t_trace) / 1e6:8.1f} ms ({(b - a) / 1e6:6.1f})")
    lines.append(f"load average at end {os.getloadavg()}")
    (args.out / "trace.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
