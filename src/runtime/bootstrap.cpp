#include "mkernel/bootstrap.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "mkernel/error.hpp"
#include "src/runtime/bootstrap_wire.hpp"
#include "src/runtime/socket.hpp"

namespace mk {

namespace {

using namespace bootstrap_wire;  // (the frames, the id's layout: src/runtime/bootstrap_wire.hpp)

uint64_t random_u64() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
}

}  // namespace

// ---------------------------------------------------------------------------
// Root: one thread, poll() over all rank connections; relays collectives.
class BootstrapRoot {
 public:
  BootstrapRoot(int listen_fd, uint64_t job, int64_t timeout_ms)
      : listen_fd_(listen_fd), job_(job), timeout_ms_(timeout_ms) {
    try {
      thread_ = std::thread([this] { run(); });
    } catch (...) {  // (no destructor runs: the port would stay bound)
      ::close(listen_fd_);
      throw;
    }
  }
  ~BootstrapRoot() { join(); }
  void owner_closed() { owner_closed_at_ms_.store(now_ms()); }
  // The last user of the root in its process closed and now waits for the root (Bootstrap::finish_root).
  void host_waits() { host_waits_at_ms_.store(now_ms()); }
  // Ends the root within one poll period (process exit).
  void stop() { stop_.store(true); }
  // The Bootstraps of this process that use the root (several ranks in one process): counted, so that exactly the
  // last one to leave waits for it, even when they close at once on several threads (a shared_ptr's use count,
  // read then acted on, let two closing at once each see the other and neither wait: before 2026-12-06).
  void add_user() { users_.fetch_add(1); }
  int drop_user() { return users_.fetch_sub(1) - 1; }  // the users left
  // Why the root ended the job ("": it did not), for this process's own rank if it has not connected yet.
  std::string failure() {
    std::lock_guard<std::mutex> g(failure_mu_);
    return failure_;
  }
  void join() {
    std::lock_guard<std::mutex> g(join_mu_);
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Conn {
    int fd = -1;
    int rank = -1;
    std::string buf;
    bool bye = false;
    int64_t accepted_ms = 0;
  };

  static int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               sock::Clock::now().time_since_epoch())
        .count();
  }

  // false: the send failed (the process is gone, or did not read for the bound); the connection is closed.
  bool send_to(Conn& c, const std::string& bytes, std::string* why = nullptr) {
    if (c.fd < 0) return false;
    try {
      sock::send_all(c.fd, bytes.data(), bytes.size(), sock::deadline_in_ms(timeout_ms_));
      return true;
    } catch (const Error& e) {
      sock::close_fd(c.fd);
      if (why) *why = e.what();
      return false;
    }
  }

  // A frame to every rank. One it cannot reach ends the job for every rank at once, by name (before 2026-12-06
  // it was dropped without a word, and the others waited the bound in their next collective).
  void send_to_ranks(const std::string& f) {
    for (auto& c : conns_) {
      std::string why;
      if (c.rank >= 0 && !c.bye && !send_to(c, f, &why) && !done_)
        return fail_all(cat("bootstrap: rank ", c.rank, " cannot be reached: the root's message to it failed (",
                            why.empty() ? std::string("connection closed") : why, "); that process died or stopped"));
    }
  }

  // Closes a connection that is not (or not yet) a rank of this job; why is kept for the join timeout's message.
  void turn_away(Conn& c, const std::string& why) {
    sock::close_fd(c.fd);
    c.buf.clear();
    note_turned_away(why);
  }
  void note_turned_away(const std::string& why) {
    if (turned_away_.size() < 512) turned_away_ += cat(turned_away_.empty() ? "" : "; ", why);
  }

  void fail_all(const std::string& msg) {
    {
      std::lock_guard<std::mutex> g(failure_mu_);
      failure_ = msg;
    }
    std::string f = frame(kError, -1, world_, 0, job_, msg);
    for (auto& c : conns_) send_to(c, f);
    done_ = true;
  }

  // Ranks that joined and have not closed their bootstrap (no goodbye yet).
  std::vector<int> ranks_open() const {
    std::vector<int> m;
    for (const auto& c : conns_)
      if (c.rank >= 0 && !c.bye) m.push_back(c.rank);
    std::sort(m.begin(), m.end());
    return m;
  }

  std::vector<int> ranks_without_hello() const {
    std::vector<int> m;
    for (int r = 0; r < world_; ++r)
      if (rank_conn_[r] < 0) m.push_back(r);
    return m;
  }

  void on_frame(size_t ci, const FrameHeader& h, const std::string& body) {
    Conn& c = conns_[ci];
    if (h.type == kHello) {
      std::string why;
      if (h.job != job_)
        why = cat("it belongs to another job: its bootstrap id, launch variables or world size differ (it says rank ",
                  h.rank, " of ", h.world, world_ > 0 ? cat("; this job's ranks say world ", world_) : std::string(),
                  ")");
      else if (world_ > 0 && h.world != world_)
        why = cat("its world size ", h.world, " differs from ", world_, " given by other ranks");
      else if (h.world < 1 || h.world > kMaxWorld || h.rank < 0 || h.rank >= h.world)
        why = h.world > kMaxWorld ? cat("its world size ", h.world, " is over the limit of ", kMaxWorld, " ranks")
                                  : cat("rank ", h.rank, " is outside [0, ", h.world, ")");
      else if (world_ > 0 && rank_conn_[h.rank] >= 0)
        why = cat("rank ", h.rank, " already joined (two processes claim the same rank)");
      if (!why.empty()) {
        send_to(c, frame(kError, -1, world_, 0, job_, cat("bootstrap root rejected a rank: ", why)));
        sock::close_fd(c.fd);
        // Another job's process (a stale one on the port) is only turned away; a rank of this job with another
        // world size, or a second process claiming a rank, means the job cannot start: the ranks that joined
        // hear it now, not as a join timeout naming a rank that did connect.
        if (h.job == job_ && world_ > 0)
          fail_all(cat("bootstrap root rejected a rank: ", why, "; the job cannot start"));
        else  // (named if the job then times out waiting: that may be the rank)
          note_turned_away(why);
        return;
      }
      if (world_ == 0) {
        world_ = h.world;
        rank_conn_.assign(world_, -1);
        contrib_.assign(world_, std::nullopt);
        join_start_ms_ = now_ms();  // the join bound counts from here (run)
      }
      c.rank = h.rank;
      rank_conn_[h.rank] = static_cast<int>(ci);
      if (ranks_without_hello().empty()) {
        started_ = true;
        // No process may join any more: a later connection (a rank making
        // its next communicator from the same launch variables, whose rank 0
        // starts a new root on this port) is refused and retried, not
        // answered by this root with "already joined".
        sock::close_fd(listen_fd_);
        send_to_ranks(frame(kWelcome, -1, world_, 0, job_, ""));
      }
      return;
    }
    if (c.rank < 0) return;
    if (h.type == kAbort) {  // Bootstrap::abort: the job ends now, for every rank
      c.bye = true;
      ++byes_;
      fail_all(cat("bootstrap: rank ", c.rank, " left the job: ", body));
      return;
    }
    if (h.type == kBye) {
      c.bye = true;
      ++byes_;
      if (std::any_of(contrib_.begin(), contrib_.end(), [](auto& x) { return x.has_value(); }))
        fail_all(cat("bootstrap collective #", round_, " (", step_name(round_step_), "): rank ", c.rank,
                     " closed its bootstrap while others wait for it"));
      return;
    }
    if (h.type == kGather) {
      uint16_t n = 0;
      if (body.size() < sizeof(n) || (std::memcpy(&n, body.data(), sizeof(n)), body.size() < sizeof(n) + n)) {
        fail_all(cat("bootstrap: rank ", c.rank, " sent a corrupt collective frame"));
        return;
      }
      const std::string step = body.substr(sizeof(n), n);
      if (!started_ || h.seq != round_) {
        fail_all(cat("bootstrap: rank ", c.rank, " is at collective #", h.seq, " (", step_name(step),
                     ") but the job is at #", round_, " (ranks called different sequences of collectives)"));
        return;
      }
      for (auto& cc : conns_)
        if (cc.bye && cc.rank >= 0) {
          fail_all(cat("bootstrap collective #", round_, " (", step_name(step), "): rank ", cc.rank,
                       " has already closed its bootstrap"));
          return;
        }
      // Every rank's collective #N must be the same step: ranks that took different paths (one freeing a buffer
      // while another makes a plan) would otherwise exchange each other's data and fail, if at all, on
      // whatever the data happened to say.
      if (first_arrival_ms_ && step != round_step_) {
        fail_all(cat("bootstrap collective #", round_, ": ranks called different collectives: rank ",
                     round_step_rank_, " is in ", step_name(round_step_), ", rank ", c.rank, " in ", step_name(step),
                     " (ranks called different sequences of collectives)"));
        return;
      }
      if (!first_arrival_ms_) {
        first_arrival_ms_ = now_ms();
        round_step_ = step;
        round_step_rank_ = c.rank;
      }
      contrib_[c.rank] = body.substr(sizeof(n) + n);
      for (auto& x : contrib_)
        if (!x) return;
      uint64_t total = 0;
      for (auto& x : contrib_) total += sizeof(uint64_t) + x->size();
      if (total > kMaxPayload) {
        fail_all(cat("bootstrap collective #", round_, " (", step_name(round_step_), "): the ranks' data adds up to ",
                     total, " bytes, over the bootstrap's limit of ", kMaxPayload, " bytes a message"));
        return;
      }
      std::string out;
      out.reserve(total);
      for (auto& x : contrib_) {
        uint64_t n = x->size();
        out.append(reinterpret_cast<const char*>(&n), sizeof(n));
        out += *x;
        x.reset();
      }
      send_to_ranks(frame(kResult, -1, world_, round_, job_, out));
      ++round_;
      first_arrival_ms_ = 0;
    }
  }

  void read_conn(size_t ci) {
    Conn& c = conns_[ci];
    char tmp[65536];
    bool eof = false;
    while (c.fd >= 0) {
      ssize_t n = ::recv(c.fd, tmp, sizeof(tmp), MSG_DONTWAIT);
      if (n > 0) {
        c.buf.append(tmp, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
      eof = true;  // EOF or error: act on it after the frames already received (a BYE)
      break;
    }
    parse_frames(ci);
    if (eof && !done_) {
      sock::close_fd(c.fd);
      if (c.rank >= 0 && !c.bye)
        fail_all(cat("bootstrap: rank ", c.rank, " disconnected without closing (process died?)"));
    }
  }

  void parse_frames(size_t ci) {
    Conn& c = conns_[ci];
    while (c.buf.size() >= sizeof(FrameHeader)) {
      FrameHeader h;
      std::memcpy(&h, c.buf.data(), sizeof(h));
      if (h.magic != kFrameMagic || h.len > kMaxPayload) {
        if (c.rank >= 0) {  // a rank of the job: every rank hears why now (its connection closed says nothing)
          fail_all(h.magic != kFrameMagic
                       ? cat("bootstrap: rank ", c.rank, " sent a corrupt frame")
                       : cat("bootstrap: rank ", c.rank, " sent a message of ", h.len, " bytes, over the limit of ",
                             kMaxPayload));
          sock::close_fd(c.fd);
          c.buf.clear();
          return;
        }
        turn_away(c, h.magic == kFrameMagicV1 ? "a process of an older mkernel build (another bootstrap protocol) "
                                                "tried to join"
                                              : "a connection that does not speak mkernel's bootstrap protocol was "
                                                "closed");
        return;
      }
      if (c.rank < 0 && (h.type != kHello || h.len != 0)) {  // (before its hello a connection sends nothing else:
        turn_away(c, "a connection that sent something other than a hello first was closed");  // no body buffered)
        return;
      }
      if (c.buf.size() < sizeof(h) + h.len) break;
      std::string body = c.buf.substr(sizeof(h), h.len);
      c.buf.erase(0, sizeof(h) + h.len);
      on_frame(ci, h, body);
      if (done_) return;
    }
  }

  void run() {
    try {
      serve();
    } catch (const std::exception& e) {  // (std::terminate otherwise: the hosting process would end, naming nothing)
      try {
        if (!done_) fail_all(cat("bootstrap root failed: ", e.what()));
      } catch (...) {  // (out of memory for the message: the ranks see the connection close)
      }
      done_ = true;
    }
    for (auto& c : conns_) sock::close_fd(c.fd);
    sock::close_fd(listen_fd_);
  }

  void serve() {
    // The join bound counts from the first valid hello (join_start_ms_): a root made by get_unique_id() may
    // wait any time for its job to start (it ends with the process otherwise), and a connection that never
    // says hello (a port scan, a health check) neither starts the bound nor ends the root: it is closed once
    // it has been open that long (before 2026-12-06 it started the bound, and the root then quit unheard).
    sock::set_nonblocking(listen_fd_, true);
    while (!done_ && !stop_.load()) {
      std::vector<pollfd> pfd;
      pfd.push_back({listen_fd_, POLLIN, 0});  // (-1 once closed: poll skips it)
      for (auto& c : conns_) pfd.push_back({c.fd, POLLIN, 0});
      ::poll(pfd.data(), pfd.size(), 50);
      if (pfd[0].revents & POLLIN) {
        while (true) {
          int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
          if (fd < 0) break;
          Conn c;
          c.fd = fd;
          c.accepted_ms = now_ms();
          // A closed connection that never joined takes the new one (rank_conn_ indexes joined ones only), so
          // a root that outlives many stray connections (port scans, health checks) does not grow with them.
          auto free_slot = std::find_if(conns_.begin(), conns_.end(), [](const Conn& x) {
            return x.fd < 0 && x.rank < 0;
          });
          if (free_slot != conns_.end())
            *free_slot = std::move(c);
          else
            conns_.push_back(std::move(c));
        }
      }
      for (size_t i = 0; i < conns_.size() && !done_; ++i)
        if (conns_[i].fd >= 0) read_conn(i);
      if (done_) break;
      int64_t now = now_ms();
      for (auto& c : conns_)  // a connection with no hello for the whole bound is not a rank of this job
        if (c.fd >= 0 && c.rank < 0 && now - c.accepted_ms > timeout_ms_)
          turn_away(c, cat("a connection that sent no hello for ", timeout_ms_, " ms was closed"));
      if (!started_ && join_start_ms_ && now - join_start_ms_ > timeout_ms_) {
        fail_all(cat("bootstrap: timed out after ", timeout_ms_, " ms waiting for ranks ",
                     ranks_to_string(ranks_without_hello()), " of ", world_, " to join (MK_BOOTSTRAP_TIMEOUT_MS)",
                     turned_away_.empty() ? std::string()
                                          : cat("; the root turned away a process meanwhile: ", turned_away_)));
      } else if (started_ && first_arrival_ms_ && now - first_arrival_ms_ > timeout_ms_) {
        std::vector<int> missing;
        for (int r = 0; r < world_; ++r)
          if (!contrib_[r]) missing.push_back(r);
        fail_all(cat("bootstrap collective #", round_, " (", step_name(round_step_), "): timed out after ",
                     timeout_ms_, " ms waiting for ranks ", ranks_to_string(missing), " (MK_BOOTSTRAP_TIMEOUT_MS)"));
      } else if (started_ && byes_ == world_) {
        done_ = true;
      } else if (const int64_t oc = owner_closed_at_ms_.load(); oc) {
        // A user of the root in its process closed. When the last one did (host_waits), its close waits here
        // (bounded) until every rank has closed too, so that none is cut off mid-reply: said when that takes
        // long, and when it ends without them.
        const int64_t hw = host_waits_at_ms_.load();
        if (now - oc > timeout_ms_) {
          if (started_ && hw)
            log(LogLevel::Warn,
                cat("bootstrap root: ranks ", ranks_to_string(ranks_open()), " had not closed their communicators ",
                    timeout_ms_, " ms after the process hosting the bootstrap root closed its own; it stops waiting ",
                    "for them (MK_BOOTSTRAP_TIMEOUT_MS)"));
          done_ = true;
        } else if (started_ && hw && !slow_close_said_ && now - hw > std::min<int64_t>(kSlowCloseMs, timeout_ms_ / 4)) {
          slow_close_said_ = true;
          log(LogLevel::Warn,
              cat("bootstrap root: the process hosting the bootstrap root closed its communicator and waits for ",
                  "ranks ", ranks_to_string(ranks_open()), " to close theirs (at most MK_BOOTSTRAP_TIMEOUT_MS = ",
                  timeout_ms_, " ms)"));
        }
      }
    }
  }

  int listen_fd_;
  uint64_t job_;
  int64_t timeout_ms_;
  std::thread thread_;
  std::mutex join_mu_;
  std::mutex failure_mu_;
  std::string failure_;  // fail_all's message
  std::atomic<int64_t> owner_closed_at_ms_{0};
  std::atomic<int64_t> host_waits_at_ms_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> users_{0};
  std::vector<Conn> conns_;
  std::vector<int> rank_conn_;
  std::vector<std::optional<std::string>> contrib_;
  int world_ = 0;
  bool started_ = false;
  bool done_ = false;
  int byes_ = 0;
  uint64_t round_ = 0;
  int64_t first_arrival_ms_ = 0;
  int64_t join_start_ms_ = 0;  // the first valid hello's time (0: none yet)
  std::string round_step_;  // the step the round's first arrival named, and its rank
  int round_step_rank_ = -1;
  bool slow_close_said_ = false;
  std::string turned_away_;  // why hellos of another job were refused
  static constexpr int64_t kSlowCloseMs = 5000;  // (or a quarter of the bound, if less)
};

namespace {
// Roots started by get_unique_id() in this process, by job magic. A root
// nobody joined must not hold the process at exit: stop them all then.
struct RootRegistry {
  std::mutex mu;
  std::map<uint64_t, std::shared_ptr<BootstrapRoot>> roots;
  ~RootRegistry() {
    for (auto& [k, r] : roots) {
      r->stop();
      r->join();
    }
  }
};
RootRegistry& registry() {
  static RootRegistry r;
  return r;
}
}  // namespace

// ---------------------------------------------------------------------------
std::string UniqueId::to_hex() const {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += d[b >> 4];
    s += d[b & 15];
  }
  return s;
}

