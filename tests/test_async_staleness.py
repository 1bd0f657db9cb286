"""Asynchronous training's two guarantees: the driver bounds staleness (task i starts only after task i - window
finished), and concurrent updates of one variable are atomic (an Adam step never exceeds its bound)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hgpart.runtime.pipeline import run_slots


def _timeline(window: int | None, slow: float = 0.4) -> dict[int, tuple[float, float]]:
    """Run 6 tasks on 2 slots; task 0 is slow. Returns task -> (start, end) in seconds."""
    spans: dict[int, tuple[float, float]] = {}
    lock = threading.Lock()
    t0 = time.perf_counter()

    def fn(i: int) -> float:
        start = time.perf_counter() - t0
        time.sleep(slow if i == 0 else 0.01)
        with lock:
            spans[i] = (start, time.perf_counter() - t0)
        return 0.0

    kwargs = {} if window is None else {"window": window}
    run_slots([fn, fn], 6, lambda i: (i,), **kwargs)
    return spans


def test_driver_bounds_staleness_by_default() -> None:
    spans = _timeline(None)
    for i in range(2, 6):  # task i starts only once task i - 2 has finished
        assert spans[i][0] >= spans[i - 2][1] - 1e-3, (i, spans)
    assert spans[1][1] < spans[0][1]  # task 1 still overlaps (and may overtake) task 0


def test_driver_without_window_lets_a_slow_task_be_overtaken() -> None:
    spans = _timeline(0)
    assert sum(spans[i][1] < spans[0][1] for i in range(1, 6)) >= 3  # tasks 1..5 ran while task 0 slept


def test_concurrent_adam_steps_stay_bounded() -> None:
    """Two threads apply Adam's first step (t = 1, zero slots) to one variable at once, with gradients 1 and 1e-6.

    Atomic updates: the first step moves every entry by at most ``lr``, the second by at most ~0.9 lr, so the total
    is under 2 lr. A torn read (the small-gradient update reads ``m`` after the other one wrote it but ``v`` before)
    gives ``m ~ 0.09`` over ``sqrt(v) ~ 3e-8``: a step of ~1e5 lr.
    """
    import tensorflow as tf
    from hgpart.runtime.step import OptimizerSpec, apply_update

    opt = OptimizerSpec("adam", lr=1e-3)
    n, rounds = 4096, 150
    w = tf.Variable(tf.zeros(n))
    slots = [tf.Variable(tf.zeros(n)), tf.Variable(tf.zeros(n))]

    @tf.function
    def step(g: tf.Tensor) -> None:
        apply_update(opt, w, g, slots, tf.constant(1.0))

    start, done = threading.Barrier(3), threading.Barrier(3)

    def worker(scale: float) -> None:
        g = tf.fill([n], scale)
        for _ in range(rounds):
            start.wait()
            step(g)
            done.wait()

    threads = [threading.Thread(target=worker, args=(s,), daemon=True) for s in (1.0, 1e-6)]
    for th in threads:
        th.start()
    worst = 0.0
    for _ in range(rounds):
        for v in (w, *slots):
            v.assign(tf.zeros(n))
        start.wait()
        done.wait()
        worst = max(worst, float(np.max(np.abs(w.numpy()))))
    for th in threads:
        th.join()
    assert worst < 2.5 * opt.lr, f"largest change {worst / opt.lr:.3g} lr"


@pytest.mark.parametrize("window", [1, 3])
def test_driver_runs_every_task_once_with_any_window(window: int) -> None:
    seen: list[int] = []
    lock = threading.Lock()

    def fn(i: int) -> float:
        with lock:
            seen.append(i)
        return float(i)

    recs = run_slots([fn] * 3, 20, lambda i: (i,), window=window)
    assert sorted(seen) == list(range(20)) and sorted(r.step for r in recs) == list(range(20))
