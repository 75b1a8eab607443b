// The kernel-fusion what-if: a strategy's HBM traffic per kernel group and its step time with one
// fusion level against another (docs/simulation.md, "Kernel fusion").
#pragma once

#include <string>
#include <vector>

#include "analyzer/report/report.h"
#include "analyzer/simulate/inputs.h"

namespace gpuxray::simulate {

struct FusionComparison {
  Fusion before = Fusion::kNone, after = Fusion::kDefault;
  struct Group {
    std::string name;
    double before_bytes = 0, after_bytes = 0;  // per step and GPU, the stage with most layers
  };
  std::vector<Group> groups;
  double before_step_seconds = 0, after_step_seconds = 0;
};

// Simulates `inputs` (no perturbations) at both fusion levels.
FusionComparison compareFusion(const SimulationInputs& inputs, Fusion before, Fusion after);
report::Table fusionTable(const FusionComparison& comparison);

}  // namespace gpuxray::simulate
