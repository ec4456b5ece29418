#include "mkernel/knobs.hpp"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string_view>

#include "mkernel/error.hpp"

extern char** environ;

namespace mk {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::vector<std::string> split_choices(const char* choices) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = choices; *p; ++p) {
    if (*p == '|') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += *p;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

const char* type_name(KnobType t) {
  switch (t) {
    case KnobType::Int: return "int";
    case KnobType::Bool: return "bool";
    case KnobType::String: return "string";
    case KnobType::Choice: return "choice";
  }
  return "?";
}

std::string raw_value(const KnobSpec& s, const EnvLookup& env, bool* from_env) {
  auto v = env(s.name);
  if (from_env) *from_env = v.has_value() && !v->empty();
  if (v && !v->empty()) return *v;
  return s.def;
}

int64_t parse_int(const KnobSpec& s, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (!v.empty() && end != v.c_str() && *end == '\0' && errno == ERANGE)  // an integer past int64
    fail(s.name, "='", v, "' is out of range [", s.min, ", ", s.max, "]");
  // (strtoll skips leading white space: refused, as trailing white space is)
  if (v.empty() || errno != 0 || end == v.c_str() || *end != '\0' || std::isspace(static_cast<unsigned char>(v[0])))
    fail(s.name, "='", v, "' is not an integer (it takes a whole number in [", s.min, ", ", s.max,
         "], without spaces)");
  if (x < s.min || x > s.max)
    fail(s.name, "=", x, " is out of range [", s.min, ", ", s.max, "]");
  return x;
}

bool parse_bool(const KnobSpec& s, const std::string& v) {
  std::string l = lower(v);
  if (l == "1" || l == "true" || l == "yes" || l == "on") return true;
  if (l == "0" || l == "false" || l == "no" || l == "off") return false;
  fail(s.name, "='", v, "' is not a boolean (use 0/1, true/false, yes/no, on/off)");
}

std::string parse_choice(const KnobSpec& s, const std::string& v) {
  auto opts = split_choices(s.choices);
  std::string l = lower(v);
  for (auto& o : opts)
    if (o == l) return o;
  fail(s.name, "='", v, "' is not one of ", s.choices);
}

void expect_type(const KnobSpec& s, KnobType t) {
  if (s.type != t && !(t == KnobType::String && s.type == KnobType::Choice))
    fail("internal: knob ", s.name, " is ", type_name(s.type), ", read as ", type_name(t));
}

}  // namespace

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

