#include "analyzer/report/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>

namespace gpuxray::report {

std::string formatBytes(uint64_t bytes) {
  static constexpr std::array<const char*, 6> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < kUnits.size()) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.{}f} {}", value, value < 10 ? 2 : value < 100 ? 1 : 0, kUnits[unit]);
}

std::string formatDuration(int64_t ns) {
  double magnitude = std::fabs(static_cast<double>(ns));
  if (magnitude < 1e3) return fmt::format("{} ns", ns);
  const char* unit = "s";
  double value = static_cast<double>(ns) / 1e9;
  if (magnitude < 1e6) {
    unit = "us";
    value = static_cast<double>(ns) / 1e3;
  } else if (magnitude < 1e9) {
    unit = "ms";
    value = static_cast<double>(ns) / 1e6;
  }
  double shown = std::fabs(value);
  return fmt::format("{:.{}f} {}", value, shown < 10 ? 2 : shown < 100 ? 1 : 0, unit);
}

std::string formatCount(uint64_t count) {
  std::string digits = std::to_string(count);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string formatTimestamp(uint64_t ns) {
  std::time_t seconds = static_cast<std::time_t>(ns / 1000000000u);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &utc);
  return fmt::format("{}.{:03d} UTC", text, (ns / 1000000u) % 1000u);
}

std::string formatBandwidth(double bytes_per_s) {
  static constexpr std::array<const char*, 5> kUnits = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s"};
  double value = bytes_per_s;
  size_t unit = 0;
  while (value >= 1000 && unit + 1 < kUnits.size()) {
    value /= 1000;
    ++unit;
  }
  return fmt::format("{:.{}f} {}", value, value < 10 ? 2 : value < 100 ? 1 : 0, kUnits[unit]);
}

std::string formatRankCount(size_t ranks, int32_t world_size) {
  if (world_size > 0) return fmt::format("{} of {} ranks", ranks, world_size);
  return fmt::format("{} rank{} (world size not recorded)", ranks, ranks == 1 ? "" : "s");
}

std::string formatRankRuns(const std::vector<std::pair<int32_t, int32_t>>& runs) {
  std::string text;
  for (const auto& [first, last] : runs) {
    if (!text.empty()) text += ", ";
    if (static_cast<int64_t>(last) - first >= 2) {
      text += fmt::format("{}-{}", first, last);
    } else {
      text += first == last ? fmt::format("{}", first) : fmt::format("{}, {}", first, last);
    }
  }
  return text;
}

std::string formatRanks(std::vector<int32_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::vector<std::pair<int32_t, int32_t>> runs;
  for (int32_t rank : ranks) {
    if (!runs.empty() && runs.back().second + 1 == rank) {
      runs.back().second = rank;
    } else {
      runs.emplace_back(rank, rank);
    }
  }
  return formatRankRuns(runs);
}

std::string rankName(int32_t rank) {
  return rank < 0 ? "rank unknown" : fmt::format("rank {}", rank);
}

}  // namespace gpuxray::report
