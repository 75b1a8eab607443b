// `gpuxray diff BEFORE AFTER`: compares two runs (each a run directory or trace files, analyzed now
// through the session, or an `analyze --format json` report) on their typed results and metrics: step
// time and throughput, metrics, kernels and ops, memory peak, findings. --fail-on tests AFTER's metrics,
// and their change against BEFORE, as `analyze --baseline` does.

#include <fmt/core.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/session.h"
#include "analyzer/analysis/thresholds.h"
#include "analyzer/cli/commands.h"
#include "analyzer/compare/report_reader.h"
#include "analyzer/compare/run_comparison.h"
#include "analyzer/errors.h"
#include "analyzer/report/html_report.h"
#include "analyzer/report/report.h"

namespace gpuxray::cli {
namespace {

struct DiffOptions {
  std::string before, after;
  std::string output_format = "text";
  std::string html_path;
  std::vector<std::string> fail_on;
  std::vector<std::string> step_markers;
  size_t top = 10;
  unsigned jobs = 0;
  bool allow_mixed_runs = false;
};

bool isRegularDiffInput(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool isReportSide(const std::string& path) {
  return isRegularDiffInput(path) && compare::isAnalyzeReport(path);
}

compare::ComparisonSide loadDiffSide(const std::string& path, const DiffOptions& options, unsigned jobs) {
  compare::ComparisonSide side;
  side.label = path;
  if (isReportSide(path)) {
    side.kind = "report";
    side.report = compare::readAnalyzeReport(path);
    return side;
  }
  analysis::SessionOptions session_options;
  session_options.paths = {path};
  session_options.allow_mixed_runs = options.allow_mixed_runs;
  session_options.jobs = jobs;
  session_options.analysis.step_markers = options.step_markers;
  session_options.analysis.top = options.top;
  session_options.keep_events = false;  // the analyses read digests: memory bounded by the loading workers
  session_options.timeline_marks = false;
  analysis::Session session(std::move(session_options));
  side.kind = "run";
  side.report = session.analyze();
  return side;
}

// The X-ray of the comparison: the diff document with both sides' reports as the page draws them.
void writeDiffPage(const std::string& path, const compare::RunComparison& comparison,
                   const compare::ComparisonSide& before, const compare::ComparisonSide& after) {
  std::string document =
      fmt::format(R"({{"schema": "gpuxray.diff_page", "schema_version": 1, "diff": {}, "before": {}, "after": {}}})",
                  compare::renderComparisonJson(comparison), report::renderJson(report::fitForPage(before.report)),
                  report::renderJson(report::fitForPage(after.report)));
  report::writeHtml(path, document, fmt::format("gpuxray diff: {} -> {}", before.label, after.label));
  fmt::print(stderr, "gpuxray: wrote {} (open it in a browser; it needs no network)\n", path);
}

ExitCode runDiff(const DiffOptions& options) {
  if (options.output_format != "text" && options.output_format != "json" && options.output_format != "markdown")
    throw UsageError(fmt::format("--format '{}': expected text, json or markdown", options.output_format));
  std::vector<analysis::Threshold> thresholds;
  for (const auto& text : options.fail_on) thresholds.push_back(analysis::parseThreshold(text));
  if (!options.html_path.empty() && !report::htmlReportAvailable())
    throw UsageError(report::htmlReportUnavailableReason());

  // The two sides are independent: analyzed at the same time. By default two runs share the cores
  // (one worker per core in all): two full pools on the same cores cost about 15 % more CPU time.
  unsigned jobs = options.jobs;
  if (jobs == 0 && !isReportSide(options.before) && !isReportSide(options.after))
    jobs = std::max(1u, std::thread::hardware_concurrency() / 2);
  auto before_future = std::async(std::launch::async, [&] { return loadDiffSide(options.before, options, jobs); });
  compare::ComparisonSide after = loadDiffSide(options.after, options, jobs);
  compare::ComparisonSide before = before_future.get();

  compare::RunComparison comparison = compare::compareRuns(before, after);
  analysis::applyThresholds(thresholds, analysis::knownMetrics(), after.report, &before.report);
  for (const auto& warning : comparison.warnings) fmt::print(stderr, "gpuxray: warning: {}\n", warning);

  std::string rendered = options.output_format == "json" ? compare::renderComparisonJson(comparison)
                         : options.output_format == "markdown"
                             ? compare::renderComparisonMarkdown(comparison, options.top)
                             : compare::renderComparisonText(comparison, options.top);
  std::fwrite(rendered.data(), 1, rendered.size(), stdout);
  if (!options.html_path.empty()) writeDiffPage(options.html_path, comparison, before, after);
  for (size_t i = 0; i < after.report.warnings.size(); ++i) {
    if (after.report.warnings[i].starts_with("--fail-on"))
      fmt::print(stderr, "gpuxray: warning: {}\n", after.report.warnings[i]);
  }
  if (!after.report.violations.empty()) {
    for (const auto& violation : after.report.violations)
      fmt::print(stderr, "gpuxray: threshold violated: {}\n", violation);
    return ExitCode::kThresholdExceeded;
  }
  return ExitCode::kOk;
}

}  // namespace

CommandAction addDiffCommand(CLI::App& app) {
  auto options = std::make_shared<DiffOptions>();
  CLI::App* command = app.add_subcommand(
      "diff", "Compare two runs (run directories or analyze --format json reports): before and after");
  command
      ->add_option("before", options->before,
                   "The run before the change: a run directory, trace files' directory or report")
      ->required();
  command->add_option("after", options->after, "The run after the change")->required();
  command->add_option("--format", options->output_format, "text (default), json or markdown");
  command->add_option("--html", options->html_path,
                      "Also write the comparison as one self-contained HTML page (the X-ray of before and after)");
  command->add_option("--fail-on", options->fail_on,
                      "Exit with 3 when AFTER's metric crosses a threshold or changed too much against BEFORE, e.g. "
                      "step_time_ms>+5% or exposed_comm_pct>+2 (repeatable)");
  command->add_option(
      "--step-marker", options->step_markers,
      "Regular expression for NVTX ranges that mark a step (besides ProfilerStep#N), for runs analyzed now");
  command->add_option("--top", options->top, "Rows in the kernel and op tables (default 10)");
  command->add_option("-j,--jobs", options->jobs,
                      "Files loaded at once per side (default: the cores split between the two sides)");
  command->add_flag("--allow-mixed", options->allow_mixed_runs,
                    "Accept files from different runs together within a side");
  return [options] { return runDiff(*options); };
}

}  // namespace gpuxray::cli
