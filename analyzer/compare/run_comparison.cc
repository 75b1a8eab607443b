// Comparing two runs' reports on their typed results and metrics.

#include "analyzer/compare/run_comparison.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <string_view>

#include "analyzer/report/units.h"

namespace gpuxray::compare {

using report::ResultValue;

const char* changeName(Change change) {
  switch (change) {
    case Change::kSame:
      return "same";
    case Change::kChanged:
      return "changed";
    case Change::kNew:
      return "new";
    case Change::kGone:
      return "gone";
  }
  return "same";
}

const char* stepVerdictName(StepVerdict verdict) {
  switch (verdict) {
    case StepVerdict::kNoSteps:
      return "no_steps";
    case StepVerdict::kOneStep:
      return "one_step";
    case StepVerdict::kNoChange:
      return "no_change";
    case StepVerdict::kWithinNoise:
      return "within_noise";
    case StepVerdict::kFaster:
      return "faster";
    case StepVerdict::kSlower:
      return "slower";
  }
  return "no_steps";
}

std::string normalizeKernelName(const std::string& name) {
  std::string s = name;
  // The parameter list: the last top-level "(...)" that ends the name.
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      if (s[i] == '(' && --depth == 0) {
        // A parameter list follows the name directly: "Memcpy DtoD (Device -> Device)" keeps its words.
        if (i > 0 && !std::isspace(static_cast<unsigned char>(s[i - 1]))) s.erase(i);
        break;
      }
    }
  }
  if (s.starts_with("void ")) s.erase(0, 5);
  std::string out;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out.empty() ? name : out;
}

namespace {

// "rank 4's step" -> "rank #'s step", "(ranks 8, 9, 10-15)" -> "(ranks #)".
std::string withoutRankNumbers(const std::string& s) {
  std::string out;
  auto digit = [&](size_t i) { return i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); };
  size_t i = 0;
  while (i < s.size()) {
    bool word = s.compare(i, 4, "rank") == 0 && (i == 0 || !std::isalnum(static_cast<unsigned char>(s[i - 1])));
    size_t after = i + 4 + (word && s.compare(i + 4, 1, "s") == 0 ? 1 : 0);
    if (!word || s.compare(after, 1, " ") != 0 || !digit(after + 1)) {
      out += s[i++];
      continue;
    }
    out += s.substr(i, after + 1 - i) + "#";
    size_t j = after + 1;
    while (true) {
      while (digit(j)) ++j;
      size_t separator = s.compare(j, 2, ", ") == 0      ? 2
                         : s.compare(j, 1, "-") == 0     ? 1
                         : s.compare(j, 5, " and ") == 0 ? 5
                                                         : 0;
      if (separator == 0 || !digit(j + separator)) break;
      j += separator;
    }
    i = j;
  }
  return out;
}

}  // namespace

std::string findingKey(const report::Finding& finding, RankNumbers ranks) {
  const std::string s = ranks == RankNumbers::kCompared ? finding.summary : withoutRankNumbers(finding.summary);
  std::string key = finding.analysis + ": ";
  size_t i = 0;
  while (i < s.size()) {
    bool starts_number = std::isdigit(static_cast<unsigned char>(s[i])) &&
                         (i == 0 || !(std::isalnum(static_cast<unsigned char>(s[i - 1])) || s[i - 1] == '_'));
    if (!starts_number) {
      key += s[i++];
      continue;
    }
    size_t j = i;
    bool decimal = false;
    while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == ',' || s[j] == '.')) {
      if (s[j] == '.' && j + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[j + 1]))) decimal = true;
      ++j;
    }
    while (j > i && (s[j - 1] == ',' || s[j - 1] == '.')) --j;
    // A unit goes with its number ("986 ms" and "1.01 s" are one measurement); a count keeps its noun
    // ("last into 1182 of 1251 collectives", "(data, 8 ranks)").
    static constexpr std::string_view kUnits[] = {" ns",   " us",   " µs",   " ms",  " s",   " B",
                                                  " KiB",  " MiB",  " GiB",  " TiB", " B/s", " kB/s",
                                                  " MB/s", " GB/s", " TB/s", " %",   "%",    "x"};
    static constexpr std::string_view kCounted[] = {" of ", " collectives", " ranks"};
    auto ends_word = [&](size_t at) {
      return at >= s.size() || !(std::isalnum(static_cast<unsigned char>(s[at])) || s[at] == '/');
    };
    size_t unit_end = j;
    for (std::string_view unit : kUnits) {
      if (s.compare(j, unit.size(), unit) == 0 && ends_word(j + unit.size()))
        unit_end = std::max(unit_end, j + unit.size());
    }
    bool counted = std::any_of(std::begin(kCounted), std::end(kCounted),
                               [&](std::string_view noun) { return s.compare(j, noun.size(), noun) == 0; });
    bool measured = decimal || counted || unit_end > j;
    key += measured ? std::string("#") : s.substr(i, j - i);
    j = unit_end;
    i = j;
  }
  return key;
}

