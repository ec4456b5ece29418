# call D (session 52): the whole dist tier but the ping-pong under memcheck and synccheck, 1x2 and 2x1 emu, and the
# attention engine under memcheck and synccheck. Every step bounded at 110 s. Carries build/bin build/lib.
mkdir -p $OUT/d; export SANITIZE_DIST_FILTER='*:-Dist.PingPong*'
for t in memcheck synccheck; do
  SANITIZE_STEP_S=110 timeout 280 tools/sanitize_gpu.sh $t $OUT/d/$t dist emu > $OUT/d/$t.log 2>&1
  echo "$t dist emu rc=$?"; cut -c1-200 $OUT/d/$t.log; grep -h "PASSED\|FAILED" $OUT/d/$t/*.log | sort | uniq -c
done
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
