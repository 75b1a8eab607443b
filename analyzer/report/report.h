// What `gpuxray analyze` found, independent of how it is shown. Every analysis fills sections
// (tables of numbers with units), findings (what to fix, most costly first) and metrics (the
// named figures that --fail-on tests). The text, JSON and Markdown renderers show the same
// content, so every number in the text is in the JSON too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analyzer/report/results.h"
#include "analyzer/report/stats.h"

namespace gpuxray::report {

// Version of the JSON report's schema (docs/report-schema.md); bump on any incompatible change.
// 2 added `results`, the analyses' typed results.
inline constexpr int kReportSchemaVersion = 2;
// Version of a Document's JSON (`gpuxray plan`), which has no results.
inline constexpr int kDocumentSchemaVersion = 1;

// kMilliseconds is for metrics named *_ms, whose --fail-on limits are given in milliseconds.
enum class Unit { kNone, kNanoseconds, kMilliseconds, kBytes, kPercent, kBytesPerSecond, kCount, kRatio };

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
  static Cell shownAs(double number, Unit unit, std::string shown) {
    return Cell{true, number, unit, std::move(shown)};
  }
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

// The title keepWorstRows gives a table it cut from `total` rows to `kept`.
std::string worstRowsTitle(std::string_view title, size_t kept, size_t total, std::string_view rows_are,
                           std::string_view order);

// A table of one row per rank (or per device, stream, host) stays readable at a thousand ranks: past
// 2 x `top` rows it keeps the `top` with the highest `key` (ties in their order) and its title says
// so, "10 of 1,024 ranks, most idle first". The typed results keep every row. `top` 0 keeps all. One rule
// for every such table: a 500-step or 1,024-rank run's text report stays a page, not thousands of lines.
template <typename Key>
void keepWorstRows(Table& table, size_t top, std::string_view rows_are, std::string_view order, Key key) {
  if (top == 0 || table.rows.size() <= 2 * top) return;
  std::vector<std::pair<double, size_t>> keyed;
  for (size_t i = 0; i < table.rows.size(); ++i) keyed.emplace_back(key(table.rows[i]), i);
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::vector<Cell>> kept;
  for (size_t i = 0; i < top; ++i) kept.push_back(std::move(table.rows[keyed[i].second]));
  table.title = worstRowsTitle(table.title, top, table.rows.size(), rows_are, order);
  table.rows = std::move(kept);
}

struct Section {
  std::string id;
  std::string title;
  std::vector<std::string> notes;  // sentences shown above the tables
  std::vector<Table> tables;
};

enum class Severity { kInfo, kWarning, kCritical };
const char* severityName(Severity severity);

// What a finding blames, for the critical path's what-if to set to its ideal.
struct FindingCause {
  enum class Kind : uint8_t {
    kNone,
    kStraggler,             // ranks: the straggler; its compute at its peers' median
    kSlowNic,               // ranks: those whose network traffic goes through it; factor: its slowdown
    kExposedCommunication,  // ranks: the rank; its collectives fully overlapped
    kSlowStage,             // ranks: the stage's; factor: its compute / the mean stage's
    kHostGaps,              // ranks: the rank; its launch delays closed
  };
  Kind kind = Kind::kNone;
  std::vector<int32_t> ranks;
  double factor = 1;
  std::string label;  // what fixing it names: "node-01's NIC mlx5_2", "rank 2", "stage 3"
};

struct Finding {
  std::string analysis;  // the section id it comes from
  Severity severity = Severity::kInfo;
  // Time it costs per step (or in all, when no steps are known); orders the findings.
  double cost_ns = 0;
  std::string summary;                // one line naming the rank, link, stage or kernel
  std::vector<std::string> evidence;  // the numbers behind it
  FindingCause cause;
  // Per step, what removing the cause saves on the critical path (--critical-path); absent: not computed.
  std::optional<double> saves_ns;
};

struct Metric {
  std::string name;  // what --fail-on names
  double value = 0;
  Unit unit = Unit::kNone;
  std::string description;
};

// Something an analysis found at a place in time, to be drawn on the timeline (the Perfetto
// export): an interval (a bubble, exposed communication) or an instant (a late arrival).
struct TimelineMark {
  std::string analysis;  // the section id
  int32_t rank = -1;
  int64_t start_ns = 0;  // on the run's clock
  int64_t end_ns = 0;    // == start_ns for an instant
  std::string label;     // e.g. "bubble: waiting on stage 2"
};

// One step's critical path, for the timeline's "critical path" tracks: its stretches in time order,
// covering the step, each on the rank whose event it is (analysis "critical_path"). Where two
// consecutive stretches are on different ranks, the path crosses from one rank to the other there.
struct TimelinePath {
  int64_t step = -1;  // -1: no steps
  std::vector<TimelineMark> stretches;
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
  std::vector<std::string> step_markers;  // --step-marker's patterns, as given (the same steps elsewhere need them)
};

struct Report {
  RunSummary run;
  std::vector<Section> sections;
  std::vector<Finding> findings;
  std::vector<Metric> metrics;
  // For the timeline only; the renderers do not show them.
  std::vector<TimelineMark> marks;
  std::vector<TimelinePath> critical_paths;  // --critical-path, per step
  // Per analysis (its section id), its typed result: JSON's `results`; text and Markdown show the
  // sections instead.
  std::vector<std::pair<std::string, ResultValue>> results;
  // Whether addResult keeps the typed results. Off where only text or Markdown is shown, so that a
  // large run's trees (one value per number: per-rank and per-step rows, memory curves) are never built.
  bool keep_results = true;
  // Whether the analyses add their `marks`, which only the timeline export draws. Off where no
  // timeline is written: a 1024-rank run's exposed stretches and bubbles are millions of marks.
  bool keep_marks = true;
  // One line each; every line is also one of `stats`' lines.
  std::vector<std::string> warnings;
  // What was dropped, skipped, estimated or suspicious (loading, analyses, the timeline export).
  Stats stats;
  // Filled by the thresholds of --fail-on: one line per violated threshold.
  std::vector<std::string> violations;

  Section& addSection(std::string id, std::string title);
  // Adds an analysis' typed result, made by `make` only when results are kept.
  template <typename MakeResult>
  void addResult(std::string analysis, MakeResult&& make) {
    if (keep_results) results.emplace_back(std::move(analysis), std::forward<MakeResult>(make)());
  }
  void addMetric(std::string name, double value, Unit unit, std::string description);
  const Metric* metric(const std::string& name) const;
  // Findings most costly first.
  void sortFindings();
};

// The stats that are not zero as a table (stat, severity, count, description): the text and Markdown
// renderers show it as it is, the JSON one writes the same rows as the `stats` array.
Table statsTable(const Stats& stats);

// The renderers; each returns the whole document.
std::string renderText(const Report& report);
std::string renderJson(const Report& report);
std::string renderMarkdown(const Report& report);

// Output that is not the analysis of a run (`gpuxray plan`'s ranking): a title, notes and
// sections, rendered the way a report renders its sections. In JSON: schema, schema_version,
// title, notes and sections as in the report.
struct Document {
  std::string schema;  // "gpuxray.plan"
  std::string title;
  std::vector<std::string> notes;
  std::vector<Section> sections;
};
std::string renderText(const Document& document);
std::string renderJson(const Document& document);
std::string renderMarkdown(const Document& document);

}  // namespace gpuxray::report