namespace {

const ResultValue* resultOf(const report::Report& report, const std::string& analysis) {
  for (const auto& [id, value] : report.results) {
    if (id == analysis) return &value;
  }
  return nullptr;
}

double numberOf(const ResultValue* value, const char* key, double fallback = 0) {
  const ResultValue* field = value != nullptr ? value->find(key) : nullptr;
  if (field == nullptr) return fallback;
  if (field->kind() == ResultValue::Kind::kInteger) return static_cast<double>(field->asInteger());
  if (field->kind() == ResultValue::Kind::kNumber) return field->asNumber();
  return fallback;
}

bool isNumber(const ResultValue* value, const char* key) {
  const ResultValue* field = value != nullptr ? value->find(key) : nullptr;
  return field != nullptr &&
         (field->kind() == ResultValue::Kind::kInteger || field->kind() == ResultValue::Kind::kNumber);
}

std::string textOf(const ResultValue* value, const char* key) {
  const ResultValue* field = value != nullptr ? value->find(key) : nullptr;
  return field != nullptr && field->kind() == ResultValue::Kind::kText ? field->asText() : std::string();
}

const std::vector<ResultValue>& itemsOf(const ResultValue* value, const char* key) {
  static const std::vector<ResultValue> none;
  const ResultValue* field = value != nullptr ? value->find(key) : nullptr;
  return field != nullptr ? field->items() : none;
}

StepSide stepSideOf(const report::Report& report) {
  StepSide side;
  const ResultValue* steps = resultOf(report, "step_times");
  const auto& items = itemsOf(steps, "steps");
  side.steps = items.size();
  if (!items.empty()) {
    side.first_step = static_cast<int64_t>(numberOf(&items.front(), "step"));
    side.last_step = static_cast<int64_t>(numberOf(&items.back(), "step"));
  }
  side.median_ns = static_cast<int64_t>(numberOf(steps, "median_ns"));
  side.stddev_ns = numberOf(steps, "stddev_ns");
  if (isNumber(steps, "tokens_per_s")) side.tokens_per_s = numberOf(steps, "tokens_per_s");
  return side;
}

std::set<int32_t> rankSet(const report::Report& report) {
  return {report.run.ranks.begin(), report.run.ranks.end()};
}

void matchRanks(const ComparisonSide& before, const ComparisonSide& after, RunComparison& out) {
  for (const ComparisonSide* side : {&before, &after}) {
    const auto& run = side->report.run;
    if (run.world_size > 0 && run.ranks.size() < static_cast<size_t>(run.world_size)) {
      std::set<int32_t> present(run.ranks.begin(), run.ranks.end());
      std::vector<int32_t> missing;
      for (int32_t r = 0; r < run.world_size; ++r) {
        if (!present.contains(r)) missing.push_back(r);
      }
      out.warnings.push_back(fmt::format("{}: {} of {} ranks ({} {} missing): its figures cover only the ranks it has",
                                         side->label, run.ranks.size(), run.world_size,
                                         missing.size() == 1 ? "rank" : "ranks", report::formatRanks(missing)));
    }
  }
  std::set<int32_t> b = rankSet(before.report), a = rankSet(after.report);
  std::vector<int32_t> only_before, only_after;
  std::set_difference(b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(only_before));
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(only_after));
  if (!only_before.empty() || !only_after.empty()) {
    std::string text = fmt::format("the runs have other ranks ({} in before, {} in after)",
                                   before.report.run.ranks.size(), after.report.run.ranks.size());
    if (!only_before.empty()) text += fmt::format("; only before: {}", report::formatRanks(only_before));
    if (!only_after.empty()) text += fmt::format("; only after: {}", report::formatRanks(only_after));
    out.notes.push_back(text +
                        ": ranks are not matched one to one; step times take the slowest rank, kernels and ops "
                        "are compared per step and rank");
  }
}

