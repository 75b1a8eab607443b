// Kernels that waste the GPU (docs/analyses.md, "Kernels"): every compute kernel name over the
// steps of all ranks with the launch configuration that took most of its time, its theoretical
// occupancy and waves. The result is data; presentKernels turns it into the report's section,
// metrics and findings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/analysis/occupancy.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis {

struct KernelResult {
  std::string name;  // in full (the table shortens it)
  uint64_t count = 0;
  int64_t time_ns = 0;
  // The launch configuration that took most of this kernel's time, and the device it ran on
  // (nullptr when the trace names none; points into the run).
  model::LaunchConfig launch;
  const format::DeviceProperties* device = nullptr;
  Occupancy occupancy;  // blocks_per_sm == 0: not estimated
  OccupancyLiftResult lift;  // what would lift the limiter (estimated launches only)
  // Measured by --kernel-metrics (median over the measured launches); empty: not measured.
  std::optional<double> achieved_occupancy_pct;

  bool launchKnown() const { return launchRecorded(launch); }
  // Registers and shared memory are CUPTI's; a ROCm trace has the grid and block at most.
  bool resourcesKnown() const { return launchKnown() && launch.registers_per_thread > 0; }
};

struct KernelsResult {
  int64_t compute_time_ns = 0;              // all compute kernels over the steps
  int64_t launch_not_recorded_time_ns = 0;  // in kernels whose launch configuration is not recorded
  int64_t low_occupancy_time_ns = 0;        // < 25 % theoretical occupancy
  int64_t spilling_time_ns = 0;             // spilling registers to local memory
  int64_t small_grid_time_ns = 0;           // fewer blocks than the GPU has multiprocessors
  bool amd = false;                         // an AMD GPU: occupancy is not estimated
  size_t step_windows = 0;                  // windows summed over ranks (a finding's cost is per window)
  std::vector<KernelResult> kernels;        // by time, highest first
};

KernelsResult computeKernels(const AnalysisInput& input);
// The `kernels` section (top N), the *_kernel_pct metrics, up to three findings and the typed result.
void presentKernels(const KernelsResult& result, size_t top, report::Report& report);

// A grid with fewer blocks than the GPU has multiprocessors, when both are known.
bool smallGrid(const model::LaunchConfig& shape, const format::DeviceProperties* device);

}  // namespace gpuxray::analysis
