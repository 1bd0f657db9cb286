#!/usr/bin/env bash
cd /work/main
OUT=benchmarks/results/runtime_throughput_vgg16/epyc_vgg16_112_inflight3
mkdir -p $OUT
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD): runtime_throughput vgg16_112 async, 3 in flight (the coarse placement has 3 stages)"
.venv/bin/python benchmarks/runtime_throughput.py --models vgg16_112 --placements coarse --steps 8 --repeats 1 --modes async --inflight 3 --rounds 3 --k1-client free --profiles benchmarks/results/runtime_throughput_vgg16/epyc_vgg16_112/profiles --out $OUT 2>&1 | grep -v "^I0000\|^WARNING: All"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): done"
