#!/usr/bin/env bash
# The negative check of the delivery agent's chunk ordering: builds
# .carry/noorder/{bin,lib} with mk_gpu_tests and mk_dist_tests whose agent
# tests (tests/gpu/test_delivery_agent.cu, tests/dist/test_net.cu) are
# compiled with agent_await_chunks's call removed (device/net/agent.cuh), so
# that a chunked write's last chunk may be signalled before another agent has
# copied its earlier chunks. DeliveryAgent.LastChunkSignalsOnlyAfterAnother-
# AgentsEarlierChunk must fail with it; main's passes. agent.cuh is restored
# with its timestamp, so build/ is not invalidated. Carry .carry/noorder.
#   bash tools/wip/no_chunk_order.sh
#   on the device: .carry/noorder/bin/mk_gpu_tests --gtest_filter='DeliveryAgent.*'
set -euo pipefail
cd "$(dirname "$0")/../.."
ninja -C build mk_dist_tests mk_gpu_tests >/dev/null
tmp=$(mktemp -d)
cp -p device/net/agent.cuh "$tmp/agent.cuh"
trap 'cp -p "$tmp/agent.cuh" device/net/agent.cuh; rm -rf "$tmp"' EXIT
grep -q 'detail::agent_await_chunks<R>(nc, ctx, sh, n);' device/net/agent.cuh
sed -i 's|if (threadIdx.x < 32) detail::agent_await_chunks<R>(nc, ctx, sh, n);|/* no_chunk_order.sh: removed */|' \
  device/net/agent.cuh
mkdir -p .carry/noorder/bin .carry/noorder/lib
cp build/lib/libmkernel.so .carry/noorder/lib/  # the binaries' rpath: ../lib
for pair in mk_dist_tests:dist/test_net.cu mk_gpu_tests:gpu/test_delivery_agent.cu; do
  target=${pair%%:*} src=${pair#*:}
  obj=tests/CMakeFiles/$target.dir/$src.o
  compile=$(ninja -C build -t commands bin/$target | grep -F -- "-o $obj" | tail -1)
  link=$(ninja -C build -t commands bin/$target | tail -1)
  (cd build && eval "${compile/ -o $obj/ -o $tmp/variant.o}")
  (cd build && eval "$(echo "${link/ $obj / $tmp/variant.o }" | sed "s# -o bin/$target # -o $PWD/../.carry/noorder/bin/$target #")")
done
ls -la .carry/noorder/bin
