"""Does a call of the compiled pipeline return to the client before it has run on the workers?

Run (from the repository root)::

    python benchmarks/results/runtime_throughput_vgg16/xeon_minivgg_call_boundary/launch_probe.py PLACEMENT

One K = 2 local cluster, the placement's 64-step compiled function (3 in flight, as the runtime's default), 6 calls
per way, twice: ``seq`` calls it and fetches its losses, one call after the other; ``ahead`` calls the next one
before fetching the previous one's losses; ``async`` does the same inside ``tf.experimental.async_scope()``. Prints
images/s and the mean time of the call itself (``fn(x, y)``) and of the fetch (``.numpy()``): if a call returned
before running, the call would take milliseconds and the fetch the rest.
"""
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
from hgpart.runtime.cluster import open_local  # noqa: E402
from hgpart.runtime.evaluation import MeteredStep  # noqa: E402
from hgpart.runtime.modelsource import build_for_placement  # noqa: E402
from hgpart.runtime.multistep import MultiStep  # noqa: E402
from hgpart.runtime.partitioned import PlacedModel  # noqa: E402
from hgpart.runtime.step import OptimizerSpec  # noqa: E402

from hgpart.placement import load_placement  # noqa: E402

pl = load_placement(sys.argv[1])
n, B = 64, 32
print(f"$ python {' '.join(sys.argv)}   # {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load average at "
      f"start {[round(v, 2) for v in os.getloadavg()]}", flush=True)
with open_local(2, inter_op=4, start_timeout=180) as ds:
    import tensorflow as tf

    pm = PlacedModel(pl, build_for_placement(pl, seed=0), ds.devices, host=ds.host)
    ms = MultiStep(MeteredStep(pm, OptimizerSpec("adam"), batch_size=B), steps_per_call=n, inflight=3)
    fn = ms.function(n)
    rng = np.random.default_rng(0)
    x = rng.random((n * B, *pm.graph.input_shape), dtype=np.float32)
    y = rng.integers(0, 10, n * B).astype(np.int32)

    def call() -> tuple:
        with tf.device(pm.host):
            xt, yt = tf.constant(x), tf.constant(y)
        return fn(xt, yt)

    call()[0].numpy()
    call()[0].numpy()

    def timed(ahead: bool) -> tuple[float, float]:
        """6 calls, each fetched at once or after the next call is made: seconds in calls and in fetches."""
        t_call = t_fetch = 0.0
        prev = call() if ahead else None
        for _ in range(5 if ahead else 6):
            a = time.perf_counter()
            out = call()
            b = time.perf_counter()
            (prev if ahead else out)[0].numpy()
            t_call += b - a
            t_fetch += time.perf_counter() - b
            prev = out
        if ahead:
            prev[0].numpy()
        return t_call, t_fetch

    for way in ("seq", "ahead", "async") * 2:
        t0 = time.perf_counter()
        if way == "async":
            with tf.experimental.async_scope():
                t_call, t_fetch = timed(True)
        else:
            t_call, t_fetch = timed(way == "ahead")
        wall = time.perf_counter() - t0
        print(f"{way:6s} 6 calls {wall:.3f} s = {6 * n * B / wall:.0f} images/s; call {t_call / 6 * 1e3:.1f} ms, "
              f"fetch {t_fetch / 6 * 1e3:.1f} ms", flush=True)
print(f"load average at end {[round(v, 2) for v in os.getloadavg()]}", flush=True)
