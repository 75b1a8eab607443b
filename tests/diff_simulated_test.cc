// `gpuxray diff` and `analyze --baseline` on the classic case, simulated: 4 nodes x 8 A100, TP8 x DP4,
// one inter-node NIC at 40 % of its bandwidth before and fixed after, same seed and jitter. The slow NIC
// sits on the data-parallel all-reduce's path (tensor parallelism stays inside a node), so the all-reduce
// is what changes, and the step with it.

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/build_outputs.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::testing::runCommand;
using gpuxray::testing::TempDir;

const std::string kGpuxray = gpuxray::testing::gpuxrayBinary();

// The two runs and their reports, made once for the test cases below.
struct ClassicCase {
  TempDir dir;
  std::string before = dir / "before", after = dir / "after";
  std::string before_json = dir / "before.json", after_json = dir / "after.json";
  ClassicCase() {
    std::string simulate = kGpuxray +
                           " simulate --model gpt-1.3b --cluster dgx-a100 --nodes 4 --tp 8 --dp 4 "
                           "--global-batch 32 --jitter 1 --seed 3 --steps 4";
    REQUIRE(runCommand(simulate + " --slow-link node-01:2=0.4 -o " + before).exit_code == 0);
    REQUIRE(runCommand(simulate + " -o " + after).exit_code == 0);
    REQUIRE(runCommand(kGpuxray + " analyze --format json " + before + " > " + before_json).exit_code == 0);
    REQUIRE(runCommand(kGpuxray + " analyze --format json " + after + " > " + after_json).exit_code == 0);
  }
};

const ClassicCase& classicCase() {
  static ClassicCase c;
  return c;
}

nlohmann::json diffJson(const std::string& before, const std::string& after) {
  auto result = runCommand(kGpuxray + " diff --format json " + before + " " + after);
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  return nlohmann::json::parse(result.out);
}

}  // namespace

TEST_CASE(
    "diff: the slow NIC fixed: the data-parallel all-reduce changed most, the step got faster, the slow link "
    "resolved") {
  const auto& c = classicCase();
  // Run directories on both sides, and a report against a run: the same comparison.
  for (auto [before, after] : {std::pair{c.before, c.after}, std::pair{c.before_json, c.after}}) {
    nlohmann::json d = diffJson(before, after);
    CHECK(d["schema"] == "gpuxray.diff");
    CHECK(d["identical"] == false);
    // Step time: 4 steps each, the jitter's spread is microseconds, the change tens of milliseconds.
    const auto& steps = d["steps"];
    CHECK(steps["before"]["steps"] == 4);
    CHECK(steps["verdict"] == "faster");
    double before_ns = steps["before"]["median_ns"], after_ns = steps["after"]["median_ns"];
    CHECK(after_ns < 0.9 * before_ns);
    CHECK(steps["after"]["tokens_per_s"].get<double>() > steps["before"]["tokens_per_s"].get<double>());
    // Throughput is the batch over the step time: 32 sequences of 2048 tokens.
    CHECK(steps["after"]["tokens_per_s"].get<double>() == Approx(32.0 * 2048 * 1e9 / after_ns).epsilon(1e-9));
    // The kernel that changed most per step is NCCL's all-reduce (the data-parallel gradient reduction).
    const auto& top = d["kernels"][0];
    CHECK(top["kind"] == "communication");
    CHECK(top["name"].get<std::string>().find("AllReduce") != std::string::npos);
    CHECK(top["per_step_after_ns"].get<double>() < top["per_step_before_ns"].get<double>());
    // ... by about the step time's change (the all-reduce is on the critical path of each step).
    double kernel_change = top["per_step_before_ns"].get<double>() - top["per_step_after_ns"].get<double>();
    CHECK(kernel_change == Approx(before_ns - after_ns).epsilon(0.05));
    // The slow-link finding is resolved, and the slowest NIC's ratio to the median goes to about 1.
    bool slow_link_resolved = false;
    for (const auto& f : d["findings"]) {
      if (f["status"] == "resolved" && f["before"].get<std::string>().starts_with("slow link: node-01's NIC"))
        slow_link_resolved = true;
      CHECK(!(f["status"] == "new" && f["after"].get<std::string>().starts_with("slow link")));
    }
    CHECK(slow_link_resolved);
    CHECK(d["metrics"]["slow_link_ratio"]["before"].get<double>() == Approx(2.5).epsilon(0.02));
    CHECK(d["metrics"]["slow_link_ratio"]["after"].get<double>() == Approx(1.0).epsilon(0.02));
    // Collectives by (role, operation, size): the data-parallel all-reduce's time changed most, its busbw rose.
    const auto& collective = d["tables"]["collectives"]["rows"][0];
    CHECK(collective["key"]["communicator.role"] == "data");
    CHECK(collective["key"]["operation"] == "AllReduce");
    CHECK(collective["after"]["transfer_total_ns"].get<double>() <
          collective["before"]["transfer_total_ns"].get<double>());
    CHECK(collective["after"]["busbw_median_bytes_per_s"].get<double>() >
          collective["before"]["busbw_median_bytes_per_s"].get<double>());
    // The NICs even out: the spread of their busy bandwidth (% of capacity while busy) closes.
    auto nic_spread = [&](const char* side) {
      double low = 1e300, high = 0;
      for (const auto& link : d["tables"]["links"]["rows"]) {
        if (link["key"]["kind"] != "NIC" || link[side]["busy_bandwidth_pct"].is_null()) continue;
        low = std::min(low, link[side]["busy_bandwidth_pct"].get<double>());
        high = std::max(high, link[side]["busy_bandwidth_pct"].get<double>());
      }
      return high / low;
    };
    CHECK(nic_spread("before") > 2);
    CHECK(nic_spread("after") == Approx(1.0).epsilon(0.02));
    CHECK(d["metrics"]["step_time_ms"]["after"].get<double>() * 1e6 == Approx(after_ns));
  }
}

