# call E3 (session 53): call E's side-by-side host cost again, six more runs alternated old/new (E's first "new" run
# was slow across every row: the process's first). Carries build/bin build/lib .carry/oldlib.
mkdir -p $OUT/e3; source tools/gpu_env.sh
for tag in old3 new3 old4 new4 old5 new5; do
  case $tag in new*) lib=$PWD/build/lib/libmkernel.so;; old*) lib=$PWD/.carry/oldlib/libmkernel.so;; esac
  mkdir -p $OUT/e3/$tag
  PYTHONPATH=$PWD/python MK_LIBRARY=$lib timeout 100 python3 bench/python_overhead.py --out $OUT/e3/$tag \
      > $OUT/e3/$tag.log 2>&1
  echo "$tag rc=$?"
  grep -h "mk_gemm_bf16  \|gemm_ptr\|mk_attention_fwd via\|mk_attention_fwd causal via the C ABI (claimed" \
      $OUT/e3/$tag.log | head -4
done
tar czf $OUT/e3-out.tgz -C $OUT e3; rm -rf $OUT/e3
