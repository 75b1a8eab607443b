// Golden tests for clock alignment: two hosts whose clocks differ by 3.2 ms, which alignment must
// remove (and without which the cross-rank figures come out wrong), a drifting clock, clock anchors,
// and a receive recorded before its send, which the clock conditions must move.

#include <catch2/catch.hpp>
#include <optional>
#include <string>

#include "tests/support/analyzed_run.h"
#include "tests/support/build_outputs.h"
#include "tests/support/run_builder.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::testing::cellAt;
using gpuxray::testing::kRunStartNs;
using gpuxray::testing::rowWhere;
using gpuxray::testing::RunBuilder;
using gpuxray::testing::table;
using gpuxray::testing::TempDir;

constexpr uint64_t kDp = 0xD000000000000001ull;
constexpr uint64_t kPp = 0xB000000000000002ull;
constexpr int kSteps = 10;

// Ranks 0-1 on node-a, 2-3 on node-b, whose clock is 3.2 ms ahead. Each 1000 µs step (true time):
// compute until the rank's entry (600, 650, 620, 700 µs), then an all-reduce that ends at 900 µs on
// every rank. Rank 2 also sends 1 MB over the network in each step (800-850 µs).
// With `late_receive`, rank 1 sends to rank 2 at 920-950 µs of step 0 and rank 2's receive is
// recorded at 902-910 µs: it would end 10 µs before the send began.
void writeSkewedRun(const std::filesystem::path& dir, bool late_receive = false) {
  RunBuilder run("golden-clock", 4);
  const double entries[] = {600, 650, 620, 700};
  for (int r = 0; r < 4; ++r) {
    auto& rank = run.rank(r, r < 2 ? "node-a" : "node-b", r % 2);
    if (r >= 2) rank.clock_skew_us = 3200;
    rank.communicator(kDp, "dp", r, 4, 2);
    for (int step = 0; step < kSteps; ++step) {
      double t = step * 1000.0;
      rank.range("ProfilerStep#" + std::to_string(step), t, t + 1000);
      rank.kernel("gemm", t, t + entries[r]);
      rank.collective(kDp, "AllReduce", static_cast<uint64_t>(step + 1), t + entries[r], t + 900, 64 << 20);
      if (r == 2) rank.transfer(kDp, true, 3, t + 800, t + 850, 1'000'000);
    }
    if (late_receive && r == 1) rank.communicator(kPp, "pp", 0, 2, 2).p2p(kPp, true, 1, 920, 950, 4 << 20);
    if (late_receive && r == 2) rank.communicator(kPp, "pp", 1, 2, 2).p2p(kPp, false, 0, 902, 910, 4 << 20);
  }
  run.write(dir);
}

// By value: a skeleton's operations are packed, so the loop's `op` is a temporary.
gpuxray::model::NcclOp allReduce(const gpuxray::model::RankTrace& rank, uint64_t seq) {
  for (const auto& op : rank.nccl_ops) {
    if (op.comm_hash == kDp && op.seq == seq) return op;
  }
  FAIL("no all-reduce " << seq << " on rank " << rank.rank);
  throw;
}

}  // namespace

