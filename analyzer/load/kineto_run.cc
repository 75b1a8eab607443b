#include "analyzer/load/kineto_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>

namespace gpuxray::load {
namespace {

std::optional<int32_t> rankInFileName(const std::string& path) {
  static const std::regex pattern("rank[-_]?(\\d{1,9})", std::regex::icase);
  std::string name = std::filesystem::path(path).filename().string();
  std::smatch match;
  if (!std::regex_search(name, match, pattern)) return std::nullopt;
  return static_cast<int32_t>(std::stol(match[1].str()));
}

}  // namespace

void settleKinetoRanks(std::vector<model::RankTrace>& ranks, std::vector<std::string>& warnings, report::Stats& stats) {
  std::sort(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  std::map<int32_t, const model::RankTrace*> owner;
  std::vector<bool> drop(ranks.size(), false);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const auto& r = ranks[i];
    if (r.source != model::SourceFormat::kKineto || r.rank < 0) continue;
    auto [it, inserted] = owner.emplace(r.rank, &r);
    if (!inserted) {
      report::warn(stats, warnings, report::Stat::files_skipped, 1,
                   fmt::format("{}: rank {} is also in {}; this file is skipped", r.path, r.rank, it->second->path));
      drop[i] = true;
    }
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    auto& r = ranks[i];
    if (r.source != model::SourceFormat::kKineto || r.rank >= 0) continue;
    std::optional<int32_t> named = rankInFileName(r.path);
    int32_t rank = 0;
    std::string how;
    if (named && !owner.contains(*named)) {
      rank = *named;
      how = "taken from the file name";
    } else {
      while (owner.contains(rank)) ++rank;
      how = "the first rank free";
    }
    owner.emplace(rank, &r);
    r.rank = r.header.rank = rank;
    r.header.rank_source = how;
    report::warn(stats, warnings, report::Stat::kineto_ranks_guessed, 1,
                 fmt::format("{}: no rank in the trace (no distributedInfo); taken as rank {}, {}", r.path, rank, how));
  }
  size_t kept = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (!drop[i]) {
      if (kept != i) ranks[kept] = std::move(ranks[i]);
      ++kept;
    }
  }
  ranks.resize(kept);
}

}  // namespace gpuxray::load
