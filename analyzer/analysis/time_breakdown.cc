// Where each rank's GPU time goes: compute, communication not hidden by compute, memory traffic
// not hidden by either, and idle, with idle split by why the GPU waited (docs/analyses.md):
// host-bound (the next work was launched only after the GPU ran dry), dependency (it was launched
// earlier but had to wait for other work: an event, another stream, a peer), other (no launch
// record to tell).

#include "analyzer/analysis/time_breakdown.h"

#include <fmt/core.h>

#include <algorithm>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/idle_split.h"
#include "analyzer/analysis/overlap.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/analysis/statistics.h"
#include "analyzer/model/graph_capture.h"
#include "analyzer/report/units.h"

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
  std::vector<bool> graph_launch(rank.api_functions.size());
  for (size_t f = 0; f < graph_launch.size(); ++f)
    graph_launch[f] = model::isGraphLaunch(rank.name(rank.api_functions[f]));
  if (std::find(graph_launch.begin(), graph_launch.end(), true) == graph_launch.end()) return 0;
  uint64_t kernels = 0;
  for (const auto& a : rank.activities) {
    if (a.kind != model::ActivityKind::kCompute && a.kind != model::ActivityKind::kCommunication) continue;
    const model::HostCall* launch = a.correlation_id != 0 ? rank.launchOf(a.correlation_id) : nullptr;
    if (launch != nullptr && launch->function < graph_launch.size() && graph_launch[launch->function]) ++kernels;
  }
  return kernels;
}

report::ResultValue splitValue(const IdleSplit& split) {
  using report::ResultValue;
  return ResultValue::object()
      .set("host_bound_ns", ResultValue::integer(split.host_bound))
      .set("dependency_ns", ResultValue::integer(split.dependency))
      .set("other_ns", ResultValue::integer(split.other));
}

report::ResultValue timesValue(const BreakdownTimes& t) {
  using report::ResultValue;
  return ResultValue::object()
      .set("time_ns", ResultValue::integer(t.time))
      .set("compute_ns", ResultValue::integer(t.compute))
      .set("communication_exposed_ns", ResultValue::integer(t.communication))
      .set("memory_exposed_ns", ResultValue::integer(t.memory))
      .set("idle_ns", ResultValue::integer(t.idle))
      .set("captured_idle_ns", ResultValue::integer(t.captured))
      .set("idle_split", splitValue(t.idle_split));
}

report::ResultValue resultValue(const TimeBreakdownResult& result) {
  using report::ResultValue;
  ResultValue ranks = ResultValue::array();
  for (const RankBreakdown& rank : result.ranks) {
    ResultValue steps = ResultValue::array();
    for (const StepBreakdown& step : rank.steps) {
      steps.push(ResultValue::object()
                     .set("step", step.step >= 0 ? ResultValue::integer(step.step) : ResultValue())
                     .set("window_ns", ResultValue::array()
                                           .push(ResultValue::integer(step.window.start - result.origin_ns))
                                           .push(ResultValue::integer(step.window.end - result.origin_ns)))
                     .set("times", timesValue(step.times)));
    }
    ResultValue streams = ResultValue::array();
    for (const StreamBreakdown& s : rank.streams) {
      streams.push(ResultValue::object()
                       .set("device", ResultValue::integer(s.device))
                       .set("stream", ResultValue::integer(s.stream))
                       .set("busy_ns", ResultValue::integer(s.busy))
                       .set("idle_split", splitValue(s.idle)));
    }
    bool timed = rank.recorded && rank.totals.time > 0;
    ranks.push(ResultValue::object()
                   .set("rank", ResultValue::integer(rank.rank))
                   .set("host", ResultValue::text(rank.host))
                   .set("recorded", ResultValue::flag(rank.recorded))
                   .set("totals", rank.recorded ? timesValue(rank.totals) : ResultValue())
                   .set("idle_pct", timed ? ResultValue::number(rank.pct(rank.totals.idle)) : ResultValue())
                   .set("steps", std::move(steps))
                   .set("streams", std::move(streams))
                   .set("replayed_kernels", ResultValue::integer(static_cast<int64_t>(rank.replayed_kernels))));
  }
  return ResultValue::object()
      .set("per_step", ResultValue::flag(result.per_step))
      .set("origin_ns", ResultValue::integer(result.origin_ns))
      .set("ranks", std::move(ranks))
      .set("captured_idle_ns", ResultValue::integer(result.captured_idle))
      .set("replayed_kernels", ResultValue::integer(static_cast<int64_t>(result.replayed_kernels)))
      .set("worst_idle_rank", result.worst_idle >= 0
                                  ? ResultValue::integer(result.ranks[static_cast<size_t>(result.worst_idle)].rank)
                                  : ResultValue());
}

}  // namespace

