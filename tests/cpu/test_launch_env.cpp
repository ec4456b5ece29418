#include <gtest/gtest.h>

#include <map>
#include <string>

#include "mkernel/launch_env.hpp"
#include "tests/cpu/env_map.hpp"

using namespace mk;
using mk::test::env_of;
using mk::test::expect_error;

TEST(LaunchEnv, NoLauncherMeansNullopt) { EXPECT_FALSE(detect_launch(env_of({{"PATH", "/bin"}})).has_value()); }

TEST(LaunchEnv, Torchrun) {
  auto li = detect_launch(env_of({{"RANK", "5"},
                                  {"WORLD_SIZE", "16"},
                                  {"LOCAL_RANK", "1"},
                                  {"LOCAL_WORLD_SIZE", "8"},
                                  {"MASTER_ADDR", "10.1.2.3"},
                                  {"MASTER_PORT", "29500"},
                                  {"TORCHELASTIC_RUN_ID", "job7"}}));
  ASSERT_TRUE(li);
  EXPECT_EQ(li->launcher, "torchrun");
  EXPECT_EQ(li->rank, 5);
  EXPECT_EQ(li->world, 16);
  EXPECT_EQ(li->local_rank, 1);
  EXPECT_EQ(li->local_world, 8);
  EXPECT_EQ(li->root_addr, "10.1.2.3");
  EXPECT_EQ(li->root_port, 29501);  // MASTER_PORT belongs to torch's store
  EXPECT_EQ(li->job_key, "job7/29500");
}

// torchrun's default run id is "none" for every job: the store's port keeps two jobs of one host apart. What
// differs between the nodes of one job (the spelling of MASTER_ADDR, each agent's own restart count) does not.
TEST(LaunchEnv, TorchrunJobsWithTheDefaultRunIdDiffer) {
  auto job = [](const char* addr, const char* port, const char* restart) {
    return detect_launch(env_of({{"RANK", "0"},
                                 {"WORLD_SIZE", "2"},
                                 {"MASTER_ADDR", addr},
                                 {"MASTER_PORT", port},
                                 {"TORCHELASTIC_RUN_ID", "none"},
                                 {"TORCHELASTIC_RESTART_COUNT", restart}}))
        ->job_key;
  };
  EXPECT_NE(job("h", "29500", "0"), job("h", "29600", "0"));
  EXPECT_EQ(job("h", "29500", "0"), job("10.0.0.1", "29500", "1"));
}

// A parallel launch mkernel does not read is an error, not N processes each alone as rank 0 of 1.
TEST(LaunchEnv, AnUnreadParallelLauncherIsAnError) {
  EXPECT_EQ(expect_error([] { detect_launch(env_of({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}})); },
                         {"one of 2", "RANK, WORLD_SIZE"}),
            "");
  EXPECT_FALSE(detect_launch(env_of({{"PMI_RANK", "0"}, {"PMI_SIZE", "1"}})).has_value());  // one process
}

TEST(LaunchEnv, KnobsOverrideMasterAddrAndPort) {
  auto li = detect_launch(env_of({{"RANK", "0"},
                                  {"WORLD_SIZE", "2"},
                                  {"MASTER_ADDR", "10.1.2.3"},
                                  {"MASTER_PORT", "29500"},
                                  {"MK_BOOTSTRAP_ADDR", "node0"},
                                  {"MK_BOOTSTRAP_PORT", "4000"}}));
  ASSERT_TRUE(li);
  EXPECT_EQ(li->root_addr, "node0");
  EXPECT_EQ(li->root_port, 4000);
}