TEST_CASE("analyze: clock alignment removes a 3.2 ms offset between hosts") {
  TempDir dir;
  writeSkewedRun(dir.path());
  auto a = gpuxray::testing::analyzeRun(dir.path().string());
  REQUIRE(a.clock);
  REQUIRE(a.clock->hosts.size() == 2);
  CHECK(a.clock->hosts[0].host == "node-a");
  CHECK(a.clock->hosts[0].offset_ns == 0);
  const auto& b = a.clock->hosts[1];
  CHECK(b.host == "node-b");
  CHECK(std::abs(b.offset_ns + 3'200'000) <= 1'000);
  CHECK(b.drift_ns_per_s == 0);
  CHECK(b.matched == kSteps);
  CHECK(b.source == "collectives");
  CHECK(b.residual_max_ns == 0);
  CHECK(a.clock->collective_violations == 0);
  CHECK(a.run.ranks[2].clock_offset_ns == -3'200'000);
  CHECK(a.run.ranks[1].clock_offset_ns == 0);

  // Every time of the host moved: collective ends agree, ranges and transfers sit at true time.
  for (uint64_t seq = 1; seq <= kSteps; ++seq) {
    int64_t end = allReduce(a.run.ranks[0], seq).gpu_end_ns;
    for (size_t r = 1; r < 4; ++r) CHECK(allReduce(a.run.ranks[r], seq).gpu_end_ns == end);
  }
  CHECK(a.run.ranks[3].nvtx.front().start_ns == static_cast<int64_t>(kRunStartNs));
  CHECK(a.run.ranks[2].transfers.front().start_ns == static_cast<int64_t>(kRunStartNs + 800'000));
  CHECK(a.run.ranks[3].activities.front().start_ns == static_cast<int64_t>(kRunStartNs));
  CHECK(allReduce(a.run.ranks[3], 1).enqueue_ns == static_cast<int64_t>(kRunStartNs + 695'000));

  const auto& hosts = table(a.report, "clock", "hosts");
  size_t row = rowWhere(hosts, "host", "node-b");
  CHECK(cellAt(hosts, row, "offset").number == Approx(-3'200'000).margin(1'000));
  CHECK(cellAt(hosts, row, "ranks").text == "2, 3");  // a pair is listed, three or more a range
  CHECK(cellAt(hosts, row, "matched").number == kSteps);
  CHECK(a.report.warnings.empty());
  // results.clock carries the same.
  const gpuxray::report::ResultValue* clock = nullptr;
  for (const auto& [id, value] : a.report.results) {
    if (id == "clock") clock = &value;
  }
  REQUIRE(clock != nullptr);
  CHECK(clock->find("aligned")->asBool());
  const auto& clock_hosts = clock->find("hosts")->items();
  REQUIRE(clock_hosts.size() == 2);
  CHECK(clock_hosts[1].find("host")->asText() == "node-b");
  CHECK(std::abs(clock_hosts[1].find("offset_ns")->asInteger() + 3'200'000) <= 1'000);
  CHECK(clock_hosts[1].find("source")->asText() == "collectives");
  CHECK(clock_hosts[1].find("ranks")->items().size() == 2);

  // On one clock the members entered 100 µs apart (600 .. 700), rank 3 last.
  CHECK(a.report.metric("collective_skew_ms")->value == Approx(0.1));
  const auto& top = table(a.report, "collectives", "top_skew");
  CHECK(cellAt(top, 0, "last").number == 3);
  CHECK(cellAt(top, 0, "skew").number == 100'000);
}

TEST_CASE("analyze: without clock alignment the cross-host figures are off by the clock difference") {
  TempDir dir;
  writeSkewedRun(dir.path());
  auto a = gpuxray::testing::analyzeRun(dir.path().string(), false);
  CHECK_FALSE(a.clock);
  REQUIRE_FALSE(a.report.results.empty());
  CHECK(a.report.results.front().first == "clock");
  CHECK_FALSE(a.report.results.front().second.find("aligned")->asBool());
  CHECK(a.report.results.front().second.find("reference_ns")->kind() == gpuxray::report::ResultValue::Kind::kNull);
  CHECK(a.run.ranks[2].clock_offset_ns == 0);
  // Rank 3's entry at 700 µs reads 3900 µs on its host's clock: 3.3 ms after rank 0's.
  CHECK(a.report.metric("collective_skew_ms")->value == Approx(3.3));
  const auto& section = a.report.sections.front();
  CHECK(section.id == "clock");
  CHECK(section.notes.front().find("Not aligned (--no-align, or --compat hta") != std::string::npos);

  std::string gpuxray = gpuxray::testing::gpuxrayBinary() + " analyze --format json " + dir.path().string();
  auto aligned = gpuxray::testing::runCommand(gpuxray);
  auto unaligned = gpuxray::testing::runCommand(gpuxray + " --no-align");
  INFO(aligned.err << unaligned.err);
  REQUIRE(aligned.exit_code == 0);
  REQUIRE(unaligned.exit_code == 0);
  CHECK(aligned.out.find("\"collective_skew_ms\": {\n      \"value\": 0.1,") != std::string::npos);
  CHECK(unaligned.out.find("\"collective_skew_ms\": {\n      \"value\": 3.3,") != std::string::npos);
}

TEST_CASE("analyze: clock alignment shifts a host so that no receive ends before its send began") {
  TempDir dir;
  writeSkewedRun(dir.path(), true);
  auto a = gpuxray::testing::analyzeRun(dir.path().string());
  REQUIRE(a.clock);
  CHECK(a.clock->p2p_pairs == 1);
  CHECK(a.clock->p2p_violations == 1);
  const auto& b = a.clock->hosts[1];
  // The collectives put node-b at -3.2 ms; the receive needs it 10 µs later still.
  CHECK(b.condition_shift_ns == 10'000);
  CHECK(std::abs(b.offset_ns - (-3'200'000 + 10'000)) <= 1'000);
  std::optional<gpuxray::model::NcclOp> send, receive;
  for (const auto& op : a.run.ranks[1].nccl_ops)
    if (op.comm_hash == kPp) send = op;
  for (const auto& op : a.run.ranks[2].nccl_ops)
    if (op.comm_hash == kPp) receive = op;
  REQUIRE(send);
  REQUIRE(receive);
  CHECK(receive->gpu_end_ns == send->gpu_start_ns);
  // Which leaves node-b's collective ends 10 µs after node-a's.
  CHECK(b.residual_median_ns == 10'000);
  const auto& hosts = table(a.report, "clock", "hosts");
  CHECK(cellAt(hosts, rowWhere(hosts, "host", "node-b"), "condition_shift").number == 10'000);
}
TEST_CASE("analyze: clock alignment follows a host clock that drifts") {
  // node-b's clock is 3.2 ms ahead and runs 50 ppm fast: over 50 steps of 100 ms its collective ends
  // drift 250 µs away from node-a's.
  TempDir dir;
  RunBuilder run("golden-drift", 4);
  for (int r = 0; r < 4; ++r) {
    auto& rank = run.rank(r, r < 2 ? "node-a" : "node-b", r % 2);
    if (r >= 2) rank.clock_skew_us = 3200, rank.clock_drift_ppm = 50;
    rank.communicator(kDp, "dp", r, 4, 2);
    for (int step = 0; step < 50; ++step) {
      double t = step * 100'000.0;
      rank.kernel("gemm", t, t + 60'000 + r * 100);
      rank.collective(kDp, "AllReduce", static_cast<uint64_t>(step + 1), t + 60'000 + r * 100, t + 90'000, 64 << 20);
    }
  }
  run.write(dir.path());
  auto a = gpuxray::testing::analyzeRun(dir.path().string());
  REQUIRE(a.clock);
  const auto& b = a.clock->hosts[1];
  CHECK(b.drift_ns_per_s == Approx(-50'000).margin(10));
  CHECK(b.residual_max_ns <= 2);
  for (uint64_t seq = 1; seq <= 50; ++seq) {
    CHECK(std::abs(allReduce(a.run.ranks[3], seq).gpu_end_ns - allReduce(a.run.ranks[0], seq).gpu_end_ns) <= 2);
  }
  // Entries 100 µs apart per rank: 300 µs from rank 0 to rank 3, on one clock.
  CHECK(a.report.metric("collective_skew_ms")->value == Approx(0.3).margin(0.000'002));
  CHECK(a.report.warnings.empty());
}

TEST_CASE("analyze: clock anchors place a host whose time base differs, and too few matches leave it there") {
  // node-b records on another clock, 3.2 s behind CLOCK_REALTIME; its anchor says 3.19999 s (10 µs
  // off). Two collectives are too few to correct that.
  TempDir dir;
  RunBuilder run("golden-anchors", 2);
  for (int r = 0; r < 2; ++r) {
    auto& rank = run.rank(r, r == 0 ? "node-a" : "node-b", 0);
    if (r == 1) {
      rank.header.time_base = "monotonic";
      rank.clock_skew_us = -3'200'000;
      rank.anchor_realtime_minus_capture_us = 3'199'990;
    }
    rank.communicator(kDp, "dp", r, 2, 2);
    for (int step = 0; step < 2; ++step) {
      double t = step * 1000.0;
      rank.kernel("gemm", t, t + 600);
      rank.collective(kDp, "AllReduce", static_cast<uint64_t>(step + 1), t + 600, t + 900, 64 << 20);
    }
  }
  run.write(dir.path());
  auto a = gpuxray::testing::analyzeRun(dir.path().string());
  REQUIRE(a.clock);
  CHECK(a.clock->anchors_applied);
  const auto& b = a.clock->hosts[1];
  CHECK(b.source == "anchors");
  CHECK(b.matched == 2);
  CHECK(b.offset_ns == 0);
  CHECK(a.run.ranks[1].clock_offset_ns == 3'199'990'000);
  CHECK(b.residual_median_ns == 10'000);
  CHECK(allReduce(a.run.ranks[0], 1).gpu_end_ns - allReduce(a.run.ranks[1], 1).gpu_end_ns == 10'000);
  REQUIRE(a.report.warnings.size() == 1);
  CHECK(a.report.warnings[0] ==
        "clock: host node-b shares 2 matched collectives with other hosts (fewer than 3 with any one): its clock is "
        "placed by its clock anchors alone");
}
