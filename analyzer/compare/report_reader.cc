// Reading a JSON report back: nlohmann's parser (the project's JSON reader for whole documents; the
// trace importer streams with simdjson instead), then the fields the comparison uses.

#include "analyzer/compare/report_reader.h"

#include <fmt/core.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analyzer/errors.h"

namespace gpuxray::compare {
namespace {

using nlohmann::json;
using report::ResultValue;

ResultValue resultOf(const json& j) {
  switch (j.type()) {
    case json::value_t::number_integer:
      return ResultValue::integer(j.get<int64_t>());
    case json::value_t::number_unsigned:
      return ResultValue::integer(static_cast<int64_t>(j.get<uint64_t>()));
    case json::value_t::number_float:
      return ResultValue::number(j.get<double>());
    case json::value_t::string:
      return ResultValue::text(j.get<std::string>());
    case json::value_t::boolean:
      return ResultValue::flag(j.get<bool>());
    case json::value_t::object: {
      ResultValue object = ResultValue::object();
      for (const auto& [key, value] : j.items()) object.set(key, resultOf(value));
      return object;
    }
    case json::value_t::array: {
      ResultValue array = ResultValue::array();
      for (const auto& value : j) array.push(resultOf(value));
      return array;
    }
    default:
      return {};
  }
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
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot be read", path));
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    throw InputError(fmt::format("{}: not valid JSON (expected a gpuxray analyze --format json report)", path));
  if (!j.is_object() || j.value("schema", std::string()) != "gpuxray.analyze")
    throw InputError(fmt::format("{}: not a gpuxray analyze report (no \"schema\": \"gpuxray.analyze\")", path));
  auto version_field = j.find("schema_version");
  int64_t version = version_field != j.end() && version_field->is_number_integer() ? version_field->get<int64_t>() : 0;
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
    const json& run = j.at("run");
    report.run.run_id = run.value("run_id", std::string());
    report.run.world_size = run.value("world_size", 0);
    // Each list bound to a name first: a range-for over items() of a temporary would outlive it.
    const json ranks = run.value("ranks", json::array()), hosts = run.value("hosts", json::array());
    const json metrics = j.value("metrics", json::object()), findings = j.value("findings", json::array());
    const json results = j.value("results", json::object()), warnings = j.value("warnings", json::array());
    for (const auto& r : ranks) report.run.ranks.push_back(r.get<int32_t>());
    for (const auto& h : hosts) report.run.hosts.push_back(h.get<std::string>());
    report.run.records = run.value("records", uint64_t{0});
    report.run.span_ns = run.value("span_ns", int64_t{0});
    report.run.steps = run.value("steps", size_t{0});
    report.run.step_source = run.value("step_source", std::string());
    for (const auto& [name, m] : metrics.items()) {
      if (!m.contains("value") || !m["value"].is_number()) continue;  // null: not recorded
      report.metrics.push_back({name, m["value"].get<double>(), unitOf(m.value("unit", std::string())),
                                m.value("description", std::string())});
    }
    for (const auto& f : findings) {
      report::Finding finding;
      finding.analysis = f.value("analysis", std::string());
      finding.severity = severityOf(f.value("severity", std::string()));
      finding.cost_ns = f.value("cost_ns", 0.0);
      finding.summary = f.value("summary", std::string());
      if (f.contains("saves_ns") && f["saves_ns"].is_number()) finding.saves_ns = f["saves_ns"].get<double>();
      const json evidence = f.value("evidence", json::array());
      for (const auto& e : evidence) finding.evidence.push_back(e.get<std::string>());
      report.findings.push_back(std::move(finding));
    }
    for (const auto& [analysis, result] : results.items()) report.results.emplace_back(analysis, resultOf(result));
    for (const auto& w : warnings) report.warnings.push_back(w.get<std::string>());
    return report;
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: a gpuxray analyze report with a field of the wrong type: {}", path, e.what()));
  }
}

}  // namespace gpuxray::compare
