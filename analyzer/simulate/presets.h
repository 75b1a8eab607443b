// Named models, GPUs, clusters and whole runs, so that a simulation needs no input file. Hardware
// figures are the vendors' (dense bf16 peak, HBM, NVLink per direction, NIC line rate).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analyzer/simulate/inputs.h"

namespace gpuxray::simulate {

std::optional<ModelSpec> modelPreset(const std::string& name);
std::optional<GpuSpec> gpuPreset(const std::string& name);
// A node type; `nodes` is 0 (the strategy or the command line decides).
std::optional<ClusterSpec> clusterPreset(const std::string& name);

struct RunPreset {
  std::string name;
  std::string description;
  SimulationInputs inputs;
};
std::optional<RunPreset> runPreset(const std::string& name);

std::vector<std::string> modelPresetNames();
std::vector<std::string> gpuPresetNames();
std::vector<std::string> clusterPresetNames();
std::vector<std::string> runPresetNames();

// "a, b or c"
std::string joinNames(const std::vector<std::string>& names);

}  // namespace gpuxray::simulate
