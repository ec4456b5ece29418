# call E (session 53): the host cost of the raw-pointer checks, side by side: bench/python_overhead.py with the
# library of HEAD (checks in the GEMMs, attention, ring attention and the TP plans) and of e85cc2a (the TP plans'
# checks only), alternated new/old/new/old in one process tree on one GPU. Carries build/bin build/lib
# .carry/oldlib (e85cc2a's libmkernel.so, built with the same options).
mkdir -p $OUT/e; source tools/gpu_env.sh
for tag in new1 old1 new2 old2; do
  case $tag in new*) lib=$PWD/build/lib/libmkernel.so;; old*) lib=$PWD/.carry/oldlib/libmkernel.so;; esac
  mkdir -p $OUT/e/$tag
  PYTHONPATH=$PWD/python MK_LIBRARY=$lib timeout 120 python3 bench/python_overhead.py --out $OUT/e/$tag \
      > $OUT/e/$tag.log 2>&1
  echo "$tag rc=$?"
  grep -h "mk_gemm_bf16\|gemm_ptr\|mk_attention_fwd\|mkernel.gemm \|mkernel.attention" $OUT/e/$tag.log | head -8
done
tar czf $OUT/e-out.tgz -C $OUT e; rm -rf $OUT/e
# and the symmetric heap after its device switch moved inside the allocation's try (two ranks sharing the GPU,
# VMM and IPC modes), then the GPU tier once more on the new library
mkdir -p $OUT/e2; source tools/gpu_steps.sh
{
  step_s=150 run tools/mkrun -n 2 --timeout 140 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
      --gtest_filter='Dist.Symmetric*:Dist.Mismatch*:AgGemm*:Ring*'
  step_s=150 run tools/mkrun -n 2 --timeout 140 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_SYMM_MODE=ipc \
      build/bin/mk_dist_tests --gtest_filter='Dist.Symmetric*:Dist.Mismatch*'
  step_s=90 run build/bin/mk_gpu_tests
} > $OUT/e2/e2.log 2>&1
grep -h '^=== [PFS]' $OUT/e2/e2.log | cut -c1-200
tar czf $OUT/e2-out.tgz -C $OUT e2; rm -rf $OUT/e2
