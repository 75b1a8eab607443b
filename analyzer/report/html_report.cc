#include "analyzer/report/html_report.h"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>
#include <vector>

#include "analyzer/errors.h"
#include "analyzer/report/json_report.h"
#include "analyzer/report/report.h"
#include "analyzer/report/report_bundle.h"

namespace gpuxray::report {
namespace {

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
// Per-step figures of every rank (the time breakdown's, the overlap's and the stragglers'), which no view
// draws: kept up to this many rank-steps in each (1,024 ranks x 502 steps made them 220 of a 207 MB page).
constexpr size_t kPageRankSteps = 65'536;

int64_t integerField(const ResultValue& object, const std::string& key) {
  const ResultValue* value = object.find(key);
  return value != nullptr && value->kind() == ResultValue::Kind::kInteger ? value->asInteger() : 0;
}

// Keeps the `curve` of the kPageMemoryCurves devices with the highest peaks; the others' is null.
void fitDevices(ResultValue& devices, std::vector<std::string>& left_out, const char* what) {
  auto& items = devices.mutableItems();
  if (items.size() <= kPageMemoryCurves) return;
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return integerField(items[a], "peak_bytes") > integerField(items[b], "peak_bytes");
  });
  size_t cut = 0;
  for (size_t i = kPageMemoryCurves; i < order.size(); ++i) {
    ResultValue* curve = items[order[i]].find("curve");
    if (curve == nullptr || curve->kind() == ResultValue::Kind::kNull) continue;  // the JSON left it out already
    *curve = ResultValue();
    ++cut;
  }
  if (cut > 0)
    left_out.push_back(fmt::format("{} of {} devices' {} curves (the page keeps those of the {} highest peaks)", cut,
                                   items.size(), what, kPageMemoryCurves));
}

size_t itemCount(const ResultValue* array) {
  return array != nullptr && array->kind() == ResultValue::Kind::kArray ? array->items().size() : 0;
}

// Each of `holders`' list `key` (per rank, its steps; or per step, with `count_key`, its ranks), null past
// kPageRankSteps rank-steps in all.
void dropRankSteps(std::vector<ResultValue*> holders, const char* key, const char* count_key,
                   std::vector<std::string>& left_out, const std::string& what) {
  size_t rank_steps = 0;
  for (ResultValue* holder : holders) {
    const ResultValue* list = holder->find(key);
    if (count_key == nullptr) {
      rank_steps += itemCount(list);
    } else if (list != nullptr && list->kind() == ResultValue::Kind::kArray) {
      for (const ResultValue& item : list->items()) rank_steps += itemCount(item.find(count_key));
    }
  }
  if (rank_steps <= kPageRankSteps) return;
  for (ResultValue* holder : holders) {
    if (ResultValue* list = holder->find(key)) *list = ResultValue();
  }
  left_out.push_back(fmt::format("{}, per rank and step ({} rank-steps; no view draws them)", what, rank_steps));
}

void firstItems(ResultValue& array, size_t keep, std::vector<std::string>& left_out, const std::string& what) {
  auto& items = array.mutableItems();
  if (items.size() <= keep) return;
  left_out.push_back(
      fmt::format("{} of {} {} (the page draws the first {})", items.size() - keep, items.size(), what, keep));
  items.resize(keep);
}

// `keep` of the array's items spread evenly over it (item floor(i * n / keep) for i < keep), so that a
// 1024-rank step overview shows every host and every pipeline stage, not only the first 32 hosts.
bool spreadItems(ResultValue& array, size_t keep, std::vector<std::string>& left_out, const std::string& what) {
  auto& items = array.mutableItems();
  if (items.size() <= keep) return false;
  std::vector<ResultValue> spread;
  spread.reserve(keep);
  for (size_t i = 0; i < keep; ++i) spread.push_back(std::move(items[i * items.size() / keep]));
  left_out.push_back(fmt::format("{} of {} {} (the page draws {} spread evenly over them)", items.size() - keep,
                                 items.size(), what, keep));
  items = std::move(spread);
  return true;
}

int64_t spanLength(const ResultValue& mark) {
  const ResultValue* span = mark.find("span_ns");
  if (span == nullptr || span->items().size() != 2) return 0;
  return span->items()[1].asInteger() - span->items()[0].asInteger();
}

// Leaves a rank's lanes only its kPageExposedPerRank longest exposed stretches (still in time order),
// the others counted in exposed_left_out. Returns how many it left out.
size_t fewerExposedMarks(ResultValue& rank) {
  ResultValue* exposed = rank.find("exposed");
  if (exposed == nullptr || exposed->items().size() <= kPageExposedPerRank) return 0;
  auto& marks = exposed->mutableItems();
  std::vector<size_t> order(marks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return spanLength(marks[a]) > spanLength(marks[b]); });
  std::vector<bool> kept(marks.size(), false);
  for (size_t i = 0; i < kPageExposedPerRank; ++i) kept[order[i]] = true;
  std::vector<ResultValue> fewer;
  for (size_t i = 0; i < marks.size(); ++i)
    if (kept[i]) fewer.push_back(std::move(marks[i]));
  const size_t left_out = marks.size() - kPageExposedPerRank;
  marks = std::move(fewer);
  if (ResultValue* count = rank.find("exposed_left_out"))
    *count = ResultValue::integer(count->asInteger() + static_cast<int64_t>(left_out));
  return left_out;
}

