# call D (session 31): compute-sanitizer memcheck: mk_gpu_tests without the fabric-staging agent test (hung under
# the tool in call C: its kernel waits for a host thread's CUDA copies), then the fused TP ops on 2 ranks sharing
# the GPU (1x2). Carries build/bin build/lib.
mkdir -p $OUT/d
tools/sanitize_gpu.sh memcheck $OUT/d gpu dist; echo "sanitize rc=$?"
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
