// `gpuxray diff`'s inputs and --fail-on's change limits: reports that cannot be compared are one-line
// errors naming the file; kernel names and findings are matched across runs by their normalized forms.

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include "analyzer/analysis/step_times.h"
#include "analyzer/analysis/thresholds.h"
#include "analyzer/compare/run_comparison.h"
#include "analyzer/errors.h"
#include "tests/support/build_outputs.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

using gpuxray::testing::runCommand;
using gpuxray::testing::TempDir;

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::string reportOfVersion(int version) {
  return "{\"schema\": \"gpuxray.analyze\", \"schema_version\": " + std::to_string(version) +
         ", \"run\": {\"run_id\": \"r\", \"world_size\": 1, \"ranks\": [0]}, \"metrics\": {}, \"findings\": []}";
}

}  // namespace

TEST_CASE("diff: reports of schema versions it cannot compare are a one-line error naming the file") {
  TempDir dir;
  write(dir / "v1.json", reportOfVersion(1));
  write(dir / "v3.json", reportOfVersion(3));
  write(dir / "v2.json", reportOfVersion(2));
  auto result = runCommand(gpuxray::testing::gpuxrayBinary() + " diff " + (dir / "v1.json") + " " + (dir / "v3.json"));
  CHECK(result.exit_code == 2);
  CHECK(result.out.empty());
  // One line, naming a file and the problem (either side may be read first: they are read at once).
  REQUIRE(std::count(result.err.begin(), result.err.end(), '\n') == 1);
  bool names_v1 =
      result.err.find(dir / "v1.json" + ": report schema version 1, which cannot be compared") != std::string::npos;
  bool names_v3 =
      result.err.find(dir / "v3.json" + ": report schema version 3, which cannot be compared") != std::string::npos;
  CHECK((names_v1 || names_v3));
  auto newer = runCommand(gpuxray::testing::gpuxrayBinary() + " diff " + (dir / "v2.json") + " " + (dir / "v3.json"));
  CHECK(newer.exit_code == 2);
  CHECK(newer.err == "gpuxray: error: " + (dir / "v3.json") +
                         ": report schema version 3, which cannot be compared: this gpuxray compares version 2 reports "
                         "(it was written by a newer gpuxray); analyze the run again with this gpuxray\n");
  // A minimal version 2 report against itself: nothing to compare, nothing changed.
  auto same = runCommand(gpuxray::testing::gpuxrayBinary() + " diff " + (dir / "v2.json") + " " + (dir / "v2.json"));
  CHECK(same.exit_code == 0);
  auto baseline =
      runCommand(gpuxray::testing::gpuxrayBinary() + " analyze " + (dir / "v2.json") + " --baseline " + (dir / "v1.json"));
  CHECK(baseline.exit_code == 2);
}

