#!/usr/bin/env bash
# Issue 16 on an AMD EPYC with AVX-512 (2 cores, shared), 2026-12-06 05:06 UTC (restarted 05:40): the full validation as
# 2026-12-05 ran it (a fresh `hgpart calibrate --profile` of the three models at batch 4..64, every strategy on
# minivgg and minires, vgg16 64's single device and data parallelism, 3 passes, the median of 3 per row), with three
# changes made before the runs and judged on them:
# - longer runs: the small models 64 steps at B=16 and 112 at B=32 and 64 (whole compiled calls of one size: a first
#   attempt at 120 steps compiled 2-4 call sizes and spent 9.4 minutes on minivgg B=16, 530 s of it compiling, so it
#   was stopped after that child and restarted at 05:40 with the calibration it had made at 05:05-05:24, which the
#   restart keeps), vgg16 16 steps, instead of 30 and 8: a 30-step run of minivgg at B=16 is a quarter of a second
#   of training, on a machine whose 10-step stretches spread about +-15 % inside one run
#   (benchmarks/stretch_rates.py, ../../stretch_rates/minivgg_b16.txt);
# - a compiled run is simulated with the mean steps per call it ran (64 for every run until now);
# - `hgpart calibrate-split` also times the unsplit step at every batch the single device and data parallelism call
#   (B and B/2), vgg16's with its replica placement, so vgg16's calls are charged their cost beyond the layers too.
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/simulator_validation/2026-12-06
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
