#include "analyzer/load/run_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <map>

#include "analyzer/errors.h"
#include "analyzer/load/kineto_importer.h"
#include "analyzer/report/units.h"
#include "proto/file_layout.h"

namespace gpuxray::load {
namespace fs = std::filesystem;

TraceFileSet discoverTraceFiles(const std::vector<std::string>& paths) {
  TraceFileSet inputs;
  auto& files = inputs.files;
  for (const auto& path : paths) {
    std::error_code error;
    auto status = fs::status(path, error);
    if (error == std::errc::no_such_file_or_directory || (!error && !fs::exists(status)))
      throw InputError(fmt::format("{}: no such file or directory", path));
    // Anything else named (a symlink loop, a FIFO, a device) is refused by the reader, with its reason.
    if (error || !fs::is_directory(status)) {
      files.push_back(path);
      continue;
    }
    std::vector<std::string> found, kineto;
    fs::directory_iterator entries(path, error);
    for (; !error && entries != fs::directory_iterator(); entries.increment(error)) {
      const fs::directory_entry& entry = *entries;
      std::string name = entry.path().string();
      bool native =
          entry.path().extension() == format::kTraceFileExtension || entry.path().extension() == kDigestFileExtension;
      if (!native && !isKinetoTraceName(name)) continue;
      std::error_code entry_error;
      fs::file_status entry_status = entry.status(entry_error);
      if (entry_error) {
        report::warn(inputs.stats, inputs.warnings, report::Stat::files_skipped, 1,
                     fmt::format("{}: cannot read: {}; skipped", name, entry_error.message()));
        continue;
      }
      if (!fs::is_regular_file(entry_status)) {
        if (!fs::is_directory(entry_status))
          report::warn(inputs.stats, inputs.warnings, report::Stat::files_skipped, 1,
                       fmt::format("{}: not a regular file; skipped", name));
        continue;
      }
      (native ? found : kineto).push_back(std::move(name));
    }
    if (error) throw InputError(fmt::format("{}: cannot list directory: {}", path, error.message()));
    if (found.empty()) found = std::move(kineto);
    if (found.empty()) {
      throw InputError(
          fmt::format("{}: no trace files in this directory (gpuxray's *.gpuxray, its digests "
                      "*.gxdigest, or PyTorch-profiler *.json / *.json.gz)",
                      path));
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
    inputs.from_directory = true;
  }
  return inputs;
}

model::SourceFormat traceFileFormat(const std::string& path) {
  // Only a regular file is opened here (a FIFO would block); the reader refuses the rest by name.
  std::error_code error;
  if (!fs::is_regular_file(path, error)) return model::SourceFormat::kNative;
  std::ifstream file(path, std::ios::binary);
  std::array<char, format::kFileMagic.size()> start{};
  file.read(start.data(), static_cast<std::streamsize>(start.size()));
  bool native = file.gcount() == static_cast<std::streamsize>(start.size()) &&
                std::equal(start.begin(), start.end(), format::kFileMagic.begin());
  return !native && isKinetoTraceName(path) ? model::SourceFormat::kKineto : model::SourceFormat::kNative;
}

namespace {

constexpr size_t kRanksShown = 16;

}  // namespace

RunProblems checkRunMembership(const std::vector<RankedFile>& files, bool allow_mixed_runs, bool report_missing_ranks) {
  RunProblems problems;
  std::map<std::string, std::vector<const RankedFile*>> by_run;
  for (const auto& file : files) by_run[file.header->run_id].push_back(&file);
  if (by_run.size() > 1 && !allow_mixed_runs) {
    std::string runs;
    for (const auto& [run_id, members] : by_run) {
      runs += fmt::format("{}run '{}' ({} file{}, e.g. {})", runs.empty() ? "" : ", ", run_id, members.size(),
                          members.size() == 1 ? "" : "s", members.front()->path);
    }
    problems.errors.push_back(fmt::format(
        "the files come from {} different runs: {}; pass --allow-mixed to read them together", by_run.size(), runs));
  }

  for (const auto& [run_id, members] : by_run) {
    std::map<int, const RankedFile*> by_rank;
    int world_size = 0;
    for (const RankedFile* file : members) {
      world_size = std::max(world_size, file->header->world_size);
      int rank = file->header->rank;
      if (rank < 0) {
        report::warn(problems.stats, problems.warnings, report::Stat::ranks_unknown, 1,
                     fmt::format("{}: rank unknown (no rank variable was set)", file->path));
        continue;
      }
      auto [it, inserted] = by_rank.emplace(rank, file);
      if (!inserted) {
        problems.errors.push_back(
            fmt::format("rank {} appears twice: in {} and in {}", rank, it->second->path, file->path));
      }
    }
    // Counted, and only the first few listed: the world size is the file's word, not the files present.
    size_t present = static_cast<size_t>(
        std::count_if(by_rank.begin(), by_rank.end(), [&](const auto& entry) { return entry.first < world_size; }));
    size_t missing = report_missing_ranks ? static_cast<size_t>(std::max(world_size, 0)) - present : 0;
    if (missing > 0) {
      // The gaps between the ranks present, as runs: never one entry per missing rank (a header may
      // claim 2^31 - 1 ranks).
      std::vector<std::pair<int32_t, int32_t>> runs;
      size_t listed = 0;
      int32_t next = 0;
      auto gap = [&](int32_t before) {
        if (before > next && runs.size() < kRanksShown) {
          runs.emplace_back(next, before - 1);
          listed += static_cast<size_t>(before - next);
        }
      };
      for (const auto& entry : by_rank) {
        if (entry.first < 0) continue;
        if (entry.first >= world_size) break;
        gap(entry.first);
        next = entry.first + 1;
      }
      gap(world_size);
      std::string shown = report::formatRankRuns(runs);
      if (missing > listed) shown += fmt::format(" and {} more", missing - listed);
      report::warn(problems.stats, problems.warnings, report::Stat::ranks_missing, missing,
                   fmt::format("run '{}': {} of {} ranks have no file (rank{} {})", run_id, missing, world_size,
                               missing == 1 ? "" : "s", shown));
    }
  }
  return problems;
}

}  // namespace gpuxray::load
