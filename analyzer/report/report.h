// What `gpuxray analyze` found, independent of how it is shown. Every analysis fills sections
// (tables of numbers with units), findings (what to fix, most costly first) and metrics (the
// named figures that --fail-on tests). The text, JSON and Markdown renderers show the same
// content, so every number in the text is in the JSON too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpuxray::report {

// Version of the JSON schema (docs/report-schema.md); bump on any incompatible change.
inline constexpr int kReportSchemaVersion = 1;

enum class Unit { kNone, kNanoseconds, kBytes, kPercent, kBytesPerSecond, kCount, kRatio };

const char* unitName(Unit unit);
// A number in the unit's human form: "1.23 ms", "4.0 GiB", "12.5 %", "180 GB/s", "1,024", "1.52x".
std::string formatValue(double value, Unit unit);

struct Cell {
  bool is_number = false;
  double number = 0;
  Unit unit = Unit::kNone;
  std::string text;

  static Cell of(std::string text) { return Cell{false, 0, Unit::kNone, std::move(text)}; }
  static Cell of(double number, Unit unit) { return Cell{true, number, unit, {}}; }
  // A number shown in text and Markdown as `shown` (figures that must appear exactly as computed).
  static Cell shownAs(double number, Unit unit, std::string shown) { return Cell{true, number, unit, std::move(shown)}; }
  std::string display() const { return is_number && text.empty() ? formatValue(number, unit) : text; }
};

struct Column {
  std::string key;    // JSON key, snake_case
  std::string title;  // header in text and Markdown
};

struct Table {
  std::string id;
  std::string title;
  std::vector<Column> columns;
  std::vector<std::vector<Cell>> rows;
};

struct Section {
  std::string id;
  std::string title;
  std::vector<std::string> notes;  // sentences shown above the tables
  std::vector<Table> tables;
};

enum class Severity { kInfo, kWarning, kCritical };
const char* severityName(Severity severity);

struct Finding {
  std::string analysis;  // the section id it comes from
  Severity severity = Severity::kInfo;
  // Time it costs per step (or in all, when no steps are known); orders the findings.
  double cost_ns = 0;
  std::string summary;                // one line naming the rank, link, stage or kernel
  std::vector<std::string> evidence;  // the numbers behind it
};

struct Metric {
  std::string name;  // what --fail-on names
  double value = 0;
  Unit unit = Unit::kNone;
  std::string description;
};

struct RunSummary {
  std::string run_id;
  int32_t world_size = 0;
  std::vector<int32_t> ranks;
  std::vector<std::string> hosts;
  uint64_t records = 0;
  int64_t span_ns = 0;
  size_t steps = 0;
  std::string step_source;  // "NVTX ProfilerStep#", "collective pattern", "none"
};

struct Report {
  RunSummary run;
  std::vector<Section> sections;
  std::vector<Finding> findings;
  std::vector<Metric> metrics;
  std::vector<std::string> warnings;
  // Filled by the thresholds of --fail-on: one line per violated threshold.
  std::vector<std::string> violations;

  Section& addSection(std::string id, std::string title);
  void addMetric(std::string name, double value, Unit unit, std::string description);
  const Metric* metric(const std::string& name) const;
  // Findings most costly first.
  void sortFindings();
};

// The renderers; each returns the whole document.
std::string renderText(const Report& report);
std::string renderJson(const Report& report);
std::string renderMarkdown(const Report& report);

}  // namespace gpuxray::report
