#include "analyzer/analysis/thresholds.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

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
    while (!number.empty() && number.front() == ' ') number.erase(0, 1);
    while (!number.empty() && number.back() == ' ') number.pop_back();
    if (!number.empty() && (number.front() == '+' || number.front() == '-')) t.change = Threshold::Change::kAbsolute;
    if (!number.empty() && number.back() == '%') {
      if (t.change == Threshold::Change::kNone) break;  // "x>5%": a relative limit needs its sign
      t.change = Threshold::Change::kRelative;
      number.pop_back();
    }
    char* end = nullptr;
    t.limit = std::strtod(number.c_str(), &end);
    if (end == number.c_str() || end == nullptr || *end != '\0') break;
    t.text = text;
    return t;
  }
  throw UsageError(fmt::format("--fail-on '{}': expected METRIC>NUMBER (or >=, <, <=, ==), e.g. exposed_comm_pct>20, or a "
                               "change against a baseline, METRIC>+NUMBER or METRIC>+NUMBER%, e.g. step_time_ms>+5%",
                               text));
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
                     report::Report& report, const report::Report* baseline) {
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
    if (t.change != Threshold::Change::kNone) {
      if (baseline == nullptr)
        throw UsageError(fmt::format("--fail-on '{}': a signed limit is a change against a baseline; give --baseline "
                                     "REPORT.json (or use gpuxray diff)", t.text));
      const report::Metric* before = baseline->metric(t.metric);
      if (before == nullptr) {
        report::warn(report.stats, report.warnings, report::Stat::fail_on_metrics_missing, 1,
                     fmt::format("--fail-on '{}': the baseline has no {} (nothing to compare with)", t.text, t.metric));
        continue;
      }
      double change = metric->value - before->value;
      bool relative = t.change == Threshold::Change::kRelative;
      if (relative) change = before->value != 0 ? 100 * change / std::abs(before->value) : (change == 0 ? 0.0 : std::numeric_limits<double>::infinity());
      if (breaks(change, t)) {
        report.violations.push_back(fmt::format(
            "{} = {} against {} in the baseline ({}{}), threshold {}{}{}", t.metric,
            report::formatValue(metric->value, metric->unit), report::formatValue(before->value, before->unit),
            change >= 0 ? "+" : "", relative ? fmt::format("{:.2f} %", change) : fmt::format("{:.4g}", change),
            t.comparison, fmt::format("{:+g}", t.limit), relative ? "%" : ""));
      }
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
