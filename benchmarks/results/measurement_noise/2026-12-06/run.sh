#!/usr/bin/env bash
# Issue 16: the 2026-12-06 judged run's worst rows measured again in 8 rounds each, against that run's calibration
# (../../simulator_validation/2026-12-06/cluster_this-machine.json), on the same kind of host (AMD EPYC, AVX-512),
# to tell the simulator's miss from the measurement's: minires layer-wise sync at B=16 (-30.2 %, the one row beyond
# 30 %) beside the single device, and minires sync data parallelism at B=64 (+28.1 %, passes 1,438-2,060) beside it.
# Steps as the judged run ran them (64 at B=16, 112 at B=64).
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/measurement_noise/2026-12-06
CL=benchmarks/results/simulator_validation/2026-12-06/cluster_this-machine.json
python benchmarks/measurement_noise.py --model minires:32:64 --batch-size 16 --rounds 8 \
  --methods layerwise-sync,single --cluster $CL 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log" > $OUT/minires_b16.txt
python benchmarks/measurement_noise.py --model minires:32:112 --batch-size 64 --rounds 8 \
  --methods sync-dp,single --cluster $CL 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log" > $OUT/minires_b64.txt
