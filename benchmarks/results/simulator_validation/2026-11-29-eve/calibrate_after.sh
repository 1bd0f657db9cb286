#!/usr/bin/env bash
# The machine ran 10-30 % faster during run.sh than when ../2026-11-29-pm/ was calibrated (single device minivgg 32
# at batch 32: 1,558 against 1,234 images/s), so the copied calibration is replaced by a fresh one made right after
# the runs (same command as the afternoon's), and every run is simulated with it.
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/simulator_validation/2026-11-29-eve
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD)"
rm -rf $OUT/cluster_this-machine.json $OUT/profiles
hgpart calibrate --out $OUT/cluster_this-machine.json --profile minivgg:32 --profile minires:32 --profile vgg16:64 \
  --batch-sizes 8,16,32,64 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log" | grep -v "^[│┃┏┗┡└]"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
python benchmarks/simulator_validation.py --skip-measure --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 \
  | grep -v "^[IWE]0000\|^WARNING: All log"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): done"
