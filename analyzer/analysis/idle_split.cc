#include "analyzer/analysis/idle_split.h"

#include <algorithm>

namespace gpuxray::analysis {

IdleSplit idleWithin(const model::RankTrace& rank, const std::vector<int64_t>& launch_start, const IntervalSet& busy,
                     Interval window) {
  IdleSplit split;
  const auto& activities = rank.activities;
  auto next = activities.begin();
  bool found_first = false;
  // Gaps come in time order, so the activity after each is found by walking on from the last one.
  auto addGap = [&](int64_t start, int64_t end) {
    auto before = [](const model::GpuActivity& a, int64_t t) { return a.start_ns < t; };
    if (!found_first) {
      next = std::lower_bound(activities.begin(), activities.end(), end, before);
      found_first = true;
    }
    while (next != activities.end() && (next->start_ns < end || !model::isGpuWork(next->kind))) ++next;
    if (next == activities.end()) {
      split.other += end - start;  // idle until the window's end: nothing came after
    } else {
      classifyGap(launch_start[static_cast<size_t>(next - activities.begin())], start, end - start, split);
    }
  };
  int64_t cursor = window.start;
  auto it =
      std::lower_bound(busy.begin(), busy.end(), window.start, [](const Interval& i, int64_t t) { return i.end <= t; });
  for (; it != busy.end() && it->start < window.end; ++it) {
    if (it->start > cursor) addGap(cursor, it->start);
    cursor = std::max(cursor, it->end);
  }
  if (cursor < window.end) addGap(cursor, window.end);
  return split;
}

}  // namespace gpuxray::analysis
