#include "analyzer/analysis/analyses.h"

#include "analyzer/analysis/activity_totals.h"
#include "analyzer/analysis/step_times.h"

namespace gpuxray::analysis {

const std::vector<std::string>& knownMetrics() {
  static const std::vector<std::string> names = {
      "idle_pct", "host_bound_pct", "exposed_comm_pct", "overlap_pct",
      "collective_skew_ms", "busbw_pct_of_link", "straggler_wait_ms",
      "bubble_pct", "link_imbalance", "link_utilization_pct", "slow_link_ratio",
      "low_occupancy_kernel_pct", "spilling_kernel_pct", "small_grid_kernel_pct",
      "peak_memory_bytes", "peak_memory_pct", "step_time_ms", "tokens_per_s",
  };
  return names;
}

void runAnalyses(const AnalysisInput& input, report::Report& report) {
  analyzeClock(input, report);
  analyzeStepTimes(input, report);
  if (input.options.hta_compat) {
    analyzeHtaCompat(input, report);
  } else {
    analyzeTimeBreakdown(input, report);
    analyzeOverlap(input, report);
  }
  analyzeCollectives(input, report);
  analyzeCollectiveBandwidth(input, report);
  analyzeStragglers(input, report);
  analyzePipelineBubbles(input, report);
  analyzeLinkHotspots(input, report);
  analyzeKernels(input, report);
  analyzeKernelMetrics(input, report);
  analyzeMemory(input, report);
  analyzeActivityTotals(input, report);
  analyzeStepOverview(input, report);
  analyzeMemoryCategories(input, report);
  analyzeOps(input, report);
  if (input.options.critical_path) analyzeCriticalPath(input, report);
  report.sortFindings();
}

}  // namespace gpuxray::analysis