RankBreakdown breakdownOfRank(const AnalysisInput& input, size_t r) {
  const auto& rank = input.run.ranks[r];
  RankBreakdown out;
  out.rank = rank.rank;
  out.host = rank.header.hostname;
  // Without CUPTI's records (an NCCL-only capture) the GPU's other work is unknown: so is its idle time.
  out.recorded = !rank.activities.empty();
  if (!out.recorded) return out;
  const GpuTimeSets& sets = input.time_sets[r];
  IntervalSet comm_exposed = exposedCommunication(sets);
  IntervalSet memory_exposed = subtract(subtract(sets.memory, sets.compute), sets.communication);
  IntervalSet capturing = idleWhileCapturing(rank, sets.busy);
  // Idle is split over the time outside captures: a capture's idle counts as neither busy nor idle.
  IntervalSet busy_or_capturing = capturing.empty() ? IntervalSet() : unionOf([&] {
    std::vector<Interval> all(sets.busy.begin(), sets.busy.end());
    all.insert(all.end(), capturing.begin(), capturing.end());
    return all;
  }());
  const IntervalSet& not_idle = capturing.empty() ? sets.busy : busy_or_capturing;
  out.replayed_kernels = graphLaunchedKernels(rank);
  const std::vector<StepWindow> windows = input.windowsOf(r);
  for (const StepWindow& step : windows) {
    Interval w = step.window;
    StepBreakdown figures{step.number, w, {}};
    BreakdownTimes& t = figures.times;
    int64_t left_out = lengthWithin(capturing, w);
    t.captured = left_out;
    t.time = w.length() - left_out;
    t.compute = lengthWithin(sets.compute, w);
    t.communication = lengthWithin(comm_exposed, w);
    t.memory = lengthWithin(memory_exposed, w);
    t.idle = w.length() - left_out - lengthWithin(sets.busy, w);
    t.idle_split = idleWithin(rank, sets.launch_start, not_idle, w);
    out.totals.add(t);
    out.steps.push_back(figures);
  }

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
      if (s.started && gap > 0 && !capturing.empty()) gap -= lengthWithin(capturing, {s.last_end, it->start_ns});
      if (s.started && gap > 0)
        classifyGap(sets.launch_start[static_cast<size_t>(it - rank.activities.begin())], s.last_end, gap, s.idle);
      s.busy += std::max<int64_t>(0, end - std::max(it->start_ns, s.started ? s.last_end : it->start_ns));
      s.last_end = s.started ? std::max(s.last_end, end) : end;
      s.started = true;
    }
  }
  for (size_t i = 0; i < per_stream.size(); ++i) {
    const StreamTime& s = per_stream[i];
    if (s.busy == 0) continue;
    out.streams.push_back({rank.streams[i].device, rank.streams[i].stream, s.busy, s.idle});
  }
  return out;
}

void BreakdownTimes::add(const BreakdownTimes& o) {
  time += o.time, compute += o.compute, communication += o.communication, memory += o.memory;
  idle += o.idle, captured += o.captured;
  idle_split += o.idle_split;
}

double RankBreakdown::pct(int64_t part) const {
  return 100.0 * static_cast<double>(part) / static_cast<double>(totals.time);
}

TimeBreakdownResult computeTimeBreakdown(const AnalysisInput& input) {
  TimeBreakdownResult result;
  result.per_step = input.hasSteps();
  result.origin_ns = input.run.firstActivityNs();
  double worst_idle = 0;
  for (size_t r = 0; r < input.run.ranks.size(); ++r) {
    const auto& rank = input.run.ranks[r];
    RankBreakdown out = input.digest(r).breakdown;
    out.rank = rank.rank;  // a PyTorch-profiler trace's rank is given after it is digested
    if (!out.recorded) {
      result.ranks.push_back(std::move(out));
      continue;
    }
    result.replayed_kernels += out.replayed_kernels;
    result.captured_idle += out.totals.captured;
    if (out.totals.time > 0) {
      if (out.pct(out.totals.idle) > worst_idle) {
        worst_idle = out.pct(out.totals.idle);
        result.worst_idle = static_cast<int64_t>(result.ranks.size());
      }
      result.worst_host_bound_pct = std::max(result.worst_host_bound_pct, out.pct(out.totals.idle_split.host_bound));
    }
    result.ranks.push_back(std::move(out));
  }
  if (!input.run.ranks.empty()) result.windows_of_first_rank = std::max<size_t>(1, input.windowsOf(0).size());
  return result;
}