void compareSteps(const ComparisonSide& before, const ComparisonSide& after, RunComparison& out) {
  for (const ComparisonSide* side : {&before, &after}) {
    if (resultOf(side->report, "step_times") == nullptr)
      out.notes.push_back(
          fmt::format("{}: no step_times result (a report of an older gpuxray): step times not compared", side->label));
  }
  StepComparison& s = out.steps;
  s.before = stepSideOf(before.report);
  s.after = stepSideOf(after.report);
  if (s.before.steps == 0 || s.after.steps == 0) {
    s.verdict = StepVerdict::kNoSteps;
  } else if (s.before.steps < 2 || s.after.steps < 2) {
    s.verdict = StepVerdict::kOneStep;
  } else {
    s.noise_ns = std::max(s.before.stddev_ns, s.after.stddev_ns);
    int64_t delta = s.deltaNs();
    if (delta == 0)
      s.verdict = StepVerdict::kNoChange;
    else if (static_cast<double>(std::llabs(delta)) <= s.noise_ns)
      s.verdict = StepVerdict::kWithinNoise;
    else
      s.verdict = delta < 0 ? StepVerdict::kFaster : StepVerdict::kSlower;
  }
  if (s.before.steps > 0 && s.after.steps > 0 &&
      (s.before.first_step != s.after.first_step || s.before.steps != s.after.steps)) {
    out.notes.push_back(fmt::format(
        "steps {}-{} ({}) before, {}-{} ({}) after: not matched one to one, compared by their "
        "median and spread",
        s.before.first_step, s.before.last_step, s.before.steps, s.after.first_step, s.after.last_step, s.after.steps));
  }
}

void compareMetrics(const ComparisonSide& before, const ComparisonSide& after, RunComparison& out) {
  std::map<std::string, MetricDelta> by_name;
  for (const auto& m : before.report.metrics) {
    auto& d = by_name[m.name];
    d.name = m.name, d.unit = m.unit, d.description = m.description, d.before = m.value;
  }
  for (const auto& m : after.report.metrics) {
    auto& d = by_name[m.name];
    d.name = m.name, d.unit = m.unit, d.description = m.description, d.after = m.value;
  }
  for (auto& [name, d] : by_name) out.metrics.push_back(std::move(d));
}

// Normalized kernel name -> the launch shape of the (compute) kernel of that name with the most time.
std::map<std::string, std::string> launchShapes(const report::Report& report) {
  std::map<std::string, std::string> shapes;
  for (const auto& k : itemsOf(resultOf(report, "kernels"), "kernels")) {
    std::string name = normalizeKernelName(textOf(&k, "name"));
    const ResultValue* launch = k.find("launch");
    if (shapes.contains(name) || launch == nullptr || launch->kind() != ResultValue::Kind::kObject) continue;
    auto dims = [&](const char* key) {
      std::string text;
      for (const auto& v : itemsOf(launch, key)) text += (text.empty() ? "" : "x") + fmt::format("{}", v.asInteger());
      return text;
    };
    shapes[name] = fmt::format("grid {} block {}", dims("grid"), dims("block"));
  }
  return shapes;
}

