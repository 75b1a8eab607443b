// Simulator inputs from files, JSON or YAML (by extension: .yaml and .yml are YAML). A model, cluster
// or strategy file holds that part's fields; a config file holds the sections model, cluster,
// strategy and perturbations (each a preset name or an object) and steps, seed, run_id. Any object
// may name a "preset" and override some of its fields. Unknown fields and wrong types are errors
// that name the file and the field.
#pragma once

#include <string>

#include "analyzer/simulate/inputs.h"

namespace gpuxray::simulate {

// `name_or_path`: a preset name or a file. `source` receives "preset NAME" or the path.
ModelSpec loadModel(const std::string& name_or_path, std::string& source);
ClusterSpec loadCluster(const std::string& name_or_path, std::string& source);
StrategySpec loadStrategy(const std::string& path);
SimulationInputs loadConfig(const std::string& path);

// "node-01:3=0.5" (host, NIC index, bandwidth factor) and "5=1.3" (rank, time factor).
SlowLink parseSlowLink(const std::string& text);
Straggler parseStraggler(const std::string& text);

}  // namespace gpuxray::simulate
