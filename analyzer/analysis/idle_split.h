// Why a rank's GPU sat idle, by when the work that ended each idle gap was launched (the rule of
// docs/analyses.md, "Time breakdown"): host-bound when its launch began at or after the gap began,
// dependency when it was launched earlier, other without a launch record or a next activity.
#pragma once

#include <cstdint>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/analysis/intervals.h"
#include "analyzer/model/run_trace.h"

namespace gpuxray::analysis {

struct IdleSplit {
  int64_t host_bound = 0;
  int64_t dependency = 0;
  int64_t other = 0;
  int64_t total() const { return host_bound + dependency + other; }
  IdleSplit& operator+=(const IdleSplit& o) {
    host_bound += o.host_bound, dependency += o.dependency, other += o.other;
    return *this;
  }
};

// Adds `length` of idle time that began at `gap_start` to the split, the work that ended it launched at
// `next_launch` (kNoLaunch: not recorded). Asked at nearly every activity: inline.
inline void classifyGap(int64_t next_launch, int64_t gap_start, int64_t length, IdleSplit& split) {
  if (next_launch == kNoLaunch) {
    split.other += length;
  } else if (next_launch >= gap_start) {
    split.host_bound += length;
  } else {
    split.dependency += length;
  }
}

// The gaps of `busy` (the rank's merged GPU activity) inside `window`, each classified by the first
// activity that starts at or after the gap's end. `launch_start`: per activity of the rank, its launch
// (GpuTimeSets::launch_start). Allocates nothing.
IdleSplit idleWithin(const model::RankTrace& rank, const std::vector<int64_t>& launch_start, const IntervalSet& busy,
                     Interval window);

}  // namespace gpuxray::analysis
