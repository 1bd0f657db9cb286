#!/usr/bin/env bash
# Issue 16 on the Intel Xeon with AMX (KVM, 2 cores) of 2026-11-29: calibrate this machine, measure every strategy on
# minivgg and minires (2 passes) and vgg16's single device and async data parallelism (1 pass), then simulate.
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/simulator_validation/2026-11-29-amx
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD)"
python benchmarks/simulator_validation.py --models minivgg:32:30,minires:32:30 --repeats 0,1 --out $OUT 2>&1 \
  | grep -v "^[IWE]0000\|^WARNING: All log"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
python benchmarks/simulator_validation.py --models vgg16:64:4 --methods single,async-dp-1ps,async-dp-dps \
  --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): done"
