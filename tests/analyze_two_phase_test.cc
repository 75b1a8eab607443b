// The two phases (analysis/session.h, rank_digest.h): a session that digests each rank as it is
// read and keeps only its skeleton gives the report of the session that keeps every event, with
// every option that changes what a digest must hold (clock drift, --window, --steps, --no-align,
// --compat hta, several workers), and reads a rank again only when its early digest cannot hold.

#include <algorithm>
#include <catch2/catch.hpp>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "analyzer/analysis/digest_file.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/analysis/session.h"
#include "tests/support/run_builder.h"
#include "tests/support/temp_dir.h"

namespace {

namespace analysis = gpuxray::analysis;
using gpuxray::testing::RunBuilder;
using gpuxray::testing::TempDir;

// Four ranks on two hosts (the second 3 ms ahead, `drift_ppm` fast): a pipeline between ranks 0
// and 1, a data-parallel all-reduce that rank 3 enters late, launch gaps, memory churn.
void writeRun(const std::filesystem::path& dir, double drift_ppm) {
  RunBuilder run("two-phase", 4);
  for (int r = 0; r < 4; ++r) {
    auto& rank = run.rank(r, r < 2 ? "node-0" : "node-1");
    rank.clock_skew_us = r < 2 ? 0 : 3000;
    rank.clock_drift_ppm = r < 2 ? 0 : drift_ppm;
    rank.communicator(1, "dp", r, 4, 2);
    if (r < 2) rank.communicator(2, "pp", r, 2, 1);
    for (int step = 0; step < 4; ++step) {
      double t = 100 + step * 2000;
      rank.range("ProfilerStep#" + std::to_string(step + 1), t, t + 1900);
      double late = r == 3 ? 150 : 0;
      rank.kernel("gemm_a", t, t + 300 + late);
      // Launched only after the GPU ran dry: a host-bound gap before it.
      rank.kernel("gemm_b", t + 400 + late, t + 700 + late, 7, r == 2 ? 0 : 150);
      if (r < 2) rank.p2p(2, r == 0, 1 - r, t + 700 + late, t + 800 + late, 4 << 20);
      rank.collective(1, "AllReduce", static_cast<uint64_t>(step + 1), t + 900 + late, t + 1300, 64 << 20);
      rank.kernel("optimizer", t + 1350, t + 1500);
      rank.memoryChange(t + 10, 1 << 30);
      rank.memoryChange(t + 1600, -(1 << 30));
    }
  }
  run.write(dir);
}

std::string jsonOf(analysis::SessionOptions options, bool keep_events, size_t* read_again = nullptr) {
  options.keep_events = keep_events;
  analysis::Session session(options);
  std::string json = gpuxray::report::renderJson(session.analyze());
  if (read_again != nullptr) *read_again = session.phaseTimes().ranks_read_again;
  return json;
}

}  // namespace

TEST_CASE("two phases: the digested session's report is the one with every event", "[session][digest]") {
  for (double drift : {0.0, 40.0}) {
    TempDir dir;
    writeRun(dir.path(), drift);
    analysis::SessionOptions options;
    options.paths = {dir.path().string()};
    options.jobs = 1;
    size_t again = 99;
    INFO("drift " << drift << " ppm");
    {
      INFO("aligned");
      std::string with_events = jsonOf(options, true);
      CHECK(jsonOf(options, false, &again) == with_events);
      CHECK(with_events.find("\"pipeline_bubbles\"") != std::string::npos);
      options.jobs = 2;
      CHECK(jsonOf(options, false) == with_events);
      options.jobs = 1;
    }
    {
      INFO("--window: every rank is read again once the window is known");
      auto windowed = options;
      windowed.selection = analysis::parseRunSelection({}, {}, "1ms:5ms");
      CHECK(jsonOf(windowed, false, &again) == jsonOf(windowed, true));
      CHECK(again == 4);
    }
    {
      INFO("--steps");
      auto stepped = options;
      stepped.selection = analysis::parseRunSelection({}, {"2-3"}, "");
      CHECK(jsonOf(stepped, false) == jsonOf(stepped, true));
    }
    {
      INFO("--no-align: nothing is read again");
      auto unaligned = options;
      unaligned.align = false;
      CHECK(jsonOf(unaligned, false, &again) == jsonOf(unaligned, true));
      CHECK(again == 0);
    }
    {
      INFO("--compat hta");
      auto hta = options;
      hta.align = false;
      hta.analysis.hta_compat = true;
      CHECK(jsonOf(hta, false) == jsonOf(hta, true));
    }
  }
}