// MASTER_PORT+1 where the store's port is below Linux's ephemeral range; from it on (torchrun --standalone picks a
// free port there) MASTER_PORT+1 may be held by an outgoing connection of the host, so the port is derived from
// the job below that range, the same on every rank of the job.
TEST(LaunchEnv, TorchrunStorePortInTheEphemeralRangeDerivesTheBootstrapPort) {
  auto port = [](const char* rank, const char* master_port, const char* run_id) {
    auto li = detect_launch(env_of({{"RANK", rank},
                                    {"WORLD_SIZE", "2"},
                                    {"MASTER_ADDR", "127.0.0.1"},
                                    {"MASTER_PORT", master_port},
                                    {"TORCHELASTIC_RUN_ID", run_id}}));
    return li ? li->root_port : -1;
  };
  EXPECT_EQ(port("0", "32766", "none"), 32767);
  for (const char* mp : {"32767", "45123", "65535"}) {
    const int p = port("0", mp, "none");
    EXPECT_GE(p, 20000) << mp;
    EXPECT_LT(p, 32768) << mp;
    EXPECT_EQ(port("1", mp, "none"), p) << mp;  // every rank alike
  }
  EXPECT_NE(port("0", "45123", "none"), port("0", "45124", "none"));  // two stores' jobs apart (this pair)
}

TEST(LaunchEnv, TorchrunWithoutMasterIsAnError) {
  EXPECT_EQ(expect_error([] { detect_launch(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}})); },
                         {"MASTER_ADDR"}),
            "");
  EXPECT_EQ(expect_error([] { detect_launch(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}})); },
                         {"MASTER_PORT"}),
            "");
}

TEST(LaunchEnv, SingleRankNeedsNothing) {
  auto li = detect_launch(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}}));
  ASSERT_TRUE(li);
  EXPECT_EQ(li->world, 1);
}

