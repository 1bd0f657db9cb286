#!/usr/bin/env bash
# Issue 16, the afternoon's validation re-measured after the garbage-collection fix (runtime.heap.quiet_heap), on the
# same Intel Xeon with AMX (KVM, 2 cores): the afternoon's calibration reused (its cluster file and one-core
# profiles, copied from ../2026-11-29-pm/, made by `hgpart calibrate --profile` there before any run), every strategy
# on minivgg and minires (2 passes) and vgg16 64's single device and data parallelism (1 pass), simulated.
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/simulator_validation/2026-11-29-eve
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD)"
python benchmarks/simulator_validation.py --models minivgg:32:30,minires:32:30 --repeats 0,1 \
  --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
python benchmarks/simulator_validation.py --models vgg16:64:4 --methods single,sync-dp,async-dp-1ps,async-dp-dps \
  --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): done"
