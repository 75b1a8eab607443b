// The timeline export: golden tests on a hand-made 4-rank run (pipeline x tensor parallel on two
// hosts), decoded with the tests' subset of Perfetto's schema and checked the way trace_processor
// reads a trace; the Chrome JSON of the same walk; the CLI; and the checker itself on broken traces.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "analyzer/analysis/session.h"
#include "analyzer/export/chrome_json_writer.h"
#include "analyzer/export/perfetto_writer.h"
#include "analyzer/export/timeline_export.h"
#include "analyzer/load/run_loader.h"
#include "perfetto/perfetto_trace_subset.pb.h"
#include "tests/support/build_outputs.h"
#include "tests/support/kineto_traces.h"
#include "tests/support/perfetto_trace_check.h"
#include "tests/support/run_builder.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::testing::DecodedSlice;
using gpuxray::testing::DecodedTrace;
using gpuxray::testing::DecodedTrack;
using gpuxray::testing::kRunStartNs;
using gpuxray::testing::RunBuilder;
using gpuxray::testing::TempDir;
namespace analysis = gpuxray::analysis;
namespace report = gpuxray::report;
namespace timeline = gpuxray::timeline;

constexpr uint64_t kTensor[2] = {0x7e00'0000'0000'0001ull, 0x7e00'0000'0000'0002ull};    // by stage
constexpr uint64_t kPipeline[2] = {0x9900'0000'0000'0001ull, 0x9900'0000'0000'0002ull};  // by tensor rank
constexpr uint64_t kMiB = 1 << 20;

gpuxray::format::DeviceProperties h100() {
  gpuxray::format::DeviceProperties d;
  d.device_id = 0;
  d.name = "NVIDIA H100 80GB HBM3";
  d.compute_major = 9;
  d.sm_count = 132;
  d.max_threads_per_sm = 2048;
  d.registers_per_sm = 65536;
  d.registers_per_block = 65536;
  d.shared_memory_per_sm = 233472;
  d.shared_memory_per_block = 49152;
  d.shared_memory_per_block_optin = 232448;
  d.warp_size = 32;
  return d;
}

// Ranks 0,1 (node-0) are pipeline stage 0 and ranks 2,3 (node-1) stage 1; ranks {0,1} and {2,3} are
// tensor groups. One step 0-1000 µs:
//   gemm 10-400 (stream 7); tensor AllReduce 400-600 on tensor rank 0, 450-600 on tensor rank 1 (it
//   arrives last; an epilogue 400-450 runs first, back to back with the gemm);
//   stage 0 sends 600-700 to stage 1, whose receive was posted at 550 and ends at 710;
//   then stage 0 runs gemm_bwd 700-950, stage 1 gemm 720-900.
// Rank 0 also has a kernel on stream 7 that overlaps the gemm without nesting (300-500), device
// memory, a network transfer and a sampled metric.
void writeRun(const std::filesystem::path& dir) {
  RunBuilder run("golden-timeline", 4);
  for (int r = 0; r < 4; ++r) {
    int stage = r / 2, tp = r % 2;
    auto& rank = run.rank(r, stage == 0 ? "node-0" : "node-1", tp);
    rank.header.devices.push_back(h100());
    rank.communicator(kTensor[stage], "tp", tp, 2, 1);
    rank.communicator(kPipeline[tp], "pp", stage, 2, 2);
    rank.range("ProfilerStep#1", 0, 1000);
    rank.kernel("gemm", 10, 400);
    if (tp == 1) rank.kernel("epilogue", 400, 450);
    rank.collective(kTensor[stage], "AllReduce", 1, tp == 0 ? 400 : 450, 600, 64 * kMiB);
    if (stage == 0) {
      rank.p2p(kPipeline[tp], true, 1, 600, 700, 16 * kMiB);
      rank.kernel("gemm_bwd", 700, 950);
    } else {
      rank.p2p(kPipeline[tp], false, 0, 550, 710, 16 * kMiB, 540);
      rank.kernel("gemm", 720, 900);
    }
  }
  auto& r0 = run.rank(0, "node-0", 0);
  r0.kernel("side_kernel", 300, 500);
  r0.memoryChange(1, 1024 * kMiB).memoryChange(300, 512 * kMiB).memoryChange(900, -512 * static_cast<int64_t>(kMiB));
  r0.netTransfer(kPipeline[0], 1, true, 600, 700, 16 * kMiB);
  r0.metric("sm__throughput.avg.pct_of_peak_sustained_elapsed", 100, 55.0)
      .metric("sm__throughput.avg.pct_of_peak_sustained_elapsed", 200, 60.0);
  run.write(dir);
}

int64_t at(double us) {
  return static_cast<int64_t>(kRunStartNs) + static_cast<int64_t>(us * 1000);
}

