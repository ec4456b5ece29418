# For the next session with device time (session 64 had none): the GPU tests written in sessions 63-64 and not run
# yet -- CApiGpu.AllgatherOnOneRankGivesItsOwnBytes and GraphUses.ACaptureThatCannotBeTiedHoldsThePlanForGood --
# then `tools/gpu_test.sh python`, whose dist_tp_check.py steps (1x2, 1x4, 2x1 emu; ranks sharing one GPU) hold the
# plan-cache bound's exchange. Carry `build/bin build/lib`. Bounded; ~5.5 min.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
step_s=120 run build/bin/mk_gpu_tests --gtest_filter='CApiGpu.*:GraphUses.*'
step_s=420 run tools/gpu_test.sh python
echo "fail=$fail"
