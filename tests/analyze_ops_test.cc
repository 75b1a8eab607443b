// The op tree: a hand-built run with known answers, the real PyTorch-profiler traces (the tree's GPU
// time adds up to the kernels' time that has a correlated launch; what has none is counted), and
// `convert`'s files, which keep the cpu_ops with their inputs.

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <string>

#include "analyzer/analysis/ops.h"
#include "analyzer/analysis/session.h"
#include "analyzer/load/rank_writer.h"
#include "analyzer/report/report.h"
#include "tests/support/kineto_traces.h"
#include "tests/support/run_builder.h"
#include "tests/support/temp_dir.h"

namespace {

namespace analysis = gpuxray::analysis;

std::unique_ptr<analysis::Session> prepared(const std::string& dir) {
  analysis::SessionOptions options;
  options.paths = {dir};
  options.align = false;
  return std::make_unique<analysis::Session>(options);
}

const analysis::OpNode* find(const analysis::OpsResult& result, const std::string& name, int32_t parent_index) {
  for (const auto& n : result.nodes) {
    if (n.name == name && n.parent == parent_index) return &n;
  }
  return nullptr;
}

int32_t indexOf(const analysis::OpsResult& result, const analysis::OpNode* node) {
  return node == nullptr ? -2 : static_cast<int32_t>(node - result.nodes.data());
}

// Every kernel with a launch call is in the tree or outside every range; the kept nodes' own time
// and the left-out nodes' add up to the tree's, which the roots hold.
void checkSums(const analysis::OpsResult& result) {
  int64_t self = result.left_out_self_gpu_time_ns, roots = 0;
  for (const auto& n : result.nodes) {
    self += n.self_gpu_time_ns;
    if (n.parent < 0) roots += n.gpu_time_ns;
    if (n.parent >= 0) CHECK(n.parent < static_cast<int32_t>(&n - result.nodes.data()));
  }
  CHECK(self + result.outside_ranges_time_ns == result.correlated_time_ns);
  if (result.nodes_left_out == 0) CHECK(roots + result.outside_ranges_time_ns == result.correlated_time_ns);
  CHECK(result.correlated_time_ns + result.uncorrelated_time_ns == result.kernel_time_ns);
  CHECK(result.correlated_kernels + result.uncorrelated_kernels == result.kernels);
}

}  // namespace

