"""What the gradient of the images costs in a first convolution's timed backward (the profiler's change 5699990).

Run (from the repository root, pinned to one core as one-core profiles are)::

    taskset -c 0 python benchmarks/image_gradient_probe.py [--model minivgg] [--input 32] [--batch-size 32]

Times the profiler's own forward+backward callable (:func:`hgpart.profiler._layer_timer`) of the model's first
layer with one intra-op thread, once with the gradient of the images (as the profiler did before) and once without
(as training runs it, and the profiler now does): the median of 7 rounds of 50 calls each, after 20 warm-up calls.
Prints both, their ratio and the load average at start and end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minivgg")
    ap.add_argument("--input", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    l0 = [round(v, 2) for v in os.getloadavg()]
    import tensorflow as tf

    from hgpart.frontend import layer_graph_from_keras
    from hgpart.models import load_keras_model
    from hgpart.profiler import _layer_timer

    tf.config.threading.set_intra_op_parallelism_threads(1)
    model = load_keras_model(args.model, input_shape=(args.input, args.input, 3), num_classes=10)
    graph = layer_graph_from_keras(model, name=args.model)
    layer = graph.layers[1]
    images = frozenset(x.name for x in graph.layers if not x.inputs)
    ms = {}
    for name, skip in (("with the images' gradient", frozenset()), ("without", images)):
        _, fwd_bwd, _ = _layer_timer(model.get_layer(layer.name), layer, args.batch_size, skip)
        for _ in range(20):
            fwd_bwd()
        rounds = []
        for _ in range(7):
            t = time.perf_counter()
            for _ in range(50):
                fwd_bwd()
            rounds.append((time.perf_counter() - t) / 50 * 1e3)
        ms[name] = statistics.median(rounds)
        print(f"{layer.name} forward+backward {name}: {ms[name]:.3f} ms (rounds {[round(r, 3) for r in rounds]})")
    a, b = ms.values()
    print(f"{args.model} {args.input}x{args.input}, batch {args.batch_size}: the images' gradient is "
          f"{(a - b) / a:.0%} of the timed forward+backward ({a / b:.2f}x); load average at start {l0}, "
          f"at end {[round(v, 2) for v in os.getloadavg()]}")


if __name__ == "__main__":
    main()
