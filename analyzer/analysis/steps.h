// Finding training steps: NVTX ranges named ProfilerStep#N (what torch.profiler emits) or matching
// --step-marker patterns; else the repeating pattern of collectives (the collective that moves the
// most bytes per occurrence and recurs on every rank ends each step).
#pragma once

#include "analyzer/analysis/analysis_input.h"

namespace gpuxray::analysis {

// Fills input.steps and input.step_source. Throws UsageError for an invalid --step-marker pattern.
void findSteps(AnalysisInput& input);

}  // namespace gpuxray::analysis
