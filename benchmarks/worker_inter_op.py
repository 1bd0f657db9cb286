"""Async minivgg throughput on 2 local pinned workers with a given number of worker inter-op threads.

Run (one configuration per process; alternate them to compare side by side)::

    python benchmarks/worker_inter_op.py PLACEMENT.json INTER_OP      # prints one ROW line: images/s of 3 x 12 steps

Why: a step's kernels summed exceed the worker's busy time (several inter-op threads time-slice its one core);
this measures whether fewer threads buy throughput.
"""

from __future__ import annotations

import json
import os
import statistics
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main() -> None:
    from hgpart.runtime.cluster import open_local
    from hgpart.runtime.train import train

    path, inter = sys.argv[1], int(sys.argv[2])
    l0 = os.getloadavg()[0]
    with open_local(2, inter_op=inter, start_timeout=240) as ds:
        ips = [train(path, device_set=ds, batch_size=32, steps=12, mode="async", dataset="synthetic",
                     inflight=2).images_per_s for _ in range(3)]
    print("ROW", json.dumps({"inter": inter, "ips": ips, "median": statistics.median(ips),
                             "load": [l0, os.getloadavg()[0]]}), flush=True)


if __name__ == "__main__":
    main()
