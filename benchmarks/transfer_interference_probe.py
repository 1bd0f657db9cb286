"""Do transfers between two pinned local workers cost more core time while both workers compute? One function, timed
three ways.

Run (from the repository root)::

    python benchmarks/transfer_interference_probe.py [--reps 15] [--mib 1,4] [--hops 16] [--convs 8]

Why: the simulator (``hgpart/simulate``) charges a transfer between local workers its calibrated idle hop time
(``hgpart calibrate``: a chain of hops with nothing else running) and holds both workers' cores for it, so compute
and transfers on a worker add up. minires's fine placements run 26-52 % slower than simulated
(``results/simulator_validation/2026-12-03-night/``), and re-simulating them with links 2.5 times slower brings
them within 30 %. This asks whether the runtime's condition, transfers while both workers compute, makes them
cost more than the calibration says. Each size times, on 2 pinned local workers (the runtime's ``open_local``, 4
inter-op threads each), three compiled functions:

* ``compute``: each worker runs a chain of ``--convs`` 3x3 convolutions (64 -> 64 channels, 32x32, batch 32) of
  its own, the two chains independent;
* ``hops``: a chain of ``--hops`` hops of the size between the workers (``hgpart.runtime.linkbench.hop_chain``, as the
  calibration times them), nothing else;
* ``both``: the two in one function, independent branches the executors run at once.

It prints the median wall time of each (over ``--reps`` calls, interleaved) and the extra time of ``both`` over
``compute`` per hop, against the per-hop time of ``hops`` alone (less the empty function's time). The simulator's
rule predicts ``both`` = ``compute`` + ``hops`` (a transfer holds both cores); a larger ``both`` means transfers
and compute slow each other down beyond sharing the cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

MIB = 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--mib", default="1,4", help="hop sizes in MiB, comma-separated")
    ap.add_argument("--hops", type=int, default=16)
    ap.add_argument("--convs", type=int, default=8)
    args = ap.parse_args()
    from hgpart.runtime.cluster import open_local
    from hgpart.runtime.linkbench import hop_chain

    print(f"$ python benchmarks/transfer_interference_probe.py --reps {args.reps} --mib {args.mib} --hops {args.hops} "
          f"--convs {args.convs}   # {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load average at "
          f"start {[round(v, 2) for v in os.getloadavg()]}", flush=True)
    with open_local(2, inter_op=4, start_timeout=180) as ds:
        import tensorflow as tf

        devs = ds.devices[:2]
        with tf.device(devs[0]):
            w0 = tf.Variable(tf.random.normal([3, 3, 64, 64], stddev=0.05))
            x0 = tf.Variable(tf.random.normal([32, 32, 32, 64]))
        with tf.device(devs[1]):
            w1 = tf.Variable(tf.random.normal([3, 3, 64, 64], stddev=0.05))
            x1 = tf.Variable(tf.random.normal([32, 32, 32, 64]))

        def convs() -> Any:
            outs = []
            for dev, w, x in ((devs[0], w0, x0), (devs[1], w1, x1)):
                with tf.device(dev):
                    y = x
                    for _ in range(args.convs):
                        y = tf.nn.relu(tf.nn.conv2d(y, w, 1, "SAME"))
                    outs.append(tf.reduce_sum(y[0, 0, 0]))
            with tf.device(devs[0]):
                return outs[0] + tf.identity(outs[1])

        seed = tf.constant(1.0)
        for mib in (float(s) for s in args.mib.split(",")):
            elements = int(mib * MIB) // 4
            empty, chain, none = (hop_chain(devs[0], devs[1], elements, 0),
                                  hop_chain(devs[0], devs[1], elements, args.hops), hop_chain(devs[0], devs[1], 1, 0))
            fns = {  # a compiled hop chain called inside another function is inlined into it
                "empty": empty,
                "hops": chain,
                "compute": tf.function(lambda s, f=none: convs() + f(s)),
                "both": tf.function(lambda s, f=chain: convs() + f(s)),
            }
            for f in fns.values():
                for _ in range(3):
                    f(seed).numpy()
            times: dict[str, list[float]] = {k: [] for k in fns}
            for _ in range(args.reps):
                for k, f in fns.items():
                    t0 = time.perf_counter()
                    f(seed).numpy()
                    times[k].append(time.perf_counter() - t0)
            med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
            hop_alone = (med["hops"] - med["empty"]) / args.hops
            hop_loaded = (med["both"] - med["compute"]) / args.hops
            print(f"{mib:g} MiB: empty {med['empty']:.2f} ms, hops {med['hops']:.2f}, compute {med['compute']:.2f}, "
                  f"both {med['both']:.2f} (compute + hops - empty {med['compute'] + med['hops'] - med['empty']:.2f}); "
                  f"per hop alone {hop_alone:.3f} ms, beside compute {hop_loaded:.3f} ms "
                  f"(x{hop_loaded / hop_alone:.2f})", flush=True)
    print(f"load average at end {[round(v, 2) for v in os.getloadavg()]}")


if __name__ == "__main__":
    main()
