"""Per-device op timeline of a few training steps: a Chrome/Perfetto trace with one process row per device
(thesis Figures 4.5/4.6) and each device's busy fraction.

Usage::

    dt = capture_device_trace(step, ds, run, folder)   # run(n) runs n pipeline steps
    dt.busy                       # per part: union of its op intervals / traced wall time
    dt.path                       # folder/devices_trace.json

How the ops are recorded (checked on TF 2.21):

* ``context.enable_run_metadata()`` + ``timeline.Timeline`` does not work for this runtime: the exported
  RunMetadata of a multi-device ``tf.function`` call has no ``step_stats`` (no dev_stats at all), on logical
  devices as on workers. So the TensorFlow profiler is used instead and its XSpace protobuf
  (``*.xplane.pb``) is read with TensorFlow's own ``xplane_pb2``.
* Logical devices: ``tf.profiler.experimental.start/stop`` around exactly ``steps`` pipeline steps. Every executed
  kernel is an event named ``"<node name>:<op type>"`` on the thread that ran it, but it carries no device, so
  the device comes from the step's graph (the runtime places every op explicitly, see ``traffic.py``); grappler's
  fused kernels keep the name of the last node they fuse, and a ``_Send`` named ``"<tensor>/_N"`` runs on the
  producer's device. Logical devices share one thread pool, so their busy fractions say how the work was spread
  over the labels, not that the devices ran in parallel.
* Local / cluster workers: every ``tf.distribute.Server`` hosts TensorFlow's profiler service, so
  ``tf.profiler.experimental.client.trace`` on the workers' addresses records each worker's kernels (one xplane
  file per worker, real per-process parallelism). That call traces for a fixed duration, so pipeline steps are
  run in rounds of ``inflight`` until it returns; the duration is sized to about ``steps`` steps from the time of
  one step. Events from different processes are put on one time axis by their wall-clock timestamps (exact on
  one host; across hosts it is as good as their clock synchronisation). The client (which only feeds batches)
  is not traced.

Busy fraction of a device = length of the union of its op intervals / traced wall time. The traced window is the
intersection over the trace files of [first op start, last op end] (workers start and stop tracing at slightly
different times; intervals are clipped to the window). A ``_Recv`` waiting for a tensor is not an op event, so
waiting is idle time.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from hgpart.runtime.traffic import graph_devices

from hgpart.errors import BadFileError, DeviceError
from hgpart.fileio import write_json

__all__ = ["DeviceTrace", "OpEvent", "capture_device_trace", "read_xspace", "busy_fractions",
           "union_ns", "chrome_trace", "op_devices"]

_SEND_SUFFIX = re.compile(r"/_\d+$")


@dataclass
class OpEvent:
    """One executed kernel: absolute start in ns (wall clock), duration in ns, on which part and thread."""

    part: int
    thread: str  # "<trace file>:<thread id>"
    name: str
    op_type: str
    start_ns: int
    dur_ns: int


@dataclass
class DeviceTrace:
    """What :func:`capture_device_trace` recorded."""

    path: Path
    busy: list[float]
    wall_s: float
    ops_per_device: list[int]
    unmatched: int = 0  # kernel events whose node is not in the step graph (runtime plumbing), left out
    raw_files: list[str] = field(default_factory=list)


def _canon(device: str) -> str:
    import tensorflow as tf

    return tf.DeviceSpec.from_string(device).to_string() if device else ""


def op_devices(step: Any) -> dict[str, str]:
    """Node name -> device of every op of the step's graph (captured variable reads take the variable's device)."""
    return graph_devices(step.concrete.graph, step.pm.host)


def xspace_kernels(files: list[Path]) -> Iterator[OpEvent]:
    """Every kernel event of the profiler's XSpace files (part -1: not mapped to a device yet)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    for f in files:
        xs = xplane_pb2.XSpace()
        xs.ParseFromString(Path(f).read_bytes())
        for plane in xs.planes:
            md = plane.event_metadata
            for line in plane.lines:
                thread = f"{Path(f).stem}:{line.id}"
                base_ps = line.timestamp_ns * 1000
                for ev in line.events:
                    meta = md[ev.metadata_id]
                    if not meta.display_name or ":" not in meta.name:  # kernels carry their op type
                        continue
                    node, _, op_type = meta.name.rpartition(":")
                    yield OpEvent(-1, thread, node, op_type, (base_ps + ev.offset_ps) // 1000,
                                  max(ev.duration_ps, 0) // 1000)


def read_xspace(files: list[Path], node_part: dict[str, int]) -> tuple[list[OpEvent], int]:
    """Kernel events of the XSpace files whose node maps to a part (see the module docstring)."""
    events: list[OpEvent] = []
    unmatched = 0
    for ev in xspace_kernels(files):
        part = node_part.get(ev.name)
        if part is None and ev.op_type == "_Send":
            part = node_part.get(_SEND_SUFFIX.sub("", ev.name))
        if part is None:
            unmatched += 1
            continue
        events.append(replace(ev, part=part))
    return events, unmatched


def union_ns(starts: np.ndarray, ends: np.ndarray) -> float:
    """Total length of the union of intervals [starts, ends)."""
    if starts.size == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(s.size, bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, s.size - 1]
    return float(np.sum(reach[last] - s[first]))


def busy_fractions(events: list[OpEvent], k: int) -> tuple[list[float], float]:
    """Per part: union of op intervals / traced wall time (see the module docstring); and that time in seconds."""
    if not events:
        return [0.0] * k, 0.0
    part = np.array([e.part for e in events], np.int64)
    start = np.array([e.start_ns for e in events], np.float64)
    end = start + np.array([e.dur_ns for e in events], np.float64)
    src = np.array([e.thread.rpartition(":")[0] for e in events])
    lo = max(float(start[src == f].min()) for f in np.unique(src))
    hi = min(float(end[src == f].max()) for f in np.unique(src))
    if hi <= lo:  # the files do not overlap in time: use the whole span
        lo, hi = float(start.min()), float(end.max())
    start, end = np.clip(start, lo, hi), np.clip(end, lo, hi)
    wall = hi - lo
    busy = [(union_ns(start[part == p], end[part == p]) / wall if wall > 0 else 0.0) for p in range(k)]
    return busy, wall * 1e-9


def chrome_trace(events: list[OpEvent], devices: list[str], busy: list[float], meta: dict[str, Any]) -> dict:
    """Chrome trace JSON: process p = part p's device, one thread row per executing thread, one span per op."""
    t0 = min((e.start_ns for e in events), default=0)
    out: list[dict[str, Any]] = []
    tids: dict[tuple[int, str], int] = {}
    for p, dev in enumerate(devices):
        out.append({"ph": "M", "pid": p, "name": "process_name",
                    "args": {"name": f"part {p}: {dev} (busy {100 * busy[p]:.1f}%)"}})
        out.append({"ph": "M", "pid": p, "name": "process_sort_index", "args": {"sort_index": p}})
    for e in sorted(events, key=lambda ev: ev.start_ns):
        key = (e.part, e.thread)
        if key not in tids:
            tids[key] = sum(1 for q, _ in tids if q == e.part)
            out.append({"ph": "M", "pid": e.part, "tid": tids[key], "name": "thread_name",
                        "args": {"name": f"thread {tids[key]}"}})
        out.append({"ph": "X", "pid": e.part, "tid": tids[key], "name": e.name, "cat": e.op_type,
                    "ts": (e.start_ns - t0) / 1000.0, "dur": e.dur_ns / 1000.0, "args": {"type": e.op_type}})
    return {"traceEvents": out, "displayTimeUnit": "ms", "otherData": {**meta, "device_busy": busy}}


def capture_device_trace(step: Any, ds: Any, run: Callable[[int], Any], folder: Path, *, steps: int,
                         inflight: int, meta: dict[str, Any] | None = None, devices: list[str] | None = None,
                         node_devices: dict[str, str] | None = None) -> DeviceTrace:
    """Run about ``steps`` extra pipeline steps under the profiler; write ``folder/devices_trace.json``.

    ``devices`` (the K parts' devices) and ``node_devices`` (node name -> device of every op that ``run`` executes)
    replace ``step.pm.devices`` and :func:`op_devices` of ``step`` (``None`` then), so that step functions other than
    the runtime's ``TrainStep`` (the data-parallel baselines, several graphs) can be traced the same way.
    """
    import tensorflow as tf
    from hgpart.runtime.cluster import worker_info

    folder = Path(folder)
    prof = folder / "tf_profile"
    prof.mkdir(parents=True, exist_ok=True)
    before = set(prof.rglob("*.xplane.pb"))
    devices = [_canon(d) for d in (devices if devices is not None else step.pm.devices)]
    part_of = {d: p for p, d in enumerate(devices)}
    nodes = node_devices if node_devices is not None else op_devices(step)
    node_part = {n: part_of[c] for n, d in nodes.items() if (c := _canon(d)) in part_of}
    workers = worker_info(ds)
    if not workers:
        tf.profiler.experimental.start(str(prof))
        try:
            run(steps)
        finally:
            tf.profiler.experimental.stop()
    else:
        t = time.perf_counter()
        run(1)
        one = time.perf_counter() - t
        duration_ms = int(min(10_000, max(300, 1000 * one * steps / max(1, inflight) * 1.5)))
        addrs = ",".join(f"grpc://{w.address}" for w in workers)
        errors: list[BaseException] = []

        def trace() -> None:
            try:
                tf.profiler.experimental.client.trace(addrs, str(prof), duration_ms, num_tracing_attempts=1)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        th = threading.Thread(target=trace, daemon=True, name="hgpart-trace")
        th.start()
        deadline = time.monotonic() + duration_ms / 1000 + 30
        while th.is_alive() and time.monotonic() < deadline:
            run(inflight)
        th.join(timeout=max(0.0, deadline - time.monotonic()))
        if th.is_alive() or errors:
            why = f"{type(errors[0]).__name__}: {str(errors[0]).splitlines()[0][:160]}" if errors else "timed out"
            raise DeviceError(f"the workers' profiler trace failed ({why})", where="--trace",
                              fix="run without --trace, or check that the workers are tf.distribute.Server processes")
    files = sorted(set(prof.rglob("*.xplane.pb")) - before)
    if not files:
        raise BadFileError("the TensorFlow profiler wrote no trace file", where=f"--trace {folder}",
                           fix="check that the folder is writable and no other profiler session is running",
                           path=str(folder))
    events, unmatched = read_xspace(files, node_part)
    busy, wall = busy_fractions(events, len(devices))
    meta = dict(meta or {}, traced_wall_s=wall, unmatched_events=unmatched)
    path = write_json(folder / "devices_trace.json", chrome_trace(events, devices, busy, meta), indent=None)
    counts = np.bincount(np.array([e.part for e in events], np.int64), minlength=len(devices)).tolist()
    return DeviceTrace(path=Path(path), busy=busy, wall_s=wall, ops_per_device=counts, unmatched=unmatched,
                       raw_files=[str(f) for f in files])
