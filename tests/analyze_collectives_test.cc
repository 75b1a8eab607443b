// Golden tests for the collectives and straggler analyses: a rank that computes 2 ms longer before
// every all-reduce, and a data-parallel all-reduce across two hosts of which one has a NIC four times
// slower than the other's.

#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "analyzer/analysis/collectives.h"
#include "analyzer/analysis/stragglers.h"
#include "tests/support/analyzed_run.h"
#include "tests/support/run_builder.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::testing::cellAt;
using gpuxray::testing::rowWhere;
using gpuxray::testing::table;
using gpuxray::testing::RunBuilder;
using gpuxray::testing::TempDir;

constexpr uint64_t kDp = 0xD000000000000001ull;
constexpr uint64_t kAllReduceBytes = 64ull << 20;

// Four ranks on one host, four 14 ms steps: compute 0-10 ms (rank 2: 0-12 ms), then an all-reduce
// that ends at 13 ms on all; idle 13-14 ms. Each step's first kernel is launched 5 µs before it
// starts, after the GPU ran dry: 1 ms of host-bound idle per step on every rank alike.
void writeStragglerRun(const std::filesystem::path& dir) {
  RunBuilder run("golden-straggler", 4);
  for (int r = 0; r < 4; ++r) {
    auto& rank = run.rank(r, "node-0", r);
    rank.communicator(kDp, "dp", r, 4, 1);
    double compute = r == 2 ? 12'000 : 10'000;
    for (int step = 0; step < 4; ++step) {
      double t = step * 14'000.0;
      rank.range("ProfilerStep#" + std::to_string(step), t, t + 14'000);
      rank.kernel("gemm", t, t + compute);
      rank.collective(kDp, "AllReduce", static_cast<uint64_t>(step + 1), t + compute, t + 13'000, kAllReduceBytes);
    }
  }
  run.write(dir);
}

// Ranks 0-1 on node-a (one 50 GB/s NIC), 2-3 on node-b (one 12.5 GB/s NIC). Four 20 ms steps:
// compute 0-5 ms, then an all-reduce of 100 MB entered together that takes 12 ms: 4x what 50 GB/s
// would allow (busbw = 2 (n-1)/n x 100 MB / 12 ms = 1.5 x 8.33 GB/s = 12.5 GB/s).
void writeSlowNicRun(const std::filesystem::path& dir) {
  RunBuilder run("golden-slow-nic", 4);
  for (int r = 0; r < 4; ++r) {
    auto& rank = run.rank(r, r < 2 ? "node-a" : "node-b", r % 2);
    rank.nic("mlx5_0", r < 2 ? 50'000'000'000ull : 12'500'000'000ull);
    rank.communicator(kDp, "dp", r, 4, 2);
    for (int step = 0; step < 4; ++step) {
      double t = step * 20'000.0;
      rank.range("ProfilerStep#" + std::to_string(step), t, t + 20'000);
      rank.kernel("gemm", t, t + 5'000);
      rank.collective(kDp, "AllReduce", static_cast<uint64_t>(step + 1), t + 5'000, t + 17'000, 100'000'000);
    }
  }
  run.write(dir);
}

}  // namespace

TEST_CASE("analyze: the rank that computes longer is the straggler, charged with everyone's wait") {
  TempDir dir;
  writeStragglerRun(dir.path());
  auto a = gpuxray::testing::analyzeRun(dir.path().string());

  // Each all-reduce: ranks 0, 1, 3 wait 2 ms each for rank 2: 6 ms per step, 24 ms in all.
  const auto& ranks = table(a.report, "stragglers", "ranks");
  REQUIRE(ranks.rows.size() == 4);
  CHECK(cellAt(ranks, 0, "rank").number == 2);
  CHECK(cellAt(ranks, 0, "collectives").number == 4);
  CHECK(cellAt(ranks, 0, "last").number == 4);
  CHECK(cellAt(ranks, 0, "wait_caused").number == 24'000'000);
  CHECK(cellAt(ranks, 0, "wait_per_step").number == 6'000'000);
  CHECK(cellAt(ranks, 0, "cause").text == "compute");
  CHECK(cellAt(ranks, 0, "wait_compute").number == 24'000'000);
  CHECK(cellAt(ranks, 0, "wait_host_gaps").number == 0);
  for (size_t row = 1; row < 4; ++row) CHECK(cellAt(ranks, row, "wait_caused").number == 0);
  CHECK(a.report.metric("straggler_wait_ms")->value == Approx(6.0));

  const auto& findings = a.report.findings;
  auto straggler =
      std::find_if(findings.begin(), findings.end(), [](const auto& f) { return f.analysis == "stragglers"; });
  REQUIRE(straggler != findings.end());
  CHECK(straggler->summary ==
        "rank 2 is the straggler: last into 4 of 4 collectives, 24.0 ms of waiting caused (6.00 ms per step), cause: "
        "compute");
  CHECK(straggler->cost_ns == 2'000'000);  // it entered 2 ms after the median member, once per step
  REQUIRE(straggler->evidence.size() == 2);
  CHECK(straggler->evidence[1].find("compute 2.00 ms, host-bound idle 0 ns, communication 0 ns") != std::string::npos);
  // Each late arrival is an instant on rank 2's timeline.
  size_t late_arrivals = 0;
  for (const auto& mark : a.report.marks) {
    if (mark.analysis != "stragglers") continue;
    CHECK(mark.rank == 2);
    CHECK(mark.start_ns == mark.end_ns);
    CHECK(mark.label == "late arrival: 6.00 ms of waiting caused (compute)");
    ++late_arrivals;
  }
  CHECK(late_arrivals == 4);

  // The collectives: skew 2 ms each, transfer 13 - 12 = 1 ms, busbw 1.5 x 64 MiB / 1 ms.
  CHECK(a.report.metric("collective_skew_ms")->value == Approx(2.0));
  const auto& signatures = table(a.report, "collectives", "signatures");
  REQUIRE(signatures.rows.size() == 1);
  CHECK(cellAt(signatures, 0, "operation").text == "AllReduce");
  CHECK(cellAt(signatures, 0, "count").number == 4);
  CHECK(cellAt(signatures, 0, "skew_median").number == 2'000'000);
  CHECK(cellAt(signatures, 0, "transfer_median").number == 1'000'000);
  CHECK(cellAt(signatures, 0, "busbw_median").number == Approx(1.5 * kAllReduceBytes * 1e3));
  CHECK(cellAt(signatures, 0, "link_bandwidth").text == "unknown");
  CHECK(cellAt(signatures, 0, "last_arrivers").text == "rank 2 (4 of 4)");
  CHECK(a.report.metric("busbw_pct_of_link") == nullptr);

  // The same as data.
  const auto& input = a.session->input();
  auto collectives = gpuxray::analysis::computeCollectives(input);
  REQUIRE(collectives.signatures.size() == 1);
  const auto& s = collectives.signatures[0];
  CHECK(s.comm_hash == kDp);
  CHECK(s.operation == "AllReduce");
  CHECK(s.bytes == kAllReduceBytes);
  CHECK(s.count == 4);
  CHECK(s.skew_median_ns == 2'000'000);
  CHECK(s.skew_total_ns == 4 * 2'000'000);
  CHECK(s.transfer_median_ns == 1'000'000);
  CHECK(s.data_bytes == Approx(kAllReduceBytes));
  CHECK(s.busbw_factor == Approx(1.5));
  CHECK(s.algbw_median == Approx(kAllReduceBytes * 1e3));
  CHECK(s.busbw_median == Approx(1.5 * kAllReduceBytes * 1e3));
  CHECK(std::isnan(s.link_pct));  // the trace lists no links: not recorded, not 0
  REQUIRE(s.last_arrivals.size() == 1);
  CHECK(s.last_arrivals[0].rank == 2);
  CHECK(s.last_arrivals[0].times == 4);
  REQUIRE(collectives.most_skewed.size() == 4);
  CHECK(collectives.most_skewed[0].skew_ns == 2'000'000);
  CHECK(collectives.most_skewed[0].last_rank == 2);
  CHECK(collectives.most_skewed[0].seq == 1);  // equal skews: in matching order
  REQUIRE(collectives.worst_skew.has_value());
  CHECK(collectives.per_communicator[*collectives.worst_skew].last_arrivals.front().rank == 2);
  CHECK_FALSE(collectives.lowest_bandwidth.has_value());

  auto bandwidth = gpuxray::analysis::computeCollectiveBandwidth(input);
  CHECK(bandwidth.operations == 16);
  REQUIRE(bandwidth.groups.size() == 1);
  CHECK(bandwidth.groups[0].count == 16);
  CHECK(bandwidth.groups[0].ranks == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(bandwidth.groups[0].fastest_ns == 1'000'000);  // rank 2's, entered last
  REQUIRE(bandwidth.ranks.size() == 4);
  CHECK(bandwidth.ranks[2].time_ns == 4 * 1'000'000);
  CHECK(bandwidth.ranks[0].time_ns == 4 * 3'000'000);
  CHECK(bandwidth.ranks[0].bytes == 4 * kAllReduceBytes);

  auto stragglers = gpuxray::analysis::computeStragglers(input);
  REQUIRE(stragglers.ranks.size() == 4);
  CHECK(stragglers.ranks[0].rank == 2);
  CHECK(stragglers.ranks[0].wait_caused == 24'000'000);
  CHECK(stragglers.ranks[0].cause() == gpuxray::analysis::kCauseCompute);
  CHECK(stragglers.flagged);
  CHECK(stragglers.late_arrivals.size() == 4);
  REQUIRE(stragglers.step_figures.size() == 4);
  for (const auto& step : stragglers.step_figures) {
    INFO("step " << step.step);
    CHECK(step.straggler == 2);
    REQUIRE(step.ranks.size() == 4);
    for (const auto& r : step.ranks) {
      CHECK(r.step_ns == 14'000'000);
      CHECK(r.compute_ns == (r.rank == 2 ? 12'000'000 : 10'000'000));
      CHECK(r.wait_caused_ns == (r.rank == 2 ? 6'000'000 : 0));
    }
  }
  CHECK(stragglers.step_figures[3].step == 3);
}

TEST_CASE("analyze: a host with a slow NIC limits the cross-host all-reduce, and the finding names it") {
  TempDir dir;
  writeSlowNicRun(dir.path() / "run");
  auto a = gpuxray::testing::analyzeRun((dir.path() / "run").string());
  const auto& signatures = table(a.report, "collectives", "signatures");
  REQUIRE(signatures.rows.size() == 1);
  CHECK(cellAt(signatures, 0, "transfer_median").number == 12'000'000);
  CHECK(cellAt(signatures, 0, "busbw_median").number == Approx(12.5e9));
  CHECK(cellAt(signatures, 0, "link_bandwidth").number == 12.5e9);
  CHECK(cellAt(signatures, 0, "link_pct").number == Approx(100.0));
  CHECK(cellAt(signatures, 0, "limited_by").text == "node-b's NIC mlx5_0");
  CHECK(a.report.metric("busbw_pct_of_link")->value == Approx(100.0));
  CHECK(a.report.metric("collective_skew_ms")->value == 0);

  const auto& findings = a.report.findings;
  auto slow_link =
      std::find_if(findings.begin(), findings.end(), [](const auto& f) { return f.analysis == "collectives"; });
  REQUIRE(slow_link != findings.end());
  const auto& finding = *slow_link;
  CHECK(finding.severity == gpuxray::report::Severity::kCritical);
  CHECK(finding.summary ==
        "slow link: node-b's NIC mlx5_0 (12.5 GB/s) is 4.0x slower than node-a's and limits AllReduce on dp (data, 4 "
        "ranks) to 12.5 GB/s bus bandwidth");
  // At node-a's speed each 12 ms transfer would take 3 ms: 9 ms lost per step.
  CHECK(finding.cost_ns == Approx(9'000'000));
  auto result = gpuxray::analysis::computeCollectives(a.session->input());
  REQUIRE(result.slow_links.size() == 1);
  CHECK(result.slow_links[0].ratio == Approx(4.0));
  CHECK(result.slow_links[0].lost_ns / result.steps == Approx(9'000'000));
  const auto& limited = result.signatures[result.slow_links[0].signatures.at(0)];
  CHECK(limited.link.limited_by == "node-b's NIC mlx5_0");
  CHECK(limited.link.fastest_host == "node-a");
  CHECK(limited.link_pct == Approx(100.0));

  auto text = gpuxray::testing::runCommand(std::string(GPUXRAY_BINARY) + " analyze " + (dir / "run"));
  INFO(text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find(". [critical] slow link: node-b's NIC mlx5_0 (12.5 GB/s) is 4.0x slower than node-a's") !=
        std::string::npos);
  CHECK(text.out.find("node-a's NICs give 50.0 GB/s: at that speed these transfers would take 4.0x less time") !=
        std::string::npos);
  size_t metric = text.out.find("\n  busbw_pct_of_link ");
  REQUIRE(metric != std::string::npos);
  CHECK(text.out.substr(metric, text.out.find('\n', metric + 1) - metric).find(" 100.0 %  ") != std::string::npos);
  auto failing = gpuxray::testing::runCommand(std::string(GPUXRAY_BINARY) + " analyze " + (dir / "run") +
                                              " --fail-on 'straggler_wait_ms>1' --fail-on 'busbw_pct_of_link<50'");
  CHECK(failing.exit_code == 0);
}
