#!/usr/bin/env bash
# Issue 16 on an AMD EPYC with AVX-512 (2 cores, shared), 2026-12-04 20:45 UTC (a second judged run at the same commit, the machine quiet at its start): the full validation of the simulator,
# as 2026-12-03-night ran it (a fresh `hgpart calibrate --profile` of the three models at batch 4..64, every strategy
# on minivgg and minires in 2 passes, vgg16 64 single device and data parallelism in 2 passes of 8 steps), with the
# split-cost calibration (`hgpart calibrate-split`) of every placement a model-parallel run used, which
# simulator_validation.py runs after the measurements and before the simulation.
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/simulator_validation/2026-12-04-eve
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD)"
hgpart calibrate --out $OUT/cluster_this-machine.json --profile minivgg:32 --profile minires:32 --profile vgg16:64 \
  --batch-sizes 4,8,16,32,64 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log" | grep -v "^[│┃┏┗┡└]"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
python benchmarks/simulator_validation.py --models minivgg:32:30,minires:32:30 --repeats 0,1 \
  --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
python benchmarks/simulator_validation.py --models vgg16:64:8 --methods single,sync-dp,async-dp-1ps,async-dp-dps \
  --repeats 0,1 --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): done"
