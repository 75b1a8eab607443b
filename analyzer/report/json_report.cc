// The report for machines (schema in docs/report-schema.md): numbers unformatted, in the unit
// each column names.

#include "analyzer/report/json_report.h"

#include <cmath>
#include <cstdio>
#include <string_view>

#include "analyzer/report/json_writer.h"
#include "analyzer/report/report.h"

namespace gpuxray::report {
namespace {

void writeCell(JsonWriter& json, const Cell& cell) {
  if (!cell.is_number) {
    json.value(cell.text);
  } else if (std::isfinite(cell.number) && cell.number == std::trunc(cell.number) && std::fabs(cell.number) < 9e15) {
    json.value(static_cast<int64_t>(cell.number));
  } else {
    json.value(cell.number);
  }
}

void writeSections(JsonWriter& json, const std::vector<Section>& sections) {
  json.key("sections").beginObject();
  for (const auto& section : sections) {
    json.key(section.id).beginObject();
    json.field("title", section.title);
    json.key("notes").beginArray();
    for (const auto& note : section.notes) json.value(note);
    json.endArray();
    json.key("tables").beginObject();
    for (const auto& table : section.tables) {
      json.key(table.id).beginObject();
      json.key("units").beginObject();
      for (size_t c = 0; c < table.columns.size(); ++c) {
        const char* unit = "";
        for (const auto& row : table.rows) {
          if (c < row.size() && row[c].is_number) {
            unit = unitName(row[c].unit);
            break;
          }
        }
        json.field(table.columns[c].key, unit);
      }
      json.endObject();
      json.key("rows").beginArray();
      for (const auto& row : table.rows) {
        json.beginObject();
        for (size_t c = 0; c < table.columns.size() && c < row.size(); ++c) {
          json.key(table.columns[c].key);
          writeCell(json, row[c]);
        }
        json.endObject();
      }
      json.endArray();
      json.endObject();
    }
    json.endObject();
    json.endObject();
  }
  json.endObject();
}

void writeResult(JsonWriter& json, const ResultValue& value) {
  switch (value.kind()) {
    case ResultValue::Kind::kNull:
      json.null();
      break;
    case ResultValue::Kind::kInteger:
      json.value(value.asInteger());
      break;
    case ResultValue::Kind::kNumber:
      json.value(value.asNumber());
      break;
    case ResultValue::Kind::kText:
      json.value(value.asText());
      break;
    case ResultValue::Kind::kBool:
      json.value(value.asBool());
      break;
    case ResultValue::Kind::kObject:
      json.beginObject();
      for (const auto& [key, field] : value.fields()) {
        json.key(key);
        writeResult(json, field);
      }
      json.endObject();
      break;
    case ResultValue::Kind::kArray:
      json.beginArray();
      for (const auto& item : value.items()) writeResult(json, item);
      json.endArray();
      break;
  }
}

}  // namespace

namespace {

void writeReport(const Report& report, std::string& out, JsonWriter& json) {
  json.beginObject();
  json.field("schema", "gpuxray.analyze");
  json.field("schema_version", static_cast<int64_t>(kReportSchemaVersion));

  const RunSummary& run = report.run;
  json.key("run").beginObject();
  json.field("run_id", run.run_id);
  json.field("world_size", run.world_size);
  json.key("ranks").beginArray();
  for (int32_t rank : run.ranks) json.value(rank);
  json.endArray();
  json.key("hosts").beginArray();
  for (const auto& host : run.hosts) json.value(host);
  json.endArray();
  json.field("records", run.records);
  json.field("span_ns", run.span_ns);
  json.field("steps", static_cast<uint64_t>(run.steps));
  json.field("step_source", run.step_source);
  if (!run.step_markers.empty()) {
    json.key("step_markers").beginArray();
    for (const auto& marker : run.step_markers) json.value(marker);
    json.endArray();
  }
  json.endObject();

  json.key("metrics").beginObject();
  for (const auto& m : report.metrics) {
    json.key(m.name).beginObject();
    Cell value = Cell::of(m.value, m.unit);
    json.key("value");
    writeCell(json, value);
    json.field("unit", unitName(m.unit));
    json.field("description", m.description);
    json.endObject();
  }
  json.endObject();

  json.key("findings").beginArray();
  for (const auto& f : report.findings) {
    json.beginObject();
    json.field("analysis", f.analysis);
    json.field("severity", severityName(f.severity));
    json.field("cost_ns", static_cast<int64_t>(std::llround(f.cost_ns)));
    if (f.saves_ns) json.field("saves_ns", static_cast<int64_t>(std::llround(*f.saves_ns)));
    json.field("summary", f.summary);
    json.key("evidence").beginArray();
    for (const auto& e : f.evidence) json.value(e);
    json.endArray();
    json.endObject();
  }
  json.endArray();

  writeSections(json, report.sections);

  json.key("results").beginObject();
  for (const auto& [analysis, result] : report.results) {
    json.key(analysis);
    writeResult(json, result);
  }
  json.endObject();

  json.key("warnings").beginArray();
  for (const auto& w : report.warnings) json.value(w);
  json.endArray();
  json.key("stats").beginArray();
  for (Stat stat : report.stats.nonZero()) {
    const StatInfo& info = statInfo(stat);
    json.beginObject();
    json.field("name", std::string(info.name));
    json.field("severity", statSeverityName(info.severity));
    json.field("value", report.stats.value(stat));
    json.field("description", std::string(info.description));
    json.key("warnings").beginArray();
    for (const auto& line : report.stats.linesOf(stat)) json.value(line);
    json.endArray();
    json.endObject();
  }
  json.endArray();
  json.key("violations").beginArray();
  for (const auto& v : report.violations) json.value(v);
  json.endArray();
  json.endObject();
  out += "\n";
}

}  // namespace

std::string renderJson(const Report& report) {
  std::string out;
  JsonWriter json(out);
  writeReport(report, out, json);
  return out;
}

void writeJson(const Report& report, std::FILE* file) {
  writeJson(report, [file](std::string_view text) { std::fwrite(text.data(), 1, text.size(), file); });
}

void writeJson(const Report& report, const std::function<void(std::string_view)>& write) {
  std::string out;
  JsonWriter json(out);
  json.spillTo(write, 1 << 20);
  writeReport(report, out, json);
  write(out);
}

std::string renderJson(const Document& document) {
  std::string out;
  JsonWriter json(out);
  json.beginObject();
  json.field("schema", document.schema);
  json.field("schema_version", static_cast<int64_t>(kDocumentSchemaVersion));
  json.field("title", document.title);
  json.key("notes").beginArray();
  for (const auto& note : document.notes) json.value(note);
  json.endArray();
  writeSections(json, document.sections);
  json.endObject();
  out += "\n";
  return out;
}

}  // namespace gpuxray::report
