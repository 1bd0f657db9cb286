#!/usr/bin/env bash
# Issue 16, a judged full validation after TensorFlow's BFC CPU allocator became the default (b226cc8), on an AMD
# EPYC without AVX-512 (2 cores, shared), 2026-12-07 from 23:54 UTC. The validation of ../2026-12-06-eve/run.sh
# (every strategy on minivgg and minires at B=16/32/64 with 64-step calls at 16, vgg16 64's single device and data
# parallelism at 8/16/32), one pass of each model and then a second of the small models (the slow host's three
# passes would not fit in the session), in phases run back to back:
#   bash run.sh measure   # the runs, which depend on no calibration (simulator_validation.py --measure-only)
#   bash run.sh predict   # then a fresh `hgpart calibrate --profile`, calibrate-split, and the simulation
#   bash run.sh measure2  # then a second pass of the small models, and `predict` again (see README.md)
# Nothing of the runs was looked at before the prediction.
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/simulator_validation/2026-12-07-night
stamp() { echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD) $*"; }
quiet() { grep --line-buffered -v "^[IWE]0000\|^WARNING: All log"; }
case "$1" in
measure)
  stamp measure
  python benchmarks/simulator_validation.py --models minivgg:32:112,minires:32:112 --steps-per-batch 16:64 \
    --repeats 0 --measure-only --out $OUT 2>&1 | quiet
  stamp
  python benchmarks/simulator_validation.py --models vgg16:64:16 --methods single,sync-dp,async-dp-1ps,async-dp-dps \
    --repeats 0 --measure-only --out $OUT 2>&1 | quiet
  stamp measured ;;
predict)
  stamp predict
  [ -f $OUT/cluster_this-machine.json ] || hgpart calibrate --out $OUT/cluster_this-machine.json --profile minivgg:32 \
    --profile minires:32 --profile vgg16:64 --batch-sizes 4,8,16,32,64 2>&1 | quiet | grep --line-buffered -v "^[│┃┏┗┡└]"
  stamp
  python benchmarks/simulator_validation.py --models minivgg:32:112,minires:32:112 --steps-per-batch 16:64 \
    --skip-measure --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 | quiet
  stamp
  python benchmarks/simulator_validation.py --models vgg16:64:16 --methods single,sync-dp,async-dp-1ps,async-dp-dps \
    --skip-measure --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 | quiet
  stamp done ;;
measure2)
  # a second pass of the small models, added after the first prediction (the first pass's single device ran
  # 1.3-1.7x slower per step than the calibration's profiles; host_check/); then `bash run.sh predict` again,
  # which reuses the calibration and the split costs already in the cluster file
  stamp measure pass 2
  python benchmarks/simulator_validation.py --models minivgg:32:112,minires:32:112 --steps-per-batch 16:64 \
    --repeats 1 --measure-only --out $OUT 2>&1 | quiet
  stamp measured pass 2 ;;
*) echo "usage: bash $0 measure|predict|measure2" >&2; exit 2 ;;
esac
