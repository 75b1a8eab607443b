#include "inject/process_identity.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <string_view>

namespace gpuxray::inject {
namespace {

// Launchers and the variables they set, most specific first. GPUXRAY_* lets users override.
struct RankVariables {
  const char* rank;
  const char* local_rank;
  const char* world_size;
  const char* local_world_size;
};

constexpr std::array<RankVariables, 6> kLaunchers = {{
    {"GPUXRAY_RANK", "GPUXRAY_LOCAL_RANK", "GPUXRAY_WORLD_SIZE", "GPUXRAY_LOCAL_WORLD_SIZE"},
    {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"},  // torchrun, torch.distributed.launch
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"PMIX_RANK", "PMIX_LOCAL_RANK", "PMIX_SIZE", "PMIX_LOCAL_SIZE"},
    {"PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE", "MPI_LOCALNRANKS"},  // MPICH, Intel MPI
    {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE"},
}};

// The leading decimal number of `text` ("8(x2)" in SLURM_NTASKS_PER_NODE gives 8), or -1.
int32_t leadingNumber(const char* text) {
  if (text == nullptr) return -1;
  std::string_view view(text);
  int32_t value = -1;
  auto [end, error] = std::from_chars(view.data(), view.data() + view.size(), value);
  if (error != std::errc() || end == view.data() || value < 0) return -1;
  return value;
}

std::string readHostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

std::vector<std::string> readCommandLine() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t begin = 0;
  while (begin < all.size()) {
    size_t end = all.find('\0', begin);
    if (end == std::string::npos) end = all.size();
    args.push_back(all.substr(begin, end - begin));
    begin = end + 1;
  }
  return args;
}

void detectRank(const EnvironmentLookup& environment, ProcessIdentity& identity) {
  for (const auto& launcher : kLaunchers) {
    int32_t rank = leadingNumber(environment(launcher.rank));
    if (rank < 0) continue;
    identity.rank = rank;
    identity.rank_source = launcher.rank;
    identity.local_rank = leadingNumber(environment(launcher.local_rank));
    identity.world_size = std::max(0, leadingNumber(environment(launcher.world_size)));
    identity.local_world_size = std::max(0, leadingNumber(environment(launcher.local_world_size)));
    return;
  }
}

void detectRunId(const EnvironmentLookup& environment, ProcessIdentity& identity) {
  auto set = [&](const char* name) {
    const char* value = environment(name);
    if (value == nullptr || *value == '\0') return false;
    // torchrun's default rendezvous id is "none", which names nothing.
    if (std::string_view(name) == "TORCHELASTIC_RUN_ID" && std::string_view(value) == "none") return false;
    identity.run_id = value;
    identity.run_id_source = name;
    return true;
  };
  if (set("GPUXRAY_RUN_ID") || set("TORCHELASTIC_RUN_ID")) return;
  if (const char* job = environment("SLURM_JOB_ID"); job != nullptr && *job != '\0') {
    const char* step = environment("SLURM_STEP_ID");
    identity.run_id = std::string("slurm-") + job + (step != nullptr ? std::string(".") + step : "");
    identity.run_id_source = "SLURM_JOB_ID";
    return;
  }
  if (set("PMIX_NAMESPACE") || set("OMPI_MCA_orte_ess_jobid")) return;
  // Nothing shared by all ranks: a run of one process, named by host, pid and start time.
  identity.run_id = identity.hostname + "-" + std::to_string(identity.pid) + "-" + std::to_string(std::time(nullptr));
  identity.run_id_source = "generated";
}

}  // namespace

ProcessIdentity detectProcessIdentity(const EnvironmentLookup& environment) {
  ProcessIdentity identity;
  identity.hostname = readHostname();
  identity.pid = static_cast<uint32_t>(getpid());
  identity.command_line = readCommandLine();
  detectRank(environment, identity);
  detectRunId(environment, identity);
  return identity;
}

ProcessIdentity detectProcessIdentity() {
  return detectProcessIdentity([](const char* name) { return static_cast<const char*>(std::getenv(name)); });
}

}  // namespace gpuxray::inject
