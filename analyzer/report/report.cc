#include "analyzer/report/report.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "analyzer/report/units.h"

namespace gpuxray::report {

Table statsTable(const Stats& stats) {
  Table table{
      "stats", "", {{"name", "stat"}, {"severity", "severity"}, {"value", "count"}, {"description", "what"}}, {}};
  for (Stat stat : stats.nonZero()) {
    const StatInfo& info = statInfo(stat);
    table.rows.push_back({Cell::of(std::string(info.name)), Cell::of(statSeverityName(info.severity)),
                          Cell::of(static_cast<double>(stats.value(stat)), Unit::kCount),
                          Cell::of(std::string(info.description))});
  }
  return table;
}

const char* unitName(Unit unit) {
  switch (unit) {
    case Unit::kNone: return "";
    case Unit::kNanoseconds: return "ns";
    case Unit::kMilliseconds: return "ms";
    case Unit::kBytes: return "bytes";
    case Unit::kPercent: return "percent";
    case Unit::kBytesPerSecond: return "bytes_per_second";
    case Unit::kCount: return "count";
    case Unit::kRatio: return "ratio";
  }
  return "";
}

std::string formatValue(double value, Unit unit) {
  if (std::isnan(value)) return "n/a";
  switch (unit) {
    case Unit::kNanoseconds: return formatDuration(static_cast<int64_t>(std::llround(value)));
    case Unit::kMilliseconds: return formatDuration(static_cast<int64_t>(std::llround(value * 1e6)));
    case Unit::kBytes: return formatBytes(static_cast<uint64_t>(std::max(0.0, value)));
    case Unit::kPercent: return fmt::format("{:.1f} %", value);
    case Unit::kBytesPerSecond: return formatBandwidth(value);
    case Unit::kCount: return formatCount(static_cast<uint64_t>(std::max(0.0, std::round(value))));
    case Unit::kRatio: return fmt::format("{:.2f}x", value);
    case Unit::kNone: break;
  }
  return fmt::format("{:.4g}", value);
}

std::string worstRowsTitle(std::string_view title, size_t kept, size_t total, std::string_view rows_are,
                           std::string_view order) {
  std::string cut =
      fmt::format("{} of {} {}, {}", kept, formatValue(static_cast<double>(total), Unit::kCount), rows_are, order);
  return title.empty() ? cut : fmt::format("{}: {}", title, cut);
}

const char* severityName(Severity severity) {
  switch (severity) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kCritical: return "critical";
  }
  return "info";
}

Section& Report::addSection(std::string id, std::string title) {
  sections.push_back(Section{std::move(id), std::move(title), {}, {}});
  return sections.back();
}

void Report::addMetric(std::string name, double value, Unit unit, std::string description) {
  metrics.push_back(Metric{std::move(name), value, unit, std::move(description)});
}

const Metric* Report::metric(const std::string& name) const {
  auto it = std::find_if(metrics.begin(), metrics.end(), [&](const Metric& m) { return m.name == name; });
  return it == metrics.end() ? nullptr : &*it;
}

void Report::sortFindings() {
  // What a fix would save, where the critical path predicted it, ranks before the analyses' own measures.
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    if (a.saves_ns.has_value() != b.saves_ns.has_value()) return a.saves_ns.has_value();
    if (a.saves_ns && *a.saves_ns != *b.saves_ns) return *a.saves_ns > *b.saves_ns;
    if (a.severity != b.severity) return a.severity > b.severity;
    return a.cost_ns > b.cost_ns;
  });
}

}  // namespace gpuxray::report
