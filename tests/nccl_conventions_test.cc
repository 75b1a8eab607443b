// NCCL's conventions (analyzer/model/nccl_conventions.h) against nccl-tests' rules, and the four
// places that use them agreeing on one 4-rank run: the report's collectives and collective_bandwidth
// tables, the JSON report, the Perfetto export's busbw, and the simulator that predicted the times.

#include "analyzer/model/nccl_conventions.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "analyzer/export/perfetto_writer.h"
#include "analyzer/export/timeline_export.h"
#include "analyzer/simulate/cost_model.h"
#include "analyzer/simulate/presets.h"
#include "tests/support/analyzed_run.h"
#include "tests/support/build_outputs.h"
#include "tests/support/perfetto_trace_check.h"
#include "tests/support/run_builder.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::model::busBandwidthRule;
using gpuxray::model::NcclFunction;
using gpuxray::model::ringBytesPerLink;
using gpuxray::testing::RunBuilder;
using gpuxray::testing::TempDir;
namespace simulate = gpuxray::simulate;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kTp = 0x7e00'0000'0000'0004ull;
constexpr int kRanks = 4;
// The simulated NVLink: 100 GB/s per direction, all of it usable, no latency.
constexpr double kLinkBytesPerS = 100e9;

struct Collective {
  const char* func;
  simulate::CollectiveKind kind;
  uint64_t bytes;  // NCCL's op bytes (count x type size)
};
// AllGather: what each rank sends; ReduceScatter: what each receives; AlltoAll: all one rank sends.
constexpr Collective kCollectives[] = {
    {"AllGather", simulate::CollectiveKind::kAllGather, 16 * kMiB},
    {"ReduceScatter", simulate::CollectiveKind::kReduceScatter, 16 * kMiB},
    {"AllReduce", simulate::CollectiveKind::kAllReduce, 64 * kMiB},
    {"AlltoAll", simulate::CollectiveKind::kAllToAll, 32 * kMiB},
};

simulate::CostModel linkModel() {
  simulate::SimulationInputs in = simulate::runPreset("demo")->inputs;
  in.cluster.gpu.nvlink_bandwidth = kLinkBytesPerS;
  in.cluster.efficiency.nvlink = 1;
  in.cluster.nvlink_latency_s = 0;
  return simulate::CostModel(in);
}

// Each collective's duration in µs as the simulator predicts it for 4 ranks on one node.
std::vector<double> predictedMicroseconds() {
  simulate::CostModel cost = linkModel();
  std::vector<double> us;
  for (const auto& c : kCollectives)
    us.push_back(cost.collectiveSeconds(c.kind, c.bytes, {kRanks, 1, kRanks, 1}) * 1e6);
  return us;
}

// Four ranks of one tensor group run the collectives one after another, all entering together and
// taking as long as the simulator predicts (one step, 0 to the last end + 100 µs).
void writeRun(const std::filesystem::path& dir) {
  std::vector<double> us = predictedMicroseconds();
  RunBuilder run("nccl-conventions", kRanks);
  for (int r = 0; r < kRanks; ++r) {
    auto& rank = run.rank(r, "node-0", r);
    rank.communicator(kTp, "tp", r, kRanks, 1);
    double t = 100;
    for (size_t i = 0; i < std::size(kCollectives); ++i) {
      rank.collective(kTp, kCollectives[i].func, 1, t, t + us[i], kCollectives[i].bytes);
      t += us[i] + 100;
    }
    rank.range("ProfilerStep#1", 0, t);
  }
  run.write(dir);
}

gpuxray::testing::DecodedTrace exportPerfetto(const gpuxray::testing::AnalyzedRun& a) {
  gpuxray::format::MemorySink bytes;
  gpuxray::timeline::PerfettoSink perfetto(bytes);
  gpuxray::timeline::exportTimeline(a.run, a.report, {}, perfetto);
  auto trace = gpuxray::testing::decodePerfettoTrace(std::string(bytes.bytes().begin(), bytes.bytes().end()));
  for (const auto& error : trace.errors) UNSCOPED_INFO(error);
  REQUIRE(trace.errors.empty());
  return trace;
}

size_t rowOf(const gpuxray::report::Table& table, const std::string& func) {
  return gpuxray::testing::rowWhere(table, "operation", func);
}

}  // namespace

