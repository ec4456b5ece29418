#!/usr/bin/env bash
# 1 GPU: where a tile's time goes (tools/wip/gemm-stamps.patch library), AG, RS and M=1024 shapes, cold and sustained.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python
export MK_LIBRARY=$PWD/.carry/lib_stamps/libmkernel.so
for shape in "4096 14336 8192" "4096 8192 14336" "1024 14336 8192" "4096 14336 1024"; do
 for s in 0 2; do timeout 40 python3 tools/wip/gemm_stamps.py $shape $s; done
done