TEST_CASE("diff: text and Markdown name the change, the verdict and the resolved finding", "[cli-heavy]") {
  const auto& c = classicCase();
  auto text = runCommand(kGpuxray + " diff " + c.before + " " + c.after);
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("faster: beyond the step-to-step spread") != std::string::npos);
  CHECK(text.out.find("resolved     critical  slow link: node-01's NIC mlx5_2") != std::string::npos);
  CHECK(text.out.find("ncclDevKernel_AllReduce_Sum_bf16_RING_LL  communication  changed") != std::string::npos);
  auto markdown = runCommand(kGpuxray + " diff --format markdown " + c.before_json + " " + c.after_json);
  REQUIRE(markdown.exit_code == 0);
  CHECK(markdown.out.starts_with("## gpuxray diff: "));
  CHECK(markdown.out.find("| resolved | critical | slow link: node-01's NIC mlx5_2") != std::string::npos);
}

TEST_CASE("analyze --baseline: step_time_ms>+5% passes after against before and fails before against after", "[cli-heavy]") {
  const auto& c = classicCase();
  std::string fail_on = " --fail-on 'step_time_ms>+5%' --fail-on 'exposed_comm_pct>+2'";
  auto better = runCommand(kGpuxray + " analyze " + c.after + " --baseline " + c.before_json + fail_on);
  CHECK(better.exit_code == 0);
  CHECK(better.err.find("threshold violated") == std::string::npos);
  auto worse = runCommand(kGpuxray + " analyze " + c.before + " --baseline " + c.after_json + fail_on);
  CHECK(worse.exit_code == 3);
  // One line per violated threshold, with both values and the change.
  CHECK(worse.err.find("gpuxray: threshold violated: step_time_ms = 338 ms against 268 ms in the baseline (+2") !=
        std::string::npos);
  CHECK(worse.err.find("gpuxray: threshold violated: exposed_comm_pct = ") != std::string::npos);
  // diff --fail-on tests AFTER against BEFORE the same way; tokens_per_s<-5% catches lost throughput.
  CHECK(runCommand(kGpuxray + " diff " + c.before_json + " " + c.after + " --fail-on 'step_time_ms>+5%'").exit_code ==
        0);
  auto diff_worse = runCommand(kGpuxray + " diff " + c.after_json + " " + c.before + " --fail-on 'tokens_per_s<-5%'");
  CHECK(diff_worse.exit_code == 3);
  CHECK(diff_worse.err.find("threshold violated: tokens_per_s = ") != std::string::npos);
  // A signed limit without a baseline is a usage error that says what is missing.
  auto no_baseline = runCommand(kGpuxray + " analyze " + c.after + " --fail-on 'step_time_ms>+5%'");
  CHECK(no_baseline.exit_code == 1);
  CHECK(no_baseline.err.find("give --baseline") != std::string::npos);
}

