// FdExchange (src/runtime/fd_exchange.cpp), the symmetric heap's passing of
// CUDA VMM handles between the processes of one host, with memfds standing
// in for the handles and threads for the ranks: every rank of a host at once,
// more of them than one datagram queue holds; a missing rank is named within
// the bound and leaves no received fd open; one that fails its part is named at once.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mkernel/error.hpp"
#include "src/runtime/fd_exchange.hpp"

using mk::FdExchange;

namespace {

int open_fds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

int memfd_holding(int value) {
  int fd = memfd_create("fdx", MFD_CLOEXEC);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(pwrite(fd, &value, sizeof(value), 0), static_cast<ssize_t>(sizeof(value)));
  return fd;
}

uint64_t fresh_job() { return std::random_device{}() * 0x100000001ull + static_cast<uint64_t>(getpid()); }

}  // namespace

// 16 ranks of one host (MK_SHARE_GPUS, emulated nodes), each sending before it has received: more senders than
// a receiver's queue holds (net.unix.max_dgram_qlen, 10 by default). Each receiver must drain its queue while
// it waits to send, or every rank waits on another until the bound.
TEST(FdExchange, SixteenRanksOfOneHostExchangeAtOnce) {
  const int W = 16;
  const uint64_t job = fresh_job();
  std::vector<std::unique_ptr<FdExchange>> ex;
  for (int r = 0; r < W; ++r) ex.push_back(std::make_unique<FdExchange>(job, r, 5000));
  std::vector<int> peers(W);
  for (int r = 0; r < W; ++r) peers[r] = r;
  std::vector<std::string> errors(W);
  std::vector<std::thread> threads;
  for (int r = 0; r < W; ++r)
    threads.emplace_back([&, r] {
      const int mine = memfd_holding(1000 + r);
      try {
        for (uint64_t tag = 1; tag <= 3; ++tag) {  // three allocations in a row
          std::vector<int> got = ex[r]->exchange(mine, peers, tag);
          for (int p = 0; p < W; ++p) {
            if (p == r) {
              if (got[p] != -1) errors[r] += "own slot not -1; ";
              continue;
            }
            int v = -1;
            if (got[p] < 0 || pread(got[p], &v, sizeof(v), 0) != static_cast<ssize_t>(sizeof(v)) || v != 1000 + p)
              errors[r] += "tag " + std::to_string(tag) + ": rank " + std::to_string(p) + "'s handle wrong; ";
            if (got[p] >= 0) close(got[p]);
          }
        }
      } catch (const mk::Error& e) {
        errors[r] = e.what();
      }
      close(mine);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < W; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A rank that never takes part: the others name it within the bound, and no handle they received stays open
// (an exported VMM handle left open keeps its peer's GPU memory allocated after cuMemRelease).
TEST(FdExchange, AMissingRankIsNamedAndNoReceivedHandleStaysOpen) {
  const uint64_t job = fresh_job();
  const int before = open_fds();
  {
    auto e0 = std::make_unique<FdExchange>(job, 0, 300);
    auto e1 = std::make_unique<FdExchange>(job, 1, 300);
    FdExchange e2(job, 2, 300);  // bound, never exchanges
    std::vector<std::string> errors(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        const int mine = memfd_holding(r);
        try {
          (r == 0 ? e0 : e1)->exchange(mine, {0, 1, 2}, 7);
        } catch (const mk::Error& e) {
          errors[r] = e.what();
        }
        close(mine);
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < 2; ++r)
      EXPECT_NE(errors[r].find("timed out waiting for memory handles from ranks [2]"), std::string::npos)
          << "rank " << r << ": " << errors[r];
    e0.reset();
    e1.reset();
  }
  EXPECT_EQ(open_fds(), before) << "file descriptors left open after the failed exchange";
}

// A rank that fails its part (here: no handle to send, EBADF) tells the others, which fail at once naming it
// instead of waiting for its handle until the bound (5 s here; the symmetric heap's is MK_BOOTSTRAP_TIMEOUT_MS).
TEST(FdExchange, ARankThatFailsItsPartIsNamedAtOnce) {
  const uint64_t job = fresh_job();
  std::vector<std::unique_ptr<FdExchange>> ex;
  for (int r = 0; r < 3; ++r) ex.push_back(std::make_unique<FdExchange>(job, r, 5000));
  std::vector<std::string> errors(3);
  std::vector<double> took(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      const int mine = r == 0 ? -1 : memfd_holding(r);
      const auto t0 = std::chrono::steady_clock::now();
      try {
        for (int fd : ex[r]->exchange(mine, {0, 1, 2}, 7))
          if (fd >= 0) close(fd);
      } catch (const mk::Error& e) {
        errors[r] = e.what();
      }
      took[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (mine >= 0) close(mine);
    });
  for (auto& t : threads) t.join();
  EXPECT_NE(errors[0].find("sending a memory handle to rank"), std::string::npos) << errors[0];
  for (int r = 1; r < 3; ++r) {
    EXPECT_NE(errors[r].find("rank 0 failed its part of this memory-handle exchange"), std::string::npos)
        << "rank " << r << ": " << errors[r];
    EXPECT_LT(took[r], 2.0) << "rank " << r;
  }
}
