// Putting every rank on one clock (docs/analyses.md, "Clock alignment"). Files whose time bases
// differ are first mapped to CLOCK_REALTIME by their clock anchors; then each host's clock is placed
// against a reference host by the end times of collectives (NCCL kernels of one collective end
// within microseconds of each other on all members), with linear drift where the data shows it,
// and finally shifted by the least amount that makes every receive end after its send started and
// every collective end after its last member entered it. Ranks of one host share its clock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "analyzer/analysis/collective_matching.h"
#include "analyzer/model/run_trace.h"

namespace gpuxray::analysis {

struct HostClock {
  std::string host;
  std::vector<int32_t> ranks;
  // Added to the host's times at ClockAlignment::reference_ns, condition_shift_ns included; from then
  // on drift_ns_per_s more per second.
  int64_t offset_ns = 0;
  double drift_ns_per_s = 0;
  int64_t condition_shift_ns = 0;
  // Matched collectives this host shares with other hosts.
  uint64_t matched = 0;
  // |end on this host - median end on the other hosts| over those collectives, after alignment.
  int64_t residual_median_ns = 0;
  int64_t residual_max_ns = 0;
  // How the offset was found: "reference", "collectives" or "anchors".
  std::string source = "reference";
};

// How one rank's times were moved: t + anchor_shift, then + offset (+ drift from reference on).
struct RankClock {
  int64_t anchor_shift_ns = 0;
  double offset_ns = 0;
  double drift = 0;  // ns per ns
  int64_t reference_ns = 0;
  // Whether every time moved by the same amount (then clock_offset_ns).
  bool pureOffset() const { return drift == 0; }
};

struct ClockAlignment {
  bool anchors_applied = false;  // the files' time bases differed
  int64_t reference_ns = 0;      // where offsets are given (middle of the matched collectives)
  std::vector<HostClock> hosts;  // the reference host (that of the lowest rank) first
  uint64_t cross_host_collectives = 0;
  // Clock conditions broken once the offsets were applied, before the extra shifts.
  uint64_t collective_violations = 0;
  uint64_t p2p_pairs = 0;
  uint64_t p2p_violations = 0;
  std::vector<std::string> warnings;
  // Per rank index: how its times were moved (to move a rank read again the same way).
  std::vector<RankClock> rank_clocks;
  // The operations matched across ranks, which alignment only moved in time: the analyses reuse them.
  std::shared_ptr<const CollectiveIndex> matches;
};

// Shifts every time of every rank onto the reference host's clock and records each rank's
// clock_offset_ns. Never fails: what cannot be estimated is left as recorded, with a warning.
ClockAlignment alignClocks(model::RunTrace& run);

// Moves every time of `rank` as alignment moved it (`clock` is its entry of rank_clocks), and sets
// its clock_offset_ns.
void applyClock(const RankClock& clock, model::RankTrace& rank);

}  // namespace gpuxray::analysis
