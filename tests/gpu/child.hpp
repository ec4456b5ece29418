// GPU tests that must watch a kernel trap run it in a child process (a
// trapped context cannot be reused): the test binary re-executes itself with
// MK_TEST_CHILD=<scenario> and a short MK_TIMEOUT_MS (see gpu_main.cpp).
#pragma once

#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <string>

#include <gtest/gtest.h>

#include "mkernel/communicator.hpp"

namespace mk::test {

// Body of a child scenario: `launch` starts the kernel that must fail, then
// the host waits for it. The expected outcome prints "CHILD ERROR: <the
// library's message>" and exits 3 (what the parent checks); a kernel that
// finishes returns 1.
template <typename F>
int expect_device_failure(const char* what, F&& launch) {
  try {
    Communicator& c = launch();
    c.check(static_cast<int>(cudaDeviceSynchronize()), what);
    std::printf("CHILD: kernel finished without error\n");
    return 1;
  } catch (const std::exception& e) {
    std::printf("CHILD ERROR: %s\n", e.what());
    std::fflush(stdout);
    std::_Exit(3);
  }
}

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

// Runs scenario in a child and checks that it ended as expect_device_failure
// reports a device error (exit 3) within `max_seconds` (not a hang) and that
// its output holds every needle.
inline void expect_child_failure(const char* scenario, std::initializer_list<const char*> needles,
                                 double max_seconds = 30.0) {
  int code = 0;
  double secs = 0;
  const std::string out = run_child(scenario, &code, &secs);
  EXPECT_EQ(code, 3) << out;
  EXPECT_LT(secs, max_seconds) << "scenario " << scenario << " must end with an error, not hang:\n" << out;
  for (const char* needle : needles)
    EXPECT_NE(out.find(needle), std::string::npos) << "missing '" << needle << "' in:\n" << out;
}

}  // namespace mk::test
