// mkernel: the bookkeeping of a communicator's signal words
// (Communicator::reserve_signals / release_signals): runs given back by
// destroyed plans are handed out again, first fit, before the words above
// the high-water mark. No CUDA here (CPU-tested: tests/cpu/test_signal_pool.cpp);
// the communicator zeroes the words of a run before it is given back here, so
// every word that no one holds reads 0, as a new plan's epochs expect.
//
// Every rank makes the same sequence of reservations and releases (plans do:
// made and destroyed collectively, in the same order), so every rank's pool
// hands out the same indices; the plans' collective check compares them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <string>

namespace mk {

class SignalPool {
 public:
  explicit SignalPool(int capacity) : cap_(capacity) {}

  // The first index of n consecutive free words (n >= 1), or -1: no released
  // run is long enough and there is no room above the high-water mark.
  int reserve(int n) {
    if (n < 1) return -1;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < n) continue;
      const int base = it->first, left = it->second - n;
      free_.erase(it);
      if (left > 0) free_.emplace(base + n, left);
      return hand_out(base, n);
    }
    if (n > cap_ - top_) return -1;
    const int base = top_;
    top_ += n;
    return hand_out(base, n);
  }

  // Why [base, base + n) cannot be released ("" when it can): it must be a
  // run reserve() handed out, whole, and not released since.
  std::string releasable(int base, int n) const {
    auto it = held_.find(base);
    if (it != held_.end() && it->second == n) return "";
    const std::string run = "signals [" + std::to_string(base) + ", " + std::to_string(int64_t(base) + n) + ")";
    if (it != held_.end())
      return run + " are not a run handed out: [" + std::to_string(base) + ", " +
             std::to_string(base + it->second) + ") is (runs are released whole)";
    return run + " are not a run held now (never handed out, or released already)";
  }

  // Gives the run [base, base + n) back (releasable() must have said ""):
  // merged with its free neighbours; a run that reaches the mark lowers it.
  void release(int base, int n) {
    held_.erase(base);
    int b = base, len = n;
    auto next = free_.lower_bound(base);
    if (next != free_.end() && next->first == b + len) {
      len += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == b) {
        b = prev->first;
        len += prev->second;
        free_.erase(prev);
      }
    }
    if (b + len == top_)
      top_ = b;
    else
      free_.emplace(b, len);
  }

  int high_water() const { return top_; }  // words [0, high_water()) were handed out at least once
  int in_use() const {                     // words held now
    int n = 0;
    for (const auto& [b, len] : held_) n += len;
    return n;
  }
  int free_runs() const { return static_cast<int>(free_.size()); }
  // The longest run reserve() could hand out now.
  int largest_free() const {
    int best = cap_ - top_;
    for (const auto& [b, len] : free_) best = std::max(best, len);
    return best;
  }

 private:
  int hand_out(int base, int n) {
    held_.emplace(base, n);
    return base;
  }

  int cap_;
  int top_ = 0;     // high-water mark: every word at or above it is free
  std::map<int, int> free_;  // released runs below top_: base -> length; disjoint, never adjacent
  std::map<int, int> held_;  // runs handed out and not released: base -> length
};

}  // namespace mk
