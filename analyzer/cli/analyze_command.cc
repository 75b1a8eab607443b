// `gpuxray analyze DIR...`: loads the ranks of a run (gpuxray traces or PyTorch-profiler traces),
// puts them on one clock, finds its steps, runs every analysis and prints the report (text, JSON or
// Markdown). --fail-on thresholds turn findings into exit code 3; --compat hta gives Holistic Trace
// Analysis's figures; --perfetto / --chrome-json also write the run's timeline with the findings drawn in.

#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/clock_alignment.h"
#include "analyzer/analysis/steps.h"
#include "analyzer/analysis/thresholds.h"
#include "analyzer/cli/commands.h"
#include "analyzer/cli/load_progress.h"
#include "analyzer/cli/memory_limit.h"
#include "analyzer/cli/number_list.h"
#include "analyzer/cli/timeline_output.h"
#include "analyzer/errors.h"
#include "analyzer/load/run_loader.h"
#include "analyzer/model/communication_kernels.h"

namespace gpuxray::cli {
namespace {

struct AnalyzeOptions {
  std::vector<std::string> paths;
  std::string output_format = "text";
  bool allow_mixed_runs = false;
  bool no_align = false;
  unsigned jobs = 0;
  std::vector<std::string> ranks;
  std::vector<std::string> steps;
  std::vector<std::string> step_markers;
  std::vector<std::string> fail_on;
  std::string window;
  size_t top = 10;
  std::string compat;
  bool include_last_step = false;
  std::vector<std::string> comm_kernels;
  TimelineOutput timeline;
  std::string max_memory;
};

// "1.5:4", "200ms:1.2s" -> [start, end) in ns from the run's first GPU activity; a number without a
// unit is seconds, and either side may be empty ("2:" = from 2 s on).
std::pair<int64_t, int64_t> parseWindow(const std::string& text) {
  auto nanoseconds = [](const std::string& part, double fallback) {
    if (part.empty()) return fallback;
    size_t used = 0;
    double value = std::stod(part, &used);
    std::string unit = part.substr(used);
    double scale = unit.empty() || unit == "s" ? 1e9 : unit == "ms" ? 1e6 : unit == "us" ? 1e3 : unit == "ns" ? 1.0 : -1.0;
    if (scale < 0 || value < 0) throw std::invalid_argument(part);
    return value * scale;
  };
  try {
    size_t colon = text.find(':');
    if (colon == std::string::npos) throw std::invalid_argument(text);
    double start = nanoseconds(text.substr(0, colon), 0);
    double end = nanoseconds(text.substr(colon + 1), 9e18);
    if (end <= start) throw std::invalid_argument(text);
    return {static_cast<int64_t>(start), static_cast<int64_t>(std::min(end, 9e18))};
  } catch (const std::exception&) {
    throw UsageError(fmt::format(
        "--window '{}': expected START:END from the first GPU activity, in s (default), ms, us or ns, e.g. 10:20 or 200ms:1.2s",
        text));
  }
}

report::RunSummary summarize(const analysis::AnalysisInput& input) {
  report::RunSummary summary;
  const auto& run = input.run;
  summary.run_id = run.run_id;
  summary.world_size = run.world_size;
  summary.records = run.records();
  int64_t first = 0, last = 0;
  bool any = false;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const auto& rank = run.ranks[r];
    summary.ranks.push_back(rank.rank);
    if (std::find(summary.hosts.begin(), summary.hosts.end(), rank.header.hostname) == summary.hosts.end())
      summary.hosts.push_back(rank.header.hostname);
    analysis::Interval span = analysis::AnalysisInput::gpuSpan(rank);
    if (span.length() <= 0) continue;
    first = any ? std::min(first, span.start) : span.start;
    last = any ? std::max(last, span.end) : span.end;
    any = true;
  }
  summary.span_ns = last - first;
  size_t steps = 0;
  for (const auto& s : input.steps) steps = std::max(steps, s.size());
  summary.steps = steps;
  summary.step_source = input.step_source;
  return summary;
}

ExitCode analyze(const AnalyzeOptions& options) {
  if (options.output_format != "text" && options.output_format != "json" && options.output_format != "markdown")
    throw UsageError(fmt::format("--format '{}': expected text, json or markdown", options.output_format));
  if (!options.compat.empty() && options.compat != "hta")
    throw UsageError(fmt::format("--compat '{}': the one tool gpuxray can match is hta (Holistic Trace Analysis)", options.compat));
  if (options.include_last_step && options.compat.empty())
    throw UsageError("--include-last-step goes with --compat hta (gpuxray's own figures never drop a step)");
  std::vector<analysis::Threshold> thresholds;
  for (const auto& text : options.fail_on) thresholds.push_back(analysis::parseThreshold(text));
  for (const auto& text : options.comm_kernels) {
    if (std::string error = model::addUserCommunicationKernel(text); !error.empty()) throw UsageError(error);
  }

  load::LoadOptions load_options;
  load_options.allow_mixed_runs = options.allow_mixed_runs;
  load_options.threads = options.jobs;
  for (int64_t rank : parseNumberList(options.ranks, "--ranks")) load_options.ranks.push_back(static_cast<int32_t>(rank));
  showLoadProgressOnTerminal(load_options);
  model::RunTrace run = load::loadRun(options.paths, load_options);
  std::optional<analysis::ClockAlignment> clock;
  // HTA compares ranks on their own clocks; so does --compat hta.
  if (!options.no_align && options.compat.empty()) clock = analysis::alignClocks(run);
  if (!options.window.empty()) {
    auto [from, to] = parseWindow(options.window);
    int64_t origin = run.firstActivityNs();
    uint64_t dropped = run.keepWindow(origin + from, origin + to);
    report::warn(run.stats, run.warnings, report::Stat::window_records_left_out, dropped,
                 fmt::format("--window {}: {} records outside it left out", options.window, dropped));
  }

  analysis::AnalysisInput input{run, {}, {}, "none", {}};
  if (clock) {
    input.clock = &*clock;
    // Matched before the window dropped operations; rebuilt on first use otherwise.
    if (options.window.empty()) input.collective_index = clock->matches;
  }
  input.options.step_markers = options.step_markers;
  input.options.steps = parseNumberList(options.steps, "--steps");
  input.options.top = options.top;
  input.options.hta_compat = options.compat == "hta";
  input.options.include_last_step = options.include_last_step;
  analysis::findSteps(input);
  for (const auto& rank : run.ranks) input.time_sets.push_back(analysis::gpuTimeSetsOf(rank));

  report::Report report;
  report.run = summarize(input);
  report.warnings = run.warnings;
  report.stats = run.stats;
  analysis::runAnalyses(input, report);
  analysis::applyThresholds(thresholds, analysis::knownMetrics(), report);
  if (options.timeline.wanted())
    report.stats.merge(writeTimelines(input, report, options.timeline, input.options.steps, stderr));

  std::string rendered = options.output_format == "json"       ? report::renderJson(report)
                         : options.output_format == "markdown" ? report::renderMarkdown(report)
                                                               : report::renderText(report);
  std::fwrite(rendered.data(), 1, rendered.size(), stdout);
  if (!report.violations.empty()) {
    for (const auto& violation : report.violations) fmt::print(stderr, "gpuxray: threshold violated: {}\n", violation);
    return ExitCode::kThresholdExceeded;
  }
  return ExitCode::kOk;
}

// Within --max-memory: past it, allocations fail and the command ends with an error saying so.
ExitCode runAnalyze(const AnalyzeOptions& options) {
  uint64_t limit = options.max_memory.empty() ? defaultMemoryLimit() : parseMemorySize(options.max_memory, "--max-memory");
  limitMemory(limit);
  try {
    return analyze(options);
  } catch (const std::bad_alloc&) {
    throw InputError(fmt::format("the run needs more than {} of memory (--max-memory); give a larger limit, or "
                                 "analyze part of it with --ranks or --window", memorySizeText(limit)));
  }
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
  command->add_option("--ranks", options->ranks, "Analyze only these ranks, e.g. 0-7,12");
  command->add_option("--steps", options->steps, "Per-step figures over these step numbers only, e.g. 10-20");
  command->add_option("--step-marker", options->step_markers,
                      "Regular expression for NVTX ranges that mark a step (besides ProfilerStep#N); a first capture "
                      "group gives the step number");
  command->add_option("--fail-on", options->fail_on,
                      "Exit with 3 when a metric crosses a threshold, e.g. exposed_comm_pct>20 (repeatable)");
  command->add_option("--window", options->window,
                      "Analyze (and draw) only START:END from the run's first GPU activity, e.g. 10:20 (seconds) or "
                      "200ms:1.2s");
  command->add_option("--top", options->top, "Rows in the top-N tables (default 10)");
  command->add_option("--comm-kernel", options->comm_kernels,
                      "REGEX[=OP]: kernels whose name matches count as communication (performing OP), besides the "
                      "libraries gpuxray knows (docs/analyses.md); repeatable");
  command->add_option("--compat", options->compat,
                      "hta: the time breakdown, overlap and idle time exactly as Holistic Trace Analysis 0.6.1 "
                      "computes them (whole-microsecond times, last ProfilerStep dropped, cuda_sync counted as busy)");
  command->add_flag("--include-last-step", options->include_last_step,
                    "With --compat hta: keep the last ProfilerStep (HTA's include_last_profiler_step=True)");
  command->add_option("--max-memory", options->max_memory,
                      "Stop with an error rather than use more memory than this, e.g. 16G (default: 3/4 of RAM; 0: no "
                      "limit)");
  command->add_option("--perfetto", options->timeline.perfetto_path,
                      "Also write the run's timeline, findings drawn in, as a Perfetto trace (open in ui.perfetto.dev)");
  command->add_option("--chrome-json", options->timeline.chrome_json_path,
                      "Also write the timeline as Chrome trace-event JSON (for tools that read only that)");
  return [options] { return runAnalyze(*options); };
}

}  // namespace gpuxray::cli
