#!/usr/bin/env bash
# Issue 16, 2026-12-03, an AMD EPYC (KVM, 2 cores, shared; AVX2, no AVX-512) on which one-core layer times are about
# 2.5x those of the 2026-11-30 machines. The simulator with one flow at a time on a worker's shared core
# (Engine.one_flow), checked on new runs of the strategies it changes. Not a full validation: the full run
# (2026-11-30-pm/run.sh) would take about 3.5 hours here, past the session, so this one measures only minivgg and
# minires, and of their strategies only the single device and the three sync model-parallel ones (the rule moves
# the compiled sync rows most), three passes of 30 steps at batch 16, 32 and 64, after a fresh calibration.
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/simulator_validation/2026-12-03
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD)"
hgpart calibrate --out $OUT/cluster_this-machine.json --profile minivgg:32 --profile minires:32 \
  --batch-sizes 8,16,32,64 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log" | grep -v "^[│┃┏┗┡└]"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
python benchmarks/simulator_validation.py --models minivgg:32:30,minires:32:30 --repeats 0,1,2 \
  --methods single,layerwise-sync,coarse-sync,fine-sync \
  --cluster $OUT/cluster_this-machine.json --out $OUT 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): done"
