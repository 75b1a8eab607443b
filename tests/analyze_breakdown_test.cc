// Golden tests for the time breakdown and the overlap analysis, with answers worked out by hand,
// and for the report's three forms and --fail-on.

#include <fmt/core.h>

#include <catch2/catch.hpp>
#include <string>

#include "analyzer/analysis/overlap.h"
#include "analyzer/analysis/session.h"
#include "analyzer/analysis/step_overview.h"
#include "analyzer/analysis/time_breakdown.h"
#include "tests/support/analyzed_run.h"
#include "tests/support/build_outputs.h"
#include "tests/support/run_builder.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::testing::analyze;
using gpuxray::testing::cell;
using gpuxray::testing::RunBuilder;
using gpuxray::testing::table;
using gpuxray::testing::TempDir;
namespace analysis = gpuxray::analysis;
namespace report = gpuxray::report;

constexpr uint64_t kDp = 0xD000000000000001ull;

// Two ranks, two 1000 µs steps each:
//   0-600 compute | 600-900 all-reduce alone (exposed) | 900-950 compute | 950-1000 idle
// except that rank 1's all-reduce runs beside a compute kernel 600-700 (100 µs hidden), and
// rank 1's last kernel of each step is launched after the GPU ran dry (host-bound idle 20 µs).
void writeRun(const std::filesystem::path& dir) {
  RunBuilder run("golden-overlap", 2);
  for (int r = 0; r < 2; ++r) {
    auto& rank = run.rank(r, "node-0", r);
    rank.communicator(kDp, "dp", r, 2, 1);
    for (int step = 0; step < 2; ++step) {
      double t = step * 1000.0;
      rank.range("ProfilerStep#" + std::to_string(step + 4), t, t + 1000);
      rank.kernel("gemm", t, t + 600);
      rank.collective(kDp, "AllReduce", static_cast<uint64_t>(step + 1), t + 600, t + 900, 64 << 20);
      if (r == 1) {
        rank.kernel("side_kernel", t + 600, t + 700, 21);
        // GPU idle 900-920, its launch came at 910 (after the idle began): host-bound.
        rank.kernel("epilogue", t + 920, t + 950, 7, 10);
      } else {
        rank.kernel("epilogue", t + 900, t + 950);
      }
    }
  }
  run.write(dir);
}

}  // namespace

TEST_CASE("analyze: steps come from ProfilerStep ranges, numbered as named") {
  TempDir dir;
  writeRun(dir.path());
  analysis::SessionOptions options;
  options.paths = {dir.path().string()};
  analysis::Session session(options);
  const auto& input = session.input();
  REQUIRE(input.steps.size() == 2);
  REQUIRE(input.steps[0].size() == 2);
  CHECK(input.steps[0][0].number == 4);
  CHECK(input.steps[0][1].number == 5);
  CHECK(input.steps[1][1].window.length() == 1'000'000);
}

