#include "analyzer/analysis/analyses.h"

#include <utility>

#include "analyzer/analysis/activity_totals.h"
#include "analyzer/analysis/step_times.h"
#include "analyzer/workers.h"

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

namespace {

// What one analysis added, appended to the report as if it had written there itself.
void append(report::Report& report, report::Report&& part) {
  auto moveInto = [](auto& to, auto& from) { to.insert(to.end(), std::make_move_iterator(from.begin()),
                                                       std::make_move_iterator(from.end())); };
  moveInto(report.sections, part.sections);
  moveInto(report.findings, part.findings);
  moveInto(report.metrics, part.metrics);
  moveInto(report.marks, part.marks);
  moveInto(report.critical_paths, part.critical_paths);
  moveInto(report.results, part.results);
  moveInto(report.warnings, part.warnings);
  report.stats.merge(part.stats);
}

}  // namespace

void runAnalyses(const AnalysisInput& input, report::Report& report, unsigned jobs) {
  using Analysis = void (*)(const AnalysisInput&, report::Report&);
  std::vector<Analysis> analyses = {analyzeClock, analyzeStepTimes};
  if (input.options.hta_compat) {
    analyses.push_back(analyzeHtaCompat);
  } else {
    analyses.insert(analyses.end(), {analyzeTimeBreakdown, analyzeOverlap});
  }
  analyses.insert(analyses.end(), {analyzeCollectives, analyzeCollectiveBandwidth, analyzeStragglers,
                                   analyzePipelineBubbles, analyzeLinkHotspots, analyzeKernels,
                                   analyzeKernelMetrics, analyzeMemory, analyzeActivityTotals,
                                   analyzeStepOverview, analyzeMemoryCategories, analyzeOps});
  // Each reads the input only and writes its own part: they run side by side, and their parts join
  // the report in the order above, so that it is the same whatever the number of workers. The one
  // thing built on first use is built here, before the workers share it.
  (void)input.collectives();
  std::vector<report::Report> parts(analyses.size());
  for (report::Report& part : parts) {
    part.keep_results = report.keep_results;
    part.keep_marks = report.keep_marks;
  }
  onWorkers(analyses.size(), jobs, [&](size_t i) { analyses[i](input, parts[i]); });
  for (report::Report& part : parts) append(report, std::move(part));
  // The critical path's what-if reads the findings of all the others.
  if (input.options.critical_path) analyzeCriticalPath(input, report, jobs);
  report.sortFindings();
}

}  // namespace gpuxray::analysis
