// What each named piece of work added up to over the steps (docs/analyses.md, "Activity totals"):
// every GPU activity name (kernels of every kind, copies, memsets, synchronizations) and every op
// (NVTX / record_function ranges, CUDA runtime and driver calls) with its count and time, for
// `gpuxray diff` to compare runs by. An activity belongs to the step its launch was made in (the
// launching call's start; its own start when no call is recorded), as in Holistic Trace Analysis.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis {

struct ActivityTotal {
  std::string name;  // as recorded
  std::string kind;  // GPU: compute, communication, memcpy, memset, sync; ops: the NVTX domain or "runtime"
  uint64_t count = 0;
  int64_t time_ns = 0;
};

struct ActivityTotalsResult {
  size_t ranks = 0;
  // Step windows summed over ranks (1 per rank when no steps are known): the divisor of per-step figures.
  size_t windows = 0;
  std::vector<ActivityTotal> gpu;  // most time first
  std::vector<ActivityTotal> ops;  // most time first; step-marking ranges (ProfilerStep#N) left out
};

// One rank's totals over its windows (its per-rank phase), by (name, kind).
struct RankActivityTotals {
  std::vector<ActivityTotal> gpu;
  std::vector<ActivityTotal> ops;
};

RankActivityTotals activityTotalsOfRank(const AnalysisInput& input, size_t r);
ActivityTotalsResult computeActivityTotals(const AnalysisInput& input);
// The typed result only (the kernels section already shows the top kernels).
void presentActivityTotals(const ActivityTotalsResult& result, report::Report& report);
void analyzeActivityTotals(const AnalysisInput& input, report::Report& report);

}  // namespace gpuxray::analysis
