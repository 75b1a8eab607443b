// What the per-rank phase keeps of a rank once its events are gone (docs/analyses.md, "Two
// phases"): the partial results of the analyses that are computed rank by rank (time breakdown,
// overlap, kernels, memory, HTA's figures) and what the cross-rank analyses ask of the rank's GPU
// time at the times of its NCCL operations (compute, communication and host-bound idle between
// them; for pipeline stages, the compute intervals). Together with the skeleton (the rank trace
// without its activities, host calls, memory changes and metric samples) it is all the analyses
// read, so a run's ranks can be analyzed one at a time and only the digests kept.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/analysis/activity_totals.h"
#include "analyzer/analysis/analysis_input.h"
#include "analyzer/analysis/critical_path.h"
#include "analyzer/analysis/hta_compat.h"
#include "analyzer/analysis/intervals.h"
#include "analyzer/analysis/kernel_metrics.h"
#include "analyzer/analysis/memory_categories.h"
#include "analyzer/analysis/ops.h"
#include "analyzer/analysis/overlap.h"
#include "analyzer/analysis/pipeline_bubbles.h"
#include "analyzer/analysis/step_overview.h"
#include "analyzer/analysis/time_breakdown.h"
#include "analyzer/model/packed_column.h"

namespace gpuxray::analysis {

// The overlap of one rank's communication with its compute over its windows (see overlap.cc).
struct OverlapPart {
  std::optional<RankOverlap> rank;                      // unset: no communication in its windows
  std::vector<OtherCommunication> other_communication;  // communication kernels outside NCCL, by family
};

// Compute kernels over the windows per (name id, launch configuration id, device), in the order
// the kernels analysis merges them.
struct KernelsPart {
  struct Launch {
    uint32_t name_id = 0, config_id = 0, device = 0;
    uint64_t count = 0;
    int64_t time = 0;
  };
  std::vector<Launch> launches;
};

// One rank's device memory (see memory.cc): its devices' peaks and curves, and its phases' peaks.
struct MemoryPart {
  std::optional<int64_t> first_change_ns;
  struct Device {
    uint32_t device = 0;
    int64_t peak_bytes = 0, peak_at_ns = 0, end_bytes = 0;
    uint64_t allocations = 0;
    std::string peak_phase;
    std::vector<std::pair<int64_t, int64_t>> curve;  // (time, bytes), thinned
  };
  std::vector<Device> devices;
  std::vector<std::pair<std::string, int64_t>> phase_peaks;  // by phase name
};

// Device memory by category of one rank (see memory_categories.cc).
struct MemoryCategoriesPart {
  bool recorded = false, addresses_recorded = false, phases_recorded = false;
  std::vector<DeviceMemoryCategories> devices;
};

// HTA's figures of one rank (--compat hta), for the step filter it was computed with.
struct HtaPart {
  bool filter_applied = false;
  std::optional<hta::HtaRank> figures;  // unset: no kernel kept
};

// The rank's GPU time measured up to one instant, so that what lies between two of its NCCL
// operations' times (or its first activity) can be told without its events.
struct TimePoint {
  int64_t time = 0;
  int64_t compute = 0;        // compute time before `time`
  int64_t communication = 0;  // communication kernel time before `time`
  int64_t host_bound = 0;     // host-bound idle of the gaps of GPU activity that end by `time`
  // For a point in a gap: when the first GPU work starting at or after `time` was launched
  // (kNoLaunch: no launch record, or no work after it). Outside gaps nothing reads it: kNoLaunch.
  int64_t launch_after = kNoLaunch;
  // The gap of GPU activity `time` lies in, if any: where it starts and ends (INT64_MIN, INT64_MAX
  // before the first and after the last activity), and when the work after it was launched.
  bool in_gap = false;
  int64_t gap_start = 0, gap_end = 0, gap_launch = 0;
  static constexpr int64_t kNoLaunch = analysis::kNoLaunch;
};

using model::PackedColumn;
using model::packedField;

// A rank's time points, by time, kept column by column (two a NCCL operation, 10^4-10^5 a rank):
// a gap is held once however many points lie in it, a point in a gap takes its gap's launch as
// its own unless listed otherwise, and the columns are packed, so a point takes a few bytes, not
// a TimePoint's 72.
struct TimePoints {
  struct Gap {
    int64_t start = 0, end = 0, launch = 0;
  };
  // Gaps column by column, packed: the start, and the end and launch as their differences from it
  // (a gap is short and its work launched shortly before it starts, so these take a byte or two
  // where the times take four); an open end or "none" (INT64_MIN, INT64_MAX) as itself, and a gap
  // whose start is open (the one before the first activity) whole, aside.
  class Gaps {
   public:
    Gaps() = default;
    explicit Gaps(const std::vector<Gap>& gaps);
    size_t size() const { return start_.size(); }
    Gap operator[](size_t i) const;
    std::vector<Gap> values() const;
    // Adds `offset` to every time but the open ends and "none".
    void shift(int64_t offset);
    size_t bytes() const {
      return start_.bytes() + end_.bytes() + launch_.bytes() + open_start_.capacity() * sizeof(open_start_[0]);
    }

