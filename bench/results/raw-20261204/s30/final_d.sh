# call D (session 30): cba366b (the review's mends: plans across nodes keep their signal words, reuse knob, whole
# runs, sync + barrier): the one-GPU tier, the dist TP / ring / net tests on 1x2, 2x1 (emu: words kept), 2x2 and
# fabric 2x1, the Python checks (dist_tp_check's plan cache), and the negative control again (.carry/nozero:
# cba366b with release_signals not zeroing). Carries build/bin build/lib .carry/rdma .carry/nozero.
mkdir -p $OUT/d
source tools/gpu_env.sh; source tools/gpu_steps.sh
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
share="MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000"
step_s=120
run build/bin/mk_gpu_tests > $OUT/d/gpu.log 2>&1
run tools/mkrun -n 2 --timeout 110 env $share build/bin/mk_dist_tests --gtest_filter='AgGemm*:GemmRs*:GemmAr*:GemmPeer*:RingAttn*:Dist.Symmetric*' > $OUT/d/d1x2.log 2>&1
run tools/mkrun -n 2 --timeout 110 env $share MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests > $OUT/d/d2x1.log 2>&1
run tools/mkrun -n 4 --timeout 110 env $share MK_RANKS_PER_NODE=2 build/bin/mk_dist_tests --gtest_filter='AgGemm*:GemmRs*:GemmAr*' > $OUT/d/d2x2.log 2>&1
(export LD_LIBRARY_PATH="$PWD/.carry/rdma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
 run tools/mkrun -n 2 --timeout 110 env $share MK_RANKS_PER_NODE=1 MK_NET=fabric "MK_FI_PROVIDER=tcp;ofi_rxm" build/bin/mk_dist_tests --gtest_filter='Net*:AgGemm*:GemmRs*:GemmAr*' > $OUT/d/fab2x1.log 2>&1)
run env $share torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py > $OUT/d/py1x2.log 2>&1
run env $share MK_RANKS_PER_NODE=1 torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py > $OUT/d/py2x1.log 2>&1
run env $share torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_ring_attn_check.py > $OUT/d/pyring.log 2>&1
step_s=60
run timeout 55 python3 -m pytest -q -p no:cacheprovider tests/python/gpu > $OUT/d/pytest.log 2>&1
nz="LD_LIBRARY_PATH=$PWD/.carry/nozero"
run tools/mkrun -n 2 --timeout 50 env $share $nz build/bin/mk_dist_tests --gtest_filter='GemmRsTest.APlanOnAClosed*' > $OUT/d/nozero_1x2.log 2>&1
for x in $OUT/d/*.log; do echo "--- $x"; grep -E "FAILED \]|PASSED|plan cache|ops OK|passed|failed" $x | sed 's/(.*ms)//' | sort | uniq -c | head -8; done
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
