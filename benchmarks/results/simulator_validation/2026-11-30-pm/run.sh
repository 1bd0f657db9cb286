#!/usr/bin/env bash
# Issue 16 on an AMD EPYC (2 cores, shared), 2026-11-30 pm: the simulator with the async data-parallel workers'
# calls waiting for the client's work, which takes turns on the client's interpreter, judged on new runs. A fresh
# calibration made right before the runs: `hgpart calibrate --profile` of the three models at batch 4..64 (4: the
# replicas of vgg16's data parallelism at batch 8 run 4 images each, no longer scaled from the profile at 8), whose
# ring all-reduce benchmark now reaches 256 MiB (vgg16 64's gradients are 168 MiB); then every strategy on minivgg
# and minires (3 passes) and vgg16 64's single device and data parallelism (3 passes of 8 steps, were 2 of 4); then
# the simulation of every run.
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/simulator_validation/2026-11-30-pm
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