const std::vector<KnobSpec>& knob_specs() {
  static const std::vector<KnobSpec> specs = {
#define MK_KNOB(name, type, def, lo, hi, choices, doc) \
  KnobSpec{#name, KnobType::type, def, lo, hi, choices, doc},
#define MK_TOOL_KNOB(name, type, def, lo, hi, choices, doc) \
  KnobSpec{#name, KnobType::type, def, lo, hi, choices, doc, true},
#include "mkernel/knob_list.inc"
#undef MK_TOOL_KNOB
#undef MK_KNOB
  };
  return specs;
}

const KnobSpec& knob_spec(Knob k) { return knob_specs().at(static_cast<size_t>(k)); }

int64_t knob_int(Knob k, const EnvLookup& env) {
  const auto& s = knob_spec(k);
  expect_type(s, KnobType::Int);
  return parse_int(s, raw_value(s, env, nullptr));
}

bool knob_bool(Knob k, const EnvLookup& env) {
  const auto& s = knob_spec(k);
  expect_type(s, KnobType::Bool);
  return parse_bool(s, raw_value(s, env, nullptr));
}

std::string knob_str(Knob k, const EnvLookup& env) {
  const auto& s = knob_spec(k);
  expect_type(s, KnobType::String);
  auto v = raw_value(s, env, nullptr);
  return s.type == KnobType::Choice ? parse_choice(s, v) : v;
}

std::vector<std::string> validate_knobs(const EnvLookup& env,
                                        const std::vector<std::string>& set_names) {
  for (size_t i = 0; i < knob_specs().size(); ++i) {
    const auto& s = knob_specs()[i];
    // The tools' own knobs (MK_TOOL_KNOB, knob_list.inc) are the tools' business: a value the library would
    // refuse must not stop a communicator.
    if (s.tool) continue;
    switch (s.type) {
      case KnobType::Int: knob_int(static_cast<Knob>(i), env); break;
      case KnobType::Bool: knob_bool(static_cast<Knob>(i), env); break;
      case KnobType::String:
      case KnobType::Choice: knob_str(static_cast<Knob>(i), env); break;
    }
  }
  std::vector<std::string> unknown;
  for (const auto& n : set_names) {
    if (n.rfind("MK_", 0) != 0) continue;
    bool known = std::any_of(knob_specs().begin(), knob_specs().end(),
                             [&](const KnobSpec& s) { return n == s.name; });
    if (!known) unknown.push_back(n);
  }
  return unknown;
}

const std::vector<Knob>& collective_knobs() {
  static const std::vector<Knob> k = {Knob::MK_RANKS_PER_NODE, Knob::MK_SHARE_GPUS,   Knob::MK_SYMM_MODE,
                                      Knob::MK_SIGNAL_SLOTS,   Knob::MK_SIGNAL_REUSE, Knob::MK_PLAN_CACHE_MAX,
                                      Knob::MK_NET,            Knob::MK_NET_THREADS,  Knob::MK_EMU_AGENTS,
                                      Knob::MK_IB_QPS_PER_PEER, Knob::MK_FI_PROVIDER, Knob::MK_FABRIC_STAGE};
  return k;
}

std::string collective_knob_values(const EnvLookup& env) {
  std::string out;
  for (const Knob k : collective_knobs()) {
    const KnobSpec& s = knob_spec(k);
    std::string v;
    switch (s.type) {
      case KnobType::Int: v = std::to_string(knob_int(k, env)); break;
      case KnobType::Bool: v.assign(1, knob_bool(k, env) ? '1' : '0'); break;
      case KnobType::String:
      case KnobType::Choice: v = knob_str(k, env); break;
    }
    out += cat(s.name, "=");
    for (const char c : v) out += c == '\n' ? std::string("\\n") : std::string(1, c);  // one line each
    out += '\n';
  }
  return out;
}

std::string collective_knob_mismatch(const std::vector<std::string>& by_rank) {
  auto lines = [](const std::string& text) {
    std::vector<std::string> v;
    std::istringstream is(text);
    for (std::string l; std::getline(is, l);) v.push_back(l);
    return v;
  };
  auto names = [] {
    std::string n;
    for (const Knob k : collective_knobs()) n += cat(n.empty() ? "" : ", ", knob_spec(k).name);
    return n;
  };
  if (by_rank.empty()) return "";
  const std::vector<std::string> first = lines(by_rank[0]);
  for (size_t r = 1; r < by_rank.size(); ++r) {
    const std::vector<std::string> mine = lines(by_rank[r]);
    for (size_t i = 0; i < std::max(first.size(), mine.size()); ++i) {
      const std::string a = i < first.size() ? first[i] : "", b = i < mine.size() ? mine[i] : "";
      if (a == b) continue;
      const size_t ea = a.find('='), eb = b.find('=');
      if (ea == std::string::npos || eb == std::string::npos || a.compare(0, ea, b, 0, eb) != 0)
        return cat("ranks 0 and ", r, " compare different knobs (", a.empty() ? "none" : a, " / ",
                   b.empty() ? "none" : b, "): they run different mkernel builds; use one build on every rank");
      return cat(a.substr(0, ea), " differs between ranks: rank 0 has '", a.substr(ea + 1), "', rank ", r, " has '",
                 b.substr(eb + 1), "'; the knobs that decide collective steps (", names(),
                 ") must be set alike on every rank (in every rank's environment, or in none)");
    }
  }
  return "";
}

std::vector<std::string> mk_variables_in_environment() {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "MK_", 3) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    out.emplace_back(*e, eq ? static_cast<size_t>(eq - *e) : std::strlen(*e));
  }
  return out;
}

std::string mk_variables_line(const std::vector<std::string>& names, const EnvLookup& env) {
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::string out;
  for (const auto& n : sorted) {
    if (!out.empty()) out += ", ";
    out += n + "=" + env(n).value_or("");
  }
  return out.empty() ? "none" : out;
}

std::string print_config(const EnvLookup& env) {
  std::ostringstream os;
  os << "mkernel knobs (environment variables):\n";
  for (const auto& s : knob_specs()) {
    bool from_env = false;
    std::string v = raw_value(s, env, &from_env);
    os << "  " << s.name << " (" << type_name(s.type);
    if (s.type == KnobType::Choice) os << ": " << s.choices;
    if (s.type == KnobType::Int) os << " in [" << s.min << ", " << s.max << "]";
    os << ", default '" << s.def << "') = '" << v << "'" << (from_env ? " [set]" : "") << "\n";
    os << "      " << s.doc << "\n";
  }
  return os.str();
}

namespace {

// stderr may be a pipe that nobody drains (a launcher or a parent that stopped reading): a blocking write(2) would
// then hold the logging thread -- a proxy, a watchdog, a rank in its reported wait -- for ever, with every other
// thread that logs queued behind it on the mutex. So no write here can block, and a line waits (poll) at most
// kStderrWaitMs for room:
// - a pipe or FIFO is written through a descriptor of its own, opened O_NONBLOCK on /proc/self/fd/2: a new open file
//   description of the same pipe. (O_NONBLOCK set on fd 2 would belong to the description it shares with the rest
//   of the process and its children, whose writes would then fail with EAGAIN.) A poll then a blocking write was
//   not enough: other writers of the pipe (ranks sharing it, Python, the CUDA runtime) can take the room the poll saw.
// - a socket: send(MSG_DONTWAIT), non-blocking for the one call (a blocking write of a line larger than the room a
//   small send buffer leaves waited for ever, though poll said writable);
// - anything else (a terminal, a file): poll, then write(2) (a file waits for no reader; left: a terminal stopped by
//   ^S that another writer fills between the poll and the write).
// Pieces of at most PIPE_BUF, which a pipe takes whole or not at all. A line that finds no room is dropped (or cut
// short) and counted; once one is, the next ones do not wait (one stall costs one wait, not one per line) until a
// line gets through, which first says how many were lost.
constexpr int kStderrWaitMs = 1000;

// Waits up to wait_ms for fd to take bytes: 1 writable (or not pollable: a write says what it is), 0 not in time.
int room_within(int fd, int wait_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    pollfd pfd{fd, POLLOUT, 0};
    const int r = ::poll(&pfd, 1, static_cast<int>(std::max<long long>(0, left.count())));
    if (r > 0) return 1;  // POLLOUT, or POLLERR / POLLHUP / POLLNVAL: the write then fails at once
    if (r < 0 && errno != EINTR) return 1;
    if (r == 0 && left.count() <= 0) return 0;
    if (r == 0) continue;  // poll woke early (the clock's rounding): wait out the rest
  }
}

