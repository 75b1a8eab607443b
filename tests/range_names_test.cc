// Host ranges merged by name across their instances: PyTorch's emit_nvtx names each call's range
// "aten::linear, seq = 954, op_id = 12, sizes = [[8, 512], [512, 512], []]" (as the H200 capture of
// a transformer did: 55,950 ranges, each its own op path, memory phase and activity total before).

#include "analyzer/analysis/range_names.h"

#include <catch2/catch.hpp>
#include <string>

#include "analyzer/analysis/activity_totals.h"
#include "analyzer/analysis/memory.h"
#include "analyzer/analysis/ops.h"
#include "analyzer/analysis/session.h"
#include "tests/support/run_builder.h"
#include "tests/support/temp_dir.h"

namespace {

namespace analysis = gpuxray::analysis;

std::string opOf(const std::string& recorded) {
  return std::string(analysis::splitRangeName(recorded).op);
}
std::string sizesOf(const std::string& recorded) {
  return std::string(analysis::splitRangeName(recorded).sizes);
}

}  // namespace

TEST_CASE("range names: emit_nvtx's decorations are split off, other names stay as recorded") {
  CHECK(opOf("aten::linear, seq = 954, op_id = 12") == "aten::linear");
  CHECK(sizesOf("aten::linear, seq = 954, op_id = 12") == "");
  CHECK(opOf("aten::copy_, op_id = 7") == "aten::copy_");
  const std::string shaped =
      "aten::addmm, seq = 3, op_id = 40, sizes = [[512], [8, 512], [512, 512], [], []], "
      "input_op_ids = [(38,0), (39,0)]";
  CHECK(opOf(shaped) == "aten::addmm");
  CHECK(sizesOf(shaped) == "[[512], [8, 512], [512, 512], [], []]");
  CHECK(opOf("AddmmBackward0, seq = 241, op_id = 9") == "AddmmBackward0");
  // Not emit_nvtx's grammar: the name as recorded.
  CHECK(opOf("load, seq = first, op_id = 2") == "load, seq = first, op_id = 2");
  CHECK(opOf("a, b, op_id = 2 and more") == "a, b, op_id = 2 and more");
  CHECK(opOf(", seq = 1") == ", seq = 1");
  CHECK(opOf("forward#3") == "forward#3");
  CHECK(opOf("") == "");

  CHECK(analysis::foldedRangeName("ProfilerStep#12") == "ProfilerStep#N");
  CHECK(analysis::foldedRangeName("AddmmBackward0, seq = 241, op_id = 9") == "AddmmBackwardN");
  CHECK(analysis::foldedRangeName("aten::linear, seq = 954, op_id = 12") == "aten::linear");
  CHECK(analysis::foldedRangeName("12") == "12");
}

TEST_CASE("range names: emit_nvtx's ranges of one op are one op path, one memory phase and one activity total") {
  gpuxray::testing::TempDir dir;
  gpuxray::testing::RunBuilder run("golden-emit-nvtx", 1);
  auto& rank = run.rank(0, "node-0", 0);
  rank.header.rank = -1;  // as a process the launcher gave no rank: still one rank of the op paths
  const std::string sizes = "[[8, 512], [512, 512], []]";
  // The ranges start inside the GPU span (the window of the activity totals when there are no steps).
  rank.kernel("warm_up", 10, 20);  // launched at 5, outside every range
  rank.range("aten::linear, seq = 5, op_id = 12, sizes = " + sizes, 100, 200);
  rank.range("aten::linear, seq = 9, op_id = 40, sizes = " + sizes, 300, 400);
  rank.range("aten::linear, seq = 13, op_id = 77, sizes = [[8, 1024], [1024, 512], []]", 500, 600);
  rank.kernel("gemm", 120, 160);  // launched at 115, in the first
  rank.kernel("gemm", 320, 380);  // launched at 315, in the second
  rank.kernel("gemm", 520, 540);  // launched at 515, in the third
  rank.memoryChange(150, 1 << 20);
  rank.memoryChange(350, 2 << 20);
  rank.memoryChange(550, -(1 << 20));
  run.write(dir.path());
  analysis::SessionOptions options;
  options.paths = {dir.path().string()};
  options.align = false;
  analysis::Session session(options);

  REQUIRE(session.run().ranks.size() == 1);
  CHECK(session.run().ranks[0].rank == -1);
  auto ops = analysis::computeOps(session.input());
  REQUIRE(ops.nodes.size() == 2);
  CHECK(ops.nodes[0].name == "aten::linear");
  CHECK(ops.nodes[0].inputs == sizes);
  CHECK(ops.nodes[0].count == 2);
  CHECK(ops.nodes[0].ranks == 1);
  CHECK(ops.nodes[0].gpu_time_ns == 100'000);
  CHECK(ops.nodes[1].name == "aten::linear");
  CHECK(ops.nodes[1].inputs == "[[8, 1024], [1024, 512], []]");
  CHECK(ops.nodes[1].count == 1);

  auto memory = analysis::computeMemory(session.input());
  REQUIRE(memory.devices.size() == 1);
  CHECK(memory.devices[0].peak_bytes == 3 << 20);
  CHECK(memory.devices[0].peak_phase == "aten::linear");
  REQUIRE(memory.worst_rank_phases.size() == 1);
  CHECK(memory.worst_rank_phases[0].phase == "aten::linear");

  auto totals = analysis::computeActivityTotals(session.input());
  REQUIRE(totals.ops.size() >= 1);
  const auto linear =
      std::find_if(totals.ops.begin(), totals.ops.end(), [](const auto& t) { return t.name == "aten::linear"; });
  REQUIRE(linear != totals.ops.end());
  CHECK(linear->count == 3);
  CHECK(linear->time_ns == 300'000);
  CHECK(std::none_of(totals.ops.begin(), totals.ops.end(),
                     [](const auto& t) { return t.name.find("seq =") != std::string::npos; }));
}