UniqueId UniqueId::from_hex(const std::string& hex) {
  if (hex.size() != 2 * sizeof(UniqueId::bytes))
    fail("unique id: expected ", 2 * sizeof(UniqueId::bytes), " hex digits, got ", hex.size());
  UniqueId id;
  auto val = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    fail("unique id: '", c, "' is not a hex digit");
  };
  for (size_t i = 0; i < sizeof(id.bytes); ++i)
    id.bytes[i] = static_cast<uint8_t>(val(hex[2 * i]) << 4 | val(hex[2 * i + 1]));
  return id;
}

UniqueId get_unique_id() {
  int64_t timeout = knob_int(Knob::MK_BOOTSTRAP_TIMEOUT_MS);
  std::string addr = knob_str(Knob::MK_BOOTSTRAP_ADDR);
  // The address the other ranks reach this host by: the one on the route to MASTER_ADDR where a launcher
  // set it (the ranks' own rendezvous host), else the first usable interface's.
  const sock::Deadline lookups = sock::deadline_in_ms(timeout);  // (the names' lookups, together)
  if (addr.empty()) {
    const std::string master = process_env()("MASTER_ADDR").value_or("");
    if (!master.empty()) addr = sock::route_source_ipv4(master, lookups);
    if (addr.empty() || addr.rfind("127.", 0) == 0) addr = sock::first_ipv4();
  }
  // (before the socket: a failure leaves no port bound)
  const uint32_t addr_net = sock::resolve_ipv4(addr, lookups);
  int port = 0;
  const int want = static_cast<int>(knob_int(Knob::MK_BOOTSTRAP_PORT));
  int fd = -1;
  try {
    fd = sock::tcp_listen(want, &port);
  } catch (const Error& e) {
    // The id carries its port: any free one serves (MK_BOOTSTRAP_PORT, which
    // tools/mkrun exports to its ranks for their launch root, is taken by
    // another root of this host: a second id, another group's).
    if (want == 0) throw;
    fd = sock::tcp_listen(0, &port);
    log(LogLevel::Warn, cat("get_unique_id: MK_BOOTSTRAP_PORT=", want, " is taken (", error_reason(e),
                            "); this id's root listens on port ", port));
  }
  IdLayout l{};
  l.magic = random_u64();
  l.addr = addr_net;
  l.port = static_cast<uint16_t>(port);
  l.version = 1;
  l.root_timeout_ms = static_cast<uint32_t>(timeout);  // (the knob's range: at most 86400000)
  UniqueId id;
  std::memcpy(id.bytes, &l, sizeof(l));
  std::lock_guard<std::mutex> g(registry().mu);
  registry().roots[l.magic] = std::make_shared<BootstrapRoot>(fd, l.magic, timeout);
  return id;
}

