# Session 60: the owed call cut to what a short device budget allows (~2 min), most important first: the GPU tests
# sessions 58-59 changed and never ran (mk_gpu_tests' TpPlanSignals / TpPlanLifetime / RingPlanLifetime /
# AttentionWorkspace / RawPointers), the reworked Python current-stream tests, the one-GPU IPC step
# (ranks sharing the GPU), then the rest of mk_gpu_tests. Carries build/bin build/lib.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
e=(env PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so)
changed='TpPlanSignals*:TpPlanLifetime*:RingPlanLifetime*:AttentionWorkspace*:RawPointers*'
step_s=60 run build/bin/mk_gpu_tests --gtest_filter="$changed"
step_s=60 run "${e[@]}" python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu \
    -k 'current_stream or two_streams_at_once'
step_s=90 run tools/mkrun -n 2 --timeout 85 env MK_SYMM_MODE=ipc MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
    build/bin/mk_dist_tests --gtest_filter='Dist.Symmetric*:Dist.Mismatched*:AgGemm*:GemmRs*'
step_s=120 run build/bin/mk_gpu_tests --gtest_filter="-$changed"
echo "fail=$fail"
exit $fail