TEST_CASE("two phases: a rank is read again only when its clock drifts", "[session][digest]") {
  TempDir steady, drifting;
  writeRun(steady.path(), 0);
  writeRun(drifting.path(), 40);
  analysis::SessionOptions options;
  options.paths = {steady.path().string()};
  size_t again = 99;
  jsonOf(options, false, &again);
  CHECK(again == 0);  // one offset per host: each early digest holds, moved by it
  options.paths = {drifting.path().string()};
  analysis::Session drifted([&] {
    auto o = options;
    o.keep_events = false;
    return o;
  }());
  REQUIRE(drifted.clock());
  size_t drifting_ranks = 0;
  for (const auto& clock : drifted.clock()->rank_clocks) drifting_ranks += clock.pureOffset() ? 0u : 1u;
  CHECK(drifted.phaseTimes().ranks_read_again == drifting_ranks);
}

TEST_CASE("two phases: ranks digested in any order are each read once", "[session][digest]") {
  // Four ranks on one host whose median steps differ (rank r's longest steps are r's), rank 0's file
  // the longest to read: the other workers digest their ranks while rank 0 is still being read, and
  // must keep the lanes of rank 0's median step, which the step overview shows.
  TempDir dir;
  RunBuilder run("any-order", 4);
  for (int r = 0; r < 4; ++r) {
    auto& rank = run.rank(r, "node-0");
    rank.communicator(1, "dp", r, 4, 1);
    double t = 100;
    for (int step = 0; step < 5; ++step) {
      double length = 1000 + 200 * ((step + r) % 5);
      rank.range("ProfilerStep#" + std::to_string(step + 1), t, t + length);
      int kernels = r == 0 ? 4000 : 4;
      for (int k = 0; k < kernels; ++k) {
        double at = t + 600.0 * k / kernels;
        rank.kernel("gemm", at, at + 500.0 / kernels);
      }
      rank.collective(1, "AllReduce", static_cast<uint64_t>(step + 1), t + 700, t + length - 100, 64 << 20);
      t += length + 50;
    }
  }
  run.write(dir.path());
  analysis::SessionOptions options;
  options.paths = {dir.path().string()};
  options.jobs = 4;
  size_t again = 99;
  std::string digested = jsonOf(options, false, &again);
  CHECK(again == 0);
  CHECK(digested == jsonOf(options, true));
}

TEST_CASE("two phases: the analyses and the critical path on three workers give the report they give on one",
          "[session]") {
  TempDir dir;
  writeRun(dir.path(), 40.0);
  for (bool hta : {false, true}) {
    INFO((hta ? "--compat hta" : "gpuxray's own"));
    analysis::SessionOptions options;
    options.paths = {dir.path().string()};
    options.align = !hta;
    options.analysis.hta_compat = hta;
    options.analysis.critical_path = true;  // reads the other analyses' findings
    options.jobs = 1;
    analysis::Session session(options);
    auto one = session.analyze();
    options.jobs = 3;
    auto three = analysis::Session(options).analyze();
    CHECK(gpuxray::report::renderJson(three) == gpuxray::report::renderJson(one));
    CHECK(gpuxray::report::renderText(three) == gpuxray::report::renderText(one));
    // What the renderers leave out: the timeline's marks and paths, and the analyses' order.
    REQUIRE(three.marks.size() == one.marks.size());
    CHECK(!one.marks.empty());
    for (size_t i = 0; i < one.marks.size(); ++i) {
      CHECK(three.marks[i].analysis == one.marks[i].analysis);
      CHECK(three.marks[i].label == one.marks[i].label);
      CHECK(three.marks[i].start_ns == one.marks[i].start_ns);
    }
    // The critical path's steps, split between the workers, joined in step order.
    REQUIRE(three.critical_paths.size() == one.critical_paths.size());
    CHECK(one.critical_paths.size() == 4);
    for (size_t i = 0; i < one.critical_paths.size(); ++i) {
      CHECK(three.critical_paths[i].step == one.critical_paths[i].step);
      REQUIRE(three.critical_paths[i].stretches.size() == one.critical_paths[i].stretches.size());
      for (size_t k = 0; k < one.critical_paths[i].stretches.size(); ++k) {
        const auto& a = one.critical_paths[i].stretches[k];
        const auto& b = three.critical_paths[i].stretches[k];
        CHECK(std::tie(b.label, b.start_ns, b.end_ns, b.rank) == std::tie(a.label, a.start_ns, a.end_ns, a.rank));
      }
    }
    REQUIRE(three.sections.size() == one.sections.size());
    for (size_t i = 0; i < one.sections.size(); ++i) CHECK(three.sections[i].id == one.sections[i].id);
    CHECK(three.warnings == one.warnings);
    CHECK(three.stats.nonZero() == one.stats.nonZero());
  }
}

