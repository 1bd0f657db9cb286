#!/usr/bin/env bash
# one-core profiles of this machine for the simulator validation, made before the measured runs
cd /work/main
OUT=/work/scratch/val2/profiles
for spec in minivgg:32:8 minivgg:32:16 minivgg:32:32 minivgg:32:64 minires:32:8 minires:32:16 minires:32:32 minires:32:64 vgg16:64:4 vgg16:64:8 vgg16:64:16 vgg16:64:32; do
  IFS=: read m s b <<< "$spec"
  extra=""; [ "$m" = vgg16 ] && extra="--max-rounds 15"
  cmd="hgpart profile --model $m --input $s --batch-size $b --cores 1 $extra --out $OUT/${m}_${s}_b${b}_c1.json"
  echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): $cmd"
  .venv/bin/$cmd 2>&1 | grep -v "^I0000\|^WARNING: All"
done
