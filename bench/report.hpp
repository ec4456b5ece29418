// mkbench results: tables printed to stdout and written (by rank 0) as one
// markdown and one JSON file per run under MK_BENCH_OUT, with the metadata
// MEASURING.md asks for (date, GPU, driver, CUDA, commit, command, config).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mkernel/mkernel.hpp"

namespace mkb {

struct Table {
  std::string title;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  std::string note;  // how to read it, floors, targets
  // The GPU-clock line (bench/gpu_clocks.hpp): Report::add takes the samples since the previous table unless it
  // was taken when the rows were done (a table added after another table's timing: take_clock_line()).
  std::optional<std::string> clocks = std::nullopt;
};

// The clock line of the timed rounds since the previous table or take, for Table::clocks.
std::string take_clock_line();

class Report {
 public:
  Report(mk::Communicator* comm, int argc, char** argv);
  void add(const Table& t);
  void set_meta(const std::string& key, const std::string& value) { meta_[key] = value; }
  std::string config() const { return meta_.at("config"); }
  std::string markdown() const;
  std::string json() const;
  // Rank 0 writes <dir>/mkbench-<utc time>-<config>.{md,json}; returns the md path; throws when a file could not
  // be written.
  std::string write(const std::string& dir) const;

 private:
  int rank_ = 0;
  std::map<std::string, std::string> meta_;
  std::vector<Table> tables_;
};

// Makes the results directory and checks that a file can be written there (every rank, before any benchmark
// runs, so a run's numbers are not lost to a path that cannot be written); throws naming the path. Returns the
// directories it made (outermost first), for unmake_out_dir when the run stops before measuring anything.
std::vector<std::string> prepare_out_dir(const std::string& dir);
// Removes the directories prepare_out_dir made, innermost first, each only while it is empty.
void unmake_out_dir(const std::vector<std::string>& made) noexcept;

std::string fmt(double v, int precision = 3);
// Names the run's configuration: "1x2 NVLink", "2x1 emulated nodes", ...
std::string config_name(const mk::Topology& t);

}  // namespace mkb