TEST_CASE("analyze: time breakdown splits each step into compute, exposed communication and idle by cause") {
  TempDir dir;
  writeRun(dir.path());
  auto a = analyze(dir.path().string());
  const auto& ranks = table(a.report, "time_breakdown", "ranks");
  REQUIRE(ranks.rows.size() == 2);
  // Rank 0: compute 650 of each 1000, exposed comm 300, idle 50. Step 4's idle end is host-bound
  // (step 5's first kernel was launched at 995, after the GPU ran dry at 950); step 5's is "other"
  // (nothing comes after it).
  CHECK(cell(ranks, 0, "compute_pct") == Approx(65.0));
  CHECK(cell(ranks, 0, "communication_pct") == Approx(30.0));
  CHECK(cell(ranks, 0, "idle_pct") == Approx(5.0));
  CHECK(cell(ranks, 0, "host_bound_pct") == Approx(2.5));
  CHECK(cell(ranks, 0, "other_idle_pct") == Approx(2.5));
  // Rank 1: compute 600 + 100 (side kernel) + 30 = 730; exposed comm 200; idle 20 + 50.
  CHECK(cell(ranks, 1, "compute_pct") == Approx(73.0));
  CHECK(cell(ranks, 1, "communication_pct") == Approx(20.0));
  CHECK(cell(ranks, 1, "idle_pct") == Approx(7.0));
  // The 20 µs gaps before the late-launched epilogues are host-bound too: (20 + 20 + 50) of 2000.
  CHECK(cell(ranks, 1, "host_bound_pct") == Approx(4.5));
  CHECK(a.report.metric("idle_pct")->value == Approx(7.0));
  CHECK(a.report.metric("host_bound_pct")->value == Approx(4.5));

  // The same as data, per step.
  auto result = analysis::computeTimeBreakdown(a.session->input());
  CHECK(result.per_step);
  REQUIRE(result.ranks.size() == 2);
  const auto& rank0 = result.ranks[0];
  REQUIRE(rank0.steps.size() == 2);
  CHECK(rank0.steps[0].step == 4);
  CHECK(rank0.steps[0].times.compute == 650'000);
  CHECK(rank0.steps[0].times.communication == 300'000);
  CHECK(rank0.steps[0].times.idle == 50'000);
  CHECK(rank0.steps[0].times.idle_split.host_bound == 50'000);
  CHECK(rank0.steps[1].step == 5);
  CHECK(rank0.steps[1].times.idle_split.other == 50'000);
  CHECK(result.ranks[1].totals.compute == 2 * 730'000);
  CHECK(result.ranks[1].totals.idle_split.host_bound == 90'000);
  CHECK(result.worst_idle == 1);

  // The median step as lanes: both steps last 1000 µs, so the first (step 4) is the lower middle.
  auto overview = analysis::computeStepOverview(a.session->input());
  CHECK(overview.step == 4);
  CHECK(overview.step_length_ns == 1'000'000);
  REQUIRE(overview.ranks.size() == 2);
  const auto& lanes = overview.ranks[0];
  int64_t start = lanes.window.start;
  REQUIRE(lanes.compute.intervals.size() == 2);
  CHECK(lanes.compute.intervals[0].start - start == 0);
  CHECK(lanes.compute.intervals[0].end - start == 600'000);
  CHECK(lanes.compute.intervals[1].start - start == 900'000);
  REQUIRE(lanes.communication.intervals.size() == 1);
  CHECK(lanes.communication.intervals[0].end - start == 900'000);
  CHECK(lanes.memory.intervals.empty());
  CHECK(lanes.compute.gaps_closed_up_to_ns == -1);
}

TEST_CASE("analyze: overlap and exposed communication per rank, communicator and collective") {
  TempDir dir;
  writeRun(dir.path());
  auto a = analyze(dir.path().string());
  const auto& ranks = table(a.report, "overlap", "ranks");
  REQUIRE(ranks.rows.size() == 2);
  CHECK(cell(ranks, 0, "overlap_pct") == Approx(0.0));
  CHECK(cell(ranks, 0, "exposed") == Approx(600'000));  // 300 µs in each of 2 steps
  CHECK(cell(ranks, 1, "overlap_pct") == Approx(100.0 / 3.0));
  CHECK(cell(ranks, 1, "exposed_per_step_median") == Approx(200'000));
  CHECK(a.report.metric("exposed_comm_pct")->value == Approx(30.0));
  CHECK(a.report.metric("overlap_pct")->value == Approx(0.0));
  const auto& top = table(a.report, "overlap", "top_exposed");
  REQUIRE(top.rows.size() == 1);
  CHECK(top.rows[0][0].text == "AllReduce");
  CHECK(cell(top, 0, "count") == 4);
  CHECK(cell(top, 0, "exposed") == Approx(2 * 300'000 + 2 * 200'000));
  REQUIRE_FALSE(a.report.findings.empty());
  CHECK(a.report.findings[0].summary.find("exposed communication takes 30.0 % of rank 0's step time") !=
        std::string::npos);

  auto result = analysis::computeOverlap(a.session->input());
  REQUIRE(result.ranks.size() == 2);
  CHECK(result.ranks[1].exposed_per_step_ns == std::vector<int64_t>{200'000, 200'000});
  CHECK(result.ranks[1].steps == std::vector<int64_t>{4, 5});
  CHECK(result.ranks[0].exposed_marks.size() == 2);
  REQUIRE(result.per_operation.size() == 1);
  CHECK(result.per_operation[0].operation == "AllReduce");
  CHECK(result.per_operation[0].count == 4);
  CHECK(result.per_operation[0].exposed_ns == 2 * 300'000 + 2 * 200'000);
  REQUIRE(result.per_communicator.size() == 1);
  CHECK(result.per_communicator[0].time_ns == 4 * 300'000);
  CHECK(result.worst == 0);
}

TEST_CASE("analyze: the CLI prints text, JSON and Markdown, and --fail-on sets exit code 3") {
  TempDir dir;
  writeRun(dir.path() / "run");
  std::string gpuxray = gpuxray::testing::gpuxrayBinary() + " analyze " + (dir / "run");
  auto text = gpuxray::testing::runCommand(gpuxray);
  INFO(text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("gpuxray analyze: run golden-overlap, 2 of 2 ranks on 1 host") != std::string::npos);
  CHECK(text.out.find("steps: 2 (from NVTX ranges ProfilerStep#N)") != std::string::npos);
  CHECK(text.out.find("30.0 %  communication not hidden by compute, % of step time, worst rank") != std::string::npos);

  auto json = gpuxray::testing::runCommand(gpuxray + " --format json");
  INFO(json.err);
  REQUIRE(json.exit_code == 0);
  CHECK(json.out.find("\"schema\": \"gpuxray.analyze\"") != std::string::npos);
  CHECK(json.out.find("\"exposed_comm_pct\": {\n      \"value\": 30") != std::string::npos);

  auto markdown = gpuxray::testing::runCommand(gpuxray + " --format markdown");
  REQUIRE(markdown.exit_code == 0);
  CHECK(markdown.out.find("## gpuxray: run `golden-overlap`") != std::string::npos);

  auto failing = gpuxray::testing::runCommand(gpuxray + " --fail-on 'exposed_comm_pct>20' --fail-on 'idle_pct>50'");
  CHECK(failing.exit_code == 3);
  CHECK(failing.err == "gpuxray: threshold violated: exposed_comm_pct = 30 (30.0 %), threshold >20\n");

  auto unknown = gpuxray::testing::runCommand(gpuxray + " --fail-on 'bubble>1'");
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.err.find("--fail-on 'bubble>1': no metric 'bubble'") != std::string::npos);
}

TEST_CASE("analyze: the step overview keeps a lane's shape past its cap by closing the shortest gaps") {
  // One step of 600 one-microsecond kernels: after every third kernel a 5 µs gap, else 2 µs. Past
  // 256 intervals the 2 µs gaps close (the 344 shortest of 599 are all 2 µs), leaving the 200 longer
  // gaps between 201 intervals.
  TempDir dir;
  RunBuilder run("golden-overview-cap", 1);
  auto& rank = run.rank(0, "node-0", 0);
  double t = 0;
  std::vector<double> starts;
  for (int i = 0; i < 600; ++i) {
    starts.push_back(t);
    rank.kernel("k", t, t + 1);
    t += 1 + (i % 3 == 0 ? 5 : 2);
  }
  rank.range("ProfilerStep#0", 0, t);
  run.write(dir.path());
  auto a = analyze(dir.path().string());
  auto overview = analysis::computeStepOverview(a.session->input());
  REQUIRE(overview.ranks.size() == 1);
  const auto& lane = overview.ranks[0].compute;
  CHECK(lane.merged_intervals == 600);
  CHECK(lane.busy_ns == 600'000);
  CHECK(lane.gaps_closed_up_to_ns == 2'000);
  REQUIRE(lane.intervals.size() == 201);
  CHECK(lane.intervals.size() <= analysis::OverviewLane::kMaxIntervals);
  int64_t start = overview.ranks[0].window.start;
  CHECK(lane.intervals.front().start - start == 0);
  CHECK(lane.intervals.front().end - start == 1'000);  // kernel 0 is followed by a 5 µs gap
  CHECK(lane.intervals[1].start - start == 6'000);
  CHECK(lane.intervals[1].end - start == static_cast<int64_t>((starts[3] + 1) * 1000));  // kernels 1-3 merged
  CHECK(lane.intervals.back().end - start == static_cast<int64_t>((starts.back() + 1) * 1000));
  for (size_t i = 1; i < lane.intervals.size(); ++i)
    CHECK(lane.intervals[i].start - lane.intervals[i - 1].end == 5'000);
}

TEST_CASE("analyze: --window keeps only the records that reach into it") {
  TempDir dir;
  writeRun(dir.path());
  analysis::SessionOptions whole;
  whole.paths = {dir.path().string()};
  analysis::Session all(whole);
  size_t activities = all.run().ranks[0].activities.size();
  // Step 5 only: [1000, 2000) µs from the first GPU activity. Step 4's kernels end by 950 µs; its
  // range ends at 1000 (kept: it touches the window's start). Bare numbers are seconds.
  for (const char* text : {"0.001:0.002", "1ms:2ms", "1000us:2000000ns"}) {
    analysis::SessionOptions windowed = whole;
    windowed.selection.window = analysis::parseWindow(text);
    analysis::Session session(windowed);
    CHECK(session.windowOriginNs() == all.windowOriginNs());
    CHECK(session.run().ranks[0].activities.size() == activities / 2);
    CHECK(session.run().ranks[0].nvtx.size() == 2);
    CHECK(session.recordsOutsideWindow() > 0);
    CHECK(session.warnings().back() ==
          fmt::format("--window {}: {} records outside it left out", text, session.recordsOutsideWindow()));
    CHECK(session.input().steps[0].size() == 2);
    CHECK(session.window()->start == all.windowOriginNs() + 1'000'000);
  }

  auto cli = gpuxray::testing::runCommand(gpuxray::testing::gpuxrayBinary() + " analyze " + dir.path().string() +
                                          " --window 1:2 --format json");
  CHECK(cli.exit_code == 0);
  CHECK(cli.out.find("--window 1:2: ") != std::string::npos);
}

TEST_CASE("analyze: a single unranked process's findings name it rank unknown, not rank -1") {
  TempDir dir;
  RunBuilder run("golden-unranked", 1);
  auto& rank = run.rank(0, "node-0", 0);
  rank.header.rank = -1;
  rank.kernel("gemm", 0, 10);
  rank.kernel("gemm", 990, 1000);  // idle 98 % between: the time-breakdown finding names the rank
  run.write(dir.path());
  analysis::SessionOptions options;
  options.paths = {dir.path().string()};
  options.align = false;
  auto report = analysis::Session(options).analyze();
  const auto idle = std::find_if(report.findings.begin(), report.findings.end(),
                                 [](const auto& f) { return f.analysis == "time_breakdown"; });
  REQUIRE(idle != report.findings.end());
  CHECK(idle->summary.starts_with("rank unknown's GPU is idle"));
}

TEST_CASE("report: past twice --top rows, a per-rank table keeps the worst --top, its title says by what") {
  report::Table t{"ranks", "", {{"rank", "rank"}, {"idle", "idle"}}, {}};
  auto rows = [&](size_t n) {
    t.title = "";
    t.rows.clear();
    for (size_t r = 0; r < n; ++r) {
      double idle = r == 17 ? 50 : r == 3 ? 40 : 10;  // rank 17 the most idle, then rank 3, the rest alike
      t.rows.push_back({report::Cell::of(static_cast<double>(r), report::Unit::kNone),
                        report::Cell::of(idle, report::Unit::kPercent)});
    }
  };
  auto idle = [](const std::vector<report::Cell>& row) { return row[1].number; };
  rows(20);
  report::keepWorstRows(t, 10, "ranks", "most idle first", idle);
  CHECK(t.title.empty());
  REQUIRE(t.rows.size() == 20);  // twice --top: all, in their order
  CHECK(t.rows[17][0].number == 17);
  rows(1024);
  report::keepWorstRows(t, 0, "ranks", "most idle first", idle);
  CHECK(t.rows.size() == 1024);  // --top 0: all
  report::keepWorstRows(t, 10, "ranks", "most idle first", idle);
  CHECK(t.title == "10 of 1,024 ranks, most idle first");
  REQUIRE(t.rows.size() == 10);
  CHECK(t.rows[0][0].number == 17);
  CHECK(t.rows[1][0].number == 3);
  for (size_t i = 2; i < 10; ++i)
    CHECK(t.rows[i][0].number == static_cast<double>(i < 5 ? i - 2 : i - 1));  // ties in order
  rows(21);
  t.title = "Per stream";
  report::keepWorstRows(t, 10, "streams", "most idle first", idle);
  CHECK(t.title == "Per stream: 10 of 21 streams, most idle first");
}

TEST_CASE("analyze: a 24-rank run's per-rank tables list the 10 worst ranks; the typed results keep all 24") {
  TempDir dir;
  RunBuilder run("many-ranks", 24);
  for (int r = 0; r < 24; ++r) {
    auto& rank = run.rank(r, "node-" + std::to_string(r / 8), r % 8);
    rank.communicator(kDp, "dp", r, 24, 3);
    // Rank 13's GPU idles longest before the all-reduce (its last kernel ends earliest), then rank 5's.
    double compute_end = r == 13 ? 500 : r == 5 ? 600 : 800 + r;
    rank.range("ProfilerStep#0", 0, 1000);
    rank.kernel("gemm", 0, compute_end);
    rank.collective(kDp, "AllReduce", 1, 900, 1000, 64 << 20);
  }
  run.write(dir.path());
  auto analyzed = analyze(dir.path().string());
  const report::Table& ranks = table(analyzed.report, "time_breakdown", "ranks");
  CHECK(ranks.title == "10 of 24 ranks, most idle first");
  REQUIRE(ranks.rows.size() == 10);
  CHECK(cell(ranks, 0, "rank") == 13);
  CHECK(cell(ranks, 1, "rank") == 5);
  const report::Table& overlap = table(analyzed.report, "overlap", "ranks");
  CHECK(overlap.rows.size() == 10);
  CHECK(overlap.title == "10 of 24 ranks, most exposed first");
  std::string json = report::renderJson(analyzed.report);
  CHECK(json.find("\"rank\":23") != std::string::npos);  // the typed results hold every rank
}
