// Interval sets (analysis/intervals.h) against their definition: which unit times of a small range
// each set covers.
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <vector>

#include "analyzer/analysis/intervals.h"

namespace {

using gpuxray::analysis::Interval;
using gpuxray::analysis::IntervalSet;

constexpr int64_t kRange = 400;

// A disjoint, sorted set with `count` intervals at most, of lengths up to `longest`.
IntervalSet randomSet(std::mt19937& random, int count, int64_t longest) {
  std::vector<Interval> intervals;
  std::uniform_int_distribution<int64_t> at(0, kRange - 1), length(1, longest);
  for (int i = 0; i < count; ++i) {
    int64_t start = at(random);
    intervals.push_back({start, std::min(kRange, start + length(random))});
  }
  return gpuxray::analysis::unionOf(std::move(intervals));
}

std::vector<bool> covered(const IntervalSet& set) {
  std::vector<bool> units(kRange, false);
  for (const Interval& i : set) {
    for (int64_t t = i.start; t < i.end; ++t) units[static_cast<size_t>(t)] = true;
  }
  return units;
}

// A set is disjoint and sorted, its intervals non-empty and not touching.
bool wellFormed(const IntervalSet& set) {
  for (size_t i = 0; i < set.size(); ++i) {
    if (set[i].end <= set[i].start) return false;
    if (i > 0 && set[i].start <= set[i - 1].end) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("intervals: subtract, intersect, clip and lengthWithin cover what their definitions say", "[intervals]") {
  std::mt19937 random(20261205);
  // Sets of every shape against each other, a few intervals against many (the galloping in subtract)
  // and many against a few.
  const std::vector<std::pair<int, int64_t>> shapes = {{1, 5}, {3, 40}, {20, 3}, {60, 2}, {150, 1}, {8, 200}};
  for (int round = 0; round < 300; ++round) {
    auto [a_count, a_longest] = shapes[static_cast<size_t>(round) % shapes.size()];
    auto [b_count, b_longest] = shapes[static_cast<size_t>(round / 7) % shapes.size()];
    IntervalSet a = randomSet(random, a_count, a_longest);
    IntervalSet b = randomSet(random, b_count, b_longest);
    std::vector<bool> in_a = covered(a), in_b = covered(b);
    INFO("round " << round);

    IntervalSet difference = gpuxray::analysis::subtract(a, b);
    IntervalSet both = gpuxray::analysis::intersect(a, b);
    CHECK(wellFormed(difference));
    std::vector<bool> in_difference = covered(difference), in_both = covered(both);
    for (size_t t = 0; t < static_cast<size_t>(kRange); ++t) {
      CHECK(in_difference[t] == (in_a[t] && !in_b[t]));
      CHECK(in_both[t] == (in_a[t] && in_b[t]));
    }

    std::uniform_int_distribution<int64_t> at(0, kRange);
    int64_t x = at(random), y = at(random);
    Interval window{std::min(x, y), std::max(x, y)};
    int64_t expected = 0;
    for (int64_t t = window.start; t < window.end; ++t) expected += in_a[static_cast<size_t>(t)] ? 1 : 0;
    CHECK(gpuxray::analysis::lengthWithin(a, window) == expected);
    CHECK(gpuxray::analysis::totalLength(gpuxray::analysis::clip(a, window)) == expected);
    CHECK(gpuxray::analysis::totalLength(gpuxray::analysis::gapsWithin(a, window)) == window.length() - expected);
  }
}
