#!/usr/bin/env bash
# One-core profiles of this machine for vgg16 64 at the batch sizes its runs used (added 2026-11-29 afternoon, so
# that the vgg16 runs of run.sh, which kept no placement, can be simulated too)
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/simulator_validation/2026-11-29-amx/profiles
mkdir -p $OUT
for b in 8 16 32; do
  echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): vgg16 b$b"
  hgpart profile --model vgg16 --input 64 --batch-size $b --cores 1 --out $OUT/vgg16_64_b${b}_c1.json 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log" | tail -2
done
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): done"
