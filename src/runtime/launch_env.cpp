#include "mkernel/launch_env.hpp"

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <optional>
#include <utility>

#include "mkernel/error.hpp"

namespace mk {

namespace {

std::optional<int> get_int(const EnvLookup& env, const char* name, bool required) {
  auto v = env(name);
  if (!v || v->empty()) {
    if (required) fail("launcher variable ", name, " is not set");
    return std::nullopt;
  }
  errno = 0;
  char* end = nullptr;
  long x = std::strtol(v->c_str(), &end, 10);
  // digits only: strtol alone also takes leading spaces and a sign (" 1", "+1"), which no launcher writes
  const bool digits = (*v)[0] >= '0' && (*v)[0] <= '9';
  if (!digits || errno != 0 || end == v->c_str() || *end != '\0' || x < 0 || x > (1 << 30))
    fail("launcher variable ", name, "='", *v, "' is not a non-negative integer");
  return static_cast<int>(x);
}

std::string get_str(const EnvLookup& env, const char* name) {
  auto v = env(name);
  return v ? *v : std::string();
}

// Slurm's SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE / SLURM_NTASKS_PER_NODE look like "4" or
// "4(x2),3": the ranks per node when every node has as many; none when the
// counts differ ("2,4": a node's count is not known from these alone) or the value is malformed. The step's
// layout first: the job's (srun -E keeps it from sbatch) and the requested count may differ from the step's.
std::optional<int> slurm_tasks_per_node(const EnvLookup& env) {
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE"}) {
    auto v = env(name);
    if (!v || v->empty()) continue;
    long first = -1;
    const char* p = v->c_str();
    for (;;) {
      char* end = nullptr;
      const long x = std::strtol(p, &end, 10);
      if (end == p || x <= 0) return std::nullopt;  // malformed: not known
      if (first < 0) first = x;
      if (x != first) return std::nullopt;
      p = end;
      if (*p == '(') {  // "(xN)": the count repeats N times
        if (p[1] != 'x') return std::nullopt;
        char* rep_end = nullptr;
        const long n = std::strtol(p + 2, &rep_end, 10);
        if (rep_end == p + 2 || n <= 0 || *rep_end != ')') return std::nullopt;
        p = rep_end + 1;
      }
      if (*p == 0) break;
      if (*p != ',') return std::nullopt;  // trailing junk ("1x"): malformed
      ++p;
    }
    return static_cast<int>(first);
  }
  return std::nullopt;
}

// Ranks of a launch mkernel does not read (MPICH, Intel MPI, MVAPICH: PMI):
// more than one means the job is parallel, and each process would otherwise
// go on alone as rank 0 of 1.
std::optional<int> pmi_world(const EnvLookup& env) {
  for (const char* name : {"PMI_SIZE", "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"})
    if (auto v = env(name); v && !v->empty()) {
      char* end = nullptr;
      const long x = std::strtol(v->c_str(), &end, 10);
      if (end != v->c_str() && x > 1) return static_cast<int>(x);
    }
  return std::nullopt;
}

constexpr int64_t kEphemeralPortStart = 32768;  // Linux's default net.ipv4.ip_local_port_range starts here

int port_from_job(const std::string& job) {
  // Stable across ranks of one job, spread over [20000, 32767): below Linux's default ephemeral range
  // (net.ipv4.ip_local_port_range starts at 32768), whose ports any outgoing connection may hold, and never 32767,
  // a torchrun store's port from which this port is derived (MASTER_PORT+1 would be 32768).
  return 20000 + static_cast<int>(std::hash<std::string>{}(job) % 12767);
}

// The size another launcher's variables give this job, and this process's rank there (-1: not set), when it has
// them (a check of RANK / WORLD_SIZE).
struct OtherLauncher {
  const char* size_name;
  int64_t size;
  const char* rank_name;
  int64_t rank;
};
std::optional<OtherLauncher> other_launcher(const EnvLookup& env) {
  const auto number = [&](const char* name) -> std::optional<int64_t> {
    if (auto v = env(name); v && !v->empty()) {
      char* end = nullptr;
      const long long x = std::strtoll(v->c_str(), &end, 10);
      if (end != v->c_str() && *end == 0) return static_cast<int64_t>(x);
    }
    return std::nullopt;
  };
  for (auto [size_name, rank_name] : {std::pair{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
                                      std::pair{"SLURM_STEP_NUM_TASKS", "SLURM_PROCID"}})
    if (auto size = number(size_name))
      return OtherLauncher{size_name, *size, rank_name, number(rank_name).value_or(-1)};
  return std::nullopt;
}

void check_ranks(const LaunchInfo& li) {
  if (li.world < 1) fail(li.launcher, ": world size ", li.world, " must be >= 1");
  if (li.rank < 0 || li.rank >= li.world)
    fail(li.launcher, ": rank ", li.rank, " is outside [0, ", li.world, ")");
  if (li.local_world == 0 || li.local_world > li.world)
    fail(li.launcher, ": local world size ", li.local_world, " is not in [1, ", li.world, "]");
  if (li.local_rank >= 0 && li.local_world > 0 && li.local_rank >= li.local_world)
    fail(li.launcher, ": local rank ", li.local_rank, " is outside [0, ", li.local_world, ")");
}

}  // namespace

std::string slurm_first_host(const std::string& nodelist) {
  // Cut at the first top-level comma, then take the first value of every bracket range
  // ("rack[1-2]-gpu[01-04]" -> "rack1-gpu01").
  int depth = 0;
  size_t end = nodelist.size();
  for (size_t i = 0; i < nodelist.size(); ++i) {
    char c = nodelist[i];
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) fail("malformed Slurm nodelist '", nodelist, "' (unbalanced or nested brackets)");
    if (c == ',' && depth == 0) {
      end = i;
      break;
    }
  }
  std::string first = nodelist.substr(0, end), host;
  for (size_t pos = 0; pos < first.size();) {
    const size_t lb = first.find('[', pos);
    if (lb == std::string::npos) {
      host += first.substr(pos);
      break;
    }
    const size_t rb = first.find(']', lb);
    if (rb == std::string::npos || rb == lb + 1) fail("malformed Slurm nodelist '", nodelist, "'");
    const std::string inner = first.substr(lb + 1, rb - lb - 1);
    host += first.substr(pos, lb - pos) + inner.substr(0, inner.find_first_of(",-"));
    pos = rb + 1;
  }
  return host;
}

