// Human units for reports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpuxray::report {

// 1536 -> "1.5 KiB"
std::string formatBytes(uint64_t bytes);
// 1234567 ns -> "1.23 ms"
std::string formatDuration(int64_t ns);
// 1234567 -> "1,234,567"
std::string formatCount(uint64_t count);
// Nanoseconds since the Unix epoch -> "2026-11-29 10:00:00.123 UTC"
std::string formatTimestamp(uint64_t ns);
// 4.8e12 -> "4.8 TB/s" (decimal, as vendors quote link and memory speeds)
std::string formatBandwidth(double bytes_per_s);

// "3 of 8 ranks"; "1 rank (world size not recorded)" when the world size is unknown.
std::string formatRankCount(size_t ranks, int32_t world_size);

// A set of ranks, in order, runs of three or more as ranges: {0,1,2,3,8,9,10,11} -> "0-3, 8-11",
// {4,5,7} -> "4, 5, 7" (the page's formatRanks writes the same).
std::string formatRanks(std::vector<int32_t> ranks);

// A rank as findings name it: "rank 3", or "rank unknown" for a file whose launcher said none (-1),
// as the page and the loading warning say.
std::string rankName(int32_t rank);
// The same from runs of consecutive ranks, each [first, last], in order: {{0, 3}, {5, 6}} -> "0-3, 5, 6".
std::string formatRankRuns(const std::vector<std::pair<int32_t, int32_t>>& runs);

}  // namespace gpuxray::report
