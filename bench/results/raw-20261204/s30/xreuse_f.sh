# call F (session 30): tools/wip/cross-node-reuse.patch (the standalone reduce-scatter announces to rail peers
# only across nodes; plans across nodes give their signal words back too), built aside into .carry/xreuse
# (mk_dist_tests + libmkernel.so, RUNPATH $ORIGIN/../lib). Ranks share the GPU. Carries .carry/xreuse .carry/rdma
# build/bin (for tools/mkrun's neighbours).
mkdir -p $OUT/f
source tools/gpu_env.sh; source tools/gpu_steps.sh
share="MK_SHARE_GPUS=1 MK_TIMEOUT_MS=30000"
B=.carry/xreuse/bin/mk_dist_tests
step_s=45
run tools/mkrun -n 4 --timeout 40 env $share MK_RANKS_PER_NODE=2 $B --gtest_filter='GemmRs*:GemmAr*' > $OUT/f/x2x2.log 2>&1
run tools/mkrun -n 2 --timeout 40 env $share MK_RANKS_PER_NODE=1 $B --gtest_filter='GemmRs*:GemmAr*:AgGemm*:RingAttn*' > $OUT/f/x2x1.log 2>&1
(export LD_LIBRARY_PATH="$PWD/.carry/rdma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
 run tools/mkrun -n 2 --timeout 40 env $share MK_RANKS_PER_NODE=1 MK_NET=fabric "MK_FI_PROVIDER=tcp;ofi_rxm" $B --gtest_filter='GemmRs*:GemmAr*' > $OUT/f/xfab.log 2>&1)
for x in $OUT/f/*.log; do echo "--- $x"; grep -E "FAILED \]|PASSED \]|APlanOnAClosed" $x | sed 's/(.*ms)//' | sort | uniq -c | head -6; done
tar czf $OUT/f-out.tgz -C $OUT f; rm -rf $OUT/f
