// `gpuxray export perfetto DIR -o out.pftrace` and `gpuxray export chrome-json DIR -o out.json`: the
// run's timeline, on one clock, without the report. The analyses still run, silently, so that what
// they found is drawn in (the findings tracks).


#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "analyzer/cli/commands.h"
#include "analyzer/cli/timeline_output.h"

namespace gpuxray::cli {
namespace {

struct ExportOptions {
  TimelineRequest request;
  std::string output;
  std::string also_chrome_json;
};

ExitCode runExport(const ExportOptions& options, bool perfetto) {
  TimelineRequest request = options.request;
  if (perfetto) {
    request.output.perfetto_path = options.output;
    request.output.chrome_json_path = options.also_chrome_json;
  } else {
    request.output.chrome_json_path = options.output;
  }
  exportRunTimeline(request, stdout);
  return ExitCode::kOk;
}

void addExportOptions(CLI::App* command, ExportOptions& options, bool perfetto) {
  command->add_option("paths", options.request.paths, "Trace files or directories of them (one run)")->required();
  command
      ->add_option(
          "-o,--output", options.output,
          perfetto ? "The Perfetto trace to write (e.g. run.pftrace)" : "The JSON file to write (e.g. run.json)")
      ->required();
  if (perfetto)
    command->add_option("--chrome-json", options.also_chrome_json, "Also write the same timeline as Chrome JSON");
  command->add_flag("--allow-mixed", options.request.allow_mixed_runs, "Accept files from different runs together");
  command->add_option("-j,--jobs", options.request.jobs, "Files loaded at once (default: one per core)");
  command->add_option("--ranks", options.request.ranks, "Write only these ranks, e.g. 0-7,12");
  command->add_option("--window", options.request.output.window,
                      "Write only this part of the run, from its start, e.g. 2s:2.5s");
  command->add_option("--steps", options.request.steps, "Write only these training steps, e.g. 10-12");
  command->add_flag("--no-align", options.request.no_align, "Leave every rank on its own clock");
  command->add_option("--step-marker", options.request.step_markers,
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
