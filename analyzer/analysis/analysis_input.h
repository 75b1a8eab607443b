// What every analysis reads: the run on one clock, its steps, and the options of the command.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "analyzer/analysis/clock_alignment.h"
#include "analyzer/analysis/collective_matching.h"
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
  // --critical-path: the critical path and its attribution (critical_path.h). Off by default: it costs
  // more CPU than the rest of analyze (docs/analyses.md, "Critical path").
  bool critical_path = false;
};

// One training step on one rank, on the run clock.
struct StepWindow {
  int64_t number = 0;  // ProfilerStep#N's N, or the ordinal when the marker has none
  Interval window;
};

// No launch call recorded (the activity has no correlation id, or no call has it).
inline constexpr int64_t kNoLaunch = INT64_MIN;

// What the per-rank analyses share of a rank's activities, made in one walk over them: its GPU time as
// interval sets, all streams and devices merged, and when each activity was launched.
struct GpuTimeSets {
  IntervalSet busy;           // any activity
  IntervalSet compute;        // compute kernels
  IntervalSet communication;  // NCCL kernels
  IntervalSet memory;         // copies and memsets
  Interval span;              // first start to last end of its GPU work (AnalysisInput::gpuSpan)
  // Per activity (rank.activities' order): its launch call's start, or kNoLaunch. Read here, the call's
  // record (a cache miss at each activity) is read once rather than by each analysis that asks.
  std::vector<int64_t> launch_start;
};

GpuTimeSets gpuTimeSetsOf(const model::RankTrace& rank);

struct RankDigest;

struct AnalysisInput {
  const model::RunTrace& run;
  AnalysisOptions options;
  // Per rank, in run.ranks' order: its steps. All empty when none were found.
  std::vector<std::vector<StepWindow>> steps;
  std::string step_source = "none";
  // Per rank, in run.ranks' order.
  std::vector<GpuTimeSets> time_sets;
  // What putting the ranks on one clock did; nullptr when it was not done (--no-align).
  const ClockAlignment* clock = nullptr;
  // Per rank, in run.ranks' order: what the per-rank phase kept (rank_digest.h). The analyses read
  // the ranks' events only through these, so the ranks may be skeletons (no activities, host calls,
  // memory changes or samples). Unset while the digests are being made.
  const std::vector<RankDigest>* digests = nullptr;
  const RankDigest& digest(size_t r) const;
  // Where the ranks are skeletons: rank index `r`'s events read again, as the session keeps them (on the
  // run's clock, --window applied), for the few a cross-rank result needs whole (the critical path's
  // chains on the path). Unset: the ranks hold their events. Called from several workers at once.
  std::function<model::RankTrace(size_t r)> read_events = nullptr;

  // NCCL operations matched across ranks, built on first use (on the run's clock as it is then).
  const CollectiveIndex& collectives() const;
  mutable std::shared_ptr<const CollectiveIndex> collective_index = nullptr;

  bool hasSteps() const;
  // The windows per-step figures of rank index `r` are taken over: its steps, or its whole GPU span.
  std::vector<StepWindow> windowsOf(size_t r) const;
  // First start to last end of a rank's GPU activities.
  static Interval gpuSpan(const model::RankTrace& rank);
};

// Per rank, the windows its per-step figures cover (AnalysisInput::windowsOf), to ask whether an
// event falls in one.
class RankWindows {
 public:
  explicit RankWindows(const AnalysisInput& input);
  bool contains(size_t r, int64_t t) const;
  // Steps per rank when steps are known (the most any rank has), else 1.
  size_t steps() const { return steps_; }
  // The median length of rank index 0's windows.
  int64_t medianLength() const { return median_length_; }

 private:
  // Per rank, its windows by start: its steps where they are in that order (as findSteps leaves
  // them: not copied, 24 bytes a step and rank), else windows_held_'s copy.
  std::vector<std::span<const StepWindow>> windows_;
  std::vector<std::vector<StepWindow>> windows_held_;
  size_t steps_ = 1;
  int64_t median_length_ = 0;
};

}  // namespace gpuxray::analysis
