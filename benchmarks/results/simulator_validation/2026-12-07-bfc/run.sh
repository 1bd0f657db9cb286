#!/usr/bin/env bash
# Issue 16, not a judged run: vgg16 64's single device and data parallelism at B=8/16/32 (one pass) on the AMD EPYC
# without AVX-512 of 2026-12-07-samehost, after TensorFlow's BFC CPU allocator became the default (b226cc8), to see
# whether the sync-dp rows predicted 21-51 % too fast there come right. First the runs, then a fresh calibration
# (vgg16's profile only) and the prediction; nothing of the runs is looked at before the prediction.
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/simulator_validation/2026-12-07-bfc
stamp() { echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD) $*"; }
quiet() { grep --line-buffered -v "^[IWE]0000\|^WARNING: All log"; }
stamp measure
python benchmarks/simulator_validation.py --models vgg16:64:16 --methods single,sync-dp,async-dp-1ps,async-dp-dps \
  --repeats 0 --measure-only --out $OUT 2>&1 | quiet
stamp calibrate
[ -f $OUT/cluster_this-machine.json ] || hgpart calibrate --out $OUT/cluster_this-machine.json --profile vgg16:64 \
  --batch-sizes 4,8,16,32 2>&1 | quiet | grep --line-buffered -v "^[│┃┏┗┡└]"
stamp predict
python benchmarks/simulator_validation.py --models vgg16:64:16 --methods single,sync-dp,async-dp-1ps,async-dp-dps \
  --skip-measure --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 | quiet
stamp done
