#!/usr/bin/env bash
# simulator validation on this machine: calibrate, point the cluster at the profiles made before the runs, measure
cd /work/main
V=/work/scratch/val2
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) at $(git rev-parse --short HEAD): hgpart calibrate --out $V/cluster_this-machine.json"
.venv/bin/hgpart calibrate --out $V/cluster_this-machine.json 2>&1 | grep -v "^I0000\|^WARNING: All"
.venv/bin/python - <<'PY'
import json
p = "/work/scratch/val2/cluster_this-machine.json"
d = json.load(open(p))
d["device"]["profiles"] = "profiles"
d["device"]["sources"]["profiles"] = ("one-core profiles made at 15:26-15:30 UTC on this machine, before the "
    "measured runs, in this folder (profiles.txt: the commands)")
json.dump(d, open(p, "w"), indent=1)
PY
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): simulator_validation small models, 3 passes"
.venv/bin/python benchmarks/simulator_validation.py --models minivgg:32:30,minires:32:30 --repeats 0,1,2 --cluster $V/cluster_this-machine.json --out $V/run 2>&1 | grep -v "^I0000\|^WARNING: All"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): simulator_validation vgg16 64, 8/16/32, two passes"
.venv/bin/python benchmarks/simulator_validation.py --models vgg16:64:8 --batch-sizes 8,16,32 --repeats 0,1 --cluster $V/cluster_this-machine.json --out $V/run 2>&1 | grep -v "^I0000\|^WARNING: All"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): done"
.venv/bin/python benchmarks/simulator_validation.py --skip-measure --cluster $V/cluster_this-machine.json --out $V/run 2>&1 | grep -v "^I0000\|^WARNING: All"
