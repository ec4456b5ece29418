# call G (session 57): the launch-order and capture fixes on one GPU. (1) mk_gpu_tests whole: the new
# TpSingleRank.TwoCallsCapturedOnForkedStreamsAreOrderedInTheGraph (plain and fused) and
# Gemm.GroupedIsRefusedInsideACaptureLeavingTheCaptureValid; (2) the TP and ring dist tests as 1x2 sharing the GPU,
# with the new AgGemmTest.TwoPlansOfOneCommunicatorOnTwoStreamsRunInIssueOrder (the communicator's plans share one
# launch order); (3) the same as 2x1 emu (flush's progress bound on the emu network's quiet); (4) pytest
# tests/python/gpu (captures in torch.cuda.graph's global mode: the captured-call event is made in relaxed mode);
# (5) dist_tp_check at 2 ranks (its graph replays). Carries build/bin build/lib.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
e=(env PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so)
tr=(python3 -m torch.distributed.run --standalone)
f='AgGemm*:GemmRs*:GemmAr*:RingAttn*'
step_s=120 run build/bin/mk_gpu_tests
step_s=200 run tools/mkrun -n 2 --timeout 190 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
    --gtest_filter="$f"
step_s=200 run tools/mkrun -n 2 --timeout 190 env MK_RANKS_PER_NODE=1 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
    build/bin/mk_dist_tests --gtest_filter="$f:Net.*"
step_s=90 run "${e[@]}" python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu
step_s=80 run "${e[@]}" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 "${tr[@]}" --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
echo "fail=$fail"
exit $fail