TEST_CASE("diff: a run against itself, or against its own report, reports no change and exits 0", "[cli-heavy]") {
  const auto& c = classicCase();
  for (const std::string& other : {c.after, c.after_json}) {
    auto result = runCommand(kGpuxray + " diff " + c.after + " " + other + " --fail-on 'step_time_ms>+0%'");
    CHECK(result.exit_code == 0);
    CHECK(result.out.find("no change: every step time, metric, kernel, op, memory peak and finding is the same") !=
          std::string::npos);
    nlohmann::json d = diffJson(c.after, other);
    CHECK(d["identical"] == true);
    CHECK(d["steps"]["verdict"] == "no_change");
    for (const auto& k : d["kernels"]) CHECK(k["change"] == "same");
    for (const auto& f : d["findings"]) CHECK(f["status"] == "still");
  }
}

TEST_CASE("diff: a side missing ranks is a warning; runs of other ranks say what was not matched") {
  const auto& c = classicCase();
  TempDir dir;
  std::string partial = dir / "partial";
  REQUIRE(runCommand("cp -r " + c.after + " " + partial + " && rm " + partial + "/rank-00005.gpuxray").exit_code == 0);
  auto result = runCommand(kGpuxray + " diff " + c.before + " " + partial);
  CHECK(result.exit_code == 0);
  CHECK(result.err.find("gpuxray: warning: " + partial + ": 31 of 32 ranks (rank 5 missing)") != std::string::npos);
  CHECK(result.out.find("not matched: the runs have other ranks (32 in before, 31 in after); only before: 5") !=
        std::string::npos);
}

TEST_CASE("diff: the straggler removed: its finding resolved, the wait it caused gone from the stragglers table") {
  TempDir dir;
  std::string simulate = kGpuxray +
                         " simulate --model gpt-1.3b --cluster dgx-a100 --tp 2 --global-batch 16 --jitter 1 --seed 3 "
                         "--steps 3";
  std::string before = dir / "before", after = dir / "after", wider = dir / "wider";
  REQUIRE(runCommand(simulate + " --nodes 1 --dp 4 --straggler 5=1.3 -o " + before).exit_code == 0);
  REQUIRE(runCommand(simulate + " --nodes 1 --dp 4 -o " + after).exit_code == 0);
  nlohmann::json d = diffJson(before, after);
  const auto& top = d["tables"]["stragglers"]["rows"][0];
  CHECK(top["key"]["rank"] == "5");
  CHECK(top["change"] == "changed");
  // Its kernels took 1.3x: the others waited about a third of its step per step; after, microseconds.
  CHECK(top["before"]["wait_caused_per_step_ns"].get<double>() > 1e8);
  CHECK(top["after"]["wait_caused_per_step_ns"].get<double>() <
        0.01 * top["before"]["wait_caused_per_step_ns"].get<double>());
  auto straggler_findings = [](const nlohmann::json& diff, const std::string& status) {
    int n = 0;
    for (const auto& f : diff["findings"]) {
      const auto& text = f[status == "new" ? "after" : "before"];
      if (f["status"] == status && f["analysis"] == "stragglers" && text.get<std::string>().starts_with("rank ")) ++n;
    }
    return n;
  };
  CHECK(straggler_findings(d, "resolved") == 1);
  CHECK(straggler_findings(d, "new") == 0);
  // Twice the world size with its straggler at rank 13: rank numbers name no common GPU, so "rank 5 is the
  // straggler" and "rank 13 is the straggler" are one finding, still there.
  REQUIRE(runCommand(simulate + " --nodes 2 --dp 8 --straggler 13=1.3 -o " + wider).exit_code == 0);
  nlohmann::json w = diffJson(before, wider);
  CHECK(straggler_findings(w, "still") == 1);
  CHECK(straggler_findings(w, "resolved") == 0);
  CHECK(straggler_findings(w, "new") == 0);
}
