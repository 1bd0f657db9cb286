#!/bin/bash
# The simulator on the runs one folder up, with the validation's calibration of 2026-11-27 15:34 UTC (not fitted
# to these runs) and its one-core profiles: hgpart simulate --pipeline compiled (64 steps per call, as they ran).
cd "$(dirname "$0")/../../../../.."
export COLUMNS=200
D=benchmarks/results/runtime_throughput_vgg16/epyc_minivgg_compiled_final
C=benchmarks/results/simulator_validation/2026-11-27-epyc/cluster_this-machine.json
for spec in "single_k1 async" "single_k1 sync" "layerwise_k2 async" "layerwise_k2 sync"; do
  set -- $spec
  extra=""; [ "$2" = sync ] && extra="--inflight 2"
  echo "\$ hgpart simulate -p $D/minivgg_$1.json -c $C --mode $2 $extra --pipeline compiled -b 32"
  hgpart simulate -p $D/minivgg_$1.json -c $C --mode $2 $extra --pipeline compiled -b 32 | grep -E "ms/step|compute:"
done
