// Activity totals: count and time per GPU activity name and per op name, over the steps.

#include "analyzer/analysis/activity_totals.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <unordered_map>
#include <utility>

#include "analyzer/analysis/range_names.h"
#include "analyzer/analysis/rank_digest.h"

namespace gpuxray::analysis {

using report::ResultValue;

namespace {

using Totals = std::map<std::pair<std::string, std::string>, ActivityTotal>;

void addTotal(Totals& into, std::string_view name, std::string_view kind, uint64_t count, int64_t time_ns) {
  ActivityTotal& t = into[{std::string(name), std::string(kind)}];
  t.count += count;
  t.time_ns += time_ns;
}

std::vector<ActivityTotal> listOf(Totals& totals) {
  std::vector<ActivityTotal> list;
  for (auto& [key, total] : totals) {
    total.name = key.first;
    total.kind = key.second;
    list.push_back(std::move(total));
  }
  return list;
}

}  // namespace

RankActivityTotals activityTotalsOfRank(const AnalysisInput& input, size_t r) {
  std::vector<StepWindow> sorted = input.windowsOf(r);
  std::sort(sorted.begin(), sorted.end(),
            [](const StepWindow& a, const StepWindow& b) { return a.window.start < b.window.start; });
  // The window with the last start at or before t (found by search, or the one the previous time
  // fell in, as times mostly come in order) decides.
  size_t last = 0;
  auto inWindows = [&sorted, &last](int64_t t) {
    bool same_as_last = last < sorted.size() && sorted[last].window.start <= t &&
                        (last + 1 == sorted.size() || t < sorted[last + 1].window.start);
    if (!same_as_last) {
      auto after = std::upper_bound(sorted.begin(), sorted.end(), t,
                                    [](int64_t time, const StepWindow& w) { return time < w.window.start; });
      if (after == sorted.begin()) return false;
      last = static_cast<size_t>(std::prev(after) - sorted.begin());
    }
    return t < sorted[last].window.end;
  };
  // Summed by ids first (a rank's names are ids; several ids may hold one text), then by text.
  struct Sum {
    uint64_t count = 0;
    int64_t time_ns = 0;
  };
  auto key = [](uint32_t a, uint32_t b) { return (uint64_t{a} << 32) | b; };
  std::unordered_map<uint64_t, Sum> gpu_sums, range_sums;
  const auto& rank = input.run.ranks[r];
  // Activities by (name id, kind) through a table: a slot per pair seen, in gpu_slots' order.
  constexpr uint32_t kNoSlot = 0;
  std::vector<uint32_t> slot_of(rank.strings.size() * model::kActivityKindCount, kNoSlot);
  std::vector<std::pair<uint64_t, Sum>> gpu_slots;
  const std::vector<int64_t>& launch_start = input.time_sets[r].launch_start;
  for (size_t i = 0; i < rank.activities.size(); ++i) {
    const model::GpuActivity& a = rank.activities[i];
    if (a.kind == model::ActivityKind::kHostOp) continue;
    if (!inWindows(launch_start[i] != kNoLaunch ? launch_start[i] : a.start_ns)) continue;
    size_t at = size_t{a.name_id} * model::kActivityKindCount + static_cast<size_t>(a.kind);
    Sum* sum = nullptr;
    if (at >= slot_of.size()) {
      sum = &gpu_sums[key(a.name_id, static_cast<uint32_t>(a.kind))];
    } else {
      if (slot_of[at] == kNoSlot) {
        gpu_slots.push_back({key(a.name_id, static_cast<uint32_t>(a.kind)), {}});
        slot_of[at] = static_cast<uint32_t>(gpu_slots.size());
      }
      sum = &gpu_slots[slot_of[at] - 1].second;
    }
    ++sum->count;
    sum->time_ns += a.duration();
  }
  for (const auto& [ids, sum] : gpu_slots) gpu_sums[ids] = sum;
  for (const auto& range : rank.nvtx) {
    if (rank.name(range.name_id).starts_with("ProfilerStep#") || !inWindows(range.start_ns)) continue;
    Sum& sum = range_sums[key(range.name_id, range.domain_id)];
    ++sum.count;
    sum.time_ns += range.end_ns - range.start_ns;
  }
  std::vector<Sum> call_sums(rank.api_functions.size());
  for (const auto& call : rank.host_calls) {
    if (call.function >= rank.api_functions.size() || rank.api_functions[call.function] == 0 ||
        !inWindows(call.start_ns))
      continue;
    Sum& sum = call_sums[call.function];
    ++sum.count;
    sum.time_ns += call.end_ns - call.start_ns;
  }
  Totals gpu, ops;
  for (const auto& [ids, sum] : gpu_sums)
    addTotal(gpu, rank.name(static_cast<uint32_t>(ids >> 32)),
             model::activityKindName(static_cast<model::ActivityKind>(ids & 0xff)), sum.count, sum.time_ns);
  for (const auto& [ids, sum] : range_sums)
    addTotal(ops, splitRangeName(rank.name(static_cast<uint32_t>(ids >> 32))).op, rank.name(static_cast<uint32_t>(ids)),
             sum.count, sum.time_ns);
  for (size_t f = 0; f < call_sums.size(); ++f)
    if (call_sums[f].count > 0)
      addTotal(ops, rank.name(rank.api_functions[f]), "runtime", call_sums[f].count, call_sums[f].time_ns);
  return {listOf(gpu), listOf(ops)};
}

ActivityTotalsResult computeActivityTotals(const AnalysisInput& input) {
  ActivityTotalsResult result;
  result.ranks = input.run.ranks.size();
  Totals gpu, ops;
  for (size_t r = 0; r < input.run.ranks.size(); ++r) {
    result.windows += input.windowsOf(r).size();
    const RankActivityTotals& part = input.digest(r).activity_totals;
    for (const auto& t : part.gpu) addTotal(gpu, t.name, t.kind, t.count, t.time_ns);
    for (const auto& t : part.ops) addTotal(ops, t.name, t.kind, t.count, t.time_ns);
  }
  auto sorted = [](Totals& totals) {
    std::vector<ActivityTotal> list = listOf(totals);
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
  report.addResult("activity_totals", [&] {
    return ResultValue::object()
        .set("ranks", ResultValue::integer(static_cast<int64_t>(result.ranks)))
        .set("windows", ResultValue::integer(static_cast<int64_t>(result.windows)))
        .set("gpu", list(result.gpu))
        .set("ops", list(result.ops));
  });
}

void analyzeActivityTotals(const AnalysisInput& input, report::Report& report) {
  presentActivityTotals(computeActivityTotals(input), report);
}

}  // namespace gpuxray::analysis
