// `gpuxray export perfetto DIR -o out.pftrace` and `gpuxray export chrome-json DIR -o out.json`: the
// run's timeline, on one clock, without the report. The analyses still run, silently, so that what
// they found is drawn in (the findings tracks; with --critical-path, each step's path).

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "analyzer/cli/commands.h"
#include "analyzer/cli/memory_limit.h"
#include "analyzer/cli/run_selection_options.h"
#include "analyzer/cli/timeline_output.h"

namespace gpuxray::cli {
namespace {

struct ExportOptions {
  std::vector<std::string> paths;
  bool allow_mixed_runs = false;
  unsigned jobs = 0;
  RunSelectionText selection;
  std::vector<std::string> step_markers;
  bool no_align = false;
  bool critical_path = false;
  std::string output;
  std::string also_chrome_json;
  std::string max_memory;
};

// A timeline keeps every rank's events: within --max-memory.
ExitCode runExport(const ExportOptions& options, bool perfetto, uint64_t memory_limit) {
  TimelineOutput output;
  if (perfetto) {
    output.perfetto_path = options.output;
    output.chrome_json_path = options.also_chrome_json;
  } else {
    output.chrome_json_path = options.output;
  }
  analysis::SessionOptions session;
  session.paths = options.paths;
  session.allow_mixed_runs = options.allow_mixed_runs;
  session.jobs = options.jobs;
  session.align = !options.no_align;
  session.selection = options.selection.parse();
  session.analysis.step_markers = options.step_markers;
  session.analysis.critical_path = options.critical_path;
  session.memory_budget_bytes = memory_limit;
  exportRunTimeline(std::move(session), output, stdout);
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
  addRunSelectionOptions(command, options.selection);
  command->add_flag("--no-align", options.no_align, "Leave every rank on its own clock");
  command->add_option("--step-marker", options.step_markers,
                      "Regular expression for NVTX ranges that mark a step (besides ProfilerStep#N)");
  addMaxMemoryOption(command, options.max_memory);
  command->add_flag("--critical-path", options.critical_path,
                    "Add a \"critical path\" track: each step's critical path, with arrows where it crosses ranks");
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
  return [=] {
    const ExportOptions& options = perfetto->parsed() ? *perfetto_options : *json_options;
    return withinMemoryLimit(options.max_memory,
                             [&](uint64_t limit) { return runExport(options, perfetto->parsed(), limit); });
  };
}

}  // namespace gpuxray::cli
