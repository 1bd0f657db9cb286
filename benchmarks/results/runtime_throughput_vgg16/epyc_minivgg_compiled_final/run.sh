#!/bin/bash
# minivgg layer-wise with the runtime's defaults, at b398452 (stale weights only on the parts that run ahead)
cd "$(dirname "$0")/../../../.."
python benchmarks/runtime_throughput.py --models minivgg --placements layerwise --steps 192 --repeats 2 \
  --modes async,sync --inflight 0 --baseline-inflight 0 --sync-micro 2 --rounds 3 --k1-client free \
  --out benchmarks/results/runtime_throughput_vgg16/epyc_minivgg_compiled_final
