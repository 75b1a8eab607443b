// Every real trace in ../shared/traces, through `gpuxray analyze` as a user runs it: each analyzes
// with exit 0, and no finding cites data the trace does not have (zero blocks or threads, registers
// that were never recorded, a collective of 0 B). HTA's own figures for them are checked in
// hta_compat_test.cc.

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/build_outputs.h"
#include "tests/support/kineto_traces.h"
#include "tests/support/run_command.h"

namespace {

namespace fs = std::filesystem;

// The README's traces: a folder per run (hta_trace_diff holds two; simple_add's output/ is HTA's
// critical path overlaid on its input, a trace too). hta_memory_timeline is not a trace.
const std::vector<std::string> kCorpus = {
    "hta_sampled_2rank",
    "hta_nccl_data_rank0_of2",
    "tracelens_b200_rank0_of8",
    "hta_mi250_rocm_rank0",
    "hta_trace_diff/control",
    "hta_trace_diff/test",
    "hta_critical_path_alexnet",
    "hta_critical_path_simple_add",
    "hta_critical_path_simple_add/output",
    "tracelens_h100_qwen_inference_rank0",
    "tracelens_vllm_cudagraph_rank0",
};

// "0 blocks", "0 threads", "0 registers" (a launch the trace does not record), "of 0 B" (a size it
// does not record).
bool citesMissingData(const std::string& text) {
  static const std::regex zero(R"((^|[^0-9.,])0 (blocks|threads|registers))");
  return std::regex_search(text, zero) || text.find(" of 0 B ") != std::string::npos;
}

}  // namespace

TEST_CASE("corpus: every shared trace analyzes, and no finding rests on a launch configuration it lacks") {
  for (const std::string& name : kCorpus) {
    auto dir = gpuxray::testing::sharedTraces(name);
    if (!dir) continue;
    INFO(name);
    auto run = gpuxray::testing::runCommand(gpuxray::testing::gpuxrayBinary() + " analyze --format json " + dir->string());
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    auto report = nlohmann::json::parse(run.out);
    for (const auto& finding : report["findings"]) {
      std::string summary = finding["summary"];
      INFO(summary);
      CHECK_FALSE(citesMissingData(summary));
      for (const auto& evidence : finding["evidence"]) CHECK_FALSE(citesMissingData(evidence.get<std::string>()));
      CHECK(summary.find("unknown communicator") == std::string::npos);
    }
    CHECK(run.out.find("of 0 ranks") == std::string::npos);
    CHECK(run.out.find("unknown communicator") == std::string::npos);
  }
}

// Every nanosecond of a step on the critical path belongs to exactly one cause: the parts sum to the
// step, per rank and across ranks, on every shared trace; a finding's saving, where computed, is a
// non-negative share of the step.
TEST_CASE("corpus: the critical path's attribution sums to every step of every shared trace") {
  for (const std::string& name : kCorpus) {
    auto dir = gpuxray::testing::sharedTraces(name);
    if (!dir) continue;
    INFO(name);
    auto run = gpuxray::testing::runCommand(gpuxray::testing::gpuxrayBinary() +
                                            " analyze --critical-path --format json " + dir->string());
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    auto report = nlohmann::json::parse(run.out);
    const auto& path = report["results"]["critical_path"];
    size_t steps = 0;
    for (const char* list : {"steps", "run_steps"}) {
      for (const auto& step : path[list]) {
        int64_t sum = 0;
        for (const auto& part : step["attribution"]) sum += part["ns"].get<int64_t>();
        CHECK(sum == step["step_ns"].get<int64_t>());
        ++steps;
      }
    }
    CHECK(steps > 0);
    for (const auto& finding : report["findings"]) {
      if (!finding.contains("saves_ns")) continue;
      CHECK(finding["saves_ns"].get<int64_t>() >= 0);
    }
  }
}

TEST_CASE("corpus: the ROCm traces speak of CUs, and their launches are not recorded") {
  auto dir = gpuxray::testing::sharedTraces("hta_mi250_rocm_rank0");
  if (!dir) return;
  auto run = gpuxray::testing::runCommand(gpuxray::testing::gpuxrayBinary() + " analyze " + dir->string());
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("not recorded") != std::string::npos);
  CHECK(run.out.find("compute units (CUs)") != std::string::npos);
  CHECK(run.out.find("SMs idle") == std::string::npos);
  CHECK(run.out.find("1 rank (world size not recorded)") != std::string::npos);
}

TEST_CASE("corpus: vLLM's graph-capture trace leaves the capture out of its idle time") {
  auto dir = gpuxray::testing::sharedTraces("tracelens_vllm_cudagraph_rank0");
  if (!dir) return;
  auto run = gpuxray::testing::runCommand(gpuxray::testing::gpuxrayBinary() + " analyze " + dir->string());
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("inside CUDA-graph captures") != std::string::npos);
  // Its 55 ms capture is no idleness of the job: the idle finding, if any, is information only.
  CHECK(run.out.find("more were capture") != std::string::npos);
  CHECK(run.out.find("[critical] rank 0's GPU is idle") == std::string::npos);
}