TEST_CASE("nccl conventions: data size and busbw factor as nccl-tests counts them, for n = 8") {
  // nccl-tests: AllReduce count x size, 2(n-1)/n; AllGather and ReduceScatter count x size x n with
  // the per-rank count, (n-1)/n; Broadcast and Reduce count x size, 1; AlltoAll (n-1)/n; SendRecv 1.
  auto rule = [](const char* func) { return *busBandwidthRule(func, 1000, 8); };
  CHECK(rule("AllReduce").data_bytes == 1000);
  CHECK(rule("AllReduce").factor == Approx(14.0 / 8));
  CHECK(rule("AllGather").data_bytes == 8000);
  CHECK(rule("AllGather").factor == Approx(7.0 / 8));
  CHECK(rule("ReduceScatter").data_bytes == 8000);
  CHECK(rule("ReduceScatter").factor == Approx(7.0 / 8));
  CHECK(rule("Gather").data_bytes == 8000);
  CHECK(rule("Scatter").data_bytes == 8000);
  CHECK(rule("AlltoAll").data_bytes == 1000);
  CHECK(rule("AlltoAll").factor == Approx(7.0 / 8));
  CHECK(rule("AllToAll").factor == Approx(7.0 / 8));
  for (const char* func : {"Broadcast", "Reduce", "Send", "Recv", "SendRecv"}) {
    CHECK(rule(func).data_bytes == 1000);
    CHECK(rule(func).factor == 1);
  }
  // 1000 data bytes in 1 µs: 1 GB/s.
  CHECK(rule("AllGather").algbw(1000) == Approx(8e9));
  CHECK(rule("AllGather").busbw(1000) == Approx(7e9));
  // Without the number of ranks there is no rule (not a factor of 0 or 1).
  CHECK_FALSE(busBandwidthRule("AllGather", 1000, 0));
  CHECK_FALSE(busBandwidthRule("AllReduce", 1000, -1));
}

TEST_CASE("nccl conventions: a ring member sends data size x factor to its successor") {
  // Ring AllReduce: 2(n-1) chunks of S/n; AllGather and ReduceScatter: n-1 chunks of the per-rank share.
  CHECK(*ringBytesPerLink(NcclFunction::kAllReduce, 800, 4) == Approx(2.0 * 3 / 4 * 800));
  CHECK(*ringBytesPerLink(NcclFunction::kAllGather, 800, 4) == Approx(3 * 800));
  CHECK(*ringBytesPerLink(NcclFunction::kReduceScatter, 800, 4) == Approx(3 * 800));
  CHECK(*ringBytesPerLink(NcclFunction::kBroadcast, 800, 4) == 800);
  CHECK_FALSE(ringBytesPerLink(NcclFunction::kAlltoAll, 800, 4));
  CHECK_FALSE(ringBytesPerLink(NcclFunction::kSend, 800, 4));
  CHECK_FALSE(ringBytesPerLink(NcclFunction::kAllReduce, 800, 0));
  CHECK(gpuxray::model::ringSteps(NcclFunction::kAllReduce, 4) == 6);
  CHECK(gpuxray::model::ringSteps(NcclFunction::kAllGather, 4) == 3);
}

