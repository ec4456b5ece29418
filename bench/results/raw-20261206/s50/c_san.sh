# call C (session 50): memcheck over the dist and emu parts (default lists; ranks sharing the one GPU), then
# synccheck over the dist part: not run since 2026-12-04, with sessions 45-49's host and plan changes in.
# Carries build/bin build/lib. Each step bounded by SANITIZE_STEP_S.
mkdir -p $OUT/c
SANITIZE_STEP_S=170 timeout 380 tools/sanitize_gpu.sh memcheck $OUT/c/memcheck dist emu; echo "memcheck rc=$?"
SANITIZE_STEP_S=120 timeout 140 tools/sanitize_gpu.sh synccheck $OUT/c/synccheck dist; echo "synccheck rc=$?"
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
