// Runs without a GPU: what it calls fails (or answers) before any CUDA work.
#include <mkernel/gemm.hpp>
#include <mkernel/mkernel.h>
#include <mkernel/mkernel.hpp>
#include <mkernel/tp.hpp>

#include <cstdio>
#include <string>

void* consumer_kernel();

static int fail(const char* what) {
  std::fprintf(stderr, "consumer: %s\n", what);
  return 1;
}

int main() {
  if (mk_abi_version() != MK_ABI_VERSION) return fail("mk_abi_version differs from the header's MK_ABI_VERSION");
  if (mk_gpu_spin(-1, nullptr) == 0) return fail("mk_gpu_spin(-1) was not refused");
  if (std::string(mk_last_error()).find("mk_gpu_spin: cycles must be in") == std::string::npos)
    return fail("mk_gpu_spin's refusal does not say why");
  try {  // (a C++ symbol of the library, there whichever ops it was built with: MK_OPS)
    (void)mk::UniqueId::from_hex("not hex");
    return fail("UniqueId::from_hex took a bad id");
  } catch (const mk::Error& e) {
    std::printf("consumer: UniqueId::from_hex refused a bad id: %s\n", e.what());
  }
  if (!consumer_kernel()) return fail("no device kernel");
  std::printf("consumer: ok (mkernel %s)\n", mk_build_commit());
  return 0;
}
