#!/usr/bin/env bash
# Issue 16 on an AMD EPYC with AVX-512 (2 cores, shared), 2026-12-06 15:45 UTC: the full validation of
# ../2026-12-06-pm/run.sh (every strategy on minivgg and minires at B=16/32/64 with 64-step calls, vgg16 64's single
# device and data parallelism at 8/16/32, 3 passes, the median of 3 per row), in two phases:
#   bash run.sh measure   # the runs, which depend on no calibration (simulator_validation.py --measure-only)
#   bash run.sh predict   # then a fresh `hgpart calibrate --profile` and calibrate-split, and the simulation
# The runs come first so that the calibration's new figure (a pulled tensor's cost beyond the first, measured by
# `hgpart calibrate`) could be built while they ran; nothing of these runs was looked at before the prediction.
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/simulator_validation/2026-12-06-eve
stamp() { echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD) $*"; }
quiet() { grep -v "^[IWE]0000\|^WARNING: All log"; }
case "$1" in
measure)
  stamp measure
  python benchmarks/simulator_validation.py --models minivgg:32:112,minires:32:112 --steps-per-batch 16:64 \
    --repeats 0,1,2 --measure-only --out $OUT 2>&1 | quiet
  stamp
  python benchmarks/simulator_validation.py --models vgg16:64:16 --methods single,sync-dp,async-dp-1ps,async-dp-dps \
    --repeats 0,1,2 --measure-only --out $OUT 2>&1 | quiet
  stamp measured ;;
measure-rest)
  # the machine was shut down at about 16:45 on 2026-12-06, after 15 of the 18 small-model runs (minires's third
  # pass missing) and before vgg16; the rest was measured on 2026-12-07 with the same code and the same commands
  stamp measure-rest
  python benchmarks/simulator_validation.py --models minires:32:112 --steps-per-batch 16:64 \
    --repeats 2 --measure-only --out $OUT 2>&1 | quiet
  stamp
  python benchmarks/simulator_validation.py --models vgg16:64:16 --methods single,sync-dp,async-dp-1ps,async-dp-dps \
    --repeats 0,1,2 --measure-only --out $OUT 2>&1 | quiet
  stamp measured ;;
predict)
  stamp predict
  [ -f $OUT/cluster_this-machine.json ] || hgpart calibrate --out $OUT/cluster_this-machine.json --profile minivgg:32 \
    --profile minires:32 --profile vgg16:64 --batch-sizes 4,8,16,32,64 2>&1 | quiet | grep -v "^[│┃┏┗┡└]"
  stamp
  python benchmarks/simulator_validation.py --models minivgg:32:112,minires:32:112 --steps-per-batch 16:64 \
    --skip-measure --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 | quiet
  stamp
  python benchmarks/simulator_validation.py --models vgg16:64:16 --methods single,sync-dp,async-dp-1ps,async-dp-dps \
    --skip-measure --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 | quiet
  stamp done ;;
*) echo "usage: bash $0 measure|measure-rest|predict" >&2; exit 2 ;;
esac
