// `gpuxray diff` on the two real PyTorch-profiler traces HTA's TraceDiff tests compare
// (../shared/traces/hta_trace_diff/control: rank 3 of 8; .../test: rank 1 of 2). The reference is what
// TraceDiff.compare_traces gives on them with every iteration and the last step kept (HTA 0.6.1's rules,
// played without pandas by tests/support/hta_trace_diff_reference.py: counts and total durations per
// name, whole microseconds). These traces' times are whole microseconds already, so HTA's rounding
// changes nothing and the figures must agree exactly, with one documented difference: HTA leaves out
// GPU work whose launching call the trace does not record (its iteration is -1), gpuxray counts it in
// the step it ran in. In the test trace that is 614 events (56,517 µs), in the control trace none.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/kineto_traces.h"
#include "tests/support/run_command.h"

namespace {

struct Reference {
  std::string name;  // normalized (no name of these traces collides once normalized)
  int64_t count_control, count_test;
  int64_t us_control, us_test;                      // HTA's total duration
  int64_t launchless_count = 0, launchless_us = 0;  // the test trace's work HTA leaves out
};

const nlohmann::json* find(const nlohmann::json& list, const std::string& name) {
  for (const auto& item : list) {
    if (item["name"] == name) return &item;
  }
  return nullptr;
}

void checkAgainstHta(const nlohmann::json& list, const Reference& r) {
  INFO(r.name);
  const nlohmann::json* item = find(list, r.name);
  REQUIRE(item != nullptr);
  CHECK((*item)["count_before"] == r.count_control);
  CHECK((*item)["count_after"] == r.count_test + r.launchless_count);
  CHECK((*item)["time_before_ns"] == r.us_control * 1000);
  CHECK((*item)["time_after_ns"] == (r.us_test + r.launchless_us) * 1000);
  // TraceDiff's diff_duration, plus what it leaves out.
  CHECK((*item)["time_after_ns"].get<int64_t>() - (*item)["time_before_ns"].get<int64_t>() ==
        (r.us_test - r.us_control + r.launchless_us) * 1000);
  std::string change = r.count_control == 0 ? "new" : r.count_test == 0 ? "gone" : "changed";
  CHECK((*item)["change"] == change);
}

}  // namespace

TEST_CASE("diff: kernel and op deltas on HTA's TraceDiff traces agree with HTA's totals") {
  auto control = gpuxray::testing::sharedTraces("hta_trace_diff/control");
  auto test = gpuxray::testing::sharedTraces("hta_trace_diff/test");
  if (!control || !test) return;
  auto result = gpuxray::testing::runCommand(std::string(GPUXRAY_BINARY) + " diff --format json " + control->string() +
                                             " " + test->string());
  REQUIRE(result.exit_code == 0);
  // Each side has one rank of a larger world: a warning each, not an error.
  CHECK(result.err.find("control: 1 of 8 ranks (ranks 0-2, 4-7 missing)") != std::string::npos);
  CHECK(result.err.find("test: 1 of 2 ranks (rank 0 missing)") != std::string::npos);
  nlohmann::json d = nlohmann::json::parse(result.out);

  // The largest changes by duration (hta_trace_diff_reference.py's first rows).
  const Reference kernels[] = {
      {"Memcpy DtoD (Device -> Device)", 18, 4608, 2735, 92625, 37, 307},
      {"split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1<float, float, float, 5ul>", 0,
       6, 0, 51450, 1, 8684},
      {"ncclKernel_AllReduce_RING_LL_Sum_float", 18, 18, 32880, 80480, 3, 11602},
      {"split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1<float, float, float, 2ul>", 6,
       0, 36180, 0},
      {"volta_sgemm_128x32_nt", 0, 204, 0, 27263, 14, 573},
      {"split_embedding_codegen_forward_unweighted_kernel<float, float, float, long, 5ul>", 0, 6, 0, 27012},
  };
  for (const auto& r : kernels) checkAgainstHta(d["kernels"], r);
  // Ops: record_function ranges and CUDA runtime calls (HTA's CPU side also has aten ops, which gpuxray
  // does not load).
  const Reference ops[] = {
      {"cudaMemcpyAsync", 228, 4812, 77040, 369532},       {"## sparse_data_dist ##", 6, 6, 63365, 242383},
      {"## all2all_tw_data:init ##", 6, 6, 32062, 175522}, {"## wait_sparse_data_dist ##", 6, 6, 38299, 100972},
      {"## all2all_tw_data:wait ##", 6, 6, 36514, 99034},  {"## forward ##", 6, 6, 120220, 148922},
  };
  for (const auto& r : ops) checkAgainstHta(d["ops"], r);

  // Over every name: HTA's totals (GPU 9,450 events and 501,567 µs against 15,018 and 907,245 µs; ops
  // 24,973 and 870,955 µs against 21,448 and 1,710,320 µs), plus the launchless work.
  auto sum = [&](const char* list, const char* field) {
    int64_t total = 0;
    for (const auto& item : d[list]) total += item[field].get<int64_t>();
    return total;
  };
  CHECK(sum("kernels", "count_before") == 9450);
  CHECK(sum("kernels", "count_after") == 15018 + 614);
  CHECK(sum("kernels", "time_before_ns") == 501567 * int64_t{1000});
  CHECK(sum("kernels", "time_after_ns") == (907245 + 56517) * int64_t{1000});
  CHECK(sum("ops", "count_before") == 24973);
  CHECK(sum("ops", "count_after") == 21448);
  CHECK(sum("ops", "time_before_ns") == 870955 * int64_t{1000});
  CHECK(sum("ops", "time_after_ns") == 1710320 * int64_t{1000});
  // The largest change per step and rank comes first (both sides have 6 steps on one rank).
  CHECK(d["kernels"][0]["name"] == "Memcpy DtoD (Device -> Device)");
  CHECK(d["ops"][0]["name"] == "cudaMemcpyAsync");
}
