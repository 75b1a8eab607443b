// Who this process is within a distributed run, learned from the launcher's environment
// (torchrun, Slurm, Open MPI, MPICH/PMI, PMIx) and from the OS, for the trace file header.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gpuxray::inject {

// Looks up an environment variable; nullptr when it is not set. Tests pass their own.
using EnvironmentLookup = std::function<const char*(const char* name)>;

struct ProcessIdentity {
  std::string run_id;
  // The variable it came from, or "generated" when no launcher named the run.
  std::string run_id_source;
  int32_t rank = -1;
  int32_t local_rank = -1;
  int32_t world_size = 0;
  int32_t local_world_size = 0;
  // The variable the rank came from, e.g. "RANK" or "SLURM_PROCID".
  std::string rank_source;
  std::string hostname;
  uint32_t pid = 0;
  std::vector<std::string> command_line;
};

ProcessIdentity detectProcessIdentity(const EnvironmentLookup& environment);
// The real environment and OS.
ProcessIdentity detectProcessIdentity();

}  // namespace gpuxray::inject
