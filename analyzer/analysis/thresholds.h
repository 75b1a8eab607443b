// --fail-on: thresholds on the report's metrics ("exposed_comm_pct>20"), each violated one a line, or on
// their change against a baseline report (--baseline, `gpuxray diff`): a signed limit is a change in the
// metric's unit ("exposed_comm_pct>+2"), one ending in % a change relative to the baseline's value
// ("step_time_ms>+5%").
#pragma once

#include <string>
#include <vector>

#include "analyzer/report/report.h"

namespace gpuxray::analysis {

struct Threshold {
  std::string metric;
  std::string comparison;  // one of > >= < <= ==
  double limit = 0;
  enum class Change { kNone, kAbsolute, kRelative };
  Change change = Change::kNone;  // kNone: the limit is on the value itself
  std::string text;        // as given
};

// Throws UsageError for text that is not METRIC OP NUMBER.
Threshold parseThreshold(const std::string& text);

// Adds one line to report.violations per threshold the report's metrics break. A threshold on a
// metric the report lacks (no communication, no pipeline) is not violated; it is listed as a warning,
// and a name no analysis ever produces is a UsageError listing the known ones.
// A threshold on a change is tested against `baseline`'s metric (a UsageError without a baseline; a
// metric the baseline lacks is a warning, as above).
void applyThresholds(const std::vector<Threshold>& thresholds, const std::vector<std::string>& known_metrics,
                     report::Report& report, const report::Report* baseline = nullptr);

}  // namespace gpuxray::analysis