TEST_CASE(
    "nccl conventions: report, JSON, Perfetto busbw and simulator agree on a 4-rank AllGather, "
    "ReduceScatter, AllReduce and AlltoAll") {
  TempDir dir;
  writeRun(dir.path());
  std::vector<double> us = predictedMicroseconds();
  // The simulator put every byte on a 100 GB/s link with no latency, so nccl-tests' busbw of each
  // collective is the link's speed: e.g. AllGather of 16 MiB per rank takes 3 x 16 MiB / 100 GB/s,
  // algbw = 4 x 16 MiB / that, busbw = algbw x 3/4 = 100 GB/s.
  CHECK(us[0] * 1e-6 == Approx(3.0 * 16 * kMiB / kLinkBytesPerS));
  CHECK(us[2] * 1e-6 == Approx(2.0 * 3 / 4 * 64 * kMiB / kLinkBytesPerS));

  auto a = gpuxray::testing::analyzeRun(dir.path().string());
  const auto& signatures = gpuxray::testing::table(a.report, "collectives", "signatures");
  const auto& operations = gpuxray::testing::table(a.report, "collective_bandwidth", "operations");
  REQUIRE(signatures.rows.size() == std::size(kCollectives));
  REQUIRE(operations.rows.size() == std::size(kCollectives));

  std::string gpuxray = gpuxray::testing::gpuxrayBinary() + " analyze --format json " + dir.path().string();
  auto command = gpuxray::testing::runCommand(gpuxray);
  INFO(command.err);
  REQUIRE(command.exit_code == 0);
  auto json = nlohmann::json::parse(command.out);
  auto jsonRow = [&](const char* section, const char* table, const std::string& func) {
    for (const auto& row : json["sections"][section]["tables"][table]["rows"]) {
      if (row["operation"] == func) return row;
    }
    FAIL("no " << func << " in " << section << "/" << table);
    throw;
  };

  auto trace = exportPerfetto(a);
  for (size_t i = 0; i < std::size(kCollectives); ++i) {
    const Collective& c = kCollectives[i];
    INFO(c.func);
    auto rule = *busBandwidthRule(c.func, c.bytes, kRanks);
    double seconds = us[i] * 1e-6;
    CHECK(rule.data_bytes * rule.factor / seconds == Approx(kLinkBytesPerS));
    CHECK(gpuxray::testing::cell(signatures, rowOf(signatures, c.func), "busbw_median") ==
          Approx(kLinkBytesPerS).epsilon(1e-4));
    size_t op = rowOf(operations, c.func);
    CHECK(gpuxray::testing::cell(operations, op, "busbw") == Approx(kLinkBytesPerS).epsilon(1e-4));
    CHECK(gpuxray::testing::cell(operations, op, "algbw") == Approx(rule.data_bytes / seconds).epsilon(1e-4));
    CHECK(jsonRow("collectives", "signatures", c.func)["busbw_median"].get<double>() ==
          Approx(kLinkBytesPerS).epsilon(1e-4));
    CHECK(jsonRow("collective_bandwidth", "operations", c.func)["busbw"].get<double>() ==
          Approx(kLinkBytesPerS).epsilon(1e-4));

    size_t slices = 0;
    for (const auto& slice : trace.slices) {
      if (slice.name != c.func) continue;
      ++slices;
      CHECK(std::stod(slice.args.at("busbw (GB/s)")) == Approx(kLinkBytesPerS / 1e9).epsilon(1e-4));
      CHECK(std::stod(slice.args.at("algbw (GB/s)")) == Approx(rule.data_bytes / seconds / 1e9).epsilon(1e-4));
    }
    CHECK(slices == kRanks);
  }
}

TEST_CASE("nccl conventions: the export's flows join the collectives the analyses matched, by function") {
  // All four collectives are seq 1 on one communicator: NCCL numbers each function's operations on
  // its own, so each is its own collective of 4 members, with 3 arrows from the last to arrive.
  TempDir dir;
  writeRun(dir.path());
  auto a = gpuxray::testing::analyzeRun(dir.path().string());
  auto trace = exportPerfetto(a);
  size_t collective_flows = 0;
  for (const auto& flow : trace.flows) {
    const auto& from = trace.slices[flow.from];
    const auto& to = trace.slices[flow.to];
    if (from.name == "cudaLaunchKernel") continue;
    ++collective_flows;
    CHECK(from.name == to.name);
  }
  CHECK(collective_flows == std::size(kCollectives) * (kRanks - 1));
}

TEST_CASE("nccl conventions: a 4-rank Gather has one busbw in both report tables and the export") {
  // 8 MiB from each of 4 ranks in 1 ms: data size 4 x 8 MiB, busbw = that x 3/4 / 1 ms (the
  // collective_bandwidth table used to leave out the x 4, the export the 3/4 as well).
  TempDir dir;
  RunBuilder run("nccl-gather", kRanks);
  for (int r = 0; r < kRanks; ++r) {
    auto& rank = run.rank(r, "node-0", r);
    rank.communicator(kTp, "tp", r, kRanks, 1);
    rank.collective(kTp, "Gather", 1, 100, 1100, 8 * kMiB);
    rank.range("ProfilerStep#1", 0, 1200);
  }
  run.write(dir.path());
  const double busbw = 4.0 * 8 * kMiB * 3 / 4 / 1e-3;
  auto a = gpuxray::testing::analyzeRun(dir.path().string());
  const auto& signatures = gpuxray::testing::table(a.report, "collectives", "signatures");
  const auto& operations = gpuxray::testing::table(a.report, "collective_bandwidth", "operations");
  CHECK(gpuxray::testing::cell(signatures, rowOf(signatures, "Gather"), "busbw_median") == Approx(busbw));
  CHECK(gpuxray::testing::cell(operations, rowOf(operations, "Gather"), "busbw") == Approx(busbw));
  auto trace = exportPerfetto(a);
  size_t slices = 0;
  for (const auto& slice : trace.slices) {
    if (slice.name != "Gather") continue;
    ++slices;
    CHECK(std::stod(slice.args.at("busbw (GB/s)")) == Approx(busbw / 1e9));
  }
  CHECK(slices == kRanks);
}
