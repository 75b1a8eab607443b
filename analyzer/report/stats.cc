#include "analyzer/report/stats.h"

namespace gpuxray::report {

const char* statSeverityName(StatSeverity severity) {
  switch (severity) {
    case StatSeverity::kInfo:
      return "info";
    case StatSeverity::kDataLoss:
      return "data_loss";
    case StatSeverity::kError:
      return "error";
  }
  return "info";
}

const StatInfo& statInfo(Stat stat) {
  return kStatInfo[static_cast<size_t>(stat)];
}

std::optional<Stat> statNamed(std::string_view name) {
  for (size_t i = 0; i < kStatCount; ++i) {
    if (kStatInfo[i].name == name) return static_cast<Stat>(i);
  }
  return std::nullopt;
}

void Stats::warn(Stat stat, uint64_t count, std::string line) {
  add(stat, count);
  lines_.push_back({stat, std::move(line)});
}

void Stats::merge(const Stats& other) {
  for (size_t i = 0; i < kStatCount; ++i) values_[i] += other.values_[i];
  lines_.insert(lines_.end(), other.lines_.begin(), other.lines_.end());
}

bool Stats::empty() const {
  for (uint64_t v : values_) {
    if (v != 0) return false;
  }
  return lines_.empty();
}

std::vector<Stat> Stats::nonZero() const {
  std::vector<Stat> stats;
  for (size_t i = 0; i < kStatCount; ++i) {
    if (values_[i] != 0) stats.push_back(static_cast<Stat>(i));
  }
  return stats;
}

std::vector<std::string> Stats::linesOf(Stat stat) const {
  std::vector<std::string> lines;
  for (const auto& line : lines_) {
    if (line.stat == stat) lines.push_back(line.text);
  }
  return lines;
}

void warn(Stats& stats, std::vector<std::string>& warnings, Stat stat, uint64_t count, std::string line) {
  warnings.push_back(line);
  stats.warn(stat, count, std::move(line));
}

}  // namespace gpuxray::report
