#!/usr/bin/env bash
# Builds a variant mkbench whose network benchmarks (bench/micro/net_bench.cu,
# where net_latency / net_bw and their delivery agent are compiled) take extra
# compiler flags, e.g. -DMK_AGENT_STATS (with tools/wip/agent-stats.patch
# applied: each agent prints its time per phase when it ends), from the
# current tree and build/: .carry/NAME/{bin/mkbench,lib/libmkernel.so}.
#   bash tools/wip/agent_variant.sh NAME [FLAGS...]
set -euo pipefail
cd "$(dirname "$0")/../.."
name=$1; shift
ninja -C build mkbench >/dev/null
obj=bench/CMakeFiles/mkbench.dir/micro/net_bench.cu.o
compile=$(ninja -C build -t commands bin/mkbench | grep -F -- "-o $obj" | tail -1)
link=$(ninja -C build -t commands bin/mkbench | tail -1)
tmp=$(mktemp -d)
(cd build && eval "${compile/ -o $obj/ $* -o $tmp/net_bench.o}")
mkdir -p .carry/$name/bin .carry/$name/lib
(cd build && eval "$(echo "${link/ $obj / $tmp/net_bench.o }" | sed "s# -o bin/mkbench # -o $PWD/../.carry/$name/bin/mkbench #")")
cp build/lib/libmkernel.so .carry/$name/lib/
rm -rf "$tmp"
ls -la .carry/$name/bin/mkbench
