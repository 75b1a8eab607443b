#include "analyzer/load/run_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <map>

#include "analyzer/errors.h"
#include "analyzer/load/kineto_importer.h"
#include "proto/file_layout.h"

namespace gpuxray::load {
namespace fs = std::filesystem;

TraceFileSet discoverTraceFiles(const std::vector<std::string>& paths) {
  TraceFileSet inputs;
  auto& files = inputs.files;
  for (const auto& path : paths) {
    std::error_code error;
    auto status = fs::status(path, error);
    if (error || !fs::exists(status)) throw InputError(fmt::format("{}: no such file or directory", path));
    if (!fs::is_directory(status)) {
      files.push_back(path);
      continue;
    }
    std::vector<std::string> found, kineto;
    for (const auto& entry : fs::directory_iterator(path, error)) {
      if (!entry.is_regular_file()) continue;
      if (entry.path().extension() == format::kTraceFileExtension) found.push_back(entry.path().string());
      else if (isKinetoTraceName(entry.path().string())) kineto.push_back(entry.path().string());
    }
    if (error) throw InputError(fmt::format("{}: cannot list directory: {}", path, error.message()));
    if (found.empty()) found = std::move(kineto);
    if (found.empty()) {
      throw InputError(fmt::format("{}: no trace files in this directory (gpuxray's *.gpuxray, or PyTorch-profiler "
                                   "*.json / *.json.gz)", path));
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
    inputs.from_directory = true;
  }
  return inputs;
}

model::SourceFormat traceFileFormat(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::array<char, format::kFileMagic.size()> start{};
  file.read(start.data(), static_cast<std::streamsize>(start.size()));
  bool native = file.gcount() == static_cast<std::streamsize>(start.size()) &&
                std::equal(start.begin(), start.end(), format::kFileMagic.begin());
  return !native && isKinetoTraceName(path) ? model::SourceFormat::kKineto : model::SourceFormat::kNative;
}

namespace {

std::string joinRanks(const std::vector<int>& ranks) {
  constexpr size_t kShown = 16;
  std::string text;
  for (size_t i = 0; i < ranks.size() && i < kShown; ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > kShown) text += fmt::format(" and {} more", ranks.size() - kShown);
  return text;
}

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
    problems.errors.push_back(
        fmt::format("the files come from {} different runs: {}; pass --allow-mixed to read them together",
                    by_run.size(), runs));
  }

  for (const auto& [run_id, members] : by_run) {
    std::map<int, const RankedFile*> by_rank;
    int world_size = 0;
    for (const RankedFile* file : members) {
      world_size = std::max(world_size, file->header->world_size);
      int rank = file->header->rank;
      if (rank < 0) {
        problems.warnings.push_back(fmt::format("{}: rank unknown (no rank variable was set)", file->path));
        continue;
      }
      auto [it, inserted] = by_rank.emplace(rank, file);
      if (!inserted) {
        problems.errors.push_back(
            fmt::format("rank {} appears twice: in {} and in {}", rank, it->second->path, file->path));
      }
    }
    std::vector<int> missing;
    for (int rank = 0; report_missing_ranks && rank < world_size; ++rank) {
      if (!by_rank.contains(rank)) missing.push_back(rank);
    }
    if (!missing.empty()) {
      problems.warnings.push_back(fmt::format("run '{}': {} of {} ranks have no file (rank{} {})", run_id,
                                              missing.size(), world_size, missing.size() == 1 ? "" : "s",
                                              joinRanks(missing)));
    }
  }
  return problems;
}

}  // namespace gpuxray::load
