// Throughput of `gpuxray analyze`'s pipeline on one core: loading a data-parallel run written with
// the real writer, clock alignment, steps, and every analysis.
//
//   analyze_phase_benchmark [--ranks N] [--steps N] [--kernels N] [--dir DIR] [--keep] [--repeat N]
//
// --keep leaves the run's files in DIR (to analyze them with `gpuxray analyze` afterwards); --repeat N
// times the critical path's per-rank part N times more and keeps the fastest.
// Each rank runs --steps steps of --kernels compute kernels (each with its launch call) and one
// all-reduce; ranks are split over two hosts, the second with its clock 3.2 ms ahead. The target
// (>= 10 M records/s on one core for load and analysis together) is reported, not enforced, and so is
// the critical path's cost against the rest of analyze (<= 1x). Times are the process's CPU seconds.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>

#include "analyzer/analysis/activity_totals.h"
#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/clock_alignment.h"
#include "analyzer/analysis/critical_path.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/analysis/steps.h"
#include "analyzer/load/run_loader.h"
#include "proto/file_layout.h"
#include "proto/trace_writer.h"

namespace {

using namespace gpuxray;
// The process's CPU time (one worker: the load runs on one thread), so that other work on a shared
// machine does not move the figures as it moves wall time.
struct Clock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<Clock>;
  static constexpr bool is_steady = true;
  static time_point now() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return time_point(duration(static_cast<rep>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec));
  }
};

constexpr uint64_t kStartNs = 1'764'410'400'000'000'000ull;
constexpr uint64_t kComm = 0xD000000000000001ull;
constexpr double kTargetRecordsPerSecond = 10e6;

struct Options {
  int ranks = 8;
  int steps = 200;
  int kernels = 1000;
  std::string dir = "/tmp/gpuxray-analyze-benchmark";
  bool keep = false;
  int repeat = 0;
};

