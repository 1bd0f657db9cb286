#!/usr/bin/env bash
# Issue 16 on an AMD EPYC with AVX-512 (2 cores, shared), 2026-12-05 04:20 UTC (a third judged run, at a commit that
# changed only a test since 2026-12-04-eve): the full validation of the simulator as 2026-12-04-eve ran it (a fresh
# `hgpart calibrate --profile` of the three models at batch 4..64, every strategy on minivgg and minires, vgg16 64
# single device and data parallelism in passes of 8 steps, the split-cost calibration of every placement a
# model-parallel run used), but in 3 passes instead of 2, so that each row is a median of 3 measurements, not the
# mean of 2: benchmarks/results/measurement_noise/2026-12-04-eve measured the two worst rows 25-32 % below their 8-round medians.
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/simulator_validation/2026-12-05
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD)"
hgpart calibrate --out $OUT/cluster_this-machine.json --profile minivgg:32 --profile minires:32 --profile vgg16:64 \
  --batch-sizes 4,8,16,32,64 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log" | grep -v "^[│┃┏┗┡└]"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
python benchmarks/simulator_validation.py --models minivgg:32:30,minires:32:30 --repeats 0,1,2 \
  --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
python benchmarks/simulator_validation.py --models vgg16:64:8 --methods single,sync-dp,async-dp-1ps,async-dp-dps \
  --repeats 0,1,2 --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): done"
