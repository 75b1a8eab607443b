// The critical path's what-if against the simulator, which knows the truth: a run with a planted cause
// (a straggler, a slow NIC, a slow pipeline stage) and the same run (same seed) simulated with the
// cause at its ideal; the matching finding's predicted saving against the difference in step time
// between the two.
//
// Issue 15's target is 15 %. The first three cases are held to 5 %, above the error measured today
// (straggler 5.095 ms predicted / 5.096 ms re-simulated, 0.0 %; slow NIC 4.198 / 4.198 ms, 0.0 %; slow
// stage 9.262 / 8.975 ms, 3.2 %), so that a change that makes them much worse fails; the slow stage
// with 4 micro-batches (3.279 / 2.988 ms, 9.7 %) to the target. Measured with the step time
// step_times reports (meanStep below).

#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/build_outputs.h"
#include "tests/support/kineto_traces.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::testing::runCommand;
using gpuxray::testing::TempDir;

const std::string kGpuxray = gpuxray::testing::gpuxrayBinary();

nlohmann::json analyzed(const TempDir& dir, const std::string& simulate, const std::string& name) {
  std::string run = dir / name;
  std::string json = dir / (name + ".json");
  auto simulated = runCommand(simulate + " -o " + run);
  INFO(simulated.err);
  REQUIRE(simulated.exit_code == 0);
  auto analysis = runCommand(kGpuxray + " analyze --critical-path --format json " + run + " > " + json);
  INFO(analysis.err);
  REQUIRE(analysis.exit_code == 0);
  return nlohmann::json::parse(std::ifstream(json));
}

// The mean step time as step_times reports it (each step's longest rank window), over the steps the
// what-if averages. Not the critical path's run_steps[].step_ns: that is the union of the ranks'
// windows, which also holds the offsets between the ranks' step boundaries (each rank starts a step
// when its own optimizer ends), time no rank's loop spends.
double meanStep(const nlohmann::json& report) {
  const auto& steps = report["results"]["step_times"]["steps"];
  REQUIRE(!steps.empty());
  REQUIRE(steps.size() == report["results"]["critical_path"]["run_steps"].size());
  double sum = 0;
  for (const auto& s : steps) sum += s["time_ns"].get<double>();
  return sum / static_cast<double>(steps.size());
}

const nlohmann::json* findingOf(const nlohmann::json& report, const std::string& analysis) {
  for (const auto& f : report["findings"]) {
    if (f["analysis"] == analysis && f.contains("saves_ns")) return &f;
  }
  return nullptr;
}

struct Case {
  std::string name;
  std::string simulate;  // without the cause
  std::string cause;     // the option that plants it
  std::string ideal;     // the option that sets it to its ideal ("": none)
  // Or the ideal's options worked out from the planted run's report.
  std::function<std::string(const nlohmann::json&)> ideal_of;
  std::string analysis;  // the finding that names it
  double bound;          // the largest error accepted (see the top of the file)
};

void checkAgainstSimulator(const Case& c) {
  TempDir dir;
  nlohmann::json planted = analyzed(dir, c.simulate + " " + c.cause, "planted");
  const nlohmann::json* finding = findingOf(planted, c.analysis);
  INFO(planted["findings"].dump(1));
  REQUIRE(finding != nullptr);
  nlohmann::json ideal = analyzed(dir, c.simulate + " " + (c.ideal_of ? c.ideal_of(*finding) : c.ideal), "ideal");
  double predicted = (*finding)["saves_ns"].get<double>();
  double resimulated = meanStep(planted) - meanStep(ideal);
  double error = std::abs(predicted - resimulated) / resimulated;
  // The table for the record: cause, predicted saving, re-simulated saving, error.
  WARN(c.name << ": predicted " << predicted / 1e6 << " ms, re-simulated " << resimulated / 1e6 << " ms, error "
              << 100 * error << " %");
  CHECK(resimulated > 0);
  CHECK(error <= c.bound);
  // Its text says it.
  CHECK((*finding)["summary"].get<std::string>().find("would save about") != std::string::npos);
}

}  // namespace

