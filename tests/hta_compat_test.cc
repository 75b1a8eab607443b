// --compat hta against Holistic Trace Analysis itself: the reference figures HTA 0.6.1 gave on the
// real traces in ../shared/traces (their README), reproduced to the microsecond and to 0.01
// percentage points, from the JSON and from the files `gpuxray convert` writes; and HTA's rules one
// by one on hand-made traces.

#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "analyzer/analysis/hta_compat.h"
#include "analyzer/analysis/session.h"
#include "analyzer/load/rank_writer.h"
#include "analyzer/load/run_loader.h"
#include "proto/file_layout.h"
#include "tests/support/kineto_traces.h"
#include "tests/support/temp_dir.h"

namespace {

namespace analysis = gpuxray::analysis;
namespace hta = gpuxray::analysis::hta;
namespace report = gpuxray::report;
using gpuxray::testing::kernelEvent;
using gpuxray::testing::launchEvent;
using gpuxray::testing::TempDir;

struct HtaRow {
  int rank;
  double span, idle, compute, non_compute;  // µs
  double idle_pct, compute_pct, non_compute_pct, overlap_pct;
};

report::Report analyzeHta(const std::string& dir, bool include_last_step) {
  // As `analyze --compat hta`: every rank on its own clock.
  analysis::SessionOptions options;
  options.paths = {dir};
  options.align = false;
  options.analysis.hta_compat = true;
  options.analysis.include_last_step = include_last_step;
  report::Report with_events = analysis::Session(options).analyze();
  options.keep_events = false;  // as the command runs it: each rank digested as it is read
  report::Report digested = analysis::Session(options).analyze();
  REQUIRE(report::renderJson(digested) == report::renderJson(with_events));
  return digested;
}

const report::Table& table(const report::Report& r, const std::string& id) {
  for (const auto& s : r.sections) {
    for (const auto& t : s.tables) {
      if (s.id == "hta" && t.id == id) return t;
    }
  }
  FAIL("no HTA table " << id);
  throw;
}

double cell(const report::Table& t, size_t row, const std::string& key) {
  for (size_t c = 0; c < t.columns.size(); ++c) {
    if (t.columns[c].key == key) return t.rows.at(row).at(c).number;
  }
  FAIL("no column " << key);
  return 0;
}

void checkAgainst(const report::Report& r, const std::vector<HtaRow>& expected) {
  const auto& breakdown = table(r, "temporal_breakdown");
  const auto& overlap = table(r, "comm_comp_overlap");
  REQUIRE(breakdown.rows.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const HtaRow& e = expected[i];
    INFO("rank " << e.rank);
    CHECK(cell(breakdown, i, "rank") == e.rank);
    CHECK(cell(breakdown, i, "span_us") == e.span);
    CHECK(cell(breakdown, i, "idle_us") == e.idle);
    CHECK(cell(breakdown, i, "compute_us") == e.compute);
    if (e.non_compute >= 0) CHECK(cell(breakdown, i, "non_compute_us") == e.non_compute);
    CHECK(std::fabs(cell(breakdown, i, "idle_pct") - e.idle_pct) <= 0.01);
    CHECK(std::fabs(cell(breakdown, i, "compute_pct") - e.compute_pct) <= 0.01);
    if (e.non_compute_pct >= 0) CHECK(std::fabs(cell(breakdown, i, "non_compute_pct") - e.non_compute_pct) <= 0.01);
    if (e.overlap_pct >= 0) CHECK(std::fabs(cell(overlap, i, "overlap_pct") - e.overlap_pct) <= 0.01);
  }
}

// The reference table of ../shared/traces/README.md (HTA 0.6.1, default settings).
const std::vector<std::pair<std::string, std::vector<HtaRow>>> kReference = {
    {"hta_sampled_2rank",
     {{0, 600058, 321378, 106252, 172428, 53.56, 17.71, 28.74, 11.81},
      {1, 600674, 328671, 135548, 136455, 54.72, 22.57, 22.72, 20.05}}},
    {"hta_nccl_data_rank0_of2", {{0, 435586, 338781, 75169, 21636, 77.78, 17.26, 4.97, 14.31}}},
    {"tracelens_b200_rank0_of8", {{0, 84486, 73669, 10153, 664, 87.20, 12.02, 0.79, 0.00}}},
    // The traces added later (the README's second table); the ROCm trace has no communication (-1).
    {"hta_mi250_rocm_rank0", {{0, 8911, 8780, 96, 35, 98.53, 1.08, 0.39, -1}}},
    {"hta_trace_diff/control", {{3, 383404, 62119, 234760, 86525, 16.20, 61.23, 22.57, 47.03}}},
    {"hta_trace_diff/test", {{1, 628371, 46910, 429216, 152245, 7.47, 68.31, 24.23, 68.80}}},
};

}  // namespace

TEST_CASE("hta: the shared traces give HTA's own figures") {
  for (const auto& [name, rows] : kReference) {
    auto dir = gpuxray::testing::sharedTraces(name);
    if (!dir) continue;
    INFO(name);
    checkAgainst(analyzeHta(dir->string(), false), rows);
  }
}

TEST_CASE("hta: with the last step included, the second reference table") {
  auto dir = gpuxray::testing::sharedTraces("hta_sampled_2rank");
  if (!dir) return;
  // The README gives no non-compute percentage for this table; its µs figure is span - idle - compute.
  checkAgainst(analyzeHta(dir->string(), true), {{0, 1222847, 675191, 210320, 337336, 55.21, 17.20, -1, 14.95},
                                                 {1, 1231186, 651136, 271973, 308077, 52.89, 22.09, -1, 19.93}});
}

