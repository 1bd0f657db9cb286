cd /work/main
for r in 1 2 3; do for s in 30 120; do
  echo "round $r steps $s $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  python benchmarks/simulator_validation.py --child minires:32:64:$s:$r --out /tmp/steps/s$s --methods single,coarse-sync,fine-sync,sync-dp 2>&1 | grep -v "^[IWE]0000\|^WARNING"
done; done
echo "done $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
