#include "analyzer/cli/timeline_output.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include <unistd.h>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/clock_alignment.h"
#include "analyzer/analysis/steps.h"
#include "analyzer/cli/load_progress.h"
#include "analyzer/cli/number_list.h"
#include "analyzer/errors.h"
#include "analyzer/load/run_loader.h"
#include "analyzer/export/chrome_json_writer.h"
#include "analyzer/export/perfetto_writer.h"
#include "analyzer/export/timeline_export.h"
#include "analyzer/report/units.h"
#include "proto/trace_writer.h"

namespace gpuxray::cli {
namespace {

using report::Unit;

// The Perfetto UI runs in the browser with about 2 GB; a trace takes 2-4x its size there.
constexpr uint64_t kLargeForTheUi = 1ull << 30;

// "1.5s", "200ms", "30us", "100ns" -> nanoseconds.
int64_t parseDuration(const std::string& text, const std::string& option_text) {
  size_t number_end = 0;
  double value = 0;
  try {
    value = std::stod(text, &number_end);
  } catch (const std::exception&) {
    number_end = 0;
  }
  std::string unit = text.substr(number_end);
  double scale = unit == "ns" ? 1 : unit == "us" || unit == "µs" ? 1e3 : unit == "ms" ? 1e6 : unit == "s" ? 1e9 : 0;
  if (number_end == 0 || scale == 0 || !std::isfinite(value) || value < 0)
    throw UsageError(
        fmt::format("--window '{}': expected START:END from the run's start with units, e.g. 2s:2.5s "
                    "or 1500ms: (ns, us, ms, s)",
                    option_text));
  return static_cast<int64_t>(std::llround(value * scale));
}

std::string count(uint64_t n) {
  return report::formatValue(static_cast<double>(n), Unit::kCount);
}

}  // namespace

std::optional<analysis::Interval> timelineWindow(const analysis::AnalysisInput& input, const std::string& window,
                                                 const std::vector<int64_t>& steps) {
  std::optional<analysis::Interval> result;
  if (!window.empty()) {
    size_t colon = window.find(':');
    if (colon == std::string::npos) parseDuration("", window);  // throws with the expected form
    analysis::Interval span = timeline::runSpan(input.run);
    std::string first = window.substr(0, colon), last = window.substr(colon + 1);
    analysis::Interval w{span.start, std::numeric_limits<int64_t>::max()};
    if (!first.empty()) w.start = span.start + parseDuration(first, window);
    if (!last.empty()) w.end = span.start + parseDuration(last, window);
    if (w.end <= w.start) throw UsageError(fmt::format("--window '{}': the end must come after the start", window));
    result = w;
  }
  if (!steps.empty()) {
    analysis::Interval span{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
    for (const auto& rank_steps : input.steps) {
      for (const auto& step : rank_steps) {
        if (std::find(steps.begin(), steps.end(), step.number) == steps.end()) continue;
        span.start = std::min(span.start, step.window.start);
        span.end = std::max(span.end, step.window.end);
      }
    }
    if (span.start > span.end)
      throw UsageError(
          fmt::format("--steps: the run has no step with these numbers (steps from {})", input.step_source));
    if (result) {
      span = {std::max(span.start, result->start), std::min(span.end, result->end)};
      if (span.end <= span.start) throw UsageError("--window and --steps: the window holds none of the steps");
    }
    result = span;
  }
  return result;
}

report::Stats writeTimelines(const analysis::AnalysisInput& input, const report::Report& report,
                             const TimelineOutput& output, const std::vector<int64_t>& steps, std::FILE* out) {
  if (!output.perfetto_path.empty() && output.perfetto_path == output.chrome_json_path)
    throw UsageError("--perfetto and --chrome-json name the same file");
  timeline::ExportOptions options;
  options.window = timelineWindow(input, output.window, steps);

  std::unique_ptr<format::FileSink> perfetto_file, json_file;
  std::unique_ptr<timeline::PerfettoSink> perfetto;
  std::unique_ptr<timeline::ChromeJsonSink> json;
  std::vector<timeline::TimelineSink*> sinks;
  auto open = [](const std::string& path) {
    auto file = std::make_unique<format::FileSink>(path);
    if (!file->ok()) throw InputError(file->error());
    return file;
  };
  if (!output.perfetto_path.empty()) {
    perfetto_file = open(output.perfetto_path);
    perfetto = std::make_unique<timeline::PerfettoSink>(*perfetto_file);
    sinks.push_back(perfetto.get());
  }
  if (!output.chrome_json_path.empty()) {
    json_file = open(output.chrome_json_path);
    json = std::make_unique<timeline::ChromeJsonSink>(*json_file);
    sinks.push_back(json.get());
  }
  timeline::TeeSink tee(sinks);
  timeline::ExportSummary summary = timeline::exportTimeline(input.run, report, options, tee);

  std::vector<std::string> files;
  if (perfetto) {
    files.push_back(fmt::format("{} (Perfetto, {})", output.perfetto_path,
                                report::formatValue(static_cast<double>(perfetto->bytesWritten()), Unit::kBytes)));
  }
  if (json) {
    files.push_back(fmt::format("{} (Chrome JSON, {})", output.chrome_json_path,
                                report::formatValue(static_cast<double>(json->bytesWritten()), Unit::kBytes)));
  }
  const auto& run = input.run;
  fmt::print(out,
             "gpuxray: wrote {}: {} of {} ranks, {} tracks, {} slices, {} instants, {} counter values, {} flows, {} "
             "findings\n",
             files.size() == 2 ? files[0] + " and " + files[1] : files[0], summary.ranks,
             std::max<size_t>(static_cast<size_t>(run.world_size), summary.ranks), count(summary.tracks),
             count(summary.slices), count(summary.instants), count(summary.counter_values), count(summary.flows),
             count(summary.findings));

  using report::Stat;
  report::Stats omitted;
  if (options.window) {
    analysis::Interval span = timeline::runSpan(run);
    auto at = [&](int64_t t) {
      return t == std::numeric_limits<int64_t>::max()
                 ? std::string("the end")
                 : report::formatValue(static_cast<double>(t - span.start), Unit::kNanoseconds);
    };
    omitted.warn(Stat::export_outside_window, summary.outside_window,
                 fmt::format("{} records outside {} to {} from the run's start", count(summary.outside_window),
                             at(options.window->start), at(options.window->end)));
  }
  if (summary.flows_unmatched > 0)
    omitted.warn(Stat::export_flows_unmatched, summary.flows_unmatched,
                 fmt::format("{} flows whose other end was not written", count(summary.flows_unmatched)));
  if (summary.flows_backwards > 0)
    omitted.warn(Stat::export_flows_backwards, summary.flows_backwards,
                 fmt::format("{} flows whose target ended before the source began", count(summary.flows_backwards)));
  if (summary.too_many_overlaps > 0)
    omitted.warn(Stat::export_overlaps_dropped, summary.too_many_overlaps,
                 fmt::format("{} slices overlapping more than 31 others on one track",
                             count(summary.too_many_overlaps)));
  std::vector<std::string> left_out;
  if (run.world_size > static_cast<int32_t>(run.ranks.size()))
    left_out.push_back(fmt::format("{} ranks not loaded", run.world_size - static_cast<int32_t>(run.ranks.size())));
  for (const auto& line : omitted.lines()) left_out.push_back(line.text);
  if (!left_out.empty()) {
    std::string line;
    for (const auto& item : left_out) line += (line.empty() ? "" : "; ") + item;
    fmt::print(out, "gpuxray: left out: {}\n", line);
  }
  if (perfetto && perfetto->bytesWritten() > kLargeForTheUi) {
    fmt::print(
        out,
        "gpuxray: {} is large for the Perfetto UI in a browser: open it through `trace_processor_shell --httpd {}`, "
        "or write less with --ranks, --window or --steps\n",
        output.perfetto_path, output.perfetto_path);
  }
  return omitted;
}

void exportRunTimeline(const TimelineRequest& request, std::FILE* out) {
  load::LoadOptions load_options;
  load_options.allow_mixed_runs = request.allow_mixed_runs;
  load_options.threads = request.jobs;
  for (int64_t rank : parseNumberList(request.ranks, "--ranks")) load_options.ranks.push_back(static_cast<int32_t>(rank));
  showLoadProgressOnTerminal(load_options);
  model::RunTrace run = load::loadRun(request.paths, load_options);
  for (const auto& warning : run.warnings) fmt::print(stderr, "gpuxray: warning: {}\n", warning);
  std::optional<analysis::ClockAlignment> clock;
  if (!request.no_align) clock = analysis::alignClocks(run);

  analysis::AnalysisInput input{run, {}, {}, "none", {}};
  if (clock) {
    input.clock = &*clock;
    input.collective_index = clock->matches;
  }
  input.options.step_markers = request.step_markers;
  input.options.steps = parseNumberList(request.steps, "--steps");
  analysis::findSteps(input);
  for (const auto& rank : run.ranks) input.time_sets.push_back(analysis::gpuTimeSetsOf(rank));
  report::Report report;
  analysis::runAnalyses(input, report);
  writeTimelines(input, report, request.output, input.options.steps, out);
}

}  // namespace gpuxray::cli
