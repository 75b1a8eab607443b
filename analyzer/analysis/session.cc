#include "analyzer/analysis/session.h"

#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/steps.h"
#include "analyzer/errors.h"
#include "analyzer/load/run_loader.h"
#include "analyzer/report/stats.h"

namespace gpuxray::analysis {
namespace {

model::RunTrace loadSelected(const SessionOptions& options) {
  load::LoadOptions load_options;
  load_options.allow_mixed_runs = options.allow_mixed_runs;
  load_options.threads = options.jobs;
  load_options.ranks = options.selection.ranks;
  load_options.progress = options.progress;
  return load::loadRun(options.paths, load_options);
}

report::RunSummary summarize(const AnalysisInput& input) {
  report::RunSummary summary;
  const auto& run = input.run;
  summary.run_id = run.run_id;
  summary.world_size = run.world_size;
  summary.records = run.records();
  int64_t first = 0, last = 0;
  bool any = false;
  for (const auto& rank : run.ranks) {
    summary.ranks.push_back(rank.rank);
    if (std::find(summary.hosts.begin(), summary.hosts.end(), rank.header.hostname) == summary.hosts.end())
      summary.hosts.push_back(rank.header.hostname);
    Interval span = AnalysisInput::gpuSpan(rank);
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

}  // namespace

Session::Session(SessionOptions options) : Session(loadSelected(options), options) {}

Session::Session(model::RunTrace run, SessionOptions options)
    : options_(std::move(options)), run_(std::move(run)), input_{run_, options_.analysis, {}, "none", {}} {
  prepare();
}

void Session::prepare() {
  if (options_.align) {
    clock_ = alignClocks(run_);
    input_.clock = &*clock_;
  }
  window_origin_ns_ = run_.firstActivityNs();
  if (std::optional<Interval> kept = window()) {
    outside_window_ = run_.keepWindow(kept->start, kept->end);
    report::warn(run_.stats, run_.warnings, report::Stat::window_records_left_out, outside_window_,
                 fmt::format("--window {}: {} records outside it left out", options_.selection.window->text,
                             outside_window_));
  }
  // Alignment matched the operations before the window dropped some; without it they are matched
  // on first use, on what is kept.
  if (clock_ && !options_.selection.window) input_.collective_index = clock_->matches;
  input_.options.steps = options_.selection.steps;
  findSteps(input_);
  input_.time_sets.reserve(run_.ranks.size());
  for (const auto& rank : run_.ranks) input_.time_sets.push_back(gpuTimeSetsOf(rank));
}

std::optional<Interval> Session::window() const {
  const auto& window = options_.selection.window;
  if (!window) return std::nullopt;
  // An open end stays open: the origin (ns since 1970) plus kOpenEnd would overflow.
  auto at = [&](int64_t offset) {
    bool overflows = window_origin_ns_ > 0 && offset > std::numeric_limits<int64_t>::max() - window_origin_ns_;
    return overflows ? std::numeric_limits<int64_t>::max() : window_origin_ns_ + offset;
  };
  return Interval{at(window->from_ns),
                  window->to_ns == TimeWindow::kOpenEnd ? std::numeric_limits<int64_t>::max() : at(window->to_ns)};
}

std::optional<Interval> Session::timelineWindow() const {
  std::optional<Interval> result = window();
  const auto& steps = options_.selection.steps;
  if (steps.empty()) return result;
  Interval span{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  for (const auto& rank_steps : input_.steps) {
    for (const auto& step : rank_steps) {
      if (std::find(steps.begin(), steps.end(), step.number) == steps.end()) continue;
      span.start = std::min(span.start, step.window.start);
      span.end = std::max(span.end, step.window.end);
    }
  }
  if (span.start > span.end && result)
    throw UsageError(fmt::format("--steps: no step with these numbers reaches into --window {} (steps from {})",
                                 options_.selection.window->text, input_.step_source));
  if (span.start > span.end)
    throw UsageError(
        fmt::format("--steps: the run has no step with these numbers (steps from {})", input_.step_source));
  if (result) {
    span = {std::max(span.start, result->start), std::min(span.end, result->end)};
    if (span.end <= span.start) throw UsageError("--window and --steps: the window holds none of the steps");
  }
  return span;
}

report::Report Session::analyze() const {
  report::Report report;
  report.run = summarize(input_);
  report.warnings = run_.warnings;
  report.stats = run_.stats;
  runAnalyses(input_, report);
  return report;
}

}  // namespace gpuxray::analysis