   private:
    PackedColumn start_, end_, launch_;
    // Whether end_ and launch_ hold differences: not if one came out as INT64_MIN or INT64_MAX.
    bool differences_ = true;
    std::vector<std::pair<uint32_t, Gap>> open_start_;  // by index
  };
  static constexpr uint32_t kNoGap = UINT32_MAX;
  // Per point: its index into gaps, or kNoGap, packed (kNoGap held as INT64_MAX).
  class GapIndexes {
   public:
    GapIndexes() = default;
    explicit GapIndexes(const std::vector<uint32_t>& indexes);
    size_t size() const { return packed_.size(); }
    uint32_t operator[](size_t i) const;
    std::vector<uint32_t> values() const;
    size_t bytes() const { return packed_.bytes(); }

   private:
    PackedColumn packed_;
  };
  // A point in a gap whose launch_after is not its gap's launch: GPU work of no length (which busy
  // time leaves out) starts in the gap after the point.
  struct OtherLaunch {
    uint32_t point = 0;
    int64_t launch = 0;
  };
  PackedColumn time, compute, communication, host_bound;
  GapIndexes gap;
  Gaps gaps;
  std::vector<OtherLaunch> other_launches;  // by point

  TimePoints() = default;
  // The columns of `points`, given by time.
  explicit TimePoints(const std::vector<TimePoint>& points);
  size_t size() const { return time.size(); }
  TimePoint operator[](size_t i) const;
  size_t bytes() const;
};

struct RankDigest {
  // The windows the per-step parts were computed over, and --compat hta's step filter: a digest
  // is valid for a session whose windows and filter are these.
  std::vector<StepWindow> windows;
  Interval gpu_span;  // first start to last end of GPU work; empty without any
  std::optional<int64_t> first_activity_ns;
  uint32_t first_activity_device = 0;
  RankBreakdown breakdown;
  OverlapPart overlap;
  KernelsPart kernels;
  KernelMetricsPart kernel_metrics;
  MemoryPart memory;
  MemoryCategoriesPart memory_categories;
  RankOps ops;
  RankActivityTotals activity_totals;
  // The step overview's lanes of the windows it may show: without keep_lanes, every window; else
  // those whose step number keep_lanes accepts (the session keeps only the step chosen on the
  // first rank, one window: a few kilobytes).
  std::vector<RankStepLanes> step_lanes;
  std::optional<HtaPart> hta;
  TimePoints points;  // the rank's first activity, its operations' GPU starts and ends
  // Ranks with point-to-point operations (pipeline stages): the compute intervals, and per interval
  // start the launch time of the compute kernel that starts it (kNoLaunch: none recorded).
  IntervalSet compute;
  std::vector<int64_t> compute_launch;
  // And their micro-batches' passes from the ranges that launched them (rangedComputeBlocks).
  std::vector<PipelineComputeBlock> pipeline_blocks;
  // --critical-path: its steps' graphs, reduced to what the joins across ranks need.
  std::optional<RankPathPart> critical_path;

  // Compute, communication and host-bound idle in [from, to), both times among `points`.
  int64_t computeWithin(int64_t from, int64_t to) const;
  int64_t communicationWithin(int64_t from, int64_t to) const;
  int64_t hostBoundWithin(int64_t from, int64_t to) const;
  // The launch time of the compute kernel starting at `t` (a compute interval's start), or kNoLaunch.
  int64_t computeLaunchAt(int64_t t) const;
  // Moves every time by `offset_ns` (the rank's clock offset, found after the digest was made).
  void shift(int64_t offset_ns);
  // Frees `windows` (24 bytes a step, held by every rank until the run's steps are known), keeping
  // a 64-bit fingerprint of them that madeOver compares with.
  void forgetWindows();
  // Whether the per-step parts were computed over these windows (the run's of this rank, on the
  // run's clock): `windows` as shifted, or once forgotten their fingerprint against these moved
  // back by the shifts since.
  bool madeOver(const std::vector<StepWindow>& run_windows) const;
  // Frees what only the typed results show (the memory curves, the time breakdown's per-step
  // figures, overlap's per-step figures), for a report without them (text, Markdown): 0.12 MB a
  // rank at 500 steps.
  void dropTypedResultsOnly();
  // Frees what only a timeline shows (overlap's exposed stretches, which become the report's timeline
  // marks): a session that does not keep events writes no timeline (16 kB a rank at 500 steps, and
  // ~70 kB a rank of marks in the report).
  void dropTimelineOnly();
  // Bytes held, roughly (for the figures).
  size_t bytes() const;

 private:
  TimePoint at(int64_t t) const;
  std::optional<uint64_t> windows_fingerprint_;  // set once forgetWindows() freed them
  int64_t shifted_ns_ = 0;                        // what shift() moved the times by in all
};

// The digest of rank index `r` of `input` (its events, steps and GPU interval sets). --compat hta's
// step filter is the one of input.run unless given; the step overview's lanes are kept of the
// windows whose step number keep_lanes accepts (of all without it).
RankDigest digestRank(const AnalysisInput& input, size_t r, std::optional<bool> hta_filter_applied = std::nullopt,
                      const std::function<bool(int64_t)>& keep_lanes = {});

// Leaves a rank its skeleton: everything but its activities (the first is kept: when the rank's
// GPU work began and on which device), host calls, memory changes and metric samples.
void reduceToSkeleton(model::RankTrace& rank);

}  // namespace gpuxray::analysis
