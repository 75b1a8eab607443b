// Communicator roles: what a name states (the plain word before the indexed ones that place a group
// on the other axes), and without a name what the traffic shows, on one host and on several.

#include <catch2/catch.hpp>
#include <string>

#include "analyzer/analysis/communicators.h"
#include "tests/support/analyzed_run.h"
#include "tests/support/build_outputs.h"
#include "tests/support/run_builder.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

namespace analysis = gpuxray::analysis;
using analysis::CommunicatorRole;
using gpuxray::testing::RunBuilder;
using gpuxray::testing::TempDir;

TEST_CASE("communicators: a name's plain role word outranks the indexed words that place the group") {
  CHECK(analysis::roleNamedIn("tensor dp1 pp0") == CommunicatorRole::kTensor);
  CHECK(analysis::roleNamedIn("data tp3 pp0") == CommunicatorRole::kData);
  CHECK(analysis::roleNamedIn("pipeline tp0 dp1") == CommunicatorRole::kPipeline);
  CHECK(analysis::roleNamedIn("model dp1") == CommunicatorRole::kData);
  CHECK(analysis::roleNamedIn("tp_group") == CommunicatorRole::kTensor);
  CHECK_FALSE(analysis::roleNamedIn("tp0 dp1").has_value());  // two indexed roles, no plain word
  CHECK_FALSE(analysis::roleNamedIn("dp_tp").has_value());    // two plain roles
  CHECK_FALSE(analysis::roleNamedIn("").has_value());
  CHECK_FALSE(analysis::roleNamedIn("context tp0 dp0 pp0").has_value());
}

// Eight ranks on one host, TP2 x DP4, communicators without names: tensor groups {0,1}, {2,3}, ...
// run 6 all-reduces a step (one per layer), data groups {0,2,4,6} and {1,3,5,7} one; a pipeline-like
// group {0,4} only sends and receives.
TEST_CASE("communicators: nameless groups on one host are told apart by their traffic") {
  TempDir dir;
  RunBuilder run("roles-one-host", 8);
  auto tensor = [](int r) { return uint64_t{0x7000000000000000} + static_cast<uint64_t>(r / 2); };
  auto data = [](int r) { return uint64_t{0xD000000000000000} + static_cast<uint64_t>(r % 2); };
  constexpr uint64_t kPipe = 0x9000000000000000ull;
  for (int r = 0; r < 8; ++r) {
    auto& rank = run.rank(r, "node-0", r);
    rank.communicator(tensor(r), "", r % 2, 2, 1);
    rank.communicator(data(r), "", r / 2, 4, 1);
    rank.range("ProfilerStep#0", 0, 10'000);
    for (int layer = 0; layer < 6; ++layer) {
      rank.collective(tensor(r), "AllReduce", static_cast<uint64_t>(layer + 1), 1'000.0 * layer, 1'000.0 * layer + 500,
                      1 << 20);
    }
    rank.collective(data(r), "AllReduce", 1, 7'000, 9'000, 64 << 20);
    if (r == 0 || r == 4) {
      rank.communicator(kPipe, "", r / 4, 2, 1);
      rank.p2p(kPipe, r == 0, r == 0 ? 1 : 0, 9'000, 9'500, 1 << 20);
    }
  }
  run.write(dir.path() / "run");
  auto a = gpuxray::testing::analyze(dir / "run");
  auto comms = analysis::gatherCommunicators(a.session->input().run);
  for (int r = 0; r < 8; r += 2) CHECK(comms.at(tensor(r)).role == CommunicatorRole::kTensor);
  CHECK(comms.at(data(0)).role == CommunicatorRole::kData);
  CHECK(comms.at(data(1)).role == CommunicatorRole::kData);
  CHECK(comms.at(kPipe).role == CommunicatorRole::kPipeline);
}

// The simulator names its groups Megatron's way; on one host with a straggler the tensor groups
// ("tensor dp1 pp0") must not read as data groups for the "dp1" in their names.
TEST_CASE("communicators: a simulated one-host TP2 x DP4 run gets the roles its names state") {
  TempDir dir;
  std::string run = dir / "straggler";
  auto simulated = gpuxray::testing::runCommand(
      gpuxray::testing::gpuxrayBinary() +
      " simulate --model gpt-350m --cluster dgx-h100 --tp 2 --dp 4 --straggler 2=1.3 --steps 3 -o " + run);
  INFO(simulated.err);
  REQUIRE(simulated.exit_code == 0);
  auto a = gpuxray::testing::analyzeRun(run);
  auto comms = analysis::gatherCommunicators(a.session->input().run);
  size_t tensor = 0, data = 0;
  for (const auto& [hash, info] : comms) {
    INFO(info.name);
    if (info.name.starts_with("tensor ")) {
      CHECK(info.role == CommunicatorRole::kTensor);
      ++tensor;
    }
    if (info.name.starts_with("data ")) {
      CHECK(info.role == CommunicatorRole::kData);
      ++data;
    }
  }
  CHECK(tensor == 4);
  CHECK(data == 2);
}

}  // namespace
