#include "analyzer/report/html_report.h"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>
#include <optional>
#include <vector>

#include "analyzer/errors.h"
#include "analyzer/report/report.h"
#include "analyzer/report/report_bundle.h"

namespace gpuxray::report {
namespace {

// The document without the indentation renderJson gives it for people (a third of a large report),
// and safe inside <script>: its text ends at the first "</script" whatever the quoting, and "<!--"
// changes how the parser reads on. JSON holds '<' only inside strings, where \u003c means the same.
std::string compactJsonForScript(std::string_view json) {
  std::string compact;
  compact.reserve(json.size() / 2);
  bool in_string = false;
  bool escaped = false;
  for (char c : json) {
    if (in_string) {
      if (c == '<')
        compact += "\\u003c";
      else
        compact += c;
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '"') in_string = true;
    compact += c;
  }
  return compact;
}

std::string escapeHtmlText(std::string_view text) {
  std::string escaped;
  for (char c : text) {
    switch (c) {
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '&':
        escaped += "&amp;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

// Memory curves kept (the devices with the highest peaks), ranks of the step overview and pipelines:
// as many as the page draws.
constexpr size_t kPageMemoryCurves = 32;
constexpr size_t kPageStepRanks = 256;
constexpr size_t kPagePipelines = 2;
// Exposed-communication stretches per rank kept when the step overview is cut (the longest): on
// 256 lanes of 6 px, 64 a lane were 1.6 MB of a 1024-rank page and most of the view's drawing.
constexpr size_t kPageExposedPerRank = 16;

using FieldEdit = std::function<std::optional<ResultValue>(const std::string& key, const ResultValue& value)>;

// A copy of an object with some of its fields replaced (edit returns the replacement, or nothing).
ResultValue editFields(const ResultValue& object, const FieldEdit& edit) {
  ResultValue copy = ResultValue::object();
  for (const auto& [key, value] : object.fields()) {
    std::optional<ResultValue> replaced = edit(key, value);
    copy.set(key, replaced ? std::move(*replaced) : value);
  }
  return copy;
}

int64_t integerField(const ResultValue& object, const std::string& key) {
  const ResultValue* value = object.find(key);
  return value != nullptr && value->kind() == ResultValue::Kind::kInteger ? value->asInteger() : 0;
}

// Keeps the `curve` of the kPageMemoryCurves devices with the highest peaks; the others' is null.
std::optional<ResultValue> fitDevices(const ResultValue& devices, std::vector<std::string>& left_out,
                                      const char* what) {
  const auto& items = devices.items();
  if (items.size() <= kPageMemoryCurves) return std::nullopt;
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return integerField(items[a], "peak_bytes") > integerField(items[b], "peak_bytes");
  });
  std::vector<bool> kept(items.size(), false);
  for (size_t i = 0; i < kPageMemoryCurves; ++i) kept[order[i]] = true;
  ResultValue fitted = ResultValue::array();
  for (size_t i = 0; i < items.size(); ++i) {
    if (kept[i])
      fitted.push(items[i]);
    else
      fitted.push(editFields(items[i], [](const std::string& key, const ResultValue&) -> std::optional<ResultValue> {
        if (key == "curve") return ResultValue();
        return std::nullopt;
      }));
  }
  left_out.push_back(fmt::format("{} of {} devices' {} curves (the page keeps those of the {} highest peaks)",
                                 items.size() - kPageMemoryCurves, items.size(), what, kPageMemoryCurves));
  return fitted;
}

std::optional<ResultValue> firstItems(const ResultValue& array, size_t keep, std::vector<std::string>& left_out,
                                      const std::string& what) {
  const auto& items = array.items();
  if (items.size() <= keep) return std::nullopt;
  ResultValue fitted = ResultValue::array();
  for (size_t i = 0; i < keep; ++i) fitted.push(items[i]);
  left_out.push_back(
      fmt::format("{} of {} {} (the page draws the first {})", items.size() - keep, items.size(), what, keep));
  return fitted;
}

// `keep` of the array's items spread evenly over it (item floor(i * n / keep) for i < keep), so that a
// 1024-rank step overview shows every host and every pipeline stage, not only the first 32 hosts.
std::optional<ResultValue> spreadItems(const ResultValue& array, size_t keep, std::vector<std::string>& left_out,
                                       const std::string& what) {
  const auto& items = array.items();
  if (items.size() <= keep) return std::nullopt;
  ResultValue fitted = ResultValue::array();
  for (size_t i = 0; i < keep; ++i) fitted.push(items[i * items.size() / keep]);
  left_out.push_back(fmt::format("{} of {} {} (the page draws {} spread evenly over them)", items.size() - keep,
                                 items.size(), what, keep));
  return fitted;
}

int64_t spanLength(const ResultValue& mark) {
  const ResultValue* span = mark.find("span_ns");
  if (span == nullptr || span->items().size() != 2) return 0;
  return span->items()[1].asInteger() - span->items()[0].asInteger();
}

// A rank's lanes with only its kPageExposedPerRank longest exposed stretches (still in time order),
// the others counted in exposed_left_out.
ResultValue fewerExposedMarks(const ResultValue& rank, size_t& dropped) {
  const ResultValue* exposed = rank.find("exposed");
  if (exposed == nullptr || exposed->items().size() <= kPageExposedPerRank) return rank;
  const auto& marks = exposed->items();
  std::vector<size_t> order(marks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return spanLength(marks[a]) > spanLength(marks[b]); });
  std::vector<bool> kept(marks.size(), false);
  for (size_t i = 0; i < kPageExposedPerRank; ++i) kept[order[i]] = true;
  ResultValue fewer = ResultValue::array();
  for (size_t i = 0; i < marks.size(); ++i)
    if (kept[i]) fewer.push(marks[i]);
  int64_t left_out = static_cast<int64_t>(marks.size() - kPageExposedPerRank);
  dropped += static_cast<size_t>(left_out);
  return editFields(rank, [&](const std::string& key, const ResultValue& value) -> std::optional<ResultValue> {
    if (key == "exposed") return fewer;
    if (key == "exposed_left_out") return ResultValue::integer(value.asInteger() + left_out);
    return std::nullopt;
  });
}

// The step overview's ranks spread over the run, each with its longest exposed stretches.
std::optional<ResultValue> fitStepRanks(const ResultValue& ranks, std::vector<std::string>& left_out) {
  std::optional<ResultValue> spread = spreadItems(ranks, kPageStepRanks, left_out, "ranks of the step overview");
  if (!spread) return std::nullopt;
  ResultValue fitted = ResultValue::array();
  size_t dropped = 0;
  for (const ResultValue& rank : spread->items()) fitted.push(fewerExposedMarks(rank, dropped));
  if (dropped > 0)
    left_out.push_back(
        fmt::format("{} of the drawn ranks' exposed-communication stretches (the page keeps each rank's {} longest)",
                    dropped, kPageExposedPerRank));
  return fitted;
}

}  // namespace

Report fitForPage(const Report& report) {
  Report fitted = report;
  std::vector<std::string> left_out;
  for (auto& [analysis, result] : fitted.results) {
    if (result.kind() != ResultValue::Kind::kObject) continue;
    if (analysis == "memory" || analysis == "memory_categories") {
      const char* what = analysis == "memory" ? "memory" : "memory-by-category";
      result = editFields(result, [&](const std::string& key, const ResultValue& value) {
        return key == "devices" ? fitDevices(value, left_out, what) : std::nullopt;
      });
    } else if (analysis == "step_overview") {
      result = editFields(result, [&](const std::string& key, const ResultValue& value) {
        return key == "ranks" ? fitStepRanks(value, left_out) : std::nullopt;
      });
    } else if (analysis == "pipeline_bubbles") {
      result = editFields(result, [&](const std::string& key, const ResultValue& value) {
        return key == "pipelines" ? firstItems(value, kPagePipelines, left_out, "pipelines' timelines") : std::nullopt;
      });
    }
  }
  if (!left_out.empty()) {
    // The text report's tables, which the page does not draw (it reads the typed results): on a
    // 1024-rank run they are 1.7 MB of the page's 18.
    size_t rows = 0;
    for (auto& section : fitted.sections) {
      for (const auto& table : section.tables) rows += table.rows.size();
      section.tables.clear();
    }
    if (rows > 0)
      left_out.push_back(fmt::format("the text report's tables ({} rows; `gpuxray analyze` prints them)", rows));
    ResultValue lines = ResultValue::array();
    for (auto& line : left_out) lines.push(ResultValue::text(std::move(line)));
    fitted.results.emplace_back("html_page", ResultValue::object().set("left_out", std::move(lines)));
  }
  return fitted;
}

bool htmlReportAvailable() {
  return !reportBundleScript().empty();
}

std::string htmlReportUnavailableReason() {
  return "this gpuxray was built without the HTML report's script (no Node.js or web/node_modules at build time); "
         "run scripts/setup.sh, which installs Node.js and web/'s packages (npm ci) and rebuilds";
}

std::string renderHtml(std::string_view json_document, std::string_view title) {
  if (!htmlReportAvailable()) throw InputError(htmlReportUnavailableReason());
  std::string page;
  page.reserve(json_document.size() + reportBundleScript().size() + 4096);
  page += "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  page += fmt::format("<title>{}</title>\n", escapeHtmlText(title));
  page += "</head>\n<body>\n<div id=\"app\"><noscript>This report needs JavaScript.</noscript></div>\n";
  page += fmt::format("<script type=\"application/json\" id=\"gpuxray-data\" data-version=\"{}\">", kHtmlDataVersion);
  page += compactJsonForScript(json_document);
  page += "</script>\n<script>\n";
  page += reportBundleScript();
  page += "\n</script>\n</body>\n</html>\n";
  return page;
}

void writeHtml(const std::string& path, std::string_view json_document, std::string_view title) {
  std::string page = renderHtml(json_document, title);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (file) file.write(page.data(), static_cast<std::streamsize>(page.size()));
  if (file) file.close();
  if (!file) throw InputError(fmt::format("{}: cannot write the HTML report: {}", path, std::strerror(errno)));
}

}  // namespace gpuxray::report
