# call C (session 32): compute-sanitizer parts session 31 did not run: racecheck and synccheck over the
# attention engine, initcheck over mk_gpu_tests. Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/c
SANITIZE_STEP_S=170 tools/sanitize_gpu.sh racecheck $OUT/c attn; echo "racecheck attn rc=$?"
SANITIZE_STEP_S=120 tools/sanitize_gpu.sh synccheck $OUT/c attn; echo "synccheck attn rc=$?"
SANITIZE_STEP_S=200 tools/sanitize_gpu.sh initcheck $OUT/c gpu; echo "initcheck gpu rc=$?"
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