// The step overview's ranks spread over the run, each with its longest exposed stretches.
void fitStepRanks(ResultValue& ranks, std::vector<std::string>& left_out) {
  if (!spreadItems(ranks, kPageStepRanks, left_out, "ranks of the step overview")) return;
  size_t dropped = 0;
  for (ResultValue& rank : ranks.mutableItems()) dropped += fewerExposedMarks(rank);
  if (dropped > 0)
    left_out.push_back(
        fmt::format("{} of the drawn ranks' exposed-communication stretches (the page keeps each rank's {} longest)",
                    dropped, kPageExposedPerRank));
}

// The document without the indentation renderJson gives it for people (a third of a large report),
// and safe inside <script>: its text ends at the first "</script" whatever the quoting, and "<!--"
// changes how the parser reads on. JSON holds '<' only inside strings, where \u003c means the same.
// Fed piece by piece as the JSON writer hands them on (its state carries over).
class ScriptJsonFilter {
 public:
  void feed(std::string_view json, std::string& out) {
    for (char c : json) {
      if (in_string_) {
        if (c == '<')
          out += "\\u003c";
        else
          out += c;
        if (escaped_)
          escaped_ = false;
        else if (c == '\\')
          escaped_ = true;
        else if (c == '"')
          in_string_ = false;
        continue;
      }
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
      if (c == '"') in_string_ = true;
      out += c;
    }
  }

 private:
  bool in_string_ = false;
  bool escaped_ = false;
};

std::string pageHead(std::string_view title) {
  std::string head = "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  head += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  head += fmt::format("<title>{}</title>\n", escapeHtmlText(title));
  head += "</head>\n<body>\n<div id=\"app\"><noscript>This report needs JavaScript.</noscript></div>\n";
  head += fmt::format("<script type=\"application/json\" id=\"gpuxray-data\" data-version=\"{}\">", kHtmlDataVersion);
  return head;
}

std::string pageTail() {
  std::string tail = "</script>\n<script>\n";
  tail += reportBundleScript();
  tail += "\n</script>\n</body>\n</html>\n";
  return tail;
}

}  // namespace

Report fitForPage(Report report) {
  std::vector<std::string> left_out;
  for (auto& [analysis, result] : report.results) {
    if (result.kind() != ResultValue::Kind::kObject) continue;
    if (analysis == "memory" || analysis == "memory_categories") {
      if (ResultValue* devices = result.find("devices"))
        fitDevices(*devices, left_out, analysis == "memory" ? "memory" : "memory-by-category");
    } else if (analysis == "step_overview") {
      if (ResultValue* ranks = result.find("ranks")) fitStepRanks(*ranks, left_out);
    } else if (analysis == "pipeline_bubbles") {
      if (ResultValue* pipelines = result.find("pipelines"))
        firstItems(*pipelines, kPagePipelines, left_out, "pipelines' timelines");
    } else if (analysis == "time_breakdown" || analysis == "overlap") {
      std::vector<ResultValue*> ranks;
      if (ResultValue* list = result.find("ranks"); list != nullptr && list->kind() == ResultValue::Kind::kArray) {
        for (ResultValue& rank : list->mutableItems()) ranks.push_back(&rank);
      }
      dropRankSteps(ranks, "steps", nullptr, left_out,
                    analysis == "overlap" ? "the overlap's figures" : "the time breakdown's figures");
    } else if (analysis == "stragglers") {
      dropRankSteps({&result}, "steps", "ranks", left_out, "the stragglers' waits");
    }
  }
  if (!left_out.empty()) {
    // The text report's tables, which the page does not draw (it reads the typed results): on a
    // 1024-rank run they are 1.7 MB of the page's 18.
    size_t rows = 0;
    for (auto& section : report.sections) {
      for (const auto& table : section.tables) rows += table.rows.size();
      section.tables.clear();
    }
    if (rows > 0)
      left_out.push_back(fmt::format("the text report's tables ({} rows; `gpuxray analyze` prints them)", rows));
    ResultValue lines = ResultValue::array();
    for (auto& line : left_out) lines.push(ResultValue::text(std::move(line)));
    report.results.emplace_back("html_page", ResultValue::object().set("left_out", std::move(lines)));
  }
  return report;
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
  std::string page = pageHead(title);
  page.reserve(json_document.size() + reportBundleScript().size() + 4096);
  ScriptJsonFilter filter;
  filter.feed(json_document, page);
  page += pageTail();
  return page;
}

namespace {

void writeHtmlFile(const std::string& path, std::string_view title,
                   const std::function<void(const std::function<void(std::string_view)>&)>& write_document) {
  if (!htmlReportAvailable()) throw InputError(htmlReportUnavailableReason());
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  auto put = [&](std::string_view text) {
    if (file) file.write(text.data(), static_cast<std::streamsize>(text.size()));
  };
  put(pageHead(title));
  ScriptJsonFilter filter;
  std::string compact;
  write_document([&](std::string_view json) {
    compact.clear();
    filter.feed(json, compact);
    put(compact);
  });
  put(pageTail());
  if (file) file.close();
  if (!file) throw InputError(fmt::format("{}: cannot write the HTML report: {}", path, std::strerror(errno)));
}

}  // namespace

void writeHtml(const std::string& path, std::string_view json_document, std::string_view title) {
  writeHtmlFile(path, title, [&](const std::function<void(std::string_view)>& sink) { sink(json_document); });
}

void writeHtml(const std::string& path, Report report, std::string_view title) {
  const Report fitted = fitForPage(std::move(report));
  writeHtmlFile(path, title, [&](const std::function<void(std::string_view)>& sink) { writeJson(fitted, sink); });
}

}  // namespace gpuxray::report