TEST(LaunchEnv, OpenMpiSingleNode) {
  auto li = detect_launch(env_of({{"OMPI_COMM_WORLD_RANK", "3"},
                                  {"OMPI_COMM_WORLD_SIZE", "4"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                  {"OMPI_MCA_ess_base_jobid", "12345"}}));
  ASSERT_TRUE(li);
  EXPECT_EQ(li->launcher, "openmpi");
  EXPECT_EQ(li->rank, 3);
  EXPECT_EQ(li->local_rank, 3);
  EXPECT_EQ(li->root_addr, "127.0.0.1");
  EXPECT_GE(li->root_port, 20000);
  EXPECT_LT(li->root_port, 40000);
  // Same job, same port on every rank.
  auto li0 = detect_launch(env_of({{"OMPI_COMM_WORLD_RANK", "0"},
                                   {"OMPI_COMM_WORLD_SIZE", "4"},
                                   {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                   {"OMPI_MCA_ess_base_jobid", "12345"}}));
  EXPECT_EQ(li0->root_port, li->root_port);
}

TEST(LaunchEnv, OpenMpiAcrossHostsNeedsAnAddress) {
  EXPECT_EQ(expect_error(
                [] {
                  detect_launch(env_of({{"OMPI_COMM_WORLD_RANK", "0"},
                                        {"OMPI_COMM_WORLD_SIZE", "4"},
                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                        {"OMPI_MCA_ess_base_jobid", "1"}}));
                },
                {"MK_BOOTSTRAP_ADDR"}),
            "");
}

TEST(LaunchEnv, Slurm) {
  auto li = detect_launch(env_of({{"SLURM_PROCID", "9"},
                                  {"SLURM_NTASKS", "16"},
                                  {"SLURM_LOCALID", "1"},
                                  {"SLURM_TASKS_PER_NODE", "8(x2)"},
                                  {"SLURM_STEP_NODELIST", "gpu-[007-008,010],login"},
                                  {"SLURM_JOB_ID", "4242"},
                                  {"SLURM_STEP_ID", "0"}}));
  ASSERT_TRUE(li);
  EXPECT_EQ(li->launcher, "slurm");
  EXPECT_EQ(li->rank, 9);
  EXPECT_EQ(li->world, 16);
  EXPECT_EQ(li->local_rank, 1);
  EXPECT_EQ(li->local_world, 8);
  EXPECT_EQ(li->root_addr, "gpu-007");
  EXPECT_GE(li->root_port, 20000);
}

// Nodes with different task counts ("2,4"): a local rank beyond the first node's count is not an error.
TEST(LaunchEnv, SlurmNodesWithDifferentTaskCounts) {
  auto li = detect_launch(env_of({{"SLURM_PROCID", "5"},
                                  {"SLURM_NTASKS", "6"},
                                  {"SLURM_LOCALID", "3"},
                                  {"SLURM_TASKS_PER_NODE", "2,4"},
                                  {"SLURM_STEP_NODELIST", "n[1-2]"},
                                  {"SLURM_JOB_ID", "1"},
                                  {"SLURM_STEP_ID", "0"}}));
  ASSERT_TRUE(li);
  EXPECT_EQ(li->local_rank, 3);
  EXPECT_EQ(li->local_world, -1);  // not known
  auto same = detect_launch(env_of({{"SLURM_PROCID", "5"},
                                    {"SLURM_NTASKS", "8"},
                                    {"SLURM_LOCALID", "1"},
                                    {"SLURM_TASKS_PER_NODE", "4(x2)"},
                                    {"SLURM_STEP_NODELIST", "n[1-2]"},
                                    {"SLURM_JOB_ID", "1"},
                                    {"SLURM_STEP_ID", "0"}}));
  EXPECT_EQ(same->local_world, 4);
  auto mixed = detect_launch(env_of({{"SLURM_PROCID", "0"},
                                     {"SLURM_NTASKS", "11"},
                                     {"SLURM_LOCALID", "0"},
                                     {"SLURM_TASKS_PER_NODE", "4(x2),3"},
                                     {"SLURM_STEP_NODELIST", "n[1-3]"},
                                     {"SLURM_JOB_ID", "1"},
                                     {"SLURM_STEP_ID", "0"}}));
  EXPECT_EQ(mixed->local_world, -1);
}

TEST(LaunchEnv, SlurmHostlists) {
  EXPECT_EQ(slurm_first_host("node1"), "node1");
  EXPECT_EQ(slurm_first_host("node1,node2"), "node1");
  EXPECT_EQ(slurm_first_host("a[1-4]"), "a1");
  EXPECT_EQ(slurm_first_host("rack[3,5-7]-gpu"), "rack3-gpu");
  EXPECT_EQ(slurm_first_host("x[01-02],y[5]"), "x01");
  EXPECT_EQ(slurm_first_host("rack[1-2]-gpu[01-04]"), "rack1-gpu01");  // every bracket range
  EXPECT_EQ(slurm_first_host("r[7]-n[3,5]-ib"), "r7-n3-ib");
  EXPECT_EQ(expect_error([] { slurm_first_host("a[]"); }, {"malformed"}), "");
  EXPECT_EQ(expect_error([] { slurm_first_host("a[1-4"); }, {"malformed"}), "");
  for (const char* bad : {"a]b,c", "a[1]]", "a[[1]]", "]a"})  // (before 2026-12-06 "a]b,c" gave host "a]b,c")
    EXPECT_EQ(expect_error([&] { slurm_first_host(bad); }, {"malformed Slurm nodelist", "brackets"}), "") << bad;
}

// RANK / WORLD_SIZE left in the environment from another launch, under mpirun or srun: an error naming both,
// not every process going on alone as rank 0 of 1.
TEST(LaunchEnv, LeftOverTorchrunVariablesUnderAnotherLauncherAreAnError) {
  EXPECT_EQ(expect_error(
                [] {
                  detect_launch(env_of({{"RANK", "0"},
                                        {"WORLD_SIZE", "1"},
                                        {"OMPI_COMM_WORLD_RANK", "2"},
                                        {"OMPI_COMM_WORLD_SIZE", "4"}}));
                },
                {"OMPI_COMM_WORLD_SIZE=4", "left over"}),
            "");
  EXPECT_EQ(expect_error(
                [] {
                  detect_launch(env_of({{"RANK", "0"},
                                        {"WORLD_SIZE", "1"},
                                        {"SLURM_PROCID", "1"},
                                        {"SLURM_NTASKS", "2"},
                                        {"SLURM_STEP_NUM_TASKS", "2"}}));
                },
                {"SLURM_STEP_NUM_TASKS=2", "left over"}),
            "");
  // torchrun --standalone in each task of a 4-task srun step: a job of its own per task (its agent sets
  // TORCHELASTIC_RUN_ID), not left-over variables.
  auto own = detect_launch(env_of({{"RANK", "0"},
                                   {"WORLD_SIZE", "1"},
                                   {"TORCHELASTIC_RUN_ID", "a1b2"},
                                   {"SLURM_PROCID", "3"},
                                   {"SLURM_NTASKS", "4"},
                                   {"SLURM_STEP_NUM_TASKS", "4"}}));
  ASSERT_TRUE(own);
  EXPECT_EQ(own->world, 1);
  // torchrun started by srun on 2 nodes, 4 processes each: WORLD_SIZE 8 >= the step's 2 tasks.
  auto li = detect_launch(env_of({{"RANK", "5"},
                                  {"WORLD_SIZE", "8"},
                                  {"MASTER_ADDR", "h"},
                                  {"MASTER_PORT", "29500"},
                                  {"SLURM_PROCID", "1"},
                                  {"SLURM_NTASKS", "2"},
                                  {"SLURM_STEP_NUM_TASKS", "2"}}));
  ASSERT_TRUE(li);
  EXPECT_EQ(li->launcher, "torchrun");
  EXPECT_EQ(li->world, 8);
}

// RANK unlike the launcher's rank with the step's size (a batch script's `export RANK=$SLURM_PROCID
// WORLD_SIZE=$SLURM_NTASKS` before srun sets it once for every task, or a deliberate reordering): a warning naming
// both ranks (before 2026-12-06 nothing: every process claimed rank 0, one failed on a port 'in use' without a
// word of RANK). Set per task, they agree, without a word; tools/mkrun run once per task (MKRUN_RUN_ID) starts a
// job of its own, as torchrun, whose ranks are not the step's.
TEST(LaunchEnv, RankUnlikeTheLaunchersIsWarnedAbout) {
  const auto step = [](const char* rank, const char* procid, const char* tasks, const char* mkrun_id = nullptr) {
    std::map<std::string, std::string> m{{"RANK", rank},         {"WORLD_SIZE", "2"},
                                         {"MASTER_ADDR", "h"},   {"MASTER_PORT", "29500"},
                                         {"SLURM_PROCID", procid}, {"SLURM_NTASKS", tasks},
                                         {"SLURM_STEP_NUM_TASKS", tasks}};
    if (mkrun_id) m["MKRUN_RUN_ID"] = mkrun_id;
    return env_of(m);
  };
  const auto said_by = [](const EnvLookup& env, int64_t* rank) {
    testing::internal::CaptureStderr();
    auto li = detect_launch(env);
    const std::string said = testing::internal::GetCapturedStderr();
    *rank = li ? li->rank : -1;
    return said;
  };
  int64_t rank = -1;
  std::string said = said_by(step("0", "1", "2"), &rank);
  EXPECT_EQ(rank, 0);  // (taken: a reordering is the user's to make)
  EXPECT_NE(said.find("RANK=0 but SLURM_PROCID=1 (of SLURM_STEP_NUM_TASKS=2)"), std::string::npos) << said;
  EXPECT_NE(said.find("every process claims one rank"), std::string::npos) << said;
  said = said_by(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"},
                         {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}),
                 &rank);
  EXPECT_NE(said.find("RANK=0 but OMPI_COMM_WORLD_RANK=1 (of OMPI_COMM_WORLD_SIZE=2)"), std::string::npos) << said;
  EXPECT_EQ(said_by(step("1", "1", "2"), &rank), "");
  EXPECT_EQ(rank, 1);
  // mkrun -n 2 in each task of a 4-task step (srun -N4 --ntasks-per-node=1 tools/mkrun -n 2 ...): its ranks'
  // RANK/WORLD_SIZE are its own job's.
  for (const char* tasks : {"2", "4"}) {
    testing::internal::CaptureStderr();
    auto own = detect_launch(step("0", "1", tasks, "123-29500"));
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << tasks;
    ASSERT_TRUE(own) << tasks;
    EXPECT_EQ(own->rank, 0);
    EXPECT_EQ(own->world, 2);
  }
}

// A batch script's own process (sbatch --ntasks=8, no srun) is one process, not rank 0 of 8.
TEST(LaunchEnv, SlurmWithoutSrunIsAnError) {
  EXPECT_EQ(expect_error(
                [] {
                  detect_launch(env_of({{"SLURM_PROCID", "0"},
                                        {"SLURM_NTASKS", "8"},
                                        {"SLURM_JOB_ID", "77"},
                                        {"SLURM_JOB_NODELIST", "n[1-2]"}}));
                },
                {"SLURM_NTASKS=8", "not started by srun"}),
            "");
  auto one = detect_launch(env_of(
      {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_JOB_ID", "77"}, {"SLURM_JOB_NODELIST", "n1"}}));
  ASSERT_TRUE(one);
  EXPECT_EQ(one->world, 1);
}

// Derived ports stay below Linux's ephemeral range (32768 on), where outgoing connections take theirs.
TEST(LaunchEnv, DerivedPortsStayBelowTheEphemeralRange) {
  for (int job = 0; job < 2000; ++job) {
    auto li = detect_launch(env_of({{"OMPI_COMM_WORLD_RANK", "0"},
                                    {"OMPI_COMM_WORLD_SIZE", "2"},
                                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                    {"OMPI_MCA_ess_base_jobid", std::to_string(job)}}));
    ASSERT_TRUE(li);
    ASSERT_GE(li->root_port, 20000) << job;
    ASSERT_LT(li->root_port, 32768) << job;
  }
}

TEST(LaunchEnv, TorchrunTakesPrecedence) {
  auto li = detect_launch(env_of({{"RANK", "1"},
                                  {"WORLD_SIZE", "2"},
                                  {"MASTER_ADDR", "h"},
                                  {"MASTER_PORT", "100"},
                                  {"SLURM_PROCID", "0"},
                                  {"SLURM_NTASKS", "1"}}));
  EXPECT_EQ(li->launcher, "torchrun");
}

TEST(LaunchEnv, MalformedValuesAreErrors) {
  EXPECT_EQ(expect_error([] { detect_launch(env_of({{"RANK", "one"}, {"WORLD_SIZE", "2"}})); },
                         {"RANK", "'one'"}),
            "");
  EXPECT_EQ(expect_error(
                [] {
                  detect_launch(env_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}));
                },
                {"rank 2", "outside [0, 2)"}),
            "");
  EXPECT_EQ(expect_error(
                [] {
                  detect_launch(env_of({{"RANK", "0"},
                                        {"WORLD_SIZE", "2"},
                                        {"LOCAL_RANK", "3"},
                                        {"LOCAL_WORLD_SIZE", "2"},
                                        {"MASTER_ADDR", "h"},
                                        {"MASTER_PORT", "1"}}));
                },
                {"local rank 3"}),
            "");
  EXPECT_EQ(expect_error([] { detect_launch(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "x"}})); },
                         {"SLURM_NTASKS"}),
            "");
  for (const char* rank : {" 1", "+1", "1 ", "-0"})  // digits only, as a launcher writes them
    EXPECT_EQ(expect_error([&] { detect_launch(env_of({{"RANK", rank}, {"WORLD_SIZE", "2"}})); },
                           {"launcher variable RANK='", "is not a non-negative integer"}),
              "")
        << "RANK='" << rank << "'";
  EXPECT_EQ(expect_error(
                [] {
                  detect_launch(
                      env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}));
                },
                {"MASTER_PORT=70000 is not a TCP port"}),
            "");
}

