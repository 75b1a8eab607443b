// Step time and throughput (docs/analyses.md, "Step times"): for each training step, how long the
// slowest rank took over it; their median is `step_time_ms`, and with the batch known (a simulated
// run's inputs name it) the tokens per second. The result is data; presentStepTimes turns it into the
// report's section, metrics and typed result, which `gpuxray diff` compares across runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis {

struct StepTime {
  int64_t number = 0;   // ProfilerStep#N's N (or the ordinal)
  int64_t time_ns = 0;  // the slowest rank's length of this step
  int32_t slowest_rank = -1;
  size_t ranks = 0;  // ranks that have this step
};

struct StepTimesResult {
  std::string step_source;      // as the report's run summary says
  std::vector<StepTime> steps;  // by step number; empty when no steps are known
  int64_t median_ns = 0;        // of steps[].time_ns
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  double stddev_ns = 0;  // sample standard deviation; 0 with one step
  // Tokens one step trains on (global batch x sequence), when the trace tells the batch.
  std::optional<int64_t> tokens_per_step;
  std::string tokens_source;  // where tokens_per_step comes from
  double tokensPerSecond() const {
    return tokens_per_step && median_ns > 0
               ? static_cast<double>(*tokens_per_step) * 1e9 / static_cast<double>(median_ns)
               : 0;
  }
};

StepTimesResult computeStepTimes(const AnalysisInput& input);
// The `step_times` section, the step_time_ms and tokens_per_s metrics and the typed result. Past 2 x
// `top` steps the section's table lists the `top` slowest.
void presentStepTimes(const StepTimesResult& result, size_t top, report::Report& report);
void analyzeStepTimes(const AnalysisInput& input, report::Report& report);

// The global batch in tokens a simulated run's inputs (the header's simulation_inputs JSON) describe.
std::optional<int64_t> tokensPerStepOfSimulation(const std::string& simulation_inputs);

}  // namespace gpuxray::analysis
