#include "analyzer/analysis/step_overview.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/communicators.h"
#include "analyzer/analysis/overlap.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/report/units.h"

namespace gpuxray::analysis {
namespace {

OverviewLane laneOf(const IntervalSet& set, Interval window) {
  OverviewLane lane;
  lane.intervals = clip(set, window);
  lane.merged_intervals = lane.intervals.size();
  lane.busy_ns = totalLength(lane.intervals);
  size_t n = lane.intervals.size();
  if (n <= OverviewLane::kMaxIntervals) return lane;
  std::vector<int64_t> gaps;
  gaps.reserve(n - 1);
  for (size_t i = 1; i < n; ++i) gaps.push_back(lane.intervals[i].start - lane.intervals[i - 1].end);
  // Closing the (n - max) shortest gaps leaves max intervals; ties may close a few more.
  auto nth = gaps.begin() + static_cast<std::ptrdiff_t>(n - OverviewLane::kMaxIntervals - 1);
  std::nth_element(gaps.begin(), nth, gaps.end());
  lane.gaps_closed_up_to_ns = *nth;
  std::vector<Interval> kept{lane.intervals.front()};
  for (size_t i = 1; i < n; ++i) {
    if (lane.intervals[i].start - kept.back().end <= lane.gaps_closed_up_to_ns) {
      kept.back().end = lane.intervals[i].end;
    } else {
      kept.push_back(lane.intervals[i]);
    }
  }
  lane.intervals = std::move(kept);
  return lane;
}

report::ResultValue laneValue(const OverviewLane& lane, int64_t origin) {
  using report::ResultValue;
  ResultValue intervals = ResultValue::array();
  for (const Interval& i : lane.intervals) {
    intervals.push(
        ResultValue::array().push(ResultValue::integer(i.start - origin)).push(ResultValue::integer(i.end - origin)));
  }
  return ResultValue::object()
      .set("busy_ns", ResultValue::integer(lane.busy_ns))
      .set("merged_intervals", ResultValue::integer(static_cast<int64_t>(lane.merged_intervals)))
      .set("gaps_closed_up_to_ns",
           lane.gaps_closed_up_to_ns >= 0 ? ResultValue::integer(lane.gaps_closed_up_to_ns) : ResultValue())
      .set("intervals", std::move(intervals));
}

// The window's exposed stretches worth marking (per-rank phase): the longest kMaxExposed of those at least
// kShortestMarkNs long, in time order. From the window's part of the sets: the whole rank's exposed set,
// once per window, made the lanes of every step quadratic in the steps.
void cutExposed(const GpuTimeSets& sets, RankStepLanes& lanes) {
  std::vector<Interval> pieces = exposedCommunication(sets, lanes.window);
  lanes.exposed_ns = totalLength(pieces);
  std::erase_if(pieces, [](const Interval& i) { return i.length() < OverlapResult::kShortestMarkNs; });
  if (pieces.size() > OverviewRank::kMaxExposed) {
    std::nth_element(pieces.begin(), pieces.begin() + OverviewRank::kMaxExposed - 1, pieces.end(),
                     [](const Interval& a, const Interval& b) { return a.length() > b.length(); });
    lanes.exposed_left_out = pieces.size() - OverviewRank::kMaxExposed;
    pieces.resize(OverviewRank::kMaxExposed);
    std::sort(pieces.begin(), pieces.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  }
  lanes.exposed = std::move(pieces);
}

// Each exposed stretch named by the NCCL operation that overlaps it most (cross-rank phase: the rank's
// NCCL operations are in its skeleton).
void nameExposed(const model::RankTrace& trace, const RankStepLanes& lanes,
                 const std::map<uint64_t, CommunicatorInfo>& communicators, OverviewRank& rank) {
  rank.exposed_ns = lanes.exposed_ns;
  rank.exposed_left_out = lanes.exposed_left_out;
  const std::vector<Interval>& pieces = lanes.exposed;
  std::vector<model::NcclOp> ops;
  for (const auto& op : trace.nccl_ops) {
    if (op.hasGpuTimes() && op.gpu_start_ns < rank.window.end && op.gpu_end_ns > rank.window.start) ops.push_back(op);
  }
  for (const Interval& piece : pieces) {
    const model::NcclOp* cause = nullptr;
    int64_t most = 0;
    for (const model::NcclOp& op : ops) {
      int64_t shared = std::min(op.gpu_end_ns, piece.end) - std::max(op.gpu_start_ns, piece.start);
      if (shared > most) most = shared, cause = &op;
    }
    std::string text = "communication outside NCCL's recorded operations";
    if (cause != nullptr) {
      auto communicator = communicators.find(cause->comm_hash);
      text =
          fmt::format("{}{} on {}", trace.name(cause->func_id),
                      cause->bytes > 0 ? " " + report::formatBytes(cause->bytes) : std::string(),
                      communicator != communicators.end() ? communicator->second.label() : CommunicatorInfo{}.label());
    }
    rank.exposed.push_back({piece, std::move(text)});
  }
}

}  // namespace

const StepWindow* overviewWindowOf(const std::vector<StepWindow>& windows) {
  if (windows.empty()) return nullptr;
  std::vector<size_t> by_length(windows.size());
  for (size_t i = 0; i < by_length.size(); ++i) by_length[i] = i;
  std::stable_sort(by_length.begin(), by_length.end(),
                   [&](size_t a, size_t b) { return windows[a].window.length() < windows[b].window.length(); });
  return &windows[by_length[(by_length.size() - 1) / 2]];
}

std::vector<RankStepLanes> stepLanesOfRank(const AnalysisInput& input, size_t r,
                                           const std::function<bool(int64_t)>& keep) {
  const GpuTimeSets& sets = input.time_sets[r];
  std::vector<RankStepLanes> lanes;
  for (const StepWindow& w : input.windowsOf(r)) {
    if (keep && !keep(w.number)) continue;
    RankStepLanes& kept = lanes.emplace_back();
    kept.step = w.number;
    kept.window = w.window;
    kept.compute = laneOf(sets.compute, w.window);
    kept.communication = laneOf(sets.communication, w.window);
    kept.memory = laneOf(sets.memory, w.window);
    cutExposed(sets, kept);
  }
  return lanes;
}

StepOverviewResult computeStepOverview(const AnalysisInput& input) {
  StepOverviewResult result;
  const auto& run = input.run;
  if (run.ranks.empty()) return result;
  result.per_step = input.hasSteps();
  std::vector<StepWindow> first = input.windowsOf(0);
  result.chosen_on_rank = run.ranks[0].rank;
  result.steps = result.per_step ? first.size() : 0;
  const StepWindow* median = overviewWindowOf(first);
  if (median == nullptr) return result;
  const StepWindow chosen = *median;
  result.step = result.per_step ? chosen.number : -1;
  result.step_length_ns = chosen.window.length();
  const std::map<uint64_t, CommunicatorInfo> communicators = gatherCommunicators(run);
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    std::vector<StepWindow> windows = input.windowsOf(r);
    auto window = result.per_step ? std::find_if(windows.begin(), windows.end(),
                                                 [&](const StepWindow& w) { return w.number == chosen.number; })
                                  : windows.begin();
    if (window == windows.end()) continue;
    const auto& kept = input.digest(r).step_lanes;
    auto lanes =
        std::find_if(kept.begin(), kept.end(), [&](const RankStepLanes& l) { return l.step == window->number; });
    // The session reads a rank again when its digest lacks the lanes of the chosen step.
    if (lanes == kept.end()) throw std::logic_error("rank digest: no lanes for the overview's step");
    OverviewRank rank;
    rank.rank = run.ranks[r].rank;
    rank.window = window->window;
    rank.compute = lanes->compute;
    rank.communication = lanes->communication;
    rank.memory = lanes->memory;
    nameExposed(run.ranks[r], *lanes, communicators, rank);
    result.ranks.push_back(std::move(rank));
  }
  return result;
}

namespace {

report::ResultValue resultValue(const StepOverviewResult& result) {
  using report::ResultValue;
  ResultValue ranks = ResultValue::array();
  for (const OverviewRank& rank : result.ranks) {
    const int64_t start = rank.window.start;
    ResultValue exposed = ResultValue::array();
    for (const ExposedStretch& stretch : rank.exposed) {
      exposed.push(ResultValue::object()
                       .set("span_ns", ResultValue::array()
                                           .push(ResultValue::integer(stretch.span.start - start))
                                           .push(ResultValue::integer(stretch.span.end - start)))
                       .set("cause", ResultValue::text(stretch.cause)));
    }
    ranks.push(ResultValue::object()
                   .set("rank", ResultValue::integer(rank.rank))
                   .set("start_ns", ResultValue::integer(start))
                   .set("length_ns", ResultValue::integer(rank.window.length()))
                   .set("compute", laneValue(rank.compute, start))
                   .set("communication", laneValue(rank.communication, start))
                   .set("memory", laneValue(rank.memory, start))
                   .set("exposed_ns", ResultValue::integer(rank.exposed_ns))
                   .set("exposed", std::move(exposed))
                   .set("exposed_left_out", ResultValue::integer(static_cast<int64_t>(rank.exposed_left_out))));
  }
  return ResultValue::object()
      .set("per_step", ResultValue::flag(result.per_step))
      .set("step", result.per_step ? ResultValue::integer(result.step) : ResultValue())
      .set("chosen", ResultValue::text(result.per_step ? "median step length on the first rank" : "whole GPU span"))
      .set("chosen_on_rank", result.chosen_on_rank >= 0 ? ResultValue::integer(result.chosen_on_rank) : ResultValue())
      .set("step_length_ns", ResultValue::integer(result.step_length_ns))
      .set("max_intervals_per_lane", ResultValue::integer(static_cast<int64_t>(OverviewLane::kMaxIntervals)))
      .set("ranks", std::move(ranks));
}

}  // namespace

void presentStepOverview(const StepOverviewResult& result, report::Report& report) {
  report.addResult("step_overview", [&] { return resultValue(result); });
}

void analyzeStepOverview(const AnalysisInput& input, report::Report& report) {
  presentStepOverview(computeStepOverview(input), report);
}

}  // namespace gpuxray::analysis
