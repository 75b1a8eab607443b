// The session (analysis/session.h): the one pipeline of every command that reads a run, and the one
// grammar of --ranks, --steps and --window (analysis/run_selection.h) that analyze, export and
// convert share.

#include <catch2/catch.hpp>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "analyzer/analysis/run_selection.h"
#include "analyzer/analysis/session.h"
#include "analyzer/errors.h"
#include "analyzer/report/html_report.h"
#include "tests/support/build_outputs.h"
#include "tests/support/run_builder.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

namespace analysis = gpuxray::analysis;
using gpuxray::testing::RunBuilder;
using gpuxray::testing::TempDir;

// Two ranks on two hosts, three ProfilerSteps 1000 µs apart; the first GPU activity is at 100 µs,
// after an NVTX range (the first event of any kind) at 0. Host 1's clock is 5 ms ahead.
void writeRun(const std::filesystem::path& dir) {
  RunBuilder run("session", 2);
  for (int r = 0; r < 2; ++r) {
    auto& rank = run.rank(r, r == 0 ? "node-0" : "node-1");
    rank.clock_skew_us = r == 0 ? 0 : 5000;
    rank.communicator(1, "dp", r, 2, 2);
    rank.range("setup", 0, 50);
    for (int step = 0; step < 3; ++step) {
      double t = 100 + step * 1000;
      rank.range("ProfilerStep#" + std::to_string(step + 1), t, t + 950);
      rank.kernel("gemm", t, t + 600);
      rank.collective(1, "AllReduce", static_cast<uint64_t>(step + 1), t + 600, t + 900, 64 << 20);
    }
  }
  run.write(dir);
}

}  // namespace

