// Sets of time intervals as sorted, disjoint [start, end) lists: the arithmetic behind busy, idle,
// overlap and exposed time.
#pragma once

#include <cstdint>
#include <vector>

namespace gpuxray::analysis {

struct Interval {
  int64_t start = 0;
  int64_t end = 0;
  int64_t length() const { return end - start; }
};

using IntervalSet = std::vector<Interval>;

// Sorts and merges intervals (empty ones dropped) into a disjoint set.
IntervalSet unionOf(std::vector<Interval> intervals);
int64_t totalLength(const IntervalSet& set);
IntervalSet intersect(const IntervalSet& a, const IntervalSet& b);
// a without b.
IntervalSet subtract(const IntervalSet& a, const IntervalSet& b);
IntervalSet clip(const IntervalSet& set, Interval window);
// |set ∩ window| without building the clipped set.
int64_t lengthWithin(const IntervalSet& set, Interval window);
// The gaps of `set` inside `window`.
IntervalSet gapsWithin(const IntervalSet& set, Interval window);

}  // namespace gpuxray::analysis
