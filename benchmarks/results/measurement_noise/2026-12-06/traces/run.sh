#!/usr/bin/env bash
# Issue 16: where minires's sync placements at B=16 spend a step, measured and simulated (2026-12-06 run's
# placements and calibration): the layer-wise one (predicted 32 % too slow) and the coarse one (fits today, and
# 17-23 % too fast once sync micro-batches are charged what the runtime measured them to cost). Each placement is
# trained on 2 pinned local workers with a device trace, as the validation runs it (sync, compiled, 64 steps per
# call), and simulated with a trace; benchmarks/idle_gaps.py compares how much of each neither device computes.
cd "$(dirname "$0")/../../../../.."
OUT=benchmarks/results/measurement_noise/2026-12-06/traces
V=benchmarks/results/simulator_validation/2026-12-06
for m in layerwise coarse; do
  P=$V/placements/minires_32/${m}-sync_bs16.json
  echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): $m"
  rm -rf /tmp/trace_$m /tmp/sim_$m
  hgpart train -p $P --devices local --mode sync --pipeline compiled --steps-per-call 64 -b 16 --steps 64 \
    --data digits --trace /tmp/trace_$m > /tmp/train_$m.log 2>&1
  grep -v "^[IWE]0000\|^WARNING: All log" /tmp/train_$m.log | grep -i "images/s\|pipeline\|busy" | cut -c1-200
  hgpart simulate -p $P -c $V/cluster_this-machine.json --mode sync --pipeline compiled --steps-per-call 64 -b 16 \
    --trace /tmp/sim_$m > /tmp/sim_$m.log 2>&1
  head -2 /tmp/sim_$m.log
  gzip -c /tmp/trace_$m/devices_trace.json > $OUT/minires_${m}-sync_bs16_devices_trace.json.gz
  gzip -c /tmp/sim_$m/devices_trace.simulated.json > $OUT/minires_${m}-sync_bs16_devices_trace.simulated.json.gz
  python benchmarks/idle_gaps.py $OUT/minires_${m}-sync_bs16_devices_trace.json.gz \
    $OUT/minires_${m}-sync_bs16_devices_trace.simulated.json.gz --gap-us 1000 --show 4
done
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): done"
