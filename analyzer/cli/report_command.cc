// `gpuxray report DIR... -o report.html`: the X-ray of a run (gpuxray traces, a simulated run or
// PyTorch-profiler traces), prepared and analyzed by the session as `analyze` does, drawn as one
// self-contained HTML page (docs/html-report.md) that opens offline.

#include <fmt/core.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/analysis/session.h"
#include "analyzer/cli/commands.h"
#include "analyzer/cli/load_progress.h"
#include "analyzer/cli/memory_limit.h"
#include "analyzer/cli/run_selection_options.h"
#include "analyzer/errors.h"
#include "analyzer/report/html_report.h"
#include "analyzer/report/report.h"

namespace gpuxray::cli {
namespace {

struct ReportOptions {
  std::vector<std::string> paths;
  std::string output;
  bool allow_mixed_runs = false;
  bool no_align = false;
  unsigned jobs = 0;
  RunSelectionText selection;
  std::vector<std::string> step_markers;
  size_t top = 10;
  bool critical_path = false;
  std::string max_memory;
};

ExitCode runReport(const ReportOptions& options, uint64_t memory_limit) {
  // Before loading: a build without the page's script says so at once.
  if (!report::htmlReportAvailable()) throw UsageError(report::htmlReportUnavailableReason());
  analysis::SessionOptions session_options;
  session_options.paths = options.paths;
  session_options.allow_mixed_runs = options.allow_mixed_runs;
  session_options.jobs = options.jobs;
  session_options.align = !options.no_align;
  session_options.selection = options.selection.parse();
  session_options.analysis.step_markers = options.step_markers;
  session_options.analysis.top = options.top;
  session_options.analysis.critical_path = options.critical_path;
  // The analyses read digests, memory bounded by the loading workers.
  session_options.keep_events = false;
  session_options.memory_budget_bytes = memory_limit;
  session_options.timeline_marks = false;  // no timeline: nothing draws them
  showLoadProgressOnTerminal(session_options);
  analysis::Session session(std::move(session_options));
  report::Report report = session.analyze();
  writeHtmlReport(options.output, std::move(report));
  fmt::print(stderr, "gpuxray: wrote {} (open it in a browser; it needs no network)\n", options.output);
  return ExitCode::kOk;
}

}  // namespace

void writeHtmlReport(const std::string& path, report::Report report) {
  const std::string title = fmt::format("gpuxray X-ray: {}", report.run.run_id);
  report::writeHtml(path, std::move(report), title);
}

CommandAction addReportCommand(CLI::App& app) {
  auto options = std::make_shared<ReportOptions>();
  CLI::App* command =
      app.add_subcommand("report", "Draw a run's analysis as one self-contained HTML page (the X-ray), for a browser");
  command->add_option("paths", options->paths, "Trace files or directories of them (one run)")->required();
  command->add_option("-o,--output", options->output, "The HTML file to write")->required();
  command->add_flag("--allow-mixed", options->allow_mixed_runs, "Accept files from different runs together");
  command->add_flag("--no-align", options->no_align,
                    "Compare the ranks' times as recorded, without putting the hosts' clocks on one time base");
  command->add_option("-j,--jobs", options->jobs, "Files loaded at once (default: one per core)");
  addRunSelectionOptions(command, options->selection);
  command->add_option("--step-marker", options->step_markers,
                      "Regular expression for NVTX ranges that mark a step (besides ProfilerStep#N)");
  command->add_option("--top", options->top, "Rows in the top-N tables (default 10)");
  command->add_flag("--critical-path", options->critical_path,
                    "Rank the findings by what fixing each would save per step (the critical path's what-if)");
  addMaxMemoryOption(command, options->max_memory);
  return [options] {
    return withinMemoryLimit(options->max_memory, [&](uint64_t limit) { return runReport(*options, limit); });
  };
}

}  // namespace gpuxray::cli
