// `gpuxray convert PATH... -o DIR`: reads a run (PyTorch-profiler traces, or gpuxray files) and writes
// one gpuxray trace file per rank into DIR, which `gpuxray analyze DIR` then loads many times faster.
// `-o FILE.pftrace` (or `FILE.json`) writes the run's merged timeline instead, as `gpuxray export` does.

#include <fmt/core.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "analyzer/cli/commands.h"
#include "analyzer/cli/run_selection_options.h"
#include "analyzer/cli/timeline_output.h"
#include "analyzer/errors.h"
#include "analyzer/load/rank_writer.h"
#include "analyzer/load/run_loader.h"
#include "analyzer/report/units.h"
#include "proto/file_layout.h"

namespace gpuxray::cli {
namespace {

struct ConvertOptions {
  std::vector<std::string> paths;
  std::string output;
  bool allow_mixed_runs = false;
  unsigned jobs = 0;
  RunSelectionText selection;
};

bool endsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

ExitCode runConvert(const ConvertOptions& options) {
  namespace fs = std::filesystem;
  analysis::RunSelection selection = options.selection.parse();
  if (endsWith(options.output, ".pftrace") || endsWith(options.output, ".perfetto-trace") ||
      endsWith(options.output, ".json")) {
    TimelineOutput output;
    (endsWith(options.output, ".json") ? output.chrome_json_path : output.perfetto_path) = options.output;
    analysis::SessionOptions session;
    session.paths = options.paths;
    session.allow_mixed_runs = options.allow_mixed_runs;
    session.jobs = options.jobs;
    session.selection = selection;
    exportRunTimeline(std::move(session), output, stdout);
    return ExitCode::kOk;
  }
  // The rank files are written as recorded, on their own clocks: a window or steps would need the
  // run's clock, which only a timeline has.
  if (selection.window || !selection.steps.empty())
    throw UsageError("--window and --steps go with a timeline output (-o FILE.pftrace or FILE.json); converting to "
                     "rank files takes --ranks only");
  std::error_code error;
  fs::create_directories(options.output, error);
  if (error) throw InputError(fmt::format("{}: cannot create the directory: {}", options.output, error.message()));
  for (const auto& entry : fs::directory_iterator(options.output, error)) {
    if (entry.path().extension() == format::kTraceFileExtension)
      throw UsageError(fmt::format("{}: already holds gpuxray traces; give an empty directory", options.output));
  }
  load::LoadOptions load_options;
  load_options.allow_mixed_runs = options.allow_mixed_runs;
  load_options.threads = options.jobs;
  load_options.ranks = selection.ranks;
  model::RunTrace run = load::loadRun(options.paths, load_options);
  for (const auto& warning : run.warnings) fmt::print(stderr, "gpuxray: warning: {}\n", warning);
  uint64_t read = 0, written = 0;
  for (const auto& rank : run.ranks) {
    std::string path = (fs::path(options.output) / format::traceFileName(rank.rank, rank.header.hostname, rank.header.pid)).string();
    load::WrittenFile file = load::writeRankTrace(rank, path, rank.path);
    std::error_code ignored;
    uint64_t source = fs::file_size(rank.path, ignored);
    read += ignored ? 0 : source;
    written += file.bytes;
    fmt::print("{} -> {} ({} records, {} from {})\n", rank.path, path, report::formatCount(file.records),
               report::formatBytes(file.bytes), report::formatBytes(ignored ? 0 : source));
  }
  fmt::print("{} rank{} converted: {} from {}\n", run.ranks.size(), run.ranks.size() == 1 ? "" : "s",
             report::formatBytes(written), report::formatBytes(read));
  return ExitCode::kOk;
}

}  // namespace

CommandAction addConvertCommand(CLI::App& app) {
  auto options = std::make_shared<ConvertOptions>();
  CLI::App* command = app.add_subcommand("convert", "Write a run (PyTorch-profiler traces) as gpuxray trace files, one per rank, or as one Perfetto "
                                      "timeline (-o FILE.pftrace; FILE.json for Chrome JSON)");
  command->add_option("paths", options->paths, "Trace files or directories of them (one run)")->required();
  command->add_option("-o,--output", options->output, "Directory for the gpuxray files (created; must hold none yet), or FILE.pftrace / FILE.json for the timeline")->required();
  command->add_flag("--allow-mixed", options->allow_mixed_runs, "Accept files from different runs together");
  command->add_option("-j,--jobs", options->jobs, "Files read at once (default: one per core)");
  addRunSelectionOptions(command, options->selection);
  return [options] { return runConvert(*options); };
}

}  // namespace gpuxray::cli
