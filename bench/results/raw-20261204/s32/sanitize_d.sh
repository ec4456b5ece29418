# call D (session 32): initcheck over mk_gpu_tests with the tests' buffers zeroed (call C's 100 reports were
# all reads of cuBLAS's fp32 reference, which initcheck does not see written); racecheck over 4 small
# attention cases (call C's 16 did not finish in 170 s). Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/d
SANITIZE_STEP_S=330 tools/sanitize_gpu.sh initcheck $OUT/d gpu; echo "initcheck gpu rc=$?"
SANITIZE_STEP_S=200 SANITIZE_ATTN_K="matches_sdpa and (1-128-128-1-1-128 or 3-256-256-4-1-64)" \
  tools/sanitize_gpu.sh racecheck $OUT/d attn; echo "racecheck attn rc=$?"
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