TEST_CASE("run selection: one grammar for --window, --ranks and --steps", "[session]") {
  CHECK(analysis::parseWindow("10:20").from_ns == 10'000'000'000);
  CHECK(analysis::parseWindow("10:20").to_ns == 20'000'000'000);
  CHECK(analysis::parseWindow("200ms:1.2s").from_ns == 200'000'000);
  CHECK(analysis::parseWindow("200ms:1.2s").to_ns == 1'200'000'000);
  CHECK(analysis::parseWindow("2s:").to_ns == analysis::TimeWindow::kOpenEnd);
  CHECK(analysis::parseWindow(":500us").from_ns == 0);
  CHECK(analysis::parseWindow(":").to_ns == analysis::TimeWindow::kOpenEnd);  // the whole run
  CHECK(analysis::parseWindow(":500\u00b5s").to_ns == 500'000);
  CHECK(analysis::parseWindow("100ns:0.5").to_ns == 500'000'000);
  for (const char* bad : {"10", "3:2", "1:1", "-1:2", "1m:2", "a:b", "1s:2parsecs"}) {
    INFO(bad);
    CHECK_THROWS_WITH(analysis::parseWindow(bad),
                      "--window '" + std::string(bad) +
                          "': expected START:END from the run's first GPU activity, in s (default), ms, us or ns, "
                          "END after START, e.g. 10:20, 200ms:1.2s or 2s:");
  }
  auto selection = analysis::parseRunSelection({"0,2-3", "7"}, {"10-12"}, "");
  CHECK(selection.ranks == std::vector<int32_t>{0, 2, 3, 7});
  CHECK(selection.steps == std::vector<int64_t>{10, 11, 12});
  CHECK_FALSE(selection.window);
  CHECK_THROWS_WITH(analysis::parseRunSelection({"0-x"}, {}, ""),
                    "--ranks '0-x': expected numbers and ranges such as 0,2,4-7");
  CHECK_THROWS_WITH(analysis::parseRunSelection({}, {"5-2"}, ""),
                    "--steps '5-2': expected numbers and ranges such as 0,2,4-7");
}

TEST_CASE("session: --window is measured from the first GPU activity after alignment", "[session]") {
  TempDir dir;
  writeRun(dir.path());
  analysis::SessionOptions options;
  options.paths = {dir.path().string()};
  analysis::Session whole(options);
  REQUIRE(whole.clock());
  // Aligned: node-1's 5 ms are taken out, so both ranks start their first kernel at the same time.
  const auto& run = whole.run();
  REQUIRE(run.ranks.size() == 2);
  CHECK(run.ranks[1].activities.front().start_ns == run.ranks[0].activities.front().start_ns);
  CHECK(whole.windowOriginNs() == run.ranks[0].activities.front().start_ns);
  CHECK_FALSE(whole.window());
  CHECK(whole.recordsOutsideWindow() == 0);
  CHECK(whole.input().steps[0].size() == 3);

  // The second step only, on both ranks: [1000, 2000) µs from the first kernel.
  options.selection = analysis::parseRunSelection({}, {}, "1ms:2ms");
  analysis::Session second(options);
  CHECK(second.window()->start == whole.windowOriginNs() + 1'000'000);
  CHECK(second.window()->end == whole.windowOriginNs() + 2'000'000);
  for (size_t r = 0; r < second.run().ranks.size(); ++r) {
    INFO(r);
    CHECK(second.run().ranks[r].activities.size() == 2);  // its gemm and all-reduce kernel
    REQUIRE(second.input().steps[r].size() == 1);
    CHECK(second.input().steps[r][0].number == 2);
  }
  CHECK(second.recordsOutsideWindow() > 0);
  CHECK(second.warnings().back().find("--window 1ms:2ms: ") == 0);

  // Unaligned, rank 1's own clock puts its first step 5 ms later: it is outside the same window.
  options.align = false;
  options.selection = analysis::parseRunSelection({}, {}, "0:1.5ms");
  analysis::Session unaligned(options);
  CHECK_FALSE(unaligned.clock());
  CHECK(unaligned.run().ranks[0].activities.size() == 3);  // step 2's all-reduce starts at 1.6 ms
  CHECK(unaligned.run().ranks[1].activities.empty());
}

TEST_CASE("session: --ranks loads only those files; --steps bounds the timeline", "[session]") {
  TempDir dir;
  writeRun(dir.path());
  analysis::SessionOptions options;
  options.paths = {dir.path().string()};
  options.selection = analysis::parseRunSelection({"1"}, {"2"}, "");
  analysis::Session session(options);
  REQUIRE(session.run().ranks.size() == 1);
  CHECK(session.run().ranks[0].rank == 1);
  auto timeline = session.timelineWindow();
  REQUIRE(timeline);
  CHECK(timeline->start == session.input().steps[0][1].window.start);
  CHECK(timeline->end == session.input().steps[0][1].window.end);
  auto report = session.analyze();
  CHECK(report.run.ranks == std::vector<int32_t>{1});
  CHECK(report.run.steps == 1);  // --steps 2

  options.selection = analysis::parseRunSelection({}, {"9"}, "");
  analysis::Session missing(options);
  CHECK_THROWS_WITH(missing.timelineWindow(),
                    "--steps: the run has no step with these numbers (steps from NVTX ranges ProfilerStep#N)");
  // Steps are found in what the window kept: step 1 (100-1050 µs) is gone from 1.6 ms on, and step
  // 2's timeline starts where the window does.
  options.selection = analysis::parseRunSelection({}, {"1"}, "1.5ms:");
  analysis::Session without_step(options);
  CHECK_THROWS_WITH(without_step.timelineWindow(),
                    "--steps: no step with these numbers reaches into --window 1.5ms: (steps from NVTX ranges "
                    "ProfilerStep#N)");
  options.selection = analysis::parseRunSelection({}, {"2"}, "1.5ms:");
  analysis::Session windowed(options);
  REQUIRE(windowed.input().steps[0].size() == 1);
  CHECK(windowed.input().steps[0][0].window.start < windowed.window()->start);
  CHECK(windowed.timelineWindow()->start == windowed.window()->start);
  CHECK(windowed.timelineWindow()->end == windowed.input().steps[0][0].window.end);
}

TEST_CASE("session: analyze and export and convert read --window alike", "[session]") {
  TempDir dir;
  writeRun(dir.path() / "run");
  std::string gpuxray = gpuxray::testing::gpuxrayBinary() + " ";
  std::string run = (dir.path() / "run").string();
  auto analyzed = gpuxray::testing::runCommand(gpuxray + "analyze " + run + " --window 0.001: --format json");
  REQUIRE(analyzed.exit_code == 0);
  auto exported = gpuxray::testing::runCommand(gpuxray + "export perfetto " + run + " -o " +
                                               (dir.path() / "a.pftrace").string() + " --window 0.001:");
  INFO(exported.err);
  REQUIRE(exported.exit_code == 0);
  // The same records are left out by both, and the export says how many, from the same origin.
  size_t at = analyzed.out.find("--window 0.001:: ");
  REQUIRE(at != std::string::npos);
  std::string count = analyzed.out.substr(at + 17, analyzed.out.find(' ', at + 17) - at - 17);
  CHECK(exported.out.find("left out: " + count + " records outside ") != std::string::npos);
  CHECK(exported.out.find(" to the end from the first GPU activity") != std::string::npos);
  auto converted = gpuxray::testing::runCommand(gpuxray + "convert " + run + " -o " + (dir.path() / "c.json").string() +
                                                " --window 1ms: --ranks 0");
  INFO(converted.err);
  CHECK(converted.exit_code == 0);
  CHECK(converted.out.find("1 of 2 ranks") != std::string::npos);
  auto to_files = gpuxray::testing::runCommand(gpuxray + "convert " + run + " -o " + (dir.path() / "files").string() +
                                               " --window 1ms:");
  CHECK(to_files.exit_code == 1);
  CHECK(to_files.err.find("--window and --steps go with a timeline output") != std::string::npos);
}

TEST_CASE("session: keeping every event, a run that cannot fit is refused from its first ranks", "[session]") {
  TempDir dir;
  RunBuilder run("budget", 16);
  for (int r = 0; r < 16; ++r) {
    auto& rank = run.rank(r, "node-" + std::to_string(r / 8), r % 8);
    for (int k = 0; k < 2000; ++k) rank.kernel("gemm", k * 10.0, k * 10.0 + 8);
  }
  run.write(dir.path());
  auto sessionWith = [&](uint64_t budget, size_t& files_done) {
    analysis::SessionOptions options;
    options.paths = {dir.path().string()};
    options.jobs = 1;
    options.keep_events = true;
    options.memory_budget_bytes = budget;
    options.progress = [&](size_t done, size_t) { files_done = done; };
    return analysis::Session(options);
  };
  size_t done = 0;
  auto one = sessionWith(0, done);  // no budget
  REQUIRE(one.run().ranks.size() == 16);
  uint64_t per_rank = one.run().ranks[0].heldBytes();
  REQUIRE(per_rank > 2000 * sizeof(gpuxray::model::GpuActivity));

  // A budget a fifth of what 16 ranks hold: refused at the fourth rank.
  done = 0;
  try {
    sessionWith(16 * per_rank / 5, done);
    FAIL("the session loaded a run over its budget");
  } catch (const gpuxray::MemoryBudgetError& e) {
    std::string message = e.what();
    CHECK(message.find("for 16 ranks") != std::string::npos);
    CHECK(message.find("from the first 4)") != std::string::npos);
    CHECK(message.find("--max-memory") != std::string::npos);
  }
  CHECK(done == 16);  // every file was accounted for (a reduce waiting on file 0 would otherwise wait)

  // Within a fourth over the budget: the projection lets it load (the first ranks may be the largest).
  done = 0;
  CHECK(sessionWith(16 * per_rank * 9 / 10, done).run().ranks.size() == 16);
}

TEST_CASE("session: analyze, report and export keep every event within --max-memory alike", "[session]") {
  TempDir dir;
  writeRun(dir.path() / "run");
  std::string gpuxray = gpuxray::testing::gpuxrayBinary() + " ";
  std::string run = (dir.path() / "run").string();
  std::vector<std::string> commands = {"analyze " + run + " --critical-path",
                                       "export perfetto " + run + " -o " + (dir.path() / "a.pftrace").string()};
  if (gpuxray::report::htmlReportAvailable())
    commands.push_back("report " + run + " --critical-path -o " + (dir.path() / "a.html").string());
  for (const std::string& command : commands) {
    INFO(command);
    auto bad = gpuxray::testing::runCommand(gpuxray + command + " --max-memory lots");
    CHECK(bad.exit_code == 1);
    CHECK(bad.err.find("--max-memory 'lots': expected a size") != std::string::npos);
    auto unlimited = gpuxray::testing::runCommand(gpuxray + command + " --max-memory 0");
    INFO(unlimited.err);
    CHECK(unlimited.exit_code == 0);
  }
}
