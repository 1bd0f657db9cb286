#!/usr/bin/env bash
# simulator validation against the runtime of 260caf2 (compare-run trains model parallelism with the compiled
# pipeline when auto picks it): one-core profiles (made with the profiler that no longer times the images'
# gradient), calibrate, measure, simulate
cd /work/main
V=/work/scratch/val3  # copied here afterwards: run/* into this folder, with profiles/ and the cluster file
mkdir -p $V/profiles
for spec in minivgg:32:8 minivgg:32:16 minivgg:32:32 minivgg:32:64 minires:32:8 minires:32:16 minires:32:32 minires:32:64 vgg16:64:4 vgg16:64:8 vgg16:64:16 vgg16:64:32; do
  IFS=: read m s b <<< "$spec"
  extra=""; [ "$m" = vgg16 ] && extra="--max-rounds 15"
  cmd="hgpart profile --model $m --input $s --batch-size $b --cores 1 $extra --out $V/profiles/${m}_${s}_b${b}_c1.json"
  echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): $cmd"
  .venv/bin/$cmd 2>&1 | grep -v "^[IWE]0000\|^WARNING: All" | tail -3
done
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD): hgpart calibrate --out $V/cluster_this-machine.json"
.venv/bin/hgpart calibrate --out $V/cluster_this-machine.json 2>&1 | grep -v "^[IWE]0000\|^WARNING: All"
.venv/bin/python - <<'PY'
import json
p = "/work/scratch/val3/cluster_this-machine.json"
d = json.load(open(p))
d["device"]["profiles"] = "profiles"
d["device"]["sources"]["profiles"] = ("one-core profiles made on this machine just before the measured runs, in "
    "this folder (output.txt: the commands)")
json.dump(d, open(p, "w"), indent=1)
PY
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): simulator_validation small models, 3 passes"
.venv/bin/python benchmarks/simulator_validation.py --models minivgg:32:30,minires:32:30 --repeats 0,1,2 --cluster $V/cluster_this-machine.json --out $V/run 2>&1 | grep -v "^[IWE]0000\|^WARNING: All"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): simulator_validation vgg16 64, 8/16/32, one pass"
.venv/bin/python benchmarks/simulator_validation.py --models vgg16:64:8 --batch-sizes 8,16,32 --repeats 0 --cluster $V/cluster_this-machine.json --out $V/run 2>&1 | grep -v "^[IWE]0000\|^WARNING: All"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): done"
.venv/bin/python benchmarks/simulator_validation.py --skip-measure --cluster $V/cluster_this-machine.json --out $V/run 2>&1 | grep -v "^[IWE]0000\|^WARNING: All"