Bootstrap::Bootstrap(int rank, int world, const UniqueId& id) : rank_(rank), world_(world) {
  timeout_ms_ = knob_int(Knob::MK_BOOTSTRAP_TIMEOUT_MS);
  if (world < 1) fail("world size must be >= 1 (got ", world, ")");
  if (rank < 0 || rank >= world) fail("rank ", rank, " is outside [0, ", world, ")");
  if (world > kMaxWorld) fail("world size ", world, " is over the bootstrap's limit of ", kMaxWorld, " ranks");
  IdLayout l{};
  std::memcpy(&l, id.bytes, sizeof(l));
  // (the root's bound within the knob's own range: an id not made by get_unique_id could carry ~50 days)
  if (l.version != 1 || l.port == 0 || l.root_timeout_ms > knob_spec(Knob::MK_BOOTSTRAP_TIMEOUT_MS).max)
    fail("unique id is not one made by mk::get_unique_id()");
  timeout_ms_ = std::max<int64_t>(timeout_ms_, l.root_timeout_ms);
  root_host_ = "the process that called get_unique_id()";
  id_path_ = true;
  {
    std::lock_guard<std::mutex> g(registry().mu);
    auto it = registry().roots.find(l.magic);
    if (it != registry().roots.end()) {
      root_ = it->second;
      root_->add_user();
    }
  }
  try {
    connect_and_hello(sock::ipv4_to_string(l.addr), l.port, l.magic);
  } catch (...) {  // (no destructor runs for this object: it gives its use of the root back here)
    if (root_) {
      root_->drop_user();
      root_.reset();
    }
    throw;
  }
}

