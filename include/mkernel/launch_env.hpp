// mkernel: ranks from the launchers users already have.
#pragma once

#include <optional>
#include <string>

#include "mkernel/knobs.hpp"

namespace mk {

struct LaunchInfo {
  std::string launcher;  // "torchrun" (also mkrun), "openmpi", "slurm"
  int rank = -1;
  int world = -1;
  int local_rank = -1;   // -1 when the launcher does not say
  int local_world = -1;  // -1 when the launcher does not say
  std::string root_addr; // bootstrap root
  int root_port = 0;
  std::string job_key;   // identifies the job (checked at rendezvous)
};

// Detects the launcher from the environment, in this order: torchrun/mkrun
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
// OpenMPI (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE), Slurm
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE,
// SLURM_STEP_NODELIST|SLURM_JOB_NODELIST, SLURM_JOB_ID). Returns nullopt when
// none is present; throws mk::Error on inconsistent or malformed values.
std::optional<LaunchInfo> detect_launch(const EnvLookup& env = process_env());

// First host of a Slurm hostlist ("gpu[003-007,010],login1" -> "gpu003").
std::string slurm_first_host(const std::string& nodelist);

}  // namespace mk