TEST_CASE("hta: converted files give the same figures as the JSON they came from") {
  for (const auto& [name, rows] : kReference) {
    auto dir = gpuxray::testing::sharedTraces(name);
    if (!dir) continue;
    INFO(name);
    TempDir out;
    auto run = gpuxray::load::loadRun({dir->string()}, {});
    for (const auto& rank : run.ranks) {
      gpuxray::load::writeRankTrace(rank, out / gpuxray::format::traceFileName(rank.rank, "", 0), rank.path);
    }
    checkAgainst(analyzeHta(out.path().string(), false), rows);
  }
}

TEST_CASE("hta: rounding to whole microseconds, percentages and kernel types as HTA has them") {
  CHECK(hta::roundedStart(1'000'001, false) == 1'001'000);
  CHECK(hta::roundedStart(1'000'000, false) == 1'000'000);
  CHECK(hta::roundedEnd(1'000'001, 1'002'999, false) == 1'002'000);
  CHECK(hta::roundedStart(1'000'001, true) == 1'000'001);  // whole-µs traces are left alone
  // ts + dur in doubles: .655 + .345 is exactly 1 in decimals, and in doubles too here.
  CHECK(hta::roundedEnd(4458676522690655, 4458676522690655 + 156345, false) == 4458676522847000);
  CHECK(hta::percent(1, 3) == 33.33);
  CHECK(hta::percent(2, 3) == 66.67);
  CHECK(hta::percent(1, 8) == 12.5);
  CHECK(std::isnan(hta::percent(0, 0)));

  CHECK(hta::kernelTypeOfName("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)") == hta::KernelType::kCommunication);
  CHECK(hta::kernelTypeOfName("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)") ==
        hta::KernelType::kCommunication);
  CHECK(hta::kernelTypeOfName("Memcpy DtoH (Device -> Pageable)") == hta::KernelType::kMemory);
  CHECK(hta::kernelTypeOfName("Memset (Device)") == hta::KernelType::kMemory);
  CHECK(hta::kernelTypeOfName("Stream Sync") == hta::KernelType::kOther);
  CHECK(hta::kernelTypeOfName("Stream Wait Event") == hta::KernelType::kOther);
  CHECK(hta::kernelTypeOfName("cudaLaunchKernel") == hta::KernelType::kOther);
  CHECK(hta::kernelTypeOfName("void gemm<float>()") == hta::KernelType::kComputation);
  // DeepEP's communication kernels are not NCCL's: HTA counts them as computation.
  CHECK(hta::kernelTypeOfName("void deep_ep::intranode::dispatch<8>(int*)") == hta::KernelType::kComputation);
}

TEST_CASE("hta: the last ProfilerStep is dropped by launch time, syncs count as busy, gpuxray differs") {
  // Two steps starting at 1000 and 2000. Kernels launched at 1010 and 1500 are kept; the one launched
  // at 2000 (the last step's start) is dropped. A stream sync fills 1300-1400, which HTA calls busy.
  std::string events = "[" + std::string(R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 7, "tid": 7, "ts": 1000, "dur": 1000},
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 7, "tid": 7, "ts": 2000, "dur": 1000},)") +
                       launchEvent("1010", 1) + "," + kernelEvent("void a()", "1100", "200", 7, 1) + "," +
                       launchEvent("1500", 2) + "," + kernelEvent("void b()", "1600", "100", 7, 2) + "," +
                       launchEvent("2000", 3) + "," + kernelEvent("void c()", "2100", "100", 7, 3) + "," +
                       R"({"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 1300, "dur": 100,
  "args": {"device": 0, "stream": 7, "correlation": 4}})" + "," + launchEvent("1290", 4, "cudaStreamSynchronize") + "]";
  TempDir dir;
  gpuxray::testing::writeText(dir.path() / "run" / "rank0.json",
                              R"({"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": )" + events + "}");
  auto r = analyzeHta(dir / "run", false);
  const auto& breakdown = table(r, "temporal_breakdown");
  // Span 1100-1700 = 600; busy 1100-1400 and 1600-1700 = 400; compute 200 + 100.
  CHECK(cell(breakdown, 0, "span_us") == 600);
  CHECK(cell(breakdown, 0, "idle_us") == 200);
  CHECK(cell(breakdown, 0, "compute_us") == 300);
  CHECK(cell(breakdown, 0, "non_compute_us") == 100);  // the sync
  const auto& idle = table(r, "idle_time_breakdown");
  REQUIRE(idle.rows.size() == 1);
  // The gap 1400-1600 before b: b was launched at 1500, after the sync ended at 1400, so a host wait.
  CHECK(cell(idle, 0, "host_wait_us") == 200);
  // results.hta holds the same figures in ns, and says the last step was dropped.
  const report::ResultValue* result = nullptr;
  for (const auto& [id, value] : r.results) {
    if (id == "hta") result = &value;
  }
  REQUIRE(result != nullptr);
  CHECK(result->find("last_step_dropped")->asBool());
  CHECK(result->find("profiler_step_names")->asInteger() == 2);
  const auto& ranks = result->find("ranks")->items();
  REQUIRE(ranks.size() == 1);
  CHECK(ranks[0].find("span_ns")->asInteger() == 600'000);
  CHECK(ranks[0].find("non_compute_ns")->asInteger() == 100'000);
  CHECK(ranks[0].find("comm_comp_overlap_pct")->kind() == report::ResultValue::Kind::kNull);  // no communication
  CHECK(ranks[0].find("idle_time_breakdown")->items().at(0).find("host_wait_ns")->asInteger() == 200'000);

  auto all = analyzeHta(dir / "run", true);
  CHECK(cell(table(all, "temporal_breakdown"), 0, "span_us") == 1100);  // c is back: 1100-2200
}
