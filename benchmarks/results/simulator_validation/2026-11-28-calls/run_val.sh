#!/usr/bin/env bash
# simulator validation at f9d282b, in a worktree (the code the measured runs import does not change while they
# run): one-core profiles, `hgpart calibrate` (the only other input of the simulator), then every compare-run
# strategy measured on 2 local workers and simulated from the calibration and the profiles.
export PYTHONPATH=<a worktree of the checkout at f9d282b>
cd <a worktree of the checkout at f9d282b>
V=benchmarks/results/simulator_validation/2026-11-28-calls
PY=/work/main/.venv/bin/python
HG=/work/main/.venv/bin/hgpart
mkdir -p $V/run/profiles
for spec in minivgg:32:8 minivgg:32:16 minivgg:32:32 minivgg:32:64 minires:32:8 minires:32:16 minires:32:32 minires:32:64 vgg16:64:4 vgg16:64:8 vgg16:64:16 vgg16:64:32; do
  IFS=: read m s b <<< "$spec"
  extra=""; [ "$m" = vgg16 ] && extra="--max-rounds 15"
  cmd="profile --model $m --input $s --batch-size $b --cores 1 $extra --out $V/run/profiles/${m}_${s}_b${b}_c1.json"
  echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): hgpart $cmd"
  $HG $cmd 2>&1 | grep -v "^[IWE]0000\|^WARNING: All" | tail -3
done
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): hgpart calibrate"
$HG calibrate --out $V/run/cluster_this-machine.json 2>&1 | grep -v "^[IWE]0000\|^WARNING: All" | tail -3
# the simulator reads this validation's profiles (beside the cluster file), not the checkout's
$PY - <<'PYEOF'
import json
p = "benchmarks/results/simulator_validation/2026-11-28-calls/run/cluster_this-machine.json"
d = json.load(open(p))
d["device"]["profiles"] = "profiles"
d["device"]["sources"]["profiles"] = ("the one-core profiles made for this validation (`hgpart profile --cores 1`, "
                                      "folder beside this file), made before the measured runs")
json.dump(d, open(p, "w"), indent=2)
PYEOF
C=$V/run/cluster_this-machine.json
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): simulator_validation small models, 3 passes"
$PY benchmarks/simulator_validation.py --models minivgg:32:30,minires:32:30 --repeats 0,1,2 --cluster $C --out $V/run 2>&1 | grep -v "^[IWE]0000\|^WARNING: All" | grep -v "^|"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): simulator_validation vgg16 64, 8/16/32, one pass"
$PY benchmarks/simulator_validation.py --models vgg16:64:8 --batch-sizes 8,16,32 --repeats 0 --cluster $C --out $V/run 2>&1 | grep -v "^[IWE]0000\|^WARNING: All" | grep -v "^|"
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): all measured; simulate every row"
$PY benchmarks/simulator_validation.py --skip-measure --cluster $C --out $V/run 2>&1 | grep -v "^[IWE]0000\|^WARNING: All"
$PY benchmarks/simulator_ablation.py $V/run 2>&1 | grep -v "^[IWE]0000\|^WARNING: All" > $V/run/ablation.txt
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): done"
