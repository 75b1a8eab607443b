// Communication/computation overlap (docs/analyses.md, "Overlap"): how much of each rank's
// communication runs while compute runs too, and how much is exposed (the GPU does nothing but
// communicate), per step, per communicator and per operation. The result is data; presentOverlap
// turns it into the report's section, metrics, finding and timeline marks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/analysis/communicators.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis {

struct RankOverlap {
  int32_t rank = -1;
  int64_t communication_ns = 0;              // communication kernels' merged time in the windows
  int64_t exposed_ns = 0;                    // of which no compute ran beside it
  int64_t time_ns = 0;                       // the windows' length
  std::vector<int64_t> exposed_per_step_ns;  // per window, in order
  // Its median and largest, which the table shows, kept when a report without typed results frees it.
  int64_t exposed_step_median_ns = 0, exposed_step_worst_ns = 0;
  std::vector<int64_t> steps;                // the windows' step numbers (-1: the whole span)
  std::vector<Interval> exposed_marks;       // exposed stretches of at least kShortestMarkNs
  double overlapPct() const;
  double exposedPct() const;
};

// NCCL operations' own GPU times, summed over ranks.
struct OperationExposure {
  uint64_t comm_hash = 0;
  std::string operation;  // empty for a communicator's total
  uint64_t bytes = 0;     // 0: not recorded
  uint64_t count = 0;
  int64_t time_ns = 0;
  int64_t exposed_ns = 0;
};

// Communication kernels outside NCCL (DeepEP, custom all-reduce, --comm-kernel ...), all ranks.
struct OtherCommunication {
  std::string library;
  std::string operation;  // "not recorded" when the kernel name does not say
  uint64_t kernels = 0;
  int64_t time_ns = 0;
};

struct OverlapResult {
  std::vector<RankOverlap> ranks;  // ranks with communication in their windows, in run order
  std::vector<OtherCommunication> other_communication;
  std::map<uint64_t, CommunicatorInfo> communicators;
  std::vector<OperationExposure> per_communicator;  // by communicator hash
  std::vector<OperationExposure> per_operation;     // most exposed first
  int64_t worst = -1;                               // index into ranks: highest exposed % of step (-1: none)
  double lowest_overlap_pct = 101;

  static constexpr int64_t kShortestMarkNs = 10'000;
};

// Exposed communication: the rank's communication with no compute beside it; within `window`, from
// the window's part of each set alone.
IntervalSet exposedCommunication(const GpuTimeSets& sets);
IntervalSet exposedCommunication(const GpuTimeSets& sets, Interval window);

OverlapResult computeOverlap(const AnalysisInput& input);
void presentOverlap(const OverlapResult& result, size_t top, report::Report& report);

}  // namespace gpuxray::analysis
