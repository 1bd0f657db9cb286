#!/usr/bin/env bash
# Issue 16 on an AMD EPYC with AVX-512 (2 cores, shared), 2026-12-06 12:45 UTC: the full validation exactly as
# ../2026-12-06/run.sh ran it (a fresh `hgpart calibrate --profile` of the three models at batch 4..64, every
# strategy on minivgg and minires with 64-step calls, vgg16 64's single device and data parallelism, 3 passes, the
# median of 3 per row), with nothing in the simulator changed since that run. What changed is the runtime it
# measures and calibrates: the compiled pipeline traces each step's gradients through that step's own reads and
# makes Adam's bias corrections once per device and step (554fb76, 3a6c070, 62be38d), which compiles in about 0.6
# of the time (../../compile_time/) and leaves the training graph's compute the same.
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/simulator_validation/2026-12-06-pm
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD)"
[ -f $OUT/cluster_this-machine.json ] || hgpart calibrate --out $OUT/cluster_this-machine.json --profile minivgg:32 --profile minires:32 --profile vgg16:64 \
  --batch-sizes 4,8,16,32,64 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log" | grep -v "^[│┃┏┗┡└]"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
python benchmarks/simulator_validation.py --models minivgg:32:112,minires:32:112 --steps-per-batch 16:64 \
  --repeats 0,1,2 \
  --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
python benchmarks/simulator_validation.py --models vgg16:64:16 --methods single,sync-dp,async-dp-1ps,async-dp-dps \
  --repeats 0,1,2 --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): done"
