#include "analyzer/analysis/thresholds.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>

#include "analyzer/errors.h"

namespace gpuxray::analysis {

Threshold parseThreshold(const std::string& text) {
  static const char* const kOperators[] = {">=", "<=", "==", ">", "<"};
  for (const char* op : kOperators) {
    size_t at = text.find(op);
    if (at == std::string::npos || at == 0) continue;
    Threshold t;
    t.metric = text.substr(0, at);
    while (!t.metric.empty() && t.metric.back() == ' ') t.metric.pop_back();
    t.comparison = op;
    std::string number = text.substr(at + std::string(op).size());
    char* end = nullptr;
    t.limit = std::strtod(number.c_str(), &end);
    while (end != nullptr && *end == ' ') ++end;
    if (end == number.c_str() || end == nullptr || *end != '\0') break;
    t.text = text;
    return t;
  }
  throw UsageError(fmt::format("--fail-on '{}': expected METRIC>NUMBER (or >=, <, <=, ==), e.g. exposed_comm_pct>20", text));
}

namespace {

bool breaks(double value, const Threshold& t) {
  if (t.comparison == ">") return value > t.limit;
  if (t.comparison == ">=") return value >= t.limit;
  if (t.comparison == "<") return value < t.limit;
  if (t.comparison == "<=") return value <= t.limit;
  return value == t.limit;
}

}  // namespace

void applyThresholds(const std::vector<Threshold>& thresholds, const std::vector<std::string>& known_metrics,
                     report::Report& report) {
  for (const auto& t : thresholds) {
    if (std::find(known_metrics.begin(), known_metrics.end(), t.metric) == known_metrics.end()) {
      std::string known;
      for (const auto& name : known_metrics) known += (known.empty() ? "" : ", ") + name;
      throw UsageError(fmt::format("--fail-on '{}': no metric '{}'; known: {}", t.text, t.metric, known));
    }
    const report::Metric* metric = report.metric(t.metric);
    if (metric == nullptr) {
      report::warn(report.stats, report.warnings, report::Stat::fail_on_metrics_missing, 1,
                   fmt::format("--fail-on '{}': this run has no {} (nothing to measure it on)", t.text, t.metric));
      continue;
    }
    if (breaks(metric->value, t)) {
      report.violations.push_back(fmt::format("{} = {} ({}), threshold {}{}", t.metric, fmt::format("{:.4g}", metric->value),
                                              report::formatValue(metric->value, metric->unit), t.comparison,
                                              fmt::format("{:g}", t.limit)));
    }
  }
}

}  // namespace gpuxray::analysis