std::optional<LaunchInfo> detect_launch(const EnvLookup& env) {
  LaunchInfo li;
  int64_t port_knob = knob_int(Knob::MK_BOOTSTRAP_PORT, env);
  std::string addr_knob = knob_str(Knob::MK_BOOTSTRAP_ADDR, env);
  std::string master_addr = get_str(env, "MASTER_ADDR");
  // MASTER_PORT is read where a launcher was found (a stray one without a launcher fails nothing).
  std::optional<int> master_port;
  const auto read_master_port = [&] { master_port = get_int(env, "MASTER_PORT", false); };

  // RANK without WORLD_SIZE, or WORLD_SIZE > 1 without RANK: a hand-made launch missing half of its variables,
  // whose processes would each go on alone as rank 0 of 1 (RANK=0 alone is one process, as without either).
  if (env("RANK") && !env("WORLD_SIZE") && get_str(env, "RANK") != "0" && !get_str(env, "RANK").empty())
    fail("RANK=", get_str(env, "RANK"), " is set without WORLD_SIZE: set both for every process (torchrun does), "
         "or neither");
  if (!env("RANK") && env("WORLD_SIZE") && get_int(env, "WORLD_SIZE", false).value_or(1) > 1)
    fail("WORLD_SIZE=", get_str(env, "WORLD_SIZE"), " is set without RANK: set both for every process "
         "(torchrun does), or neither");

  if (env("RANK") && env("WORLD_SIZE")) {
    read_master_port();
    li.launcher = "torchrun";
    li.rank = *get_int(env, "RANK", true);
    li.world = *get_int(env, "WORLD_SIZE", true);
    // torchrun under mpirun / srun starts WORLD_SIZE >= the launcher's processes; fewer, without a launcher of
    // its own in each task (torchrun's agent, TORCHELASTIC_RUN_ID, or tools/mkrun, MKRUN_RUN_ID: each may run a
    // job of its own per task, e.g. --standalone), means RANK and WORLD_SIZE were left over in the environment,
    // and each process would go on alone. As many, with another rank than the launcher's, may mean they were
    // set once for every task (`export RANK=$SLURM_PROCID` in a batch script, before srun: every process then
    // claims one rank), or a deliberate reordering (RANK from SLURM_NODEID and SLURM_LOCALID under a cyclic
    // distribution, which mkernel takes): a warning, not an error. Two processes claiming one rank then fail in
    // the bootstrap (the root's port in use on one host, "already joined" across hosts).
    if (auto o = other_launcher(env); o && !env("TORCHELASTIC_RUN_ID") && !env("MKRUN_RUN_ID")) {
      if (o->size > li.world)
        fail("RANK/WORLD_SIZE say rank ", li.rank, " of ", li.world, " but ", o->size_name, "=", o->size,
             ": RANK and WORLD_SIZE are left over from another launch (unset them), or set them for every "
             "process of this one");
      if (o->size == li.world && o->rank >= 0 && o->rank != li.rank)
        log(LogLevel::Warn,
            cat("warning: RANK=", li.rank, " but ", o->rank_name, "=", o->rank, " (of ", o->size_name, "=", o->size,
                "): if RANK was set once for every process (e.g. exported in a batch script before srun / "
                "mpirun) or left over from another launch, every process claims one rank; set it in each "
                "process from its own launcher's rank, or unset RANK and WORLD_SIZE (mkernel reads ",
                o->rank_name, " itself). A deliberate reordering may ignore this."));
    }
    li.local_rank = get_int(env, "LOCAL_RANK", false).value_or(-1);
    li.local_world = get_int(env, "LOCAL_WORLD_SIZE", false).value_or(-1);
    if (li.world > 1 && master_addr.empty() && addr_knob.empty())
      fail("torchrun-style launch (RANK/WORLD_SIZE set) without MASTER_ADDR or MK_BOOTSTRAP_ADDR");
    if (li.world > 1 && !master_port && port_knob == 0)
      fail("torchrun-style launch (RANK/WORLD_SIZE set) without MASTER_PORT or MK_BOOTSTRAP_PORT");
    // TORCHELASTIC_RUN_ID is "none" unless --rdzv-id is given: the store's
    // port tells two jobs of one host apart. NOTES: not MASTER_ADDR (with
    // static rendezvous each node may spell the host differently) nor
    // TORCHELASTIC_RESTART_COUNT (each node's agent counts its own restarts):
    // every rank of the job must compute the same key.
    li.job_key = get_str(env, "TORCHELASTIC_RUN_ID");
    if (li.world > 1 && master_port) li.job_key += "/" + std::to_string(*master_port);
  } else if (env("OMPI_COMM_WORLD_RANK") && env("OMPI_COMM_WORLD_SIZE")) {
    read_master_port();
    li.launcher = "openmpi";
    li.rank = *get_int(env, "OMPI_COMM_WORLD_RANK", true);
    li.world = *get_int(env, "OMPI_COMM_WORLD_SIZE", true);
    li.local_rank = get_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", false).value_or(-1);
    li.local_world = get_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", false).value_or(-1);
    li.job_key = get_str(env, "OMPI_MCA_ess_base_jobid");
    if (li.job_key.empty()) li.job_key = get_str(env, "PMIX_NAMESPACE");
    if (master_addr.empty() && addr_knob.empty()) {
      if (li.local_world == li.world)
        master_addr = "127.0.0.1";
      else
        fail("OpenMPI launch across hosts: set MK_BOOTSTRAP_ADDR (or MASTER_ADDR) to the host of rank 0");
    }
  } else if (env("SLURM_PROCID") && (env("SLURM_STEP_NUM_TASKS") || env("SLURM_NTASKS"))) {
    read_master_port();
    li.launcher = "slurm";
    li.rank = *get_int(env, "SLURM_PROCID", true);
    // The step's task count: srun -E (--preserve-env) keeps the job's SLURM_NTASKS from sbatch.
    li.world = *get_int(env, env("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS", true);
    // MPICH / Intel MPI under Slurm (Hydra) start one proxy per node with srun: their ranks see the proxy
    // step's Slurm variables (the node's index and count), and every rank of a node would claim one rank.
    if (auto w = pmi_world(env); w && *w != li.world)
      fail("this process is one of ", *w, " (PMI_SIZE / MV2_COMM_WORLD_SIZE / MPI_LOCALNRANKS) but its Slurm "
           "step has ", li.world, " tasks: an MPI launcher mkernel does not read (MPICH, Intel MPI, MVAPICH) "
           "started it through srun; set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT for each process, or "
           "launch with srun (one task per rank), torchrun or OpenMPI's mpirun");
    // A batch script's own process (sbatch --ntasks=N, no srun) sees the job's task count but is one
    // process: it would wait for N - 1 ranks that never start. srun sets the step's variables.
    if (li.world > 1 && !env("SLURM_STEP_ID") && !env("SLURM_STEP_NUM_TASKS") && !env("SLURM_STEP_NODELIST"))
      fail("SLURM_NTASKS=", li.world, " but this process was not started by srun (no SLURM_STEP_ID / "
           "SLURM_STEP_NUM_TASKS): run it with srun (one process per task), or as one rank with "
           "SLURM_NTASKS unset");
    li.local_rank = get_int(env, "SLURM_LOCALID", false).value_or(-1);
    li.local_world = slurm_tasks_per_node(env).value_or(-1);
    if (li.local_world > li.world) li.local_world = li.world;
    li.job_key = get_str(env, "SLURM_JOB_ID") + "." + get_str(env, "SLURM_STEP_ID");
    if (master_addr.empty() && addr_knob.empty()) {
      std::string nl = get_str(env, "SLURM_STEP_NODELIST");
      if (nl.empty()) nl = get_str(env, "SLURM_JOB_NODELIST");
      if (nl.empty()) fail("Slurm launch without SLURM_STEP_NODELIST/SLURM_JOB_NODELIST: set MK_BOOTSTRAP_ADDR");
      master_addr = slurm_first_host(nl);
    }
  } else {
    if (auto w = pmi_world(env))
      fail("this process is one of ", *w, " started by a launcher mkernel does not read (PMI_SIZE / "
           "MV2_COMM_WORLD_SIZE / MPI_LOCALNRANKS: MPICH, Intel MPI, MVAPICH); set RANK, WORLD_SIZE, MASTER_ADDR "
           "and MASTER_PORT for each process, or launch with torchrun, OpenMPI's mpirun or srun");
    return std::nullopt;
  }
  check_ranks(li);

  li.root_addr = !addr_knob.empty() ? addr_knob : !master_addr.empty() ? master_addr : "127.0.0.1";
  if (port_knob != 0) {
    li.root_port = static_cast<int>(port_knob);
  } else if (li.world > 1 && master_port && (*master_port < 1 || *master_port > 65535)) {
    fail("MASTER_PORT=", *master_port, " is not a TCP port (1..65535)");
  } else if (master_port && *master_port + 1 < kEphemeralPortStart) {
    li.root_port = *master_port + 1;  // torchrun's TCPStore already listens on MASTER_PORT
  } else if (master_port) {
    // A store port in the ephemeral range (torchrun --standalone picks a free one there): MASTER_PORT+1 may be
    // held by an outgoing connection of this host (the store clients' own), so the port comes from the job, below
    // that range, as the Slurm / OpenMPI ports do.
    li.root_port = port_from_job(li.job_key.empty() ? cat(master_addr, ":", *master_port) : li.job_key);
  } else if (!li.job_key.empty() && li.job_key != ".") {
    li.root_port = port_from_job(li.job_key);
  } else if (li.world == 1) {
    li.root_port = 0;  // a single rank needs no root
  } else {
    fail(li.launcher, " launch: cannot derive a bootstrap port; set MK_BOOTSTRAP_PORT");
  }
  if (li.job_key.empty()) li.job_key = li.root_addr + ":" + std::to_string(li.root_port);
  return li;
}

}  // namespace mk
