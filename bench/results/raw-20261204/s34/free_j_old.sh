# call J (session 34): the new test on the old library (87461ac's libmkernel.so in .carry/lib_x, whose free threw before
# its barrier on the rank whose sync failed): it must fail. Carries build/bin build/lib .carry/rdma .carry/lib_x.
# Output (the call's tail): rank 0 "the free passed on rank 0 although rank 1's sync failed"; rank 1 "e failed:
# cudaErrorStreamCaptureUnsupported ... (symmetric_heap.cpp:311)", then "bootstrap collective #11: rank 0 closed its
# bootstrap while others wait for it": the ranks out of step. FAILED on both ranks.
source tools/gpu_env.sh; timeout 60 tools/mkrun -n 2 --timeout 50 env LD_LIBRARY_PATH=$PWD/.carry/lib_x MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 MK_BOOTSTRAP_TIMEOUT_MS=20000 build/bin/mk_dist_tests --gtest_filter='Dist.SymmetricFree*' 2>&1 | grep -v "^\[New" | tail -25; echo rc=$?
