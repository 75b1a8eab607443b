// Where each rank's GPU time goes (docs/analyses.md, "Time breakdown"): compute, communication not
// hidden by compute, memory traffic not hidden by either, and idle, with idle split by why the GPU
// waited (idle_split.h), per rank, per step and per stream. The result is data;
// presentTimeBreakdown turns it into the report's section, metrics and finding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/analysis/idle_split.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis {

// GPU time in one window (a step, or the whole span without steps), in ns. Time inside CUDA-graph
// captures that the GPU spent idle is left out of `time` and `idle` (launches there only record).
struct BreakdownTimes {
  int64_t time = 0;  // window length minus captured idle
  int64_t compute = 0;
  int64_t communication = 0;  // exposed: with no compute beside it
  int64_t memory = 0;         // exposed: with neither compute nor communication beside it
  int64_t idle = 0;
  int64_t captured = 0;  // idle inside graph captures, left out
  IdleSplit idle_split;  // host-bound / dependency / other
  void add(const BreakdownTimes& o);
};

struct StepBreakdown {
  int64_t step = -1;  // the step's number; -1: the whole span (no steps)
  Interval window;
  BreakdownTimes times;
};

// A stream's busy time and the gaps between its own activities inside the windows.
struct StreamBreakdown {
  uint32_t device = 0;
  uint32_t stream = 0;
  int64_t busy = 0;
  IdleSplit idle;
};

struct RankBreakdown {
  int32_t rank = -1;
  std::string host;
  bool recorded = false;  // the file has CUPTI activity records (else nothing is known)
  BreakdownTimes totals;  // over its windows
  std::vector<StepBreakdown> steps;
  std::vector<StreamBreakdown> streams;  // streams with busy time
  uint64_t replayed_kernels = 0;         // kernels run by CUDA-graph launches
  double pct(int64_t part) const;        // of totals.time
};

struct TimeBreakdownResult {
  bool per_step = false;             // the windows are steps (else each rank's whole GPU span)
  int64_t origin_ns = 0;             // the run's first GPU activity (the --window origin)
  std::vector<RankBreakdown> ranks;  // in run order
  int64_t captured_idle = 0;
  uint64_t replayed_kernels = 0;
  // The rank with the highest idle % (index into ranks; -1 when no rank has time), and the highest
  // host-bound %.
  int64_t worst_idle = -1;
  double worst_host_bound_pct = 0;
  size_t windows_of_first_rank = 1;  // per-step costs divide by this
};

TimeBreakdownResult computeTimeBreakdown(const AnalysisInput& input);
// `top`: past twice as many ranks (streams), the tables list the `top` most idle.
void presentTimeBreakdown(const TimeBreakdownResult& result, size_t top, report::Report& report);

}  // namespace gpuxray::analysis
