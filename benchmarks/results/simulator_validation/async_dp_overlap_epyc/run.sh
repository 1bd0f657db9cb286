#!/usr/bin/env bash
# Issue 16: how far the runtime's async data-parallel workers' calls overlap, by batch size, on an AMD EPYC (2 cores),
# 2026-11-29 evening: the command of ../async_dp_overlap/ at batch 16, 32 and 64.
cd "$(dirname "$0")/../../../.."
for B in 16 32 64; do
  python benchmarks/async_dp_overlap.py --batch-size $B --rounds 2 2>&1 | grep -v "^[IWE]0000\|^WARNING: All log"
done
