// Theoretical occupancy of a kernel launch, by the rules of CUDA's occupancy calculator
// (cuda_occupancy.h): how many blocks of this shape fit on one SM at once, and what limits them.
#pragma once

#include <cstdint>

#include "analyzer/model/run_trace.h"
#include "proto/records.h"

namespace gpuxray::analysis {

enum class OccupancyLimit { kWarps, kRegisters, kSharedMemory, kBlocks, kUnknown };
const char* occupancyLimitName(OccupancyLimit limit);

struct Occupancy {
  uint32_t blocks_per_sm = 0;
  double occupancy = 0;  // active warps / max warps per SM, 0-1
  OccupancyLimit limit = OccupancyLimit::kUnknown;
  uint64_t waves = 0;
  // Share of the SMs' block slots the launch fills over its waves (1 = every wave full).
  double wave_efficiency = 0;
};

// Whether the trace recorded the launch's shape (grid and block); ROCm traces and some others do not.
bool launchRecorded(const model::LaunchConfig& launch);

// AMD GPUs (64-wide wavefronts, or named so): CUDA's occupancy rules do not apply, and their
// multiprocessors are compute units.
bool isAmdDevice(const format::DeviceProperties& device);
// "SMs" or "CUs", as the vendor calls them.
const char* multiprocessorsName(const format::DeviceProperties* device);

// Zero blocks_per_sm when the device lacks what the rules need, or the block cannot run at all.
Occupancy theoreticalOccupancy(const model::LaunchConfig& launch, const format::DeviceProperties& device);

}  // namespace gpuxray::analysis
