// Activity totals: count and time per GPU activity name and per op name, over the steps.

#include "analyzer/analysis/activity_totals.h"

#include <algorithm>
#include <map>
#include <utility>

namespace gpuxray::analysis {

using report::ResultValue;

ActivityTotalsResult computeActivityTotals(const AnalysisInput& input) {
  ActivityTotalsResult result;
  result.ranks = input.run.ranks.size();
  RankWindows windows(input);
  std::map<std::pair<std::string, std::string>, ActivityTotal> gpu, ops;
  auto add = [](std::map<std::pair<std::string, std::string>, ActivityTotal>& into, std::string_view name,
                std::string_view kind, int64_t time_ns) {
    ActivityTotal& t = into[{std::string(name), std::string(kind)}];
    ++t.count;
    t.time_ns += time_ns;
  };
  for (size_t r = 0; r < input.run.ranks.size(); ++r) {
    const auto& rank = input.run.ranks[r];
    result.windows += input.windowsOf(r).size();
    for (const auto& a : rank.activities) {
      if (a.kind == model::ActivityKind::kHostOp) continue;
      const model::HostCall* launch = a.correlation_id != 0 ? rank.launchOf(a.correlation_id) : nullptr;
      if (!windows.contains(r, launch != nullptr ? launch->start_ns : a.start_ns)) continue;
      add(gpu, rank.name(a.name_id), model::activityKindName(a.kind), a.duration());
    }
    for (const auto& range : rank.nvtx) {
      std::string_view name = rank.name(range.name_id);
      if (name.starts_with("ProfilerStep#") || !windows.contains(r, range.start_ns)) continue;
      add(ops, name, rank.name(range.domain_id), range.end_ns - range.start_ns);
    }
    for (const auto& call : rank.host_calls) {
      if (!windows.contains(r, call.start_ns)) continue;
      uint32_t name_id = call.function < rank.api_functions.size() ? rank.api_functions[call.function] : 0;
      if (name_id == 0) continue;
      add(ops, rank.name(name_id), "runtime", call.end_ns - call.start_ns);
    }
  }
  auto sorted = [](std::map<std::pair<std::string, std::string>, ActivityTotal>& totals) {
    std::vector<ActivityTotal> list;
    for (auto& [key, total] : totals) {
      total.name = key.first;
      total.kind = key.second;
      list.push_back(std::move(total));
    }
    std::stable_sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.time_ns > b.time_ns; });
    return list;
  };
  result.gpu = sorted(gpu);
  result.ops = sorted(ops);
  return result;
}

void presentActivityTotals(const ActivityTotalsResult& result, report::Report& report) {
  auto list = [](const std::vector<ActivityTotal>& totals) {
    ResultValue items = ResultValue::array();
    for (const auto& t : totals) {
      items.push(ResultValue::object()
                     .set("name", ResultValue::text(t.name))
                     .set("kind", ResultValue::text(t.kind))
                     .set("count", ResultValue::integer(static_cast<int64_t>(t.count)))
                     .set("time_ns", ResultValue::integer(t.time_ns)));
    }
    return items;
  };
  report.results.emplace_back("activity_totals",
                              ResultValue::object()
                                  .set("ranks", ResultValue::integer(static_cast<int64_t>(result.ranks)))
                                  .set("windows", ResultValue::integer(static_cast<int64_t>(result.windows)))
                                  .set("gpu", list(result.gpu))
                                  .set("ops", list(result.ops)));
}

void analyzeActivityTotals(const AnalysisInput& input, report::Report& report) {
  presentActivityTotals(computeActivityTotals(input), report);
}

}  // namespace gpuxray::analysis
