# NCCL for mkbench's baselines: MK_NCCL_LIB and MK_NCCL_INCLUDE. The CUDA toolkit's or the system's (libnccl-dev);
# else the nvidia-nccl wheel of the Python on PATH, which pip's torch brings (site-packages/nvidia/nccl/include and
# lib, with libnccl.so.2 alone): a GPU machine whose NCCL came with torch from PyPI. A library found by full path
# puts its folder in the build tree's RPATH, so mkbench finds the wheel's at run time. Included by
# bench/CMakeLists.txt (and by tools/check_find_nccl.sh's scratch project); the same order as tools/setup.sh's check.
find_library(MK_NCCL_LIB nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
find_path(MK_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
if(NOT MK_NCCL_LIB OR NOT MK_NCCL_INCLUDE)
  find_program(MK_NCCL_PYTHON python3)
  set(_mk_nccl_wheel "")
  if(MK_NCCL_PYTHON)
    execute_process(COMMAND ${MK_NCCL_PYTHON} -c "import nvidia.nccl as m; print(list(m.__path__)[0])"
                    OUTPUT_VARIABLE _mk_nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET TIMEOUT 60)
  endif()
  if(_mk_nccl_wheel AND EXISTS "${_mk_nccl_wheel}/include/nccl.h")
    unset(MK_NCCL_LIB CACHE)
    unset(MK_NCCL_INCLUDE CACHE)
    find_library(MK_NCCL_LIB NAMES nccl libnccl.so.2 HINTS "${_mk_nccl_wheel}/lib" NO_DEFAULT_PATH)
    find_path(MK_NCCL_INCLUDE nccl.h HINTS "${_mk_nccl_wheel}/include" NO_DEFAULT_PATH)
    if(MK_NCCL_LIB AND MK_NCCL_INCLUDE)
      message(STATUS "mkbench: NCCL from the Python wheel at ${_mk_nccl_wheel} (${MK_NCCL_PYTHON})")
    endif()
  endif()
endif()
if(NOT MK_NCCL_LIB OR NOT MK_NCCL_INCLUDE)
  message(FATAL_ERROR "mkbench needs NCCL (nccl.h, libnccl.so): not in the CUDA toolkit "
                      "(${CUDAToolkit_INCLUDE_DIRS}), /usr/include, nor a Python wheel (python3 -c 'import "
                      "nvidia.nccl'); install NVIDIA's libnccl-dev or pip's nvidia-nccl-cu13, or set "
                      "-DMK_BUILD_BENCH=OFF to build without mkbench")
endif()
