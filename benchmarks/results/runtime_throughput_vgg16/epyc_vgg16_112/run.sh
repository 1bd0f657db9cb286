#!/usr/bin/env bash
cd /work/main
OUT=benchmarks/results/runtime_throughput_vgg16/epyc_vgg16_112
mkdir -p $OUT/profiles
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD): hgpart profile --model vgg16 --input 112 --batch-size 32 --cores 1 --max-rounds 8 --out $OUT/profiles/vgg16_112_b32_c1.json"
.venv/bin/hgpart profile --model vgg16 --input 112 --batch-size 32 --cores 1 --max-rounds 8 --out $OUT/profiles/vgg16_112_b32_c1.json 2>&1 | grep -v "^I0000\|^WARNING: All"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): runtime_throughput vgg16_112"
.venv/bin/python benchmarks/runtime_throughput.py --models vgg16_112 --placements coarse --steps 8 --repeats 1 --modes async,sync --sync-micro 4 --inflight 2 --rounds 3 --k1-client free --profiles $OUT/profiles --out $OUT 2>&1 | grep -v "^I0000\|^WARNING: All"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): done"