void writeRank(const Options& o, int rank, const std::filesystem::path& dir) {
  format::TraceWriter writer(std::make_unique<format::FileSink>((dir / format::traceFileName(rank, "", 0)).string()));
  format::FileHeader header;
  header.run_id = "benchmark";
  header.rank = rank;
  header.world_size = o.ranks;
  header.hostname = rank < o.ranks / 2 ? "node-a" : "node-b";
  header.time_base = "generated";
  uint64_t skew = rank < o.ranks / 2 ? 0 : 3'200'000;
  header.start_time_ns = kStartNs + skew;
  writer.writeHeader(header);
  writer.add(format::NcclCommunicatorRecord{kComm, "dp", rank, o.ranks, 2, rank, 0, kStartNs, 5});
  format::StringId gemm = writer.intern("gemm"), all_reduce = writer.intern("AllReduce"),
                   nccl_kernel = writer.intern("ncclDevKernel_AllReduce_Sum_bf16_RING_LL"),
                   step_name = writer.intern("ProfilerStep#");
  uint32_t correlation = 1;
  uint64_t t = kStartNs + skew;
  for (int step = 0; step < o.steps; ++step) {
    uint64_t step_start = t;
    for (int k = 0; k < o.kernels; ++k) {
      format::KernelRecord kernel;
      kernel.start_ns = t;
      kernel.end_ns = t + 8'000 + static_cast<uint64_t>((k * 7919 + rank * 131) % 4000);
      kernel.stream = 7;
      kernel.correlation_id = correlation;
      kernel.name_id = gemm;
      kernel.grid_x = 132, kernel.block_x = 256;
      writer.add(kernel);
      format::ApiCallRecord call;
      call.start_ns = t - 6'000;
      call.end_ns = t - 2'000;
      call.domain = format::ApiDomain::kRuntime;
      call.cbid = 211;
      call.correlation_id = correlation++;
      writer.add(call);
      t = kernel.end_ns + 1'000;
    }
    uint64_t end = step_start + static_cast<uint64_t>(o.kernels) * 14'000 + 2'000'000;
    format::KernelRecord kernel;
    kernel.start_ns = t;
    kernel.end_ns = end;
    kernel.stream = 13;
    kernel.correlation_id = correlation;
    kernel.name_id = nccl_kernel;
    writer.add(kernel);
    format::ApiCallRecord call;
    call.start_ns = t - 6'000;
    call.end_ns = t - 2'000;
    call.domain = format::ApiDomain::kDriver;
    call.correlation_id = correlation++;
    writer.add(call);
    format::NcclOperationRecord op;
    op.kind = format::NcclOperationKind::kCollective;
    op.comm_hash = kComm;
    op.seq = static_cast<uint64_t>(step + 1);
    op.func_id = all_reduce;
    op.enqueue_ns = t - 5'000;
    op.gpu_start_ns = t;
    op.gpu_end_ns = end;
    op.bytes = 256ull << 20;
    writer.add(op);
    format::NvtxEventRecord range;
    range.kind = format::NvtxEventKind::kRange;
    range.start_ns = step_start;
    range.end_ns = end + 10'000;
    range.name_id = step_name;
    writer.add(range);
    t = end + 10'000;
  }
  writer.finish(format::Trailer{});
}

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--keep") {
      o.keep = true;
      continue;
    }
    if (i + 1 >= argc) break;
    ++i;
    if (flag == "--ranks")
      o.ranks = std::atoi(argv[i]);
    else if (flag == "--steps")
      o.steps = std::atoi(argv[i]);
    else if (flag == "--kernels")
      o.kernels = std::atoi(argv[i]);
    else if (flag == "--dir")
      o.dir = argv[i];
    else if (flag == "--repeat")
      o.repeat = std::atoi(argv[i]);
  }
  std::filesystem::remove_all(o.dir);
  std::filesystem::create_directories(o.dir);
  for (int r = 0; r < o.ranks; ++r) writeRank(o, r, o.dir);

  auto start = Clock::now();
  load::LoadOptions load_options;
  load_options.threads = 1;
  model::RunTrace run = load::loadRun({o.dir}, load_options);
  double load_s = seconds(start);
  auto analyze_start = Clock::now();
  analysis::ClockAlignment clock = analysis::alignClocks(run);
  double align_s = seconds(analyze_start);
  analysis::AnalysisInput input{run, {}, {}, "none", {}};
  input.clock = &clock;
  input.collective_index = clock.matches;
  auto stage = Clock::now();
  auto lap = [&](const char* name) {
    fmt::print("  {:<16} {:.3f} s\n", name, seconds(stage));
    stage = Clock::now();
  };
  analysis::findSteps(input);
  lap("steps");
  for (const auto& rank : run.ranks) input.time_sets.push_back(analysis::gpuTimeSetsOf(rank));
  lap("time sets");
  // The analyses read each rank's digest (the per-rank phase), as the session makes them.
  std::vector<analysis::RankDigest> digests;
  for (size_t r = 0; r < run.ranks.size(); ++r) digests.push_back(analysis::digestRank(input, r));
  input.digests = &digests;
  lap("digests");
  report::Report report;
  analysis::analyzeClock(input, report);
  analysis::analyzeTimeBreakdown(input, report);
  lap("time breakdown");
  analysis::analyzeOverlap(input, report);
  lap("overlap");
  analysis::analyzeCollectives(input, report);
  lap("collectives");
  analysis::analyzeStragglers(input, report);
  lap("stragglers");
  analysis::analyzePipelineBubbles(input, report);
  analysis::analyzeLinkHotspots(input, report);
  analysis::analyzeKernels(input, report);
  analysis::analyzeMemory(input, report);
  analysis::analyzeActivityTotals(input, report);
  analysis::analyzeStepOverview(input, report);
  analysis::analyzeMemoryCategories(input, report);
  analysis::analyzeOps(input, report);
  lap("the other ones");
  double rest_s = seconds(analyze_start);
  // The critical path as `analyze --critical-path` runs it without a timeline: each rank's part made with
  // its digest (the per-rank phase), then the path across ranks from the parts, no slices.
  auto critical_start = Clock::now();
  for (size_t r = 0; r < run.ranks.size(); ++r) digests[r].critical_path = analysis::criticalPathOfRank(input, r);
  double per_rank_s = seconds(critical_start);
  // --repeat N: the per-rank part N times more, its fastest time (a shared machine's noise is all upward).
  for (int i = 0; i < o.repeat; ++i) {
    auto again = Clock::now();
    for (size_t r = 0; r < run.ranks.size(); ++r) digests[r].critical_path = analysis::criticalPathOfRank(input, r);
    per_rank_s = std::min(per_rank_s, seconds(again));
  }
  fmt::print("  {:<16} {:.3f} s\n", "path, per rank", per_rank_s);
  stage = Clock::now();
  report.keep_marks = false;
  analysis::analyzeCriticalPath(input, report);
  double critical_s = per_rank_s + seconds(stage);
  lap("path, across");
  report.sortFindings();
  double analyze_s = seconds(analyze_start);
  double total = load_s + analyze_s;
  double rate = static_cast<double>(run.records()) / total;
  fmt::print("{} records in {} ranks: load {:.3f} s, align {:.3f} s, analyze (align included) {:.3f} s on one core\n",
             run.records(), run.ranks.size(), load_s, align_s, analyze_s);
  fmt::print("{:.1f} M records/s (target {:.0f} M/s: {})\n", rate / 1e6, kTargetRecordsPerSecond / 1e6,
             rate >= kTargetRecordsPerSecond ? "met" : "NOT met");
  fmt::print("node-b offset {:.3f} ms, straggler_wait_ms {:.3f}\n",
             static_cast<double>(clock.hosts.back().offset_ns) / 1e6,
             report.metric("straggler_wait_ms") ? report.metric("straggler_wait_ms")->value : -1.0);
  fmt::print(
      "critical path {:.3f} s ({:.3f} s per rank) = {:.2f}x the rest of analyze ({:.3f} s: load {:.3f} s + the "
      "other analyses {:.3f} s; target <= 1x)\n",
      critical_s, per_rank_s, critical_s / (load_s + rest_s), load_s + rest_s, load_s, rest_s);
  if (!o.keep) std::filesystem::remove_all(o.dir);
  return 0;
}