struct Exported {
  std::unique_ptr<analysis::Session> session;
  report::Report report;
  timeline::ExportSummary summary;
  std::string perfetto;
  std::string json;
  DecodedTrace trace;
};

std::unique_ptr<Exported> exportRun(const std::string& dir, timeline::ExportOptions options = {}) {
  auto e = std::make_unique<Exported>();
  analysis::SessionOptions session_options;
  session_options.paths = {dir};
  session_options.align = false;
  e->session = std::make_unique<analysis::Session>(session_options);
  e->report = e->session->analyze();
  // What the pipeline and straggler analyses draw: an interval with its cause, and an instant.
  e->report.marks.push_back({"pipeline", 2, at(0), at(550), "bubble: waiting on stage 0"});
  e->report.marks.push_back({"stragglers", 1, at(450), at(450), "late arrival: 50 µs after the first"});

  gpuxray::format::MemorySink perfetto_bytes, json_bytes;
  timeline::PerfettoSink perfetto(perfetto_bytes);
  timeline::ChromeJsonSink json(json_bytes);
  timeline::TeeSink both({&perfetto, &json});
  e->summary = timeline::exportTimeline(e->session->run(), e->report, options, both);
  e->perfetto.assign(perfetto_bytes.bytes().begin(), perfetto_bytes.bytes().end());
  e->json.assign(json_bytes.bytes().begin(), json_bytes.bytes().end());
  e->trace = gpuxray::testing::decodePerfettoTrace(e->perfetto);
  return e;
}

std::vector<std::string> namesOf(const std::vector<const DecodedTrack*>& tracks) {
  std::vector<std::string> names;
  for (const auto* t : tracks) names.push_back(t->name);
  return names;
}

const DecodedTrack& processOfRank(const DecodedTrace& trace, int rank) {
  for (const auto* p : trace.processes()) {
    if (p->pid == 1000 + rank) return *p;
  }
  FAIL("no process for rank " << rank);
  throw;
}

const DecodedSlice* find(const std::vector<const DecodedSlice*>& slices, const std::string& name) {
  for (const auto* s : slices) {
    if (s->name == name) return s;
  }
  return nullptr;
}

void requireNoErrors(const std::vector<std::string>& errors) {
  for (const auto& e : errors) UNSCOPED_INFO(e);
  REQUIRE(errors.empty());
}

}  // namespace

TEST_CASE("perfetto export: the trace decodes with Perfetto's schema and keeps trace_processor's rules") {
  TempDir dir;
  writeRun(dir.path());
  auto e = exportRun(dir.path().string());
  requireNoErrors(e->trace.errors);
  CHECK(e->trace.root_orders_explicitly);
  CHECK(e->trace.sliceCount() == e->summary.slices + e->summary.instants);
  CHECK(e->trace.counters.size() == e->summary.counter_values);
  CHECK(e->trace.flows.size() == e->summary.flows);
  CHECK(e->summary.flows_unmatched == 0);
  CHECK(e->summary.flows_backwards == 0);
}

TEST_CASE("perfetto export: one process per rank, in rank order, named with host, GPU and parallel role") {
  TempDir dir;
  writeRun(dir.path());
  auto e = exportRun(dir.path().string());
  auto processes = e->trace.processes();
  REQUIRE(namesOf(processes) == std::vector<std::string>{"rank 0 · node-0 · GPU 0 · pp stage 0 / tp 0",
                                                         "rank 1 · node-0 · GPU 0 · pp stage 0 / tp 1",
                                                         "rank 2 · node-1 · GPU 0 · pp stage 1 / tp 0",
                                                         "rank 3 · node-1 · GPU 0 · pp stage 1 / tp 1"});
  for (int r = 0; r < 4; ++r) CHECK(processes[static_cast<size_t>(r)]->pid == 1000 + r);

  // Every rank and every stream of the model is there.
  for (const auto& rank : e->session->run().ranks) {
    const DecodedTrack& process = processOfRank(e->trace, rank.rank);
    for (const auto& stream : rank.streams) {
      const DecodedTrack* gpu = e->trace.child(process.uuid, "GPU " + std::to_string(stream.device));
      REQUIRE(gpu != nullptr);
      bool found = false;
      for (const auto* track : e->trace.children(gpu->uuid))
        found |= track->name.starts_with("stream " + std::to_string(stream.stream));
      CHECK(found);
    }
  }
}

