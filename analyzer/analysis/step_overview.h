// One representative step drawn as lanes (docs/report-schema.md, `step_overview`): for the median
// step, per rank, the merged GPU intervals of each class (compute, communication, memory) relative
// to the rank's step start, so that a page can draw what every rank did in it. Data only: no section.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis {

// One class of GPU work of one rank in the step: its merged intervals on the run clock. Past
// kMaxIntervals, the shortest gaps between them are closed (every gap up to gaps_closed_up_to_ns)
// until at most kMaxIntervals remain, so the lane keeps its shape; busy_ns is before that.
struct OverviewLane {
  std::vector<Interval> intervals;
  size_t merged_intervals = 0;        // before closing gaps
  int64_t gaps_closed_up_to_ns = -1;  // -1: none closed
  int64_t busy_ns = 0;
  static constexpr size_t kMaxIntervals = 256;
};

// A stretch of exposed communication (overlap's rule: communication with no compute beside it) and
// what caused it: the NCCL operation that covers most of it.
struct ExposedStretch {
  Interval span;      // run clock
  std::string cause;  // "AllReduce 64 MiB on dp (data-parallel, 4 ranks)"; "communication outside NCCL"
};

struct OverviewRank {
  int32_t rank = -1;
  Interval window;  // the rank's own window of the step, run clock
  OverviewLane compute, communication, memory;
  // The longest kMaxExposed stretches of at least OverlapResult::kShortestMarkNs, in time order.
  std::vector<ExposedStretch> exposed;
  size_t exposed_left_out = 0;
  int64_t exposed_ns = 0;  // all exposed time in the step, shorter stretches too
  static constexpr size_t kMaxExposed = 64;
};

struct StepOverviewResult {
  bool per_step = false;            // steps are known; else each rank's whole GPU span is "the step"
  int64_t step = -1;                // the chosen step's number (-1: no steps)
  int32_t chosen_on_rank = -1;      // the rank whose step lengths chose it (the first rank)
  int64_t step_length_ns = 0;       // on that rank
  size_t steps = 0;                 // steps that rank has
  std::vector<OverviewRank> ranks;  // ranks that have that step, in run order
};

// The window the overview shows of a rank whose windows are `windows` (in windowsOf's order): the
// median by length (the lower middle), nullptr when there is none. Chosen on the first rank.
const StepWindow* overviewWindowOf(const std::vector<StepWindow>& windows);

// One rank's lanes in one of its windows (its per-rank phase).
struct RankStepLanes {
  int64_t step = -1;  // the window's step number (-1: the whole span)
  Interval window;
  OverviewLane compute, communication, memory;
  std::vector<Interval> exposed;  // the stretches OverviewRank marks, not yet named
  size_t exposed_left_out = 0;
  int64_t exposed_ns = 0;
};
// The lanes of rank index r's windows whose step number `keep` accepts (all when it is empty).
std::vector<RankStepLanes> stepLanesOfRank(const AnalysisInput& input, size_t r,
                                           const std::function<bool(int64_t)>& keep = {});

// The median step (by length, the lower middle, on the first rank), or the whole span without steps.
StepOverviewResult computeStepOverview(const AnalysisInput& input);
// Adds `step_overview` to the report's results (no section).
void presentStepOverview(const StepOverviewResult& result, report::Report& report);

}  // namespace gpuxray::analysis
