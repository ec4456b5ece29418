// mkernel: environment knobs, declared once in knob_list.inc.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mk {

enum class Knob : int {
#define MK_KNOB(name, type, def, lo, hi, choices, doc) name,
#include "mkernel/knob_list.inc"
#undef MK_KNOB
  kCount
};

enum class KnobType { Int, Bool, String, Choice };

struct KnobSpec {
  const char* name;
  KnobType type;
  const char* def;
  int64_t min, max;
  const char* choices;
  const char* doc;
  bool tool = false;  // declared with MK_TOOL_KNOB: read by the tools only, never refused by the library
};

// Reads a variable; the default reads the process environment. Tests pass
// their own.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env();

const std::vector<KnobSpec>& knob_specs();
const KnobSpec& knob_spec(Knob k);

// Typed reads. A malformed or out-of-range value throws mk::Error naming the
// variable, the value and what is accepted.
int64_t knob_int(Knob k, const EnvLookup& env = process_env());
bool knob_bool(Knob k, const EnvLookup& env = process_env());
std::string knob_str(Knob k, const EnvLookup& env = process_env());  // String and Choice

// Parses every knob (so a bad value anywhere is reported up front) and returns
// MK_* variables that are set but unknown (likely typos).
std::vector<std::string> validate_knobs(const EnvLookup& env,
                                        const std::vector<std::string>& set_names);
// Names of MK_* variables set in the process environment.
std::vector<std::string> mk_variables_in_environment();
// "MK_A=1, MK_B=x" for the names given (sorted, values from env; "none" for none): what a benchmark report
// records, so that a knob that moves a time is seen beside it.
std::string mk_variables_line(const std::vector<std::string>& names, const EnvLookup& env = process_env());

// The knobs every rank must set alike, because they decide collective steps:
// the topology (MK_RANKS_PER_NODE, MK_SHARE_GPUS), the symmetric heap and its
// signal pool (MK_SYMM_MODE, MK_SIGNAL_SLOTS, MK_SIGNAL_REUSE: whether a
// plan's end exchanges), which cached plans Python closes (MK_PLAN_CACHE_MAX),
// the transport, its connections and agents (MK_NET, MK_NET_THREADS: one
// connection step per thread, MK_EMU_AGENTS, MK_IB_QPS_PER_PEER,
// MK_FI_PROVIDER, MK_FABRIC_STAGE; MK_NET_FREE_SMS may differ: the largest
// applies). Communicator's constructor compares them across ranks in its
// first exchange, before anything is allocated. Compared once: MK_SIGNAL_REUSE
// (read as a plan ends) and MK_PLAN_CACHE_MAX (read by Python as it makes a
// plan) changed afterwards must change on every rank alike.
const std::vector<Knob>& collective_knobs();
// This rank's values of collective_knobs(), parsed ("1" and "true" agree), a
// "NAME=value" line each; mk::Error for a malformed one.
std::string collective_knob_values(const EnvLookup& env = process_env());
// "" when every rank's collective_knob_values() (by rank) agree; else the
// error every rank throws, naming the first knob that differs and two ranks'
// values.
std::string collective_knob_mismatch(const std::vector<std::string>& by_rank);

// A table of every knob: name, type, default, current value, doc.
std::string print_config(const EnvLookup& env = process_env());

enum class LogLevel { Warn = 0, Info = 1, Debug = 2 };
LogLevel log_level();
// Writes log_line(msg) to stderr with one write(2) (pieces of PIPE_BUF for a
// longer line), so that lines of ranks sharing a terminal, pipe or log file
// should not interleave mid-line. Bounded: a stderr that takes no bytes for
// 1 s (a pipe nobody reads) drops the line, later lines do not wait until one
// gets through, and that one first says how many were dropped.
void log(LogLevel lvl, const std::string& msg);
// A warning from code that must not throw (destructors, teardown): the
// message is made by make() and logged; any exception (bad_alloc) dropped.
template <typename F>
void warn_noexcept(F&& make) noexcept {
  try {
    log(LogLevel::Warn, make());
  } catch (...) {
  }
}
// "mkernel: " + msg + newline; a message that already names the library
// ("mkernel: ..." from mk::Error, "mkernel GemmAr ...") keeps its own.
std::string log_line(const std::string& msg);

}  // namespace mk
