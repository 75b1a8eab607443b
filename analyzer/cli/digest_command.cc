// `gpuxray digest PATHS... -o DIR [--shard I/N]`: the per-rank phase of `analyze` alone, on one shard
// of a run's files, each rank's digest written to DIR (analysis/digest_file.h), so that the cluster
// that ran a job can digest its ranks where they lie (`srun -n 64 gpuxray digest ...`) and one
// `gpuxray analyze DIR` runs the cross-rank phase on the digests. Shard I of N takes the files whose
// index in the sorted list of every trace file under PATHS is I modulo N; I and N come from --shard,
// else from the launcher (Slurm, Open MPI, PMI).

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analyzer/analysis/digest_file.h"
#include "analyzer/analysis/session.h"
#include "analyzer/cli/commands.h"
#include "analyzer/cli/load_progress.h"
#include "analyzer/errors.h"
#include "analyzer/load/run_files.h"
#include "analyzer/model/communication_kernels.h"
#include "analyzer/report/units.h"

namespace gpuxray::cli {
namespace {

struct DigestOptions {
  std::vector<std::string> paths;
  std::string output_dir;
  std::string shard;
  unsigned jobs = 0;
  bool allow_mixed_runs = false;
  std::vector<std::string> step_markers;
  std::vector<std::string> comm_kernels;
  std::string compat;
  bool include_last_step = false;
};

struct Shard {
  size_t index = 0, count = 1;
  std::string source;  // "--shard", "SLURM_PROCID/SLURM_NTASKS", ...
};

std::optional<size_t> wholeNumber(std::string_view text) {
  size_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

Shard shardOf(const std::string& option) {
  if (!option.empty()) {
    size_t slash = option.find('/');
    std::optional<size_t> index, count;
    if (slash != std::string::npos) {
      index = wholeNumber(std::string_view(option).substr(0, slash));
      count = wholeNumber(std::string_view(option).substr(slash + 1));
    }
    if (!index || !count || *count == 0 || *index >= *count)
      throw UsageError(fmt::format("--shard '{}': expected I/N with 0 <= I < N, e.g. 3/64", option));
    return {*index, *count, "--shard"};
  }
  static constexpr std::pair<const char*, const char*> kLaunchers[] = {
      {"SLURM_PROCID", "SLURM_NTASKS"}, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"PMI_RANK", "PMI_SIZE"}};
  for (const auto& [index_name, count_name] : kLaunchers) {
    const char* index_text = std::getenv(index_name);
    const char* count_text = std::getenv(count_name);
    if (index_text == nullptr && count_text == nullptr) continue;
    std::optional<size_t> index = index_text ? wholeNumber(index_text) : std::nullopt;
    std::optional<size_t> count = count_text ? wholeNumber(count_text) : std::nullopt;
    if (!index || !count || *count == 0 || *index >= *count) {
      throw UsageError(fmt::format("{}='{}' and {}='{}' name no shard (expected 0 <= {} < {}); give --shard I/N",
                                   index_name, index_text ? index_text : "", count_name, count_text ? count_text : "",
                                   index_name, count_name));
    }
    return {*index, *count, fmt::format("{}/{}", index_name, count_name)};
  }
  return {0, 1, "one shard"};
}

double digestSecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

ExitCode runDigest(const DigestOptions& options) {
  auto started = std::chrono::steady_clock::now();
  if (!options.compat.empty() && options.compat != "hta")
    throw UsageError(
        fmt::format("--compat '{}': the one tool gpuxray can match is hta (Holistic Trace Analysis)", options.compat));
  if (options.include_last_step && options.compat.empty())
    throw UsageError("--include-last-step goes with --compat hta (gpuxray's own figures never drop a step)");
  for (const auto& text : options.comm_kernels) {
    if (std::string error = model::addUserCommunicationKernel(text); !error.empty()) throw UsageError(error);
  }
  Shard shard = shardOf(options.shard);

  namespace fs = std::filesystem;
  std::error_code error;
  for (const auto& path : options.paths) {
    if (fs::is_directory(path, error) && fs::equivalent(path, options.output_dir, error))
      throw UsageError(
          fmt::format("-o {}: the digests go to a directory of their own, not among the traces", options.output_dir));
  }
  load::TraceFileSet set = load::discoverTraceFiles(options.paths);
  std::erase_if(set.files, [](const std::string& file) { return analysis::isDigestFileName(file); });
  std::sort(set.files.begin(), set.files.end());
  std::vector<std::string> mine;
  for (size_t i = shard.index; i < set.files.size(); i += shard.count) mine.push_back(set.files[i]);
  for (const auto& warning : set.warnings) fmt::print(stderr, "gpuxray: warning: {}\n", warning);
  if (mine.empty()) {
    fmt::print(stderr, "gpuxray digest: shard {}/{} ({}) has none of the {} trace files\n", shard.index, shard.count,
               shard.source, set.files.size());
    return ExitCode::kOk;
  }
  fs::create_directories(options.output_dir, error);
  if (error) throw InputError(fmt::format("{}: cannot create: {}", options.output_dir, error.message()));

  analysis::SessionOptions session_options;
  session_options.paths = mine;
  session_options.allow_mixed_runs = options.allow_mixed_runs;
  session_options.jobs = options.jobs;
  session_options.analysis.step_markers = options.step_markers;
  session_options.analysis.hta_compat = options.compat == "hta";
  session_options.analysis.include_last_step = options.include_last_step;
  session_options.comm_kernels = options.comm_kernels;
  showLoadProgressOnTerminal(session_options);
  std::string options_text = analysis::digestOptionsText(session_options.analysis, session_options.comm_kernels);

  std::atomic<size_t> written{0};
  std::atomic<uint64_t> bytes{0};
  model::RunTrace run =
      analysis::digestRanks(session_options, [&](const model::RankTrace& skeleton, const analysis::RankDigest& digest) {
        fs::path path = fs::path(options.output_dir) / analysis::digestFileName(skeleton.path);
        analysis::writeDigestFile(path.string(), skeleton, digest, options_text);
        std::error_code size_error;
        bytes += fs::file_size(path, size_error);
        ++written;
      });
  for (const auto& warning : run.warnings) fmt::print(stderr, "gpuxray: warning: {}\n", warning);
  fmt::print(stderr, "gpuxray digest: shard {}/{} ({}): {} of {} files digested into {} ({}, {:.2f} s)\n", shard.index,
             shard.count, shard.source, written.load(), mine.size(), options.output_dir,
             report::formatBytes(bytes.load()), digestSecondsSince(started));
  return written == mine.size() ? ExitCode::kOk : ExitCode::kBadInput;
}

}  // namespace

CommandAction addDigestCommand(CLI::App& app) {
  auto options = std::make_shared<DigestOptions>();
  CLI::App* command = app.add_subcommand(
      "digest",
      "Digest a run's ranks (analyze's per-rank phase) into files that `gpuxray analyze` reads; one shard "
      "of the files per process (--shard, or the launcher's rank and size)");
  command->add_option("paths", options->paths, "Trace files or directories of them (one run)")->required();
  command->add_option("-o,--output", options->output_dir, "Directory the digests are written to (created)")->required();
  command->add_option("--shard", options->shard,
                      "I/N: digest the files whose index in the sorted list is I modulo N (default: from "
                      "SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK/_SIZE or PMI_RANK/PMI_SIZE, else all)");
  command->add_option("-j,--jobs", options->jobs, "Files digested at once (default: one per core)");
  command->add_flag("--allow-mixed", options->allow_mixed_runs, "Accept files from different runs together");
  command->add_option("--step-marker", options->step_markers,
                      "As analyze's: regular expression for NVTX ranges that mark a step (analyze must be given the "
                      "same, or it reads the traces again)");
  command->add_option("--comm-kernel", options->comm_kernels, "As analyze's (repeatable)");
  command->add_option("--compat", options->compat, "hta: digest for analyze --compat hta");
  command->add_flag("--include-last-step", options->include_last_step, "With --compat hta, as analyze's");
  return [options] { return runDigest(*options); };
}

}  // namespace gpuxray::cli
