#include "analyzer/analysis/intervals.h"

#include <algorithm>
#include <cstddef>

namespace gpuxray::analysis {

IntervalSet unionOf(std::vector<Interval> intervals) {
  std::erase_if(intervals, [](const Interval& i) { return i.end <= i.start; });
  auto by_start = [](const Interval& a, const Interval& b) { return a.start < b.start; };
  if (!std::is_sorted(intervals.begin(), intervals.end(), by_start)) std::sort(intervals.begin(), intervals.end(), by_start);
  // Merged in place: the result is never longer than the input.
  size_t kept = 0;
  for (size_t i = 0; i < intervals.size(); ++i) {
    if (kept > 0 && intervals[i].start <= intervals[kept - 1].end) {
      intervals[kept - 1].end = std::max(intervals[kept - 1].end, intervals[i].end);
    } else {
      intervals[kept++] = intervals[i];
    }
  }
  intervals.resize(kept);
  intervals.shrink_to_fit();
  return intervals;
}

int64_t totalLength(const IntervalSet& set) {
  int64_t total = 0;
  for (const Interval& i : set) total += i.length();
  return total;
}

IntervalSet intersect(const IntervalSet& a, const IntervalSet& b) {
  IntervalSet out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    int64_t start = std::max(a[i].start, b[j].start);
    int64_t end = std::min(a[i].end, b[j].end);
    if (start < end) out.push_back({start, end});
    (a[i].end < b[j].end) ? ++i : ++j;
  }
  return out;
}

IntervalSet subtract(const IntervalSet& a, const IntervalSet& b) {
  IntervalSet out;
  size_t j = 0;
  for (Interval piece : a) {
    // b's intervals that end by the piece's start are skipped by galloping: a few copies or
    // collectives against every kernel's interval skip long runs.
    size_t step = 1, past = j;
    while (past < b.size() && b[past].end <= piece.start) j = past + 1, past += step, step *= 2;
    j = static_cast<size_t>(std::lower_bound(b.begin() + static_cast<std::ptrdiff_t>(j),
                                             b.begin() + static_cast<std::ptrdiff_t>(std::min(past, b.size())),
                                             piece.start, [](const Interval& i, int64_t t) { return i.end <= t; }) -
                            b.begin());
    size_t k = j;
    while (k < b.size() && b[k].start < piece.end) {
      if (b[k].start > piece.start) out.push_back({piece.start, b[k].start});
      piece.start = std::max(piece.start, b[k].end);
      if (piece.start >= piece.end) break;
      ++k;
    }
    if (piece.start < piece.end) out.push_back(piece);
  }
  return out;
}

IntervalSet clip(const IntervalSet& set, Interval window) {
  IntervalSet out;
  auto it = std::lower_bound(set.begin(), set.end(), window.start, [](const Interval& i, int64_t t) { return i.end <= t; });
  for (; it != set.end() && it->start < window.end; ++it) {
    int64_t start = std::max(it->start, window.start);
    int64_t end = std::min(it->end, window.end);
    if (start < end) out.push_back({start, end});
  }
  return out;
}

int64_t lengthWithin(const IntervalSet& set, Interval window) {
  int64_t total = 0;
  auto it = std::lower_bound(set.begin(), set.end(), window.start, [](const Interval& i, int64_t t) { return i.end <= t; });
  for (; it != set.end() && it->start < window.end; ++it) total += std::min(it->end, window.end) - std::max(it->start, window.start);
  return total;
}

IntervalSet gapsWithin(const IntervalSet& set, Interval window) {
  return subtract(IntervalSet{window}, clip(set, window));
}

}  // namespace gpuxray::analysis