TEST_CASE("two phases: a report without typed results is the same report, its results left out", "[session][digest]") {
  TempDir dir;
  writeRun(dir.path(), 0);
  for (bool hta : {false, true}) {
    for (bool keep_events : {false, true}) {
      INFO((hta ? "--compat hta" : "gpuxray's own") << (keep_events ? ", every event" : ", digested"));
      analysis::SessionOptions options;
      options.paths = {dir.path().string()};
      options.jobs = 1;
      options.keep_events = keep_events;
      options.align = !hta;
      options.analysis.hta_compat = hta;
      auto full = analysis::Session(options).analyze();
      options.typed_results = false;
      auto lean = analysis::Session(options).analyze();

      // Every analysis that has a result gave one; without them none is made, nothing else changes.
      for (const char* id : {"clock", "step_times", "collectives", "collective_bandwidth", "stragglers",
                             "pipeline_bubbles", "link_hotspots", "kernels", "memory", "activity_totals",
                             "step_overview", "memory_categories", "ops", hta ? "hta" : "time_breakdown"}) {
        INFO(id);
        CHECK(std::count_if(full.results.begin(), full.results.end(), [&](const auto& r) { return r.first == id; }) ==
              1);
      }
      CHECK(lean.results.empty());
      CHECK(gpuxray::report::renderText(lean) == gpuxray::report::renderText(full));
      CHECK(gpuxray::report::renderMarkdown(lean) == gpuxray::report::renderMarkdown(full));
      full.results.clear();
      CHECK(gpuxray::report::renderJson(lean) == gpuxray::report::renderJson(full));
    }
  }
}

