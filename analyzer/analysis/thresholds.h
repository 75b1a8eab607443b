// --fail-on: thresholds on the report's metrics ("exposed_comm_pct>20"), each violated one a line.
#pragma once

#include <string>
#include <vector>

#include "analyzer/report/report.h"

namespace gpuxray::analysis {

struct Threshold {
  std::string metric;
  std::string comparison;  // one of > >= < <= ==
  double limit = 0;
  std::string text;        // as given
};

// Throws UsageError for text that is not METRIC OP NUMBER.
Threshold parseThreshold(const std::string& text);

// Adds one line to report.violations per threshold the report's metrics break. A threshold on a
// metric the report lacks (no communication, no pipeline) is not violated; it is listed as a warning,
// and a name no analysis ever produces is a UsageError listing the known ones.
void applyThresholds(const std::vector<Threshold>& thresholds, const std::vector<std::string>& known_metrics,
                     report::Report& report);

}  // namespace gpuxray::analysis
