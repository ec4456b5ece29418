#!/usr/bin/env bash
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
git log --oneline -1 2>/dev/null
bash tools/wip/epilogue-validate.sh 2>&1 | tee $OUT/validate.log