Bootstrap::Bootstrap(const LaunchInfo& li) : rank_(li.rank), world_(li.world) {
  timeout_ms_ = knob_int(Knob::MK_BOOTSTRAP_TIMEOUT_MS);
  // (detect_launch checked these; a LaunchInfo made by hand is checked here, before any socket)
  if (world_ < 1 || rank_ < 0 || rank_ >= world_) fail(li.launcher, ": rank ", rank_, " is outside [0, ", world_, ")");
  if (world_ > kMaxWorld) fail(li.launcher, ": world size ", world_, " is over the bootstrap's limit of ", kMaxWorld);
  if (world_ == 1) return;  // nothing to rendezvous with
  if (li.root_port < 1 || li.root_port > 65535)
    fail(li.launcher, ": the bootstrap root's port ", li.root_port, " is not in [1, 65535]");
  uint64_t job = std::hash<std::string>{}(li.launcher + "/" + li.job_key + "/" + std::to_string(li.world));
  if (rank_ == 0) {
    int port = 0;
    int fd = sock::tcp_listen(li.root_port, &port);
    root_ = std::make_shared<BootstrapRoot>(fd, job, timeout_ms_);
    root_->add_user();
  }
  try {
    connect_and_hello(li.root_addr, li.root_port, job);
  } catch (...) {
    // Rank 0 that cannot reach its own root (MASTER_ADDR not this host, or
    // not resolvable): the root ends now. Its join bound counts only from a
    // first connection, and none may ever come (the other ranks look for the
    // root elsewhere), so the constructor's unwinding waited forever.
    if (root_) {
      root_->stop();
      root_.reset();
      // Say why when the address is not this host's (a MASTER_ADDR typo, or rank 0 placed on another node
      // than the one the address names): the connection error alone blames a root that is running.
      // (a lookup that did not answer by now is given 2 s more, not a second bootstrap timeout)
      if (!sock::is_local_ipv4(li.root_addr, sock::deadline_in_ms(std::min<int64_t>(timeout_ms_, 2000))))
        fail("rank 0 hosts the bootstrap root, but its address ", li.root_addr, " (MK_BOOTSTRAP_ADDR, else "
             "MASTER_ADDR, else the first Slurm node) is not an address of this host, and connecting there "
             "failed; set it to rank 0's host");
    }
    throw;
  }
}

