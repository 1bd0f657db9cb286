"""Device-trace arithmetic: busy fraction = union of a device's op intervals / the traced window, and the Chrome
trace layout (one process per device, non-overlapping spans per thread row)."""

from __future__ import annotations

import pytest
from hgpart.runtime.devtrace import OpEvent, busy_fractions, chrome_trace


def ev(part: int, src: str, start: int, dur: int, tid: int = 0) -> OpEvent:
    return OpEvent(part, f"{src}:{tid}", f"op{start}", "Conv2D", start, dur)


def test_busy_is_union_of_overlapping_and_nested_intervals():
    events = [ev(0, "a", 0, 40), ev(0, "a", 10, 10, 1), ev(0, "a", 30, 30, 2),  # union [0, 60)
              ev(1, "a", 50, 10), ev(1, "a", 80, 20)]  # union 30
    busy, wall = busy_fractions(events, 3)
    assert wall == pytest.approx(100e-9)
    assert busy == pytest.approx([0.6, 0.3, 0.0])


def test_busy_window_is_the_overlap_of_the_trace_files():
    # worker a traced [0, 100), worker b [50, 200): the common window is [50, 100)
    events = [ev(0, "a", 0, 100), ev(1, "b", 50, 25), ev(1, "b", 150, 50)]
    busy, wall = busy_fractions(events, 2)
    assert wall == pytest.approx(50e-9)
    assert busy == pytest.approx([1.0, 0.5])


def test_chrome_trace_one_process_per_device():
    events = [ev(0, "a", 0, 40), ev(0, "a", 10, 10, 1), ev(1, "a", 50, 10)]
    doc = chrome_trace(events, ["/d:0", "/d:1"], [0.4, 0.1], {"k": 2})
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert sorted(names) == [0, 1] and "/d:1" in names[1]
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert sorted((e["pid"], e["tid"]) for e in spans) == [(0, 0), (0, 1), (1, 0)]
    assert min(e["ts"] for e in spans) == 0.0 and doc["otherData"]["device_busy"] == [0.4, 0.1]