TEST_CASE("diff: kernel names are compared without return type and parameters, template arguments kept") {
  using gpuxray::compare::normalizeKernelName;
  CHECK(normalizeKernelName("void gemm<128, 64>(float*, int)") == "gemm<128, 64>");
  CHECK(normalizeKernelName("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)") ==
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  CHECK(normalizeKernelName("void (anonymous namespace)::softmax_warp_forward<float, 4>(float*, float const*)") ==
        "(anonymous namespace)::softmax_warp_forward<float, 4>");
  CHECK(normalizeKernelName("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD (Device -> Device)");
  CHECK(normalizeKernelName("volta_sgemm_128x32_nt") == "volta_sgemm_128x32_nt");
  CHECK(normalizeKernelName("gemm<128, 64>") != normalizeKernelName("gemm<64, 64>"));
}

TEST_CASE("diff: a finding is the same finding when only its measurements changed") {
  using gpuxray::compare::findingKey;
  gpuxray::report::Finding before{
      "link_hotspots",
      gpuxray::report::Severity::kCritical,
      0,
      "slow link: node-01's NIC mlx5_2 moves data at 8.50 GB/s, 2.50x slower than the median of the "
      "run's other NICs (21.3 GB/s)",
      {},
      {},
      {}};
  gpuxray::report::Finding after = before;
  after.summary =
      "slow link: node-01's NIC mlx5_2 moves data at 15.0 GB/s, 1.60x slower than the median of the run's other "
      "NICs (24.1 GB/s)";
  CHECK(findingKey(before) == findingKey(after));
  gpuxray::report::Finding other_nic = before;
  other_nic.summary =
      "slow link: node-02's NIC mlx5_2 moves data at 8.50 GB/s, 2.50x slower than the median of the run's "
      "other NICs (21.3 GB/s)";
  CHECK(findingKey(before) != findingKey(other_nic));
  gpuxray::report::Finding rank4{"time_breakdown",
                                 gpuxray::report::Severity::kCritical,
                                 0,
                                 "exposed communication takes 33.1 % of rank 4's step time (35.9 ms per step)",
                                 {},
                                 {},
                                 {}};
  gpuxray::report::Finding rank5 = rank4;
  rank5.summary = "exposed communication takes 33.1 % of rank 5's step time (35.9 ms per step)";
  CHECK(findingKey(rank4) != findingKey(rank5));
  // Runs of other ranks: rank numbers and rank lists are masked, the rest of the identity kept.
  using gpuxray::compare::RankNumbers;
  CHECK(findingKey(rank4, RankNumbers::kIgnored) == findingKey(rank5, RankNumbers::kIgnored));
  gpuxray::report::Finding stage{"pipeline_bubbles",
                                 gpuxray::report::Severity::kWarning,
                                 0,
                                 "pipeline stage 1 (ranks 8, 9, 10-15) is the slowest: 1.11x the mean compute",
                                 {},
                                 {},
                                 {}};
  gpuxray::report::Finding wider = stage;
  wider.summary = "pipeline stage 1 (ranks 16-31) is the slowest: 1.20x the mean compute";
  CHECK(findingKey(stage, RankNumbers::kIgnored) == findingKey(wider, RankNumbers::kIgnored));
  CHECK(findingKey(stage, RankNumbers::kIgnored) ==
        "pipeline_bubbles: pipeline stage 1 (ranks #) is the slowest: # the mean compute");
  gpuxray::report::Finding stage2 = stage;
  stage2.summary = "pipeline stage 2 (ranks 16-31) is the slowest: 1.20x the mean compute";
  CHECK(findingKey(stage, RankNumbers::kIgnored) != findingKey(stage2, RankNumbers::kIgnored));
  // Words that merely start with "rank" keep their numbers.
  gpuxray::report::Finding ranked = rank4;
  ranked.summary = "ranking 4 kernels";
  CHECK(findingKey(ranked, RankNumbers::kIgnored) == "time_breakdown: ranking 4 kernels");
}

TEST_CASE("diff: a finding naming a rank is still there when the runs number their ranks differently") {
  using gpuxray::compare::Change;
  auto side = [](const char* label, int32_t world, const char* straggler) {
    gpuxray::compare::ComparisonSide s{label, "report", {}};
    s.report.run.world_size = world;
    for (int32_t r = 0; r < world; ++r) s.report.run.ranks.push_back(r);
    s.report.findings.push_back({"stragglers", gpuxray::report::Severity::kWarning, 0, straggler, {}, {}, {}});
    return s;
  };
  const char* rank3 = "rank 3 is the straggler: last into 120 of 400 collectives, 4.10 ms of waiting caused";
  const char* rank11 = "rank 11 is the straggler: last into 120 of 400 collectives, 4.30 ms of waiting caused";
  // Same ranks: rank 3 and rank 11 are two GPUs, so one finding is resolved and another is new.
  auto same_world = gpuxray::compare::compareRuns(side("a", 16, rank3), side("b", 16, rank11));
  REQUIRE(same_world.findings.size() == 2);
  CHECK(same_world.findings[0].change == Change::kGone);
  CHECK(same_world.findings[1].change == Change::kNew);
  // 16 ranks against 32: rank numbers name no common GPU; the straggler finding is still there, and said so.
  auto other_world = gpuxray::compare::compareRuns(side("a", 16, rank3), side("b", 32, rank11));
  REQUIRE(other_world.findings.size() == 1);
  CHECK(other_world.findings[0].change == Change::kSame);
  CHECK(other_world.findings[0].summary_after == rank11);
  CHECK(std::count(other_world.notes.begin(), other_world.notes.end(),
                   "findings that name ranks are matched without their rank numbers: the runs do not have the "
                   "same ranks") == 1);
}

TEST_CASE("thresholds: a signed --fail-on limit is a change, one ending in % a relative change, against the baseline") {
  using gpuxray::analysis::parseThreshold;
  using gpuxray::analysis::Threshold;
  CHECK(parseThreshold("step_time_ms>+5%").change == Threshold::Change::kRelative);
  CHECK(parseThreshold("step_time_ms>+5%").limit == 5);
  CHECK(parseThreshold("exposed_comm_pct>+2").change == Threshold::Change::kAbsolute);
  CHECK(parseThreshold("tokens_per_s<-10%").limit == -10);
  CHECK(parseThreshold("exposed_comm_pct>20").change == Threshold::Change::kNone);
  CHECK_THROWS_AS(parseThreshold("step_time_ms>5%"), gpuxray::UsageError);

  gpuxray::report::Report baseline, report;
  baseline.addMetric("step_time_ms", 100, gpuxray::report::Unit::kMilliseconds, "");
  baseline.addMetric("exposed_comm_pct", 10, gpuxray::report::Unit::kPercent, "");
  report.addMetric("step_time_ms", 104.9, gpuxray::report::Unit::kMilliseconds, "");
  report.addMetric("exposed_comm_pct", 12.5, gpuxray::report::Unit::kPercent, "");
  std::vector<std::string> known{"step_time_ms", "exposed_comm_pct", "tokens_per_s"};
  gpuxray::analysis::applyThresholds(
      {parseThreshold("step_time_ms>+5%"), parseThreshold("exposed_comm_pct>+2"), parseThreshold("tokens_per_s<-5%")},
      known, report, &baseline);
  // 104.9 against 100 is +4.9 %: within; 12.5 against 10 is +2.5 points: over; no tokens_per_s: a warning.
  REQUIRE(report.violations.size() == 1);
  CHECK(report.violations[0] == "exposed_comm_pct = 12.5 % against 10.0 % in the baseline (+2.5), threshold >+2");
  CHECK(report.warnings.size() == 1);
}

namespace {

// A report holding only step times, as presentStepTimes writes them (ms per step).
gpuxray::compare::ComparisonSide stepSide(const std::string& label, const std::vector<double>& step_ms) {
  gpuxray::analysis::StepTimesResult steps;
  std::vector<int64_t> times;
  for (size_t i = 0; i < step_ms.size(); ++i) {
    auto ns = static_cast<int64_t>(step_ms[i] * 1e6);
    steps.steps.push_back({static_cast<int64_t>(i), ns, 0, 1});
    times.push_back(ns);
  }
  std::sort(times.begin(), times.end());
  if (!times.empty()) {
    steps.median_ns = times[(times.size() - 1) / 2];
    double mean = 0, sum = 0;
    for (int64_t t : times) mean += static_cast<double>(t) / static_cast<double>(times.size());
    for (int64_t t : times) sum += (static_cast<double>(t) - mean) * (static_cast<double>(t) - mean);
    if (times.size() > 1) steps.stddev_ns = std::sqrt(sum / static_cast<double>(times.size() - 1));
  }
  gpuxray::compare::ComparisonSide side{label, "run", {}};
  gpuxray::analysis::presentStepTimes(steps, 10, side.report);
  return side;
}

}  // namespace

TEST_CASE("diff: a step-time change inside the step-to-step spread is within noise; one step gives no verdict") {
  using gpuxray::compare::compareRuns;
  using gpuxray::compare::StepVerdict;
  auto noisy_before = stepSide("a", {100, 104, 96, 100});  // std dev 3.27 ms
  auto noisy_after = stepSide("b", {102, 98, 101, 103});   // median 101 ms: +1 ms, inside the spread
  CHECK(compareRuns(noisy_before, noisy_after).steps.verdict == StepVerdict::kWithinNoise);
  auto faster = stepSide("c", {90, 91, 89, 90});  // -10 ms, beyond it
  auto comparison = compareRuns(noisy_before, faster);
  CHECK(comparison.steps.verdict == StepVerdict::kFaster);
  CHECK(comparison.steps.deltaNs() == -10'000'000);
  CHECK(compareRuns(faster, noisy_before).steps.verdict == StepVerdict::kSlower);
  // One step has no spread, so no verdict, however large the change.
  CHECK(compareRuns(stepSide("d", {100}), faster).steps.verdict == StepVerdict::kOneStep);
  CHECK(compareRuns(stepSide("e", {}), faster).steps.verdict == StepVerdict::kNoSteps);
  CHECK(compareRuns(faster, faster).steps.verdict == StepVerdict::kNoChange);
  CHECK(compareRuns(faster, faster).identical());
  // Other step numbers or counts are compared by their medians, and said so.
  auto longer = stepSide("f", {90, 91, 89, 90, 90, 90});
  auto notes = compareRuns(faster, longer).notes;
  CHECK(std::count(notes.begin(), notes.end(),
                   "steps 0-3 (4) before, 0-5 (6) after: not matched one to one, compared by their median and spread") == 1);
}