void Bootstrap::connect_and_hello(const std::string& host, int port, uint64_t magic) {
  // Rank 0 whose own root ended the job before this rank connected (another process claiming a rank, a rank of
  // another world size: the root's listener is closed then) stops retrying and says the root's reason (before
  // 2026-12-06 it retried until the bound, then blamed a root that was not running).
  const auto root_failure = [this] { return root_ ? root_->failure() : std::string(); };
  try {
    fd_ = sock::tcp_connect(host, port, sock::deadline_in_ms(timeout_ms_), [&] { return !root_failure().empty(); });
  } catch (const Error& e) {  // (the socket's error names no rank: several ranks' logs read alike)
    if (const std::string why = root_failure(); !why.empty()) fail("rank ", rank_, " of ", world_, ": ", why);
    fail("rank ", rank_, " of ", world_, ": ", error_reason(e));
  }
  // From the connection on (connecting may have taken up to the bound while
  // the root was not up yet): the root's own error, naming missing ranks
  // within timeout_ms_ of the first connection, comes before this one.
  auto dl = sock::deadline_in_ms(timeout_ms_ + kClientGraceMs);
  try {
    hello(magic, dl);
  } catch (const std::exception& e) {
    sock::close_fd(fd_);  // the root sees this rank leave at once
    if (root_refused_) throw;
    // The socket's own error names nobody: say who, where and in which phase (e.g. another program, not
    // rank 0's root, listening on the derived port: it accepts and never answers).
    fail("rank ", rank_, " of ", world_, ": rendezvous with the bootstrap root at ", host, ":", port,
         " failed after connecting: ", error_reason(e), " within ", timeout_ms_ + kClientGraceMs, " ms: ",
         id_path_ ? cat("the root (in ", root_host_, ") names late ranks within its own bound, which this rank "
                        "outwaits, so the program listening there is not that root of this mkernel build, or it hung")
                  : cat("is a rank late, or does the root (in ", root_host_, ") wait longer for the ranks to join "
                        "(MK_BOOTSTRAP_TIMEOUT_MS differs between processes)? Else the program listening there is "
                        "not that root of this mkernel build (MK_BOOTSTRAP_PORT / MK_BOOTSTRAP_ADDR choose it)"));
  }
}

