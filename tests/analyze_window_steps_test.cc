// Capture windows as step boundaries: a file whose capture recorded only some windows (one
// cudaProfilerStart/Stop range per step, say) and marks no steps gets one step per window.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>

#include "analyzer/analysis/session.h"
#include "analyzer/analysis/step_times.h"
#include "analyzer/compare/report_reader.h"
#include "tests/support/run_builder.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace gpuxray;

std::unique_ptr<analysis::Session> sessionOf(const std::filesystem::path& dir) {
  analysis::SessionOptions options;
  options.paths = {dir.string()};
  options.align = false;
  return std::make_unique<analysis::Session>(options);
}

}  // namespace

TEST_CASE("repeated capture windows are the steps when nothing marks them", "[window]") {
  testing::TempDir dir;
  testing::RunBuilder builder("windows", 1);
  auto& r0 = builder.rank(0, "node-0");
  r0.kernel("gemm", 100, 900);
  r0.kernel("gemm", 2100, 2900);
  r0.header.capture_window_plan = "cudaProfilerStart/Stop, every range";
  r0.header.capture_windows = {
      {r0.ns(2000), r0.ns(3000), format::WindowEdge::kProfilerApi, format::WindowEdge::kProfilerApi, ""},
      {r0.ns(0), r0.ns(1000), format::WindowEdge::kProfilerApi, format::WindowEdge::kProfilerApi, ""}};
  builder.write(dir.path());
  auto session = sessionOf(dir.path());
  const auto& input = session->input();
  CHECK(input.step_source == "capture windows");
  REQUIRE(input.steps[0].size() == 2);
  CHECK(input.steps[0][0].number == 0);
  CHECK(input.steps[0][0].window.start == static_cast<int64_t>(r0.ns(0)));
  CHECK(input.steps[0][1].window.end == static_cast<int64_t>(r0.ns(3000)));
}

TEST_CASE("NVTX step ranges win over capture windows", "[window]") {
  testing::TempDir dir;
  testing::RunBuilder builder("windows", 1);
  auto& r0 = builder.rank(0, "node-0");
  r0.kernel("gemm", 100, 900);
  r0.range("ProfilerStep#7", 0, 1000);
  r0.header.capture_windows = {{r0.ns(0), r0.ns(500), format::WindowEdge::kStep, format::WindowEdge::kStep, ""},
                               {r0.ns(500), r0.ns(1000), format::WindowEdge::kStep, format::WindowEdge::kStep, ""}};
  builder.write(dir.path());
  auto session = sessionOf(dir.path());
  const auto& input = session->input();
  CHECK(input.step_source == "NVTX ranges ProfilerStep#N");
  REQUIRE(input.steps[0].size() == 1);
  CHECK(input.steps[0][0].number == 7);
}

TEST_CASE("the report says which --step-marker found its steps, so that the page's export command finds them too") {
  testing::TempDir dir;
  testing::RunBuilder builder("markers", 1);
  auto& r0 = builder.rank(0, "node-0");
  r0.kernel("gemm", 100, 900);
  r0.kernel("gemm", 1100, 1900);
  r0.range("step 3", 0, 1000);  // as a training loop's own NVTX range names its steps
  r0.range("step 4", 1000, 2000);
  builder.write(dir.path());
  analysis::SessionOptions options;
  options.paths = {dir.path().string()};
  options.align = false;
  CHECK(report::renderJson(analysis::Session(options).analyze()).find("step_markers") == std::string::npos);
  options.analysis.step_markers = {"^step (\\d+)$"};
  auto report = analysis::Session(options).analyze();
  CHECK(report.run.steps == 2);
  CHECK(report.run.step_markers == std::vector<std::string>{"^step (\\d+)$"});
  CHECK(report::renderJson(report).find(R"("step_markers": [
      "^step (\\d+)$"
    ])") != std::string::npos);
  // Read back (diff's sides, --baseline), the report keeps them.
  const auto json = (dir.path() / "report.json").string();
  std::ofstream(json) << report::renderJson(report);
  CHECK(compare::readAnalyzeReport(json).run.step_markers == report.run.step_markers);
}

TEST_CASE("without steps, NVTX ranges numbered like steps are named with the --step-marker that finds them") {
  testing::TempDir dir;
  testing::RunBuilder builder("hint", 1);
  auto& r0 = builder.rank(0, "node-0");
  r0.kernel("gemm", 100, 900);
  r0.kernel("gemm", 1100, 1900);
  r0.range("train_step_3", 0, 1000);
  r0.range("train_step_4", 1000, 2000);
  r0.range("aten::linear, seq = 3, op_id = 12", 100, 200);  // emit_nvtx's: numbered, not a step
  builder.write(dir.path());
  analysis::SessionOptions options;
  options.paths = {dir.path().string()};
  options.align = false;
  auto report = analysis::Session(options).analyze();
  CHECK(report.run.steps == 0);
  CHECK(report.run.step_source ==
        R"(none; NVTX ranges such as "train_step_3" look like steps: --step-marker '^train_step_(\d+)$')");
  CHECK(report::renderText(report).find(
            "steps: none found (figures are for the whole capture); NVTX ranges such as \"train_step_3\"") !=
        std::string::npos);
  // The marker it names finds them.
  options.analysis.step_markers = {R"(^train_step_(\d+)$)"};
  CHECK(analysis::Session(options).analyze().run.steps == 2);
}

TEST_CASE("a long run's step table lists its slowest steps; a short run's, every step in order", "[steps]") {
  auto tableOf = [](size_t step_count, size_t top) {
    analysis::StepTimesResult result;
    result.step_source = "test";
    for (size_t i = 0; i < step_count; ++i) {
      // Step 7 slowest, then step 3; the rest alike.
      int64_t ns = i == 7 ? 30'000'000 : i == 3 ? 25'000'000 : 20'000'000;
      result.steps.push_back({static_cast<int64_t>(i), ns, 0, 1});
    }
    report::Report report;
    analysis::presentStepTimes(result, top, report);
    REQUIRE(report.sections.size() == 1);
    REQUIRE(report.sections[0].tables.size() == 2);
    return report.sections[0].tables[1];
  };
  report::Table short_run = tableOf(20, 10);
  CHECK(short_run.title == "Per step");
  REQUIRE(short_run.rows.size() == 20);
  for (size_t i = 0; i < 20; ++i) CHECK(short_run.rows[i][0].number == static_cast<double>(i));

  report::Table long_run = tableOf(21, 10);
  CHECK(long_run.title == "Per step: 10 of 21 steps, slowest first");
  REQUIRE(long_run.rows.size() == 10);
  CHECK(long_run.rows[0][0].number == 7);
  CHECK(long_run.rows[1][0].number == 3);
  CHECK(long_run.rows[2][0].number == 0);  // ties keep step order
  CHECK(long_run.rows[9][0].number == 8);
}