// Where a line goes: fd 2, or a pipe's own non-blocking descriptor (own), reopened when fd 2 names another file.
// (That descriptor holds the pipe's write end open until the next line finds fd 2 changed, or the process ends: a
// reader that waits for EOF after this process moved fd 2 elsewhere waits that long. O_CLOEXEC: no exec'd child
// inherits it.)
struct StderrSink {
  int fd = STDERR_FILENO;
  bool own = false;   // fd is this sink's O_NONBLOCK descriptor of the pipe that fd 2 was (dev, ino)
  bool sock = false;  // fd 2 is a socket: send(MSG_DONTWAIT)
  dev_t dev = 0;
  ino_t ino = 0;
};

void refresh(StderrSink& s) {
  struct stat st {};
  const bool known = ::fstat(STDERR_FILENO, &st) == 0;
  if (s.own && known && st.st_dev == s.dev && st.st_ino == s.ino) return;
  if (s.own) ::close(s.fd);
  s = StderrSink{};
  if (!known) return;
  s.sock = S_ISSOCK(st.st_mode);
  if (S_ISFIFO(st.st_mode)) {
    const int fd = ::open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) s = StderrSink{fd, true, false, st.st_dev, st.st_ino};  // (else: no reader, or no /proc: fd 2)
  }
}

void write_stderr_line(const std::string& text) {
  static std::mutex m;
  static StderrSink sink;
  static size_t lost = 0;   // lines dropped or cut short since the last one written whole
  static bool cut = false;  // the last piece written ended mid-line
  std::lock_guard<std::mutex> g(m);
  refresh(sink);
  const bool nonblocking = sink.own || sink.sock;
  const std::string line =
      lost == 0 ? text
                : cat(cut ? "\n" : "", "mkernel: ", lost, " log line(s) dropped or cut short before this one: ",
                      "stderr took no bytes for ", kStderrWaitMs, " ms (a pipe that nobody reads?)\n", text);
  int wait_ms = lost > 0 ? 0 : kStderrWaitMs;
  auto give_up = [&](size_t off) {
    lost += 1;
    cut = cut || off > 0;
  };
  for (size_t off = 0; off < line.size();) {
    if (!nonblocking && room_within(sink.fd, wait_ms) == 0) return give_up(off);
    if (off == 0) std::fflush(stderr);  // whatever the process wrote there before comes first
    const size_t piece = std::min<size_t>(line.size() - off, PIPE_BUF);
    const ssize_t n = sink.sock ? ::send(STDERR_FILENO, line.data() + off, piece, MSG_DONTWAIT | MSG_NOSIGNAL)
                                : ::write(sink.fd, line.data() + off, piece);
    if (n > 0) {
      off += static_cast<size_t>(n);
      wait_ms = kStderrWaitMs;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && nonblocking && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (room_within(sink.fd, wait_ms) == 0) return give_up(off);
    } else {
      break;  // stderr closed or failing: nothing to wait for
    }
  }
  lost = 0;
  cut = false;
}

}  // namespace

LogLevel log_level() {
  static LogLevel lvl = [] {
    try {
      auto v = knob_str(Knob::MK_LOG);
      return v == "debug" ? LogLevel::Debug : v == "info" ? LogLevel::Info : LogLevel::Warn;
    } catch (const Error& e) {
      // The log itself cannot throw: a malformed MK_LOG is said once (straight to stderr: log() would recurse into
      // this initialisation) and the default level is used.
      write_stderr_line(cat("mkernel: warning: ", e.what(), "; logging at the default level (warn)\n"));
      return LogLevel::Warn;
    }
  }();
  return lvl;
}

std::string log_line(const std::string& msg) {
  const bool named = msg.rfind("mkernel: ", 0) == 0 || msg.rfind("mkernel ", 0) == 0;
  return (named ? msg : "mkernel: " + msg) + "\n";
}

void log(LogLevel lvl, const std::string& msg) {
  if (static_cast<int>(lvl) > static_cast<int>(log_level())) return;
  write_stderr_line(log_line(msg));
}

}  // namespace mk