void Bootstrap::hello(uint64_t magic, sock::Deadline dl) {
  std::string f = frame(kHello, rank_, world_, 0, magic, "");
  sock::send_all(fd_, f.data(), f.size(), dl);
  FrameHeader h;
  if (!sock::recv_all(fd_, &h, sizeof(h), dl)) fail("bootstrap root closed the connection during rendezvous");
  if (h.magic != kFrameMagic || h.len > kMaxPayload) fail("bootstrap: corrupt reply from the root");
  std::string body(h.len, '\0');
  if (h.len) sock::recv_all(fd_, body.data(), h.len, dl);
  if (h.type == kError) {
    root_refused_ = true;
    sock::close_fd(fd_);
    finish_root();  // let the root tell every other rank before this process can exit
    fail("rank ", rank_, ": ", body);
  }
  if (h.type != kWelcome) fail("bootstrap: unexpected reply ", h.type, " to hello");
}

std::vector<std::string> Bootstrap::allgather(const std::string& mine, const char* step) {
  if (world_ == 1) return {mine};
  // "rank R" or "rank R (in <step>)": who, and where it was, in every error below.
  const std::string me = step ? cat("rank ", rank_, " (in ", step, ")") : cat("rank ", rank_);
  if (fd_ < 0) fail(me, ": bootstrap used after close()");
  auto dl = sock::deadline_in_ms(timeout_ms_ + kClientGraceMs);
  // The root names late or dead ranks itself (kError) within timeout_ms_; a
  // socket timeout here means the root itself did not answer: say so, and
  // which collective (the socket's own error names nobody).
  const auto from_root = [&](const auto& io) {
    try {
      return io();
    } catch (const Error& e) {
      const std::string why = error_reason(e);
      if (sock::ms_left(dl) > 0)  // not the deadline: the connection failed (reset, closed mid-message)
        fail(me, ": bootstrap collective #", seq_, ": lost the connection to the root (in ", root_host_, ": ", why,
             "); that process died?");
      fail(me, ": bootstrap collective #", seq_, ": the root (in ", root_host_, ") did not answer within ",
           timeout_ms_ + kClientGraceMs, " ms (", why, "): that process stopped, hung or is unreachable "
           "(MK_BOOTSTRAP_TIMEOUT_MS)");
    }
  };
  if (mine.size() > kMaxPayload - 2 - 0xffff) {  // the root would refuse it: every rank hears why at once
    const std::string why = cat(me, ": bootstrap collective #", seq_, ": this rank's data (", mine.size(),
                                " bytes) is over the bootstrap's limit of ", kMaxPayload - 2 - 0xffff,
                                " bytes a message");
    abort(why);
    fail(why);
  }
  std::string f = frame(kGather, rank_, world_, seq_, 0, gather_body(step, mine));
  from_root([&] { sock::send_all(fd_, f.data(), f.size(), dl); });
  FrameHeader h;
  if (!from_root([&] { return sock::recv_all(fd_, &h, sizeof(h), dl); }))
    fail(me, ": bootstrap root went away (", root_host_, " died?)");
  if (h.magic != kFrameMagic || h.len > kMaxPayload)
    fail(me, ": bootstrap collective #", seq_, ": a corrupt frame from the root (in ", root_host_, ")");
  std::string body(h.len, '\0');
  if (h.len) from_root([&] { return sock::recv_all(fd_, body.data(), h.len, dl); });
  if (h.type == kError) {
    finish_root();
    fail(me, ": ", body);
  }
  if (h.type != kResult || h.seq != seq_)
    fail(me, ": bootstrap collective #", seq_, ": unexpected frame ", h.type, " (collective #", h.seq,
         ") from the root");
  ++seq_;
  std::vector<std::string> out;
  size_t off = 0;
  for (int r = 0; r < world_; ++r) {
    uint64_t n = 0;
    if (sizeof(n) > body.size() - off) fail(me, ": bootstrap collective #", seq_ - 1, ": truncated result");
    std::memcpy(&n, body.data() + off, sizeof(n));
    off += sizeof(n);
    if (n > body.size() - off) fail(me, ": bootstrap collective #", seq_ - 1, ": truncated result");
    out.emplace_back(body.data() + off, n);
    off += n;
  }
  return out;
}

