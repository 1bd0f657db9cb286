cd /work/main
echo "together start $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
python benchmarks/simulator_validation.py --child minires:32:64:30:0 --out /tmp/together 2>&1 | grep -v "^[IWE]0000\|^WARNING"
for m in single layerwise-async layerwise-sync coarse-async coarse-sync fine-async fine-sync sync-dp async-dp-1ps async-dp-dps; do
  echo "solo $m $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  mkdir -p /tmp/solo/$m
  python benchmarks/simulator_validation.py --child minires:32:64:30:0 --out /tmp/solo/$m --methods $m 2>&1 | grep -v "^[IWE]0000\|^WARNING"
done
echo "done $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
