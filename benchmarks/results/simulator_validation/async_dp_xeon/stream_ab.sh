#!/bin/bash
# A/B: the client's eager requests to each worker over one stream (TF default) against unary RPCs
echo "== start $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
cd /work/main
for r in 0 1; do
for v in stream unary; do
 for m in minivgg minires; do
  if [ $v = stream ]; then unset TF_ENABLE_EAGER_CLIENT_STREAMING_ENQUEUE; else export TF_ENABLE_EAGER_CLIENT_STREAMING_ENQUEUE=false; fi
  /work/main/.venv/bin/hgpart compare-run --model $m --input 32 --devices local --k 2 --batch-sizes 32 --steps 120 \
    --methods async-dp-1ps,async-dp-dps,single --no-plots --out /work/scratch/fuse/${v}_${m}_r$r > /work/scratch/fuse/${v}_${m}_r$r.log 2>&1
  python3 -c "
import json
d=json.load(open('/work/scratch/fuse/${v}_${m}_r$r/measured.json'))
for x in d['runs']: print('r$r $v $m', x.get('method'), round(x.get('images_per_s',0),1), round(x.get('cpu_cores',0),2))
" 2>&1 | head -4
 done
done
done
echo "== end $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
