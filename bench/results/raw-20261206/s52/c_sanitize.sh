# call C (session 52): memcheck and synccheck after dev::BulkCopier (cd8d9f7; neither tool had run since sessions
# 34-35): memcheck over the gpu, dist (1x2) and emu (2x1) parts, synccheck over gpu and dist. Every step bounded
# at 105 s. Carries build/bin build/lib.
mkdir -p $OUT/c
SANITIZE_STEP_S=105 timeout 340 tools/sanitize_gpu.sh memcheck $OUT/c/mc gpu dist emu > $OUT/c/memcheck.log 2>&1
echo "memcheck rc=$?"; cat $OUT/c/memcheck.log | cut -c1-220
SANITIZE_STEP_S=105 timeout 225 tools/sanitize_gpu.sh synccheck $OUT/c/sc gpu dist > $OUT/c/synccheck.log 2>&1
echo "synccheck rc=$?"; cat $OUT/c/synccheck.log | cut -c1-220
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
