#!/usr/bin/env bash
# Issue 16 on an AMD EPYC (2 cores, shared), 2026-11-29 night: a fresh calibration made right before the runs
# (`hgpart calibrate --profile` of the three models at batch 8..64, which now also measures the client's CPU per
# step call of each, runtime.clientbench), then every strategy on minivgg and minires
# (2 passes) and vgg16 64's single device and data parallelism (1 pass), then the simulation of every run.
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/simulator_validation/2026-11-29-night
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD)"
hgpart calibrate --out $OUT/cluster_this-machine.json --profile minivgg:32 --profile minires:32 --profile vgg16:64 \
  --batch-sizes 8,16,32,64 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log" | grep -v "^[│┃┏┗┡└]"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
python benchmarks/simulator_validation.py --models minivgg:32:30,minires:32:30 --repeats 0,1 \
  --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
python benchmarks/simulator_validation.py --models vgg16:64:4 --methods single,sync-dp,async-dp-1ps,async-dp-dps \
  --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): done"
