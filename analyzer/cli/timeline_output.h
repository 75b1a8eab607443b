// Writing the timeline (Perfetto protobuf and/or Chrome JSON) from `gpuxray analyze --perfetto` and
// `gpuxray export`: the options they share and the summary of what was written and left out.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/report/report.h"

namespace gpuxray::cli {

struct TimelineOutput {
  std::string perfetto_path;
  std::string chrome_json_path;
  // "START:END" from the run's first event, each with a unit (ns, us, ms, s), either may be empty.
  std::string window;
  bool wanted() const { return !perfetto_path.empty() || !chrome_json_path.empty(); }
};

// The part of the run clock to write: --window (relative to the run's start) intersected with the
// span of the steps numbered in `steps`; nullopt for everything. Throws UsageError.
std::optional<analysis::Interval> timelineWindow(const analysis::AnalysisInput& input, const std::string& window,
                                                 const std::vector<int64_t>& steps);

// What `gpuxray export` (and `convert -o FILE.pftrace`) is asked for: a run to load and a timeline.
struct TimelineRequest {
  std::vector<std::string> paths;
  bool allow_mixed_runs = false;
  unsigned jobs = 0;
  std::vector<std::string> ranks;
  std::vector<std::string> steps;
  std::vector<std::string> step_markers;
  bool no_align = false;
  TimelineOutput output;
};

// Loads the run, puts it on one clock, runs the analyses silently (their findings are drawn in)
// and writes the timeline; progress and warnings on stderr, the summary to `out`.
void exportRunTimeline(const TimelineRequest& request, std::FILE* out);

// Writes the requested files in one walk of the model, then one summary line per topic to `out`.
// Returns what the export left out (the export_* stats, each with its line).
report::Stats writeTimelines(const analysis::AnalysisInput& input, const report::Report& report,
                             const TimelineOutput& output, const std::vector<int64_t>& steps, std::FILE* out);

}  // namespace gpuxray::cli
