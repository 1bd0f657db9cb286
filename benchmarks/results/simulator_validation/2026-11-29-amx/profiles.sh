#!/usr/bin/env bash
# One-core profiles of this machine at the batch sizes the runs used (the validation's step 1, skipped by run.sh)
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/simulator_validation/2026-11-29-amx/profiles
mkdir -p $OUT
for m in minivgg minires; do for b in 16 32 64; do
  echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): $m b$b"
  hgpart profile --model $m --input 32 --batch-size $b --cores 1 --out $OUT/${m}_32_b${b}_c1.json 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log" | tail -2
done; done
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): done"