TEST_CASE("ops: each kernel hangs on the innermost range open at its launch, merged across ranks by path") {
  gpuxray::testing::TempDir dir;
  gpuxray::testing::RunBuilder run("golden-ops", 2);
  for (int r = 0; r < 2; ++r) {
    auto& rank = run.rank(r, "node-0");
    rank.range("ProfilerStep#" + std::to_string(r + 7), 0, 1000);  // numbers folded: one path
    rank.range("forward", 0, 500);
    rank.range("aten::mm", 10, 100);
    rank.range("aten::mm", 200, 300);
    rank.range("backward", 500, 900);
    rank.kernel("gemm", 25, 125);                                           // launched at 20, in the first aten::mm
    rank.kernel("gemm_small", 210, 260);                                    // launched at 205, in the second
    rank.kernel("relu", 405, 425);                                          // launched at 400, in forward itself
    rank.kernel("gemm_bwd", 605, 705);                                      // in backward
    rank.kernel("orphan", 1205, 1215);                                      // launched at 1200, outside every range
    rank.kernel("lost", 1300, 1340, gpuxray::testing::kComputeStream, -1);  // no launch call recorded
  }
  run.write(dir.path());
  auto session = prepared(dir.path().string());
  auto result = analysis::computeOps(session->input());
  CHECK(result.recorded);
  CHECK(result.host_ranges == 10);
  CHECK(result.kernels == 12);
  CHECK(result.uncorrelated_kernels == 2);
  CHECK(result.uncorrelated_time_ns == 2 * 40'000);
  CHECK(result.outside_ranges_kernels == 2);
  CHECK(result.outside_ranges_time_ns == 2 * 10'000);
  checkSums(result);

  const auto* step = find(result, "ProfilerStep#N", -1);
  REQUIRE(step != nullptr);
  CHECK(step->count == 2);
  CHECK(step->ranks == 2);
  CHECK(step->host_time_ns == 2 * 1'000'000);
  CHECK(step->gpu_time_ns == 2 * (100 + 50 + 20 + 100) * 1000);
  CHECK(step->self_gpu_time_ns == 0);
  const auto* forward = find(result, "forward", indexOf(result, step));
  REQUIRE(forward != nullptr);
  CHECK(forward->gpu_time_ns == 2 * (100 + 50 + 20) * 1000);
  CHECK(forward->self_gpu_time_ns == 2 * 20'000);
  const auto* mm = find(result, "aten::mm", indexOf(result, forward));
  REQUIRE(mm != nullptr);
  CHECK(mm->count == 4);
  CHECK(mm->host_time_ns == 2 * (90 + 100) * 1000);
  CHECK(mm->self_gpu_time_ns == 2 * 150'000);
  REQUIRE(mm->top_kernels.size() == 2);
  CHECK(mm->top_kernels[0].name == "gemm");
  CHECK(mm->top_kernels[0].count == 2);
  CHECK(mm->top_kernels[0].time_ns == 200'000);
  CHECK(mm->top_kernels[1].name == "gemm_small");
  const auto* backward = find(result, "backward", indexOf(result, step));
  REQUIRE(backward != nullptr);
  CHECK(backward->self_gpu_time_ns == 2 * 100'000);

  gpuxray::report::Report report;
  analysis::presentOps(result, 10, report);
  std::string json = gpuxray::report::renderJson(report);
  CHECK(json.find("\"ops\": {") != std::string::npos);
  CHECK(json.find("\"uncorrelated_kernels\": 2") != std::string::npos);
  REQUIRE(report.sections.size() == 1);
  REQUIRE_FALSE(report.sections[0].tables.at(0).rows.empty());
  CHECK(report.sections[0].tables[0].rows[0][0].text == "ProfilerStep#N > forward > aten::mm");
}

TEST_CASE("ops: a run without host ranges says so") {
  gpuxray::testing::TempDir dir;
  gpuxray::testing::RunBuilder run("golden-ops-none", 1);
  run.rank(0, "node-0").kernel("k", 10, 20);
  run.write(dir.path());
  auto session = prepared(dir.path().string());
  auto result = analysis::computeOps(session->input());
  CHECK_FALSE(result.recorded);
  CHECK(result.nodes.empty());
  CHECK(result.outside_ranges_kernels == 1);
  checkSums(result);
}

TEST_CASE("ops: the real traces' cpu_op trees hold their kernels' correlated time, and convert keeps them") {
  for (const char* name : {"tracelens_b200_rank0_of8", "hta_nccl_data_rank0_of2", "hta_sampled_2rank",
                           "tracelens_h100_qwen_inference_rank0", "hta_mi250_rocm_rank0"}) {
    auto traces = gpuxray::testing::sharedTraces(name);
    if (!traces) continue;
    INFO(name);
    auto session = prepared(traces->string());
    auto result = analysis::computeOps(session->input());
    CHECK(result.recorded);
    CHECK(result.correlated_kernels > 0);
    checkSums(result);
    // Most kernels are launched by an aten op: the tree holds more than the few ranges kept before.
    CHECK(result.correlated_time_ns - result.outside_ranges_time_ns > result.correlated_time_ns / 2);
    if (std::string(name) == "tracelens_b200_rank0_of8") {
      uint64_t cpu_ops = 0;
      for (const auto& rank : session->run().ranks) cpu_ops += rank.host_ops.size();
      CHECK(cpu_ops == 4809);  // every cpu_op of the trace
      bool shapes = false;
      for (const auto& n : result.nodes) shapes = shapes || n.inputs.find("float[") != std::string::npos;
      CHECK(shapes);

      gpuxray::testing::TempDir converted;
      const auto& rank = session->run().ranks.front();
      gpuxray::load::writeRankTrace(rank, (converted.path() / "rank-00000.gpuxray").string(), "test");
      auto again = prepared(converted.path().string());
      auto reread = analysis::computeOps(again->input());
      CHECK(again->run().ranks.front().host_ops.size() == rank.host_ops.size());
      CHECK(reread.nodes.size() == result.nodes.size());
      CHECK(reread.correlated_time_ns == result.correlated_time_ns);
      CHECK(reread.outside_ranges_time_ns == result.outside_ranges_time_ns);
      for (size_t i = 0; i < reread.nodes.size() && i < result.nodes.size(); ++i) {
        CHECK(reread.nodes[i].name == result.nodes[i].name);
        CHECK(reread.nodes[i].inputs == result.nodes[i].inputs);
        CHECK(reread.nodes[i].gpu_time_ns == result.nodes[i].gpu_time_ns);
      }
    }
  }
}
