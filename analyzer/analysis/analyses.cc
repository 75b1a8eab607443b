#include "analyzer/analysis/analyses.h"

namespace gpuxray::analysis {

const std::vector<std::string>& knownMetrics() {
  static const std::vector<std::string> names = {
      "idle_pct",           "host_bound_pct",    "exposed_comm_pct",  "overlap_pct",
      "collective_skew_ms", "busbw_pct_of_link", "straggler_wait_ms",
  };
  return names;
}

void runAnalyses(const AnalysisInput& input, report::Report& report) {
  analyzeClock(input, report);
  analyzeTimeBreakdown(input, report);
  analyzeOverlap(input, report);
  analyzeCollectives(input, report);
  analyzeStragglers(input, report);
  report.sortFindings();
}

}  // namespace gpuxray::analysis