void presentTimeBreakdown(const TimeBreakdownResult& result, size_t top, report::Report& report) {
  auto& section = report.addSection("time_breakdown", "Where GPU time goes");
  report.addResult("time_breakdown", [&] { return resultValue(result); });
  section.notes.push_back(
      result.per_step
          ? "Per rank, summed over its steps; communication and memory count only where no compute hides them."
          : "Per rank, over its whole GPU span; communication and memory count only where no compute hides them.");
  report::Table ranks{"ranks",
                      "",
                      {{"rank", "rank"},
                       {"host", "host"},
                       {"time", "time"},
                       {"compute_pct", "compute"},
                       {"communication_pct", "comm (exposed)"},
                       {"memory_pct", "memory"},
                       {"idle_pct", "idle"},
                       {"host_bound_pct", "idle: host-bound"},
                       {"dependency_pct", "idle: dependency"},
                       {"other_idle_pct", "idle: other"}},
                      {}};
  report::Table streams{"streams",
                        "Per stream (idle = gaps between its own activities)",
                        {{"rank", "rank"},
                         {"device", "device"},
                         {"stream", "stream"},
                         {"busy", "busy"},
                         {"host_bound", "idle: host-bound"},
                         {"dependency", "idle: dependency"},
                         {"other", "idle: other"}},
                        {}};
  for (const RankBreakdown& rank : result.ranks) {
    if (!rank.recorded) {
      section.notes.push_back(fmt::format(
          "Rank {} ({}): its file holds no CUPTI activity records (NCCL-only capture): its GPU time split and idle "
          "time are not recorded.",
          rank.rank, rank.host));
      continue;
    }
    const BreakdownTimes& t = rank.totals;
    if (t.time <= 0) continue;
    auto pct = [&rank](int64_t part) { return rank.pct(part); };
    ranks.rows.push_back(
        {Cell::of(rank.rank, Unit::kNone), Cell::of(rank.host),
         Cell::of(static_cast<double>(t.time), Unit::kNanoseconds), Cell::of(pct(t.compute), Unit::kPercent),
         Cell::of(pct(t.communication), Unit::kPercent), Cell::of(pct(t.memory), Unit::kPercent),
         Cell::of(pct(t.idle), Unit::kPercent), Cell::of(pct(t.idle_split.host_bound), Unit::kPercent),
         Cell::of(pct(t.idle_split.dependency), Unit::kPercent), Cell::of(pct(t.idle_split.other), Unit::kPercent)});
    for (const StreamBreakdown& s : rank.streams) {
      streams.rows.push_back({Cell::of(rank.rank, Unit::kNone), Cell::of(s.device, Unit::kNone),
                              Cell::of(s.stream, Unit::kNone),
                              Cell::of(static_cast<double>(s.busy), Unit::kNanoseconds),
                              Cell::of(static_cast<double>(s.idle.host_bound), Unit::kNanoseconds),
                              Cell::of(static_cast<double>(s.idle.dependency), Unit::kNanoseconds),
                              Cell::of(static_cast<double>(s.idle.other), Unit::kNanoseconds)});
    }
  }
  if (ranks.rows.empty()) {
    section.notes.push_back("No GPU activity in the trace: nothing to break down.");
    return;
  }
  report::keepWorstRows(ranks, top, "ranks", "most idle first",
                        [](const std::vector<report::Cell>& row) { return row[6].number; });
  report::keepWorstRows(streams, top, "streams", "most idle first", [](const std::vector<report::Cell>& row) {
    return row[4].number + row[5].number + row[6].number;
  });
  section.tables.push_back(std::move(ranks));
  section.tables.push_back(std::move(streams));
  if (result.captured_idle > 0) {
    section.notes.push_back(
        fmt::format("{} of GPU idle time fell inside CUDA-graph captures (launches there are recorded into a graph, "
                    "not run) and is "
                    "left out of the time above.",
                    report::formatValue(static_cast<double>(result.captured_idle), Unit::kNanoseconds)));
  }
  if (result.replayed_kernels > 0) {
    section.notes.push_back(
        fmt::format("{} kernels ran from CUDA-graph launches (replays); each is attributed to its "
                    "graph launch.",
                    result.replayed_kernels));
  }
  if (result.worst_idle < 0) return;
  const RankBreakdown& worst = result.ranks[static_cast<size_t>(result.worst_idle)];
  const double worst_idle = worst.pct(worst.totals.idle);
  const IdleSplit& worst_split = worst.totals.idle_split;
  const int64_t worst_time = worst.totals.time, worst_captured = worst.totals.captured;

  report.addMetric("idle_pct", worst_idle, Unit::kPercent, "GPU idle time, % of step time, worst rank");
  report.addMetric("host_bound_pct", result.worst_host_bound_pct, Unit::kPercent,
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
    finding.cost_ns =
        worst_idle / 100.0 * static_cast<double>(worst_time) / static_cast<double>(result.windows_of_first_rank);
    finding.summary =
        fmt::format("{}'s GPU is idle {:.1f} % of the time, {}", report::rankName(worst.rank), worst_idle, cause);
    if (worst_split.host_bound >= worst_split.dependency && worst_split.host_bound >= worst_split.other) {
      finding.cause = {report::FindingCause::Kind::kHostGaps,
                       {worst.rank},
                       1,
                       fmt::format("{}'s host gaps", report::rankName(worst.rank))};
    }
    finding.evidence.push_back(
        fmt::format("idle: host-bound {}, dependency {}, other {}",
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

void analyzeTimeBreakdown(const AnalysisInput& input, report::Report& report) {
  presentTimeBreakdown(computeTimeBreakdown(input), input.options.top, report);
}

}  // namespace gpuxray::analysis