TEST_CASE("what-if against the simulator: a data-parallel straggler", "[critical_path][what_if]") {
  checkAgainstSimulator({"straggler rank 2 at 1.3x",
                         kGpuxray + " simulate --model gpt-350m --cluster dgx-h100 --nodes 1 --tp 2 --dp 4 "
                                    "--global-batch 8 --steps 3 --seed 5",
                         "--straggler 2=1.3", "", nullptr, "stragglers", 0.05});
}

TEST_CASE("what-if against the simulator: a slow NIC", "[critical_path][what_if]") {
  checkAgainstSimulator({"node-01 NIC 2 at 0.5",
                         kGpuxray + " simulate --model gpt-350m --cluster dgx-h100 --nodes 2 --tp 8 --dp 2 "
                                    "--global-batch 4 --steps 3 --seed 5",
                         "--slow-link node-01:2=0.5", "", nullptr, "link_hotspots", 0.05});
}

namespace {

// Stage 1 of four (ranks 2 and 3) at `factor`; its ideal is the mean stage's compute, so the same run
// is simulated again with the stage at `factor` divided by the imbalance the finding measured (max/mean).
std::function<std::string(const nlohmann::json&)> stageOneAtMean(double factor) {
  return [factor](const nlohmann::json& finding) {
    double imbalance = 0;
    for (const auto& line : finding["evidence"]) {
      std::string text = line.get<std::string>();
      auto at = text.find("max/mean ");
      if (at != std::string::npos) imbalance = std::stod(text.substr(at + 9));
    }
    REQUIRE(imbalance > 1);
    std::string at_mean = std::to_string(factor / imbalance);
    return "--straggler 2=" + at_mean + " --straggler 3=" + at_mean;
  };
}

}  // namespace

TEST_CASE("what-if against the simulator: a slow pipeline stage", "[critical_path][what_if]") {
  checkAgainstSimulator({"stage 1 at 2.5x, to the mean",
                         kGpuxray + " simulate --model gpt-350m --cluster dgx-h100 --nodes 1 --tp 2 --pp 4 "
                                    "--micro-batches 8 --steps 3 --seed 5",
                         "--straggler 2=2.5 --straggler 3=2.5", "", stageOneAtMean(2.5), "pipeline_bubbles", 0.05});
}

// The same with 4 micro-batches: 5.30 ms predicted against 2.99 ms re-simulated (77 % off) before
// every member's start reached its operation's join and kernels were matched in issue order; 3.28 ms
// (9.7 %) now.
TEST_CASE("what-if against the simulator: a slow pipeline stage, 4 micro-batches", "[critical_path][what_if]") {
  checkAgainstSimulator({"stage 1 at 2.5x, to the mean, m 4",
                         kGpuxray + " simulate --model gpt-350m --cluster dgx-h100 --nodes 1 --tp 2 --pp 4 "
                                    "--micro-batches 4 --steps 3 --seed 5",
                         "--straggler 2=2.5 --straggler 3=2.5", "", stageOneAtMean(2.5), "pipeline_bubbles", 0.15});
}

namespace {

// Each finding with a saving: its evidence says where the critical path runs exactly when the saving is
// under a tenth of the finding's cost. Returns the lines that said so.
std::vector<std::string> checkOffPathEvidence(const nlohmann::json& report) {
  std::vector<std::string> said;
  size_t on_path = 0;
  for (const auto& f : report["findings"]) {
    if (!f.contains("saves_ns")) continue;
    std::optional<std::string> line;
    for (const auto& e : f["evidence"]) {
      std::string text = e.get<std::string>();
      if (text.find("lie mostly off the critical path") != std::string::npos ||
          text.rfind("the critical path runs on", 0) == 0)
        line = text;
    }
    INFO(f["summary"].get<std::string>());
    CHECK(line.has_value() == (f["saves_ns"].get<double>() < 0.1 * f["cost_ns"].get<double>()));
    if (line) said.push_back(*line);
    else on_path += 1;
  }
  CHECK(on_path >= 1);
  return said;
}

}  // namespace

