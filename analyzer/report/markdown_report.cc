// The report as GitHub-flavoured Markdown, for CI job summaries.

#include <fmt/core.h>

#include "analyzer/report/report.h"
#include "analyzer/report/units.h"

namespace gpuxray::report {
namespace {

std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

void appendTable(std::string& out, const Table& table) {
  if (!table.title.empty()) out += fmt::format("**{}**\n\n", escaped(table.title));
  if (table.rows.empty()) {
    out += "_none_\n\n";
    return;
  }
  std::string header = "|";
  std::string rule = "|";
  for (const auto& column : table.columns) {
    header += " " + escaped(column.title) + " |";
    rule += "---|";
  }
  out += header + "\n" + rule + "\n";
  for (const auto& row : table.rows) {
    std::string line = "|";
    for (size_t c = 0; c < table.columns.size(); ++c) line += " " + (c < row.size() ? escaped(row[c].display()) : "") + " |";
    out += line + "\n";
  }
  out += "\n";
}

}  // namespace

std::string renderMarkdown(const Report& report) {
  std::string out;
  const RunSummary& run = report.run;
  out += fmt::format("## gpuxray: run `{}`\n\n", run.run_id.empty() ? "(unnamed)" : run.run_id);
  out +=
      fmt::format("{} on {} host(s), {} records, {} captured, {} step(s){}.\n\n",
                  formatRankCount(run.ranks.size(), run.world_size), run.hosts.size(), formatCount(run.records),
                  formatDuration(run.span_ns), run.steps, run.steps > 0 ? " from " + run.step_source : std::string());
  if (!report.violations.empty()) {
    out += "### Thresholds violated\n\n";
    for (const auto& v : report.violations) out += fmt::format("- :x: {}\n", escaped(v));
    out += "\n";
  }
  out += "### Findings\n\n";
  if (report.findings.empty()) out += "Nothing stands out.\n";
  for (const auto& f : report.findings) {
    out += fmt::format("1. **{}** {}\n", severityName(f.severity), escaped(f.summary));
    for (const auto& e : f.evidence) out += fmt::format("   - {}\n", escaped(e));
  }
  out += "\n";
  if (!report.metrics.empty()) {
    out += "### Metrics\n\n| metric | value | meaning |\n|---|---|---|\n";
    for (const auto& m : report.metrics)
      out += fmt::format("| `{}` | {} | {} |\n", m.name, formatValue(m.value, m.unit), escaped(m.description));
    out += "\n";
  }
  for (const auto& section : report.sections) {
    out += fmt::format("<details><summary>{}</summary>\n\n", escaped(section.title));
    for (const auto& note : section.notes) out += escaped(note) + "\n\n";
    for (const auto& table : section.tables) appendTable(out, table);
    out += "</details>\n\n";
  }
  if (!report.stats.nonZero().empty()) {
    out += "### Stats (what was dropped, skipped or estimated)\n\n";
    appendTable(out, statsTable(report.stats));
  }
  if (!report.warnings.empty()) {
    out += fmt::format("### Warnings ({})\n\n", report.warnings.size());
    for (const auto& w : report.warnings) out += fmt::format("- {}\n", escaped(w));
  }
  return out;
}

std::string renderMarkdown(const Document& document) {
  std::string out = fmt::format("## {}\n\n", escaped(document.title));
  for (const auto& note : document.notes) out += escaped(note) + "\n\n";
  for (const Section& section : document.sections) {
    out += fmt::format("### {}\n\n", escaped(section.title));
    for (const auto& note : section.notes) out += escaped(note) + "\n\n";
    for (const Table& table : section.tables) appendTable(out, table);
  }
  return out;
}

}  // namespace gpuxray::report
