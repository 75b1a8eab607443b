// What every analysis reads: the run on one clock, its steps, and the options of the command.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/analysis/intervals.h"
#include "analyzer/model/run_trace.h"

namespace gpuxray::analysis {

struct AnalysisOptions {
  // Regular expressions for NVTX range names that mark a training step, besides ProfilerStep#N.
  std::vector<std::string> step_markers;
  // Restrict per-step figures to these step numbers (empty: all).
  std::vector<int64_t> steps;
  // How many rows the "top N" tables show.
  size_t top = 10;
  // --compat hta: Holistic Trace Analysis's breakdown and overlap replace gpuxray's own.
  bool hta_compat = false;
  // With hta_compat: keep the last ProfilerStep, which HTA drops by default.
  bool include_last_step = false;
};

// One training step on one rank, on the run clock.
struct StepWindow {
  int64_t number = 0;  // ProfilerStep#N's N, or the ordinal when the marker has none
  Interval window;
};

// A rank's GPU time as interval sets, all streams and devices merged.
struct GpuTimeSets {
  IntervalSet busy;           // any activity
  IntervalSet compute;        // compute kernels
  IntervalSet communication;  // NCCL kernels
  IntervalSet memory;         // copies and memsets
};

GpuTimeSets gpuTimeSetsOf(const model::RankTrace& rank);

struct AnalysisInput {
  const model::RunTrace& run;
  AnalysisOptions options;
  // Per rank, in run.ranks' order: its steps. All empty when none were found.
  std::vector<std::vector<StepWindow>> steps;
  std::string step_source = "none";
  // Per rank, in run.ranks' order.
  std::vector<GpuTimeSets> time_sets;

  bool hasSteps() const;
  // The windows per-step figures of rank index `r` are taken over: its steps, or its whole span.
  std::vector<StepWindow> windowsOf(size_t r) const;
  // First start to last end of a rank's GPU activities.
  static Interval gpuSpan(const model::RankTrace& rank);
};

}  // namespace gpuxray::analysis
