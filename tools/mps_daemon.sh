# Sourced: a private MPS daemon for two ranks on one GPU (pipe and log
# directories under a fresh /tmp directory, so only the caller's processes
# connect to it; no GPU setting changes). mps_start starts it (non-zero if it
# did not start; the directories are removed then); mps_stop quits it and
# removes the directories, or keeps them when the quit failed (copy
# $CUDA_MPS_LOG_DIRECTORY first to keep its log);
# processes started after it run without MPS.
mps_start() {
  _mk_mps_dir=$(mktemp -d /tmp/mk_mps.XXXXXX)
  export CUDA_MPS_PIPE_DIRECTORY=$_mk_mps_dir/pipe CUDA_MPS_LOG_DIRECTORY=$_mk_mps_dir/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d && return 0
  rm -rf "$_mk_mps_dir"
  _mk_mps_dir=
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  return 1
}
mps_stop() {
  [ -n "${_mk_mps_dir:-}" ] || return 0
  if echo quit | timeout 10 nvidia-cuda-mps-control >/dev/null 2>&1; then
    sleep 1
    rm -rf "$_mk_mps_dir"
  else  # the daemon (or a server still holding the GPU) stays reachable through its pipe directory: kept
    echo "=== mps_stop: quit failed; the daemon's directory $_mk_mps_dir is kept (CUDA_MPS_PIPE_DIRECTORY=" \
         "$CUDA_MPS_PIPE_DIRECTORY nvidia-cuda-mps-control reaches it; its log is under $CUDA_MPS_LOG_DIRECTORY)"
  fi
  _mk_mps_dir=
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY  # later processes run without MPS
}