// On the demo, rank 4's exposed communication costs 35.9 ms a step but is mostly waiting for the slow
// stage, so fixing it saves microseconds: the path runs mostly on other ranks.
TEST_CASE("what-if: a finding that saves under a tenth of its cost says where the critical path runs",
          "[critical_path][what_if]") {
  TempDir dir;
  nlohmann::json report = analyzed(dir, kGpuxray + " simulate --preset demo", "demo");
  std::vector<std::string> said = checkOffPathEvidence(report);
  REQUIRE(said.size() == 1);
  CHECK(said[0].find("lie mostly off the critical path") != std::string::npos);
  CHECK(said[0].find("on rank 4 and") != std::string::npos);
}

// On HTA's two sampled ranks the straggler, rank 1, holds most of the path, but in host ops, not in the
// compute its fix scales: the line names the path's causes on rank 1 rather than calling it off the path.
TEST_CASE("what-if: a finding whose rank holds the path says through what", "[critical_path][what_if]") {
  auto run = gpuxray::testing::sharedTraces("hta_sampled_2rank");
  if (!run) return;  // sharedTraces() has warned (or failed, under CI)
  TempDir dir;
  std::string json = dir / "report.json";
  auto analysis = runCommand(kGpuxray + " analyze --critical-path --format json " + run->string() + " > " + json);
  INFO(analysis.err);
  REQUIRE(analysis.exit_code == 0);
  std::vector<std::string> said = checkOffPathEvidence(nlohmann::json::parse(std::ifstream(json)));
  bool names_causes = false;
  for (const std::string& line : said) names_causes |= line.rfind("the critical path runs on rank 1 (", 0) == 0;
  CHECK(names_causes);
  for (const std::string& line : said) CHECK(line.find("on rank 1 and") == std::string::npos);
}

namespace {

// `analyze --critical-path --format json` of `run` with `extra` options.
nlohmann::json analyzedWith(const TempDir& dir, const std::string& run, const std::string& extra,
                            const std::string& name) {
  std::string json = dir / (name + ".json");
  auto analysis = runCommand(kGpuxray + " analyze --critical-path --format json " + extra + " " + run + " > " + json);
  INFO(analysis.err);
  REQUIRE(analysis.exit_code == 0);
  return nlohmann::json::parse(std::ifstream(json));
}

// Without a timeline the ranks are read one at a time and keep only their steps' graphs, reduced
// (RankPathPart); with one every event stays and the chains on the path are given back slice by slice.
// Both must find the same path, attribution and savings.
void checkDigestedPathIsTheKeptOne(const std::string& run) {
  TempDir dir;
  nlohmann::json digested = analyzedWith(dir, run, "-j1", "digested");
  nlohmann::json kept = analyzedWith(dir, run, "-j3 --perfetto " + (dir / "timeline.pftrace"), "kept");
  const auto& path = digested["results"]["critical_path"];
  REQUIRE(!path["run_steps"].empty());
  CHECK(path == kept["results"]["critical_path"]);
  CHECK(digested["findings"] == kept["findings"]);
  for (const auto& step : path["run_steps"]) {
    int64_t sum = 0;
    for (const auto& part : step["attribution"]) sum += part["ns"].get<int64_t>();
    CHECK(sum == step["step_ns"].get<int64_t>());
  }
}

}  // namespace

TEST_CASE("critical path: the ranks' digests find the path their kept events find", "[critical_path][what_if]") {
  TempDir dir;
  std::string run = dir / "demo";
  auto simulated = runCommand(kGpuxray + " simulate --preset demo -o " + run);
  REQUIRE(simulated.exit_code == 0);
  checkDigestedPathIsTheKeptOne(run);
  // A 1F1B pipeline with a slow stage: sends and receives posted at once, gaps tied to collectives.
  std::string pipeline = dir / "pipeline";
  simulated = runCommand(kGpuxray +
                         " simulate --model gpt-350m --cluster dgx-h100 --nodes 1 --tp 2 --pp 4 --micro-batches 4 "
                         "--steps 3 --seed 5 --straggler 2=2.5 --straggler 3=2.5 -o " +
                         pipeline);
  REQUIRE(simulated.exit_code == 0);
  checkDigestedPathIsTheKeptOne(pipeline);
  if (auto sampled = gpuxray::testing::sharedTraces("hta_sampled_2rank"))
    checkDigestedPathIsTheKeptOne(sampled->string());
}
