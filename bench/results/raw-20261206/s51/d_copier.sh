# call D (session 51): the bulk copier with barriers kept across copies (dev::BulkCopier): the GPU tests, the TP
# ops' dist tests as 1x2 and 2x1 emu (ranks sharing the GPU), then racecheck over the copier's test and the three
# standalone collectives (1x2). Carries build/bin build/lib.
mkdir -p $OUT/d; source tools/gpu_env.sh
export MK_TIMEOUT_MS=60000
f='AgGemm*:GemmRs*:GemmAr*:GemmPeer*'
timeout 60 build/bin/mk_gpu_tests > $OUT/d/gpu.log 2>&1; echo "mk_gpu_tests rc=$?"; tail -3 $OUT/d/gpu.log
timeout 60 tools/mkrun -n 2 --timeout 55 env MK_SHARE_GPUS=1 build/bin/mk_dist_tests --gtest_filter=$f \
  > $OUT/d/d1x2.log 2>&1; echo "1x2 rc=$?"; grep -h "PASSED\|FAILED" $OUT/d/d1x2.log | sort | uniq -c
timeout 90 tools/mkrun -n 2 --timeout 85 env MK_SHARE_GPUS=1 MK_RANKS_PER_NODE=1 MK_EMU_AGENTS=3 \
  build/bin/mk_dist_tests --gtest_filter=$f > $OUT/d/d2x1.log 2>&1; echo "2x1 rc=$?"
grep -h "PASSED\|FAILED" $OUT/d/d2x1.log | sort | uniq -c
export MK_TIMEOUT_MS=600000
timeout 40 compute-sanitizer --tool racecheck --print-limit 100 build/bin/mk_gpu_tests --gtest_filter=PeerCopy.* \
  > $OUT/d/rc-gpu.log 2>&1; echo "racecheck PeerCopy rc=$?"; grep -h "SUMMARY\|PASSED\|Race reported" $OUT/d/rc-gpu.log | head
timeout 80 tools/mkrun -n 2 --timeout 75 env MK_SHARE_GPUS=1 compute-sanitizer --tool racecheck --print-limit 100 \
  build/bin/mk_dist_tests \
  --gtest_filter=GemmArTest.StandaloneAllReduce:AgGemmTest.StandaloneAllGather:GemmRsTest.StandaloneReduceScatter \
  > $OUT/d/rc-dist.log 2>&1; echo "racecheck standalone 1x2 rc=$?"
grep -h "SUMMARY\|PASSED\|FAILED" $OUT/d/rc-dist.log | sort | uniq -c
grep -h "Race reported" $OUT/d/rc-dist.log | sed 's/(mk::[^)]*)//' | sort | uniq -c | head
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