TEST_CASE("perfetto export: per rank, findings, streams, NCCL, CPU threads and counters in explicit order") {
  TempDir dir;
  writeRun(dir.path());
  auto e = exportRun(dir.path().string());
  const DecodedTrack& rank0 = processOfRank(e->trace, 0);
  CHECK(namesOf(e->trace.children(rank0.uuid)) ==
        std::vector<std::string>{"findings", "GPU 0", "NCCL", "CPU thread 7000", "counters"});
  const DecodedTrack* gpu = e->trace.child(rank0.uuid, "GPU 0");
  CHECK(gpu->explicit_children);
  CHECK(namesOf(e->trace.children(gpu->uuid)) == std::vector<std::string>{"stream 7", "stream 13 · NCCL"});
  const DecodedTrack* nccl = e->trace.child(rank0.uuid, "NCCL");
  CHECK(namesOf(e->trace.children(nccl->uuid)) ==
        std::vector<std::string>{"pp (pipeline, 2 ranks)", "tp (tensor, 2 ranks)"});
  const DecodedTrack* counters = e->trace.child(rank0.uuid, "counters");
  CHECK(namesOf(e->trace.children(counters->uuid)) ==
        std::vector<std::string>{"GPU 0 memory in use", "GPU 0 estimated SM occupancy", "network send to rank 2",
                                 "GPU 0 sm__throughput.avg.pct_of_peak_sustained_elapsed"});
  const DecodedTrack* thread = e->trace.child(rank0.uuid, "CPU thread 7000");
  CHECK(thread->kind == DecodedTrack::Kind::kThread);
  CHECK(thread->pid == 1000);
}

TEST_CASE("perfetto export: kernels on their streams, overlapping ones on a lane, back-to-back ones in order") {
  TempDir dir;
  writeRun(dir.path());
  auto e = exportRun(dir.path().string());
  const DecodedTrack& rank0 = processOfRank(e->trace, 0);
  const DecodedTrack* stream7 = e->trace.child(e->trace.child(rank0.uuid, "GPU 0")->uuid, "stream 7");
  auto lanes = e->trace.children(stream7->uuid);
  REQUIRE(namesOf(lanes) == std::vector<std::string>{"stream 7 (overlap 1)"});
  auto main_lane = e->trace.slicesOn(stream7->uuid);
  REQUIRE(main_lane.size() == 2);
  CHECK(main_lane[0]->name == "gemm");
  CHECK(main_lane[0]->start == at(10));
  CHECK(main_lane[0]->end == at(400));
  CHECK(main_lane[1]->name == "gemm_bwd");
  auto overlap = e->trace.slicesOn(lanes[0]->uuid);
  REQUIRE(overlap.size() == 1);
  CHECK(overlap[0]->name == "side_kernel");
  CHECK(overlap[0]->end == at(500));

  // Rank 1: gemm ends at 400 where the epilogue begins; each keeps its own times on one track.
  const DecodedTrack& rank1 = processOfRank(e->trace, 1);
  const DecodedTrack* stream = e->trace.child(e->trace.child(rank1.uuid, "GPU 0")->uuid, "stream 7");
  CHECK(e->trace.children(stream->uuid).empty());
  auto slices = e->trace.slicesOn(stream->uuid);
  REQUIRE(slices.size() == 3);
  CHECK((slices[0]->name == "gemm" && slices[0]->start == at(10) && slices[0]->end == at(400)));
  CHECK((slices[1]->name == "epilogue" && slices[1]->start == at(400) && slices[1]->end == at(450)));
  CHECK(slices[1]->args.at("correlation") == "2");
}

