#!/usr/bin/env bash
# vgg16 at 64, batch 32, the coarse placement from this machine's own one-core profile (three stages), async and
# sync with NO --inflight: the runtime's default (one batch per stage through stages), against K=1 with 2 in flight
cd /work/main
OUT=benchmarks/results/runtime_throughput_vgg16/epyc_vgg16_default_inflight
mkdir -p $OUT
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD): runtime_throughput vgg16 (64) async+sync, default in flight"
.venv/bin/python benchmarks/runtime_throughput.py --models vgg16 --placements coarse --steps 16 --repeats 1 --modes async,sync --inflight 0 --sync-micro 4 --rounds 3 --k1-client free --profiles benchmarks/results/runtime_throughput_vgg16/epyc_vgg16_own_profile/profile --out $OUT 2>&1 | grep -v "^I0000\|^WARNING: All"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): done"
