#!/usr/bin/env bash
# minivgg, layer-wise K=2 against one pinned worker, 1280-step runs, 3 rounds, with runtime.heap.quiet_heap in
# fit; the command of ../xeon_amx_minivgg_quiet_heap/ on an AMD EPYC (2 cores), 2026-11-29 evening, at the head, repeated right after ../epyc_minivgg_head/ (issue 19)
cd "$(dirname "$0")/../../../.."
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD)"
python benchmarks/runtime_throughput.py --models minivgg --placements layerwise --steps 1280 --repeats 2 \
  --modes async --inflight 0 --baseline-inflight 0 --rounds 3 --k1-client free \
  --out benchmarks/results/runtime_throughput_vgg16/epyc_minivgg_head2 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
