#!/usr/bin/env bash
# 1 GPU: ring kernel at one rank, three libraries alternating: main (144), it176 (176 + block iterator), min176
# (176 + block iterator + a minimal push copy loop: wrong for own chunks, never run at one rank): whether the
# consumers' uniform datapath (lost with the full push loop at 176) is the rest of 176's loss.
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python
R=$OUT/c3; mkdir -p $R
for L in main it176 min176 main it176 min176; do
  echo "=== lib_$L"
  MK_LIBRARY=$PWD/.carry/lib_$L/libmkernel.so timeout 100 python3 bench/ring_engine_1gpu.py --quick --rounds 8 \
    --out $R/lib_$L 2>&1 | grep -E "^B=|wrote"
done
tar czf $OUT/c3.tgz -C $OUT c3 && rm -rf $R
