#!/bin/bash
# minivgg with the runtime's defaults (the compiled pipeline, 64 steps per call, K + 1 in flight), at f805e2e
cd "$(dirname "$0")/../../../.."
python benchmarks/runtime_throughput.py --models minivgg --placements layerwise,coarse --steps 192 --repeats 2 \
  --modes async,sync --inflight 0 --baseline-inflight 0 --sync-micro 2 --rounds 3 --k1-client free \
  --out benchmarks/results/runtime_throughput_vgg16/epyc_minivgg_compiled64
