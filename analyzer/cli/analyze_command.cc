// `gpuxray analyze DIR...`: prepares a run (gpuxray traces or PyTorch-profiler traces) through the
// session (one clock, --window, steps), runs every analysis and prints the report (text, JSON or
// Markdown). --fail-on thresholds turn findings into exit code 3; --compat hta gives Holistic Trace
// Analysis's figures; --perfetto / --chrome-json also write the run's timeline with the findings drawn in.

#include <fmt/core.h>

#include <cstdio>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/session.h"
#include "analyzer/analysis/thresholds.h"
#include "analyzer/cli/commands.h"
#include "analyzer/cli/load_progress.h"
#include "analyzer/cli/memory_limit.h"
#include "analyzer/cli/run_selection_options.h"
#include "analyzer/cli/timeline_output.h"
#include "analyzer/compare/report_reader.h"
#include "analyzer/errors.h"
#include "analyzer/model/communication_kernels.h"
#include "analyzer/report/html_report.h"
#include "analyzer/report/json_report.h"

namespace gpuxray::cli {
namespace {

struct AnalyzeOptions {
  std::vector<std::string> paths;
  std::string output_format = "text";
  bool allow_mixed_runs = false;
  bool no_align = false;
  unsigned jobs = 0;
  RunSelectionText selection;
  std::vector<std::string> step_markers;
  std::vector<std::string> fail_on;
  std::string baseline;
  size_t top = 10;
  std::string compat;
  bool include_last_step = false;
  bool critical_path = false;
  std::vector<std::string> comm_kernels;
  TimelineOutput timeline;
  std::string max_memory;
  std::string html_path;
};

// A large run's report is millions of small allocations (its typed results: a value per number), whose
// freeing took 70 ms of the 2.9 s that two workers take on a 64-rank run, on one thread after all else.
// The process ends next: it is left for the system to take back whole, held where leak checkers see it.
void leftForExit(report::Report report) {
  static auto* left = new std::vector<report::Report>();
  left->push_back(std::move(report));
}

ExitCode analyze(const AnalyzeOptions& options, uint64_t memory_limit) {
  if (options.output_format != "text" && options.output_format != "json" && options.output_format != "markdown")
    throw UsageError(fmt::format("--format '{}': expected text, json or markdown", options.output_format));
  if (!options.compat.empty() && options.compat != "hta")
    throw UsageError(
        fmt::format("--compat '{}': the one tool gpuxray can match is hta (Holistic Trace Analysis)", options.compat));
  if (options.include_last_step && options.compat.empty())
    throw UsageError("--include-last-step goes with --compat hta (gpuxray's own figures never drop a step)");
  if (!options.html_path.empty() && !report::htmlReportAvailable())
    throw UsageError(report::htmlReportUnavailableReason());
  std::vector<analysis::Threshold> thresholds;
  for (const auto& text : options.fail_on) thresholds.push_back(analysis::parseThreshold(text));
  for (const auto& text : options.comm_kernels) {
    if (std::string error = model::addUserCommunicationKernel(text); !error.empty()) throw UsageError(error);
  }

  std::optional<report::Report> baseline;
  if (!options.baseline.empty()) baseline = compare::readAnalyzeReport(options.baseline);

  analysis::SessionOptions session_options;
  session_options.paths = options.paths;
  session_options.allow_mixed_runs = options.allow_mixed_runs;
  session_options.jobs = options.jobs;
  // HTA compares ranks on their own clocks; so does --compat hta.
  session_options.align = !options.no_align && options.compat.empty();
  session_options.selection = options.selection.parse();
  session_options.analysis.step_markers = options.step_markers;
  session_options.analysis.top = options.top;
  session_options.analysis.hta_compat = options.compat == "hta";
  session_options.analysis.include_last_step = options.include_last_step;
  session_options.analysis.critical_path = options.critical_path;
  session_options.comm_kernels = options.comm_kernels;
  // Only the timeline needs every event: without it each rank is digested as it is read (with
  // --critical-path, its steps' graphs too).
  session_options.keep_events = options.timeline.wanted();
  session_options.memory_budget_bytes = memory_limit;
  // Text and Markdown show the sections only; the typed results are for JSON and the page.
  session_options.typed_results = options.output_format == "json" || !options.html_path.empty();
  session_options.timeline_marks = options.timeline.wanted();
  showLoadProgressOnTerminal(session_options);
  analysis::Session session(std::move(session_options));

  report::Report report = session.analyze();
  analysis::applyThresholds(thresholds, analysis::knownMetrics(), report, baseline ? &*baseline : nullptr);
  if (options.timeline.wanted()) report.stats.merge(writeTimelines(session, report, options.timeline, stderr));

  if (!options.html_path.empty()) writeHtmlReport(options.html_path, report);
  if (options.output_format == "json") {
    report::writeJson(report, stdout);
  } else {
    std::string rendered =
        options.output_format == "markdown" ? report::renderMarkdown(report) : report::renderText(report);
    std::fwrite(rendered.data(), 1, rendered.size(), stdout);
  }
  for (const auto& violation : report.violations) fmt::print(stderr, "gpuxray: threshold violated: {}\n", violation);
  ExitCode code = report.violations.empty() ? ExitCode::kOk : ExitCode::kThresholdExceeded;
  leftForExit(std::move(report));
  return code;
}

ExitCode runAnalyze(const AnalyzeOptions& options) {
  return withinMemoryLimit(options.max_memory, [&](uint64_t limit) { return analyze(options, limit); });
}

}  // namespace

CommandAction addAnalyzeCommand(CLI::App& app) {
  auto options = std::make_shared<AnalyzeOptions>();
  CLI::App* command = app.add_subcommand("analyze", "Find where a run's time goes and why: report for people and CI");
  command->add_option("paths", options->paths, "Trace files or directories of them (one run)")->required();
  command->add_option("--format", options->output_format, "text (default), json or markdown");
  command->add_flag("--allow-mixed", options->allow_mixed_runs, "Accept files from different runs together");
  command->add_flag("--no-align", options->no_align,
                    "Compare the ranks' times as recorded, without putting the hosts' clocks on one time base");
  command->add_option("-j,--jobs", options->jobs, "Files loaded at once (default: one per core)");
  addRunSelectionOptions(command, options->selection);
  command->add_option("--step-marker", options->step_markers,
                      "Regular expression for NVTX ranges that mark a step (besides ProfilerStep#N); a first capture "
                      "group gives the step number");
  command->add_option("--fail-on", options->fail_on,
                      "Exit with 3 when a metric crosses a threshold, e.g. exposed_comm_pct>20 (repeatable)");
  command->add_option(
      "--baseline", options->baseline,
      "A report of an earlier run (analyze --format json): --fail-on limits with a sign test the change "
      "against it, e.g. step_time_ms>+5% (relative) or exposed_comm_pct>+2 (absolute)");
  command->add_option("--top", options->top, "Rows in the top-N tables (default 10)");
  command->add_option("--comm-kernel", options->comm_kernels,
                      "REGEX[=OP]: kernels whose name matches count as communication (performing OP), besides the "
                      "libraries gpuxray knows (docs/analyses.md); repeatable");
  command->add_option("--compat", options->compat,
                      "hta: the time breakdown, overlap and idle time exactly as Holistic Trace Analysis 0.6.1 "
                      "computes them (whole-microsecond times, last ProfilerStep dropped, cuda_sync counted as busy)");
  command->add_flag("--include-last-step", options->include_last_step,
                    "With --compat hta: keep the last ProfilerStep (HTA's include_last_profiler_step=True)");
  command->add_flag("--critical-path", options->critical_path,
                    "Add each step's critical path, every nanosecond attributed to one cause (docs/analyses.md)");
  addMaxMemoryOption(command, options->max_memory);
  command->add_option(
      "--perfetto", options->timeline.perfetto_path,
      "Also write the run's timeline, findings drawn in, as a Perfetto trace (open in ui.perfetto.dev)");
  command->add_option("--chrome-json", options->timeline.chrome_json_path,
                      "Also write the timeline as Chrome trace-event JSON (for tools that read only that)");
  command->add_option("--html", options->html_path,
                      "Also write the X-ray, the report drawn as one self-contained HTML page (as `gpuxray report`)");
  return [options] { return runAnalyze(*options); };
}

}  // namespace gpuxray::cli
