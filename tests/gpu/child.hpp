// GPU tests that must watch a kernel trap run it in a child process (a
// trapped context cannot be reused): the test binary re-executes itself with
// MK_TEST_CHILD=<scenario> and a short MK_TIMEOUT_MS (see gpu_main.cpp).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace mk::test {

// Runs scenario in a child; returns its output, exit code and wall time.
inline std::string run_child(const char* scenario, int* code, double* seconds) {
  std::string cmd = std::string("MK_TEST_CHILD=") + scenario + " MK_TIMEOUT_MS=300 /proc/" +
                    std::to_string(getpid()) + "/exe 2>&1";
  auto t0 = std::chrono::steady_clock::now();
  FILE* f = popen(cmd.c_str(), "r");
  std::string out;
  char buf[512];
  while (f && fgets(buf, sizeof(buf), f)) out += buf;
  int st = f ? pclose(f) : -1;
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

}  // namespace mk::test