TEST_CASE("perfetto export: NCCL operations with bytes, algorithm and bus bandwidth") {
  TempDir dir;
  writeRun(dir.path());
  auto e = exportRun(dir.path().string());
  const DecodedTrack& rank0 = processOfRank(e->trace, 0);
  const DecodedTrack* nccl = e->trace.child(rank0.uuid, "NCCL");
  auto tensor = e->trace.slicesOn(e->trace.child(nccl->uuid, "tp (tensor, 2 ranks)")->uuid);
  REQUIRE(tensor.size() == 1);
  const DecodedSlice& all_reduce = *tensor[0];
  CHECK(all_reduce.name == "AllReduce");
  CHECK(all_reduce.start == at(400));
  CHECK(all_reduce.args.at("bytes") == std::to_string(64 * kMiB));
  CHECK(all_reduce.args.at("algorithm") == "RING");
  CHECK(all_reduce.args.at("seq") == "1");
  // 64 MiB in 200 µs; an all-reduce over 2 ranks moves 2 (n-1)/n = 1 times that over the bus.
  CHECK(std::stod(all_reduce.args.at("busbw (GB/s)")) == Approx(64.0 * kMiB / 200'000));
  auto pipeline = e->trace.slicesOn(e->trace.child(nccl->uuid, "pp (pipeline, 2 ranks)")->uuid);
  REQUIRE(pipeline.size() == 1);
  CHECK(pipeline[0]->name == "Send");
  CHECK(pipeline[0]->args.at("peer rank") == "2");
}

TEST_CASE("perfetto export: flows from launch to kernel, send to receive, last arrival to completion") {
  TempDir dir;
  writeRun(dir.path());
  auto e = exportRun(dir.path().string());
  const auto& trace = e->trace;
  size_t launches = 0, sends = 0, collectives = 0;
  for (const auto& flow : trace.flows) {
    const DecodedSlice& from = trace.slices[flow.from];
    const DecodedSlice& to = trace.slices[flow.to];
    const DecodedTrack* from_process = trace.processOf(from.track);
    const DecodedTrack* to_process = trace.processOf(to.track);
    REQUIRE(from_process != nullptr);
    REQUIRE(to_process != nullptr);
    if (from.name == "cudaLaunchKernel") {
      ++launches;
      CHECK(trace.track(from.track)->kind == DecodedTrack::Kind::kThread);
      CHECK(from_process->pid == to_process->pid);
      CHECK(from.args.at("correlation") == to.args.at("correlation"));
      CHECK(from.start < to.start);
    } else if (from.name == "Send") {
      ++sends;
      CHECK(to.name == "Recv");
      CHECK(to_process->pid == from_process->pid + 2);  // stage 0 -> stage 1, same tensor rank
    } else {
      ++collectives;
      CHECK(from.name == "AllReduce");
      CHECK(to.name == "AllReduce");
      // From the last to arrive (tensor rank 1) to the one that waited for it.
      CHECK(from.start == at(450));
      CHECK(to.start == at(400));
      CHECK(to_process->pid == from_process->pid - 1);
    }
  }
  size_t kernels = 0;
  for (const auto& rank : e->session->run().ranks) kernels += rank.activities.size();
  CHECK(launches == kernels);
  CHECK(sends == 2);
  CHECK(collectives == 2);
}

TEST_CASE("perfetto export: findings per rank: analysis intervals as slices, late arrivals as instants") {
  TempDir dir;
  writeRun(dir.path());
  auto e = exportRun(dir.path().string());
  const DecodedTrack* findings2 = e->trace.child(processOfRank(e->trace, 2).uuid, "findings");
  REQUIRE(findings2 != nullptr);
  auto slices = e->trace.slicesOnLanes(findings2->uuid);
  const DecodedSlice* bubble = find(slices, "bubble: waiting on stage 0");
  REQUIRE(bubble != nullptr);
  CHECK(bubble->start == at(0));
  CHECK(bubble->end == at(550));
  CHECK(bubble->args.at("analysis") == "pipeline");
  // The overlap analysis' exposed communication is drawn too.
  const DecodedSlice* exposed = find(slices, "exposed communication");
  REQUIRE(exposed != nullptr);
  CHECK(exposed->args.at("analysis") == "overlap");

  const DecodedTrack* findings1 = e->trace.child(processOfRank(e->trace, 1).uuid, "findings");
  const DecodedSlice* late = find(e->trace.slicesOnLanes(findings1->uuid), "late arrival: 50 µs after the first");
  REQUIRE(late != nullptr);
  CHECK(late->instant);
  CHECK(late->start == at(450));
  CHECK(e->summary.findings == e->report.marks.size());
}

namespace {

// Three pipeline stages, one micro-batch forward, each rank's kernels on one stream: stage s
// receives from s-1, computes, sends to s+1; stage 1 computes 300 us, the others 100 us, and each
// receive ends when its send does (tests/analyze_critical_path_test.cc's slow stage, as files).
//   stage 0: gemm [10, 110), send [111, 121)
//   stage 1: recv [20, 121), gemm [122, 422), send [423, 433)
//   stage 2: recv [30, 433), gemm [434, 534)
void writePipelineRun(const std::filesystem::path& dir) {
  RunBuilder run("critical-path-timeline", 3);
  for (int s = 0; s < 3; ++s) {
    auto& rank = run.rank(s, "node-0", s);
    rank.communicator(kPipeline[0], "pp", s, 3, 1);
    rank.range("ProfilerStep#1", 0, 534);
  }
  using gpuxray::testing::kCommStream;
  run.rank(0, "node-0", 0).kernel("gemm", 10, 110, kCommStream).p2p(kPipeline[0], true, 1, 111, 121, kMiB);
  run.rank(1, "node-0", 1)
      .p2p(kPipeline[0], false, 0, 20, 121, kMiB)
      .kernel("gemm", 122, 422, kCommStream)
      .p2p(kPipeline[0], true, 2, 423, 433, kMiB);
  run.rank(2, "node-0", 2).p2p(kPipeline[0], false, 1, 30, 433, kMiB).kernel("gemm", 434, 534, kCommStream);
  run.write(dir);
}

struct PathSliceSeen {
  int rank;
  std::string name;
  double start_us, end_us;
  bool operator==(const PathSliceSeen&) const = default;
};

}  // namespace

TEST_CASE("perfetto export: the critical path on a track of its own, with arrows where it crosses ranks") {
  TempDir dir;
  writePipelineRun(dir.path());
  analysis::SessionOptions options;
  options.paths = {dir.path().string()};
  options.align = false;
  options.analysis.critical_path = true;
  analysis::Session session(options);
  report::Report report = session.analyze();
  REQUIRE(report.critical_paths.size() == 1);
  gpuxray::format::MemorySink perfetto_bytes, json_bytes;
  timeline::PerfettoSink perfetto(perfetto_bytes);
  timeline::ChromeJsonSink json(json_bytes);
  timeline::TeeSink both({&perfetto, &json});
  timeline::ExportSummary summary = timeline::exportTimeline(session.run(), report, {}, both);
  DecodedTrace trace =
      gpuxray::testing::decodePerfettoTrace(std::string(perfetto_bytes.bytes().begin(), perfetto_bytes.bytes().end()));
  requireNoErrors(trace.errors);
  CHECK(summary.flows_unmatched == 0);
  CHECK(summary.flows_backwards == 0);

  // By hand (the path of tests/analyze_critical_path_test.cc's slow stage): stage 0's launch delay
  // from its call's start (HTA's launch-delay edge) and
  // gemm, the gap, its send's span into stage 1's receive; stage 1's gap, gemm, gap, its send into
  // stage 2's receive; stage 2's gap and gemm. The track covers the step, each stretch on its rank.
  std::vector<PathSliceSeen> seen;
  std::map<size_t, PathSliceSeen> by_index;
  for (int r = 0; r < 3; ++r) {
    const DecodedTrack& process = processOfRank(trace, r);
    // After the findings, before the GPU's streams.
    std::vector<std::string> names = namesOf(trace.children(process.uuid));
    auto named = [&](const std::string& name) { return std::find(names.begin(), names.end(), name) - names.begin(); };
    CHECK(named("critical path") == named("findings") + 1);
    const DecodedTrack* track = trace.child(process.uuid, "critical path");
    REQUIRE(track != nullptr);
    CHECK(trace.children(track->uuid).empty());  // its stretches never overlap
    for (const DecodedSlice* s : trace.slicesOn(track->uuid)) {
      CHECK(s->args.at("analysis") == "critical_path");
      CHECK(s->args.at("step") == "1");
      PathSliceSeen one{r, s->name, static_cast<double>(s->start - at(0)) / 1000.0,
                        static_cast<double>(s->end - at(0)) / 1000.0};
      seen.push_back(one);
      by_index[static_cast<size_t>(s - trace.slices.data())] = one;
    }
  }
  std::sort(seen.begin(), seen.end(), [](const auto& a, const auto& b) { return a.start_us < b.start_us; });
  std::vector<PathSliceSeen> expected = {
      {0, "other: before the path", 0, 5},
      {0, "host-bound launch", 5, 10},
      {0, "compute: GEMM", 10, 110},
      {0, "kernel gap", 110, 111},
      {1, "exposed comm: pipeline-parallel", 111, 121},
      {1, "kernel gap", 121, 122},
      {1, "compute: GEMM", 122, 422},
      {1, "kernel gap", 422, 423},
      {2, "exposed comm: pipeline-parallel", 423, 433},
      {2, "kernel gap", 433, 434},
      {2, "compute: GEMM", 434, 534},
  };
  for (const auto& s : seen) UNSCOPED_INFO(s.rank << " " << s.name << " " << s.start_us << "-" << s.end_us);
  CHECK(seen == expected);

  // One arrow per crossing, from the last stretch on one rank to the first on the next.
  std::vector<std::pair<PathSliceSeen, PathSliceSeen>> crossings;
  for (const auto& flow : trace.flows) {
    auto from = by_index.find(flow.from), to = by_index.find(flow.to);
    if (from != by_index.end() || to != by_index.end()) {
      REQUIRE(from != by_index.end());
      REQUIRE(to != by_index.end());
      crossings.emplace_back(from->second, to->second);
    }
  }
  REQUIRE(crossings.size() == 2);
  CHECK(crossings[0] == std::pair(expected[3], expected[4]));
  CHECK(crossings[1] == std::pair(expected[7], expected[8]));
  CHECK(trace.flows.size() == summary.flows);

  // The Chrome JSON of the same walk draws the same arrows.
  auto chrome = gpuxray::testing::checkChromeJson(std::string(json_bytes.bytes().begin(), json_bytes.bytes().end()));
  requireNoErrors(chrome.errors);
  CHECK(chrome.flows == summary.flows);

  // Without --critical-path there is no such track.
  analysis::SessionOptions plain_options = options;
  plain_options.analysis.critical_path = false;
  analysis::Session plain(plain_options);
  report::Report plain_report = plain.analyze();
  CHECK(plain_report.critical_paths.empty());
  gpuxray::format::MemorySink plain_bytes;
  timeline::PerfettoSink plain_sink(plain_bytes);
  timeline::exportTimeline(plain.run(), plain_report, {}, plain_sink);
  DecodedTrace plain_trace =
      gpuxray::testing::decodePerfettoTrace(std::string(plain_bytes.bytes().begin(), plain_bytes.bytes().end()));
  CHECK(plain_trace.child(processOfRank(plain_trace, 1).uuid, "critical path") == nullptr);
  CHECK(plain_trace.flows.size() == trace.flows.size() - 2);
}

TEST_CASE("perfetto export: counters for memory in use, occupancy, network throughput and metrics") {
  TempDir dir;
  writeRun(dir.path());
  auto e = exportRun(dir.path().string());
  const DecodedTrack* counters = e->trace.child(processOfRank(e->trace, 0).uuid, "counters");
  auto values = [&](const std::string& name) {
    const DecodedTrack* track = e->trace.child(counters->uuid, name);
    REQUIRE(track != nullptr);
    std::vector<std::pair<int64_t, double>> points;
    for (const auto& c : e->trace.counters) {
      if (c.track == track->uuid) points.emplace_back(c.time, c.value);
    }
    return points;
  };
  using Points = std::vector<std::pair<int64_t, double>>;
  CHECK(values("GPU 0 memory in use") ==
        Points{{at(1), 1024.0 * kMiB}, {at(300), 1536.0 * kMiB}, {at(900), 1024.0 * kMiB}});
  CHECK(e->trace.child(counters->uuid, "GPU 0 memory in use")->unit == 3);  // UNIT_SIZE_BYTES
  auto network = values("network send to rank 2");
  REQUIRE(network.size() == 2);
  CHECK(network[0].first == at(600));
  CHECK(network[0].second == Approx(16.0 * kMiB / 100'000));  // bytes per ns = GB/s
  CHECK(network[1] == std::pair<int64_t, double>{at(700), 0.0});
  CHECK(values("GPU 0 sm__throughput.avg.pct_of_peak_sustained_elapsed") == Points{{at(100), 55.0}, {at(200), 60.0}});
  // gemm, 132x1x1 blocks of 256 threads with 32 registers: 8 blocks fit per SM, so one wave fills an
  // eighth of the slots at full occupancy: 12.5 %, written as 13 (then 25 with the side kernel).
  auto occupancy = values("GPU 0 estimated SM occupancy");
  REQUIRE(occupancy.size() >= 3);
  CHECK(occupancy[0] == std::pair<int64_t, double>{at(10), 13.0});
  CHECK(occupancy[1] == std::pair<int64_t, double>{at(300), 25.0});
}

TEST_CASE("perfetto export: a window writes whole slices overlapping it and no dangling flows") {
  TempDir dir;
  writeRun(dir.path());
  timeline::ExportOptions options;
  options.window = analysis::Interval{at(620), at(1000)};
  auto e = exportRun(dir.path().string(), options);
  requireNoErrors(e->trace.errors);
  CHECK(e->summary.outside_window > 0);
  for (const auto& slice : e->trace.slices) {
    INFO(slice.name);
    CHECK(slice.end >= at(620));
  }
  // The sends (600-700) and receives (550-710) overlap the window, but their kernels' launches (5 µs
  // before) do not; the all-reduces end at 600, so their arrows go too.
  CHECK(e->summary.flows_unmatched == 4 + 2);
  size_t sends = 0;
  for (const auto& flow : e->trace.flows) sends += e->trace.slices[flow.from].name == "Send" ? 1u : 0u;
  CHECK(sends == 2);
  // Memory in use when the window opens (1.5 GiB) is written at its start.
  bool opening_value = false;
  for (const auto& c : e->trace.counters) opening_value |= c.time == at(620) && c.value == 1536.0 * kMiB;
  CHECK(opening_value);
}

TEST_CASE("chrome json export: the same slices, counters and flows, with names and sort indexes") {
  TempDir dir;
  writeRun(dir.path());
  auto e = exportRun(dir.path().string());
  auto json = gpuxray::testing::checkChromeJson(e->json);
  requireNoErrors(json.errors);
  CHECK(json.slices == e->trace.sliceCount());
  CHECK(json.counter_values == e->trace.counters.size());
  CHECK(json.flows == e->trace.flows.size());
  CHECK(json.first_ts == 0.0);  // microseconds from the run's first event
  CHECK(json.process_names.at(1002) == "rank 2 · node-1 · GPU 0 · pp stage 1 / tp 0");
  CHECK(json.process_sort_index.at(1002) == 3);
  bool stream_named = false;
  for (const auto& [key, name] : json.thread_names) stream_named |= key.first == 1000 && name == "stream 7 (overlap 1)";
  CHECK(stream_named);
  CHECK(json.thread_sort_index.size() == json.thread_names.size());
}

TEST_CASE("perfetto export: the CLI writes traces from analyze and export, protoc decodes them") {
  TempDir dir;
  writeRun(dir.path() / "run");
  std::string gpuxray = gpuxray::testing::gpuxrayBinary();
  std::string run = (dir / "run");
  auto analyzed = gpuxray::testing::runCommand(gpuxray + " analyze " + run + " --perfetto " + (dir / "a.pftrace") +
                                               " --chrome-json " + (dir / "a.json"));
  INFO(analyzed.err);
  REQUIRE(analyzed.exit_code == 0);
  CHECK(analyzed.out.find("gpuxray analyze: run golden-timeline") != std::string::npos);
  CHECK(analyzed.err.find("gpuxray: wrote " + (dir / "a.pftrace") + " (Perfetto, ") != std::string::npos);
  auto trace = gpuxray::testing::decodePerfettoTrace(gpuxray::testing::readWholeFile(dir / "a.pftrace"));
  requireNoErrors(trace.errors);
  CHECK(trace.processes().size() == 4);
  CHECK(gpuxray::testing::checkChromeJson(gpuxray::testing::readWholeFile(dir / "a.json")).slices ==
        trace.sliceCount());

  auto exported = gpuxray::testing::runCommand(gpuxray + " export perfetto " + run + " -o " + (dir / "b.pftrace") +
                                               " --ranks 0,2 --steps 1 --window 500us:");
  INFO(exported.err);
  REQUIRE(exported.exit_code == 0);
  CHECK(exported.out.find("2 of 4 ranks") != std::string::npos);
  CHECK(exported.out.find("gpuxray: left out: 2 ranks not loaded;") != std::string::npos);
  auto partial = gpuxray::testing::decodePerfettoTrace(gpuxray::testing::readWholeFile(dir / "b.pftrace"));
  requireNoErrors(partial.errors);
  CHECK(namesOf(partial.processes()).size() == 2);

  // protoc with the subset schema: every field is known (unknown ones print as bare numbers).
  auto decoded = gpuxray::testing::runCommand(std::string(GPUXRAY_PROTOC) + " --decode=perfetto.protos.Trace -I " +
                                              GPUXRAY_SOURCE_DIR + "/tests/perfetto perfetto_trace_subset.proto < " +
                                              (dir / "b.pftrace"));
  REQUIRE(decoded.exit_code == 0);
  CHECK(decoded.out.find("process_name: \"rank 2 ") != std::string::npos);
  bool numeric_field = false;
  std::istringstream lines(decoded.out);
  for (std::string line; std::getline(lines, line);) {
    size_t first = line.find_first_not_of(' ');
    numeric_field |= first != std::string::npos && std::isdigit(static_cast<unsigned char>(line[first]));
  }
  CHECK_FALSE(numeric_field);

  auto json = gpuxray::testing::runCommand(gpuxray + " export chrome-json " + run + " -o " + (dir / "c.json"));
  REQUIRE(json.exit_code == 0);
  requireNoErrors(gpuxray::testing::checkChromeJson(gpuxray::testing::readWholeFile(dir / "c.json")).errors);

  // The same grammar as analyze's: bare numbers are seconds; the end comes after the start.
  auto bad_window = gpuxray::testing::runCommand(gpuxray + " export perfetto " + run + " -o " + (dir / "d.pftrace") +
                                                 " --window 3:2");
  CHECK(bad_window.exit_code == 1);
  CHECK(bad_window.err.find("--window '3:2': expected START:END from the run's first GPU activity") !=
        std::string::npos);
  auto no_steps =
      gpuxray::testing::runCommand(gpuxray + " export perfetto " + run + " -o " + (dir / "d.pftrace") + " --steps 7");
  CHECK(no_steps.exit_code == 1);
  CHECK(no_steps.err.find("--steps: the run has no step with these numbers (steps from NVTX ranges ProfilerStep#N)") !=
        std::string::npos);
}

TEST_CASE("perfetto export: the simulated demo run (TP2 x PP2 x DP4) passes the checks in both formats") {
  TempDir dir;
  auto written =
      gpuxray::testing::runCommand(gpuxray::testing::gpuxrayBinary() + " simulate --preset demo -o " + (dir / "run"));
  REQUIRE(written.exit_code == 0);
  auto e = exportRun(dir / "run");
  requireNoErrors(e->trace.errors);
  CHECK(e->trace.processes().size() == e->session->run().ranks.size());
  size_t kernels = 0, stream_slices = 0;
  for (const auto& rank : e->session->run().ranks) kernels += rank.activities.size();
  for (const auto& slice : e->trace.slices) {
    const DecodedTrack* track = e->trace.track(slice.track);
    const DecodedTrack* parent = track != nullptr ? e->trace.track(track->parent) : nullptr;
    if (parent != nullptr && parent->name.starts_with("GPU ")) ++stream_slices;
  }
  CHECK(stream_slices == kernels);
  auto json = gpuxray::testing::checkChromeJson(e->json);
  requireNoErrors(json.errors);
  CHECK(json.slices == e->trace.sliceCount());
  CHECK(json.flows == e->trace.flows.size());
}

TEST_CASE("perfetto trace check: catches what trace_processor would drop") {
  using gpuxray::timeline::PerfettoWriter;
  using gpuxray::timeline::TrackSpec;
  namespace pf = gpuxray::timeline::pf;
  auto check = [](auto&& write) {
    gpuxray::format::MemorySink bytes;
    PerfettoWriter writer(bytes);
    write(writer);
    writer.flush();
    return gpuxray::testing::decodePerfettoTrace(std::string(bytes.bytes().begin(), bytes.bytes().end())).errors;
  };
  auto has = [](const std::vector<std::string>& errors, const std::string& text) {
    for (const auto& e : errors) {
      if (e.find(text) != std::string::npos) return true;
    }
    UNSCOPED_INFO("errors: " << errors.size());
    return false;
  };
  TrackSpec track;
  track.id = 1;
  track.name = "t";

  CHECK(check([&](PerfettoWriter& w) {
          w.trackDescriptor(track);
          uint64_t name = w.internEventName(1, "k");
          w.event(1, pf::kTypeSliceBegin, 100, name, {}, {}, {});
          w.event(1, pf::kTypeSliceEnd, 200, 0, {}, {}, {});
        }).empty());
  CHECK(has(check([&](PerfettoWriter& w) {
              w.trackDescriptor(track);
              w.event(1, pf::kTypeSliceEnd, 200, 0, {}, {}, {});
            }),
            "END without an open slice"));
  CHECK(has(check([&](PerfettoWriter& w) {
              w.trackDescriptor(track);
              w.event(1, pf::kTypeSliceBegin, 100, 7, {}, {}, {});
              w.event(1, pf::kTypeSliceEnd, 200, 0, {}, {}, {});
            }),
            "event name iid 7 used before it was defined"));
  // The writer refuses what its incremental clock cannot say; the checker catches it elsewhere.
  CHECK_THROWS_AS(check([&](PerfettoWriter& w) {
                    w.event(1, pf::kTypeSliceBegin, 300, 0, {}, {}, {});
                    w.event(1, pf::kTypeSliceEnd, 100, 0, {}, {}, {});
                  }),
                  std::logic_error);
  {
    perfetto::protos::Trace trace;
    auto* descriptor = trace.add_packet();
    descriptor->set_trusted_packet_sequence_id(1);
    descriptor->set_sequence_flags(1);
    descriptor->mutable_track_descriptor()->set_uuid(1);
    for (uint64_t time : {300u, 100u}) {
      auto* packet = trace.add_packet();
      packet->set_trusted_packet_sequence_id(2);
      packet->set_sequence_flags(time == 300 ? 3 : 2);
      packet->set_timestamp(time);
      packet->mutable_track_event()->set_track_uuid(1);
      packet->mutable_track_event()->set_type(time == 300 ? perfetto::protos::TrackEvent::TYPE_SLICE_BEGIN
                                                          : perfetto::protos::TrackEvent::TYPE_SLICE_END);
    }
    CHECK(has(gpuxray::testing::decodePerfettoTrace(trace.SerializeAsString()).errors, "time goes back"));
  }
  uint64_t flow = 42;
  CHECK(has(check([&](PerfettoWriter& w) {
              w.trackDescriptor(track);
              w.event(1, pf::kTypeSliceBegin, 100, 0, {}, {}, {});
              w.event(1, pf::kTypeSliceEnd, 200, 0, {}, {}, std::span<const uint64_t>(&flow, 1));
            }),
            "terminates without having started"));
  CHECK(has(check([&](PerfettoWriter& w) {
              w.trackDescriptor(track);
              w.event(1, pf::kTypeSliceBegin, 100, 0, {}, {}, {});
            }),
            "never end"));
  CHECK(
      has(check([&](PerfettoWriter& w) { w.event(9, pf::kTypeSliceBegin, 100, 0, {}, {}, {}); }), "undeclared track"));
}

TEST_CASE("perfetto export: convert -o FILE.pftrace writes the merged timeline of a PyTorch-profiler run") {
  auto shared = gpuxray::testing::sharedTraces("hta_sampled_2rank");
  if (!shared) return;
  std::string kineto = shared->string();
  TempDir dir;
  auto converted = gpuxray::testing::runCommand(gpuxray::testing::gpuxrayBinary() + " convert " + kineto + " -o " +
                                                (dir / "sampled.pftrace"));
  INFO(converted.err);
  REQUIRE(converted.exit_code == 0);
  CHECK(converted.out.find("2 of 128 ranks") != std::string::npos);  // two ranks of a 128-rank job
  auto trace = gpuxray::testing::decodePerfettoTrace(gpuxray::testing::readWholeFile(dir / "sampled.pftrace"));
  requireNoErrors(trace.errors);
  CHECK(trace.processes().size() == 2);
  CHECK(trace.sliceCount() > 1000);
}
