// The efficiency sets per GPU generation (A100, H100, H200): data, read from
// analyzer/simulate/efficiency_data.json (embedded into the binary when it is built), each fitted on
// published training runs and checked on others held out (docs/simulation.md, "Validation").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analyzer/simulate/inputs.h"

namespace gpuxray::simulate {

struct Calibration {
  std::string generation;  // "a100", "h100", "h200"
  Efficiency efficiency;
  // The held-out mean |error| of step-time predictions with this set, in percent; for a generation
  // without published runs of its own, the uncertainty that `basis` argues for.
  double uncertainty_pct = 0;
  std::string basis;  // how the set was obtained, in one sentence
};

// The calibration of a generation, or nullopt when there is none.
std::optional<Calibration> calibrationFor(const std::string& generation);
std::vector<std::string> calibratedGenerations();

}  // namespace gpuxray::simulate
