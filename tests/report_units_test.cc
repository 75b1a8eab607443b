// The report's units: rank sets as ranges (the text report's, findings' and tables' one writer).

#include <catch2/catch.hpp>
#include <vector>

#include "analyzer/report/units.h"

namespace {

TEST_CASE("units: rank sets are written as ranges") {
  using gpuxray::report::formatRanks;
  std::vector<int32_t> stage;
  for (int32_t r = 128; r < 256; ++r) stage.push_back(r);
  CHECK(formatRanks(stage) == "128-255");
  CHECK(formatRanks({0, 1, 2, 3, 8, 9, 10, 11}) == "0-3, 8-11");
  CHECK(formatRanks({7, 5, 4}) == "4, 5, 7");  // in order; a pair is not a range
  CHECK(formatRanks({3, 3, 0, 1, 2}) == "0-3");
  CHECK(formatRanks({6}) == "6");
  CHECK(formatRanks({}).empty());
}

TEST_CASE("units: a rank the launcher did not say is rank unknown, never rank -1") {
  using gpuxray::report::rankName;
  CHECK(rankName(0) == "rank 0");
  CHECK(rankName(1023) == "rank 1023");
  CHECK(rankName(-1) == "rank unknown");
}

TEST_CASE("units: rank runs are written like rank sets, at any rank number") {
  using gpuxray::report::formatRankRuns;
  CHECK(formatRankRuns({{0, 3}, {5, 6}, {9, 9}}) == "0-3, 5, 6, 9");
  CHECK(formatRankRuns({{1, 2147483646}}) == "1-2147483646");
}

}  // namespace
