// The report for people: the run in two lines, the findings most costly first, then one section
// per analysis with aligned tables, and every warning at the end.

#include <fmt/core.h>

#include <algorithm>

#include "analyzer/report/report.h"
#include "analyzer/report/units.h"

namespace gpuxray::report {
namespace {

// Display width of UTF-8 text (each code point counts one).
size_t displayWidth(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

void appendPadded(std::string& out, const std::string& text, size_t width, bool right) {
  size_t pad = width > displayWidth(text) ? width - displayWidth(text) : 0;
  if (right) out.append(pad, ' ');
  out += text;
  if (!right) out.append(pad, ' ');
}

void appendTable(std::string& out, const Table& table) {
  if (!table.title.empty()) out += fmt::format("  {}\n", table.title);
  if (table.rows.empty()) {
    out += "    (none)\n";
    return;
  }
  std::vector<size_t> widths(table.columns.size(), 0);
  std::vector<bool> numeric(table.columns.size(), false);
  for (size_t c = 0; c < table.columns.size(); ++c) widths[c] = displayWidth(table.columns[c].title);
  for (const auto& row : table.rows) {
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      widths[c] = std::max(widths[c], displayWidth(row[c].display()));
      numeric[c] = numeric[c] || row[c].is_number;
    }
  }
  auto line = [&](auto cell_text) {
    std::string text = "    ";
    for (size_t c = 0; c < widths.size(); ++c) {
      if (c > 0) text += "  ";
      appendPadded(text, cell_text(c), widths[c], numeric[c]);
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  };
  line([&](size_t c) { return table.columns[c].title; });
  for (const auto& row : table.rows) line([&](size_t c) { return c < row.size() ? row[c].display() : std::string(); });
}

}  // namespace

std::string renderText(const Report& report) {
  std::string out;
  const RunSummary& run = report.run;
  out += fmt::format("gpuxray analyze: run {}, {} on {} host{}, {} records, {} captured\n",
                     run.run_id.empty() ? "(unnamed)" : run.run_id, formatRankCount(run.ranks.size(), run.world_size),
                     run.hosts.size(), run.hosts.size() == 1 ? "" : "s", formatCount(run.records),
                     formatDuration(run.span_ns));
  const bool hinted = run.step_source.starts_with("none; ");
  out += run.steps > 0 ? fmt::format("steps: {} (from {})\n", run.steps, run.step_source)
         : hinted
             ? fmt::format("steps: none found (figures are for the whole capture); {}\n", run.step_source.substr(6))
             : std::string("steps: none found (figures are for the whole capture)\n");

  out += "\nFindings\n";
  if (report.findings.empty()) out += "  nothing stands out\n";
  for (size_t i = 0; i < report.findings.size(); ++i) {
    const Finding& f = report.findings[i];
    out += fmt::format("  {}. [{}] {}\n", i + 1, severityName(f.severity), f.summary);
    for (const auto& line : f.evidence) out += fmt::format("       {}\n", line);
  }

  for (const Section& section : report.sections) {
    out += fmt::format("\n{}\n", section.title);
    for (const auto& note : section.notes) out += fmt::format("  {}\n", note);
    for (const Table& table : section.tables) appendTable(out, table);
  }

  if (!report.metrics.empty()) {
    out += "\nMetrics (for --fail-on)\n";
    size_t name_width = 0, value_width = 0;
    for (const auto& m : report.metrics) {
      name_width = std::max(name_width, m.name.size());
      value_width = std::max(value_width, displayWidth(formatValue(m.value, m.unit)));
    }
    for (const auto& m : report.metrics) {
      std::string line = "  ";
      appendPadded(line, m.name, name_width, false);
      line += "  ";
      appendPadded(line, formatValue(m.value, m.unit), value_width, true);
      out += line + "  " + m.description + "\n";
    }
  }
  if (!report.stats.nonZero().empty()) {
    out += "\nStats (what was dropped, skipped or estimated)\n";
    appendTable(out, statsTable(report.stats));
  }
  if (!report.warnings.empty()) {
    out += fmt::format("\nWarnings ({})\n", report.warnings.size());
    for (const auto& warning : report.warnings) out += fmt::format("  {}\n", warning);
  }
  if (!report.violations.empty()) {
    out += "\nThresholds violated\n";
    for (const auto& violation : report.violations) out += fmt::format("  {}\n", violation);
  }
  return out;
}

std::string renderText(const Document& document) {
  std::string out = document.title + "\n";
  for (const auto& note : document.notes) out += fmt::format("  {}\n", note);
  for (const Section& section : document.sections) {
    out += fmt::format("\n{}\n", section.title);
    for (const auto& note : section.notes) out += fmt::format("  {}\n", note);
    for (const Table& table : section.tables) appendTable(out, table);
  }
  return out;
}

}  // namespace gpuxray::report
