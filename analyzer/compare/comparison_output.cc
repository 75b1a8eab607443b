// The comparison for people (text, Markdown: a report::Document's sections) and for machines (JSON,
// schema gpuxray.diff, docs/diff.md).

#include <fmt/core.h>

#include <cmath>

#include "analyzer/compare/run_comparison.h"
#include "analyzer/report/json_writer.h"

namespace gpuxray::compare {
namespace {

using report::Cell;
using report::Unit;

std::string changeText(double before, double after, Unit unit) {
  double delta = after - before;
  // A change of a percentage is in points; its relative change would read as a second percentage.
  if (unit == Unit::kPercent) return fmt::format("{:+.1f} points", delta);
  if (unit == Unit::kNone && std::abs(delta) >= 100) {
    std::string text = fmt::format("{:+.0f}", delta);
    return before != 0 ? text + fmt::format(" ({:+.1f} %)", 100 * delta / std::abs(before)) : text;
  }
  std::string sign = delta > 0 ? "+" : delta < 0 ? "-" : "";
  std::string text = sign + report::formatValue(std::abs(delta), unit);
  if (before != 0) text += fmt::format(" ({:+.1f} %)", 100 * delta / std::abs(before));
  return text;
}

Cell optionalCell(const std::optional<double>& value, Unit unit) {
  if (!value) return Cell::of("-");
  // Plain figures such as tokens/s: whole numbers rather than exponents.
  if (unit == Unit::kNone && std::abs(*value) >= 1000)
    return Cell::shownAs(*value, unit, fmt::format("{:.0f}", *value));
  return Cell::of(*value, unit);
}

std::string verdictText(const StepComparison& s) {
  switch (s.verdict) {
    case StepVerdict::kNoSteps:
      return "no verdict: a side has no steps";
    case StepVerdict::kOneStep:
      return "no verdict: a side has one step, so no step-to-step spread";
    case StepVerdict::kNoChange:
      return "no change";
    case StepVerdict::kWithinNoise:
      return fmt::format("within noise: the change is inside the step-to-step spread ({} std dev)",
                         report::formatValue(s.noise_ns, Unit::kNanoseconds));
    case StepVerdict::kFaster:
    case StepVerdict::kSlower:
      return fmt::format("{}: beyond the step-to-step spread ({} std dev)",
                         s.verdict == StepVerdict::kFaster ? "faster" : "slower",
                         report::formatValue(s.noise_ns, Unit::kNanoseconds));
  }
  return "";
}

std::string shortName(const std::string& name) {
  return name.size() <= 90 ? name : name.substr(0, 87) + "...";
}

report::Table activityTable(const std::string& id, const std::string& title, const std::vector<ActivityDelta>& deltas,
                            size_t top, bool kernels) {
  report::Table table{id,
                      title,
                      {{"name", "name"},
                       {"kind", "kind"},
                       {"change", "change"},
                       {"count_before", "count before"},
                       {"count_after", "after"},
                       {"per_step_before", "per step before"},
                       {"per_step_after", "after"},
                       {"per_step_change", "change per step"}},
                      {}};
  if (kernels) table.columns.push_back({"launch", "launch"});
  size_t shown = 0;
  for (const auto& d : deltas) {
    if (d.change == Change::kSame) continue;
    if (shown++ == top) break;
    std::vector<Cell> row{Cell::of(shortName(d.name)),
                          Cell::of(d.kind),
                          Cell::of(changeName(d.change)),
                          Cell::of(static_cast<double>(d.count_before), Unit::kCount),
                          Cell::of(static_cast<double>(d.count_after), Unit::kCount),
                          Cell::of(d.per_step_before_ns, Unit::kNanoseconds),
                          Cell::of(d.per_step_after_ns, Unit::kNanoseconds),
                          Cell::of(changeText(d.per_step_before_ns, d.per_step_after_ns, Unit::kNanoseconds))};
    if (kernels) {
      row.push_back(Cell::of(d.launch_before == d.launch_after
                                 ? d.launch_after
                                 : fmt::format("{} -> {}", d.launch_before.empty() ? "-" : d.launch_before,
                                               d.launch_after.empty() ? "-" : d.launch_after)));
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

report::Document documentOf(const RunComparison& c, size_t top) {
  report::Document doc;
  doc.schema = "gpuxray.diff";
  doc.title =
      fmt::format("gpuxray diff: {} ({}) -> {} ({})", c.before_label, c.before_kind, c.after_label, c.after_kind);
  for (const auto& w : c.warnings) doc.notes.push_back("warning: " + w);
  for (const auto& n : c.notes) doc.notes.push_back("not matched: " + n);
  if (c.identical())
    doc.notes.push_back("no change: every step time, metric, kernel, op, memory peak and finding is the same");

  const StepComparison& s = c.steps;
  auto& steps = doc.sections.emplace_back(report::Section{"step_times", "Step time and throughput", {}, {}});
  steps.notes.push_back(verdictText(s));
  report::Table t{"steps", "", {{"figure", ""}, {"before", "before"}, {"after", "after"}, {"change", "change"}}, {}};
  auto ns = [](auto v) { return static_cast<double>(v); };
  t.rows.push_back({Cell::of("steps"), Cell::of(ns(s.before.steps), Unit::kCount),
                    Cell::of(ns(s.after.steps), Unit::kCount), Cell::of("")});
  if (s.before.steps > 0 && s.after.steps > 0) {
    t.rows.push_back({Cell::of("median step time"), Cell::of(ns(s.before.median_ns), Unit::kNanoseconds),
                      Cell::of(ns(s.after.median_ns), Unit::kNanoseconds),
                      Cell::of(changeText(ns(s.before.median_ns), ns(s.after.median_ns), Unit::kNanoseconds))});
    t.rows.push_back({Cell::of("step-to-step std dev"), Cell::of(s.before.stddev_ns, Unit::kNanoseconds),
                      Cell::of(s.after.stddev_ns, Unit::kNanoseconds), Cell::of("")});
    if (s.before.tokens_per_s || s.after.tokens_per_s) {
      t.rows.push_back({Cell::of("tokens/s"), optionalCell(s.before.tokens_per_s, Unit::kNone),
                        optionalCell(s.after.tokens_per_s, Unit::kNone),
                        s.before.tokens_per_s && s.after.tokens_per_s
                            ? Cell::of(changeText(*s.before.tokens_per_s, *s.after.tokens_per_s, Unit::kNone))
                            : Cell::of("-")});
    }
  }
  steps.tables.push_back(std::move(t));

  auto& metrics = doc.sections.emplace_back(report::Section{"metrics", "Metrics (--fail-on's)", {}, {}});
  report::Table m{
      "metrics", "", {{"metric", "metric"}, {"before", "before"}, {"after", "after"}, {"change", "change"}}, {}};
  size_t unchanged = 0;
  for (const auto& d : c.metrics) {
    if (d.before == d.after) {
      ++unchanged;
      continue;
    }
    m.rows.push_back({Cell::of(d.name), optionalCell(d.before, d.unit), optionalCell(d.after, d.unit),
                      d.before && d.after ? Cell::of(changeText(*d.before, *d.after, d.unit))
                                          : Cell::of(d.before ? "gone" : "new")});
  }
  if (unchanged > 0) metrics.notes.push_back(fmt::format("{} metrics unchanged", unchanged));
  metrics.tables.push_back(std::move(m));

  auto& kernels =
      doc.sections.emplace_back(report::Section{"kernels", "Kernels (GPU activities by normalized name)", {}, {}});
  kernels.notes.push_back(
      fmt::format("Per step and rank, largest change first (top {}); names without return type and "
                  "parameters, template arguments kept.",
                  top));
  if (!c.kernels_from_totals) kernels.notes.push_back("Compute kernels only (a side has no activity totals).");
  kernels.tables.push_back(activityTable("kernels", "", c.kernels, top, true));
  if (!c.ops.empty()) {
    auto& ops = doc.sections.emplace_back(
        report::Section{"ops", "Ops (NVTX / record_function ranges, CUDA API calls)", {}, {}});
    ops.tables.push_back(activityTable("ops", "", c.ops, top, false));
  }

  for (const auto& keyed : c.tables) {
    auto& section = doc.sections.emplace_back(report::Section{keyed.id, keyed.title, {}, {}});
    report::Table table{keyed.id, "", {}, {}};
    for (const auto& key : keyed.key_fields) table.columns.push_back({key, key});
    table.columns.push_back({"change", "change"});
    for (const auto& value : keyed.value_fields) {
      table.columns.push_back({value + "_before", value + " before"});
      table.columns.push_back({value + "_after", "after"});
    }
    size_t shown = 0, same = 0;
    for (const auto& row : keyed.rows) {
      if (row.change == Change::kSame) {
        ++same;
        continue;
      }
      if (shown++ == top) break;
      std::vector<Cell> cells;
      for (const auto& key : row.key) cells.push_back(Cell::of(key));
      cells.push_back(Cell::of(changeName(row.change)));
      for (size_t v = 0; v < keyed.value_fields.size(); ++v) {
        cells.push_back(optionalCell(row.before[v], keyed.units[v]));
        cells.push_back(optionalCell(row.after[v], keyed.units[v]));
      }
      table.rows.push_back(std::move(cells));
    }
    if (same > 0) section.notes.push_back(fmt::format("{} unchanged", same));
    section.tables.push_back(std::move(table));
  }

  auto& memory = doc.sections.emplace_back(report::Section{"memory", "Memory peak", {}, {}});
  if (!c.memory_before.recorded && !c.memory_after.recorded) {
    memory.notes.push_back("not recorded on either side");
  } else {
    report::Table mem{"memory", "", {{"figure", ""}, {"before", "before"}, {"after", "after"}}, {}};
    auto bytes = [](const MemorySide& side) {
      return side.recorded ? Cell::of(static_cast<double>(side.peak_bytes), Unit::kBytes) : Cell::of("not recorded");
    };
    mem.rows.push_back({Cell::of("peak"), bytes(c.memory_before), bytes(c.memory_after)});
    mem.rows.push_back({Cell::of("% of device"), optionalCell(c.memory_before.peak_pct, Unit::kPercent),
                        optionalCell(c.memory_after.peak_pct, Unit::kPercent)});
    mem.rows.push_back({Cell::of("rank"), Cell::of(fmt::format("{}", c.memory_before.rank)),
                        Cell::of(fmt::format("{}", c.memory_after.rank))});
    mem.rows.push_back({Cell::of("during"), Cell::of(c.memory_before.phase), Cell::of(c.memory_after.phase)});
    memory.tables.push_back(std::move(mem));
  }

  auto& findings = doc.sections.emplace_back(report::Section{"findings", "Findings", {}, {}});
  report::Table f{"findings", "", {{"status", "status"}, {"severity", "severity"}, {"summary", "finding"}}, {}};
  for (const auto& x : c.findings) {
    const char* status = x.change == Change::kGone ? "resolved" : x.change == Change::kNew ? "new" : "still there";
    f.rows.push_back({Cell::of(status), Cell::of(report::severityName(x.severity)),
                      Cell::of(x.change == Change::kGone ? x.summary_before : x.summary_after)});
  }
  findings.tables.push_back(std::move(f));
  return doc;
}

void writeActivities(report::JsonWriter& json, const std::vector<ActivityDelta>& deltas, bool kernels) {
  json.beginArray();
  for (const auto& d : deltas) {
    json.beginObject();
    json.field("name", d.name).field("kind", d.kind).field("change", changeName(d.change));
    json.field("count_before", d.count_before).field("count_after", d.count_after);
    json.field("time_before_ns", d.time_before_ns).field("time_after_ns", d.time_after_ns);
    json.field("per_step_before_ns", d.per_step_before_ns).field("per_step_after_ns", d.per_step_after_ns);
    if (kernels) {
      json.key("launch_before");
      d.launch_before.empty() ? json.null() : json.value(d.launch_before);
      json.key("launch_after");
      d.launch_after.empty() ? json.null() : json.value(d.launch_after);
    }
    json.endObject();
  }
  json.endArray();
}

void writeOptional(report::JsonWriter& json, const char* key, const std::optional<double>& value) {
  json.key(key);
  value ? json.value(*value) : json.null();
}

}  // namespace

std::string renderComparisonText(const RunComparison& comparison, size_t top) {
  return report::renderText(documentOf(comparison, top));
}

std::string renderComparisonMarkdown(const RunComparison& comparison, size_t top) {
  return report::renderMarkdown(documentOf(comparison, top));
}

std::string renderComparisonJson(const RunComparison& c) {
  std::string out;
  report::JsonWriter json(out);
  json.beginObject();
  json.field("schema", "gpuxray.diff").field("schema_version", static_cast<int64_t>(kDiffSchemaVersion));
  json.key("before").beginObject().field("path", c.before_label).field("kind", c.before_kind).endObject();
  json.key("after").beginObject().field("path", c.after_label).field("kind", c.after_kind).endObject();
  json.field("identical", c.identical());
  json.key("notes").beginArray();
  for (const auto& n : c.notes) json.value(n);
  json.endArray();
  json.key("warnings").beginArray();
  for (const auto& w : c.warnings) json.value(w);
  json.endArray();
  const StepComparison& s = c.steps;
  json.key("steps").beginObject();
  for (auto [key, side] : {std::pair{"before", &s.before}, std::pair{"after", &s.after}}) {
    json.key(key).beginObject();
    json.field("steps", static_cast<uint64_t>(side->steps));
    json.key("median_ns");
    side->steps > 0 ? json.value(side->median_ns) : json.null();
    json.key("stddev_ns");
    side->steps > 1 ? json.value(side->stddev_ns) : json.null();
    writeOptional(json, "tokens_per_s", side->tokens_per_s);
    json.endObject();
  }
  json.field("verdict", stepVerdictName(s.verdict));
  json.field("noise_ns", s.noise_ns);
  json.endObject();
  json.key("metrics").beginObject();
  for (const auto& m : c.metrics) {
    json.key(m.name).beginObject();
    writeOptional(json, "before", m.before);
    writeOptional(json, "after", m.after);
    json.field("unit", report::unitName(m.unit));
    json.endObject();
  }
  json.endObject();
  json.key("kernels");
  writeActivities(json, c.kernels, true);
  json.key("ops");
  writeActivities(json, c.ops, false);
  json.key("tables").beginObject();
  for (const auto& keyed : c.tables) {
    json.key(keyed.id).beginObject();
    json.field("title", keyed.title);
    json.key("units").beginObject();
    for (size_t v = 0; v < keyed.value_fields.size(); ++v)
      json.field(keyed.value_fields[v], report::unitName(keyed.units[v]));
    json.endObject();
    json.key("rows").beginArray();
    for (const auto& row : keyed.rows) {
      json.beginObject();
      json.key("key").beginObject();
      for (size_t k = 0; k < keyed.key_fields.size(); ++k) json.field(keyed.key_fields[k], row.key[k]);
      json.endObject();
      json.field("change", changeName(row.change));
      for (auto [name, values] : {std::pair{"before", &row.before}, std::pair{"after", &row.after}}) {
        json.key(name).beginObject();
        for (size_t v = 0; v < keyed.value_fields.size(); ++v)
          writeOptional(json, keyed.value_fields[v].c_str(), (*values)[v]);
        json.endObject();
      }
      json.endObject();
    }
    json.endArray();
    json.endObject();
  }
  json.endObject();
  json.key("memory").beginObject();
  for (auto [key, side] : {std::pair{"before", &c.memory_before}, std::pair{"after", &c.memory_after}}) {
    json.key(key);
    if (!side->recorded) {
      json.null();
      continue;
    }
    json.beginObject().field("peak_bytes", side->peak_bytes);
    writeOptional(json, "peak_pct_of_device", side->peak_pct);
    json.field("rank", side->rank).field("phase", side->phase).endObject();
  }
  json.endObject();
  json.key("findings").beginArray();
  for (const auto& f : c.findings) {
    json.beginObject();
    json.field("status", f.change == Change::kGone ? "resolved" : f.change == Change::kNew ? "new" : "still");
    json.field("analysis", f.analysis).field("severity", report::severityName(f.severity));
    json.key("before");
    f.summary_before.empty() ? json.null() : json.value(f.summary_before);
    json.key("after");
    f.summary_after.empty() ? json.null() : json.value(f.summary_after);
    json.endObject();
  }
  json.endArray();
  json.endObject();
  out += "\n";
  return out;
}

}  // namespace gpuxray::compare
