// `gpuxray export perfetto DIR -o out.pftrace` and `gpuxray export chrome-json DIR -o out.json`: the
// run's timeline without the report. The analyses still run, silently, so that what they found is
// drawn in (the findings tracks).

#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/steps.h"
#include "analyzer/cli/commands.h"
#include "analyzer/cli/number_list.h"
#include "analyzer/cli/timeline_output.h"
#include "analyzer/errors.h"
#include "analyzer/load/run_loader.h"

namespace gpuxray::cli {
namespace {

struct ExportOptions {
  std::vector<std::string> paths;
  std::string output;
  std::string also_chrome_json;
  bool allow_mixed_runs = false;
  unsigned jobs = 0;
  std::vector<std::string> ranks;
  std::vector<std::string> steps;
  std::vector<std::string> step_markers;
  std::string window;
};

ExitCode runExport(const ExportOptions& options, bool perfetto) {
  TimelineOutput output;
  output.window = options.window;
  if (perfetto) {
    output.perfetto_path = options.output;
    output.chrome_json_path = options.also_chrome_json;
  } else {
    output.chrome_json_path = options.output;
  }

  load::LoadOptions load_options;
  load_options.allow_mixed_runs = options.allow_mixed_runs;
  load_options.threads = options.jobs;
  for (int64_t rank : parseNumberList(options.ranks, "--ranks"))
    load_options.ranks.push_back(static_cast<int32_t>(rank));
  if (isatty(STDERR_FILENO)) {
    load_options.progress = [](size_t done, size_t total) {
      if (total >= 4) fmt::print(stderr, "\rloading trace files: {}/{}{}", done, total, done == total ? "\n" : "");
    };
  }
  model::RunTrace run = load::loadRun(options.paths, load_options);
  for (const auto& warning : run.warnings) fmt::print(stderr, "gpuxray: warning: {}\n", warning);

  analysis::AnalysisInput input{run, {}, {}, "none", {}};
  input.options.step_markers = options.step_markers;
  input.options.steps = parseNumberList(options.steps, "--steps");
  analysis::findSteps(input);
  for (const auto& rank : run.ranks) input.time_sets.push_back(analysis::gpuTimeSetsOf(rank));
  report::Report report;
  analysis::runAnalyses(input, report);

  writeTimelines(input, report, output, input.options.steps, stdout);
  return ExitCode::kOk;
}

void addExportOptions(CLI::App* command, ExportOptions& options, bool perfetto) {
  command->add_option("paths", options.paths, "Trace files or directories of them (one run)")->required();
  command
      ->add_option(
          "-o,--output", options.output,
          perfetto ? "The Perfetto trace to write (e.g. run.pftrace)" : "The JSON file to write (e.g. run.json)")
      ->required();
  if (perfetto)
    command->add_option("--chrome-json", options.also_chrome_json, "Also write the same timeline as Chrome JSON");
  command->add_flag("--allow-mixed", options.allow_mixed_runs, "Accept files from different runs together");
  command->add_option("-j,--jobs", options.jobs, "Files loaded at once (default: one per core)");
  command->add_option("--ranks", options.ranks, "Write only these ranks, e.g. 0-7,12");
  command->add_option("--window", options.window, "Write only this part of the run, from its start, e.g. 2s:2.5s");
  command->add_option("--steps", options.steps, "Write only these training steps, e.g. 10-12");
  command->add_option("--step-marker", options.step_markers,
                      "Regular expression for NVTX ranges that mark a step (besides ProfilerStep#N)");
}

}  // namespace

CommandAction addExportCommand(CLI::App& app) {
  auto perfetto_options = std::make_shared<ExportOptions>();
  auto json_options = std::make_shared<ExportOptions>();
  CLI::App* command = app.add_subcommand("export", "Write a run's timeline for a trace viewer, without the report");
  command->require_subcommand(1);
  CLI::App* perfetto = command->add_subcommand(
      "perfetto", "Perfetto's native protobuf trace: open it in ui.perfetto.dev (trace_processor for big ones)");
  addExportOptions(perfetto, *perfetto_options, true);
  CLI::App* json = command->add_subcommand("chrome-json", "Chrome trace-event JSON, for tools that read only that");
  addExportOptions(json, *json_options, false);
  return [=] { return perfetto->parsed() ? runExport(*perfetto_options, true) : runExport(*json_options, false); };
}

}  // namespace gpuxray::cli
