// mkernel: host rendezvous over TCP (the "bootstrap"). One root (a thread in
// the process that called get_unique_id(), or in rank 0 for launcher-driven
// starts) relays small host-side collectives for the ranks of one job. Every
// wait is bounded by MK_BOOTSTRAP_TIMEOUT_MS; errors name the missing ranks.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mkernel/launch_env.hpp"

namespace mk {

// NCCL-style unique id: create on one rank, hand to every rank (any channel),
// pass to Communicator(rank, world, id). Plain bytes; to_hex() for env/files.
struct UniqueId {
  uint8_t bytes[128] = {};
  std::string to_hex() const;
  static UniqueId from_hex(const std::string& hex);
};

// Starts a bootstrap root in this process (it lives until every rank of the
// job has closed its bootstrap, or the timeout passes) and returns its id.
UniqueId get_unique_id();

class BootstrapRoot;

class Bootstrap {
 public:
  // Joins the job whose root is named by `id`.
  Bootstrap(int rank, int world, const UniqueId& id);
  // Joins the job described by the launcher; rank 0 starts the root.
  explicit Bootstrap(const LaunchInfo& launch);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  // The bound this rank's waits use: MK_BOOTSTRAP_TIMEOUT_MS, or the root's when an id carried a longer one.
  int64_t timeout_ms() const { return timeout_ms_; }

  // Every rank contributes a blob (sizes may differ); all get all, by rank.
  // `step` (optional; null: an unnamed collective) names the caller's step in
  // this rank's error when the collective fails ("rank 1 (in
  // alloc_symmetric: sizes): ... waiting for ranks [2]"), and goes to the
  // root, which names it in its own messages and fails every rank when two
  // ranks' collective #N name different steps ("ranks called different
  // collectives"): the same step must have the same name on every rank.
  std::vector<std::string> allgather(const std::string& mine, const char* step = nullptr);
  void barrier(const char* step = nullptr);
  std::string broadcast(const std::string& data, int root, const char* step = nullptr);
  // Leaves the job (also done by the destructor). Peers that still wait get
  // an error naming this rank only if they wait on it.
  void close();
  // Leaves the job and ends it for every rank: each rank's pending or next
  // collective fails at once with "rank R left the job: <why>", and a root
  // hosted in this process stops at once instead of waiting (up to
  // MK_BOOTSTRAP_TIMEOUT_MS) for the other ranks to leave. For a rank that
  // cannot go on (its device failed: Communicator's destructor).
  void abort(const std::string& why);

 private:
  void leave(uint32_t type, const std::string& why);
  void connect_and_hello(const std::string& host, int port, uint64_t magic);
  void hello(uint64_t magic, std::chrono::steady_clock::time_point deadline);
  // If this process hosts the root: wait until it has finished (it ends
  // after reporting a failure to every rank, or when all ranks closed).
  void finish_root();
  void wait_root();  // (the last local user's leave, and finish_root: the wait itself)
  int rank_ = 0;
  int world_ = 1;
  int fd_ = -1;
  uint64_t seq_ = 0;
  int64_t timeout_ms_ = 0;
  bool root_refused_ = false;  // hello(): the root answered with an error (its message names the cause)
  std::string root_host_ = "rank 0's process";  // where the root runs, for messages (an id's: its maker's)
  bool id_path_ = false;                         // joined by a unique id (which carries the root's bound)
  std::shared_ptr<BootstrapRoot> root_;  // set when this process hosts the root
};

}  // namespace mk
