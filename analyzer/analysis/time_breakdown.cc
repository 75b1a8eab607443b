// Where each rank's GPU time goes: compute, communication not hidden by compute, memory traffic
// not hidden by either, and idle, with idle split by why the GPU waited (docs/analyses.md):
// host-bound (the next work was launched only after the GPU ran dry), dependency (it was launched
// earlier but had to wait for other work: an event, another stream, a peer), other (no launch
// record to tell).

#include <fmt/core.h>

#include <algorithm>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/idle_split.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/analysis/statistics.h"
#include "analyzer/model/graph_capture.h"

namespace gpuxray::analysis {
namespace {

using report::Cell;
using report::Unit;

struct StreamTime {
  int64_t busy = 0;
  int64_t last_end = 0;
  bool started = false;
  IdleSplit idle;
};

// The GPU's idle time inside CUDA-graph captures: launches there are recorded, not run.
IntervalSet idleWhileCapturing(const model::RankTrace& rank, const IntervalSet& busy) {
  std::vector<Interval> captures;
  for (const auto& r : rank.nvtx) {
    if (rank.name(r.domain_id) == model::kGraphCaptureDomain) captures.push_back({r.start_ns, r.end_ns});
  }
  return subtract(unionOf(std::move(captures)), busy);
}

// Kernels run by graph launches (replays), which carry the graph launch's correlation id.
uint64_t graphLaunchedKernels(const model::RankTrace& rank) {
  uint64_t kernels = 0;
  for (const auto& a : rank.activities) {
    if (a.kind != model::ActivityKind::kCompute && a.kind != model::ActivityKind::kCommunication) continue;
    const model::HostCall* launch = a.correlation_id != 0 ? rank.launchOf(a.correlation_id) : nullptr;
    if (launch != nullptr && launch->function < rank.api_functions.size() &&
        model::isGraphLaunch(rank.name(rank.api_functions[launch->function])))
      ++kernels;
  }
  return kernels;
}

}  // namespace

BreakdownPart breakdownOfRank(const AnalysisInput& input, size_t r) {
  const auto& rank = input.run.ranks[r];
  BreakdownPart part;
  // Without CUPTI's records (an NCCL-only capture) the GPU's other work is unknown: so is its idle time.
  if (rank.activities.empty()) return part;
  part.has_activities = true;
  const GpuTimeSets& sets = input.time_sets[r];
  IdleSplit split;
  IntervalSet comm_exposed = subtract(sets.communication, sets.compute);
  IntervalSet memory_exposed = subtract(subtract(sets.memory, sets.compute), sets.communication);
  IntervalSet capturing = idleWhileCapturing(rank, sets.busy);
  // Idle is split over the time outside captures: a capture's idle counts as neither busy nor idle.
  IntervalSet busy_or_capturing = capturing.empty() ? IntervalSet() : unionOf([&] {
    std::vector<Interval> all(sets.busy.begin(), sets.busy.end());
    all.insert(all.end(), capturing.begin(), capturing.end());
    return all;
  }());
  const IntervalSet& not_idle = capturing.empty() ? sets.busy : busy_or_capturing;
  part.replayed_kernels = graphLaunchedKernels(rank);
  std::vector<StepWindow> windows = input.windowsOf(r);
  for (const StepWindow& step : windows) {
    Interval w = step.window;
    int64_t left_out = lengthWithin(capturing, w);
    part.captured += left_out;
    part.time += w.length() - left_out;
    part.compute += lengthWithin(sets.compute, w);
    part.communication += lengthWithin(comm_exposed, w);
    part.memory += lengthWithin(memory_exposed, w);
    part.idle += w.length() - left_out - lengthWithin(sets.busy, w);
    split += idleWithin(rank, not_idle, w);
  }
  part.host_bound = split.host_bound, part.dependency = split.dependency, part.other = split.other;
  if (part.time <= 0) return part;

  // Per stream: gaps between consecutive activities of the stream inside the windows.
  std::vector<StreamTime> per_stream(rank.streams.size());
  for (const StepWindow& step : windows) {
    for (auto& s : per_stream) s.started = false;
    auto first = std::lower_bound(rank.activities.begin(), rank.activities.end(), step.window.start,
                                  [](const model::GpuActivity& a, int64_t t) { return a.start_ns < t; });
    for (auto it = first; it != rank.activities.end() && it->start_ns < step.window.end; ++it) {
      if (!model::isGpuWork(it->kind)) continue;
      StreamTime& s = per_stream[it->stream];
      int64_t end = std::min(it->end_ns, step.window.end);
      int64_t gap = it->start_ns - s.last_end;
      if (s.started && gap > 0) gap -= lengthWithin(capturing, {s.last_end, it->start_ns});
      if (s.started && gap > 0) classifyGap(rank, s.last_end, *it, gap, s.idle);
      s.busy += std::max<int64_t>(0, end - std::max(it->start_ns, s.started ? s.last_end : it->start_ns));
      s.last_end = s.started ? std::max(s.last_end, end) : end;
      s.started = true;
    }
  }
  for (size_t i = 0; i < per_stream.size(); ++i) {
    const StreamTime& s = per_stream[i];
    if (s.busy == 0) continue;
    part.streams.push_back({rank.streams[i].device, rank.streams[i].stream, s.busy, s.idle.host_bound,
                            s.idle.dependency, s.idle.other});
  }
  return part;
}

void analyzeTimeBreakdown(const AnalysisInput& input, report::Report& report) {
  auto& section = report.addSection("time_breakdown", "Where GPU time goes");
  section.notes.push_back(input.hasSteps()
                              ? "Per rank, summed over its steps; communication and memory count only where no compute hides them."
                              : "Per rank, over its whole GPU span; communication and memory count only where no compute hides them.");
  report::Table ranks{"ranks", "", {{"rank", "rank"}, {"host", "host"}, {"time", "time"}, {"compute_pct", "compute"},
                                   {"communication_pct", "comm (exposed)"}, {"memory_pct", "memory"},
                                   {"idle_pct", "idle"}, {"host_bound_pct", "idle: host-bound"},
                                   {"dependency_pct", "idle: dependency"}, {"other_idle_pct", "idle: other"}}, {}};
  report::Table streams{"streams", "Per stream (idle = gaps between its own activities)",
                        {{"rank", "rank"}, {"device", "device"}, {"stream", "stream"}, {"busy", "busy"},
                         {"host_bound", "idle: host-bound"}, {"dependency", "idle: dependency"}, {"other", "idle: other"}},
                        {}};
  double worst_idle = 0, worst_host_bound = 0;
  int32_t worst_idle_rank = -1;
  IdleSplit worst_split;
  int64_t worst_time = 0;
  int64_t captured_idle = 0, worst_captured = 0;
  uint64_t replayed_kernels = 0;

  for (size_t r = 0; r < input.run.ranks.size(); ++r) {
    const auto& rank = input.run.ranks[r];
    const BreakdownPart& part = input.digest(r).breakdown;
    if (!part.has_activities) {
      section.notes.push_back(fmt::format(
          "Rank {} ({}): its file holds no CUPTI activity records (NCCL-only capture): its GPU time split and idle "
          "time are not recorded.",
          rank.rank, rank.header.hostname));
      continue;
    }
    const int64_t time = part.time;
    IdleSplit split{part.host_bound, part.dependency, part.other};
    replayed_kernels += part.replayed_kernels;
    captured_idle += part.captured;
    if (time <= 0) continue;
    auto pct = [time](int64_t share) { return 100.0 * static_cast<double>(share) / static_cast<double>(time); };
    ranks.rows.push_back({Cell::of(rank.rank, Unit::kNone), Cell::of(rank.header.hostname),
                          Cell::of(static_cast<double>(time), Unit::kNanoseconds), Cell::of(pct(part.compute), Unit::kPercent),
                          Cell::of(pct(part.communication), Unit::kPercent), Cell::of(pct(part.memory), Unit::kPercent),
                          Cell::of(pct(part.idle), Unit::kPercent), Cell::of(pct(split.host_bound), Unit::kPercent),
                          Cell::of(pct(split.dependency), Unit::kPercent), Cell::of(pct(split.other), Unit::kPercent)});
    if (pct(part.idle) > worst_idle) {
      worst_idle = pct(part.idle);
      worst_idle_rank = rank.rank;
      worst_split = split;
      worst_time = time;
      worst_captured = part.captured;
    }
    worst_host_bound = std::max(worst_host_bound, pct(split.host_bound));
    for (const auto& s : part.streams) {
      streams.rows.push_back({Cell::of(rank.rank, Unit::kNone), Cell::of(s.device, Unit::kNone),
                              Cell::of(s.stream, Unit::kNone), Cell::of(static_cast<double>(s.busy), Unit::kNanoseconds),
                              Cell::of(static_cast<double>(s.host_bound), Unit::kNanoseconds),
                              Cell::of(static_cast<double>(s.dependency), Unit::kNanoseconds),
                              Cell::of(static_cast<double>(s.other), Unit::kNanoseconds)});
    }
  }
  if (ranks.rows.empty()) {
    section.notes.push_back("No GPU activity in the trace: nothing to break down.");
    return;
  }
  section.tables.push_back(std::move(ranks));
  section.tables.push_back(std::move(streams));
  if (captured_idle > 0) {
    section.notes.push_back(
        fmt::format("{} of GPU idle time fell inside CUDA-graph captures (launches there are recorded into a graph, "
                    "not run) and is "
                    "left out of the time above.",
                    report::formatValue(static_cast<double>(captured_idle), Unit::kNanoseconds)));
  }
  if (replayed_kernels > 0) {
    section.notes.push_back(
        fmt::format("{} kernels ran from CUDA-graph launches (replays); each is attributed to its "
                    "graph launch.",
                    replayed_kernels));
  }
  if (worst_idle_rank < 0) return;

  report.addMetric("idle_pct", worst_idle, Unit::kPercent, "GPU idle time, % of step time, worst rank");
  report.addMetric("host_bound_pct", worst_host_bound, Unit::kPercent,
                   "GPU idle because launches came late, % of step time, worst rank");
  if (worst_idle >= 10) {
    const char* cause = worst_split.host_bound >= worst_split.dependency && worst_split.host_bound >= worst_split.other
                            ? "mostly host-bound: the CPU launched work only after the GPU ran dry"
                        : worst_split.dependency >= worst_split.other
                            ? "mostly waiting on dependencies: work was queued but waited for other streams or events"
                            : "with no launch records to say why";
    report::Finding finding;
    finding.analysis = "time_breakdown";
    finding.severity = worst_idle >= 25 ? report::Severity::kCritical : report::Severity::kWarning;
    // A trace that is mostly a graph capture says little about the job's idle time.
    if (worst_captured > worst_time) finding.severity = report::Severity::kInfo;
    size_t windows = std::max<size_t>(1, input.windowsOf(0).size());
    finding.cost_ns = worst_idle / 100.0 * static_cast<double>(worst_time) / static_cast<double>(windows);
    finding.summary = fmt::format("rank {}'s GPU is idle {:.1f} % of the time, {}", worst_idle_rank, worst_idle, cause);
    finding.evidence.push_back(fmt::format("idle: host-bound {}, dependency {}, other {}",
                                           report::formatValue(static_cast<double>(worst_split.host_bound), Unit::kNanoseconds),
                                           report::formatValue(static_cast<double>(worst_split.dependency), Unit::kNanoseconds),
                                           report::formatValue(static_cast<double>(worst_split.other), Unit::kNanoseconds)));
    if (worst_captured > 0) {
      finding.evidence.push_back(
          fmt::format("over the {} the trace covers outside CUDA-graph captures ({} more were capture)",
                      report::formatValue(static_cast<double>(worst_time), Unit::kNanoseconds),
                      report::formatValue(static_cast<double>(worst_captured), Unit::kNanoseconds)));
    }
    report.findings.push_back(std::move(finding));
  }
}

}  // namespace gpuxray::analysis
