#include "analyzer/simulate/calibration.h"

#include <fmt/core.h>

#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace gpuxray::simulate {

// Generated at build time from efficiency_data.json (analyzer/CMakeLists.txt).
extern const char* const kEfficiencyData;

namespace {

const std::map<std::string, Calibration>& calibrations() {
  static const std::map<std::string, Calibration> table = [] {
    std::map<std::string, Calibration> t;
    const auto data = nlohmann::json::parse(kEfficiencyData);
    for (const auto& [generation, set] : data.at("generations").items()) {
      Calibration c;
      c.generation = generation;
      const auto& e = set.at("efficiency");
      c.efficiency.gemm = e.at("gemm").get<double>();
      c.efficiency.gemm_fp8 = e.at("gemm_fp8").get<double>();
      c.efficiency.attention = e.at("attention").get<double>();
      c.efficiency.elementwise = e.at("elementwise").get<double>();
      c.efficiency.nvlink = e.at("nvlink").get<double>();
      c.efficiency.network = e.at("network").get<double>();
      c.uncertainty_pct = set.at("uncertainty_pct").get<double>();
      c.basis = set.at("basis").get<std::string>();
      t[generation] = c;
    }
    return t;
  }();
  return table;
}

}  // namespace

std::optional<Calibration> calibrationFor(const std::string& generation) {
  auto it = calibrations().find(generation);
  return it == calibrations().end() ? std::nullopt : std::optional(it->second);
}

std::vector<std::string> calibratedGenerations() {
  std::vector<std::string> names;
  for (const auto& [name, c] : calibrations()) names.push_back(name);
  return names;
}

}  // namespace gpuxray::simulate
