# NCCL for mkbench's baselines: MK_NCCL_LIB and MK_NCCL_INCLUDE. The CUDA toolkit's or the system's (libnccl-dev);
# else the nvidia-nccl wheel of the Python on PATH, which pip's torch brings (site-packages/nvidia/nccl/include and
# lib, with libnccl.so.2 alone): a GPU machine whose NCCL came with torch from PyPI. A library found by full path
# puts its folder in the build tree's RPATH, so mkbench finds the wheel's at run time. Included by
# bench/CMakeLists.txt (and by tools/check_find_nccl.sh's scratch project); the same order as tools/setup.sh's check.
# MK_NCCL_PYTHON: the Python whose wheel to take (default: python3 on PATH at each configure, not cached, so a venv
# put first on PATH after a failed configure is seen).
set(MK_NCCL_PYTHON "" CACHE FILEPATH "Python whose nvidia-nccl wheel mkbench may take (default: python3 on PATH)")
find_library(MK_NCCL_LIB NAMES nccl libnccl.so.2 HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
find_path(MK_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
if(NOT MK_NCCL_LIB OR NOT MK_NCCL_INCLUDE)
  set(_mk_nccl_python "${MK_NCCL_PYTHON}")
  if(NOT _mk_nccl_python)
    find_program(_mk_nccl_python python3 NO_CACHE)
  endif()
  set(_mk_nccl_wheel "")
  if(_mk_nccl_python)
    execute_process(COMMAND ${_mk_nccl_python} -c "import nvidia.nccl as m; print(list(m.__path__)[0])"
                    OUTPUT_VARIABLE _mk_nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET TIMEOUT 60)
  endif()
  if(_mk_nccl_wheel AND EXISTS "${_mk_nccl_wheel}/include/nccl.h")
    unset(MK_NCCL_LIB CACHE)
    unset(MK_NCCL_INCLUDE CACHE)
    find_library(MK_NCCL_LIB NAMES nccl libnccl.so.2 HINTS "${_mk_nccl_wheel}/lib" NO_DEFAULT_PATH)
    find_path(MK_NCCL_INCLUDE nccl.h HINTS "${_mk_nccl_wheel}/include" NO_DEFAULT_PATH)
    if(MK_NCCL_LIB AND MK_NCCL_INCLUDE)
      message(STATUS "mkbench: NCCL from the Python wheel at ${_mk_nccl_wheel} (${_mk_nccl_python})")
    endif()
  endif()
endif()
if(NOT MK_NCCL_LIB OR NOT MK_NCCL_INCLUDE)
  message(FATAL_ERROR "mkbench needs NCCL (nccl.h, libnccl.so): not in the CUDA toolkit "
                      "(${CUDAToolkit_INCLUDE_DIRS}), /usr/include, nor a Python wheel (python3 -c 'import "
                      "nvidia.nccl'); install NVIDIA's libnccl-dev or pip's nvidia-nccl-cu13, or set "
                      "-DMK_BUILD_BENCH=OFF to build without mkbench")
endif()
