// Reading a JSON report back: simdjson's DOM (a tape of about the document's size, where a tree of
// nodes would take several times it: a large run's report is hundreds of megabytes), then the fields
// the comparison uses.

#include "analyzer/compare/report_reader.h"

#include <fmt/core.h>
#include <simdjson.h>

#include <fstream>
#include <string_view>

#include "analyzer/errors.h"

namespace gpuxray::compare {
namespace {

using report::ResultValue;
namespace dom = simdjson::dom;

// A field the comparison reads was of another type than the schema's.
struct WrongType {
  std::string field;
};

ResultValue resultOf(dom::element e) {
  switch (e.type()) {
    case dom::element_type::INT64:
      return ResultValue::integer(e.get_int64().value_unsafe());
    case dom::element_type::UINT64:
      return ResultValue::integer(static_cast<int64_t>(e.get_uint64().value_unsafe()));
    case dom::element_type::DOUBLE:
      return ResultValue::number(e.get_double().value_unsafe());
    case dom::element_type::STRING:
      return ResultValue::text(std::string(e.get_string().value_unsafe()));
    case dom::element_type::BOOL:
      return ResultValue::flag(e.get_bool().value_unsafe());
    case dom::element_type::OBJECT: {
      ResultValue object = ResultValue::object();
      dom::object members = e.get_object().value_unsafe();
      for (dom::key_value_pair member : members) object.set(std::string(member.key), resultOf(member.value));
      return object;
    }
    case dom::element_type::ARRAY: {
      ResultValue array = ResultValue::array();
      dom::array items = e.get_array().value_unsafe();
      for (dom::element item : items) array.push(resultOf(item));
      return array;
    }
    default:
      return {};
  }
}

// Members of `parent`, each of the type asked; absent ones give the default.
std::string textOf(dom::object parent, std::string_view name) {
  dom::element e;
  if (parent[name].get(e) != simdjson::SUCCESS || e.is_null()) return {};
  std::string_view text;
  if (e.get_string().get(text) != simdjson::SUCCESS) throw WrongType{std::string(name)};
  return std::string(text);
}

template <typename T>
T numberElement(dom::element e, std::string_view field) {
  if (e.is_int64()) return static_cast<T>(e.get_int64().value_unsafe());
  if (e.is_uint64()) return static_cast<T>(e.get_uint64().value_unsafe());
  if (e.is_double()) return static_cast<T>(e.get_double().value_unsafe());
  throw WrongType{std::string(field)};
}

template <typename T>
T numberOf(dom::object parent, std::string_view name, T fallback = T{}) {
  dom::element e;
  if (parent[name].get(e) != simdjson::SUCCESS || e.is_null()) return fallback;
  return numberElement<T>(e, name);
}

// Calls `each` on every element of array `name` (none when it is absent).
template <typename Each>
void forEachIn(dom::object parent, std::string_view name, Each&& each) {
  dom::element e;
  if (parent[name].get(e) != simdjson::SUCCESS || e.is_null()) return;
  dom::array array;
  if (e.get_array().get(array) != simdjson::SUCCESS) throw WrongType{std::string(name)};
  for (dom::element element : array) each(element);
}

// Calls `each` on every member of object `name` (none when it is absent).
template <typename Each>
void forEachMember(dom::object parent, std::string_view name, Each&& each) {
  dom::element e;
  if (parent[name].get(e) != simdjson::SUCCESS || e.is_null()) return;
  dom::object object;
  if (e.get_object().get(object) != simdjson::SUCCESS) throw WrongType{std::string(name)};
  for (dom::key_value_pair member : object) each(member.key, member.value);
}

std::string textElement(dom::element e, std::string_view field) {
  std::string_view text;
  if (e.get_string().get(text) != simdjson::SUCCESS) throw WrongType{std::string(field)};
  return std::string(text);
}

report::Unit unitOf(const std::string& name) {
  using report::Unit;
  for (Unit unit : {Unit::kNanoseconds, Unit::kMilliseconds, Unit::kBytes, Unit::kPercent, Unit::kBytesPerSecond,
                    Unit::kCount, Unit::kRatio}) {
    if (name == report::unitName(unit)) return unit;
  }
  return Unit::kNone;
}

report::Severity severityOf(const std::string& name) {
  if (name == "critical") return report::Severity::kCritical;
  if (name == "warning") return report::Severity::kWarning;
  return report::Severity::kInfo;
}

}  // namespace

bool isAnalyzeReport(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[256] = {};
  in.read(head, sizeof head);
  return std::string(head, static_cast<size_t>(in.gcount())).find("\"gpuxray.analyze\"") != std::string::npos;
}

report::Report readAnalyzeReport(const std::string& path) {
  simdjson::padded_string text;
  if (simdjson::padded_string::load(path).get(text) != simdjson::SUCCESS)
    throw InputError(fmt::format("{}: cannot be read", path));
  dom::parser parser;
  dom::element document;
  dom::object j;
  if (parser.parse(text).get(document) != simdjson::SUCCESS)
    throw InputError(fmt::format("{}: not valid JSON (expected a gpuxray analyze --format json report)", path));
  std::string_view schema;
  if (document.get_object().get(j) != simdjson::SUCCESS || j["schema"].get_string().get(schema) != simdjson::SUCCESS ||
      schema != "gpuxray.analyze")
    throw InputError(fmt::format("{}: not a gpuxray analyze report (no \"schema\": \"gpuxray.analyze\")", path));
  int64_t version = 0;
  if (j["schema_version"].get_int64().get(version) != simdjson::SUCCESS) version = 0;
  if (version != report::kReportSchemaVersion) {
    throw InputError(fmt::format(
        "{}: report schema version {}, which cannot be compared: this gpuxray compares version {} reports ({}); "
        "analyze the run again with this gpuxray",
        path, version, report::kReportSchemaVersion,
        version < report::kReportSchemaVersion ? "older ones have no typed results"
                                               : "it was written by a newer gpuxray"));
  }
  try {
    report::Report report;
    if (dom::element run_element; j["run"].get(run_element) == simdjson::SUCCESS) {
      dom::object run;
      if (run_element.get_object().get(run) != simdjson::SUCCESS) throw WrongType{"run"};
      report.run.run_id = textOf(run, "run_id");
      report.run.world_size = numberOf<int32_t>(run, "world_size");
      forEachIn(run, "ranks", [&](dom::element r) { report.run.ranks.push_back(numberElement<int32_t>(r, "ranks")); });
      forEachIn(run, "hosts", [&](dom::element h) { report.run.hosts.push_back(textElement(h, "hosts")); });
      report.run.records = numberOf<uint64_t>(run, "records");
      report.run.span_ns = numberOf<int64_t>(run, "span_ns");
      report.run.steps = numberOf<size_t>(run, "steps");
      report.run.step_source = textOf(run, "step_source");
      forEachIn(run, "step_markers",
                [&](dom::element m) { report.run.step_markers.push_back(textElement(m, "step_markers")); });
    }
    forEachMember(j, "metrics", [&](std::string_view name, dom::element element) {
      dom::object m;
      if (element.get_object().get(m) != simdjson::SUCCESS) throw WrongType{std::string(name)};
      dom::element value;
      if (m["value"].get(value) != simdjson::SUCCESS || !value.is_number()) return;  // null: not recorded
      report.metrics.push_back(
          {std::string(name), numberOf<double>(m, "value"), unitOf(textOf(m, "unit")), textOf(m, "description")});
    });
    forEachIn(j, "findings", [&](dom::element element) {
      dom::object f;
      if (element.get_object().get(f) != simdjson::SUCCESS) throw WrongType{"findings"};
      report::Finding finding;
      finding.analysis = textOf(f, "analysis");
      finding.severity = severityOf(textOf(f, "severity"));
      finding.cost_ns = numberOf<double>(f, "cost_ns");
      finding.summary = textOf(f, "summary");
      if (dom::element saves; f["saves_ns"].get(saves) == simdjson::SUCCESS && saves.is_number())
        finding.saves_ns = numberOf<double>(f, "saves_ns");
      forEachIn(f, "evidence", [&](dom::element e) { finding.evidence.push_back(textElement(e, "evidence")); });
      report.findings.push_back(std::move(finding));
    });
    forEachMember(j, "results", [&](std::string_view analysis, dom::element result) {
      report.results.emplace_back(std::string(analysis), resultOf(result));
    });
    forEachIn(j, "warnings", [&](dom::element w) { report.warnings.push_back(textElement(w, "warnings")); });
    return report;
  } catch (const WrongType& wrong) {
    throw InputError(
        fmt::format("{}: a gpuxray analyze report with a field of the wrong type: \"{}\"", path, wrong.field));
  }
}

}  // namespace gpuxray::compare
