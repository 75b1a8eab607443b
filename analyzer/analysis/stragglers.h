// Stragglers (docs/analyses.md, "Stragglers"): ranks that make the others wait. In each matched
// collective every member but the last waits from its own entry to the last entry; that wait is the
// last rank's doing. Why it was late is read from the interval before its entry, since its previous
// collective on the same communicator. The result is data; presentStragglers turns it into the
// report's section, metric, finding and timeline marks.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis {

enum StragglerCause : size_t { kCauseCompute, kCauseHostGaps, kCauseCommunication, kCauseUnclear, kStragglerCauses };
// "compute", "host launch gaps", "communication", "unclear".
const char* stragglerCauseName(size_t cause);

struct StragglerRank {
  size_t rank_index = 0;  // in run.ranks
  int32_t rank = -1;
  std::string host;
  uint64_t joined = 0;      // matched collectives (in the steps) it was a member of
  uint64_t last = 0;        // ... and entered last, with others waiting
  int64_t wait_caused = 0;  // ns the other members waited for it, summed
  int64_t lateness = 0;     // summed: its entry minus the median member's, where it was last
  std::array<int64_t, kStragglerCauses> wait_by_cause{};
  // Summed over the collectives it was last in: what it spent beyond the median member before its
  // entry on compute, host-bound idle and communication.
  std::array<int64_t, kCauseUnclear> excess{};
  size_t cause() const;  // the cause with the most wait (meaningful when last > 0)
};

// One rank in one step: how long the step was, its compute, and the wait it caused there.
struct StragglerStepRank {
  int32_t rank = -1;
  int64_t step_ns = 0;
  int64_t compute_ns = 0;
  int64_t wait_caused_ns = 0;  // collectives whose last entry falls in this step of this rank
  uint64_t last = 0;
};

struct StragglerStep {
  int64_t step = -1;                     // the step's number; -1: the whole capture (no steps)
  std::vector<StragglerStepRank> ranks;  // ranks that have this step, in run order
  int32_t straggler = -1;                // the rank that caused the most wait in the step (-1: no wait)
  int32_t slowest = -1;                  // the rank with the longest step
};

// A late arrival as drawn on the timeline (waits of at least kShortestMarkedWaitNs).
struct LateArrival {
  int32_t rank = -1;
  int64_t at_ns = 0;  // run clock: its entry
  int64_t wait_ns = 0;
  size_t cause = kCauseUnclear;
};

struct StragglersResult {
  int64_t origin_ns = 0;  // the run's first GPU activity (the --window origin)
  uint64_t counted = 0;   // matched collectives with their last entry in the steps
  int64_t total_wait = 0;
  double steps = 1;                         // per-step figures divide by this
  bool per_step = false;                    // steps are known (else figures are over the whole capture)
  int64_t step_length_ns = 0;               // median step length of rank index 0
  std::vector<StragglerRank> ranks;         // those in a collective, most wait caused first
  std::vector<StragglerStep> step_figures;  // by step number
  std::vector<LateArrival> late_arrivals;   // in collective order
  // The worst straggler (ranks.front()) is named when it caused at least half of all the wait, at
  // least kNotableWaitPerStepNs per step.
  bool flagged = false;

  static constexpr int64_t kNotableWaitPerStepNs = 100'000;
  static constexpr int64_t kShortestMarkedWaitNs = 10'000;
};

// Without step_figures, result.step_figures stays empty (only the typed result shows them; a
// session without typed results has dropped the per-step compute they read).
StragglersResult computeStragglers(const AnalysisInput& input, bool step_figures = true);
void presentStragglers(const StragglersResult& result, size_t top, report::Report& report);

}  // namespace gpuxray::analysis
