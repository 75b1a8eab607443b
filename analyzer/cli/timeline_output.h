// Writing the timeline (Perfetto protobuf and/or Chrome JSON) from `gpuxray analyze --perfetto` and
// `gpuxray export`: the options they share and the summary of what was written and left out.
#pragma once

#include <cstdio>
#include <string>

#include "analyzer/analysis/session.h"
#include "analyzer/report/report.h"

namespace gpuxray::cli {

struct TimelineOutput {
  std::string perfetto_path;
  std::string chrome_json_path;
  bool wanted() const { return !perfetto_path.empty() || !chrome_json_path.empty(); }
};

// Prepares the run through the session (progress and warnings on stderr), runs the analyses
// silently (their findings are drawn in) and writes the timeline; the summary goes to `out`.
void exportRunTimeline(analysis::SessionOptions options, const TimelineOutput& output, std::FILE* out);

// Writes the requested files in one walk of the session's run (--window and --steps' span only),
// then one summary line per topic to `out`. Returns what the export left out (the export_* stats,
// each with its line).
report::Stats writeTimelines(const analysis::Session& session, const report::Report& report,
                             const TimelineOutput& output, std::FILE* out);

}  // namespace gpuxray::cli
