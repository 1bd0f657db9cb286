#!/bin/bash
# minivgg layer-wise, async, with the runtime's defaults, after the feed reads a call's steps in one gather and
# has the first call's batches read before the untimed warm-up (not on the first timed call's clock)
cd "$(dirname "$0")/../../../.."
python benchmarks/runtime_throughput.py --models minivgg --placements layerwise --steps 192 --repeats 2 \
  --modes async --inflight 0 --baseline-inflight 0 --rounds 5 --k1-client free \
  --out benchmarks/results/runtime_throughput_vgg16/epyc_minivgg_feed
