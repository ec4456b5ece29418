#!/usr/bin/env bash
# 2 GPUs of one node (~4 minutes): ring attention's kernel before 699fa21 (144-key blocks, the 96-thread push
# with 4 loads in flight, 64 KB pieces) against main (176-key blocks, one load in flight, 16 KB pieces) on 1x2
# and 2x1 emu, alternating twice, the mkernel variant of bench/torch_ring_attn_bench.py only (B = 1, 8 KV heads,
# S_local 2k / 8k / 32k, causal and not): what the push's form costs where it pushes (small S_local first).
# The baselines are in tools/issue_bench.sh ring1x2 / ring2x1.
# Build the old library: git worktree add /tmp/r144 1acf02c && (cd /tmp/r144 && tools/build.sh) &&
#   mkdir -p .carry/lib_ring144 && cp /tmp/r144/build/lib/libmkernel.so .carry/lib_ring144/
# Usage (device, nvidia-h200-x2): bash tools/wip/ab-ring-x2.sh .carry/lib_ring144   (results: $OUT/ab-ring.tgz)
[ $# -eq 1 ] && [ -f "$1/libmkernel.so" ] || { echo "usage: $0 LIB_DIR (holding the 1acf02c libmkernel.so)" >&2; exit 2; }
old=$(cd "$1" && pwd)
cd "$(dirname "$0")/../.." || exit 2
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python
[ "$(nvidia-smi -L | grep -c '^GPU')" -ge 2 ] || { echo "$0: needs 2 GPUs" >&2; exit 2; }
R=$OUT/ab-ring; mkdir -p "$R"
for r in 1 2; do
  for rpn in 2 1; do
    for l in "$old" "$PWD/build/lib"; do
      n=$([ "$l" = "$old" ] && echo ring144 || echo main); o=$R/$n-rpn$rpn-r$r; mkdir -p "$o"
      MK_RANKS_PER_NODE=$rpn MK_LIBRARY=$l/libmkernel.so timeout 150 torchrun --standalone --nproc_per_node=2 \
        bench/torch_ring_attn_bench.py --only mkernel --batches 1 --kv-heads 8 --seqs 2048,8192,32768 --rounds 10 \
        --out "$o" > "$o/log" 2>&1
      echo "ring $n ranks/node $rpn r$r rc=$?"; grep -E "^\| (1x2|2x1)" "$o/log" | cut -c1-160 | head -6
    done
  done
done
tar czf "$OUT/ab-ring.tgz" -C "$OUT" ab-ring && rm -rf "$R"
