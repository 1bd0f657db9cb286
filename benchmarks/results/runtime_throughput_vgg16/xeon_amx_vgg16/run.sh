#!/usr/bin/env bash
# vgg16 at 64, batch 32, the coarse placement from this machine's own one-core profile (made by `hgpart calibrate
# --profile vgg16:64` for ../../simulator_validation/2026-11-29-pm/), async and sync with the runtime's default
# batches in flight, against K=1: the command of ../epyc_vgg16_default_inflight/ on the Intel Xeon with AMX (issue 19)
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/runtime_throughput_vgg16/xeon_amx_vgg16
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD)"
python benchmarks/runtime_throughput.py --models vgg16 --placements coarse --steps 16 --repeats 1 --modes async,sync \
  --inflight 0 --sync-micro 4 --rounds 3 --k1-client free \
  --profiles benchmarks/results/simulator_validation/2026-11-29-pm/profiles --out $OUT 2>&1 \
  | grep -v "^[IWE]0000\|^WARNING: All log"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