TEST_CASE("two phases: a digest's packed time column gives back every value", "[digest]") {
  using analysis::PackedColumn;
  constexpr int64_t kEpoch = 1'764'410'400'000'000'000;
  constexpr int64_t kValues = 100 * static_cast<int64_t>(PackedColumn::kBlock) + 7;
  auto same = [](const std::vector<int64_t>& values) {
    PackedColumn packed(values);
    REQUIRE(packed.size() == values.size());
    CHECK(packed.values() == values);
    for (size_t i = 0; i < values.size(); i += 3) CHECK(packed[values.size() - 1 - i] == values[values.size() - 1 - i]);
    return packed.bytes();
  };

  // Times 40 ms apart, with the open ends and "none" among them: offsets from each block's least,
  // 31 bits (and two codes for those).
  std::vector<int64_t> with_open_ends;
  for (int64_t i = 0; i < kValues; ++i)
    with_open_ends.push_back(i % 37 == 5 ? INT64_MIN : i % 53 == 9 ? INT64_MAX : kEpoch + i * 40'000'000);
  CHECK(same(with_open_ends) < with_open_ends.size() * 9 / 2);
  // Without them, differences from the previous: the same step takes no bits, a jitter of 1 ms 20.
  std::vector<int64_t> steady, jittered;
  for (int64_t i = 0; i < kValues; ++i) {
    steady.push_back(kEpoch + i * 40'000'000);
    jittered.push_back(kEpoch + i * 40'000'000 + (i * 7919) % 1'000'000);
  }
  CHECK(same(steady) < steady.size() / 2);
  CHECK(same(jittered) < jittered.size() * 3);
  // Starts and ends in turn (a step of 23 ms, a collective of 1 ms, a jitter of 5 us): differences
  // from the value two before, 14 bits.
  std::vector<int64_t> starts_and_ends;
  for (int64_t i = 0; i < kValues; ++i)
    starts_and_ends.push_back(kEpoch + (i / 2) * 23'000'000 + (i % 2) * 1'000'000 + (i * 104'729) % 5'000);
  CHECK(same(starts_and_ends) < starts_and_ends.size() * 5 / 2);
  // Sums of time that grow by steps, and stand still in between.
  std::vector<int64_t> sums;
  for (int64_t i = 0; i < kValues; ++i) sums.push_back(((i + 1) / 2) * 22'000'000);
  CHECK(same(sums) < sums.size() * 3 / 4);

  // Values as far apart as 64 bits go, differences that wrap, and a column of one value.
  std::vector<int64_t> extremes{0, 1, 5'000'000'000, -7, INT64_MIN + 1, INT64_MAX - 1, INT64_MIN, INT64_MAX, 3};
  CHECK(same(extremes) > 0);
  std::vector<int64_t> wrapping;
  for (int64_t i = 0; i < kValues; ++i) wrapping.push_back(i % 2 == 0 ? INT64_MAX - 1 - i : INT64_MIN + 1 + i);
  same(wrapping);
  for (size_t n : {size_t{1}, size_t{2}, size_t{3}, PackedColumn::kBlock + 1, PackedColumn::kBlock + 2}) {
    same(std::vector<int64_t>(n, kEpoch));
    std::vector<int64_t> rising;
    for (size_t i = 0; i < n; ++i) rising.push_back(kEpoch + static_cast<int64_t>(i * i));
    same(rising);
  }
  CHECK(same(std::vector<int64_t>(100, 42)) < 40);
  // Random columns of every width, in runs of each kind.
  uint64_t state = 88172645463325252ull;
  auto next = [&] { return state ^= state << 13, state ^= state >> 7, state ^= state << 17; };
  for (int width : {0, 1, 7, 8, 31, 32, 33, 56, 57, 58, 63, 64}) {
    std::vector<int64_t> random, random_walk;
    int64_t walk = kEpoch;
    for (int64_t i = 0; i < kValues; ++i) {
      uint64_t bits = width == 64 ? next() : next() & ((uint64_t{1} << width) - 1);
      random.push_back(static_cast<int64_t>(bits));
      walk = static_cast<int64_t>(static_cast<uint64_t>(walk) + bits);
      random_walk.push_back(walk);
    }
    same(random);
    same(random_walk);
  }

  // Shifted: every value but the open ends moves; a copy keeps its own values.
  PackedColumn packed(with_open_ends);
  PackedColumn copy = packed;
  packed.shift(-3'000'000);
  std::vector<int64_t> shifted = with_open_ends;
  for (auto& v : shifted)
    if (v != INT64_MIN && v != INT64_MAX) v -= 3'000'000;
  CHECK(packed.values() == shifted);
  PackedColumn steady_packed(steady), steady_copy = steady_packed;
  steady_packed.shift(10);
  for (size_t i = 0; i < steady.size(); ++i) {
    REQUIRE(steady_copy[i] == steady[i]);
    REQUIRE(steady_packed[i] == steady[i] + 10);
    REQUIRE(copy[i] == with_open_ends[i]);
  }

  // Sorted columns (the time points' times) are searched as std::lower_bound would.
  for (const auto* column : {&steady, &starts_and_ends, &sums}) {
    std::vector<int64_t> sorted = *column;
    std::sort(sorted.begin(), sorted.end());
    PackedColumn times(sorted);
    for (size_t i = 0; i < sorted.size(); i += 5) {
      for (int64_t t : {sorted[i] - 1, sorted[i], sorted[i] + 1}) {
        auto expected = std::lower_bound(sorted.begin(), sorted.end(), t) - sorted.begin();
        REQUIRE(times.lowerBound(t) == static_cast<size_t>(expected));
      }
    }
    CHECK(times.lowerBound(INT64_MAX) == sorted.size());
    CHECK(times.lowerBound(INT64_MIN) == 0);
  }
  CHECK(PackedColumn(std::vector<int64_t>{}).lowerBound(5) == 0);
  CHECK(PackedColumn(std::vector<int64_t>{}).bytes() == 0);
}

TEST_CASE("two phases: a skeleton's packed NCCL operations, NVTX ranges and strings give back every value",
          "[digest]") {
  constexpr int64_t kEpoch = 1'764'410'400'000'000'000;
  std::vector<gpuxray::model::NcclOp> ops;
  for (int64_t i = 0; i < 100; ++i) {
    gpuxray::model::NcclOp op;
    op.kind = i % 3 == 0 ? gpuxray::format::NcclOperationKind::kSend : gpuxray::format::NcclOperationKind::kCollective;
    op.comm_hash = 0xbe7c0000ull + static_cast<uint64_t>(i % 2);
    op.seq = static_cast<uint64_t>(i / 2);
    op.func_id = 3, op.datatype_id = 4, op.bytes = 1u << 20, op.count = 1u << 19, op.peer = static_cast<int32_t>(i % 3);
    op.enqueue_ns = kEpoch + i * 20'000'000;
    op.gpu_start_ns = i == 7 ? 0 : op.enqueue_ns + 5'000;  // one without GPU times: its column stays whole
    op.gpu_end_ns = i == 7 ? 0 : op.gpu_start_ns + 1'000'000;
    op.operation_id = i == 50 ? UINT64_MAX : static_cast<uint64_t>(i + 1);
    ops.push_back(op);
  }
  gpuxray::model::NcclOps packed(ops);
  packed.pack();
  REQUIRE(packed.packed());
  REQUIRE(packed.size() == ops.size());
  auto same = [](const gpuxray::model::NcclOp& a, const gpuxray::model::NcclOp& b) {
    return a.kind == b.kind && a.comm_hash == b.comm_hash && a.seq == b.seq && a.func_id == b.func_id &&
           a.algorithm_id == b.algorithm_id && a.protocol_id == b.protocol_id && a.datatype_id == b.datatype_id &&
           a.enqueue_ns == b.enqueue_ns && a.gpu_start_ns == b.gpu_start_ns && a.gpu_end_ns == b.gpu_end_ns &&
           a.bytes == b.bytes && a.count == b.count && a.root == b.root && a.peer == b.peer &&
           a.channels == b.channels && a.device == b.device && a.operation_id == b.operation_id &&
           a.gpu_clock_error_ns == b.gpu_clock_error_ns;
  };
  for (size_t i = 0; i < ops.size(); ++i) CHECK(same(packed[i], ops[i]));
  size_t n = 0;
  for (const gpuxray::model::NcclOp& op : packed) CHECK(same(op, ops[n++]));
  CHECK(n == ops.size());
  // Changed as a vector, and packed again.
  packed.change([](std::vector<gpuxray::model::NcclOp>& all) {
    for (auto& op : all) op.enqueue_ns += 10;
  });
  CHECK(packed.packed());
  CHECK(packed[99].enqueue_ns == ops[99].enqueue_ns + 10);

  std::vector<gpuxray::model::NvtxRange> ranges;
  for (int64_t i = 0; i < 70; ++i)
    ranges.push_back({kEpoch + i * 30'000'000, kEpoch + i * 30'000'000 + 29'000'000, static_cast<uint32_t>(i + 1),
                      i % 2 == 0 ? 5u : 6u, 77, static_cast<uint32_t>(i % 2)});
  // Ends held as differences from the starts: one that never ended, one that ends before it starts.
  ranges.push_back({kEpoch + int64_t{71} * 30'000'000, 0, 80, 5, 77, 0});
  ranges.push_back({kEpoch + int64_t{72} * 30'000'000, kEpoch, 81, 5, 77, 0});
  gpuxray::model::NvtxRanges packed_ranges(ranges);
  packed_ranges.pack();
  CHECK(packed_ranges.bytes() < ranges.size() * sizeof(gpuxray::model::NvtxRange) / 2);
  for (size_t i = 0; i < ranges.size(); ++i) {
    const gpuxray::model::NvtxRange r = packed_ranges[i];
    CHECK((r.start_ns == ranges[i].start_ns && r.end_ns == ranges[i].end_ns && r.name_id == ranges[i].name_id &&
           r.domain_id == ranges[i].domain_id && r.thread_id == ranges[i].thread_id && r.depth == ranges[i].depth));
  }

  gpuxray::model::RankStrings strings;
  CHECK(strings.size() == 1);
  CHECK(strings[0].empty());
  strings.push_back("ProfilerStep#123");
  strings.push_back("");
  strings.push_back("AllReduce");
  CHECK(strings.values() == std::vector<std::string>{"", "ProfilerStep#123", "", "AllReduce"});
  CHECK(gpuxray::model::RankStrings(strings.values()).values() == strings.values());
  strings.pack();
  CHECK(strings[1] == "ProfilerStep#123");
  CHECK(strings[3] == "AllReduce");
  strings.push_back("Broadcast");  // unpacks
  CHECK(strings.values() == std::vector<std::string>{"", "ProfilerStep#123", "", "AllReduce", "Broadcast"});

  // Two ranks' packed tables share the blocks they have alike; a block that differs by one string
  // stays each rank's own, and every string reads back as it was added.
  std::vector<std::string> names{""};
  for (int step = 0; step < 3 * static_cast<int>(gpuxray::model::RankStrings::kBlock) + 7; ++step)
    names.push_back(step % 5 == 0 ? "" : "ProfilerStep#" + std::to_string(step));
  std::vector<std::string> other_names = names;
  other_names[gpuxray::model::RankStrings::kBlock + 3] = "ProfilerStep#x";
  gpuxray::model::RankStrings rank0(names), rank1(names), rank2(other_names);
  const size_t unpacked_bytes = rank0.bytes();
  rank0.pack(), rank1.pack(), rank2.pack();
  CHECK(rank0.values() == names);
  CHECK(rank1.values() == names);
  CHECK(rank2.values() == other_names);
  CHECK(rank0[1].data() == rank1[1].data());
  CHECK(rank0[names.size() - 1].data() == rank1[names.size() - 1].data());
  CHECK(rank0[1].data() == rank2[1].data());
  CHECK(rank0[gpuxray::model::RankStrings::kBlock + 1].data() != rank2[gpuxray::model::RankStrings::kBlock + 1].data());
  CHECK(rank0.bytes() < unpacked_bytes);
  rank1 = gpuxray::model::RankStrings();  // lets its blocks go; rank0's still read
  CHECK(rank0.values() == names);
  gpuxray::model::RankStrings again(names);
  again.pack();
  CHECK(again[1].data() == rank0[1].data());
}

TEST_CASE("two phases: a digest's time points give back each point's gap and launch, in memory and in a file",
          "[digest]") {
  constexpr int64_t kEpoch = 1'764'410'400'000'000'000;
  constexpr int64_t kNoLaunch = analysis::TimePoint::kNoLaunch;
  // Points every 10 ms; every other one in a gap, whose launch the point shares but for every
  // seventh in a gap (work of no length starts in the gap after it) and the last gap (no launch).
  std::vector<analysis::TimePoint> points;
  for (int64_t i = 0; i < 3 * static_cast<int64_t>(gpuxray::model::PackedColumn::kBlock) + 5; ++i) {
    analysis::TimePoint p;
    p.time = kEpoch + i * 10'000'000;
    p.compute = i * 6'000'000, p.communication = i * 3'000'000, p.host_bound = i * 1'000;
    if (i % 2 == 1) {
      p.in_gap = true;
      p.gap_start = i == 1 ? INT64_MIN : p.time - 2'000;
      p.gap_end = i == 3 * static_cast<int64_t>(gpuxray::model::PackedColumn::kBlock) + 3 ? INT64_MAX : p.time + 5'000;
      p.gap_launch = i > 90 ? kNoLaunch : p.time - 40'000;
      p.launch_after = i % 7 == 0 ? p.time - 1'000 : i == 95 ? p.time + 1 : p.gap_launch;
    }
    points.push_back(p);
  }
  analysis::RankDigest digest;
  digest.points = analysis::TimePoints(points);
  CHECK(digest.points.other_launches.size() == 8);
  auto same = [](const analysis::TimePoint& a, const analysis::TimePoint& b) {
    return a.time == b.time && a.compute == b.compute && a.communication == b.communication &&
           a.host_bound == b.host_bound && a.launch_after == b.launch_after && a.in_gap == b.in_gap &&
           a.gap_start == b.gap_start && a.gap_end == b.gap_end && a.gap_launch == b.gap_launch;
  };
  auto check = [&](const analysis::TimePoints& kept, int64_t moved) {
    REQUIRE(kept.size() == points.size());
    for (size_t i = 0; i < points.size(); ++i) {
      analysis::TimePoint expected = points[i];
      auto move = [moved](int64_t& t) {
        if (t != INT64_MIN && t != INT64_MAX) t += moved;
      };
      move(expected.time), move(expected.launch_after);
      if (expected.in_gap) move(expected.gap_start), move(expected.gap_end), move(expected.gap_launch);
      INFO("point " << i);
      CHECK(same(kept[i], expected));
    }
  };
  check(digest.points, 0);
  // The gaps' ends and launches as differences from their starts: two bytes each, not four.
  CHECK(digest.points.gaps.bytes() < digest.points.gaps.size() * 10);
  digest.shift(-7'000);
  check(digest.points, -7'000);

  TempDir dir;
  gpuxray::model::RankTrace skeleton;
  skeleton.path = (dir.path() / "rank-00000.gpuxray").string();
  skeleton.rank = 0;
  std::string file = (dir.path() / "rank-00000.gpuxray.gxdigest").string();
  analysis::writeDigestFile(file, skeleton, digest, "");
  check(analysis::readDigestFile(file).digest.points, -7'000);
}

TEST_CASE("two phases: a digest's gaps whose end or launch lies at no difference a column can hold are kept whole",
          "[digest]") {
  using Gap = analysis::TimePoints::Gap;
  // -1 to INT64_MAX - 1 is a difference of INT64_MAX, which stands for an open end.
  const std::vector<Gap> gaps{{-1, INT64_MAX - 1, -5}, {INT64_MIN, 3, INT64_MIN}, {10, INT64_MAX, 2}, {20, 30, 19}};
  analysis::TimePoints::Gaps packed(gaps);
  auto same = [](const std::vector<Gap>& a, const std::vector<Gap>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const Gap& x, const Gap& y) {
      return x.start == y.start && x.end == y.end && x.launch == y.launch;
    });
  };
  CHECK(same(packed.values(), gaps));
  packed.shift(-4);
  CHECK(same(packed.values(), {{-5, INT64_MAX - 5, -9}, {INT64_MIN, -1, INT64_MIN}, {6, INT64_MAX, -2}, {16, 26, 15}}));
  const std::vector<Gap> usual{{-1, 4, -5}, {INT64_MIN, 3, INT64_MIN}, {10, INT64_MAX, 2}, {20, 30, 19}};
  CHECK(same(analysis::TimePoints::Gaps(usual).values(), usual));
}

TEST_CASE("two phases: a digest whose windows are forgotten still tells the windows it was made over", "[digest]") {
  std::vector<analysis::StepWindow> made{{1, {1'000, 2'000}}, {2, {2'000, 3'500}}, {3, {3'500, INT64_MAX}}};
  analysis::RankDigest digest;
  digest.windows = made;
  digest.forgetWindows();
  CHECK(digest.windows.empty());
  digest.shift(250);
  digest.shift(-50);
  // The run's windows of the rank: the same, moved by the clock offset (an open end stays open).
  std::vector<analysis::StepWindow> run{{1, {1'200, 2'200}}, {2, {2'200, 3'700}}, {3, {3'700, INT64_MAX}}};
  CHECK(digest.madeOver(run));
  auto differs = [&](auto change) {
    auto other = run;
    change(other);
    return !digest.madeOver(other);
  };
  CHECK(differs([](auto& w) { w[1].window.end += 1; }));
  CHECK(differs([](auto& w) { w[0].number = 0; }));
  CHECK(differs([](auto& w) { w.pop_back(); }));
  CHECK(differs([](auto& w) { std::swap(w[0], w[1]); }));
  CHECK(differs([](auto& w) { w.push_back({4, {3'700, 4'000}}); }));
  // Held windows are compared as they are.
  analysis::RankDigest held;
  held.windows = made;
  held.shift(200);
  CHECK(held.madeOver(run));
  CHECK_FALSE(held.madeOver(made));
}