std::vector<ActivityDelta> compareActivities(const ResultValue* before, const ResultValue* after, const char* list,
                                             bool kernel_names, const report::Report& report_before,
                                             const report::Report& report_after) {
  std::map<std::pair<std::string, std::string>, ActivityDelta> by_key;
  double windows_before = std::max(1.0, numberOf(before, "windows", 1));
  double windows_after = std::max(1.0, numberOf(after, "windows", 1));
  auto add = [&](const ResultValue* side, bool is_before) {
    for (const auto& item : itemsOf(side, list)) {
      std::string name = textOf(&item, "name");
      if (kernel_names) name = normalizeKernelName(name);
      std::string kind = textOf(&item, "kind");
      ActivityDelta& d = by_key[{name, kind}];
      d.name = name, d.kind = kind;
      auto count = static_cast<uint64_t>(numberOf(&item, "count"));
      auto time = static_cast<int64_t>(numberOf(&item, "time_ns"));
      (is_before ? d.count_before : d.count_after) += count;
      (is_before ? d.time_before_ns : d.time_after_ns) += time;
    }
  };
  add(before, true);
  add(after, false);
  auto shapes_before = kernel_names ? launchShapes(report_before) : std::map<std::string, std::string>();
  auto shapes_after = kernel_names ? launchShapes(report_after) : std::map<std::string, std::string>();
  std::vector<ActivityDelta> deltas;
  for (auto& [key, d] : by_key) {
    d.per_step_before_ns = static_cast<double>(d.time_before_ns) / windows_before;
    d.per_step_after_ns = static_cast<double>(d.time_after_ns) / windows_after;
    if (auto it = shapes_before.find(d.name); it != shapes_before.end()) d.launch_before = it->second;
    if (auto it = shapes_after.find(d.name); it != shapes_after.end()) d.launch_after = it->second;
    if (d.count_before == 0)
      d.change = Change::kNew;
    else if (d.count_after == 0)
      d.change = Change::kGone;
    else if (d.count_before == d.count_after && d.time_before_ns == d.time_after_ns &&
             d.launch_before == d.launch_after && windows_before == windows_after)
      d.change = Change::kSame;
    else
      d.change = Change::kChanged;
    deltas.push_back(std::move(d));
  }
  std::stable_sort(deltas.begin(), deltas.end(), [](const ActivityDelta& a, const ActivityDelta& b) {
    return std::abs(a.perStepDeltaNs()) > std::abs(b.perStepDeltaNs());
  });
  return deltas;
}

void compareKernelsAndOps(const ComparisonSide& before, const ComparisonSide& after, RunComparison& out) {
  const ResultValue* totals_before = resultOf(before.report, "activity_totals");
  const ResultValue* totals_after = resultOf(after.report, "activity_totals");
  if (totals_before != nullptr && totals_after != nullptr) {
    out.kernels = compareActivities(totals_before, totals_after, "gpu", true, before.report, after.report);
    out.ops = compareActivities(totals_before, totals_after, "ops", false, before.report, after.report);
    return;
  }
  // Reports without activity totals: the kernels result's compute kernels, totals only.
  out.kernels_from_totals = false;
  out.notes.push_back(
      "one side has no activity_totals result: only compute kernels are compared (from the kernels "
      "result), and no ops");
  ResultValue b = ResultValue::object().set(
      "windows", ResultValue::integer(static_cast<int64_t>(std::max<size_t>(1, before.report.run.steps))));
  ResultValue a = ResultValue::object().set(
      "windows", ResultValue::integer(static_cast<int64_t>(std::max<size_t>(1, after.report.run.steps))));
  ResultValue list_b = ResultValue::array(), list_a = ResultValue::array();
  for (const auto& k : itemsOf(resultOf(before.report, "kernels"), "kernels")) list_b.push(k);
  for (const auto& k : itemsOf(resultOf(after.report, "kernels"), "kernels")) list_a.push(k);
  b.set("gpu", std::move(list_b));
  a.set("gpu", std::move(list_a));
  out.kernels = compareActivities(&b, &a, "gpu", true, before.report, after.report);
}

MemorySide memorySideOf(const report::Report& report) {
  MemorySide side;
  const ResultValue* memory = resultOf(report, "memory");
  const ResultValue* recorded = memory != nullptr ? memory->find("recorded") : nullptr;
  side.recorded = recorded != nullptr && recorded->asBool();
  if (!side.recorded) return side;
  side.rank = isNumber(memory, "worst_rank") ? static_cast<int32_t>(numberOf(memory, "worst_rank")) : -1;
  for (const auto& device : itemsOf(memory, "devices")) {
    if (static_cast<int32_t>(numberOf(&device, "rank")) != side.rank) continue;
    auto peak = static_cast<int64_t>(numberOf(&device, "peak_bytes"));
    if (peak < side.peak_bytes) continue;
    side.peak_bytes = peak;
    side.phase = textOf(&device, "peak_phase");
    if (isNumber(&device, "peak_pct_of_device")) side.peak_pct = numberOf(&device, "peak_pct_of_device");
  }
  return side;
}