// A Slurm step's variables: a task of job 7, step 3, on n1, with `vars` added or replacing these.
namespace {
EnvLookup slurm_env(std::map<std::string, std::string> vars) {
  vars.insert({{"SLURM_STEP_NODELIST", "n1"}, {"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", "3"}});
  return env_of(std::move(vars));
}
}  // namespace

// srun -E (--preserve-env) keeps the job's SLURM_NTASKS / SLURM_TASKS_PER_NODE from sbatch: the step's own
// variables give the world and the layout (before 2026-12-06: world 8 for a 2-task step, rank 0 waited for 6 ranks
// that never start). A stale requested count (SLURM_NTASKS_PER_NODE) does not win over the layout either.
TEST(LaunchEnv, SlurmStepVariablesWinOverTheJobs) {
  auto li = detect_launch(slurm_env({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "8"}, {"SLURM_STEP_NUM_TASKS", "2"},
                                     {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS_PER_NODE", "8"},
                                     {"SLURM_TASKS_PER_NODE", "8"}, {"SLURM_STEP_TASKS_PER_NODE", "2"}}));
  ASSERT_TRUE(li);
  EXPECT_EQ(li->world, 2);
  EXPECT_EQ(li->local_world, 2);
  auto stale = detect_launch(slurm_env({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "3"},
                                        {"SLURM_NTASKS_PER_NODE", "2"}, {"SLURM_TASKS_PER_NODE", "4"}}));
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->local_world, 4);
  for (const char* junk : {"1x", "4(x2", "4(2)", "4(x)", "4,,"}) {
    auto li2 = detect_launch(slurm_env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"},
                                        {"SLURM_TASKS_PER_NODE", junk}}));
    ASSERT_TRUE(li2);
    EXPECT_EQ(li2->local_world, -1) << junk << ": malformed, so not known";
  }
}

