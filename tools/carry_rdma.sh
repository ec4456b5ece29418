#!/usr/bin/env bash
# Copies libfabric.so.1 and the libraries ldd lists for it (not the C library
# and loader, which every machine has) into .carry/rdma/, for a GPU machine
# without libfabric: tools/gpu_test.sh puts .carry/rdma on the loader path
# and runs the network tests over libfabric (tcp;ofi_rxm) there. Needs
# libfabric installed here (tools/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
lib=$(ldconfig -p | awk '/libfabric\.so\.1 /{print $NF; exit}')
[ -n "$lib" ] || { echo "carry_rdma: no libfabric.so.1 on this machine (tools/setup.sh installs it)" >&2; exit 1; }
mkdir -p .carry/rdma
cp -L "$lib" .carry/rdma/libfabric.so.1
ldd "$lib" | awk '/=> \//{print $1, $3}' | while read -r name path; do
  case "$name" in libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) continue ;; esac
  cp -L "$path" ".carry/rdma/$name"
done
ls .carry/rdma
du -sh .carry/rdma
