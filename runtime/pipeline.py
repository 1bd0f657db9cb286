"""The threaded asynchronous driver shared by every strategy (thesis §4.2).

Usage::

    rows = run_slots([step] * inflight, steps, lambda i: batch(i))

One thread per slot function; whenever a thread is free it takes the next
task (``task(i)`` gives its inputs), so several batches are in flight and no
device waits for a whole step to drain. The model-parallel pipeline
(:func:`hgpart.runtime.train.run_pipeline`) and the data-parallel workers
(:func:`hgpart.runtime.dataparallel.run_slots`) both run on it. The first
failure stops every thread and is re-raised in the caller as one HgpartError.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from hgpart.errors import HgpartError

__all__ = ["run_slots"]


def run_slots(
    fns: Sequence[Callable[..., Any]],
    n_tasks: int,
    task: Callable[[int], tuple[Any, ...]],
    *,
    on_task: Callable[[dict[str, Any], int], None] | None = None,
    fix: str | None = None,
    thread_name: str = "hgpart-slot",
) -> list[dict[str, Any]]:
    """Run tasks ``0..n_tasks-1``, each as ``fns[slot](*task(i))`` on the first free slot.

    Returns one row per task (``task``, ``slot``, ``loss``, ``start_s``, ``end_s``,
    ``batch_s``) sorted by finishing time. ``on_task(row, done)`` is called under
    the lock with the number of tasks finished so far.
    """
    lock = threading.Lock()
    nxt = [0]
    rows: list[dict[str, Any]] = []
    errors: list[BaseException] = []
    t0 = time.perf_counter()

    def worker(slot: int) -> None:
        fn = fns[slot]
        while True:
            with lock:
                if errors or nxt[0] >= n_tasks:
                    return
                i = nxt[0]
                nxt[0] += 1
            args = task(i)
            start = time.perf_counter()
            try:
                loss = fn(*args)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                with lock:
                    errors.append(exc)
                return
            end = time.perf_counter()
            with lock:
                row = {"task": i, "slot": slot, "loss": loss, "start_s": start - t0, "end_s": end - t0,
                       "batch_s": end - start}
                rows.append(row)
                if on_task is not None:
                    on_task(row, len(rows))

    threads = [threading.Thread(target=worker, args=(s,), daemon=True, name=f"{thread_name}{s}")
               for s in range(len(fns))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        exc = errors[0]
        if isinstance(exc, HgpartError):
            raise exc
        raise HgpartError(f"a training step failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}",
                          where="runtime", fix=fix)
    rows.sort(key=lambda r: r["end_s"])
    return rows