void Bootstrap::barrier(const char* step) { allgather(std::string(), step); }

std::string Bootstrap::broadcast(const std::string& data, int root, const char* step) {
  if (root < 0 || root >= world_) {  // (every rank hears it at once, not after the bound: abort first)
    const std::string why = cat("rank ", rank_, ": broadcast root ", root, " is outside [0, ", world_, ")");
    abort(why);
    fail(why);
  }
  return allgather(rank_ == root ? data : std::string(), step)[root];
}

void Bootstrap::close() { leave(kBye, ""); }

void Bootstrap::abort(const std::string& why) { leave(kAbort, why); }

void Bootstrap::leave(uint32_t type, const std::string& why) {
  if (fd_ >= 0) {
    try {
      std::string f = frame(static_cast<FrameType>(type), rank_, world_, seq_, 0, why);
      sock::send_all(fd_, f.data(), f.size(), sock::deadline_in_ms(1000));
    } catch (const Error&) {
    }
    sock::close_fd(fd_);
  }
  if (!root_) return;
  // The last local user of a root waits (bounded) until the root has served
  // every rank: exiting earlier could cut other ranks off mid-reply. Earlier
  // local users (several ranks in one process) must not wait, or closing them
  // one after another would stall.
  if (root_->drop_user() > 0) {
    root_->owner_closed();
    root_.reset();
  } else {
    wait_root();
  }
}

void Bootstrap::finish_root() {
  if (!root_) return;
  root_->drop_user();  // (an error: the root has ended the job; this user is done with it)
  wait_root();
}

void Bootstrap::wait_root() {
  root_->owner_closed();
  root_->host_waits();
  root_->join();
  std::lock_guard<std::mutex> g(registry().mu);
  for (auto it = registry().roots.begin(); it != registry().roots.end(); ++it)
    if (it->second == root_) {
      registry().roots.erase(it);
      break;
    }
  root_.reset();
}

Bootstrap::~Bootstrap() { close(); }

}  // namespace mk
