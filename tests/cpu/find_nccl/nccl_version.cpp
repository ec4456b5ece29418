// Links the NCCL that cmake/find_nccl.cmake found and runs (no GPU needed): the build tree's RPATH finds it.
#include <nccl.h>

#include <cstdio>

int main() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return 1;
  std::printf("nccl_version: %d\n", v);
  return 0;
}
