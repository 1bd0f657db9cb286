"""Do the runtime's asynchronous data-parallel workers' calls overlap? One thread alternating the workers' calls
against one thread per worker, as the runtime drives them.

Run (from the repository root)::

    python benchmarks/async_dp_overlap.py [--model minivgg] [--input 32] [--batch-size 32] [--rounds 2]

Why: the simulator once let async data parallelism's workers take turns (their steps are multi-device functions:
each reads and updates parameters on other devices). This measures it on the runtime itself: for each strategy,
in its own process on 2 local pinned workers, the strategy's two worker functions
(:func:`hgpart.runtime.dataparallel.make_strategy`, Adam) are called for 4 s each way: worker 0's alone, worker 1's
alone, both alternating from one thread, and both from two threads at once. ``overlap`` is the two threads' calls
per second over the alternating thread's: 1 if the calls take turns, 2 if they overlap completely.
Prints one line per strategy and round, and the load average at the start and end.

``--strategies single-pair`` measures the same four ways for two independent single-device steps
(``make_strategy("single")``), one on each worker, each on its own copy of the model at ``B / 2`` images, as sync
data parallelism's replicas compute: nothing crosses between them, so they can only slow each other by sharing the
machine (the cores' caches and memory, the client). ``beside`` is the two threads' calls per second over the sum of
the two workers' alone: 1 if a worker computes as fast beside the other as alone.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

STRATEGIES = ("async-dp-1ps", "async-dp-dps")
#: two independent single-device steps, one per worker (see the module docstring)
PAIR = "single-pair"


def _rate(fns: list[Callable[..., Any]], which: list[int], threads: bool, x: Any, y: Any, secs: float) -> float:
    """Calls per second of ``fns[which]``: from one thread in turn, or from one thread each."""
    done = [0] * len(which)
    stop = time.perf_counter() + secs

    def loop(i: int) -> None:
        while time.perf_counter() < stop:
            fns[which[i]](x, y)
            done[i] += 1

    t0 = time.perf_counter()
    if threads:
        ts = [threading.Thread(target=loop, args=(i,)) for i in range(len(which))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    else:
        k = 0
        while time.perf_counter() < stop:
            fns[which[k % len(which)]](x, y)
            done[k % len(which)] += 1
            k += 1
    return sum(done) / (time.perf_counter() - t0)


def child(strategy: str, model_name: str, size: int, batch: int, rounds: int, secs: float) -> None:
    import numpy as np

    from hgpart import quiet

    quiet.quiet_python()
    import keras
    from hgpart.runtime.dataparallel import make_strategy
    from hgpart.runtime.devices import open_devices
    from hgpart.runtime.step import OptimizerSpec

    from hgpart.models import load_keras_model

    ds = open_devices("local", 2, inter_op=4)
    if strategy == PAIR:  # worker i's own single-device step on its own model copy, at the replica's batch
        from types import SimpleNamespace

        fns = []
        for d in ds.devices[:2]:
            keras.utils.set_random_seed(0)
            copy = load_keras_model(model_name, input_shape=(size, size, 3), num_classes=10)
            one = SimpleNamespace(devices=[d], host=getattr(ds, "host", None) or d)
            fns.append(make_strategy("single", copy, one, OptimizerSpec("adam", 1e-3), batch_size=batch // 2)
                       .slot_fns[0])
    else:
        keras.utils.set_random_seed(0)
        model = load_keras_model(model_name, input_shape=(size, size, 3), num_classes=10)
        fns = make_strategy(strategy, model, ds, OptimizerSpec("adam", 1e-3), batch_size=batch).slot_fns
    rng = np.random.default_rng(0)
    x = rng.random((batch // 2, size, size, 3), dtype=np.float32)
    y = rng.integers(0, 10, batch // 2).astype(np.int32)
    for f in fns:  # trace and place
        f(x, y)
        f(x, y)
    for r in range(rounds):
        a0, a1 = _rate(fns, [0], False, x, y, secs), _rate(fns, [1], False, x, y, secs)
        ser, con = _rate(fns, [0, 1], False, x, y, secs), _rate(fns, [0, 1], True, x, y, secs)
        print(f"{strategy} {model_name} {size} B={batch} round {r}: worker calls/s: w0 alone {a0:6.1f}, w1 alone "
              f"{a1:6.1f}, alternating {ser:6.1f}, two threads {con:6.1f} ({con * batch / 2:6.0f} images/s); "
              f"overlap {con / ser:4.2f}" + (f", beside {con / (a0 + a1):4.2f}" if strategy == PAIR else ""),
              flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minivgg")
    ap.add_argument("--input", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=4.0, help="per way and round")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.model, args.input, args.batch_size, args.rounds, args.seconds)
        return 0
    print(f"$ python benchmarks/async_dp_overlap.py {' '.join(sys.argv[1:] if argv is None else argv)}   # "
          f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, load average at start "
          f"{[round(v, 2) for v in os.getloadavg()]}", flush=True)
    for strategy in args.strategies.split(","):  # each in its own process: one eager cluster per process
        subprocess.run([sys.executable, __file__, "--child", strategy, "--model", args.model, "--input",
                        str(args.input), "--batch-size", str(args.batch_size), "--rounds", str(args.rounds),
                        "--seconds", str(args.seconds)], check=True)
    print(f"load average at end {[round(v, 2) for v in os.getloadavg()]}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