// MPICH / Intel MPI under Slurm start their per-node proxies with srun: a rank sees the proxy step's Slurm
// variables, which do not match the MPI job's size.
TEST(LaunchEnv, AnMpiLauncherThroughSrunIsAnError) {
  EXPECT_EQ(expect_error(
                [] {
                  detect_launch(slurm_env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"PMI_SIZE", "16"}}));
                },
                {"one of 16", "its Slurm step has 2 tasks"}),
            "");
  // srun --mpi=pmi2: the sizes agree
  auto direct = detect_launch(slurm_env({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"PMI_SIZE", "2"}}));
  ASSERT_TRUE(direct);
  EXPECT_EQ(direct->world, 2);
}

// Half of torchrun's pair: each process would go on alone as rank 0 of 1. RANK=0 alone is one process.
TEST(LaunchEnv, RankWithoutWorldSizeOrTheReverseIsAnError) {
  EXPECT_EQ(expect_error([] { detect_launch(env_of({{"RANK", "3"}})); }, {"RANK=3 is set without WORLD_SIZE"}), "");
  EXPECT_EQ(expect_error([] { detect_launch(env_of({{"WORLD_SIZE", "4"}})); },
                         {"WORLD_SIZE=4 is set without RANK"}),
            "");
  EXPECT_FALSE(detect_launch(env_of({{"RANK", "0"}})).has_value());
  EXPECT_FALSE(detect_launch(env_of({{"WORLD_SIZE", "1"}})).has_value());
}

// MASTER_PORT is read only where a launcher was found, and a single rank needs no port.
TEST(LaunchEnv, AStrayMasterPortFailsNothing) {
  EXPECT_FALSE(detect_launch(env_of({{"MASTER_PORT", "abc"}})).has_value());
  auto one = detect_launch(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "0"}}));
  ASSERT_TRUE(one);
  EXPECT_EQ(one->world, 1);
}
