# Sourced by the scripts that run GPU code. Keeps NVLink multicast off
# (it can take a shared host's GPUs out of service) and finds the cuBLAS and
# NCCL libraries of a CUDA/PyTorch image when they are not on the loader path.
export NCCL_NVLS_ENABLE=0
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NVSHMEM_DISABLE_NVLS=1
# Lazy module loading can deadlock a kernel that waits on the proxy (see
# src/net/network.cpp); load eagerly unless the caller chose otherwise.
export CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING:-EAGER}
_mk_add_lib() { case ":${LD_LIBRARY_PATH:-}:" in *":$1:"*) ;; *) export LD_LIBRARY_PATH="$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}";; esac; }
for _lib in libnccl.so.2 libcublas.so.13; do
  # (not a pipe: grep -q's early exit fails it under pipefail; /sbin/ldconfig: a user's PATH may lack /sbin)
  if ! grep -q "$_lib" <({ ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null); then
    for _d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
              $(python3 -c 'import site,sys; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
      # (|| true: a missing folder is no hit, not an error that ends a caller under set -e -o pipefail)
      _hit=$(find "$_d" -maxdepth 4 -name "$_lib" 2>/dev/null | head -1 || true)
      if [ -n "$_hit" ]; then _mk_add_lib "$(dirname "$_hit")"; break; fi
    done
  fi
done
unset _lib _d _hit
