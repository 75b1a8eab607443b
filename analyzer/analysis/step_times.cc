// Step times: per step number, the slowest rank's length of it; the median over the steps.

#include "analyzer/analysis/step_times.h"

#include <fmt/core.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "analyzer/analysis/statistics.h"

namespace gpuxray::analysis {

using report::Cell;
using report::ResultValue;
using report::Unit;

std::optional<int64_t> tokensPerStepOfSimulation(const std::string& simulation_inputs) {
  if (simulation_inputs.empty()) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(simulation_inputs, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto number = [](const nlohmann::json& parent, const char* key) -> int64_t {
    if (!parent.is_object()) return 0;
    auto it = parent.find(key);
    return it != parent.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
  };
  const auto strategy = j.value("strategy", nlohmann::json::object());
  const auto model = j.value("model", nlohmann::json::object());
  int64_t tokens = number(strategy, "micro_batch_size") * number(strategy, "micro_batches") * number(strategy, "dp") *
                   number(model, "sequence");
  if (tokens <= 0) return std::nullopt;
  return tokens;
}

StepTimesResult computeStepTimes(const AnalysisInput& input) {
  StepTimesResult result;
  result.step_source = input.step_source;
  std::map<int64_t, StepTime> by_number;
  for (size_t r = 0; r < input.run.ranks.size() && r < input.steps.size(); ++r) {
    for (const auto& step : input.steps[r]) {
      StepTime& s = by_number[step.number];
      s.number = step.number;
      ++s.ranks;
      if (step.window.length() > s.time_ns) {
        s.time_ns = step.window.length();
        s.slowest_rank = input.run.ranks[r].rank;
      }
    }
  }
  std::vector<int64_t> times;
  for (const auto& [number, step] : by_number) {
    result.steps.push_back(step);
    times.push_back(step.time_ns);
  }
  if (!times.empty()) {
    result.median_ns = median(times);
    result.min_ns = *std::min_element(times.begin(), times.end());
    result.max_ns = maximum(times);
    if (times.size() >= 2) {
      double mean = 0;
      for (int64_t t : times) mean += static_cast<double>(t);
      mean /= static_cast<double>(times.size());
      double sum = 0;
      for (int64_t t : times) sum += (static_cast<double>(t) - mean) * (static_cast<double>(t) - mean);
      result.stddev_ns = std::sqrt(sum / static_cast<double>(times.size() - 1));
    }
  }
  for (const auto& rank : input.run.ranks) {
    if (!rank.header.simulated) continue;
    result.tokens_per_step = tokensPerStepOfSimulation(rank.header.simulation_inputs);
    if (result.tokens_per_step) result.tokens_source = "the simulation's inputs (global batch x sequence)";
    break;
  }
  return result;
}

namespace {

ResultValue resultValue(const StepTimesResult& result) {
  ResultValue steps = ResultValue::array();
  for (const auto& s : result.steps) {
    steps.push(ResultValue::object()
                   .set("step", ResultValue::integer(s.number))
                   .set("time_ns", ResultValue::integer(s.time_ns))
                   .set("slowest_rank", ResultValue::integer(s.slowest_rank))
                   .set("ranks", ResultValue::integer(static_cast<int64_t>(s.ranks))));
  }
  bool known = !result.steps.empty();
  auto time = [&](int64_t ns) { return known ? ResultValue::integer(ns) : ResultValue(); };
  return ResultValue::object()
      .set("step_source", ResultValue::text(result.step_source))
      .set("steps", std::move(steps))
      .set("median_ns", time(result.median_ns))
      .set("min_ns", time(result.min_ns))
      .set("max_ns", time(result.max_ns))
      .set("stddev_ns", result.steps.size() >= 2 ? ResultValue::number(result.stddev_ns) : ResultValue())
      .set("tokens_per_step", result.tokens_per_step ? ResultValue::integer(*result.tokens_per_step) : ResultValue())
      .set("tokens_per_s",
           known && result.tokens_per_step ? ResultValue::number(result.tokensPerSecond()) : ResultValue());
}

}  // namespace

void presentStepTimes(const StepTimesResult& result, size_t top, report::Report& report) {
  auto& section = report.addSection("step_times", "Step time and throughput");
  report.addResult("step_times", [&] { return resultValue(result); });
  if (result.steps.empty()) {
    section.notes.push_back(
        "No training steps found, so no step time (steps come from ProfilerStep#N ranges, "
        "--step-marker, capture windows or the repeating collectives).");
    return;
  }
  section.notes.push_back(
      fmt::format("Each step's time is the slowest rank's length of it (steps from {}).", result.step_source));
  report::Table summary{"summary",
                        "",
                        {{"steps", "steps"},
                         {"median", "median"},
                         {"min", "min"},
                         {"max", "max"},
                         {"stddev", "std dev"},
                         {"tokens_per_step", "tokens/step"},
                         {"tokens_per_s", "tokens/s"}},
                        {}};
  summary.rows.push_back(
      {Cell::of(static_cast<double>(result.steps.size()), Unit::kCount),
       Cell::of(static_cast<double>(result.median_ns), Unit::kNanoseconds),
       Cell::of(static_cast<double>(result.min_ns), Unit::kNanoseconds),
       Cell::of(static_cast<double>(result.max_ns), Unit::kNanoseconds),
       result.steps.size() >= 2 ? Cell::of(result.stddev_ns, Unit::kNanoseconds) : Cell::of("one step"),
       result.tokens_per_step ? Cell::of(static_cast<double>(*result.tokens_per_step), Unit::kCount)
                              : Cell::of("not recorded"),
       result.tokens_per_step
           ? Cell::shownAs(result.tokensPerSecond(), Unit::kNone, fmt::format("{:.0f}", result.tokensPerSecond()))
           : Cell::of("not recorded")});
  report::Table steps{"steps",
                      "Per step",
                      {{"step", "step"}, {"time", "time"}, {"slowest_rank", "slowest rank"}, {"ranks", "ranks"}},
                      {}};
  for (const auto& s : result.steps) {
    steps.rows.push_back({Cell::of(static_cast<double>(s.number), Unit::kNone),
                          Cell::of(static_cast<double>(s.time_ns), Unit::kNanoseconds),
                          Cell::of(s.slowest_rank, Unit::kNone), Cell::of(static_cast<double>(s.ranks), Unit::kCount)});
  }
  report::keepWorstRows(steps, top, "steps", "slowest first",
                        [](const std::vector<Cell>& row) { return row[1].number; });
  section.tables.push_back(std::move(summary));
  section.tables.push_back(std::move(steps));
  report.addMetric("step_time_ms", static_cast<double>(result.median_ns) / 1e6, Unit::kMilliseconds,
                   "median step time over the steps, slowest rank");
  if (result.tokens_per_step) {
    report.addMetric("tokens_per_s", result.tokensPerSecond(), Unit::kNone,
                     "tokens trained per second at the median step time (global batch x sequence per step)");
  }
}

void analyzeStepTimes(const AnalysisInput& input, report::Report& report) {
  presentStepTimes(computeStepTimes(input), input.options.top, report);
}

}  // namespace gpuxray::analysis