void compareFindings(const ComparisonSide& before, const ComparisonSide& after, RunComparison& out) {
  // Rank numbers identify the same GPU only when both runs number the same ranks.
  RankNumbers ranks = rankSet(before.report) == rankSet(after.report) ? RankNumbers::kCompared : RankNumbers::kIgnored;
  if (ranks == RankNumbers::kIgnored) {
    auto names_rank = [](const report::Finding& f) { return withoutRankNumbers(f.summary) != f.summary; };
    if (std::any_of(before.report.findings.begin(), before.report.findings.end(), names_rank) ||
        std::any_of(after.report.findings.begin(), after.report.findings.end(), names_rank))
      out.notes.push_back(
          "findings that name ranks are matched without their rank numbers: the runs do not have the same ranks");
  }
  std::multimap<std::string, const report::Finding*> remaining;
  for (const auto& f : after.report.findings) remaining.emplace(findingKey(f, ranks), &f);
  std::vector<FindingChange> resolved, still, added;
  for (const auto& f : before.report.findings) {
    auto it = remaining.find(findingKey(f, ranks));
    FindingChange c{Change::kGone, f.analysis, f.severity, f.summary, ""};
    if (it != remaining.end()) {
      c.change = Change::kSame;
      c.summary_after = it->second->summary;
      c.severity = it->second->severity;
      remaining.erase(it);
      still.push_back(std::move(c));
    } else {
      resolved.push_back(std::move(c));
    }
  }
  for (const auto& f : after.report.findings) {
    bool unmatched = false;
    auto [first, last] = remaining.equal_range(findingKey(f, ranks));
    for (auto it = first; it != last; ++it) unmatched = unmatched || it->second == &f;
    if (unmatched) added.push_back({Change::kNew, f.analysis, f.severity, "", f.summary});
  }
  for (auto* list : {&resolved, &added, &still}) out.findings.insert(out.findings.end(), list->begin(), list->end());
}

std::string keyText(const ResultValue* field) {
  if (field == nullptr) return "";
  switch (field->kind()) {
    case ResultValue::Kind::kText:
      return field->asText();
    case ResultValue::Kind::kInteger:
      return fmt::format("{}", field->asInteger());
    case ResultValue::Kind::kNumber:
      return fmt::format("{}", field->asNumber());
    case ResultValue::Kind::kBool:
      return field->asBool() ? "true" : "false";
    case ResultValue::Kind::kArray: {
      std::string text;
      for (const auto& item : field->items()) text += (text.empty() ? "" : ",") + keyText(&item);
      return text;
    }
    default:
      return "";
  }
}

