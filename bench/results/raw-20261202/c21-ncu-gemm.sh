#!/usr/bin/env bash
# ncu PC sampling of the standalone GEMM (mkernel.gemm, TMA-store epilogue with stmatrix) at K = 1024 and 8192,
# boost clocks; SASS source pages as CSV. cuBLAS's kernel's summary at the same shapes beside.
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python
for K in 1024 8192; do
  t0=$(date +%s)
  timeout 150 ncu --clock-control none -k regex:'gemm_kernel' --launch-skip 4 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight --section LaunchStats -o $OUT/mk$K \
    python3 tools/gemm_profile.py 4096 14336 $K mk > $OUT/ncu_mk$K.log 2>&1
  echo "ncu mk K=$K rc=$? in $(( $(date +%s) - t0 )) s"
  ncu -i $OUT/mk$K.ncu-rep --page source --csv --print-source sass > $OUT/sass_mk$K.csv 2> $OUT/sass.err; echo "export rc=$?"
  ncu -i $OUT/mk$K.ncu-rep --page details > $OUT/details_mk$K.txt 2>&1
  grep -E "Duration|SM Frequency|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc" $OUT/details_mk$K.txt | head -8
  gzip -f $OUT/sass_mk$K.csv
  timeout 100 ncu --clock-control none -k regex:'nvjet|sm90|gemm|cutlass' --launch-skip 4 --launch-count 1 \
    --section WarpStateStats --section SpeedOfLight --section LaunchStats python3 tools/gemm_profile.py 4096 14336 $K cublas \
    > $OUT/ncu_cublas$K.log 2>&1; echo "ncu cublas K=$K rc=$?"
  grep -E "^  [a-zA-Z_].*\(|Duration|SM Frequency|Warp Cycles Per Issued|Issue Slots Busy|Registers Per|Shared Memory Config|Block Size|Grid Size" $OUT/ncu_cublas$K.log | cut -c1-160 | head -12
done
rm -f $OUT/*.ncu-rep
