// Rank and run detection from launchers' environments, and clock anchors.

#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "inject/clock_anchor.h"
#include "inject/process_identity.h"

namespace {

using gpuxray::inject::detectProcessIdentity;

gpuxray::inject::EnvironmentLookup environmentOf(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const char* name) -> const char* {
    auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace

TEST_CASE("torchrun's variables give rank, local rank and sizes") {
  auto identity = detectProcessIdentity(environmentOf({{"RANK", "5"},
                                                       {"LOCAL_RANK", "1"},
                                                       {"WORLD_SIZE", "16"},
                                                       {"LOCAL_WORLD_SIZE", "8"},
                                                       {"TORCHELASTIC_RUN_ID", "job-42"}}));
  CHECK(identity.rank == 5);
  CHECK(identity.local_rank == 1);
  CHECK(identity.world_size == 16);
  CHECK(identity.local_world_size == 8);
  CHECK(identity.rank_source == "RANK");
  CHECK(identity.run_id == "job-42");
  CHECK(identity.run_id_source == "TORCHELASTIC_RUN_ID");
  CHECK(identity.pid > 0);
  CHECK_FALSE(identity.hostname.empty());
  CHECK_FALSE(identity.command_line.empty());
}

TEST_CASE("Slurm's variables name the run by job and step, and tasks-per-node may carry a repeat count") {
  auto identity = detectProcessIdentity(environmentOf({{"SLURM_PROCID", "9"},
                                                       {"SLURM_LOCALID", "1"},
                                                       {"SLURM_NTASKS", "16"},
                                                       {"SLURM_NTASKS_PER_NODE", "8(x2)"},
                                                       {"SLURM_JOB_ID", "777"},
                                                       {"SLURM_STEP_ID", "0"}}));
  CHECK(identity.rank == 9);
  CHECK(identity.local_world_size == 8);
  CHECK(identity.rank_source == "SLURM_PROCID");
  CHECK(identity.run_id == "slurm-777.0");
  CHECK(identity.run_id_source == "SLURM_JOB_ID");
}

TEST_CASE("gpuxray's own variables win over the launcher's") {
  auto identity = detectProcessIdentity(environmentOf(
      {{"GPUXRAY_RANK", "3"}, {"RANK", "0"}, {"GPUXRAY_RUN_ID", "mine"}, {"TORCHELASTIC_RUN_ID", "theirs"}}));
  CHECK(identity.rank == 3);
  CHECK(identity.rank_source == "GPUXRAY_RANK");
  CHECK(identity.run_id == "mine");
}

TEST_CASE("without a launcher the rank is unknown and the run id is generated") {
  auto identity = detectProcessIdentity(environmentOf({{"TORCHELASTIC_RUN_ID", "none"}, {"RANK", "x"}}));
  CHECK(identity.rank == -1);
  CHECK(identity.world_size == 0);
  CHECK(identity.rank_source.empty());
  CHECK(identity.run_id_source == "generated");
  CHECK(identity.run_id.find(identity.hostname + "-" + std::to_string(identity.pid) + "-") == 0);
}

TEST_CASE("a clock anchor reads the three clocks together") {
  uint64_t ticks = 0;
  auto anchor = gpuxray::inject::takeClockAnchor([&] { return 1'000'000 + ++ticks; });
  CHECK(ticks == 5);
  CHECK(anchor.capture_ns > 1'000'000);
  CHECK(anchor.realtime_ns > 1'600'000'000'000'000'000ull);
  CHECK(anchor.monotonic_ns > 0);
  CHECK(anchor.uncertainty_ns < 1'000'000);
}
