#!/bin/bash
# the compiled pipeline's first run (16 steps per call, 2 in flight), at the tree of 91f000b before its grouped feed;
# runtime_throughput.py then trained on --data synthetic (512 images, 16-step epochs), not one epoch of --steps steps
cd "$(dirname "$0")/../../../.."
python benchmarks/runtime_throughput.py --models minivgg --placements layerwise,coarse --steps 48 --repeats 3 \
  --modes async,async-compiled,sync,sync-compiled --inflight 0 --baseline-inflight 0 --sync-micro 2 --rounds 3 \
  --k1-client free --out benchmarks/results/runtime_throughput_vgg16/epyc_minivgg_compiled