// A dotted path into nested objects: "busbw.median" is field busbw's field median.
const ResultValue* fieldAt(const ResultValue& row, const std::string& path) {
  const ResultValue* at = &row;
  size_t start = 0;
  while (at != nullptr) {
    size_t dot = path.find('.', start);
    at = at->find(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return at;
}

const std::vector<ResultValue>& rowsOf(const report::Report& report, const KeyedSpec& spec) {
  static const std::vector<ResultValue> none;
  const ResultValue* result = resultOf(report, spec.analysis);
  if (result == nullptr) return none;
  if (spec.list.empty()) return result->items();
  const ResultValue* list = fieldAt(*result, spec.list);
  return list != nullptr ? list->items() : none;
}

}  // namespace

const std::vector<KeyedSpec>& keyedSpecs() {
  using report::Unit;
  using Scale = KeyedSpec::Scale;
  static const std::vector<KeyedSpec> specs = {
      {"collectives",
       "Collectives (matched across ranks) by communicator role, operation and size, per step",
       "collectives",
       "signatures",
       {"communicator.role", "operation", "bytes"},
       {"transfer_total_ns", "count", "busbw_median_bytes_per_s", "skew_median_ns"},
       {Unit::kNanoseconds, Unit::kCount, Unit::kBytesPerSecond, Unit::kNanoseconds},
       Scale::kPerStep},
      {"links",
       "Links: bytes per step, utilization, network speed against the other NICs' median",
       "link_hotspots",
       "links",
       {"host", "name", "kind"},
       {"busy_bandwidth_pct", "utilization_pct", "bytes_per_step", "network.achieved_bytes_per_s", "network.vs_median"},
       {Unit::kPercent, Unit::kPercent, Unit::kBytes, Unit::kBytesPerSecond, Unit::kRatio},
       Scale::kTotal},
      {"link_groups",
       "Link groups: imbalance (busiest over mean)",
       "link_hotspots",
       "groups",
       {"host", "group"},
       {"imbalance", "mean_bytes_per_step"},
       {Unit::kRatio, Unit::kBytes},
       Scale::kTotal},
      {"attribution",
       "Where GPU time goes, per step and rank",
       "time_breakdown",
       "ranks",
       {},
       {"totals.time_ns", "totals.compute_ns", "totals.communication_exposed_ns", "totals.memory_exposed_ns",
        "totals.idle_ns", "totals.idle_split.host_bound_ns", "totals.idle_split.dependency_ns",
        "totals.idle_split.other_ns"},
       {Unit::kNanoseconds, Unit::kNanoseconds, Unit::kNanoseconds, Unit::kNanoseconds, Unit::kNanoseconds,
        Unit::kNanoseconds, Unit::kNanoseconds, Unit::kNanoseconds},
       Scale::kPerStepAndRank},
      {"exposed_by_role",
       "Exposed communication per communicator role, per step",
       "overlap",
       "per_communicator",
       {"communicator.role"},
       {"exposed_ns", "time_ns", "count"},
       {Unit::kNanoseconds, Unit::kNanoseconds, Unit::kCount},
       Scale::kPerStep},
      {"pipelines",
       "Pipeline bubbles",
       "pipeline_bubbles",
       "pipelines",
       {"stages_count", "schedule"},
       {"worst_bubble_pct", "theoretical_bubble_pct", "micro_batches"},
       {Unit::kPercent, Unit::kPercent, Unit::kCount},
       Scale::kTotal},
      {"stragglers",
       "Stragglers: the wait each rank caused the other members of its collectives, per step",
       "stragglers",
       "ranks",
       {"rank", "host"},
       {"wait_caused_per_step_ns", "last", "lateness_ns"},
       {Unit::kNanoseconds, Unit::kCount, Unit::kNanoseconds},
       Scale::kPerStep},
  };
  return specs;
}

KeyedComparison compareKeyed(const KeyedSpec& spec, const report::Report& before, const report::Report& after) {
  KeyedComparison out{spec.id, spec.title, spec.key_fields, spec.value_fields, spec.units, {}};
  // Rows of one key add up: whole numbers (counts, times, bytes) are summed, fractional ones (bandwidths,
  // percentages) averaged.
  std::map<std::vector<std::string>, KeyedDelta> by_key;
  std::map<std::pair<std::vector<std::string>, size_t>, int> averaged;  // (key, before ? v : n + v) -> rows
  std::vector<std::vector<std::string>> order;
  std::set<size_t> whole;  // value fields that came as whole numbers
  auto add = [&](const report::Report& report, bool is_before) {
    for (const auto& row : rowsOf(report, spec)) {
      std::vector<std::string> key;
      for (const auto& field : spec.key_fields) key.push_back(keyText(fieldAt(row, field)));
      auto [it, inserted] = by_key.try_emplace(key);
      KeyedDelta& d = it->second;
      if (inserted) {
        d.key = key;
        d.before.resize(spec.value_fields.size());
        d.after.resize(spec.value_fields.size());
        order.push_back(key);
      }
      auto& values = is_before ? d.before : d.after;
      for (size_t v = 0; v < spec.value_fields.size(); ++v) {
        const ResultValue* field = fieldAt(row, spec.value_fields[v]);
        if (field == nullptr) continue;
        if (field->kind() == ResultValue::Kind::kInteger) {
          if (spec.scale != KeyedSpec::Scale::kTotal) whole.insert(v);
          values[v] = values[v].value_or(0) + static_cast<double>(field->asInteger());
        } else if (field->kind() == ResultValue::Kind::kNumber) {
          int& n = averaged[{key, is_before ? v : spec.value_fields.size() + v}];
          values[v] = (values[v].value_or(0) * n + field->asNumber()) / (n + 1);
          ++n;
        }
      }
    }
  };
  add(before, true);
  std::set<std::vector<std::string>> in_before(order.begin(), order.end());
  add(after, false);
  auto scale = [&](const report::Report& report) {
    double steps = static_cast<double>(std::max<size_t>(1, report.run.steps));
    double ranks = static_cast<double>(std::max<size_t>(1, report.run.ranks.size()));
    switch (spec.scale) {
      case KeyedSpec::Scale::kTotal:
        return 1.0;
      case KeyedSpec::Scale::kPerStep:
        return steps;
      case KeyedSpec::Scale::kPerStepAndRank:
        return steps * ranks;
    }
    return 1.0;
  };
  double scale_before = scale(before), scale_after = scale(after);
  for (auto& [key, d] : by_key) {
    for (size_t v : whole) {
      if (d.before[v]) *d.before[v] /= scale_before;
      if (d.after[v]) *d.after[v] /= scale_after;
    }
  }
  std::set<std::vector<std::string>> in_after;
  for (const auto& row : rowsOf(after, spec)) {
    std::vector<std::string> key;
    for (const auto& field : spec.key_fields) key.push_back(keyText(fieldAt(row, field)));
    in_after.insert(key);
  }
  for (const auto& key : order) {
    KeyedDelta d = std::move(by_key[key]);
    if (!in_before.contains(key))
      d.change = Change::kNew;
    else if (!in_after.contains(key))
      d.change = Change::kGone;
    else
      d.change = d.before == d.after ? Change::kSame : Change::kChanged;
    out.rows.push_back(std::move(d));
  }
  auto size = [](const KeyedDelta& d) {
    if (d.before.empty()) return 0.0;
    return std::abs(d.after[0].value_or(0) - d.before[0].value_or(0));
  };
  std::stable_sort(out.rows.begin(), out.rows.end(),
                   [&](const KeyedDelta& a, const KeyedDelta& b) { return size(a) > size(b); });
  return out;
}

bool RunComparison::identical() const {
  if (steps.deltaNs() != 0 || steps.before.steps != steps.after.steps) return false;
  for (const auto& m : metrics) {
    if (m.before != m.after) return false;
  }
  for (const auto* list : {&kernels, &ops}) {
    for (const auto& d : *list) {
      if (d.change != Change::kSame) return false;
    }
  }
  if (memory_before.peak_bytes != memory_after.peak_bytes) return false;
  for (const auto& table : tables) {
    for (const auto& row : table.rows) {
      if (row.change != Change::kSame) return false;
    }
  }
  return std::all_of(findings.begin(), findings.end(), [](const FindingChange& f) {
    return f.change == Change::kSame && f.summary_before == f.summary_after;
  });
}

RunComparison compareRuns(const ComparisonSide& before, const ComparisonSide& after) {
  RunComparison out;
  out.before_label = before.label, out.after_label = after.label;
  out.before_kind = before.kind, out.after_kind = after.kind;
  matchRanks(before, after, out);
  compareSteps(before, after, out);
  compareMetrics(before, after, out);
  compareKernelsAndOps(before, after, out);
  out.memory_before = memorySideOf(before.report);
  out.memory_after = memorySideOf(after.report);
  compareFindings(before, after, out);
  for (const auto& spec : keyedSpecs()) {
    bool in_before = resultOf(before.report, spec.analysis) != nullptr;
    bool in_after = resultOf(after.report, spec.analysis) != nullptr;
    if (in_before && in_after) {
      out.tables.push_back(compareKeyed(spec, before.report, after.report));
    } else if (in_before || in_after) {
      out.notes.push_back(
          fmt::format("{}: no {} result (a report of an older gpuxray, or --compat hta): {} not compared",
                      in_before ? after.label : before.label, spec.analysis, spec.id));
    }
  }
  return out;
}

}  // namespace gpuxray::compare
